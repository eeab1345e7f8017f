//===- Normalization.cpp - Softmax, LayerNorm, BatchNorm ------------------===//
//
// Reductions along the normalized axes accumulate in double.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/VecMath.h"
#include "runtime/kernels/LineOps.h"

#include <type_traits>
#include <vector>

namespace shardc::rt::cpu {

namespace {

/// ops::softmaxLine over one contiguous float row, vectorized: the
/// exponentials accumulate in float lanes, then in double.
void softmaxRow(const float *x, float *y, int64_t n) {
  double sum = vec::expSum(x, vec::softmaxShift(x, n), y, n);
  vec::scale(y, static_cast<float>(1.0 / sum), n);
}

llvm::Error softmaxImpl(const KernelContext &ctx, bool logarithm) {
  LineGeometry g;
  SHARDC_CPU_TRY(checkSoftmax(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, float>)
          if (g.inner == 1 && !logarithm) {
            for (int64_t o = 0; o < g.outer; ++o)
              softmaxRow(x.as<T>() + o * g.n, y.as<T>() + o * g.n, g.n);
            return llvm::Error::success();
          }
        for (int64_t o = 0; o < g.outer; ++o)
          for (int64_t i = 0; i < g.inner; ++i) {
            int64_t base = o * g.n * g.inner + i;
            ops::softmaxLine(x.as<T>() + base, y.as<T>() + base, g.n, g.inner,
                             logarithm);
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

/// The strides of parameter `v` (numpy-broadcastable to `shape` after
/// dropping leading 1s beyond its rank) over `shape`.
static llvm::Error paramStrides(const KernelContext &ctx, const TensorView &v,
                                llvm::ArrayRef<int64_t> shape,
                                llvm::StringRef name,
                                llvm::SmallVectorImpl<int64_t> &strides) {
  llvm::ArrayRef<int64_t> vShape = v.shape;
  while (vShape.size() > shape.size() && vShape.front() == 1)
    vShape = vShape.drop_front();
  if (!broadcastStrides(vShape, shape, strides))
    return ctx.error("'" + name + "' of shape " + shapeToString(v.shape) +
                     " does not broadcast to the normalized shape " +
                     shapeToString(shape));
  return llvm::Error::success();
}

llvm::Error checkLayerNorm(const KernelContext &ctx, LayerNormGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "Scale"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &scale = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  g.hasBias = ctx.hasInput(2);
  SHARDC_CPU_TRY(requireType(ctx, scale, x.dtype, "Scale"));
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "Y"));
  int64_t rank = x.rank();
  int64_t axis;
  SHARDC_CPU_TRY(readAxis(ctx, rank, -1, axis));
  g.epsilon = ctx.attrs.getFloat("epsilon", 1e-5);
  g.rows = product(x.shape, 0, axis);
  g.cols = product(x.shape, axis, rank);
  g.normShape.assign(x.shape.begin() + axis, x.shape.end());
  g.wantMean = ctx.hasOutput(1);
  g.wantInvStd = ctx.hasOutput(2);
  if (g.wantMean)
    SHARDC_CPU_TRY(checkStatOutput(ctx, 1, "Mean", g.rows));
  if (g.wantInvStd)
    SHARDC_CPU_TRY(checkStatOutput(ctx, 2, "InvStdDev", g.rows));
  if (g.hasBias) {
    SHARDC_CPU_TRY(requireInput(ctx, 2, "B"));
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[2], x.dtype, "B"));
  }
  SHARDC_CPU_TRY(dispatchIn(FloatTypes{}, ctx, x.dtype, "X",
                            [](auto) { return llvm::Error::success(); }));
  SHARDC_CPU_TRY(
      paramStrides(ctx, scale, g.normShape, "Scale", g.scaleStrides));
  if (g.hasBias)
    SHARDC_CPU_TRY(
        paramStrides(ctx, ctx.inputs[2], g.normShape, "B", g.biasStrides));
  return llvm::Error::success();
}

llvm::Error layerNormalizationKernel(const KernelContext &ctx) {
  LayerNormGeometry g;
  SHARDC_CPU_TRY(checkLayerNorm(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &scale = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  bool hasBias = g.hasBias, wantMean = g.wantMean, wantInv = g.wantInvStd;
  int64_t rows = g.rows, cols = g.cols;
  double epsilon = g.epsilon;
  llvm::ArrayRef<int64_t> normShape = g.normShape;

  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        std::vector<double> w, b;
        SHARDC_CPU_TRY(expandParam<T>(ctx, scale, normShape, "Scale", w));
        if (hasBias)
          SHARDC_CPU_TRY(expandParam<T>(ctx, ctx.inputs[2], normShape, "B", b));
        else
          b.assign(static_cast<size_t>(cols), 0.0);
        if constexpr (std::is_same_v<T, float>) {
          // Float rows: VecMath's vectorized loop.
          std::vector<float> wf(w.begin(), w.end()), bf(b.begin(), b.end());
          for (int64_t r = 0; r < rows; ++r) {
            double mean = 0, inv = 0;
            vec::layerNormRow(x.as<float>() + r * cols, wf.data(),
                              hasBias ? bf.data() : nullptr, epsilon,
                              y.as<float>() + r * cols, cols, &mean, &inv);
            if (wantMean)
              storeStat(ctx.outputs[1], r, mean);
            if (wantInv)
              storeStat(ctx.outputs[2], r, inv);
          }
          return llvm::Error::success();
        }
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

namespace {

/// Input `i`, when present, as global moments: f64, two per channel, and
/// only in training mode.
llvm::Error readMoments(const KernelContext &ctx, size_t i,
                        llvm::StringRef name, const BatchNormGeometry &g,
                        const double *&moments) {
  moments = nullptr;
  if (!ctx.hasInput(i))
    return llvm::Error::success();
  if (!g.training)
    return ctx.error("'" + name + "' (global statistics) needs training_mode");
  SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[i], DType::F64, name));
  SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[i], {2 * g.channels}, name));
  moments = ctx.inputs[i].as<double>();
  return llvm::Error::success();
}

} // namespace

llvm::Error checkBatchNorm(const KernelContext &ctx, BatchNormGeometry &g) {
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
  g.channels = x.shape[1];
  for (size_t i = 1; i < 5; ++i) {
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[i], x.dtype, names[i]));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[i], {g.channels}, names[i]));
  }
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "Y"));
  g.training = ctx.attrs.getInt("training_mode", 0) != 0;
  g.epsilon = ctx.attrs.getFloat("epsilon", 1e-5);
  g.momentum = ctx.attrs.getFloat("momentum", 0.9);
  // PyTorch-style training updates running_var with the unbiased variance.
  g.unbiasedVar = ctx.attrs.getInt("unbiased_var", 0) != 0;
  static const char *const outNames[] = {"Y", "running_mean", "running_var"};
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.hasOutput(i))
      continue;
    SHARDC_CPU_TRY(requireOutput(ctx, i, outNames[i]));
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[i], x.dtype, outNames[i]));
    SHARDC_CPU_TRY(
        requireShape(ctx, ctx.outputs[i], {g.channels}, outNames[i]));
  }
  g.hasRunningMean = ctx.hasOutput(1);
  g.hasRunningVar = ctx.hasOutput(2);
  g.batch = x.shape[0];
  g.spatial = product(x.shape, 2, x.rank());
  SHARDC_CPU_TRY(readMoments(ctx, 5, "moments", g, g.moments));
  if (g.moments) {
    g.batchCount = ctx.attrs.getInt("batch_count", 0);
    int64_t local = g.batch * g.spatial;
    if (g.batchCount < 1 || (local > 0 && g.batchCount % local != 0))
      return ctx.error("batch_count " + llvm::Twine(g.batchCount) +
                       " must be a positive multiple of the input's " +
                       llvm::Twine(local) + " values per channel");
  }
  return dispatchIn(FloatTypes{}, ctx, x.dtype, "X",
                    [](auto) { return llvm::Error::success(); });
}

llvm::Error batchNormalizationKernel(const KernelContext &ctx) {
  BatchNormGeometry g;
  SHARDC_CPU_TRY(checkBatchNorm(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  int64_t channels = g.channels, batch = g.batch, spatial = g.spatial;
  bool training = g.training, unbiasedVar = g.unbiasedVar;
  double epsilon = g.epsilon, momentum = g.momentum;

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
            if (g.moments) {
              mean = g.globalMean(c);
              var = g.globalVar(c);
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
            }
            // With a single value per channel there is no unbiased estimate;
            // keep the population variance (0) rather than dividing by zero.
            int64_t n = g.moments ? g.batchCount : count;
            double runVar = unbiasedVar && n > 1
                                ? var * static_cast<double>(n) / (n - 1)
                                : var;
            if (ctx.hasOutput(1))
              ctx.outputs[1].as<T>()[c] = static_cast<T>(
                  inMean[c] * momentum + mean * (1.0 - momentum));
            if (ctx.hasOutput(2))
              ctx.outputs[2].as<T>()[c] = static_cast<T>(
                  inVar[c] * momentum + runVar * (1.0 - momentum));
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

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

namespace {

/// Element `i` of an f32 or f64 statistics input.
double loadStat(const TensorView &t, int64_t i) {
  if (t.dtype == DType::F32)
    return t.as<float>()[i];
  return t.as<double>()[i];
}

llvm::Error checkStatInput(const KernelContext &ctx, size_t i,
                           llvm::StringRef name, int64_t numel) {
  SHARDC_CPU_TRY(requireInput(ctx, i, name));
  const TensorView &t = ctx.inputs[i];
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    return unsupportedType(ctx, t.dtype, "'" + name + "'");
  return requireNumel(ctx, t, numel, name);
}

/// Softmax and LogSoftmax backward (ops::softmaxGradLine; a contiguous
/// float Softmax row vectorized, vec::softmaxGradRow).
llvm::Error softmaxGradImpl(const KernelContext &ctx, bool logarithm) {
  LineGeometry g;
  SHARDC_CPU_TRY(checkSoftmaxGrad(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &y = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  return dispatchIn(
      FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, float>)
          if (g.inner == 1 && !logarithm) {
            for (int64_t o = 0; o < g.outer; ++o)
              vec::softmaxGradRow(dy.as<T>() + o * g.n, y.as<T>() + o * g.n,
                                  dx.as<T>() + o * g.n, g.n);
            return llvm::Error::success();
          }
        for (int64_t o = 0; o < g.outer; ++o)
          for (int64_t i = 0; i < g.inner; ++i) {
            int64_t base = o * g.n * g.inner + i;
            ops::softmaxGradLine(dy.as<T>() + base, y.as<T>() + base,
                                 dx.as<T>() + base, g.n, g.inner, logarithm);
          }
        return llvm::Error::success();
      });
}

} // namespace

llvm::Error softmaxGradKernel(const KernelContext &ctx) {
  return softmaxGradImpl(ctx, /*logarithm=*/false);
}

llvm::Error logSoftmaxGradKernel(const KernelContext &ctx) {
  return softmaxGradImpl(ctx, /*logarithm=*/true);
}

/// PyTorch's native layer-norm backward (aten/src/ATen/native/cpu/
/// layer_norm_kernel.cpp), per row of N normalized elements with mean mu and
/// inverse standard deviation a:
///   ds = sum(dY * X * w), db = sum(dY * w)
///   b = (db * mu - ds) * a^3 / N, c = -b * mu - db * a / N
///   dX = a * dY * w + b * X + c
///   dScale += dY * (X - mu) * a, dB += dY
/// accumulated in double. Scale may broadcast to the normalized shape; its
/// gradient is then summed over the broadcast dimensions.
llvm::Error checkLayerNormGrad(const KernelContext &ctx, LayerNormGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "X"));
  SHARDC_CPU_TRY(requireInput(ctx, 2, "Scale"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &scale = ctx.inputs[2];
  SHARDC_CPU_TRY(requireType(ctx, x, dy.dtype, "X"));
  SHARDC_CPU_TRY(requireType(ctx, scale, dy.dtype, "Scale"));
  SHARDC_CPU_TRY(requireShape(ctx, x, dy.shape, "X"));
  int64_t rank = x.rank();
  if (rank == 0)
    return ctx.error("'X' must have at least one dimension");
  int64_t axis;
  SHARDC_CPU_TRY(readAxis(ctx, rank, -1, axis));
  g.rows = product(x.shape, 0, axis);
  g.cols = product(x.shape, axis, rank);
  g.normShape.assign(x.shape.begin() + axis, x.shape.end());
  SHARDC_CPU_TRY(checkStatInput(ctx, 3, "Mean", g.rows));
  SHARDC_CPU_TRY(checkStatInput(ctx, 4, "InvStdDev", g.rows));
  static const char *const outNames[] = {"dX", "dScale", "dB"};
  for (size_t i = 0; i < 3; ++i) {
    if (!ctx.hasOutput(i))
      continue;
    SHARDC_CPU_TRY(requireOutput(ctx, i, outNames[i]));
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[i], dy.dtype, outNames[i]));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[i],
                                i == 0 ? llvm::ArrayRef<int64_t>(x.shape)
                                       : llvm::ArrayRef<int64_t>(scale.shape),
                                outNames[i]));
  }
  // Where each element of the normalized shape lands in Scale's shape.
  SHARDC_CPU_TRY(
      paramStrides(ctx, scale, g.normShape, "Scale", g.scaleStrides));
  g.wantDx = ctx.hasOutput(0);
  g.wantDScale = ctx.hasOutput(1);
  g.wantDBias = ctx.hasOutput(2);
  return dispatchIn(FloatTypes{}, ctx, dy.dtype, "dY",
                    [](auto) { return llvm::Error::success(); });
}

llvm::Error layerNormGradKernel(const KernelContext &ctx) {
  LayerNormGeometry g;
  SHARDC_CPU_TRY(checkLayerNormGrad(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &scale = ctx.inputs[2];
  const TensorView &mean = ctx.inputs[3];
  const TensorView &invStd = ctx.inputs[4];
  int64_t rows = g.rows, cols = g.cols;
  llvm::ArrayRef<int64_t> normShape = g.normShape;
  llvm::ArrayRef<int64_t> scaleStrides = g.scaleStrides;
  bool wantDx = g.wantDx, wantDScale = g.wantDScale, wantDB = g.wantDBias;

  return dispatchIn(
      FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        std::vector<double> w;
        SHARDC_CPU_TRY(expandParam<T>(ctx, scale, normShape, "Scale", w));
        std::vector<double> dScale(static_cast<size_t>(cols), 0.0);
        std::vector<double> dBias(static_cast<size_t>(cols), 0.0);
        double invN = cols ? 1.0 / static_cast<double>(cols) : 0.0;
        std::vector<float> wf;
        if constexpr (std::is_same_v<T, float>)
          wf.assign(w.begin(), w.end());
        for (int64_t r = 0; r < rows; ++r) {
          if constexpr (std::is_same_v<T, float>) {
            // Float rows: VecMath's vectorized loop.
            vec::layerNormGradRow(
                dy.as<float>() + r * cols, x.as<float>() + r * cols, wf.data(),
                loadStat(mean, r), loadStat(invStd, r),
                wantDx ? ctx.outputs[0].as<float>() + r * cols : nullptr,
                dScale.data(), dBias.data(), cols);
            continue;
          }
          const T *pdy = dy.as<T>() + r * cols;
          const T *px = x.as<T>() + r * cols;
          double mu = loadStat(mean, r);
          double a = loadStat(invStd, r);
          double ds = 0.0, db = 0.0;
          for (int64_t c = 0; c < cols; ++c) {
            double g = static_cast<double>(pdy[c]);
            ds += g * px[c] * w[c];
            db += g * w[c];
            dScale[c] += g * (px[c] - mu) * a;
            dBias[c] += g;
          }
          if (!wantDx)
            continue;
          double b = (db * mu - ds) * a * a * a * invN;
          double cc = -b * mu - db * a * invN;
          T *pdx = ctx.outputs[0].as<T>() + r * cols;
          for (int64_t c = 0; c < cols; ++c)
            pdx[c] = static_cast<T>(a * static_cast<double>(pdy[c]) * w[c] +
                                    b * px[c] + cc);
        }
        // Sum the per-element gradients into Scale's (broadcast) shape.
        auto reduceInto = [&](const std::vector<double> &acc,
                              const TensorView &out) {
          std::vector<double> sum(static_cast<size_t>(out.numel()), 0.0);
          std::array<llvm::ArrayRef<int64_t>, 1> s = {scaleStrides};
          forEachRow<1>(
              normShape, s,
              [&](int64_t o, const int64_t *in, int64_t n, const int64_t *rs) {
                for (int64_t i = 0; i < n; ++i)
                  sum[in[0] + i * rs[0]] += acc[o + i];
              });
          T *po = out.as<T>();
          for (size_t i = 0; i < sum.size(); ++i)
            po[i] = static_cast<T>(sum[i]);
        };
        if (wantDScale)
          reduceInto(dScale, ctx.outputs[1]);
        if (wantDB)
          reduceInto(dBias, ctx.outputs[2]);
        return llvm::Error::success();
      });
}

/// PyTorch's batch-norm backward (batch_norm_backward_cpu_template), per
/// channel over its M = N * prod(spatial) elements:
///   sum = sum(dY), dotp = sum((X - mean) * dY)
///   training:  k = dotp * invstd^2 / M,
///              dX = (dY - sum / M - (X - mean) * k) * invstd * scale
///   inference: dX = dY * invstd * scale
///   dScale = dotp * invstd, dB = sum
/// In training mean and invstd = 1/sqrt(var + eps) are the batch statistics
/// (population variance) recomputed from X; in inference the given ones.
llvm::Error checkBatchNormGrad(const KernelContext &ctx, BatchNormGeometry &g) {
  static const char *const names[] = {"dY", "X", "scale", "mean", "var"};
  for (size_t i = 0; i < 5; ++i)
    SHARDC_CPU_TRY(requireInput(ctx, i, names[i]));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  if (x.rank() < 2)
    return ctx.error("'X' of shape " + shapeToString(x.shape) +
                     " must be (N, C, ...)");
  SHARDC_CPU_TRY(requireType(ctx, dy, x.dtype, "dY"));
  SHARDC_CPU_TRY(requireShape(ctx, dy, x.shape, "dY"));
  g.channels = x.shape[1];
  for (size_t i = 2; i < 5; ++i) {
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[i], x.dtype, names[i]));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[i], {g.channels}, names[i]));
  }
  static const char *const outNames[] = {"dX", "dScale", "dB"};
  for (size_t i = 0; i < 3; ++i) {
    if (!ctx.hasOutput(i))
      continue;
    SHARDC_CPU_TRY(requireOutput(ctx, i, outNames[i]));
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[i], x.dtype, outNames[i]));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[i],
                                i == 0 ? llvm::ArrayRef<int64_t>(x.shape)
                                       : llvm::ArrayRef<int64_t>(g.channels),
                                outNames[i]));
  }
  g.training = ctx.attrs.getInt("training_mode", 0) != 0;
  g.epsilon = ctx.attrs.getFloat("epsilon", 1e-5);
  g.batch = x.shape[0];
  g.spatial = product(x.shape, 2, x.rank());
  SHARDC_CPU_TRY(readMoments(ctx, 5, "moments", g, g.moments));
  SHARDC_CPU_TRY(readMoments(ctx, 6, "grad_moments", g, g.gradMoments));
  if (!g.moments != !g.gradMoments)
    return ctx.error("takes 'moments' and 'grad_moments' together");
  return dispatchIn(FloatTypes{}, ctx, x.dtype, "X",
                    [](auto) { return llvm::Error::success(); });
}

llvm::Error batchNormGradKernel(const KernelContext &ctx) {
  BatchNormGeometry g;
  SHARDC_CPU_TRY(checkBatchNormGrad(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  int64_t channels = g.channels, batch = g.batch, spatial = g.spatial;
  int64_t count = batch * spatial;
  bool training = g.training;
  double epsilon = g.epsilon;

  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        const T *pdy = dy.as<T>();
        const T *scale = ctx.inputs[2].as<T>();
        const T *inMean = ctx.inputs[3].as<T>();
        const T *inVar = ctx.inputs[4].as<T>();
        auto plane = [&](const T *base, int64_t n, int64_t c) {
          return base + (n * channels + c) * spatial;
        };
        for (int64_t c = 0; c < channels; ++c) {
          double mean = inMean[c], var = inVar[c];
          if (g.moments) {
            mean = g.globalMean(c);
            var = g.globalVar(c);
          } else if (training) {
            double sum = 0.0;
            for (int64_t n = 0; n < batch; ++n) {
              const T *p = plane(px, n, c);
              for (int64_t i = 0; i < spatial; ++i)
                sum += p[i];
            }
            mean = count ? sum / count : 0.0;
            double sq = 0.0;
            for (int64_t n = 0; n < batch; ++n) {
              const T *p = plane(px, n, c);
              for (int64_t i = 0; i < spatial; ++i) {
                double d = p[i] - mean;
                sq += d * d;
              }
            }
            var = count ? sq / count : 0.0;
          }
          double invStd = 1.0 / std::sqrt(var + epsilon);
          double sum = 0.0, dotp = 0.0;
          for (int64_t n = 0; n < batch; ++n) {
            const T *p = plane(px, n, c);
            const T *gy = plane(pdy, n, c);
            for (int64_t i = 0; i < spatial; ++i) {
              sum += gy[i];
              dotp += (p[i] - mean) * static_cast<double>(gy[i]);
            }
          }
          if (ctx.hasOutput(0)) {
            double w = scale[c];
            // Synchronized: the global batch's means of dY and
            // dY * (X - mean); the local sums stay dScale's and dB's.
            double k = g.gradMoments
                           ? g.gradMoments[channels + c] * invStd * invStd
                       : count ? dotp * invStd * invStd / count
                               : 0.0;
            double gradMean = g.gradMoments ? g.gradMoments[c]
                              : count       ? sum / count
                                            : 0.0;
            for (int64_t n = 0; n < batch; ++n) {
              const T *p = plane(px, n, c);
              const T *gy = plane(pdy, n, c);
              T *q = ctx.outputs[0].as<T>() + (n * channels + c) * spatial;
              if (training) {
                for (int64_t i = 0; i < spatial; ++i)
                  q[i] = static_cast<T>((gy[i] - gradMean - (p[i] - mean) * k) *
                                        invStd * w);
              } else {
                for (int64_t i = 0; i < spatial; ++i)
                  q[i] = static_cast<T>(gy[i] * invStd * w);
              }
            }
          }
          if (ctx.hasOutput(1))
            ctx.outputs[1].as<T>()[c] = static_cast<T>(dotp * invStd);
          if (ctx.hasOutput(2))
            ctx.outputs[2].as<T>()[c] = static_cast<T>(sum);
        }
        return llvm::Error::success();
      });
}

namespace {

/// The geometry of the (N, C, ...) input `i` and the (2 * C) f64 output of
/// a moments op, and its `count` attribute.
llvm::Error checkMomentsOp(const KernelContext &ctx, size_t i,
                           llvm::StringRef name, BatchNormGeometry &g,
                           double &count) {
  SHARDC_CPU_TRY(requireInput(ctx, i, name));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "result"));
  const TensorView &x = ctx.inputs[i];
  if (x.rank() < 2)
    return ctx.error("'" + name + "' of shape " + shapeToString(x.shape) +
                     " must be (N, C, ...)");
  g.batch = x.shape[0];
  g.channels = x.shape[1];
  g.spatial = product(x.shape, 2, x.rank());
  g.training = true;
  SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[0], DType::F64, "result"));
  SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[0], {2 * g.channels}, "result"));
  int64_t n = ctx.attrs.getInt("count", 0);
  int64_t local = g.batch * g.spatial;
  if (n < 1 || (local > 0 && n % local != 0))
    return ctx.error("count " + llvm::Twine(n) +
                     " must be a positive multiple of the input's " +
                     llvm::Twine(local) + " values per channel");
  count = static_cast<double>(n);
  return dispatchIn(FloatTypes{}, ctx, x.dtype, name,
                    [](auto) { return llvm::Error::success(); });
}

} // namespace

llvm::Error checkBatchNormStats(const KernelContext &ctx, BatchNormGeometry &g,
                                double &count) {
  return checkMomentsOp(ctx, 0, "X", g, count);
}

llvm::Error checkBatchNormGradStats(const KernelContext &ctx,
                                    BatchNormGeometry &g, double &count) {
  SHARDC_CPU_TRY(checkMomentsOp(ctx, 1, "X", g, count));
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[0], ctx.inputs[1].dtype, "dY"));
  SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[0], ctx.inputs[1].shape, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 2, "moments"));
  return readMoments(ctx, 2, "moments", g, g.moments);
}

/// [sum(X), sum(X^2)] / count per channel, in f64.
llvm::Error batchNormStatsKernel(const KernelContext &ctx) {
  BatchNormGeometry g;
  double count = 1;
  SHARDC_CPU_TRY(checkBatchNormStats(ctx, g, count));
  const TensorView &x = ctx.inputs[0];
  double *out = ctx.outputs[0].as<double>();
  return dispatchIn(FloatTypes{}, ctx, x.dtype, "X",
                    [&](auto tag) -> llvm::Error {
                      using T = typename decltype(tag)::type;
                      const T *px = x.as<T>();
                      for (int64_t c = 0; c < g.channels; ++c) {
                        double sum = 0.0, sq = 0.0;
                        for (int64_t n = 0; n < g.batch; ++n) {
                          const T *p = px + (n * g.channels + c) * g.spatial;
                          for (int64_t i = 0; i < g.spatial; ++i) {
                            double v = p[i];
                            sum += v;
                            sq += v * v;
                          }
                        }
                        out[c] = sum / count;
                        out[g.channels + c] = sq / count;
                      }
                      return llvm::Error::success();
                    });
}

/// [sum(dY), sum(dY * (X - mean))] / count per channel, in f64, with the
/// mean of `moments`.
llvm::Error batchNormGradStatsKernel(const KernelContext &ctx) {
  BatchNormGeometry g;
  double count = 1;
  SHARDC_CPU_TRY(checkBatchNormGradStats(ctx, g, count));
  const TensorView &x = ctx.inputs[1];
  double *out = ctx.outputs[0].as<double>();
  return dispatchIn(FloatTypes{}, ctx, x.dtype, "X",
                    [&](auto tag) -> llvm::Error {
                      using T = typename decltype(tag)::type;
                      const T *px = x.as<T>();
                      const T *pdy = ctx.inputs[0].as<T>();
                      for (int64_t c = 0; c < g.channels; ++c) {
                        double mean = g.globalMean(c), sum = 0.0, dotp = 0.0;
                        for (int64_t n = 0; n < g.batch; ++n) {
                          int64_t at = (n * g.channels + c) * g.spatial;
                          for (int64_t i = 0; i < g.spatial; ++i) {
                            double gy = pdy[at + i];
                            sum += gy;
                            dotp += (px[at + i] - mean) * gy;
                          }
                        }
                        out[c] = sum / count;
                        out[g.channels + c] = dotp / count;
                      }
                      return llvm::Error::success();
                    });
}

llvm::Error checkSoftmax(const KernelContext &ctx, LineGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "input"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "output"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "output"));
  int64_t rank = x.rank();
  int64_t axis;
  SHARDC_CPU_TRY(readAxis(ctx, rank, -1, axis));
  g.outer = product(x.shape, 0, axis);
  g.n = x.shape[axis];
  g.inner = product(x.shape, axis + 1, rank);
  return llvm::Error::success();
}

llvm::Error checkSoftmaxGrad(const KernelContext &ctx, LineGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "Y"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dX"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &y = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, dy.dtype, "Y"));
  SHARDC_CPU_TRY(requireType(ctx, dx, dy.dtype, "dX"));
  SHARDC_CPU_TRY(requireShape(ctx, y, dy.shape, "Y"));
  SHARDC_CPU_TRY(requireShape(ctx, dx, dy.shape, "dX"));
  int64_t rank = dy.rank();
  if (rank == 0)
    return ctx.error("'dY' must have at least one dimension");
  int64_t axis;
  SHARDC_CPU_TRY(readAxis(ctx, rank, -1, axis));
  g.outer = product(dy.shape, 0, axis);
  g.n = dy.shape[axis];
  g.inner = product(dy.shape, axis + 1, rank);
  return llvm::Error::success();
}

} // namespace shardc::rt::cpu
