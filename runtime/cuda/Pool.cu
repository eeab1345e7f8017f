//===- Pool.cu - MaxPool, AveragePool, GlobalAveragePool and gradients ----===//
//
// The CPU kernels' semantics (runtime/cpu/Pool.cpp) and operand checks
// (cpu::checkMaxPool, cpu::checkAveragePool, ...) on the device:
//
//  * MaxPool, AveragePool: one thread per output element walks its window's
//    in-bounds taps in row-major order, as the CPU does: the first strict
//    maximum wins, NaN only when every tap is NaN, Indices flat over the
//    whole tensor (storage_order 0: row-major, 1: column-major within the
//    plane), -1 for a window without in-bounds taps; averages sum in double
//    and divide by the in-bounds or (count_include_pad) padded tap count.
//  * GlobalAveragePool: one thread per plane, summing in double in order.
//  * AveragePoolGrad: a gather, one thread per dX element adding the shares
//    of the windows that cover it in ascending output order, the order in
//    which the CPU's scatter adds them: deterministic, bit for bit the CPU's.
//  * MaxPoolGrad: one thread per (N, C) plane walks that plane's dY in
//    order, adding into dX as the CPU does. Indices from MaxPool stay in
//    their plane; one that points into another plane would race, so the
//    plane threads skip it and raise a flag, on which one sequential block
//    redoes the whole gradient in the CPU's order. An index outside dX is
//    recorded (the first position, atomicMin) and read back before the
//    kernel returns, which then fails as the CPU kernel does
//    (cpu::maxPoolIndexOutOfRange).
//
// The output shape (which encodes ceil_mode) comes from the output view, as
// on the CPU. The window geometry travels to the device in fixed arrays
// (PoolDims): at most kMaxSpatial spatial dimensions, where the CPU kernels
// take any.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/ConvPool.h"
#include "runtime/cuda/CudaKernels.h"

#include <limits>
#include <type_traits>

namespace shardc::rt::cuda {

namespace {

/// The window geometry of cpu::PoolGeometry as a kernel argument.
struct PoolDims : WindowDims {
  /// Row-major and column-major strides of the input's spatial dims.
  int64_t rowStride[kMaxSpatial] = {}, colStride[kMaxSpatial] = {};
  int64_t planes = 0;
};

llvm::Error makePoolDims(const KernelContext &ctx, const cpu::PoolGeometry &g,
                         PoolDims &d) {
  d = PoolDims();
  SHARDC_CPU_TRY(makeWindowDims(ctx, g.inShape, g.outShape, g.w, "pools", d));
  size_t ns = g.inShape.size();
  int64_t row = 1, col = 1;
  for (size_t s = ns; s-- > 0;) {
    d.rowStride[s] = row;
    row *= g.inShape[s];
  }
  for (size_t s = 0; s < ns; ++s) {
    d.colStride[s] = col;
    col *= g.inShape[s];
  }
  d.planes = g.planes;
  d.inSize = g.inSize;
  d.outSize = g.outSize;
  return llvm::Error::success();
}

/// Output `o`'s window on spatial axis `s`: taps j in [lo, hi) land inside
/// the input (they are contiguous; lo == hi when none does); `padded`
/// counts the taps inside the padded input (count_include_pad; a tap beyond
/// the end padding, possible with ceil_mode, is not one).
__device__ void axisWindow(const PoolDims &d, int s, int64_t o, int64_t &start,
                           int64_t &lo, int64_t &hi, int64_t &padded) {
  start = o * d.strides[s] - d.padBegin[s];
  lo = 0;
  hi = 0;
  padded = 0;
  bool seen = false;
  for (int64_t j = 0; j < d.kernel[s]; ++j) {
    int64_t p = start + j * d.dilations[s];
    if (p < -d.padBegin[s] || p >= d.in[s] + d.padEnd[s])
      continue;
    ++padded;
    if (p >= 0 && p < d.in[s]) {
      if (!seen)
        lo = j;
      seen = true;
      hi = j + 1;
    }
  }
}

/// The window of one output element of a plane.
struct Window {
  int64_t start[kMaxSpatial], lo[kMaxSpatial], hi[kMaxSpatial];
  /// In-bounds taps; taps inside the padded input.
  int64_t valid, padded;
};

__device__ void openWindow(const PoolDims &d, int64_t oi, Window &w) {
  w.valid = 1;
  w.padded = 1;
  for (int s = d.ns - 1; s >= 0; --s) {
    int64_t o = oi % d.out[s];
    oi /= d.out[s];
    int64_t padded = 0;
    axisWindow(d, s, o, w.start[s], w.lo[s], w.hi[s], padded);
    w.valid *= w.hi[s] - w.lo[s];
    w.padded *= padded;
  }
}

/// Calls `tap(rowMajorOffset, colMajorOffset)` for every in-bounds input
/// element of the window (offsets within one plane), in row-major order.
template <typename Tap>
__device__ void forEachTap(const PoolDims &d, const Window &w, Tap &&tap) {
  if (w.valid == 0)
    return;
  int64_t j[kMaxSpatial];
  for (int s = 0; s < d.ns; ++s)
    j[s] = w.lo[s];
  while (true) {
    int64_t row = 0, col = 0;
    for (int s = 0; s < d.ns; ++s) {
      int64_t p = w.start[s] + j[s] * d.dilations[s];
      row += p * d.rowStride[s];
      col += p * d.colStride[s];
    }
    tap(row, col);
    int s = d.ns - 1;
    for (; s >= 0; --s) {
      if (++j[s] < w.hi[s])
        break;
      j[s] = w.lo[s];
    }
    if (s < 0)
      return;
  }
}

template <typename T>
__global__ void maxPoolOutputs(const T *x, T *y, int64_t *indices, PoolDims d,
                               bool columnMajor, T lowest, T nan) {
  int64_t total = d.planes * d.outSize;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t plane = e / d.outSize;
    Window w;
    openWindow(d, e % d.outSize, w);
    const T *px = x + plane * d.inSize;
    bool found = false;
    bool sawNaN = false;
    T best = lowest;
    int64_t bestRow = -1, bestCol = -1;
    forEachTap(d, w, [&](int64_t row, int64_t col) {
      T v = px[row];
      if constexpr (std::is_floating_point_v<T>) {
        if (v != v) { // NaN
          if (!sawNaN && !found) {
            bestRow = row;
            bestCol = col;
          }
          sawNaN = true;
          return;
        }
      }
      if (!found || v > best) {
        best = v;
        bestRow = row;
        bestCol = col;
        found = true;
      }
    });
    if constexpr (std::is_floating_point_v<T>) {
      if (!found && sawNaN)
        best = nan;
    }
    y[e] = best;
    if (indices) {
      int64_t local = columnMajor ? bestCol : bestRow;
      indices[e] = local < 0 ? -1 : plane * d.inSize + local;
    }
  }
}

template <typename T>
__global__ void averagePoolOutputs(const T *x, T *y, PoolDims d,
                                   bool includePad) {
  int64_t total = d.planes * d.outSize;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(blockDim.x) * gridDim.x) {
    Window w;
    openWindow(d, e % d.outSize, w);
    const T *px = x + (e / d.outSize) * d.inSize;
    double sum = 0.0;
    forEachTap(d, w, [&](int64_t row, int64_t) { sum += px[row]; });
    int64_t divisor = includePad ? w.padded : w.valid;
    y[e] = divisor == 0 ? T(0) : static_cast<T>(sum / divisor);
  }
}

/// Each dX element: the sum, in ascending output order, of the shares
/// dY[o] / divisor(o) of the outputs o whose window covers it.
template <typename T>
__global__ void averagePoolGradInputs(const T *dy, T *dx, PoolDims d,
                                      bool includePad) {
  int64_t total = d.planes * d.inSize;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t plane = e / d.inSize;
    int64_t pos = e % d.inSize;
    // Input coordinate i is tap j of output o when o * stride + j *
    // dilation == i + padBegin (= top): o in [oLo, oHi], and
    // top - o * stride a multiple of the dilation.
    int64_t top[kMaxSpatial], oLo[kMaxSpatial], oHi[kMaxSpatial];
    bool any = true;
    for (int s = d.ns - 1; s >= 0; --s) {
      top[s] = pos % d.in[s] + d.padBegin[s];
      pos /= d.in[s];
      int64_t first = top[s] - (d.kernel[s] - 1) * d.dilations[s];
      oLo[s] = first <= 0 ? 0 : (first + d.strides[s] - 1) / d.strides[s];
      oHi[s] = top[s] / d.strides[s];
      if (oHi[s] > d.out[s] - 1)
        oHi[s] = d.out[s] - 1;
      any = any && oLo[s] <= oHi[s];
    }
    const T *pdy = dy + plane * d.outSize;
    T acc = T(0);
    if (any) {
      int64_t o[kMaxSpatial];
      for (int s = 0; s < d.ns; ++s)
        o[s] = oLo[s];
      while (true) {
        bool covers = true;
        int64_t oi = 0;
        for (int s = 0; s < d.ns; ++s) {
          covers =
              covers && (top[s] - o[s] * d.strides[s]) % d.dilations[s] == 0;
          oi = oi * d.out[s] + o[s];
        }
        if (covers) {
          int64_t valid = 1, padded = 1;
          for (int s = 0; s < d.ns; ++s) {
            int64_t start, lo, hi, axisPadded;
            axisWindow(d, s, o[s], start, lo, hi, axisPadded);
            valid *= hi - lo;
            padded *= axisPadded;
          }
          int64_t divisor = includePad ? padded : valid;
          if (divisor != 0)
            acc += static_cast<T>(static_cast<double>(pdy[oi]) / divisor);
        }
        int s = d.ns - 1;
        for (; s >= 0; --s) {
          if (++o[s] <= oHi[s])
            break;
          o[s] = oLo[s];
        }
        if (s < 0)
          break;
      }
    }
    dx[e] = acc;
  }
}

template <typename T>
__global__ void globalAveragePlanes(const T *x, T *y, int64_t planes,
                                    int64_t size) {
  for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; q < planes;
       q += int64_t(blockDim.x) * gridDim.x) {
    const T *px = x + q * size;
    double sum = 0.0;
    for (int64_t i = 0; i < size; ++i)
      sum += px[i];
    y[q] = size == 0 ? T(0) : static_cast<T>(sum / size);
  }
}

/// dX (zeroed before) += dY at Indices, one thread per plane of `outPlane`
/// dY elements and `inPlane` dX elements, in dY order. An index outside dX
/// records its position (the plane's first; the smallest overall wins); one
/// inside dX but outside the plane sets `foreign` and is left to
/// maxPoolGradSequential.
template <typename T>
__global__ void
maxPoolGradPlanes(const T *dy, const int64_t *indices, T *dx, int64_t planes,
                  int64_t outPlane, int64_t inPlane, int64_t total,
                  unsigned long long *badPosition, unsigned *foreign) {
  for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; q < planes;
       q += int64_t(blockDim.x) * gridDim.x) {
    int64_t lo = q * inPlane, hi = lo + inPlane;
    for (int64_t i = q * outPlane, end = i + outPlane; i < end; ++i) {
      int64_t at = indices[i];
      if (at == -1)
        continue;
      if (at < 0 || at >= total) {
        atomicMin(badPosition, static_cast<unsigned long long>(i));
        break;
      }
      if (at < lo || at >= hi) {
        *foreign = 1;
        continue;
      }
      dx[at] += dy[i];
    }
  }
}

/// When some index left its plane: dX from scratch, one thread adding in
/// the CPU's order (the block zeroes dX first).
template <typename T>
__global__ void maxPoolGradSequential(const T *dy, const int64_t *indices,
                                      T *dx, int64_t count, int64_t total,
                                      const unsigned *foreign) {
  if (*foreign == 0)
    return;
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x)
    dx[i] = T(0);
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  for (int64_t i = 0; i < count; ++i) {
    int64_t at = indices[i];
    if (at < 0 || at >= total) // -1, or reported as the CPU does
      continue;
    dx[at] += dy[i];
  }
}

} // namespace

llvm::Error maxPoolKernel(const KernelContext &ctx) {
  cpu::PoolGeometry g;
  SHARDC_CPU_TRY(cpu::checkMaxPool(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  using Types = cpu::DTypeList<DType::F32, DType::F64, DType::U8, DType::I8,
                               DType::I32, DType::I64>;
  return cpu::dispatchIn(
      Types{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        PoolDims d;
        SHARDC_CPU_TRY(makePoolDims(ctx, g, d));
        int64_t total = g.planes * g.outSize;
        if (total == 0)
          return llvm::Error::success();
        T nan = T(0);
        if constexpr (std::is_floating_point_v<T>)
          nan = std::numeric_limits<T>::quiet_NaN();
        maxPoolOutputs<<<blocksFor(total), kBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), y.as<T>(),
            g.wantIndices ? ctx.outputs[1].as<int64_t>() : nullptr, d,
            g.storageOrder == 1, std::numeric_limits<T>::lowest(), nan);
        return checkLaunch(ctx);
      });
}

llvm::Error averagePoolKernel(const KernelContext &ctx) {
  cpu::PoolGeometry g;
  SHARDC_CPU_TRY(cpu::checkAveragePool(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        PoolDims d;
        SHARDC_CPU_TRY(makePoolDims(ctx, g, d));
        int64_t total = g.planes * g.outSize;
        if (total == 0)
          return llvm::Error::success();
        averagePoolOutputs<<<blocksFor(total), kBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), y.as<T>(), d, g.includePad);
        return checkLaunch(ctx);
      });
}

llvm::Error globalAveragePoolKernel(const KernelContext &ctx) {
  int64_t planes = 0, size = 0;
  SHARDC_CPU_TRY(cpu::checkGlobalAveragePool(ctx, planes, size));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return cpu::dispatchIn(cpu::FloatTypes{}, ctx, x.dtype, "X",
                         [&](auto tag) -> llvm::Error {
                           using T = typename decltype(tag)::type;
                           if (planes == 0)
                             return llvm::Error::success();
                           globalAveragePlanes<<<blocksFor(planes), kBlock, 0,
                                                 cudaStreamOf(ctx)>>>(
                               x.as<T>(), y.as<T>(), planes, size);
                           return checkLaunch(ctx);
                         });
}

llvm::Error maxPoolGradKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::checkMaxPoolGrad(ctx));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &indices = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        cudaStream_t stream = cudaStreamOf(ctx);
        int64_t count = dy.numel(), total = dx.numel();
        if (total > 0)
          SHARDC_CPU_TRY(check(cudaMemsetAsync(dx.data, 0, dx.bytes(), stream),
                               "cudaMemsetAsync (MaxPoolGrad dX)"));
        if (count == 0)
          return llvm::Error::success();
        // Planes: dY's and dX's (N, C) when they agree, else one.
        int64_t planes = 1;
        if (dy.rank() >= 2 && dx.rank() >= 2 && dy.shape[0] == dx.shape[0] &&
            dy.shape[1] == dx.shape[1])
          planes = dy.shape[0] * dy.shape[1];
        // Scratch: the first bad position, then the foreign flag.
        llvm::Expected<void *> base = streamOf(ctx).scratch(16);
        if (!base)
          return base.takeError();
        auto *badPosition = static_cast<unsigned long long *>(*base);
        auto *foreign = reinterpret_cast<unsigned *>(badPosition + 1);
        SHARDC_CPU_TRY(
            check(cudaMemsetAsync(badPosition, 0xff, sizeof(unsigned long long),
                                  stream),
                  "cudaMemsetAsync (MaxPoolGrad scratch)"));
        SHARDC_CPU_TRY(
            check(cudaMemsetAsync(foreign, 0, sizeof(unsigned), stream),
                  "cudaMemsetAsync (MaxPoolGrad scratch)"));
        maxPoolGradPlanes<<<blocksFor(planes), kBlock, 0, stream>>>(
            dy.as<T>(), indices.as<int64_t>(), dx.as<T>(), planes,
            count / planes, total / planes, total, badPosition, foreign);
        SHARDC_CPU_TRY(checkLaunch(ctx));
        maxPoolGradSequential<<<1, kBlock, 0, stream>>>(
            dy.as<T>(), indices.as<int64_t>(), dx.as<T>(), count, total,
            foreign);
        SHARDC_CPU_TRY(checkLaunch(ctx));
        // Fail as the CPU kernel does on the first index outside dX.
        unsigned long long position = kNoBadPosition;
        CudaStream &cs = streamOf(ctx);
        SHARDC_CPU_TRY(cs.readBack(&position, badPosition, sizeof(position)));
        if (position == kNoBadPosition)
          return llvm::Error::success();
        int64_t i = static_cast<int64_t>(position), at = 0;
        SHARDC_CPU_TRY(cs.readBack(&at, indices.as<int64_t>() + i, sizeof(at)));
        return cpu::maxPoolIndexOutOfRange(ctx, at, i);
      });
}

llvm::Error averagePoolGradKernel(const KernelContext &ctx) {
  cpu::PoolGeometry g;
  SHARDC_CPU_TRY(cpu::checkAveragePoolGrad(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &dx = ctx.outputs[0];
  return cpu::dispatchIn(cpu::FloatTypes{}, ctx, dy.dtype, "dY",
                         [&](auto tag) -> llvm::Error {
                           using T = typename decltype(tag)::type;
                           PoolDims d;
                           SHARDC_CPU_TRY(makePoolDims(ctx, g, d));
                           int64_t total = g.planes * g.inSize;
                           if (total == 0)
                             return llvm::Error::success();
                           averagePoolGradInputs<<<blocksFor(total), kBlock, 0,
                                                   cudaStreamOf(ctx)>>>(
                               dy.as<T>(), dx.as<T>(), d, g.includePad);
                           return checkLaunch(ctx);
                         });
}

} // namespace shardc::rt::cuda
