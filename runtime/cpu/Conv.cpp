//===- Conv.cpp - N-D convolution -----------------------------------------===//
//
// Conv over 1, 2 or 3 (or more) spatial dimensions: per image and group, an
// im2col matrix (C/group * prod(kernel)) x prod(output spatial) multiplied by
// the group's weights (M/group x C/group * prod(kernel)) with BLAS. A 1x1
// kernel with unit stride and no padding multiplies the input directly.
// The operand checks (checkConv, checkConvGradInput, checkConvGradWeight)
// are shared with the CUDA kernels (runtime/cpu/ConvPool.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/ConvPool.h"

#include <algorithm>
#include <vector>

namespace shardc::rt::cpu {

namespace {

/// The most elements of one block of the im2col matrix: output positions
/// are taken in blocks of columns so that the matrix (channels * prod(kernel)
/// rows) never holds more, whatever the image and kernel (a 1024 x 1024
/// image and a 64 x 64 kernel would need 3.8 * 10^9 at once).
constexpr int64_t kColBlockElements = int64_t(1) << 22;

/// The output columns of one im2col block for `rows` rows.
int64_t colBlock(int64_t rows, int64_t outSize) {
  return std::clamp<int64_t>(kColBlockElements / std::max<int64_t>(rows, 1), 1,
                             std::max<int64_t>(outSize, 1));
}

/// One output row's share of an im2col block, for one row of the matrix
/// (channel, kernel tap): columns [ja, jb) of an output row whose column 0 is
/// block column `at`. Column j reads element `base + j * stride` of the
/// input; those in [l, h) fall inside the input row, the others on padding,
/// and none do when `valid` is false (the outer coordinates are padding).
struct ColumnSegment {
  int64_t row, at, ja, jb, base, l, h;
  bool valid;
};

/// Walks the block of output columns [c0, c1) (flat output positions) of
/// the im2col matrix (rows = channels * prod(kernel)), calling `seg` with
/// each ColumnSegment.
template <typename Seg>
void walkColumns(int64_t channels, llvm::ArrayRef<int64_t> inShape,
                 llvm::ArrayRef<int64_t> outShape, const WindowAttrs &w,
                 int64_t c0, int64_t c1, Seg &&seg) {
  size_t ns = inShape.size();
  int64_t inSize = numElements(inShape);
  int64_t kprod = numElements(w.kernel);
  llvm::SmallVector<int64_t, 6> inStrides = rowMajorStrides(inShape);
  int64_t innerOut = outShape[ns - 1];
  int64_t innerIn = inShape[ns - 1];
  int64_t innerStride = w.strides[ns - 1];
  if (innerOut == 0 || c0 >= c1)
    return;
  int64_t firstRow = c0 / innerOut;
  llvm::SmallVector<int64_t, 6> k(ns, 0), o(ns, 0), o0(ns, 0);
  for (int64_t d = static_cast<int64_t>(ns) - 2, t = firstRow; d >= 0; --d) {
    o0[d] = t % outShape[d];
    t /= outShape[d];
  }
  for (int64_t c = 0; c < channels; ++c) {
    std::fill(k.begin(), k.end(), 0);
    for (int64_t kk = 0; kk < kprod; ++kk) {
      int64_t row = c * kprod + kk;
      int64_t innerOff = k[ns - 1] * w.dilations[ns - 1] - w.padBegin[ns - 1];
      int64_t lo =
          innerOff >= 0 ? 0 : (-innerOff + innerStride - 1) / innerStride;
      int64_t hi = innerIn - innerOff <= 0
                       ? 0
                       : (innerIn - innerOff + innerStride - 1) / innerStride;
      lo = std::min(lo, innerOut);
      hi = std::max(lo, std::min(hi, innerOut));
      o = o0;
      for (int64_t oo = firstRow; oo * innerOut < c1; ++oo) {
        int64_t rowStart = oo * innerOut;
        int64_t ja = std::max<int64_t>(c0 - rowStart, 0);
        int64_t jb = std::min<int64_t>(c1 - rowStart, innerOut);
        // Input offset of the outer (all but innermost) coordinates.
        int64_t base = c * inSize;
        bool valid = true;
        for (size_t d = 0; d + 1 < ns; ++d) {
          int64_t i =
              o[d] * w.strides[d] - w.padBegin[d] + k[d] * w.dilations[d];
          if (i < 0 || i >= inShape[d]) {
            valid = false;
            break;
          }
          base += i * inStrides[d];
        }
        int64_t l = std::clamp(lo, ja, jb);
        seg(ColumnSegment{row, rowStart - c0, ja, jb, base + innerOff, l,
                          std::clamp(hi, l, jb), valid});
        for (int64_t d = static_cast<int64_t>(ns) - 2; d >= 0; --d) {
          if (++o[d] < outShape[d])
            break;
          o[d] = 0;
        }
      }
      for (int64_t d = static_cast<int64_t>(ns) - 1; d >= 0; --d) {
        if (++k[d] < w.kernel[d])
          break;
        k[d] = 0;
      }
    }
  }
}

/// Fills `col`, the block of output columns [c0, c1) of the im2col matrix
/// (rows = channels * prod(kernel), row-major with c1 - c0 columns), from
/// `x` (channels x prod(inShape)); out-of-range taps read zero.
template <typename T>
void im2col(const T *x, int64_t channels, llvm::ArrayRef<int64_t> inShape,
            llvm::ArrayRef<int64_t> outShape, const WindowAttrs &w, int64_t c0,
            int64_t c1, T *col) {
  int64_t ld = c1 - c0;
  int64_t stride = w.strides.back();
  walkColumns(channels, inShape, outShape, w, c0, c1,
              [&](const ColumnSegment &g) {
                T *dst = col + g.row * ld + g.at;
                if (!g.valid) {
                  std::fill(dst + g.ja, dst + g.jb, T(0));
                  return;
                }
                const T *src = x + g.base;
                std::fill(dst + g.ja, dst + g.l, T(0));
                if (stride == 1)
                  std::copy(src + g.l, src + g.h, dst + g.l);
                else
                  for (int64_t j = g.l; j < g.h; ++j)
                    dst[j] = src[j * stride];
                std::fill(dst + g.h, dst + g.jb, T(0));
              });
}

/// The adjoint of im2col: adds every entry of `col` (the block of output
/// columns [c0, c1), as im2col fills it) into the element of `x` (channels
/// x prod(inShape)) it was read from; taps on padding are dropped. `x` must
/// be initialized by the caller.
template <typename T>
void col2im(const T *col, int64_t channels, llvm::ArrayRef<int64_t> inShape,
            llvm::ArrayRef<int64_t> outShape, const WindowAttrs &w, int64_t c0,
            int64_t c1, T *x) {
  int64_t ld = c1 - c0;
  int64_t stride = w.strides.back();
  walkColumns(channels, inShape, outShape, w, c0, c1,
              [&](const ColumnSegment &g) {
                if (!g.valid)
                  return;
                const T *src = col + g.row * ld + g.at;
                T *dst = x + g.base;
                for (int64_t j = g.l; j < g.h; ++j)
                  dst[j * stride] += src[j];
              });
}

llvm::Error convGeometry(const KernelContext &ctx,
                         llvm::ArrayRef<int64_t> xShape, llvm::StringRef xName,
                         llvm::ArrayRef<int64_t> wShape, llvm::StringRef wName,
                         llvm::ArrayRef<int64_t> yShape, llvm::StringRef yName,
                         ConvGeometry &g) {
  int64_t rank = static_cast<int64_t>(xShape.size());
  if (rank < 3)
    return ctx.error("'" + xName + "' of shape " + shapeToString(xShape) +
                     " needs at least one spatial dimension");
  if (static_cast<int64_t>(wShape.size()) != rank)
    return ctx.error("'" + wName + "' of shape " + shapeToString(wShape) +
                     " must have the rank of '" + xName + "' " +
                     shapeToString(xShape));
  int64_t ns = rank - 2;
  g.batch = xShape[0];
  g.channels = xShape[1];
  g.m = wShape[0];
  g.cg = wShape[1];
  g.group = ctx.attrs.getInt("group", 1);
  if (g.group < 1 || g.cg * g.group != g.channels || g.m % g.group != 0)
    return ctx.error("group " + llvm::Twine(g.group) + " does not fit '" +
                     xName + "' " + shapeToString(xShape) + " and '" + wName +
                     "' " + shapeToString(wShape));
  SHARDC_CPU_TRY(readWindowAttrs(ctx, ns, wShape.drop_front(2), true, g.w));
  g.inShape.assign(xShape.begin() + 2, xShape.end());
  llvm::SmallVector<int64_t, 6> expected = {g.batch, g.m};
  g.direct = true;
  for (int64_t d = 0; d < ns; ++d) {
    int64_t span = g.w.dilations[d] * (g.w.kernel[d] - 1) + 1;
    int64_t padded = g.inShape[d] + g.w.padBegin[d] + g.w.padEnd[d];
    if (padded < span)
      return ctx.error("kernel " + shapeToString(g.w.kernel) +
                       " is larger than the padded input on spatial axis " +
                       llvm::Twine(d));
    expected.push_back((padded - span) / g.w.strides[d] + 1);
    g.direct &= g.w.kernel[d] == 1 && g.w.strides[d] == 1 &&
                g.w.padBegin[d] == 0 && g.w.padEnd[d] == 0;
  }
  if (yShape != llvm::ArrayRef<int64_t>(expected))
    return ctx.error("'" + yName + "' has shape " + shapeToString(yShape) +
                     ", expected " + shapeToString(expected));
  g.outShape.assign(expected.begin() + 2, expected.end());
  return llvm::Error::success();
}

} // namespace

llvm::Error checkConv(const KernelContext &ctx, ConvGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "W"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  g.hasBias = ctx.hasInput(2);
  int64_t rank = x.rank();
  if (rank < 3)
    return ctx.error("'X' of shape " + shapeToString(x.shape) +
                     " needs at least one spatial dimension");
  if (wt.rank() != rank)
    return ctx.error("'W' of shape " + shapeToString(wt.shape) +
                     " must have the rank of 'X' " + shapeToString(x.shape));
  SHARDC_CPU_TRY(requireType(ctx, wt, x.dtype, "W"));
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  int64_t ns = rank - 2;
  g.batch = x.shape[0];
  g.channels = x.shape[1];
  g.m = wt.shape[0];
  g.cg = wt.shape[1];
  g.group = ctx.attrs.getInt("group", 1);
  if (g.group < 1 || g.cg * g.group != g.channels || g.m % g.group != 0)
    return ctx.error("group " + llvm::Twine(g.group) + " does not fit 'X' " +
                     shapeToString(x.shape) + " and 'W' " +
                     shapeToString(wt.shape));
  llvm::ArrayRef<int64_t> wKernel =
      llvm::ArrayRef<int64_t>(wt.shape).drop_front(2);
  SHARDC_CPU_TRY(readWindowAttrs(ctx, ns, wKernel, true, g.w));

  g.inShape.assign(x.shape.begin() + 2, x.shape.end());
  llvm::SmallVector<int64_t, 6> expected = {g.batch, g.m};
  g.direct = true;
  for (int64_t d = 0; d < ns; ++d) {
    int64_t span = g.w.dilations[d] * (g.w.kernel[d] - 1) + 1;
    int64_t padded = g.inShape[d] + g.w.padBegin[d] + g.w.padEnd[d];
    if (padded < span)
      return ctx.error("kernel " + shapeToString(g.w.kernel) +
                       " is larger than the padded input on spatial axis " +
                       llvm::Twine(d));
    expected.push_back((padded - span) / g.w.strides[d] + 1);
    g.direct &= g.w.kernel[d] == 1 && g.w.strides[d] == 1 &&
                g.w.padBegin[d] == 0 && g.w.padEnd[d] == 0;
  }
  SHARDC_CPU_TRY(requireShape(ctx, y, expected, "Y"));
  if (g.hasBias) {
    SHARDC_CPU_TRY(requireInput(ctx, 2, "B"));
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[2], x.dtype, "B"));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[2], {g.m}, "B"));
  }
  g.outShape.assign(expected.begin() + 2, expected.end());
  return llvm::Error::success();
}

llvm::Error checkConvGradInput(const KernelContext &ctx, ConvGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "W"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dX"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, wt, dy.dtype, "W"));
  SHARDC_CPU_TRY(requireType(ctx, dx, dy.dtype, "dX"));
  return convGeometry(ctx, dx.shape, "dX", wt.shape, "W", dy.shape, "dY", g);
}

llvm::Error checkConvGradWeight(const KernelContext &ctx, ConvGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "X"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dW"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &dw = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, x, dy.dtype, "X"));
  SHARDC_CPU_TRY(requireType(ctx, dw, dy.dtype, "dW"));
  return convGeometry(ctx, x.shape, "X", dw.shape, "dW", dy.shape, "dY", g);
}

llvm::Error convKernel(const KernelContext &ctx) {
  ConvGeometry g;
  SHARDC_CPU_TRY(checkConv(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        int64_t inSize = numElements(g.inShape);
        int64_t outSize = numElements(g.outShape);
        int64_t rows = g.cg * numElements(g.w.kernel);
        int64_t mg = g.m / g.group;
        int64_t block = colBlock(rows, outSize);
        std::vector<T> col;
        if (!g.direct)
          col.resize(static_cast<size_t>(rows * block));
        const T *px = x.as<T>();
        const T *pw = wt.as<T>();
        T *py = y.as<T>();
        for (int64_t n = 0; n < g.batch; ++n) {
          for (int64_t gi = 0; gi < g.group; ++gi) {
            const T *xg = px + (n * g.channels + gi * g.cg) * inSize;
            const T *wg = pw + gi * mg * rows;
            T *yg = py + (n * g.m + gi * mg) * outSize;
            if (g.direct) {
              gemm(false, false, mg, outSize, rows, T(1), wg, rows, xg, outSize,
                   T(0), yg, outSize);
              continue;
            }
            for (int64_t c0 = 0; c0 < outSize; c0 += block) {
              int64_t c1 = std::min(outSize, c0 + block);
              im2col(xg, g.cg, g.inShape, g.outShape, g.w, c0, c1, col.data());
              gemm(false, false, mg, c1 - c0, rows, T(1), wg, rows, col.data(),
                   c1 - c0, T(0), yg + c0, outSize);
            }
          }
        }
        if (g.hasBias) {
          const T *pb = ctx.inputs[2].as<T>();
          for (int64_t n = 0; n < g.batch; ++n)
            for (int64_t c = 0; c < g.m; ++c) {
              T *row = py + (n * g.m + c) * outSize;
              T bv = pb[c];
              for (int64_t i = 0; i < outSize; ++i)
                row[i] += bv;
            }
        }
        return llvm::Error::success();
      });
}

/// dX = col2im(W_g^T * dY_g) per image and group (a transposed convolution),
/// a block of output columns at a time.
llvm::Error convGradInputKernel(const KernelContext &ctx) {
  ConvGeometry g;
  SHARDC_CPU_TRY(checkConvGradInput(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  return dispatchIn(
      FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        int64_t inSize = numElements(g.inShape);
        int64_t outSize = numElements(g.outShape);
        int64_t rows = g.cg * numElements(g.w.kernel);
        int64_t mg = g.m / g.group;
        int64_t block = colBlock(rows, outSize);
        std::vector<T> col;
        if (!g.direct)
          col.resize(static_cast<size_t>(rows * block));
        const T *pdy = dy.as<T>();
        const T *pw = wt.as<T>();
        T *pdx = dx.as<T>();
        if (!g.direct)
          std::fill(pdx, pdx + dx.numel(), T(0));
        for (int64_t n = 0; n < g.batch; ++n) {
          for (int64_t gi = 0; gi < g.group; ++gi) {
            const T *dyg = pdy + (n * g.m + gi * mg) * outSize;
            const T *wg = pw + gi * mg * rows;
            T *dxg = pdx + (n * g.channels + gi * g.cg) * inSize;
            // (rows x mg) * (mg x columns); direct writes dX itself.
            if (g.direct) {
              gemm(true, false, rows, outSize, mg, T(1), wg, rows, dyg, outSize,
                   T(0), dxg, outSize);
              continue;
            }
            for (int64_t c0 = 0; c0 < outSize; c0 += block) {
              int64_t c1 = std::min(outSize, c0 + block);
              gemm(true, false, rows, c1 - c0, mg, T(1), wg, rows, dyg + c0,
                   outSize, T(0), col.data(), c1 - c0);
              col2im(col.data(), g.cg, g.inShape, g.outShape, g.w, c0, c1, dxg);
            }
          }
        }
        return llvm::Error::success();
      });
}

/// dW_g = sum over images and blocks of output columns of
/// dY_g[:, block] * im2col(X_g)[:, block]^T.
llvm::Error convGradWeightKernel(const KernelContext &ctx) {
  ConvGeometry g;
  SHARDC_CPU_TRY(checkConvGradWeight(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &dw = ctx.outputs[0];
  return dispatchIn(
      FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        int64_t inSize = numElements(g.inShape);
        int64_t outSize = numElements(g.outShape);
        int64_t rows = g.cg * numElements(g.w.kernel);
        int64_t mg = g.m / g.group;
        int64_t block =
            g.direct ? std::max<int64_t>(outSize, 1) : colBlock(rows, outSize);
        std::vector<T> col;
        if (!g.direct)
          col.resize(static_cast<size_t>(rows * block));
        const T *pdy = dy.as<T>();
        const T *px = x.as<T>();
        T *pdw = dw.as<T>();
        // No image or no output position: nothing accumulates.
        if (g.batch == 0 || outSize == 0)
          std::fill(pdw, pdw + dw.numel(), T(0));
        for (int64_t n = 0; n < g.batch; ++n) {
          for (int64_t gi = 0; gi < g.group; ++gi) {
            const T *xg = px + (n * g.channels + gi * g.cg) * inSize;
            const T *dyg = pdy + (n * g.m + gi * mg) * outSize;
            T *dwg = pdw + gi * mg * rows;
            for (int64_t c0 = 0; c0 < outSize; c0 += block) {
              int64_t c1 = std::min(outSize, c0 + block);
              const T *colp = xg;
              if (!g.direct) {
                im2col(xg, g.cg, g.inShape, g.outShape, g.w, c0, c1,
                       col.data());
                colp = col.data();
              }
              // (mg x columns) * (columns x rows), accumulated.
              gemm(false, true, mg, rows, c1 - c0, T(1), dyg + c0, outSize,
                   colp, c1 - c0, n == 0 && c0 == 0 ? T(0) : T(1), dwg, rows);
            }
          }
        }
        return llvm::Error::success();
      });
}

} // namespace shardc::rt::cpu
