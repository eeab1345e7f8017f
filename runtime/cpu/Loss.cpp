//===- Loss.cpp - SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss ------===//
//
// Both follow ONNX's reference: per target element the loss is
// -weight[t] * logp[n, t, d] (0 where t == ignore_index); "mean" divides the
// sum by the sum of the weights of the non-ignored targets (their count
// without weights).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"

#include <algorithm>
#include <vector>

namespace shardc::rt::cpu {

namespace {

enum class Reduction { None, Sum, Mean };

llvm::Error readReduction(const KernelContext &ctx, Reduction &reduction) {
  llvm::StringRef red = ctx.attrs.getString("reduction", "mean");
  if (red == "none")
    reduction = Reduction::None;
  else if (red == "sum")
    reduction = Reduction::Sum;
  else if (red == "mean")
    reduction = Reduction::Mean;
  else
    return ctx.error("unknown reduction '" + red + "'");
  return llvm::Error::success();
}

/// Element `i` of an i64 or i32 target tensor.
int64_t loadTarget(const TensorView &target, int64_t i) {
  return target.dtype == DType::I64 ? target.as<int64_t>()[i]
                                    : target.as<int32_t>()[i];
}

llvm::Error lossImpl(const KernelContext &ctx, bool softmax) {
  llvm::StringRef inName = softmax ? "scores" : "input";
  llvm::StringRef targetName = softmax ? "labels" : "target";
  SHARDC_CPU_TRY(requireInput(ctx, 0, inName));
  SHARDC_CPU_TRY(requireInput(ctx, 1, targetName));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "loss"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &target = ctx.inputs[1];
  const TensorView &loss = ctx.outputs[0];
  bool hasWeights = ctx.hasInput(2);
  bool wantLogProb = softmax && ctx.hasOutput(1);

  Reduction reduction;
  SHARDC_CPU_TRY(readReduction(ctx, reduction));
  bool hasIgnore = ctx.attrs.has("ignore_index");
  int64_t ignoreIndex = ctx.attrs.getInt("ignore_index", 0);

  if (x.rank() < 2)
    return ctx.error("'" + inName + "' of shape " + shapeToString(x.shape) +
                     " must be (N, C, ...)");
  int64_t batch = x.shape[0], classes = x.shape[1];
  int64_t inner = product(x.shape, 2, x.rank());
  llvm::SmallVector<int64_t, 6> targetShape = {batch};
  targetShape.append(x.shape.begin() + 2, x.shape.end());
  SHARDC_CPU_TRY(requireShape(ctx, target, targetShape, targetName));
  if (target.dtype != DType::I64 && target.dtype != DType::I32)
    return unsupportedType(ctx, target.dtype, "'" + targetName + "'");
  SHARDC_CPU_TRY(requireType(ctx, loss, x.dtype, "loss"));
  if (reduction == Reduction::None)
    SHARDC_CPU_TRY(requireShape(ctx, loss, targetShape, "loss"));
  else
    SHARDC_CPU_TRY(requireNumel(ctx, loss, 1, "loss"));
  if (hasWeights) {
    SHARDC_CPU_TRY(requireInput(ctx, 2, "weights"));
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[2], x.dtype, "weights"));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[2], {classes}, "weights"));
  }
  if (wantLogProb) {
    SHARDC_CPU_TRY(requireOutput(ctx, 1, "log_prob"));
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[1], x.dtype, "log_prob"));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[1], x.shape, "log_prob"));
  }

  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "'" + inName + "'",
      [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        const T *pw = hasWeights ? ctx.inputs[2].as<T>() : nullptr;
        T *pl = loss.as<T>();
        // Log-probabilities of one image (C x inner), in double.
        std::vector<double> logp(
            static_cast<size_t>(softmax ? classes * inner : 0));
        double total = 0.0, weightSum = 0.0;
        for (int64_t n = 0; n < batch; ++n) {
          const T *xn = px + n * classes * inner;
          if (softmax) {
            for (int64_t d = 0; d < inner; ++d) {
              double maxV = -std::numeric_limits<double>::infinity();
              for (int64_t c = 0; c < classes; ++c)
                maxV = std::max<double>(maxV, xn[c * inner + d]);
              if (std::isinf(maxV))
                maxV = 0.0;
              double sum = 0.0;
              for (int64_t c = 0; c < classes; ++c)
                sum += std::exp(xn[c * inner + d] - maxV);
              double logSum = std::log(sum);
              for (int64_t c = 0; c < classes; ++c)
                logp[c * inner + d] = xn[c * inner + d] - maxV - logSum;
            }
            if (wantLogProb) {
              T *out = ctx.outputs[1].as<T>() + n * classes * inner;
              for (int64_t i = 0; i < classes * inner; ++i)
                out[i] = static_cast<T>(logp[i]);
            }
          }
          for (int64_t d = 0; d < inner; ++d) {
            int64_t i = n * inner + d;
            int64_t t = loadTarget(target, i);
            double value = 0.0, weight = 0.0;
            if (!hasIgnore || t != ignoreIndex) {
              if (t < 0 || t >= classes)
                return ctx.error("target " + llvm::Twine(t) + " at position " +
                                 llvm::Twine(i) + " is outside [0, " +
                                 llvm::Twine(classes) + ")");
              weight = pw ? static_cast<double>(pw[t]) : 1.0;
              double lp = softmax ? logp[t * inner + d]
                                  : static_cast<double>(xn[t * inner + d]);
              value = -lp * weight;
            }
            if (reduction == Reduction::None)
              pl[i] = static_cast<T>(value);
            total += value;
            weightSum += weight;
          }
        }
        if (reduction == Reduction::Sum)
          pl[0] = static_cast<T>(total);
        else if (reduction == Reduction::Mean)
          pl[0] = static_cast<T>(total / weightSum); // 0/0 is NaN, as ONNX.
        return llvm::Error::success();
      });
}

/// Gradient of lossImpl's loss w.r.t. its first input. Per target element
/// with class t and weight w[t] (0 where ignored) the loss is -w[t] * lp[t]
/// with lp the log-probabilities (softmax) or the input itself (NLL); its
/// scale s is dLoss (per element for "none"), dLoss for "sum" and dLoss /
/// sum(weights of non-ignored targets) for "mean". Then
///   softmax: dScores[c] = (softmax[c] - (c == t)) * w[t] * s
///   NLL:     dInput[c] = -(c == t) * w[t] * s
/// which is what PyTorch's nll_loss backward followed by log_softmax
/// backward computes.
llvm::Error lossGradImpl(const KernelContext &ctx, bool softmax) {
  llvm::StringRef inName = softmax ? "scores" : "input";
  llvm::StringRef targetName = softmax ? "labels" : "target";
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dLoss"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, inName));
  SHARDC_CPU_TRY(requireInput(ctx, 2, targetName));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dX"));
  const TensorView &dLoss = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &target = ctx.inputs[2];
  const TensorView &dx = ctx.outputs[0];
  bool hasWeights = ctx.hasInput(3);
  Reduction reduction;
  SHARDC_CPU_TRY(readReduction(ctx, reduction));
  bool hasIgnore = ctx.attrs.has("ignore_index");
  int64_t ignoreIndex = ctx.attrs.getInt("ignore_index", 0);

  if (x.rank() < 2)
    return ctx.error("'" + inName + "' of shape " + shapeToString(x.shape) +
                     " must be (N, C, ...)");
  int64_t batch = x.shape[0], classes = x.shape[1];
  int64_t inner = product(x.shape, 2, x.rank());
  llvm::SmallVector<int64_t, 6> targetShape = {batch};
  targetShape.append(x.shape.begin() + 2, x.shape.end());
  SHARDC_CPU_TRY(requireShape(ctx, target, targetShape, targetName));
  if (target.dtype != DType::I64 && target.dtype != DType::I32)
    return unsupportedType(ctx, target.dtype, "'" + targetName + "'");
  SHARDC_CPU_TRY(requireType(ctx, dLoss, x.dtype, "dLoss"));
  if (reduction == Reduction::None)
    SHARDC_CPU_TRY(requireShape(ctx, dLoss, targetShape, "dLoss"));
  else
    SHARDC_CPU_TRY(requireNumel(ctx, dLoss, 1, "dLoss"));
  SHARDC_CPU_TRY(requireType(ctx, dx, x.dtype, "dX"));
  SHARDC_CPU_TRY(requireShape(ctx, dx, x.shape, "dX"));
  if (hasWeights) {
    SHARDC_CPU_TRY(requireInput(ctx, 3, "weights"));
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[3], x.dtype, "weights"));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[3], {classes}, "weights"));
  }

  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "'" + inName + "'",
      [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        const T *pw = hasWeights ? ctx.inputs[3].as<T>() : nullptr;
        const T *pdl = dLoss.as<T>();
        T *pdx = dx.as<T>();
        // Check the targets and sum the weights of the counted ones.
        double weightSum = 0.0;
        for (int64_t i = 0, e = batch * inner; i < e; ++i) {
          int64_t t = loadTarget(target, i);
          if (hasIgnore && t == ignoreIndex)
            continue;
          if (t < 0 || t >= classes)
            return ctx.error("target " + llvm::Twine(t) + " at position " +
                             llvm::Twine(i) + " is outside [0, " +
                             llvm::Twine(classes) + ")");
          weightSum += pw ? static_cast<double>(pw[t]) : 1.0;
        }
        double scale = 0.0;
        if (reduction == Reduction::Sum)
          scale = pdl[0];
        else if (reduction == Reduction::Mean)
          scale = pdl[0] / weightSum;
        std::vector<double> prob(static_cast<size_t>(softmax ? classes : 0));
        for (int64_t n = 0; n < batch; ++n) {
          const T *xn = px + n * classes * inner;
          T *dn = pdx + n * classes * inner;
          for (int64_t d = 0; d < inner; ++d) {
            int64_t i = n * inner + d;
            int64_t t = loadTarget(target, i);
            bool counted = !hasIgnore || t != ignoreIndex;
            double g = 0.0; // -dLoss/d(lp[t]) for this element.
            if (counted) {
              double w = pw ? static_cast<double>(pw[t]) : 1.0;
              g = w * (reduction == Reduction::None
                           ? static_cast<double>(pdl[i])
                           : scale);
            }
            if (!softmax) {
              for (int64_t c = 0; c < classes; ++c)
                dn[c * inner + d] = T(0);
              if (counted)
                dn[t * inner + d] = static_cast<T>(-g);
              continue;
            }
            if (!counted) {
              for (int64_t c = 0; c < classes; ++c)
                dn[c * inner + d] = T(0);
              continue;
            }
            double maxV = -std::numeric_limits<double>::infinity();
            for (int64_t c = 0; c < classes; ++c)
              maxV = std::max<double>(maxV, xn[c * inner + d]);
            if (std::isinf(maxV))
              maxV = 0.0;
            double sum = 0.0;
            for (int64_t c = 0; c < classes; ++c) {
              prob[c] = std::exp(xn[c * inner + d] - maxV);
              sum += prob[c];
            }
            for (int64_t c = 0; c < classes; ++c) {
              double p = prob[c] / sum;
              dn[c * inner + d] = static_cast<T>((c == t ? p - 1.0 : p) * g);
            }
          }
        }
        return llvm::Error::success();
      });
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

} // namespace shardc::rt::cpu
