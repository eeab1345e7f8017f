//===- Optimizer.cu - SGDUpdate, AdamUpdate, Increment on CUDA ------------===//
//
// The arithmetic is runtime/kernels/OptimizerOps.h, shared with the CPU
// kernels. The step counter stays in device memory: thread 0 of each block
// reads it and computes the step's scalars into shared memory, so an update
// never waits for the host.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/OptimizerOps.h"

namespace shardc::rt::cuda {

namespace {

template <typename S> __device__ double readCounter(const S *step) {
  return static_cast<double>(*step);
}

template <typename T, typename S>
__global__ void sgdElements(const T *param, const T *grad, const T *buf,
                            T *newParam, T *newBuf, int64_t n, const S *step,
                            ops::SgdHyper hyper) {
  __shared__ ops::SgdStep<T> update;
  if (threadIdx.x == 0)
    update = ops::SgdStep<T>::make(hyper, readCounter(step));
  __syncthreads();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    T b = T(0);
    newParam[i] = update.apply(param[i], grad[i], buf ? buf[i] : T(0), b);
    if (newBuf)
      newBuf[i] = b;
  }
}

template <typename T, typename S>
__global__ void adamElements(const T *param, const T *grad, const T *m,
                             const T *v, T *newParam, T *newM, T *newV,
                             int64_t n, const S *step, ops::AdamHyper hyper) {
  __shared__ ops::AdamStep<T> update;
  if (threadIdx.x == 0)
    update = ops::AdamStep<T>::make(hyper, readCounter(step));
  __syncthreads();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    update.apply(param[i], grad[i], m[i], v[i], newParam[i], newM[i], newV[i]);
}

template <typename T>
__global__ void incrementElements(const T *x, T *y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = x[i] + T(1);
}

/// Calls `fn(tag)` with the step counter's storage type (f32 or f64, as on
/// the CPU).
template <typename Fn>
llvm::Error dispatchStep(const KernelContext &ctx, const TensorView &step,
                         Fn &&fn) {
  return cpu::dispatchIn(cpu::FloatTypes{}, ctx, step.dtype, "'step'",
                         std::forward<Fn>(fn));
}

} // namespace

llvm::Error sgdUpdateKernel(const KernelContext &ctx) {
  bool hasBuffer = false;
  SHARDC_CPU_TRY(cpu::checkSgdOperands(ctx, hasBuffer));
  const TensorView &param = ctx.inputs[0];
  const TensorView &grad = ctx.inputs[1];
  const TensorView &step = ctx.inputs[3];
  ops::SgdHyper hyper;
  SHARDC_CPU_TRY(cpu::sgdHyper(ctx, hyper));
  int64_t n = param.numel();
  cudaStream_t s = cudaStreamOf(ctx);
  if (hyper.momentum == 0.0 && hasBuffer &&
      ctx.outputs[1].data != ctx.inputs[2].data && n > 0)
    SHARDC_CPU_TRY(check(
        cudaMemcpyAsync(ctx.outputs[1].data, ctx.inputs[2].data,
                        ctx.inputs[2].bytes(), cudaMemcpyDeviceToDevice, s),
        "cudaMemcpyAsync"));
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, param.dtype, "param",
      [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        if (n == 0)
          return llvm::Error::success();
        bool momentum = hyper.momentum != 0.0;
        const T *buf = momentum ? ctx.inputs[2].as<T>() : nullptr;
        T *newBuf = momentum ? ctx.outputs[1].as<T>() : nullptr;
        return dispatchStep(ctx, step, [&](auto stepTag) -> llvm::Error {
          using S = typename decltype(stepTag)::type;
          sgdElements<<<blocksFor(n), kBlock, 0, s>>>(
              param.as<T>(), grad.as<T>(), buf, ctx.outputs[0].as<T>(), newBuf,
              n, step.as<S>(), hyper);
          return checkLaunch(ctx);
        });
      });
}

/// Unlike the CPU kernel, a step counter below 1 is not refused (that would
/// read it back every step): the optimizer pass always increments it before
/// the update, and the plan's checksums keep it so.
llvm::Error adamUpdateKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::checkAdamOperands(ctx));
  const TensorView &param = ctx.inputs[0];
  const TensorView &step = ctx.inputs[4];
  ops::AdamHyper hyper;
  SHARDC_CPU_TRY(cpu::adamHyper(ctx, hyper));
  int64_t n = param.numel();
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, param.dtype, "param",
      [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        if (n == 0)
          return llvm::Error::success();
        return dispatchStep(ctx, step, [&](auto stepTag) -> llvm::Error {
          using S = typename decltype(stepTag)::type;
          adamElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
              param.as<T>(), ctx.inputs[1].as<T>(), ctx.inputs[2].as<T>(),
              ctx.inputs[3].as<T>(), ctx.outputs[0].as<T>(),
              ctx.outputs[1].as<T>(), ctx.outputs[2].as<T>(), n, step.as<S>(),
              hyper);
          return checkLaunch(ctx);
        });
      });
}

llvm::Error incrementKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::requireInput(ctx, 0, "x"));
  SHARDC_CPU_TRY(cpu::requireOutput(ctx, 0, "y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(cpu::requireType(ctx, y, x.dtype, "y"));
  SHARDC_CPU_TRY(cpu::requireShape(ctx, y, x.shape, "y"));
  using Types = cpu::DTypeList<DType::F32, DType::F64, DType::I64>;
  return cpu::dispatchIn(
      Types{}, ctx, x.dtype, "x", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        int64_t n = x.numel();
        if (n == 0)
          return llvm::Error::success();
        incrementElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), y.as<T>(), n);
        return checkLaunch(ctx);
      });
}

} // namespace shardc::rt::cuda
