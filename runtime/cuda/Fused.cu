//===- Fused.cu - FusedElementwise on the GPU -----------------------------===//
//
// One thread per output element runs the whole program
// (runtime/kernels/FusedOps.h) with every value in registers: it reads the
// inputs' elements by their broadcast patterns, applies ops::fusedApply
// (the functors of the single-op CUDA kernels, so the chain computes their
// bits) and writes the outputs. The program travels as a kernel argument;
// checkFused (shared with the CPU kernel) bounds its size.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/FusedOps.h"

namespace shardc::rt::cuda {

namespace {

#define GRID_STRIDE_LOOP(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

using ops::FusedOpcode;

struct FusedArgs {
  int numInputs = 0, numInstrs = 0, numOutputs = 0;
  const void *inputs[ops::kMaxFusedInputs] = {};
  bool isBool[ops::kMaxFusedInputs] = {};
  int64_t inner[ops::kMaxFusedInputs] = {}, size[ops::kMaxFusedInputs] = {};
  FusedOpcode op[ops::kMaxFusedInstrs] = {};
  int8_t args[ops::kMaxFusedInstrs][ops::kFusedArgs] = {};
  int8_t results[ops::kMaxFusedOutputs] = {};
  float *outputs[ops::kMaxFusedOutputs] = {};
};

__global__ void fusedElements(FusedArgs a, int64_t n) {
  GRID_STRIDE_LOOP(i, n) {
    float v[ops::kMaxFusedInputs + ops::kMaxFusedInstrs];
    for (int k = 0; k < a.numInputs; ++k) {
      int64_t idx = (i / a.inner[k]) % a.size[k];
      v[k] =
          a.isBool[k]
              ? (static_cast<const uint8_t *>(a.inputs[k])[idx] ? 1.0f : 0.0f)
              : static_cast<const float *>(a.inputs[k])[idx];
    }
    for (int j = 0; j < a.numInstrs; ++j) {
      float x = v[a.args[j][0]];
      float y = a.args[j][1] >= 0 ? v[a.args[j][1]] : 0.0f;
      float z = a.args[j][2] >= 0 ? v[a.args[j][2]] : 0.0f;
      v[a.numInputs + j] = ops::fusedApply(a.op[j], x, y, z);
    }
    for (int r = 0; r < a.numOutputs; ++r)
      a.outputs[r][i] = v[a.results[r]];
  }
}

} // namespace

llvm::Error fusedElementwiseKernel(const KernelContext &ctx) {
  cpu::FusedProgram p;
  SHARDC_CPU_TRY(cpu::checkFused(ctx, p));
  FusedArgs a;
  a.numInputs = static_cast<int>(ctx.inputs.size());
  a.numInstrs = static_cast<int>(p.instrs.size());
  a.numOutputs = static_cast<int>(ctx.outputs.size());
  for (int k = 0; k < a.numInputs; ++k) {
    a.inputs[k] = ctx.inputs[k].data;
    a.isBool[k] = ctx.inputs[k].dtype == DType::Bool;
    a.inner[k] = p.inputs[k].inner;
    a.size[k] = p.inputs[k].size;
  }
  for (int j = 0; j < a.numInstrs; ++j) {
    a.op[j] = p.instrs[j].op;
    for (int t = 0; t < ops::kFusedArgs; ++t)
      a.args[j][t] = static_cast<int8_t>(p.instrs[j].args[t]);
  }
  for (int r = 0; r < a.numOutputs; ++r) {
    a.results[r] = static_cast<int8_t>(p.results[r]);
    a.outputs[r] = ctx.outputs[r].as<float>();
  }
  if (p.numel == 0)
    return llvm::Error::success();
  fusedElements<<<blocksFor(p.numel), kBlock, 0, cudaStreamOf(ctx)>>>(a,
                                                                      p.numel);
  return checkLaunch(ctx);
}

} // namespace shardc::rt::cuda
