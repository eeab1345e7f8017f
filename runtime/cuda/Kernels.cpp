//===- Kernels.cpp - The CUDA kernel table --------------------------------===//
//
// The op types the CUDA backend runs. The table grows op by op; a plan with
// an op that has no CUDA kernel is refused when the executor loads it,
// naming the op type, never run on the CPU behind the user's back.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"

namespace shardc::rt::cuda {

const std::vector<std::pair<llvm::StringRef, KernelFn>> &kernelTable() {
  static const std::vector<std::pair<llvm::StringRef, KernelFn>> table = {
      {"Add", addKernel},
      {"Sub", subKernel},
      {"Mul", mulKernel},
      {"Div", divKernel},
      {"Max", maxKernel},
      {"Min", minKernel},
      {"Equal", equalKernel},
      {"Greater", greaterKernel},
      {"Less", lessKernel},
      {"GreaterOrEqual", greaterOrEqualKernel},
      {"LessOrEqual", lessOrEqualKernel},
      {"And", andKernel},
      {"Or", orKernel},
      {"Xor", xorKernel},
      {"Where", whereKernel},
      {"Sqrt", sqrtKernel},
      {"Exp", expKernel},
      {"Log", logKernel},
      {"Erf", erfKernel},
      {"Tanh", tanhKernel},
      {"Sigmoid", sigmoidKernel},
      {"Softplus", softplusKernel},
      {"Abs", absKernel},
      {"Neg", negKernel},
      {"Relu", reluKernel},
      {"Sign", signKernel},
      {"Floor", floorKernel},
      {"Ceil", ceilKernel},
      {"Sin", sinKernel},
      {"Cos", cosKernel},
      {"Not", notKernel},
      {"Gemm", gemmKernel},
      {"MatMul", matMulKernel},
      {"Softmax", softmaxKernel},
      {"LogSoftmax", logSoftmaxKernel},
      {"ReduceSum", reduceSumKernel},
      {"ReduceMean", reduceMeanKernel},
      {"ReduceMax", reduceMaxKernel},
      {"ReduceMin", reduceMinKernel},
      {"ArgMax", argMaxKernel},
      {"Identity", copyKernel},
      {"Transpose", transposeKernel},
      {"Expand", expandKernel},
      {"Slice", sliceKernel},
      {"Concat", concatKernel},
      {"Split", splitKernel},
      {"Reshape", copyKernel},
      // Training ops.
      {"ReluGrad", reluGradKernel},
      {"SigmoidGrad", sigmoidGradKernel},
      {"TanhGrad", tanhGradKernel},
      {"SliceGrad", sliceGradKernel},
      {"SoftmaxGrad", softmaxGradKernel},
      {"LogSoftmaxGrad", logSoftmaxGradKernel},
      {"SGDUpdate", sgdUpdateKernel},
      {"AdamUpdate", adamUpdateKernel},
      {"Increment", incrementKernel},
  };
  return table;
}

} // namespace shardc::rt::cuda
