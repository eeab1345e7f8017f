//===- Loss.cpp - SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss ------===//
//
// Both follow ONNX's reference: per target element the loss is
// -weight[t] * logp[n, t, d] (0 where t == ignore_index); "mean" divides the
// sum by the sum of the weights of the non-ignored targets (their count
// without weights).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/VecMath.h"
#include "runtime/kernels/LossOps.h"

#include <type_traits>

namespace shardc::rt::cpu {

namespace {

llvm::Error readReduction(const KernelContext &ctx, LossReduction &reduction) {
  llvm::StringRef red = ctx.attrs.getString("reduction", "mean");
  if (red == "none")
    reduction = LossReduction::None;
  else if (red == "sum")
    reduction = LossReduction::Sum;
  else if (red == "mean")
    reduction = LossReduction::Mean;
  else
    return ctx.error("unknown reduction '" + red + "'");
  return llvm::Error::success();
}

/// The checks both the loss and its gradient make of the scores, targets
/// and weights; `loss` is the loss output (forward) or the dLoss input.
llvm::Error checkLossCommon(const KernelContext &ctx, bool softmax,
                            const TensorView &x, const TensorView &target,
                            const TensorView &loss, llvm::StringRef lossName,
                            size_t weightsInput, LossGeometry &g) {
  llvm::StringRef inName = softmax ? "scores" : "input";
  llvm::StringRef targetName = softmax ? "labels" : "target";
  SHARDC_CPU_TRY(readReduction(ctx, g.reduction));
  g.hasIgnore = ctx.attrs.has("ignore_index");
  g.ignoreIndex = ctx.attrs.getInt("ignore_index", 0);
  g.hasWeights = ctx.hasInput(weightsInput);
  if (x.rank() < 2)
    return ctx.error("'" + inName + "' of shape " + shapeToString(x.shape) +
                     " must be (N, C, ...)");
  g.batch = x.shape[0];
  g.classes = x.shape[1];
  g.inner = product(x.shape, 2, x.rank());
  llvm::SmallVector<int64_t, 6> targetShape = {g.batch};
  targetShape.append(x.shape.begin() + 2, x.shape.end());
  SHARDC_CPU_TRY(requireShape(ctx, target, targetShape, targetName));
  if (target.dtype != DType::I64 && target.dtype != DType::I32)
    return unsupportedType(ctx, target.dtype, "'" + targetName + "'");
  g.wideTargets = target.dtype == DType::I64;
  SHARDC_CPU_TRY(requireType(ctx, loss, x.dtype, lossName));
  if (g.reduction == LossReduction::None)
    SHARDC_CPU_TRY(requireShape(ctx, loss, targetShape, lossName));
  else
    SHARDC_CPU_TRY(requireNumel(ctx, loss, 1, lossName));
  if (g.hasWeights) {
    const TensorView &w = ctx.inputs[weightsInput];
    SHARDC_CPU_TRY(requireType(ctx, w, x.dtype, "weights"));
    SHARDC_CPU_TRY(requireShape(ctx, w, {g.classes}, "weights"));
  }
  return dispatchIn(FloatTypes{}, ctx, x.dtype, "'" + inName + "'",
                    [](auto) { return llvm::Error::success(); });
}

/// The weight of counted target `t` (checked to be a class).
template <typename T> double classWeight(const T *w, int64_t t) {
  return w ? static_cast<double>(w[t]) : 1.0;
}

/// Whether a float softmax loss over contiguous class lines (D = 1, the
/// usual (N, C) logits) takes the vectorized line functions below.
template <typename T> bool lineKernel(bool softmax, const LossGeometry &g) {
  return std::is_same_v<T, float> && softmax && g.inner == 1;
}

/// ops::lossTerm over one such line, vectorized (VecMath.h): the maximum,
/// the sum of exponentials accumulated in float lanes and then in double,
/// and log p[c] = x[c] - max - log(sum) in double. An infinite maximum is
/// not subtracted; t < 0 (a target not counted) gives 0 and only log_prob.
double lineLossTerm(const float *xn, int64_t classes, int64_t t, double w,
                    float *logProbN) {
  float maxV = vec::softmaxShift(xn, classes);
  double logSum = std::log(vec::expSum(xn, maxV, nullptr, classes));
  if (logProbN)
    for (int64_t c = 0; c < classes; ++c)
      logProbN[c] =
          static_cast<float>(static_cast<double>(xn[c]) - maxV - logSum);
  return t < 0 ? 0.0 : -(static_cast<double>(xn[t]) - maxV - logSum) * w;
}

/// dx[c] = (p[c] - (c == t)) * g over one contiguous class line: the
/// exponentials go straight into dx, then one scaling pass.
void lineLossTermGrad(const float *xn, float *dn, int64_t classes, int64_t t,
                      double g) {
  float maxV = vec::softmaxShift(xn, classes);
  double sum = vec::expSum(xn, maxV, dn, classes);
  float et = dn[t];
  vec::scale(dn, static_cast<float>(g / sum), classes);
  dn[t] = static_cast<float>((et / sum - 1.0) * g);
}

/// lineLossTerm and lineLossTermGrad over one line from the same
/// exponentials, with their bits: the loss term is returned, the gradient
/// for `g` written to dn.
double lineLossTermWithGrad(const float *xn, float *dn, int64_t classes,
                            int64_t t, double w, double g) {
  float maxV = vec::softmaxShift(xn, classes);
  double sum = vec::expSum(xn, maxV, dn, classes);
  double logSum = std::log(sum);
  float et = dn[t];
  vec::scale(dn, static_cast<float>(g / sum), classes);
  dn[t] = static_cast<float>((et / sum - 1.0) * g);
  return -(static_cast<double>(xn[t]) - maxV - logSum) * w;
}

/// The weight sum of the counted targets, failing at the first target
/// outside the classes.
template <typename T>
llvm::Error countedWeightSum(const KernelContext &ctx, const LossGeometry &g,
                             const TensorView &target, const T *pw,
                             double &weightSum) {
  weightSum = 0.0;
  for (int64_t i = 0, e = g.batch * g.inner; i < e; ++i) {
    int64_t t = ops::loadIndex(target.data, g.wideTargets, i);
    if (!ops::targetCounted(t, g.hasIgnore, g.ignoreIndex))
      continue;
    if (!ops::targetInRange(t, g.classes))
      return targetOutOfRange(ctx, t, i, g.classes);
    weightSum += classWeight(pw, t);
  }
  return llvm::Error::success();
}

llvm::Error lossImpl(const KernelContext &ctx, bool softmax) {
  LossGeometry g;
  SHARDC_CPU_TRY(checkLoss(ctx, softmax, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &target = ctx.inputs[1];
  const TensorView &loss = ctx.outputs[0];
  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *pw = g.hasWeights ? ctx.inputs[2].as<T>() : nullptr;
        T *pl = loss.as<T>();
        T *logProb = g.wantLogProb ? ctx.outputs[1].as<T>() : nullptr;
        double total = 0.0, weightSum = 0.0;
        for (int64_t n = 0; n < g.batch; ++n)
          for (int64_t d = 0; d < g.inner; ++d) {
            int64_t i = n * g.inner + d;
            int64_t base = n * g.classes * g.inner + d;
            int64_t t = ops::loadIndex(target.data, g.wideTargets, i);
            double value = 0.0, weight = 0.0;
            bool counted = ops::targetCounted(t, g.hasIgnore, g.ignoreIndex);
            if (counted && !ops::targetInRange(t, g.classes))
              return targetOutOfRange(ctx, t, i, g.classes);
            if (counted)
              weight = classWeight(pw, t);
            if (lineKernel<T>(softmax, g)) {
              if constexpr (std::is_same_v<T, float>)
                if (counted || logProb)
                  value = lineLossTerm(x.as<T>() + base, g.classes,
                                       counted ? t : -1, weight,
                                       logProb ? logProb + base : nullptr);
            } else if (counted) {
              value =
                  ops::lossTerm(x.as<T>() + base, g.classes, g.inner, t, weight,
                                softmax, logProb ? logProb + base : nullptr);
            } else if (logProb) {
              ops::logProbOnly(x.as<T>() + base, g.classes, g.inner,
                               logProb + base);
            }
            if (g.reduction == LossReduction::None)
              pl[i] = static_cast<T>(value);
            total += value;
            weightSum += weight;
          }
        if (g.reduction == LossReduction::Sum)
          pl[0] = static_cast<T>(total);
        else if (g.reduction == LossReduction::Mean)
          pl[0] = static_cast<T>(total / weightSum); // 0/0 is NaN, as ONNX.
        return llvm::Error::success();
      });
}

/// Gradient of lossImpl's loss w.r.t. its first input (ops::lossTermGrad):
/// each counted position's g is its weight times dLoss (per element for
/// "none"), dLoss for "sum", dLoss / sum(weights of counted targets) for
/// "mean".
llvm::Error lossGradImpl(const KernelContext &ctx, bool softmax) {
  LossGeometry g;
  SHARDC_CPU_TRY(checkLossGrad(ctx, softmax, g));
  const TensorView &dLoss = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &target = ctx.inputs[2];
  const TensorView &dx = ctx.outputs[0];
  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *pw = g.hasWeights ? ctx.inputs[3].as<T>() : nullptr;
        const T *pdl = dLoss.as<T>();
        double weightSum = 0.0;
        SHARDC_CPU_TRY(countedWeightSum(ctx, g, target, pw, weightSum));
        double scale = 0.0;
        if (g.reduction == LossReduction::Sum)
          scale = pdl[0];
        else if (g.reduction == LossReduction::Mean)
          scale = pdl[0] / weightSum;
        for (int64_t n = 0; n < g.batch; ++n)
          for (int64_t d = 0; d < g.inner; ++d) {
            int64_t i = n * g.inner + d;
            int64_t base = n * g.classes * g.inner + d;
            int64_t t = ops::loadIndex(target.data, g.wideTargets, i);
            bool counted = ops::targetCounted(t, g.hasIgnore, g.ignoreIndex);
            double gi = 0.0; // -dLoss/d(lp[t]) for this position.
            if (counted)
              gi = classWeight(pw, t) * (g.reduction == LossReduction::None
                                             ? static_cast<double>(pdl[i])
                                             : scale);
            if (counted && lineKernel<T>(softmax, g)) {
              if constexpr (std::is_same_v<T, float>)
                lineLossTermGrad(x.as<T>() + base, dx.as<T>() + base, g.classes,
                                 t, gi);
              continue;
            }
            ops::lossTermGrad(x.as<T>() + base, dx.as<T>() + base, g.classes,
                              g.inner, t, counted, gi, softmax);
          }
        return llvm::Error::success();
      });
}

/// SoftmaxCrossEntropyLossWithGrad: lossImpl's loss and lossGradImpl's
/// gradient for dLoss = 1, each with its bits, from one pass over a float
/// line (the exponentials computed once), else the per-position functions
/// one after the other.
llvm::Error lossWithGradImpl(const KernelContext &ctx) {
  LossGeometry g;
  SHARDC_CPU_TRY(checkLossWithGrad(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &target = ctx.inputs[1];
  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *pw = g.hasWeights ? ctx.inputs[2].as<T>() : nullptr;
        T *dx = ctx.outputs[1].as<T>();
        double weightSum = 0.0;
        SHARDC_CPU_TRY(countedWeightSum(ctx, g, target, pw, weightSum));
        // lossGradImpl's scale for dLoss = 1.
        double scale =
            g.reduction == LossReduction::Mean ? 1.0 / weightSum : 1.0;
        double total = 0.0;
        for (int64_t n = 0; n < g.batch; ++n)
          for (int64_t d = 0; d < g.inner; ++d) {
            int64_t i = n * g.inner + d;
            int64_t base = n * g.classes * g.inner + d;
            int64_t t = ops::loadIndex(target.data, g.wideTargets, i);
            bool counted = ops::targetCounted(t, g.hasIgnore, g.ignoreIndex);
            double weight = counted ? classWeight(pw, t) : 0.0;
            double gi = counted ? weight * scale : 0.0;
            if (counted && lineKernel<T>(true, g)) {
              if constexpr (std::is_same_v<T, float>)
                total += lineLossTermWithGrad(x.as<T>() + base, dx + base,
                                              g.classes, t, weight, gi);
              continue;
            }
            if (counted)
              total +=
                  ops::lossTerm(x.as<T>() + base, g.classes, g.inner, t, weight,
                                /*softmax=*/true, static_cast<T *>(nullptr));
            ops::lossTermGrad(x.as<T>() + base, dx + base, g.classes, g.inner,
                              t, counted, gi, /*softmax=*/true);
          }
        T *pl = ctx.outputs[0].as<T>();
        if (g.reduction == LossReduction::Sum)
          pl[0] = static_cast<T>(total);
        else
          pl[0] = static_cast<T>(total / weightSum); // 0/0 is NaN, as ONNX.
        return llvm::Error::success();
      });
}

} // namespace

llvm::Error checkLossWithGrad(const KernelContext &ctx, LossGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "scores"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "labels"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "loss"));
  SHARDC_CPU_TRY(requireOutput(ctx, 1, "scores_grad"));
  const TensorView &x = ctx.inputs[0];
  SHARDC_CPU_TRY(checkLossCommon(ctx, /*softmax=*/true, x, ctx.inputs[1],
                                 ctx.outputs[0], "loss", 2, g));
  if (g.reduction == LossReduction::None)
    return ctx.error("takes reduction sum or mean (a scalar loss)");
  SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[1], x.dtype, "scores_grad"));
  return requireShape(ctx, ctx.outputs[1], x.shape, "scores_grad");
}

llvm::Error checkLoss(const KernelContext &ctx, bool softmax, LossGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, softmax ? "scores" : "input"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, softmax ? "labels" : "target"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "loss"));
  const TensorView &x = ctx.inputs[0];
  SHARDC_CPU_TRY(checkLossCommon(ctx, softmax, x, ctx.inputs[1], ctx.outputs[0],
                                 "loss", 2, g));
  g.wantLogProb = softmax && ctx.hasOutput(1);
  if (g.wantLogProb) {
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[1], x.dtype, "log_prob"));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[1], x.shape, "log_prob"));
  }
  return llvm::Error::success();
}

llvm::Error checkLossGrad(const KernelContext &ctx, bool softmax,
                          LossGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dLoss"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, softmax ? "scores" : "input"));
  SHARDC_CPU_TRY(requireInput(ctx, 2, softmax ? "labels" : "target"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dX"));
  const TensorView &x = ctx.inputs[1];
  SHARDC_CPU_TRY(checkLossCommon(ctx, softmax, x, ctx.inputs[2], ctx.inputs[0],
                                 "dLoss", 3, g));
  SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[0], x.dtype, "dX"));
  return requireShape(ctx, ctx.outputs[0], x.shape, "dX");
}

llvm::Error targetOutOfRange(const KernelContext &ctx, int64_t target,
                             int64_t position, int64_t classes) {
  return ctx.error("target " + llvm::Twine(target) + " at position " +
                   llvm::Twine(position) + " is outside [0, " +
                   llvm::Twine(classes) + ")");
}

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

llvm::Error softmaxCrossEntropyLossWithGradKernel(const KernelContext &ctx) {
  return lossWithGradImpl(ctx);
}

} // namespace shardc::rt::cpu
