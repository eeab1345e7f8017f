//===- Kernels.cpp - The CPU kernel table ---------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/KernelUtil.h"

namespace shardc::rt::cpu {

const std::vector<std::pair<llvm::StringRef, KernelFn>> &kernelTable() {
  static const std::vector<std::pair<llvm::StringRef, KernelFn>> table = {
      {"Add", addKernel},
      {"Sub", subKernel},
      {"Mul", mulKernel},
      {"Div", divKernel},
      {"Pow", powKernel},
      {"Where", whereKernel},
      {"Sqrt", sqrtKernel},
      {"Exp", expKernel},
      {"Log", logKernel},
      {"Erf", erfKernel},
      {"Tanh", tanhKernel},
      {"Sigmoid", sigmoidKernel},
      {"Softplus", softplusKernel},
      {"Equal", equalKernel},
      {"Greater", greaterKernel},
      {"Less", lessKernel},
      {"GreaterOrEqual", greaterOrEqualKernel},
      {"LessOrEqual", lessOrEqualKernel},
      {"And", andKernel},
      {"Or", orKernel},
      {"Xor", xorKernel},
      {"Not", notKernel},
      {"Max", maxKernel},
      {"Min", minKernel},
      {"Sign", signKernel},
      {"Floor", floorKernel},
      {"Ceil", ceilKernel},
      {"Sin", sinKernel},
      {"Cos", cosKernel},
      {"Tan", tanKernel},
      {"Asin", asinKernel},
      {"Acos", acosKernel},
      {"Atan", atanKernel},
      {"Sinh", sinhKernel},
      {"Cosh", coshKernel},
      {"Asinh", asinhKernel},
      {"Acosh", acoshKernel},
      {"Atanh", atanhKernel},
      {"Neg", negKernel},
      {"Abs", absKernel},
      {"Relu", reluKernel},
      {"Identity", identityKernel},
      {"FusedElementwise", fusedElementwiseKernel},
      {"Reshape", reshapeKernel},
      {"Cast", castKernel},
      {"Dropout", dropoutKernel},
      {"Softmax", softmaxKernel},
      {"LogSoftmax", logSoftmaxKernel},
      {"Gemm", gemmKernel},
      {"MatMul", matMulKernel},
      {"PermutedMatMul", permutedMatMulKernel},
      {"LayerNormalization", layerNormalizationKernel},
      {"BatchNormalization", batchNormalizationKernel},
      {"BatchNormStats", batchNormStatsKernel},
      {"Conv", convKernel},
      {"MaxPool", maxPoolKernel},
      {"AveragePool", averagePoolKernel},
      {"GlobalAveragePool", globalAveragePoolKernel},
      {"Transpose", transposeKernel},
      {"Trilu", triluKernel},
      {"Range", rangeKernel},
      {"Gather", gatherKernel},
      {"GatherElements", gatherElementsKernel},
      {"ScatterElements", scatterElementsKernel},
      {"Concat", concatKernel},
      {"Split", splitKernel},
      {"Slice", sliceKernel},
      {"ShardSlice", shardSliceKernel},
      {"Expand", expandKernel},
      {"ReduceMean", reduceMeanKernel},
      {"ReduceSum", reduceSumKernel},
      {"ReduceMax", reduceMaxKernel},
      {"ReduceMin", reduceMinKernel},
      {"ArgMax", argMaxKernel},
      {"TopKIndices", topKIndicesKernel},
      {"SoftmaxCrossEntropyLoss", softmaxCrossEntropyLossKernel},
      {"NegativeLogLikelihoodLoss", negativeLogLikelihoodLossKernel},
      // Training ops.
      {"ReluGrad", reluGradKernel},
      {"SigmoidGrad", sigmoidGradKernel},
      {"TanhGrad", tanhGradKernel},
      {"SoftmaxGrad", softmaxGradKernel},
      {"LogSoftmaxGrad", logSoftmaxGradKernel},
      {"ConvGradInput", convGradInputKernel},
      {"ConvGradWeight", convGradWeightKernel},
      {"MaxPoolGrad", maxPoolGradKernel},
      {"AveragePoolGrad", averagePoolGradKernel},
      {"LayerNormGrad", layerNormGradKernel},
      {"BatchNormGrad", batchNormGradKernel},
      {"BatchNormGradStats", batchNormGradStatsKernel},
      {"SoftmaxCrossEntropyLossGrad", softmaxCrossEntropyLossGradKernel},
      {"SoftmaxCrossEntropyLossWithGrad",
       softmaxCrossEntropyLossWithGradKernel},
      {"NegativeLogLikelihoodLossGrad", negativeLogLikelihoodLossGradKernel},
      {"GatherGrad", gatherGradKernel},
      {"GatherElementsGrad", gatherElementsGradKernel},
      {"SliceGrad", sliceGradKernel},
      {"SGDUpdate", sgdUpdateKernel},
      {"AdamUpdate", adamUpdateKernel},
      {"Increment", incrementKernel},
      {"PartialNorm", partialNormKernel},
      {"ClipCoefficient", clipCoefficientKernel},
      {"LossScale", lossScaleKernel},
  };
  return table;
}

llvm::Error runKernel(const KernelContext &ctx) {
  static const llvm::StringMap<KernelFn> byType = [] {
    llvm::StringMap<KernelFn> m;
    for (const auto &[type, fn] : kernelTable())
      m[type] = fn;
    return m;
  }();
  auto it = byType.find(ctx.opType);
  if (it == byType.end())
    return ctx.error("no CPU kernel for this op type");
  return launchKernel(it->second, ctx);
}

llvm::Error launchKernel(KernelFn fn, const KernelContext &ctx) {
  auto is16 = [](const TensorView &t) {
    return t.dtype == DType::F16 || t.dtype == DType::BF16;
  };
  // Cast converts 16-bit floats itself; every other kernel computes in
  // float32 (runWidened).
  if (ctx.opType != "Cast" &&
      (llvm::any_of(ctx.inputs, is16) || llvm::any_of(ctx.outputs, is16)))
    return runWidened(ctx, fn);
  return fn(ctx);
}

llvm::Error runWidened(const KernelContext &ctx, KernelFn fn) {
  std::vector<std::unique_ptr<float[]>> scratch;
  auto widen = [&](const TensorView &t, bool load) -> TensorView {
    if (t.dtype != DType::F16 && t.dtype != DType::BF16)
      return t;
    int64_t n = t.numel();
    scratch.emplace_back(new float[static_cast<size_t>(n > 0 ? n : 1)]);
    float *f = scratch.back().get();
    const auto *h = t.as<const uint16_t>();
    if (load)
      for (int64_t i = 0; i < n; ++i)
        f[i] = t.dtype == DType::F16 ? ops::halfToFloat(h[i])
                                     : ops::bfloat16ToFloat(h[i]);
    return TensorView(DType::F32, t.shape, f);
  };
  llvm::SmallVector<TensorView, 8> ins, outs;
  for (const TensorView &t : ctx.inputs)
    ins.push_back(widen(t, /*load=*/true));
  for (const TensorView &t : ctx.outputs)
    outs.push_back(widen(t, /*load=*/false));
  KernelContext wide = ctx;
  wide.inputs = ins;
  wide.outputs = outs;
  SHARDC_CPU_TRY(fn(wide));
  for (size_t k = 0; k < outs.size(); ++k) {
    const TensorView &t = ctx.outputs[k];
    if (t.dtype != DType::F16 && t.dtype != DType::BF16)
      continue;
    const float *f = outs[k].as<const float>();
    auto *h = t.as<uint16_t>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      h[i] = t.dtype == DType::F16 ? ops::floatToHalf(f[i])
                                   : ops::floatToBfloat16(f[i]);
  }
  return llvm::Error::success();
}

} // namespace shardc::rt::cpu
