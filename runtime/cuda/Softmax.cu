//===- Softmax.cu - Softmax, LogSoftmax and their gradients ---------------===//
//
// One thread per line (an (outer, inner) position of the axis), running the
// line functions the CPU kernels run (runtime/kernels/LineOps.h): the same
// order of operations, so the backends differ only where exp and log do.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/LineOps.h"

namespace shardc::rt::cuda {

namespace {

template <typename T>
__global__ void softmaxLines(const T *x, T *y, cpu::LineGeometry g,
                             bool logarithm) {
  int64_t lines = g.outer * g.inner;
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < lines;
       l += int64_t(blockDim.x) * gridDim.x) {
    int64_t base = (l / g.inner) * g.n * g.inner + l % g.inner;
    ops::softmaxLine(x + base, y + base, g.n, g.inner, logarithm);
  }
}

template <typename T>
__global__ void softmaxGradLines(const T *dy, const T *y, T *dx,
                                 cpu::LineGeometry g, bool logarithm) {
  int64_t lines = g.outer * g.inner;
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < lines;
       l += int64_t(blockDim.x) * gridDim.x) {
    int64_t base = (l / g.inner) * g.n * g.inner + l % g.inner;
    ops::softmaxGradLine(dy + base, y + base, dx + base, g.n, g.inner,
                         logarithm);
  }
}

llvm::Error softmaxImpl(const KernelContext &ctx, bool logarithm) {
  cpu::LineGeometry g;
  SHARDC_CPU_TRY(cpu::checkSoftmax(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  int64_t lines = g.outer * g.inner;
  if (lines == 0 || g.n == 0)
    return llvm::Error::success();
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        softmaxLines<<<blocksFor(lines), kBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), y.as<T>(), g, logarithm);
        return checkLaunch(ctx);
      });
}

llvm::Error softmaxGradImpl(const KernelContext &ctx, bool logarithm) {
  cpu::LineGeometry g;
  SHARDC_CPU_TRY(cpu::checkSoftmaxGrad(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  int64_t lines = g.outer * g.inner;
  if (lines == 0 || g.n == 0)
    return llvm::Error::success();
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        softmaxGradLines<<<blocksFor(lines), kBlock, 0, cudaStreamOf(ctx)>>>(
            dy.as<T>(), ctx.inputs[1].as<T>(), ctx.outputs[0].as<T>(), g,
            logarithm);
        return checkLaunch(ctx);
      });
}

} // namespace

llvm::Error softmaxKernel(const KernelContext &ctx) {
  return softmaxImpl(ctx, false);
}
llvm::Error logSoftmaxKernel(const KernelContext &ctx) {
  return softmaxImpl(ctx, true);
}
llvm::Error softmaxGradKernel(const KernelContext &ctx) {
  return softmaxGradImpl(ctx, false);
}
llvm::Error logSoftmaxGradKernel(const KernelContext &ctx) {
  return softmaxGradImpl(ctx, true);
}

} // namespace shardc::rt::cuda
