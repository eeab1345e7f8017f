//===- Normalization.cu - LayerNorm and BatchNorm, forward and backward ---===//
//
// One block per normalized row (LayerNormalization) or per channel
// (BatchNormalization): its threads accumulate strided partial sums in
// double and combine them in a fixed tree, so results do not depend on
// scheduling; they differ from the CPU kernels' sequential sums only in
// rounding order. The formulas are the CPU kernels' (runtime/cpu/
// Normalization.cpp, after PyTorch's native kernels), and so are the
// operand checks (cpu::checkLayerNorm, cpu::checkBatchNorm, ...). The
// LayerNorm parameter gradients are column sums over rows: one thread per
// normalized element walking the rows in order, then (when Scale broadcasts
// to the normalized shape) one thread per Scale element summing its
// columns in order. Training-mode BatchNorm goes through cuDNN where it
// takes the operands (Cudnn.h); these kernels are for the rest, and for
// shardrun --cudnn=false.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/Cudnn.h"

#include <algorithm>
#include <cmath>

namespace shardc::rt::cuda {

namespace {

/// Threads of the one-row / one-channel blocks.
constexpr int kRowBlock = 256;

/// Element `i` of a parameter read through its broadcast indexer.
template <typename T> struct Param {
  const T *data;
  Indexer<1> ix;
  __device__ double operator()(int64_t i) const {
    int64_t off[1];
    ix.offsets(i, off);
    return static_cast<double>(data[off[0]]);
  }
};

/// A statistics tensor (Mean, InvStdDev): f32 or f64 whatever X is.
struct Stat {
  void *data;
  bool f64;
  __device__ double load(int64_t i) const {
    return f64 ? static_cast<const double *>(data)[i]
               : static_cast<const float *>(data)[i];
  }
  __device__ void store(int64_t i, double v) const {
    if (f64)
      static_cast<double *>(data)[i] = v;
    else
      static_cast<float *>(data)[i] = static_cast<float>(v);
  }
};

template <typename T>
__global__ void layerNormRows(const T *x, T *y, Param<T> w, Param<T> b,
                              bool hasBias, int64_t rows, int64_t cols,
                              double epsilon, Stat mean, Stat invStd) {
  __shared__ double shared[kRowBlock];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *px = x + r * cols;
    T *py = y + r * cols;
    double sum = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      sum += static_cast<double>(px[c]);
    double mu = cols ? blockSum(sum, shared) / cols : 0.0;
    double sq = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      double d = static_cast<double>(px[c]) - mu;
      sq += d * d;
    }
    double var = cols ? blockSum(sq, shared) / cols : 0.0;
    double inv = 1.0 / sqrt(var + epsilon);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      py[c] = static_cast<T>((static_cast<double>(px[c]) - mu) * inv * w(c) +
                             (hasBias ? b(c) : 0.0));
    if (threadIdx.x == 0) {
      if (mean.data)
        mean.store(r, mu);
      if (invStd.data)
        invStd.store(r, inv);
    }
  }
}

/// dX per row: ds = sum(dY X w), db = sum(dY w), then
/// dX = a dY w + b X + c with b = (db mu - ds) a^3 / N, c = -b mu - db a / N.
template <typename T>
__global__ void layerNormGradRows(const T *dy, const T *x, Param<T> w,
                                  Stat mean, Stat invStd, T *dx, int64_t rows,
                                  int64_t cols) {
  __shared__ double shared[kRowBlock];
  double invN = cols ? 1.0 / static_cast<double>(cols) : 0.0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *pdy = dy + r * cols;
    const T *px = x + r * cols;
    double mu = mean.load(r), a = invStd.load(r);
    double ds = 0.0, db = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      double g = static_cast<double>(pdy[c]);
      double wc = w(c);
      ds += g * static_cast<double>(px[c]) * wc;
      db += g * wc;
    }
    ds = blockSum(ds, shared);
    db = blockSum(db, shared);
    double b = (db * mu - ds) * a * a * a * invN;
    double cc = -b * mu - db * a * invN;
    T *pdx = dx + r * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      pdx[c] = static_cast<T>(a * static_cast<double>(pdy[c]) * w(c) +
                              b * static_cast<double>(px[c]) + cc);
  }
}

/// Per normalized element c: dScale[c] = sum_r dY (X - mu) a, dB[c] =
/// sum_r dY, in row order, into double columns.
template <typename T>
__global__ void layerNormParamColumns(const T *dy, const T *x, Stat mean,
                                      Stat invStd, int64_t rows, int64_t cols,
                                      double *dScale, double *dBias) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
       c += int64_t(blockDim.x) * gridDim.x) {
    double s = 0.0, b = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      double g = static_cast<double>(dy[r * cols + c]);
      s += g * (static_cast<double>(x[r * cols + c]) - mean.load(r)) *
           invStd.load(r);
      b += g;
    }
    if (dScale)
      dScale[c] = s;
    if (dBias)
      dBias[c] = b;
  }
}

/// out[k] = sum of the columns c whose Scale offset is k, in column order.
template <typename T>
__global__ void sumColumnsInto(const double *columns, int64_t cols,
                               Indexer<1> ix, T *out, int64_t outCount) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < outCount;
       k += int64_t(blockDim.x) * gridDim.x) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      int64_t off[1];
      ix.offsets(c, off);
      if (off[0] == k)
        sum += columns[c];
    }
    out[k] = static_cast<T>(sum);
  }
}

template <typename T>
__global__ void storeColumns(const double *columns, T *out, int64_t n) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(blockDim.x) * gridDim.x)
    out[k] = static_cast<T>(columns[k]);
}

/// The batch mean and population variance of channel c (all threads).
template <typename T>
__device__ void channelMoments(const T *x, int64_t c,
                               const cpu::BatchNormGeometry &g, double *shared,
                               double &mean, double &var) {
  int64_t count = g.batch * g.spatial;
  double sum = 0.0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    int64_t n = e / g.spatial, i = e % g.spatial;
    sum += static_cast<double>(x[(n * g.channels + c) * g.spatial + i]);
  }
  mean = count ? blockSum(sum, shared) / count : 0.0;
  double sq = 0.0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    int64_t n = e / g.spatial, i = e % g.spatial;
    double d =
        static_cast<double>(x[(n * g.channels + c) * g.spatial + i]) - mean;
    sq += d * d;
  }
  var = count ? blockSum(sq, shared) / count : 0.0;
}

/// A synchronized BatchNorm's global mean and variance of channel c.
__device__ void globalMoments(const cpu::BatchNormGeometry &g, int64_t c,
                              double &mean, double &var) {
  mean = g.moments[c];
  var = g.moments[g.channels + c] - mean * mean;
  var = var > 0.0 ? var : 0.0;
}

template <typename T>
__global__ void batchNormChannels(const T *x, T *y, const T *scale,
                                  const T *bias, const T *inMean,
                                  const T *inVar, T *runMean, T *runVar,
                                  cpu::BatchNormGeometry g) {
  __shared__ double shared[kRowBlock];
  int64_t count = g.batch * g.spatial;
  for (int64_t c = blockIdx.x; c < g.channels; c += gridDim.x) {
    double mean = static_cast<double>(inMean[c]);
    double var = static_cast<double>(inVar[c]);
    if (g.training) {
      if (g.moments)
        globalMoments(g, c, mean, var);
      else
        channelMoments(x, c, g, shared, mean, var);
      // With one value per channel there is no unbiased estimate; keep the
      // population variance (0).
      int64_t n = g.moments ? g.batchCount : count;
      double runV =
          g.unbiasedVar && n > 1 ? var * static_cast<double>(n) / (n - 1) : var;
      if (threadIdx.x == 0) {
        if (runMean)
          runMean[c] =
              static_cast<T>(static_cast<double>(inMean[c]) * g.momentum +
                             mean * (1.0 - g.momentum));
        if (runVar)
          runVar[c] =
              static_cast<T>(static_cast<double>(inVar[c]) * g.momentum +
                             runV * (1.0 - g.momentum));
      }
    } else if (threadIdx.x == 0) {
      if (runMean)
        runMean[c] = inMean[c];
      if (runVar)
        runVar[c] = inVar[c];
    }
    double mul = static_cast<double>(scale[c]) / sqrt(var + g.epsilon);
    double add = static_cast<double>(bias[c]) - mean * mul;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
      int64_t n = e / g.spatial, i = e % g.spatial;
      int64_t at = (n * g.channels + c) * g.spatial + i;
      y[at] = static_cast<T>(static_cast<double>(x[at]) * mul + add);
    }
  }
}

template <typename T>
__global__ void batchNormGradChannels(const T *dy, const T *x, const T *scale,
                                      const T *inMean, const T *inVar, T *dx,
                                      T *dScale, T *dBias,
                                      cpu::BatchNormGeometry g) {
  __shared__ double shared[kRowBlock];
  int64_t count = g.batch * g.spatial;
  for (int64_t c = blockIdx.x; c < g.channels; c += gridDim.x) {
    double mean = static_cast<double>(inMean[c]);
    double var = static_cast<double>(inVar[c]);
    if (g.moments)
      globalMoments(g, c, mean, var);
    else if (g.training)
      channelMoments(x, c, g, shared, mean, var);
    double invStd = 1.0 / sqrt(var + g.epsilon);
    double sum = 0.0, dotp = 0.0;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
      int64_t n = e / g.spatial, i = e % g.spatial;
      int64_t at = (n * g.channels + c) * g.spatial + i;
      double gv = static_cast<double>(dy[at]);
      sum += gv;
      dotp += (static_cast<double>(x[at]) - mean) * gv;
    }
    sum = blockSum(sum, shared);
    dotp = blockSum(dotp, shared);
    if (dx) {
      double w = static_cast<double>(scale[c]);
      // Synchronized: the global batch's means of dY and dY * (X - mean);
      // the local sums stay dScale's and dB's.
      double k = g.gradMoments ? g.gradMoments[g.channels + c] * invStd * invStd
                 : count       ? dotp * invStd * invStd / count
                               : 0.0;
      double gradMean = g.gradMoments ? g.gradMoments[c]
                        : count       ? sum / count
                                      : 0.0;
      for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
        int64_t n = e / g.spatial, i = e % g.spatial;
        int64_t at = (n * g.channels + c) * g.spatial + i;
        double gv = static_cast<double>(dy[at]);
        dx[at] = static_cast<T>(
            g.training
                ? (gv - gradMean - (static_cast<double>(x[at]) - mean) * k) *
                      invStd * w
                : gv * invStd * w);
      }
    }
    if (threadIdx.x == 0) {
      if (dScale)
        dScale[c] = static_cast<T>(dotp * invStd);
      if (dBias)
        dBias[c] = static_cast<T>(sum);
    }
  }
}

/// BatchNormStats (dy null: [sum(x), sum(x^2)]) and BatchNormGradStats
/// ([sum(dy), sum(dy * (x - mean))]) of each channel, divided by `count`.
template <typename T>
__global__ void momentsChannels(const T *x, const T *dy,
                                cpu::BatchNormGeometry g, double count,
                                double *out) {
  __shared__ double shared[kRowBlock];
  int64_t values = g.batch * g.spatial;
  for (int64_t c = blockIdx.x; c < g.channels; c += gridDim.x) {
    double mean = dy ? g.moments[c] : 0.0;
    double a = 0.0, b = 0.0;
    for (int64_t e = threadIdx.x; e < values; e += blockDim.x) {
      int64_t n = e / g.spatial, i = e % g.spatial;
      int64_t at = (n * g.channels + c) * g.spatial + i;
      double xv = static_cast<double>(x[at]);
      if (dy) {
        double gv = static_cast<double>(dy[at]);
        a += gv;
        b += (xv - mean) * gv;
      } else {
        a += xv;
        b += xv * xv;
      }
    }
    a = blockSum(a, shared);
    b = blockSum(b, shared);
    if (threadIdx.x == 0) {
      out[c] = a / count;
      out[g.channels + c] = b / count;
    }
  }
}

unsigned blocksOf(int64_t n) {
  return static_cast<unsigned>(n < 1 ? 1 : (n > 65535 ? 65535 : n));
}

Stat statOf(const KernelContext &ctx, bool output, size_t i, bool present) {
  if (!present)
    return Stat{nullptr, false};
  const TensorView &t = output ? ctx.outputs[i] : ctx.inputs[i];
  return Stat{t.data, t.dtype == DType::F64};
}

} // namespace

llvm::Error layerNormalizationKernel(const KernelContext &ctx) {
  cpu::LayerNormGeometry g;
  SHARDC_CPU_TRY(cpu::checkLayerNorm(ctx, g));
  const TensorView &x = ctx.inputs[0];
  if (g.rows == 0)
    return llvm::Error::success();
  Indexer<1> wIx, bIx;
  SHARDC_CPU_TRY(makeIndexer<1>(ctx, g.normShape, {g.scaleStrides}, wIx));
  if (g.hasBias)
    SHARDC_CPU_TRY(makeIndexer<1>(ctx, g.normShape, {g.biasStrides}, bIx));
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        Param<T> w{ctx.inputs[1].as<T>(), wIx};
        Param<T> b{g.hasBias ? ctx.inputs[2].as<T>() : nullptr, bIx};
        layerNormRows<<<blocksOf(g.rows), kRowBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), ctx.outputs[0].as<T>(), w, b, g.hasBias, g.rows, g.cols,
            g.epsilon, statOf(ctx, true, 1, g.wantMean),
            statOf(ctx, true, 2, g.wantInvStd));
        return checkLaunch(ctx);
      });
}

llvm::Error layerNormGradKernel(const KernelContext &ctx) {
  cpu::LayerNormGeometry g;
  SHARDC_CPU_TRY(cpu::checkLayerNormGrad(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  Indexer<1> wIx;
  SHARDC_CPU_TRY(makeIndexer<1>(ctx, g.normShape, {g.scaleStrides}, wIx));
  const TensorView &scale = ctx.inputs[2];
  // Scale has the normalized shape's elements in order unless it
  // broadcasts: then the column sums are summed again into its shape.
  bool denseScale = scale.numel() == g.cols;
  Stat mean = statOf(ctx, false, 3, true), invStd = statOf(ctx, false, 4, true);
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        cudaStream_t s = cudaStreamOf(ctx);
        const T *px = ctx.inputs[1].as<T>();
        if (g.wantDx && g.rows > 0 && g.cols > 0) {
          Param<T> w{scale.as<T>(), wIx};
          layerNormGradRows<<<blocksOf(g.rows), kRowBlock, 0, s>>>(
              dy.as<T>(), px, w, mean, invStd, ctx.outputs[0].as<T>(), g.rows,
              g.cols);
          SHARDC_CPU_TRY(checkLaunch(ctx));
        }
        if (!g.wantDScale && !g.wantDBias)
          return llvm::Error::success();
        llvm::Expected<void *> scratch = streamOf(ctx).scratch(
            2 * sizeof(double) *
            static_cast<size_t>(std::max<int64_t>(g.cols, 1)));
        if (!scratch)
          return scratch.takeError();
        double *dScale = static_cast<double *>(*scratch);
        double *dBias = dScale + g.cols;
        if (g.cols > 0) {
          layerNormParamColumns<<<blocksFor(g.cols), kBlock, 0, s>>>(
              dy.as<T>(), px, mean, invStd, g.rows, g.cols,
              g.wantDScale ? dScale : nullptr, g.wantDBias ? dBias : nullptr);
          SHARDC_CPU_TRY(checkLaunch(ctx));
        }
        for (int k = 0; k < 2; ++k) {
          bool want = k == 0 ? g.wantDScale : g.wantDBias;
          if (!want)
            continue;
          const TensorView &out = ctx.outputs[1 + k];
          const double *columns = k == 0 ? dScale : dBias;
          if (out.numel() == 0)
            continue;
          if (denseScale)
            storeColumns<<<blocksFor(out.numel()), kBlock, 0, s>>>(
                columns, out.as<T>(), out.numel());
          else
            sumColumnsInto<<<blocksFor(out.numel()), kBlock, 0, s>>>(
                columns, g.cols, wIx, out.as<T>(), out.numel());
          SHARDC_CPU_TRY(checkLaunch(ctx));
        }
        return llvm::Error::success();
      });
}

llvm::Error batchNormalizationKernel(const KernelContext &ctx) {
  cpu::BatchNormGeometry g;
  SHARDC_CPU_TRY(cpu::checkBatchNorm(ctx, g));
  const TensorView &x = ctx.inputs[0];
  if (g.channels == 0)
    return llvm::Error::success();
  llvm::Expected<bool> byCudnn = cudnnBatchNorm(ctx, g);
  if (!byCudnn || *byCudnn)
    return byCudnn.takeError();
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        batchNormChannels<<<blocksOf(g.channels), kRowBlock, 0,
                            cudaStreamOf(ctx)>>>(
            x.as<T>(), ctx.outputs[0].as<T>(), ctx.inputs[1].as<T>(),
            ctx.inputs[2].as<T>(), ctx.inputs[3].as<T>(), ctx.inputs[4].as<T>(),
            g.hasRunningMean ? ctx.outputs[1].as<T>() : nullptr,
            g.hasRunningVar ? ctx.outputs[2].as<T>() : nullptr, g);
        return checkLaunch(ctx);
      });
}

llvm::Error batchNormGradKernel(const KernelContext &ctx) {
  cpu::BatchNormGeometry g;
  SHARDC_CPU_TRY(cpu::checkBatchNormGrad(ctx, g));
  const TensorView &x = ctx.inputs[1];
  if (g.channels == 0)
    return llvm::Error::success();
  llvm::Expected<bool> byCudnn = cudnnBatchNormGrad(ctx, g);
  if (!byCudnn || *byCudnn)
    return byCudnn.takeError();
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        auto out = [&](size_t i) -> T * {
          return ctx.hasOutput(i) ? ctx.outputs[i].as<T>() : nullptr;
        };
        batchNormGradChannels<<<blocksOf(g.channels), kRowBlock, 0,
                                cudaStreamOf(ctx)>>>(
            ctx.inputs[0].as<T>(), x.as<T>(), ctx.inputs[2].as<T>(),
            ctx.inputs[3].as<T>(), ctx.inputs[4].as<T>(), out(0), out(1),
            out(2), g);
        return checkLaunch(ctx);
      });
}

llvm::Error batchNormStatsKernel(const KernelContext &ctx) {
  cpu::BatchNormGeometry g;
  double count = 1;
  SHARDC_CPU_TRY(cpu::checkBatchNormStats(ctx, g, count));
  const TensorView &x = ctx.inputs[0];
  if (g.channels == 0)
    return llvm::Error::success();
  return cpu::dispatchIn(cpu::FloatTypes{}, ctx, x.dtype, "X",
                         [&](auto tag) -> llvm::Error {
                           using T = typename decltype(tag)::type;
                           momentsChannels<<<blocksOf(g.channels), kRowBlock, 0,
                                             cudaStreamOf(ctx)>>>(
                               x.as<T>(), static_cast<const T *>(nullptr), g,
                               count, ctx.outputs[0].as<double>());
                           return checkLaunch(ctx);
                         });
}

llvm::Error batchNormGradStatsKernel(const KernelContext &ctx) {
  cpu::BatchNormGeometry g;
  double count = 1;
  SHARDC_CPU_TRY(cpu::checkBatchNormGradStats(ctx, g, count));
  const TensorView &x = ctx.inputs[1];
  if (g.channels == 0)
    return llvm::Error::success();
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        momentsChannels<<<blocksOf(g.channels), kRowBlock, 0,
                          cudaStreamOf(ctx)>>>(x.as<T>(), ctx.inputs[0].as<T>(),
                                               g, count,
                                               ctx.outputs[0].as<double>());
        return checkLaunch(ctx);
      });
}

} // namespace shardc::rt::cuda
