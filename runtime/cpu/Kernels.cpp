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
      {"Neg", negKernel},
      {"Abs", absKernel},
      {"Relu", reluKernel},
      {"Identity", identityKernel},
      {"Reshape", reshapeKernel},
      {"Cast", castKernel},
      {"Dropout", dropoutKernel},
      {"Softmax", softmaxKernel},
      {"LogSoftmax", logSoftmaxKernel},
      {"Gemm", gemmKernel},
      {"MatMul", matMulKernel},
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
      {"NegativeLogLikelihoodLossGrad", negativeLogLikelihoodLossGradKernel},
      {"GatherGrad", gatherGradKernel},
      {"SliceGrad", sliceGradKernel},
      {"SGDUpdate", sgdUpdateKernel},
      {"AdamUpdate", adamUpdateKernel},
      {"Increment", incrementKernel},
      {"PartialNorm", partialNormKernel},
      {"ClipCoefficient", clipCoefficientKernel},
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
  return it->second(ctx);
}

} // namespace shardc::rt::cpu
