//===- Normalization.cpp - Softmax, LayerNorm, BatchNorm ------------------===//
//
// Reductions along the normalized axes accumulate in double.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"

#include <vector>

namespace shardc::rt::cpu {

namespace {

llvm::Error softmaxImpl(const KernelContext &ctx, bool logarithm) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "input"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "output"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "output"));
  int64_t rank = x.rank();
  int64_t axis = ctx.attrs.getInt("axis", -1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return ctx.error("axis " + llvm::Twine(ctx.attrs.getInt("axis", -1)) +
                     " out of range for rank " + llvm::Twine(rank));
  int64_t outer = product(x.shape, 0, axis);
  int64_t n = x.shape[axis];
  int64_t inner = product(x.shape, axis + 1, rank);
  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            const T *px = x.as<T>() + o * n * inner + i;
            T *py = y.as<T>() + o * n * inner + i;
            double maxV = -std::numeric_limits<double>::infinity();
            for (int64_t j = 0; j < n; ++j)
              maxV = std::max<double>(maxV, px[j * inner]);
            if (std::isinf(maxV))
              maxV = 0.0; // All -inf (or +inf): avoid inf - inf.
            double sum = 0.0;
            for (int64_t j = 0; j < n; ++j)
              sum += std::exp(static_cast<double>(px[j * inner]) - maxV);
            if (logarithm) {
              double logSum = std::log(sum);
              for (int64_t j = 0; j < n; ++j)
                py[j * inner] = static_cast<T>(
                    static_cast<double>(px[j * inner]) - maxV - logSum);
            } else {
              for (int64_t j = 0; j < n; ++j)
                py[j * inner] = static_cast<T>(
                    std::exp(static_cast<double>(px[j * inner]) - maxV) / sum);
            }
          }
        }
        return llvm::Error::success();
      });
}

/// Expands `v` (numpy-broadcastable to `shape`, after dropping leading 1s
/// beyond its rank) to a dense vector of prod(shape) doubles.
template <typename T>
llvm::Error expandParam(const KernelContext &ctx, const TensorView &v,
                        llvm::ArrayRef<int64_t> shape, llvm::StringRef name,
                        std::vector<double> &out) {
  llvm::ArrayRef<int64_t> vShape = v.shape;
  while (vShape.size() > shape.size() && vShape.front() == 1)
    vShape = vShape.drop_front();
  llvm::SmallVector<int64_t, 6> strides;
  if (!broadcastStrides(vShape, shape, strides))
    return ctx.error("'" + name + "' of shape " + shapeToString(v.shape) +
                     " does not broadcast to the normalized shape " +
                     shapeToString(shape));
  out.assign(static_cast<size_t>(numElements(shape)), 0.0);
  const T *pv = v.as<T>();
  std::array<llvm::ArrayRef<int64_t>, 1> s = {strides};
  forEachRow<1>(
      shape, s,
      [&](int64_t o, const int64_t *in, int64_t n, const int64_t *rs) {
        for (int64_t i = 0; i < n; ++i)
          out[o + i] = pv[in[0] + i * rs[0]];
      });
  return llvm::Error::success();
}

/// Stores `v` into element `i` of an f32 or f64 statistics output.
void storeStat(const TensorView &t, int64_t i, double v) {
  if (t.dtype == DType::F32)
    t.as<float>()[i] = static_cast<float>(v);
  else
    t.as<double>()[i] = v;
}

llvm::Error checkStatOutput(const KernelContext &ctx, size_t i,
                            llvm::StringRef name, int64_t numel) {
  SHARDC_CPU_TRY(requireOutput(ctx, i, name));
  const TensorView &t = ctx.outputs[i];
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    return unsupportedType(ctx, t.dtype, "'" + name + "'");
  return requireNumel(ctx, t, numel, name);
}

} // namespace

llvm::Error softmaxKernel(const KernelContext &ctx) {
  return softmaxImpl(ctx, /*logarithm=*/false);
}

llvm::Error logSoftmaxKernel(const KernelContext &ctx) {
  return softmaxImpl(ctx, /*logarithm=*/true);
}

llvm::Error layerNormalizationKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "Scale"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &scale = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  bool hasBias = ctx.hasInput(2);
  SHARDC_CPU_TRY(requireType(ctx, scale, x.dtype, "Scale"));
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "Y"));
  int64_t rank = x.rank();
  int64_t axis = ctx.attrs.getInt("axis", -1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return ctx.error("axis " + llvm::Twine(ctx.attrs.getInt("axis", -1)) +
                     " out of range for rank " + llvm::Twine(rank));
  double epsilon = ctx.attrs.getFloat("epsilon", 1e-5);
  int64_t rows = product(x.shape, 0, axis);
  int64_t cols = product(x.shape, axis, rank);
  llvm::ArrayRef<int64_t> normShape =
      llvm::ArrayRef<int64_t>(x.shape).drop_front(axis);
  bool wantMean = ctx.hasOutput(1), wantInv = ctx.hasOutput(2);
  if (wantMean)
    SHARDC_CPU_TRY(checkStatOutput(ctx, 1, "Mean", rows));
  if (wantInv)
    SHARDC_CPU_TRY(checkStatOutput(ctx, 2, "InvStdDev", rows));
  if (hasBias) {
    SHARDC_CPU_TRY(requireInput(ctx, 2, "B"));
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[2], x.dtype, "B"));
  }

  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        std::vector<double> w, b;
        SHARDC_CPU_TRY(expandParam<T>(ctx, scale, normShape, "Scale", w));
        if (hasBias)
          SHARDC_CPU_TRY(expandParam<T>(ctx, ctx.inputs[2], normShape, "B", b));
        else
          b.assign(static_cast<size_t>(cols), 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          const T *px = x.as<T>() + r * cols;
          T *py = y.as<T>() + r * cols;
          double sum = 0.0;
          for (int64_t c = 0; c < cols; ++c)
            sum += px[c];
          double mean = cols ? sum / cols : 0.0;
          double sq = 0.0;
          for (int64_t c = 0; c < cols; ++c) {
            double d = px[c] - mean;
            sq += d * d;
          }
          double var = cols ? sq / cols : 0.0;
          double inv = 1.0 / std::sqrt(var + epsilon);
          for (int64_t c = 0; c < cols; ++c)
            py[c] = static_cast<T>((px[c] - mean) * inv * w[c] + b[c]);
          if (wantMean)
            storeStat(ctx.outputs[1], r, mean);
          if (wantInv)
            storeStat(ctx.outputs[2], r, inv);
        }
        return llvm::Error::success();
      });
}

llvm::Error batchNormalizationKernel(const KernelContext &ctx) {
  static const char *const names[] = {"X", "scale", "B", "input_mean",
                                      "input_var"};
  for (size_t i = 0; i < 5; ++i)
    SHARDC_CPU_TRY(requireInput(ctx, i, names[i]));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  if (x.rank() < 2)
    return ctx.error("'X' of shape " + shapeToString(x.shape) +
                     " must be (N, C, ...)");
  int64_t channels = x.shape[1];
  for (size_t i = 1; i < 5; ++i) {
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[i], x.dtype, names[i]));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[i], {channels}, names[i]));
  }
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "Y"));
  bool training = ctx.attrs.getInt("training_mode", 0) != 0;
  double epsilon = ctx.attrs.getFloat("epsilon", 1e-5);
  double momentum = ctx.attrs.getFloat("momentum", 0.9);
  static const char *const outNames[] = {"Y", "running_mean", "running_var"};
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.hasOutput(i))
      continue;
    SHARDC_CPU_TRY(requireOutput(ctx, i, outNames[i]));
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[i], x.dtype, outNames[i]));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[i], {channels}, outNames[i]));
  }
  int64_t batch = x.shape[0];
  int64_t spatial = product(x.shape, 2, x.rank());

  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        T *py = y.as<T>();
        const T *scale = ctx.inputs[1].as<T>();
        const T *bias = ctx.inputs[2].as<T>();
        const T *inMean = ctx.inputs[3].as<T>();
        const T *inVar = ctx.inputs[4].as<T>();
        int64_t count = batch * spatial;
        for (int64_t c = 0; c < channels; ++c) {
          double mean = inMean[c], var = inVar[c];
          if (!training) {
            // Running statistics are unchanged outside training.
            if (ctx.hasOutput(1))
              ctx.outputs[1].as<T>()[c] = inMean[c];
            if (ctx.hasOutput(2))
              ctx.outputs[2].as<T>()[c] = inVar[c];
          } else {
            double sum = 0.0;
            for (int64_t n = 0; n < batch; ++n) {
              const T *p = px + (n * channels + c) * spatial;
              for (int64_t i = 0; i < spatial; ++i)
                sum += p[i];
            }
            mean = count ? sum / count : 0.0;
            double sq = 0.0;
            for (int64_t n = 0; n < batch; ++n) {
              const T *p = px + (n * channels + c) * spatial;
              for (int64_t i = 0; i < spatial; ++i) {
                double d = p[i] - mean;
                sq += d * d;
              }
            }
            var = count ? sq / count : 0.0;
            if (ctx.hasOutput(1))
              ctx.outputs[1].as<T>()[c] = static_cast<T>(
                  inMean[c] * momentum + mean * (1.0 - momentum));
            if (ctx.hasOutput(2))
              ctx.outputs[2].as<T>()[c] =
                  static_cast<T>(inVar[c] * momentum + var * (1.0 - momentum));
          }
          double mul = scale[c] / std::sqrt(var + epsilon);
          double add = bias[c] - mean * mul;
          for (int64_t n = 0; n < batch; ++n) {
            const T *p = px + (n * channels + c) * spatial;
            T *q = py + (n * channels + c) * spatial;
            for (int64_t i = 0; i < spatial; ++i)
              q[i] = static_cast<T>(p[i] * mul + add);
          }
        }
        return llvm::Error::success();
      });
}

} // namespace shardc::rt::cpu
