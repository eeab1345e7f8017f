//===- Optimizer.cpp - SGDUpdate, AdamUpdate, Increment -------------------===//
//
// The optimizer steps the optimizer pass emits, following PyTorch 1.13's
// single-tensor ("for-loop") implementations of torch.optim.SGD, Adam and
// AdamW. They run in place: the executor hands outputs that alias the state
// inputs (param, momentum buffer, moments), so every element is read before it
// is written and nothing else is touched. Non-aliased outputs work too.
//
// Scalars follow PyTorch's split: what Python computes (bias corrections, step
// size, 1 - beta) is computed in double, then converted to the element type
// once, as ATen converts a Python scalar operand; the elementwise math runs in
// the element type with ATen's operation order.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"

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

/// torch.optim.SGD (maximize=False), per element:
///   d = grad + weight_decay * param                  (if weight_decay != 0)
///   buf = step <= 1 ? d : momentum * buf + (1 - dampening) * d
///   d = nesterov ? d + momentum * buf : buf          (if momentum != 0)
///   param = param - lr * d
/// With momentum 0 the buffer is left as it is (copied if not aliased).
llvm::Error sgdUpdateKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "param"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "grad"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "new param"));
  const TensorView &param = ctx.inputs[0];
  const TensorView &grad = ctx.inputs[1];
  SHARDC_CPU_TRY(requireType(ctx, grad, param.dtype, "grad"));
  SHARDC_CPU_TRY(requireShape(ctx, grad, param.shape, "grad"));
  SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[0], param.dtype, "new param"));
  SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[0], param.shape, "new param"));
  double step;
  SHARDC_CPU_TRY(readStep(ctx, 3, step));
  double lr = ctx.attrs.getFloat("lr", 0.01);
  double momentum = ctx.attrs.getFloat("momentum", 0.0);
  double dampening = ctx.attrs.getFloat("dampening", 0.0);
  double weightDecay = ctx.attrs.getFloat("weight_decay", 0.0);
  bool nesterov = ctx.attrs.getInt("nesterov", 0) != 0;
  bool hasBuffer = ctx.hasInput(2) || ctx.hasOutput(1);
  if (momentum != 0.0 || hasBuffer)
    SHARDC_CPU_TRY(requireState(ctx, param, 2, 1, "momentum_buffer"));
  bool first = step <= 1.0;

  return dispatchIn(
      FloatTypes{}, ctx, param.dtype, "param", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *pp = param.as<T>();
        const T *pg = grad.as<T>();
        T *outP = ctx.outputs[0].as<T>();
        int64_t n = param.numel();
        if (momentum == 0.0) {
          if (hasBuffer && ctx.outputs[1].data != ctx.inputs[2].data && n > 0)
            std::memmove(ctx.outputs[1].data, ctx.inputs[2].data,
                         ctx.inputs[2].bytes());
        }
        T wd = static_cast<T>(weightDecay);
        T mom = static_cast<T>(momentum);
        T oneMinusDamp = static_cast<T>(1.0 - dampening);
        T negLr = static_cast<T>(-lr);
        const T *pb = momentum != 0.0 ? ctx.inputs[2].as<T>() : nullptr;
        T *outB = momentum != 0.0 ? ctx.outputs[1].as<T>() : nullptr;
        for (int64_t i = 0; i < n; ++i) {
          T p = pp[i];
          T d = pg[i];
          if (weightDecay != 0.0)
            d = d + wd * p;
          if (momentum != 0.0) {
            T b = first ? d : pb[i] * mom + oneMinusDamp * d;
            outB[i] = b;
            d = nesterov ? d + mom * b : b;
          }
          outP[i] = p + negLr * d;
        }
        return llvm::Error::success();
      });
}

/// torch.optim.Adam / AdamW (amsgrad=False, maximize=False), per element:
///   AdamW: param *= 1 - lr * weight_decay
///   Adam:  grad += weight_decay * param              (if weight_decay != 0)
///   exp_avg = beta1 * exp_avg + (1 - beta1) * grad
///   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
///   denom = sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps
///   param -= lr / (1 - beta1^step) * exp_avg / denom
llvm::Error adamUpdateKernel(const KernelContext &ctx) {
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
  double step;
  SHARDC_CPU_TRY(readStep(ctx, 4, step));
  double lr = ctx.attrs.getFloat("lr", 1e-3);
  double beta1 = ctx.attrs.getFloat("beta1", 0.9);
  double beta2 = ctx.attrs.getFloat("beta2", 0.999);
  double eps = ctx.attrs.getFloat("eps", 1e-8);
  double weightDecay = ctx.attrs.getFloat("weight_decay", 0.0);
  bool decoupled = ctx.attrs.getInt("decoupled", 0) != 0;
  if (step < 1.0)
    return ctx.error("step " + std::to_string(step) +
                     " must be at least 1 (it is incremented before the "
                     "update)");
  // What torch computes in Python floats.
  double biasCorrection1 = 1.0 - std::pow(beta1, step);
  double biasCorrection2 = 1.0 - std::pow(beta2, step);
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = std::sqrt(biasCorrection2);

  return dispatchIn(FloatTypes{}, ctx, param.dtype, "param",
                    [&](auto tag) -> llvm::Error {
                      using T = typename decltype(tag)::type;
                      const T *pp = param.as<T>();
                      const T *pg = grad.as<T>();
                      const T *pm = ctx.inputs[2].as<T>();
                      const T *pv = ctx.inputs[3].as<T>();
                      T *outP = ctx.outputs[0].as<T>();
                      T *outM = ctx.outputs[1].as<T>();
                      T *outV = ctx.outputs[2].as<T>();
                      T decay = static_cast<T>(1.0 - lr * weightDecay);
                      T wd = static_cast<T>(weightDecay);
                      T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
                      T oneMinusB1 = static_cast<T>(1.0 - beta1);
                      T oneMinusB2 = static_cast<T>(1.0 - beta2);
                      T bc2Sqrt = static_cast<T>(biasCorrection2Sqrt);
                      T epsT = static_cast<T>(eps);
                      T negStepSize = static_cast<T>(-stepSize);
                      for (int64_t i = 0, n = param.numel(); i < n; ++i) {
                        T p = pp[i];
                        T g = pg[i];
                        if (decoupled)
                          p = p * decay;
                        else if (weightDecay != 0.0)
                          g = g + wd * p;
                        T m = pm[i] * b1 + oneMinusB1 * g;
                        T v = pv[i] * b2 + oneMinusB2 * g * g;
                        T denom = std::sqrt(v) / bc2Sqrt + epsT;
                        outM[i] = m;
                        outV[i] = v;
                        outP[i] = p + negStepSize * m / denom;
                      }
                      return llvm::Error::success();
                    });
}

/// x + 1 (the optimizer's step counter), in place.
llvm::Error incrementKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "x"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "y"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "y"));
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
