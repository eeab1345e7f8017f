//===- OptimizerOps.h - Optimizer arithmetic for every backend --*- C++ -*-===//
//
// The per-element updates of SGDUpdate and AdamUpdate (docs/ops.md), written
// once for the CPU kernels (runtime/cpu/Optimizer.cpp) and the CUDA kernels
// (runtime/cuda/Optimizer.cu), following PyTorch 1.13's single-tensor
// ("for-loop") torch.optim.SGD, Adam and AdamW.
//
// Scalars follow PyTorch's split: what Python computes (bias corrections,
// step size, 1 - beta) is computed in double from the step counter, then
// converted to the element type once, as ATen converts a Python scalar
// operand; the elementwise math runs in the element type with ATen's
// operation order. The CPU computes the scalars once per op; a CUDA block
// computes them once per block from the step counter in device memory.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_OPTIMIZEROPS_H
#define SHARDC_RUNTIME_KERNELS_OPTIMIZEROPS_H

#include "runtime/kernels/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace shardc::rt::ops {

/// The learning-rate schedule of an update (its `lr_schedule`,
/// `warmup_steps`, `decay_steps` and `min_lr_ratio` attributes; docs/ops.md).
struct LrSchedule {
  enum Kind { Constant, Linear, Cosine };
  Kind kind = Constant;
  int64_t warmup = 0, decay = 0;
  double minRatio = 0;

  /// The factor of the learning rate at optimizer step `s` (from 0), in
  /// double as the lambda of torch.optim.lr_scheduler.LambdaLR computes it
  /// in Python, term for term:
  ///   s < W:  (s + 1) / W
  ///   then    1 (constant); for linear and cosine, R once s >= T, else
  ///           max(R, (T - s) / (T - W))                      (linear)
  ///           R + (1 - R) * (1 + cos(pi * (s - W) / (T - W))) / 2 (cosine)
  SHARDC_HOST_DEVICE double factor(int64_t s) const {
    if (s < warmup)
      return static_cast<double>(s + 1) / static_cast<double>(warmup);
    if (kind == Constant)
      return 1.0;
    if (s >= decay)
      return minRatio;
    double span = static_cast<double>(decay - warmup);
    if (kind == Linear) {
      double f = static_cast<double>(decay - s) / span;
      return f > minRatio ? f : minRatio;
    }
    // Python's math.pi.
    const double pi = 3.141592653589793;
    return minRatio +
           (1.0 - minRatio) *
               (1.0 + std::cos(pi * static_cast<double>(s - warmup) / span)) /
               2.0;
  }
  /// The learning rate at the step whose (incremented) counter is `step`:
  /// the first step's counter is 1.
  SHARDC_HOST_DEVICE double lrAt(double lr, double step) const {
    if (kind == Constant && warmup == 0)
      return lr;
    return lr * factor(static_cast<int64_t>(step) - 1);
  }
};

/// SGDUpdate's attributes.
struct SgdHyper {
  double lr = 0.01, momentum = 0, dampening = 0, weightDecay = 0;
  bool nesterov = false;
  LrSchedule schedule;
};

/// torch.optim.SGD (maximize=False), per element, after `grad *= grad_scale`
/// (gradient clipping's coefficient, when the op has one):
///   d = grad + weight_decay * param                  (if weight_decay != 0)
///   buf = step <= 1 ? d : momentum * buf + (1 - dampening) * d
///   d = nesterov ? d + momentum * buf : buf          (if momentum != 0)
///   param = param - lr * d
template <typename T> struct SgdStep {
  T wd, mom, oneMinusDamp, negLr, gradScale;
  bool hasWd, hasMomentum, nesterov, first, scaled;

  /// The step's scalars from the (incremented) step counter, the optional
  /// grad_scale operand's value (null: none) and the optional lr_step
  /// counter the schedule is at (null: `step`).
  SHARDC_HOST_DEVICE static SgdStep make(const SgdHyper &h, double step,
                                         const float *scale = nullptr,
                                         const float *lrStep = nullptr) {
    double lr = h.schedule.lrAt(h.lr, lrStep ? double(*lrStep) : step);
    SgdStep s;
    s.scaled = scale != nullptr;
    s.gradScale = s.scaled ? static_cast<T>(*scale) : T(1);
    s.wd = static_cast<T>(h.weightDecay);
    s.mom = static_cast<T>(h.momentum);
    s.oneMinusDamp = static_cast<T>(1.0 - h.dampening);
    s.negLr = static_cast<T>(-lr);
    s.hasWd = h.weightDecay != 0.0;
    s.hasMomentum = h.momentum != 0.0;
    s.nesterov = h.nesterov;
    s.first = step <= 1.0;
    return s;
  }
  /// The new parameter; with momentum, also the new buffer `b` from `buf`
  /// (ignored otherwise).
  SHARDC_HOST_DEVICE T apply(T p, T g, T buf, T &b) const {
    T d = scaled ? g * gradScale : g;
    if (hasWd)
      d = d + wd * p;
    if (hasMomentum) {
      b = first ? d : buf * mom + oneMinusDamp * d;
      d = nesterov ? d + mom * b : b;
    }
    return p + negLr * d;
  }
};

/// AdamUpdate's attributes.
struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
  bool decoupled = false;
  LrSchedule schedule;
};

/// torch.optim.Adam / AdamW (amsgrad=False, maximize=False), per element,
/// after `grad *= grad_scale` as SgdStep:
///   AdamW: param *= 1 - lr * weight_decay
///   Adam:  grad += weight_decay * param              (if weight_decay != 0)
///   exp_avg = beta1 * exp_avg + (1 - beta1) * grad
///   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
///   denom = sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps
///   param -= lr / (1 - beta1^step) * exp_avg / denom
template <typename T> struct AdamStep {
  T decay, wd, b1, b2, oneMinusB1, oneMinusB2, bc2Sqrt, eps, negStepSize,
      gradScale;
  bool decoupled, hasWd, scaled;

  /// As SgdStep::make.
  SHARDC_HOST_DEVICE static AdamStep make(const AdamHyper &h, double step,
                                          const float *scale = nullptr,
                                          const float *lrStep = nullptr) {
    // What torch computes in Python floats.
    double lr = h.schedule.lrAt(h.lr, lrStep ? double(*lrStep) : step);
    double biasCorrection1 = 1.0 - std::pow(h.beta1, step);
    double biasCorrection2 = 1.0 - std::pow(h.beta2, step);
    AdamStep s;
    s.scaled = scale != nullptr;
    s.gradScale = s.scaled ? static_cast<T>(*scale) : T(1);
    s.decay = static_cast<T>(1.0 - lr * h.weightDecay);
    s.wd = static_cast<T>(h.weightDecay);
    s.b1 = static_cast<T>(h.beta1);
    s.b2 = static_cast<T>(h.beta2);
    s.oneMinusB1 = static_cast<T>(1.0 - h.beta1);
    s.oneMinusB2 = static_cast<T>(1.0 - h.beta2);
    s.bc2Sqrt = static_cast<T>(std::sqrt(biasCorrection2));
    s.eps = static_cast<T>(h.eps);
    s.negStepSize = static_cast<T>(-(lr / biasCorrection1));
    s.decoupled = h.decoupled;
    s.hasWd = h.weightDecay != 0.0;
    return s;
  }
  SHARDC_HOST_DEVICE void apply(T p, T g, T m, T v, T &newP, T &newM,
                                T &newV) const {
    if (scaled)
      g = g * gradScale;
    if (decoupled)
      p = p * decay;
    else if (hasWd)
      g = g + wd * p;
    m = m * b1 + oneMinusB1 * g;
    v = v * b2 + oneMinusB2 * g * g;
    T denom = std::sqrt(v) / bc2Sqrt + eps;
    newM = m;
    newV = v;
    newP = p + negStepSize * m / denom;
  }
};

/// PartialNorm's accumulation of one element into `acc` (see
/// ClipCoefficient in docs/ops.md): the sum of squares for the l2 norm, the
/// largest absolute value for inf, in double; a NaN stays NaN.
SHARDC_HOST_DEVICE inline double accumulateNorm(double acc, double x, bool l2) {
  if (l2)
    return acc + x * x;
  double a = std::fabs(x);
  return (a > acc || a != a) && acc == acc ? a : acc;
}

/// ClipCoefficient: the total norm from the reduced accumulation `total`
/// (f64, rounded to f32 once finished),
/// and torch.nn.utils.clip_grad_norm_'s clamped coefficient, in float32 as
/// torch computes `max_norm / (total_norm + 1e-6)` (a Python float over a
/// tensor: the tensor's reciprocal times max_norm) and clamps it at 1. NaN
/// propagates (clamp keeps it).
/// With `unscale` (loss scaling: the gradients are still scaled) the norm
/// is the unscaled one, `norm * unscale`, and the coefficient is multiplied
/// by `unscale` too, so that the update unscales and clips at once.
SHARDC_HOST_DEVICE inline void clipCoefficient(double total, bool l2,
                                               double maxNorm, float &norm,
                                               float &coef,
                                               const float *unscale = nullptr) {
  norm = static_cast<float>(l2 ? std::sqrt(total) : total);
  if (unscale)
    norm = norm * *unscale;
  float c = (1.0f / (norm + 1e-6f)) * static_cast<float>(maxNorm);
  coef = c > 1.0f ? 1.0f : c;
  if (unscale)
    coef = coef * *unscale;
}

/// LossScale's attributes (a #shardc.loss_scaling).
struct LossScaling {
  double growthFactor = 2.0, backoffFactor = 0.5;
  int64_t growthInterval = 2000;
};

/// LossScale's results, as torch.cuda.amp.GradScaler computes them:
/// `skip` when `total` (the gradients' sum of squares, f64) is not finite;
/// `unscale` = 1 / scale in double, rounded (GradScaler's inv_scale);
/// `used` = scale; and the next scale and growth tracker, as ATen's
/// `_amp_update_scale_`: `scale * backoff` (in double, rounded) and tracker
/// 0 on a skipped step, else tracker + 1, and at growth_interval
/// `scale * growth` (kept only if finite) and tracker 0.
SHARDC_HOST_DEVICE inline void
lossScaleStep(const LossScaling &ls, double total, float scale, float tracker,
              bool &skip, float &unscale, float &used, float &newScale,
              float &newTracker) {
  // inf - inf and NaN - NaN are NaN: finite exactly when this is 0.
  skip = !(total - total == 0.0);
  unscale = static_cast<float>(1.0 / static_cast<double>(scale));
  used = scale;
  if (skip) {
    newScale =
        static_cast<float>(static_cast<double>(scale) * ls.backoffFactor);
    newTracker = 0.0f;
    return;
  }
  float successful = tracker + 1.0f;
  if (successful >= static_cast<float>(ls.growthInterval)) {
    float grown =
        static_cast<float>(static_cast<double>(scale) * ls.growthFactor);
    newScale = grown - grown == 0.0f ? grown : scale;
    newTracker = 0.0f;
  } else {
    newScale = scale;
    newTracker = successful;
  }
}

} // namespace shardc::rt::ops

#endif // SHARDC_RUNTIME_KERNELS_OPTIMIZEROPS_H
