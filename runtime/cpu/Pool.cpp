//===- Pool.cpp - MaxPool, AveragePool, GlobalAveragePool -----------------===//
//
// N-D pooling. For each spatial dimension and output coordinate, the input
// coordinates a window covers are precomputed once; a window is then the
// cartesian product of those lists. Padding never contributes a value; the
// output shape (which encodes ceil_mode) is taken from the output view. A
// window with no in-bounds element (possible only with ceil_mode and a
// stride larger than the kernel) yields the type's lowest value (MaxPool,
// index -1) or 0 (AveragePool). The operand checks (checkMaxPool,
// checkAveragePool, ...) are shared with the CUDA kernels
// (runtime/cpu/ConvPool.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/ConvPool.h"

#include <algorithm>
#include <vector>

namespace shardc::rt::cpu {

namespace {

/// The input coordinates of every window along one spatial dimension.
struct AxisWindows {
  int64_t kernel = 0, stride = 1, dilation = 1, padBegin = 0;
  /// pos[o * kernel + j], j < count[o]: in-bounds input coordinates.
  std::vector<int64_t> pos;
  std::vector<int64_t> count;
  /// Taps inside the padded input (in-bounds or padding), for
  /// count_include_pad. A tap beyond the end padding (ceil_mode) is not one.
  std::vector<int64_t> paddedCount;
};

AxisWindows buildAxisWindows(int64_t in, int64_t out, int64_t kernel,
                             int64_t stride, int64_t dilation, int64_t padBegin,
                             int64_t padEnd) {
  AxisWindows a;
  a.kernel = kernel;
  a.stride = stride;
  a.dilation = dilation;
  a.padBegin = padBegin;
  a.pos.assign(static_cast<size_t>(out * kernel), 0);
  a.count.assign(static_cast<size_t>(out), 0);
  a.paddedCount.assign(static_cast<size_t>(out), 0);
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * stride - padBegin;
    for (int64_t j = 0; j < kernel; ++j) {
      int64_t p = start + j * dilation;
      if (p < -padBegin || p >= in + padEnd)
        continue;
      ++a.paddedCount[o];
      if (p >= 0 && p < in)
        a.pos[o * kernel + a.count[o]++] = p;
    }
  }
  return a;
}

/// The window tables of MaxPool and AveragePool.
struct PoolSetup {
  int64_t planes = 0; // N * C
  llvm::SmallVector<int64_t, 3> inShape, outShape;
  int64_t inSize = 0, outSize = 0;
  std::vector<AxisWindows> axes;
};

PoolSetup setupPool(const PoolGeometry &g) {
  PoolSetup p;
  p.planes = g.planes;
  p.inShape = g.inShape;
  p.outShape = g.outShape;
  p.inSize = g.inSize;
  p.outSize = g.outSize;
  for (size_t d = 0; d < g.inShape.size(); ++d)
    p.axes.push_back(buildAxisWindows(
        g.inShape[d], g.outShape[d], g.w.kernel[d], g.w.strides[d],
        g.w.dilations[d], g.w.padBegin[d], g.w.padEnd[d]));
  return p;
}

/// The checks MaxPool and AveragePool (and AveragePoolGrad, as the pool
/// dX -> dY) share.
llvm::Error checkPoolWindows(const KernelContext &ctx, const TensorView &x,
                             const TensorView &y, PoolGeometry &p) {
  int64_t rank = x.rank();
  if (rank < 3)
    return ctx.error("'X' of shape " + shapeToString(x.shape) +
                     " needs at least one spatial dimension");
  if (y.rank() != rank || y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1])
    return ctx.error("'Y' of shape " + shapeToString(y.shape) +
                     " does not match 'X' " + shapeToString(x.shape));
  int64_t ns = rank - 2;
  SHARDC_CPU_TRY(readWindowAttrs(ctx, ns, {}, false, p.w));
  p.planes = x.shape[0] * x.shape[1];
  p.inShape.assign(x.shape.begin() + 2, x.shape.end());
  p.outShape.assign(y.shape.begin() + 2, y.shape.end());
  p.inSize = numElements(p.inShape);
  p.outSize = numElements(p.outShape);
  for (int64_t d = 0; d < ns; ++d) {
    int64_t span = p.w.dilations[d] * (p.w.kernel[d] - 1) + 1;
    int64_t padded = p.inShape[d] + p.w.padBegin[d] + p.w.padEnd[d];
    if (span > padded)
      return ctx.error("kernel " + shapeToString(p.w.kernel) +
                       " is larger than the padded input on spatial axis " +
                       llvm::Twine(d));
    // The windows that fit (floor), or one more that reaches into the end
    // padding (ceil_mode).
    int64_t fit = (padded - span) / p.w.strides[d] + 1;
    if (p.outShape[d] < fit || p.outShape[d] > fit + 1)
      return ctx.error("'Y' of shape " + shapeToString(y.shape) + " has " +
                       llvm::Twine(p.outShape[d]) +
                       " windows on spatial axis " + llvm::Twine(d) +
                       "; the input, kernel, strides and pads give " +
                       llvm::Twine(fit) + " (or " + llvm::Twine(fit + 1) +
                       " with ceil_mode)");
  }
  return llvm::Error::success();
}

/// Calls `fn(outIndex, lists, counts, paddedTaps)` for every output position
/// of one plane; lists[d][0..counts[d]) are the window's coordinates on
/// spatial axis d.
template <typename Fn> void forEachWindow(const PoolSetup &p, Fn &&fn) {
  size_t ns = p.outShape.size();
  llvm::SmallVector<int64_t, 6> o(ns, 0);
  llvm::SmallVector<const int64_t *, 6> lists(ns);
  llvm::SmallVector<int64_t, 6> counts(ns);
  for (int64_t oi = 0; oi < p.outSize; ++oi) {
    int64_t padded = 1;
    for (size_t d = 0; d < ns; ++d) {
      const AxisWindows &a = p.axes[d];
      lists[d] = a.pos.data() + o[d] * a.kernel;
      counts[d] = a.count[o[d]];
      padded *= a.paddedCount[o[d]];
    }
    fn(oi, lists, counts, padded);
    for (int64_t d = static_cast<int64_t>(ns) - 1; d >= 0; --d) {
      if (++o[d] < p.outShape[d])
        break;
      o[d] = 0;
    }
  }
}

/// Calls `tap(rowMajorOffset, colMajorOffset)` for every in-bounds input
/// element of a window (offsets within one plane), in row-major order.
template <typename Tap>
void forEachTap(llvm::ArrayRef<const int64_t *> lists,
                llvm::ArrayRef<int64_t> counts,
                llvm::ArrayRef<int64_t> rowStrides,
                llvm::ArrayRef<int64_t> colStrides, Tap &&tap) {
  size_t ns = lists.size();
  for (int64_t c : counts)
    if (c == 0)
      return;
  if (ns == 1) {
    for (int64_t a = 0; a < counts[0]; ++a)
      tap(lists[0][a] * rowStrides[0], lists[0][a] * colStrides[0]);
    return;
  }
  if (ns == 2) {
    for (int64_t a = 0; a < counts[0]; ++a) {
      int64_t row = lists[0][a] * rowStrides[0];
      int64_t col = lists[0][a] * colStrides[0];
      for (int64_t b = 0; b < counts[1]; ++b)
        tap(row + lists[1][b] * rowStrides[1],
            col + lists[1][b] * colStrides[1]);
    }
    return;
  }
  llvm::SmallVector<int64_t, 6> j(ns, 0);
  while (true) {
    int64_t row = 0, col = 0;
    for (size_t d = 0; d < ns; ++d) {
      row += lists[d][j[d]] * rowStrides[d];
      col += lists[d][j[d]] * colStrides[d];
    }
    tap(row, col);
    int64_t d = static_cast<int64_t>(ns) - 1;
    for (; d >= 0; --d) {
      if (++j[d] < counts[d])
        break;
      j[d] = 0;
    }
    if (d < 0)
      return;
  }
}

/// Column-major strides over the spatial dims (for storage_order = 1).
llvm::SmallVector<int64_t, 6> colMajorStrides(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 6> s(shape.size(), 1);
  for (size_t d = 1; d < shape.size(); ++d)
    s[d] = s[d - 1] * shape[d - 1];
  return s;
}

/// MaxPool over one plane with two spatial axes, for floating types: the
/// same result and index as the generic tap loop below (the first largest
/// value in row-major window order; NaNs skipped unless the window holds
/// nothing else, then the first NaN), without its per-tap branches: a max
/// over random data mispredicts about every other comparison.
template <typename T>
void maxPoolPlane2D(const PoolSetup &p, const T *px, T *py, int64_t *pidx,
                    int64_t base, bool colMajor) {
  const AxisWindows &ah = p.axes[0], &aw = p.axes[1];
  const int64_t inW = p.inShape[1], inH = p.inShape[0];
  const int64_t outH = p.outShape[0], outW = p.outShape[1];
  const int64_t kw = aw.kernel, sw = aw.stride, dw = aw.dilation;
  const int64_t pw = aw.padBegin;
  const int64_t *colPos = aw.pos.data(), *colCount = aw.count.data();
  // Outputs [lo, hi) have every tap inside the row: their tap b is at
  // column ow * stride + b * dilation - padBegin, no table or count needed.
  int64_t lo = 0, hi = outW;
  while (lo < hi && colCount[lo] != kw)
    ++lo;
  while (hi > lo && colCount[hi - 1] != kw)
    --hi;
  std::vector<int64_t> offsets(static_cast<size_t>(outW));
  int64_t *offset = offsets.data();
  for (int64_t oh = 0; oh < outH; ++oh) {
    const int64_t *rows = ah.pos.data() + oh * ah.kernel;
    const int64_t nr = ah.count[oh];
    T *y = py + oh * outW;
    auto first = [&](int64_t ow) {
      offset[ow] = -1;
      y[ow] = std::numeric_limits<T>::lowest();
      if (nr > 0 && colCount[ow] > 0) {
        offset[ow] = rows[0] * inW + colPos[ow * kw];
        y[ow] = px[offset[ow]];
      }
    };
    // The exact loop, in row-major tap order: taken are larger values, or
    // the first number after NaNs only.
    auto exact = [&](int64_t from, int64_t to) {
      for (int64_t ow = from; ow < to; ++ow)
        first(ow);
      for (int64_t a = 0; a < nr; ++a)
        for (int64_t b = 0; b < kw; ++b) {
          if (a == 0 && b == 0)
            continue;
          for (int64_t ow = from; ow < to; ++ow) {
            if (b >= colCount[ow])
              continue;
            int64_t off = rows[a] * inW + colPos[ow * kw + b];
            T v = px[off], best = y[ow];
            bool take = (v > best) | ((best != best) & (v == v));
            y[ow] = take ? v : best;
            offset[ow] = take ? off : offset[ow];
          }
        }
    };
    // The interior without NaN checks per tap: larger values only, noting
    // whether it saw a NaN; a row that had one is done again exactly.
    bool sawNaN = false;
    if (nr > 0 && lo < hi) {
      for (int64_t ow = lo; ow < hi; ++ow)
        first(ow);
      for (int64_t a = 0; a < nr; ++a) {
        const int64_t rowOff = rows[a] * inW - pw;
        for (int64_t b = 0; b < kw; ++b) {
          const int64_t tapOff = rowOff + b * dw;
          for (int64_t ow = lo; ow < hi; ++ow) {
            int64_t off = tapOff + ow * sw;
            T v = px[off], best = y[ow];
            // Masks, not a branch: a max over data mispredicts about every
            // other comparison.
            int64_t take = -static_cast<int64_t>(v > best);
            sawNaN |= v != v;
            y[ow] = v > best ? v : best;
            offset[ow] = (off & take) | (offset[ow] & ~take);
          }
        }
      }
    }
    if (sawNaN || nr == 0) {
      exact(0, outW);
    } else {
      exact(0, lo);
      exact(hi, outW);
    }
    if (!pidx)
      continue;
    for (int64_t ow = 0; ow < outW; ++ow) {
      int64_t off = offset[ow];
      int64_t local = colMajor ? (off % inW) * inH + off / inW : off;
      pidx[oh * outW + ow] = off < 0 ? -1 : base + local;
    }
  }
}

} // namespace

llvm::Error checkMaxPool(const KernelContext &ctx, PoolGeometry &p) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  p.wantIndices = ctx.hasOutput(1);
  if (p.wantIndices) {
    SHARDC_CPU_TRY(requireOutput(ctx, 1, "Indices"));
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[1], DType::I64, "Indices"));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[1], y.shape, "Indices"));
  }
  p.storageOrder = ctx.attrs.getInt("storage_order", 0);
  if (p.storageOrder != 0 && p.storageOrder != 1)
    return ctx.error("storage_order must be 0 or 1, got " +
                     llvm::Twine(p.storageOrder));
  return checkPoolWindows(ctx, x, y, p);
}

llvm::Error checkAveragePool(const KernelContext &ctx, PoolGeometry &p) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  p.includePad = ctx.attrs.getInt("count_include_pad", 0) != 0;
  return checkPoolWindows(ctx, x, y, p);
}

llvm::Error checkAveragePoolGrad(const KernelContext &ctx, PoolGeometry &p) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dX"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &dx = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, dx, dy.dtype, "dX"));
  p.includePad = ctx.attrs.getInt("count_include_pad", 0) != 0;
  return checkPoolWindows(ctx, dx, dy, p);
}

llvm::Error checkGlobalAveragePool(const KernelContext &ctx, int64_t &planes,
                                   int64_t &size) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  if (x.rank() < 2)
    return ctx.error("'X' of shape " + shapeToString(x.shape) +
                     " must be (N, C, ...)");
  llvm::SmallVector<int64_t, 6> expected = {x.shape[0], x.shape[1]};
  expected.append(x.rank() - 2, 1);
  SHARDC_CPU_TRY(requireShape(ctx, y, expected, "Y"));
  planes = x.shape[0] * x.shape[1];
  size = product(x.shape, 2, x.rank());
  return llvm::Error::success();
}

llvm::Error checkMaxPoolGrad(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "Indices"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dX"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &indices = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, indices, DType::I64, "Indices"));
  SHARDC_CPU_TRY(requireShape(ctx, indices, dy.shape, "Indices"));
  SHARDC_CPU_TRY(requireType(ctx, dx, dy.dtype, "dX"));
  return llvm::Error::success();
}

llvm::Error maxPoolIndexOutOfRange(const KernelContext &ctx, int64_t index,
                                   int64_t position) {
  return ctx.error("index " + llvm::Twine(index) + " at position " +
                   llvm::Twine(position) + " is outside 'dX' of shape " +
                   shapeToString(ctx.outputs[0].shape));
}

llvm::Error maxPoolKernel(const KernelContext &ctx) {
  PoolGeometry g;
  SHARDC_CPU_TRY(checkMaxPool(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  bool wantIndices = g.wantIndices;
  int64_t storageOrder = g.storageOrder;
  PoolSetup p = setupPool(g);
  llvm::SmallVector<int64_t, 6> rowStrides = rowMajorStrides(p.inShape);
  llvm::SmallVector<int64_t, 6> colStrides = colMajorStrides(p.inShape);

  using Types = DTypeList<DType::F32, DType::F64, DType::U8, DType::I8,
                          DType::I32, DType::I64>;
  return dispatchIn(Types{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    int64_t *pi = wantIndices ? ctx.outputs[1].as<int64_t>() : nullptr;
    if constexpr (std::is_floating_point_v<T>) {
      if (p.inShape.size() == 2) {
        for (int64_t plane = 0; plane < p.planes; ++plane)
          maxPoolPlane2D<T>(p, x.as<T>() + plane * p.inSize,
                            y.as<T>() + plane * p.outSize,
                            pi ? pi + plane * p.outSize : nullptr,
                            plane * p.inSize, storageOrder != 0);
        return llvm::Error::success();
      }
    }
    for (int64_t plane = 0; plane < p.planes; ++plane) {
      const T *px = x.as<T>() + plane * p.inSize;
      T *py = y.as<T>() + plane * p.outSize;
      int64_t *pidx = pi ? pi + plane * p.outSize : nullptr;
      forEachWindow(p, [&](int64_t oi, llvm::ArrayRef<const int64_t *> lists,
                           llvm::ArrayRef<int64_t> counts, int64_t) {
        bool found = false;
        bool sawNaN = false;
        T best = std::numeric_limits<T>::lowest();
        int64_t bestRow = -1, bestCol = -1;
        forEachTap(lists, counts, rowStrides, colStrides,
                   [&](int64_t row, int64_t col) {
                     T v = px[row];
                     if constexpr (std::is_floating_point_v<T>) {
                       if (std::isnan(v)) {
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
            best = std::numeric_limits<T>::quiet_NaN();
        }
        py[oi] = best;
        if (pidx) {
          int64_t local = storageOrder ? bestCol : bestRow;
          pidx[oi] = local < 0 ? -1 : plane * p.inSize + local;
        }
      });
    }
    return llvm::Error::success();
  });
}

llvm::Error averagePoolKernel(const KernelContext &ctx) {
  PoolGeometry g;
  SHARDC_CPU_TRY(checkAveragePool(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  bool includePad = g.includePad;
  PoolSetup p = setupPool(g);
  llvm::SmallVector<int64_t, 6> rowStrides = rowMajorStrides(p.inShape);

  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        for (int64_t plane = 0; plane < p.planes; ++plane) {
          const T *px = x.as<T>() + plane * p.inSize;
          T *py = y.as<T>() + plane * p.outSize;
          forEachWindow(p, [&](int64_t oi,
                               llvm::ArrayRef<const int64_t *> lists,
                               llvm::ArrayRef<int64_t> counts, int64_t padded) {
            double sum = 0.0;
            int64_t valid = 1;
            for (int64_t c : counts)
              valid *= c;
            forEachTap(lists, counts, rowStrides, rowStrides,
                       [&](int64_t row, int64_t) { sum += px[row]; });
            int64_t divisor = includePad ? padded : valid;
            py[oi] = divisor == 0 ? T(0) : static_cast<T>(sum / divisor);
          });
        }
        return llvm::Error::success();
      });
}

llvm::Error globalAveragePoolKernel(const KernelContext &ctx) {
  int64_t planes = 0, size = 0;
  SHARDC_CPU_TRY(checkGlobalAveragePool(ctx, planes, size));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        for (int64_t plane = 0; plane < planes; ++plane) {
          const T *px = x.as<T>() + plane * size;
          double sum = 0.0;
          for (int64_t i = 0; i < size; ++i)
            sum += px[i];
          y.as<T>()[plane] = size == 0 ? T(0) : static_cast<T>(sum / size);
        }
        return llvm::Error::success();
      });
}

/// dX zero-filled, then dX.flat[Indices[i]] += dY[i]; index -1 (a window
/// without in-bounds elements) contributes nothing.
llvm::Error maxPoolGradKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(checkMaxPoolGrad(ctx));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &indices = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  int64_t total = dx.numel();
  return dispatchIn(FloatTypes{}, ctx, dy.dtype, "dY",
                    [&](auto tag) -> llvm::Error {
                      using T = typename decltype(tag)::type;
                      const T *pdy = dy.as<T>();
                      const int64_t *pi = indices.as<int64_t>();
                      T *pdx = dx.as<T>();
                      std::fill(pdx, pdx + total, T(0));
                      for (int64_t i = 0, e = dy.numel(); i < e; ++i) {
                        int64_t at = pi[i];
                        if (at == -1)
                          continue;
                        if (at < 0 || at >= total)
                          return maxPoolIndexOutOfRange(ctx, at, i);
                        pdx[at] += pdy[i];
                      }
                      return llvm::Error::success();
                    });
}

/// The adjoint of averagePoolKernel: every dY element is spread over the
/// in-bounds elements of its window, divided by the forward's divisor.
llvm::Error averagePoolGradKernel(const KernelContext &ctx) {
  PoolGeometry g;
  SHARDC_CPU_TRY(checkAveragePoolGrad(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &dx = ctx.outputs[0];
  bool includePad = g.includePad;
  PoolSetup p = setupPool(g);
  llvm::SmallVector<int64_t, 6> rowStrides = rowMajorStrides(p.inShape);

  return dispatchIn(
      FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        std::fill(dx.as<T>(), dx.as<T>() + dx.numel(), T(0));
        for (int64_t plane = 0; plane < p.planes; ++plane) {
          const T *pdy = dy.as<T>() + plane * p.outSize;
          T *pdx = dx.as<T>() + plane * p.inSize;
          forEachWindow(p, [&](int64_t oi,
                               llvm::ArrayRef<const int64_t *> lists,
                               llvm::ArrayRef<int64_t> counts, int64_t padded) {
            int64_t valid = 1;
            for (int64_t c : counts)
              valid *= c;
            int64_t divisor = includePad ? padded : valid;
            if (divisor == 0)
              return;
            T share = static_cast<T>(static_cast<double>(pdy[oi]) / divisor);
            forEachTap(lists, counts, rowStrides, rowStrides,
                       [&](int64_t row, int64_t) { pdx[row] += share; });
          });
        }
        return llvm::Error::success();
      });
}

} // namespace shardc::rt::cpu
