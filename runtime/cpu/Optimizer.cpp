//===- Optimizer.cpp - SGDUpdate, AdamUpdate, Increment -------------------===//
//
// The optimizer steps the optimizer pass emits, following PyTorch 1.13's
// single-tensor ("for-loop") implementations of torch.optim.SGD, Adam and
// AdamW. They run in place: the executor hands outputs that alias the state
// inputs (param, momentum buffer, moments), so every element is read before it
// is written and nothing else is touched. Non-aliased outputs work too.
//
// The arithmetic, and how its scalars follow PyTorch's split between Python
// and ATen, is runtime/kernels/OptimizerOps.h, shared with the CUDA kernels;
// the operand checks here are shared with them too.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/VecMath.h"
#include "runtime/kernels/OptimizerOps.h"

#include "llvm/Support/FormatVariadic.h"

namespace shardc::rt::cpu {

namespace {

/// Reads the scalar step counter (f32, or f64).
llvm::Error readStep(const KernelContext &ctx, size_t i, double &step) {
  SHARDC_CPU_TRY(requireInput(ctx, i, "step"));
  const TensorView &t = ctx.inputs[i];
  SHARDC_CPU_TRY(requireNumel(ctx, t, 1, "step"));
  if (t.dtype == DType::F32)
    step = *t.as<float>();
  else if (t.dtype == DType::F64)
    step = *t.as<double>();
  else
    return unsupportedType(ctx, t.dtype, "'step'");
  return llvm::Error::success();
}

/// The optional float32 scalar operand `name` at input `i` (grad_scale,
/// lr_step, unscale), or null when absent.
llvm::Error readOptionalScalar(const KernelContext &ctx, size_t i,
                               llvm::StringRef name, const float *&value) {
  value = nullptr;
  if (!ctx.hasInput(i))
    return llvm::Error::success();
  const TensorView &t = ctx.inputs[i];
  SHARDC_CPU_TRY(requireNumel(ctx, t, 1, name));
  SHARDC_CPU_TRY(requireType(ctx, t, DType::F32, name));
  value = t.as<float>();
  return llvm::Error::success();
}

llvm::Error readGradScale(const KernelContext &ctx, size_t i,
                          const float *&scale) {
  return readOptionalScalar(ctx, i, "grad_scale", scale);
}

/// Copies input `in` to output `out` unless the executor aliased them.
void keep(const KernelContext &ctx, size_t in, size_t out) {
  if (ctx.hasInput(in) && ctx.hasOutput(out) &&
      ctx.outputs[out].data != ctx.inputs[in].data &&
      ctx.inputs[in].bytes() > 0)
    std::memmove(ctx.outputs[out].data, ctx.inputs[in].data,
                 ctx.inputs[in].bytes());
}

/// Checks that input `in` and output `out` (both named `name`) have the
/// parameter's type and shape.
llvm::Error requireState(const KernelContext &ctx, const TensorView &param,
                         size_t in, size_t out, llvm::StringRef name) {
  SHARDC_CPU_TRY(requireInput(ctx, in, name));
  SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[in], param.dtype, name));
  SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[in], param.shape, name));
  SHARDC_CPU_TRY(requireOutput(ctx, out, "new " + name.str()));
  SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[out], param.dtype, name));
  return requireShape(ctx, ctx.outputs[out], param.shape, name);
}

} // namespace

llvm::Error readLrSchedule(const KernelContext &ctx, ops::LrSchedule &s) {
  llvm::StringRef kind = ctx.attrs.getString("lr_schedule", "constant");
  if (kind == "constant")
    s.kind = ops::LrSchedule::Constant;
  else if (kind == "linear")
    s.kind = ops::LrSchedule::Linear;
  else if (kind == "cosine")
    s.kind = ops::LrSchedule::Cosine;
  else
    return ctx.error("unknown lr_schedule '" + kind +
                     "' (constant, linear or cosine)");
  s.warmup = ctx.attrs.getInt("warmup_steps", 0);
  s.decay = ctx.attrs.getInt("decay_steps", 0);
  s.minRatio = ctx.attrs.getFloat("min_lr_ratio", 0.0);
  if (s.warmup < 0)
    return ctx.error("warmup_steps must be >= 0, got " + llvm::Twine(s.warmup));
  if (s.kind != ops::LrSchedule::Constant && s.decay <= s.warmup)
    return ctx.error("a " + kind +
                     " lr_schedule needs decay_steps greater than "
                     "warmup_steps (" +
                     llvm::Twine(s.warmup) + "), got " + llvm::Twine(s.decay));
  if (!(s.minRatio >= 0.0 && s.minRatio <= 1.0))
    return ctx.error("min_lr_ratio must be in [0, 1], got " +
                     llvm::formatv("{0}", s.minRatio));
  return llvm::Error::success();
}

llvm::Error checkSkipFlag(const KernelContext &ctx, size_t i) {
  if (!ctx.hasInput(i))
    return llvm::Error::success();
  SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[i], DType::Bool, "skip"));
  return requireNumel(ctx, ctx.inputs[i], 1, "skip");
}

/// The skip operand's value at input `i` (absent: false).
static llvm::Error readSkip(const KernelContext &ctx, size_t i, bool &skip) {
  SHARDC_CPU_TRY(checkSkipFlag(ctx, i));
  skip = ctx.hasInput(i) && *ctx.inputs[i].as<uint8_t>() != 0;
  return llvm::Error::success();
}

/// The hyper-parameters of SGDUpdate and AdamUpdate, from its attributes
/// (shared with the CUDA kernels).
llvm::Error sgdHyper(const KernelContext &ctx, ops::SgdHyper &h) {
  h.lr = ctx.attrs.getFloat("lr", 0.01);
  h.momentum = ctx.attrs.getFloat("momentum", 0.0);
  h.dampening = ctx.attrs.getFloat("dampening", 0.0);
  h.weightDecay = ctx.attrs.getFloat("weight_decay", 0.0);
  h.nesterov = ctx.attrs.getInt("nesterov", 0) != 0;
  return readLrSchedule(ctx, h.schedule);
}

llvm::Error adamHyper(const KernelContext &ctx, ops::AdamHyper &h) {
  h.lr = ctx.attrs.getFloat("lr", 1e-3);
  h.beta1 = ctx.attrs.getFloat("beta1", 0.9);
  h.beta2 = ctx.attrs.getFloat("beta2", 0.999);
  h.eps = ctx.attrs.getFloat("eps", 1e-8);
  h.weightDecay = ctx.attrs.getFloat("weight_decay", 0.0);
  h.decoupled = ctx.attrs.getInt("decoupled", 0) != 0;
  return readLrSchedule(ctx, h.schedule);
}

llvm::Error checkSgdOperands(const KernelContext &ctx, bool &hasBuffer) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "param"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "grad"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "new param"));
  const TensorView &param = ctx.inputs[0];
  const TensorView &grad = ctx.inputs[1];
  SHARDC_CPU_TRY(requireType(ctx, grad, param.dtype, "grad"));
  SHARDC_CPU_TRY(requireShape(ctx, grad, param.shape, "grad"));
  SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[0], param.dtype, "new param"));
  SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[0], param.shape, "new param"));
  SHARDC_CPU_TRY(requireInput(ctx, 3, "step"));
  SHARDC_CPU_TRY(requireNumel(ctx, ctx.inputs[3], 1, "step"));
  const float *scale, *lrStep;
  SHARDC_CPU_TRY(readGradScale(ctx, 4, scale));
  SHARDC_CPU_TRY(checkSkipFlag(ctx, 5));
  SHARDC_CPU_TRY(readOptionalScalar(ctx, 6, "lr_step", lrStep));
  hasBuffer = ctx.hasInput(2) || ctx.hasOutput(1);
  if (ctx.attrs.getFloat("momentum", 0.0) != 0.0 || hasBuffer)
    SHARDC_CPU_TRY(requireState(ctx, param, 2, 1, "momentum_buffer"));
  return llvm::Error::success();
}

llvm::Error checkAdamOperands(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "param"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "grad"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "new param"));
  const TensorView &param = ctx.inputs[0];
  const TensorView &grad = ctx.inputs[1];
  SHARDC_CPU_TRY(requireType(ctx, grad, param.dtype, "grad"));
  SHARDC_CPU_TRY(requireShape(ctx, grad, param.shape, "grad"));
  SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[0], param.dtype, "new param"));
  SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[0], param.shape, "new param"));
  SHARDC_CPU_TRY(requireState(ctx, param, 2, 1, "exp_avg"));
  SHARDC_CPU_TRY(requireState(ctx, param, 3, 2, "exp_avg_sq"));
  SHARDC_CPU_TRY(requireInput(ctx, 4, "step"));
  SHARDC_CPU_TRY(requireNumel(ctx, ctx.inputs[4], 1, "step"));
  const float *scale, *lrStep;
  SHARDC_CPU_TRY(readGradScale(ctx, 5, scale));
  SHARDC_CPU_TRY(checkSkipFlag(ctx, 6));
  return readOptionalScalar(ctx, 7, "lr_step", lrStep);
}

/// SGDUpdate (ops::SgdStep). With momentum 0 the buffer is left as it is
/// (copied if not aliased).
llvm::Error sgdUpdateKernel(const KernelContext &ctx) {
  bool hasBuffer = false;
  SHARDC_CPU_TRY(checkSgdOperands(ctx, hasBuffer));
  const TensorView &param = ctx.inputs[0];
  const TensorView &grad = ctx.inputs[1];
  double step;
  SHARDC_CPU_TRY(readStep(ctx, 3, step));
  ops::SgdHyper hyper;
  SHARDC_CPU_TRY(sgdHyper(ctx, hyper));
  const float *scale, *lrStep;
  SHARDC_CPU_TRY(readGradScale(ctx, 4, scale));
  SHARDC_CPU_TRY(readOptionalScalar(ctx, 6, "lr_step", lrStep));
  bool skip = false;
  SHARDC_CPU_TRY(readSkip(ctx, 5, skip));
  if (skip) {
    // A skipped step (loss scaling found a non-finite gradient).
    keep(ctx, 0, 0);
    if (hasBuffer)
      keep(ctx, 2, 1);
    return llvm::Error::success();
  }

  return dispatchIn(
      FloatTypes{}, ctx, param.dtype, "param", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *pp = param.as<T>();
        const T *pg = grad.as<T>();
        T *outP = ctx.outputs[0].as<T>();
        int64_t n = param.numel();
        if (hyper.momentum == 0.0) {
          if (hasBuffer && ctx.outputs[1].data != ctx.inputs[2].data && n > 0)
            std::memmove(ctx.outputs[1].data, ctx.inputs[2].data,
                         ctx.inputs[2].bytes());
        }
        auto update = ops::SgdStep<T>::make(hyper, step, scale, lrStep);
        const T *pb = update.hasMomentum ? ctx.inputs[2].as<T>() : nullptr;
        T *outB = update.hasMomentum ? ctx.outputs[1].as<T>() : nullptr;
        for (int64_t i = 0; i < n; ++i) {
          T b = T(0);
          outP[i] = update.apply(pp[i], pg[i], pb ? pb[i] : T(0), b);
          if (outB)
            outB[i] = b;
        }
        return llvm::Error::success();
      });
}

/// AdamUpdate (ops::AdamStep).
llvm::Error adamUpdateKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(checkAdamOperands(ctx));
  const TensorView &param = ctx.inputs[0];
  const TensorView &grad = ctx.inputs[1];
  double step;
  SHARDC_CPU_TRY(readStep(ctx, 4, step));
  bool skip = false;
  SHARDC_CPU_TRY(readSkip(ctx, 6, skip));
  if (step < 1.0 && !skip)
    return ctx.error("step " + std::to_string(step) +
                     " must be at least 1 (it is incremented before the "
                     "update)");
  ops::AdamHyper hyper;
  SHARDC_CPU_TRY(adamHyper(ctx, hyper));
  const float *scale, *lrStep;
  SHARDC_CPU_TRY(readGradScale(ctx, 5, scale));
  SHARDC_CPU_TRY(readOptionalScalar(ctx, 7, "lr_step", lrStep));
  if (skip) {
    for (size_t k = 0; k < 3; ++k)
      keep(ctx, k == 0 ? 0 : k + 1, k);
    return llvm::Error::success();
  }

  return dispatchIn(
      FloatTypes{}, ctx, param.dtype, "param", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *pp = param.as<T>();
        const T *pg = grad.as<T>();
        const T *pm = ctx.inputs[2].as<T>();
        const T *pv = ctx.inputs[3].as<T>();
        T *outP = ctx.outputs[0].as<T>();
        T *outM = ctx.outputs[1].as<T>();
        T *outV = ctx.outputs[2].as<T>();
        auto update = ops::AdamStep<T>::make(hyper, step, scale, lrStep);
        if constexpr (std::is_same_v<T, float>) {
          vec::adam(update, pp, pg, pm, pv, outP, outM, outV, param.numel());
          return llvm::Error::success();
        }
        for (int64_t i = 0, n = param.numel(); i < n; ++i)
          update.apply(pp[i], pg[i], pm[i], pv[i], outP[i], outM[i], outV[i]);
        return llvm::Error::success();
      });
}

llvm::Error readNormType(const KernelContext &ctx, bool &l2) {
  llvm::StringRef kind = ctx.attrs.getString("norm_type", "");
  if (kind != "l2" && kind != "inf")
    return ctx.error("norm_type must be l2 or inf, got '" + kind + "'");
  l2 = kind == "l2";
  return llvm::Error::success();
}

llvm::Error checkPartialNormOperands(const KernelContext &ctx, bool &l2) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "input"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "result"));
  if (ctx.hasInput(1)) {
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[1], DType::F64, "init"));
    SHARDC_CPU_TRY(requireNumel(ctx, ctx.inputs[1], 1, "init"));
  }
  SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[0], DType::F64, "result"));
  SHARDC_CPU_TRY(requireNumel(ctx, ctx.outputs[0], 1, "result"));
  return readNormType(ctx, l2);
}

llvm::Error checkClipCoefficientOperands(const KernelContext &ctx, bool &l2,
                                         double &maxNorm) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "total"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "norm"));
  SHARDC_CPU_TRY(requireOutput(ctx, 1, "coefficient"));
  SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[0], DType::F64, "total"));
  SHARDC_CPU_TRY(requireNumel(ctx, ctx.inputs[0], 1, "total"));
  for (const TensorView *t : {&ctx.outputs[0], &ctx.outputs[1]}) {
    SHARDC_CPU_TRY(requireType(ctx, *t, DType::F32, "norm and coefficient"));
    SHARDC_CPU_TRY(requireNumel(ctx, *t, 1, "norm and coefficient"));
  }
  const float *unscale;
  SHARDC_CPU_TRY(readOptionalScalar(ctx, 1, "unscale", unscale));
  maxNorm = ctx.attrs.getFloat("max_norm", 0.0);
  if (!(std::isfinite(maxNorm) && maxNorm > 0))
    return ctx.error("max_norm must be finite and positive, got " +
                     llvm::formatv("{0}", maxNorm));
  return readNormType(ctx, l2);
}

/// PartialNorm (ops::accumulateNorm), in element order.
llvm::Error partialNormKernel(const KernelContext &ctx) {
  bool l2 = true;
  SHARDC_CPU_TRY(checkPartialNormOperands(ctx, l2));
  double acc = ctx.hasInput(1) ? *ctx.inputs[1].as<double>() : 0.0;
  const TensorView &x = ctx.inputs[0];
  SHARDC_CPU_TRY(dispatchIn(
      FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        for (int64_t i = 0, n = x.numel(); i < n; ++i)
          acc = ops::accumulateNorm(acc, static_cast<double>(px[i]), l2);
        return llvm::Error::success();
      }));
  *ctx.outputs[0].as<double>() = acc;
  return llvm::Error::success();
}

/// ClipCoefficient (ops::clipCoefficient).
llvm::Error clipCoefficientKernel(const KernelContext &ctx) {
  bool l2 = true;
  double maxNorm = 0;
  SHARDC_CPU_TRY(checkClipCoefficientOperands(ctx, l2, maxNorm));
  double total = *ctx.inputs[0].as<double>();
  const float *unscale;
  SHARDC_CPU_TRY(readOptionalScalar(ctx, 1, "unscale", unscale));
  ops::clipCoefficient(total, l2, maxNorm, *ctx.outputs[0].as<float>(),
                       *ctx.outputs[1].as<float>(), unscale);
  return llvm::Error::success();
}

llvm::Error checkLossScaleOperands(const KernelContext &ctx,
                                   ops::LossScaling &ls) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "total"));
  SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[0], DType::F64, "total"));
  SHARDC_CPU_TRY(requireNumel(ctx, ctx.inputs[0], 1, "total"));
  const char *names[] = {"scale", "tracker"};
  for (size_t i = 1; i <= 2; ++i) {
    SHARDC_CPU_TRY(requireInput(ctx, i, names[i - 1]));
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[i], DType::F32, names[i - 1]));
    SHARDC_CPU_TRY(requireNumel(ctx, ctx.inputs[i], 1, names[i - 1]));
  }
  const char *outs[] = {"skip", "unscale", "used", "new_scale", "new_tracker"};
  for (size_t i = 0; i < 5; ++i) {
    SHARDC_CPU_TRY(requireOutput(ctx, i, outs[i]));
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[i],
                               i == 0 ? DType::Bool : DType::F32, outs[i]));
    SHARDC_CPU_TRY(requireNumel(ctx, ctx.outputs[i], 1, outs[i]));
  }
  // No defaults: a plan always carries all three (the loader checks).
  for (const char *name :
       {"growth_factor", "backoff_factor", "growth_interval"})
    if (!ctx.attrs.has(name))
      return ctx.error("attribute '" + llvm::Twine(name) + "' is missing");
  ls.growthFactor = ctx.attrs.getFloat("growth_factor", 0.0);
  ls.backoffFactor = ctx.attrs.getFloat("backoff_factor", 0.0);
  ls.growthInterval = ctx.attrs.getInt("growth_interval", 0);
  if (!(std::isfinite(ls.growthFactor) && ls.growthFactor >= 1.0) ||
      !(ls.backoffFactor > 0.0 && ls.backoffFactor <= 1.0) ||
      ls.growthInterval < 1 || ls.growthInterval > (int64_t(1) << 24))
    return ctx.error("loss scaling needs growth_factor >= 1, backoff_factor "
                     "in (0, 1] and growth_interval in [1, 16777216]");
  return llvm::Error::success();
}

/// LossScale (ops::lossScaleStep). Reads every input before writing: the
/// state outputs may alias the scale and tracker.
llvm::Error lossScaleKernel(const KernelContext &ctx) {
  ops::LossScaling ls;
  SHARDC_CPU_TRY(checkLossScaleOperands(ctx, ls));
  double total = *ctx.inputs[0].as<double>();
  float scale = *ctx.inputs[1].as<float>();
  float tracker = *ctx.inputs[2].as<float>();
  bool skip;
  float unscale, used, newScale, newTracker;
  ops::lossScaleStep(ls, total, scale, tracker, skip, unscale, used, newScale,
                     newTracker);
  *ctx.outputs[0].as<uint8_t>() = skip ? 1 : 0;
  *ctx.outputs[1].as<float>() = unscale;
  *ctx.outputs[2].as<float>() = used;
  *ctx.outputs[3].as<float>() = newScale;
  *ctx.outputs[4].as<float>() = newTracker;
  return llvm::Error::success();
}

/// x + 1 (the optimizer's step counter), in place; x itself when the skip
/// operand is true.
llvm::Error incrementKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "x"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "y"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "y"));
  bool skip = false;
  SHARDC_CPU_TRY(readSkip(ctx, 1, skip));
  if (skip) {
    keep(ctx, 0, 0);
    return llvm::Error::success();
  }
  using Types = DTypeList<DType::F32, DType::F64, DType::I64>;
  return dispatchIn(Types{}, ctx, x.dtype, "x", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *px = x.as<T>();
    T *py = y.as<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      py[i] = px[i] + T(1);
    return llvm::Error::success();
  });
}

} // namespace shardc::rt::cpu
