//===- Loss.cu - SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss -------===//
//
// One thread per target position running the CPU kernels' per-position
// arithmetic (runtime/kernels/LossOps.h); the "sum" and "mean" reductions
// and the gradient's weight sum run in one block, in a fixed order, so a
// run's losses do not depend on scheduling. A target outside the classes
// is recorded by position (resetBadPosition/readBadPosition) and read back
// before the kernel returns, which then fails as the CPU kernel does
// (cpu::targetOutOfRange).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/LossOps.h"

#include <cstdint>

namespace shardc::rt::cuda {

namespace {

/// Threads of the one-block reductions.
constexpr int kSumBlock = 256;

/// The operands every thread reads.
template <typename T> struct LossArgs {
  cpu::LossGeometry g;
  bool softmax;
  const T *x;
  const void *target;
  const T *weights; // null without class weights
};

template <typename T>
__device__ double weightOf(const LossArgs<T> &a, int64_t t) {
  return a.weights ? static_cast<double>(a.weights[t]) : 1.0;
}

/// Each position's term (and weight) into `values`/`weightsOut`, or into
/// the loss itself for "none"; log-probabilities when asked for.
template <typename T>
__global__ void lossTerms(LossArgs<T> a, T *lossNone, T *logProb,
                          double *values, double *weightsOut,
                          unsigned long long *badPosition) {
  const cpu::LossGeometry &g = a.g;
  int64_t positions = g.batch * g.inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       i < positions; i += int64_t(blockDim.x) * gridDim.x) {
    int64_t n = i / g.inner, d = i % g.inner;
    int64_t base = n * g.classes * g.inner + d;
    int64_t t = ops::loadIndex(a.target, g.wideTargets, i);
    double value = 0.0, weight = 0.0;
    if (ops::targetCounted(t, g.hasIgnore, g.ignoreIndex)) {
      if (!ops::targetInRange(t, g.classes)) {
        atomicMin(badPosition, static_cast<unsigned long long>(i));
        continue;
      }
      weight = weightOf(a, t);
      value = ops::lossTerm(a.x + base, g.classes, g.inner, t, weight,
                            a.softmax, logProb ? logProb + base : nullptr);
    } else if (logProb) {
      ops::logProbOnly(a.x + base, g.classes, g.inner, logProb + base);
    }
    if (lossNone)
      lossNone[i] = static_cast<T>(value);
    else {
      values[i] = value;
      weightsOut[i] = weight;
    }
  }
}

/// Sums `count` doubles in one block: each thread a strided partial sum,
/// then blockSum's tree. The order depends only on count.
__device__ double sumOfValues(const double *v, int64_t count, double *shared) {
  double acc = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x)
    acc += v[j];
  return blockSum(acc, shared);
}

template <typename T>
__global__ void reduceLoss(const double *values, const double *weights,
                           int64_t count, bool mean, T *loss) {
  __shared__ double shared[kSumBlock];
  double total = sumOfValues(values, count, shared);
  double weightSum = mean ? sumOfValues(weights, count, shared) : 1.0;
  if (threadIdx.x == 0)
    loss[0] = static_cast<T>(mean ? total / weightSum : total); // 0/0: NaN
}

/// The weight sum of the counted targets (into weightSum[0]), recording an
/// out-of-range one.
template <typename T>
__global__ void countedWeights(LossArgs<T> a, double *weightSum,
                               unsigned long long *badPosition) {
  __shared__ double shared[kSumBlock];
  const cpu::LossGeometry &g = a.g;
  int64_t positions = g.batch * g.inner;
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < positions; i += blockDim.x) {
    int64_t t = ops::loadIndex(a.target, g.wideTargets, i);
    if (!ops::targetCounted(t, g.hasIgnore, g.ignoreIndex))
      continue;
    if (!ops::targetInRange(t, g.classes)) {
      atomicMin(badPosition, static_cast<unsigned long long>(i));
      continue;
    }
    acc += weightOf(a, t);
  }
  double total = blockSum(acc, shared);
  if (threadIdx.x == 0)
    weightSum[0] = total;
}

template <typename T>
__global__ void lossTermGrads(LossArgs<T> a, const T *dLoss,
                              const double *weightSum, T *dx) {
  const cpu::LossGeometry &g = a.g;
  int64_t positions = g.batch * g.inner;
  // No dLoss: the gradient for dLoss = 1 (SoftmaxCrossEntropyLossWithGrad).
  double scale = 0.0;
  if (g.reduction == cpu::LossReduction::Sum)
    scale = dLoss ? static_cast<double>(dLoss[0]) : 1.0;
  else if (g.reduction == cpu::LossReduction::Mean)
    scale = (dLoss ? static_cast<double>(dLoss[0]) : 1.0) / weightSum[0];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       i < positions; i += int64_t(blockDim.x) * gridDim.x) {
    int64_t n = i / g.inner, d = i % g.inner;
    int64_t base = n * g.classes * g.inner + d;
    int64_t t = ops::loadIndex(a.target, g.wideTargets, i);
    bool counted = ops::targetCounted(t, g.hasIgnore, g.ignoreIndex) &&
                   ops::targetInRange(t, g.classes);
    double gi = 0.0;
    if (counted)
      gi = weightOf(a, t) * (g.reduction == cpu::LossReduction::None
                                 ? static_cast<double>(dLoss[i])
                                 : scale);
    ops::lossTermGrad(a.x + base, dx + base, g.classes, g.inner, t, counted, gi,
                      a.softmax);
  }
}

/// Scratch for `doubles` doubles followed by the bad-position word, the
/// word reset.
llvm::Error lossScratch(const KernelContext &ctx, int64_t doubles,
                        double *&values, unsigned long long *&badPosition) {
  size_t bytes = sizeof(double) * static_cast<size_t>(doubles) +
                 sizeof(unsigned long long);
  llvm::Expected<void *> base = streamOf(ctx).scratch(bytes);
  if (!base)
    return base.takeError();
  values = static_cast<double *>(*base);
  badPosition = reinterpret_cast<unsigned long long *>(values + doubles);
  return resetBadPosition(ctx, badPosition);
}

/// Fails as the CPU kernel does when a thread recorded a bad target.
llvm::Error reportBadTarget(const KernelContext &ctx,
                            const cpu::LossGeometry &g,
                            const TensorView &target,
                            const unsigned long long *badPosition) {
  int64_t position, t;
  SHARDC_CPU_TRY(readBadPosition(ctx, badPosition, target.data, g.wideTargets,
                                 position, t));
  if (position < 0)
    return llvm::Error::success();
  return cpu::targetOutOfRange(ctx, t, position, g.classes);
}

/// The loss of `ctx` (checked into `g`): its first output, and log_prob
/// where `g` asks for it.
llvm::Error lossOf(const KernelContext &ctx, bool softmax,
                   const cpu::LossGeometry &g) {
  const TensorView &x = ctx.inputs[0];
  int64_t positions = g.batch * g.inner;
  bool none = g.reduction == cpu::LossReduction::None;
  double *values = nullptr;
  unsigned long long *badPosition = nullptr;
  SHARDC_CPU_TRY(
      lossScratch(ctx, none ? 0 : 2 * positions, values, badPosition));
  SHARDC_CPU_TRY(cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        LossArgs<T> a{g, softmax, x.as<T>(), ctx.inputs[1].data,
                      g.hasWeights ? ctx.inputs[2].as<T>() : nullptr};
        T *loss = ctx.outputs[0].as<T>();
        T *logProb = g.wantLogProb ? ctx.outputs[1].as<T>() : nullptr;
        if (positions > 0) {
          lossTerms<<<blocksFor(positions), kBlock, 0, cudaStreamOf(ctx)>>>(
              a, none ? loss : nullptr, logProb, values, values + positions,
              badPosition);
          SHARDC_CPU_TRY(checkLaunch(ctx));
        }
        if (!none) {
          reduceLoss<<<1, kSumBlock, 0, cudaStreamOf(ctx)>>>(
              values, values + positions, positions,
              g.reduction == cpu::LossReduction::Mean, loss);
          SHARDC_CPU_TRY(checkLaunch(ctx));
        }
        return llvm::Error::success();
      }));
  return reportBadTarget(ctx, g, ctx.inputs[1], badPosition);
}

llvm::Error lossImpl(const KernelContext &ctx, bool softmax) {
  cpu::LossGeometry g;
  SHARDC_CPU_TRY(cpu::checkLoss(ctx, softmax, g));
  return lossOf(ctx, softmax, g);
}

/// The gradient of the loss (checked into `g`) with respect to `x` into
/// `dx`, for `dLoss` (null: 1).
llvm::Error lossGradOf(const KernelContext &ctx, bool softmax,
                       const cpu::LossGeometry &g, const TensorView &x,
                       const TensorView &target, const TensorView *weights,
                       const TensorView *dLoss, const TensorView &dx) {
  int64_t positions = g.batch * g.inner;
  double *weightSum = nullptr;
  unsigned long long *badPosition = nullptr;
  SHARDC_CPU_TRY(lossScratch(ctx, 1, weightSum, badPosition));
  SHARDC_CPU_TRY(cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        LossArgs<T> a{g, softmax, x.as<T>(), target.data,
                      weights ? weights->as<T>() : nullptr};
        countedWeights<<<1, kSumBlock, 0, cudaStreamOf(ctx)>>>(a, weightSum,
                                                               badPosition);
        SHARDC_CPU_TRY(checkLaunch(ctx));
        if (positions > 0) {
          lossTermGrads<<<blocksFor(positions), kBlock, 0, cudaStreamOf(ctx)>>>(
              a, dLoss ? dLoss->as<T>() : nullptr, weightSum, dx.as<T>());
          SHARDC_CPU_TRY(checkLaunch(ctx));
        }
        return llvm::Error::success();
      }));
  return reportBadTarget(ctx, g, target, badPosition);
}

llvm::Error lossGradImpl(const KernelContext &ctx, bool softmax) {
  cpu::LossGeometry g;
  SHARDC_CPU_TRY(cpu::checkLossGrad(ctx, softmax, g));
  return lossGradOf(ctx, softmax, g, ctx.inputs[1], ctx.inputs[2],
                    g.hasWeights ? &ctx.inputs[3] : nullptr, &ctx.inputs[0],
                    ctx.outputs[0]);
}

} // namespace

llvm::Error softmaxCrossEntropyLossKernel(const KernelContext &ctx) {
  return lossImpl(ctx, /*softmax=*/true);
}
llvm::Error negativeLogLikelihoodLossKernel(const KernelContext &ctx) {
  return lossImpl(ctx, /*softmax=*/false);
}
llvm::Error softmaxCrossEntropyLossGradKernel(const KernelContext &ctx) {
  return lossGradImpl(ctx, /*softmax=*/true);
}
llvm::Error negativeLogLikelihoodLossGradKernel(const KernelContext &ctx) {
  return lossGradImpl(ctx, /*softmax=*/false);
}
/// The loss, then the gradient for dLoss = 1 from a second kernel over the
/// scores: the same arithmetic as SoftmaxCrossEntropyLoss followed by
/// SoftmaxCrossEntropyLossGrad.
llvm::Error softmaxCrossEntropyLossWithGradKernel(const KernelContext &ctx) {
  cpu::LossGeometry g;
  SHARDC_CPU_TRY(cpu::checkLossWithGrad(ctx, g));
  SHARDC_CPU_TRY(lossOf(ctx, /*softmax=*/true, g));
  return lossGradOf(ctx, /*softmax=*/true, g, ctx.inputs[0], ctx.inputs[1],
                    g.hasWeights ? &ctx.inputs[2] : nullptr, nullptr,
                    ctx.outputs[1]);
}

} // namespace shardc::rt::cuda
