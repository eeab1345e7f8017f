//===- Optimizer.cu - Optimizer updates and gradient clipping on CUDA -----===//
//
// SGDUpdate, AdamUpdate, Increment, PartialNorm, ClipCoefficient and
// LossScale. The
// arithmetic is runtime/kernels/OptimizerOps.h, shared with the CPU
// kernels. The step counter and the clipping coefficient stay in device
// memory: thread 0 of each block reads them (and loss scaling's skip flag)
// and computes the step's scalars into shared memory, so an update never
// waits for the host.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/OptimizerOps.h"

namespace shardc::rt::cuda {

namespace {

template <typename S> __device__ double readCounter(const S *step) {
  return static_cast<double>(*step);
}

/// The skip operand's value (absent: false), read in device memory.
__device__ bool readSkip(const uint8_t *skip) { return skip && *skip != 0; }

template <typename T, typename S>
__global__ void sgdElements(const T *param, const T *grad, const T *buf,
                            T *newParam, T *newBuf, int64_t n, const S *step,
                            const float *scale, const uint8_t *skipFlag,
                            const float *lrStep, ops::SgdHyper hyper) {
  __shared__ ops::SgdStep<T> update;
  __shared__ bool skip;
  if (threadIdx.x == 0) {
    skip = readSkip(skipFlag);
    update = ops::SgdStep<T>::make(hyper, readCounter(step), scale, lrStep);
  }
  __syncthreads();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    if (skip) {
      newParam[i] = param[i];
      if (newBuf)
        newBuf[i] = buf[i];
      continue;
    }
    T b = T(0);
    newParam[i] = update.apply(param[i], grad[i], buf ? buf[i] : T(0), b);
    if (newBuf)
      newBuf[i] = b;
  }
}

template <typename T, typename S>
__global__ void adamElements(const T *param, const T *grad, const T *m,
                             const T *v, T *newParam, T *newM, T *newV,
                             int64_t n, const S *step, const float *scale,
                             const uint8_t *skipFlag, const float *lrStep,
                             ops::AdamHyper hyper) {
  __shared__ ops::AdamStep<T> update;
  __shared__ bool skip;
  if (threadIdx.x == 0) {
    skip = readSkip(skipFlag);
    update = ops::AdamStep<T>::make(hyper, readCounter(step), scale, lrStep);
  }
  __syncthreads();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    if (skip) {
      newParam[i] = param[i];
      newM[i] = m[i];
      newV[i] = v[i];
      continue;
    }
    update.apply(param[i], grad[i], m[i], v[i], newParam[i], newM[i], newV[i]);
  }
}

template <typename T>
__global__ void incrementElements(const T *x, T *y, int64_t n,
                                  const uint8_t *skipFlag) {
  bool skip = readSkip(skipFlag);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    y[i] = skip ? x[i] : x[i] + T(1);
}

/// Threads of the PartialNorm block.
constexpr int kNormBlock = 256;

/// One block: each thread accumulates a strided share in double, the shares
/// combine in a fixed tree, and thread 0 adds `init`.
template <typename T>
__global__ void partialNormElements(const T *x, int64_t n, const double *init,
                                    bool l2, double *out) {
  __shared__ double share[kNormBlock];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    acc = ops::accumulateNorm(acc, static_cast<double>(x[i]), l2);
  share[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      share[threadIdx.x] =
          l2 ? share[threadIdx.x] + share[threadIdx.x + stride]
             : ops::accumulateNorm(share[threadIdx.x],
                                   share[threadIdx.x + stride], false);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double total = share[0];
    if (init)
      total = l2 ? *init + total : ops::accumulateNorm(*init, total, false);
    *out = total;
  }
}

__global__ void clipCoefficientElement(const double *total, bool l2,
                                       double maxNorm, float *norm, float *coef,
                                       const float *unscale) {
  ops::clipCoefficient(*total, l2, maxNorm, *norm, *coef, unscale);
}

__global__ void lossScaleElement(ops::LossScaling ls, const double *total,
                                 const float *scale, const float *tracker,
                                 uint8_t *skip, float *unscale, float *used,
                                 float *newScale, float *newTracker) {
  bool s;
  float u, usedScale, ns, nt;
  ops::lossScaleStep(ls, *total, *scale, *tracker, s, u, usedScale, ns, nt);
  *skip = s ? 1 : 0;
  *unscale = u;
  *used = usedScale;
  *newScale = ns;
  *newTracker = nt;
}

/// The optional inputs of the updates, as device pointers (null: absent).
const uint8_t *skipOperand(const KernelContext &ctx, size_t i) {
  return ctx.hasInput(i) ? ctx.inputs[i].as<uint8_t>() : nullptr;
}
const float *scalarOperand(const KernelContext &ctx, size_t i) {
  return ctx.hasInput(i) ? ctx.inputs[i].as<float>() : nullptr;
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
  const float *scale = ctx.hasInput(4) ? ctx.inputs[4].as<float>() : nullptr;
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
              n, step.as<S>(), scale, skipOperand(ctx, 5),
              scalarOperand(ctx, 6), hyper);
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
  const float *scale = ctx.hasInput(5) ? ctx.inputs[5].as<float>() : nullptr;
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
              scale, skipOperand(ctx, 6), scalarOperand(ctx, 7), hyper);
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
  SHARDC_CPU_TRY(cpu::checkSkipFlag(ctx, 1));
  using Types = cpu::DTypeList<DType::F32, DType::F64, DType::I64>;
  return cpu::dispatchIn(
      Types{}, ctx, x.dtype, "x", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        int64_t n = x.numel();
        if (n == 0)
          return llvm::Error::success();
        incrementElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), y.as<T>(), n, skipOperand(ctx, 1));
        return checkLaunch(ctx);
      });
}

/// PartialNorm (ops::accumulateNorm) in one block; an empty input leaves
/// `init` (or 0).
llvm::Error partialNormKernel(const KernelContext &ctx) {
  bool l2 = true;
  SHARDC_CPU_TRY(cpu::checkPartialNormOperands(ctx, l2));
  const TensorView &x = ctx.inputs[0];
  const double *init = ctx.hasInput(1) ? ctx.inputs[1].as<double>() : nullptr;
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        partialNormElements<<<1, kNormBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), x.numel(), init, l2, ctx.outputs[0].as<double>());
        return checkLaunch(ctx);
      });
}

llvm::Error clipCoefficientKernel(const KernelContext &ctx) {
  bool l2 = true;
  double maxNorm = 0;
  SHARDC_CPU_TRY(cpu::checkClipCoefficientOperands(ctx, l2, maxNorm));
  clipCoefficientElement<<<1, 1, 0, cudaStreamOf(ctx)>>>(
      ctx.inputs[0].as<double>(), l2, maxNorm, ctx.outputs[0].as<float>(),
      ctx.outputs[1].as<float>(), scalarOperand(ctx, 1));
  return checkLaunch(ctx);
}

/// LossScale in one thread; the state stays in device memory.
llvm::Error lossScaleKernel(const KernelContext &ctx) {
  ops::LossScaling ls;
  SHARDC_CPU_TRY(cpu::checkLossScaleOperands(ctx, ls));
  lossScaleElement<<<1, 1, 0, cudaStreamOf(ctx)>>>(
      ls, ctx.inputs[0].as<double>(), ctx.inputs[1].as<float>(),
      ctx.inputs[2].as<float>(), ctx.outputs[0].as<uint8_t>(),
      ctx.outputs[1].as<float>(), ctx.outputs[2].as<float>(),
      ctx.outputs[3].as<float>(), ctx.outputs[4].as<float>());
  return checkLaunch(ctx);
}

} // namespace shardc::rt::cuda
