//===- Conv.cpp - N-D convolution -----------------------------------------===//
//
// Conv over 1, 2 or 3 (or more) spatial dimensions: per image and group, an
// im2col matrix (C/group * prod(kernel)) x prod(output spatial) multiplied by
// the group's weights (M/group x C/group * prod(kernel)) with BLAS. A 1x1
// kernel with unit stride and no padding multiplies the input directly.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"

#include <vector>

namespace shardc::rt::cpu {

namespace {

/// Fills `col` (rows = channels * prod(kernel), columns = prod(outShape))
/// from `x` (channels x prod(inShape)); out-of-range taps read zero.
template <typename T>
void im2col(const T *x, int64_t channels, llvm::ArrayRef<int64_t> inShape,
            llvm::ArrayRef<int64_t> outShape, const WindowAttrs &w, T *col) {
  size_t ns = inShape.size();
  int64_t inSize = numElements(inShape);
  int64_t outSize = numElements(outShape);
  int64_t kprod = numElements(w.kernel);
  llvm::SmallVector<int64_t, 6> inStrides = rowMajorStrides(inShape);
  int64_t innerOut = outShape[ns - 1];
  int64_t innerIn = inShape[ns - 1];
  int64_t innerStride = w.strides[ns - 1];
  int64_t outerCount = outSize / std::max<int64_t>(innerOut, 1);

  llvm::SmallVector<int64_t, 6> k(ns, 0), o(ns, 0);
  for (int64_t c = 0; c < channels; ++c) {
    const T *src = x + c * inSize;
    std::fill(k.begin(), k.end(), 0);
    for (int64_t kk = 0; kk < kprod; ++kk) {
      T *dst = col + (c * kprod + kk) * outSize;
      int64_t innerOff = k[ns - 1] * w.dilations[ns - 1] - w.padBegin[ns - 1];
      std::fill(o.begin(), o.end(), 0);
      for (int64_t oo = 0; oo < outerCount; ++oo, dst += innerOut) {
        // Input offset of the outer (all but innermost) coordinates.
        int64_t base = 0;
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
        if (!valid) {
          std::fill(dst, dst + innerOut, T(0));
        } else {
          const T *row = src + base;
          for (int64_t j = 0; j < innerOut; ++j) {
            int64_t i = j * innerStride + innerOff;
            dst[j] = (i >= 0 && i < innerIn) ? row[i] : T(0);
          }
        }
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

} // namespace

llvm::Error convKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "W"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  bool hasBias = ctx.hasInput(2);
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
  int64_t batch = x.shape[0], channels = x.shape[1];
  int64_t m = wt.shape[0], cg = wt.shape[1];
  int64_t group = ctx.attrs.getInt("group", 1);
  if (group < 1 || cg * group != channels || m % group != 0)
    return ctx.error("group " + llvm::Twine(group) + " does not fit 'X' " +
                     shapeToString(x.shape) + " and 'W' " +
                     shapeToString(wt.shape));
  WindowAttrs w;
  llvm::ArrayRef<int64_t> wKernel =
      llvm::ArrayRef<int64_t>(wt.shape).drop_front(2);
  SHARDC_CPU_TRY(readWindowAttrs(ctx, ns, wKernel, true, w));

  llvm::ArrayRef<int64_t> inShape =
      llvm::ArrayRef<int64_t>(x.shape).drop_front(2);
  llvm::SmallVector<int64_t, 6> expected = {batch, m};
  for (int64_t d = 0; d < ns; ++d) {
    int64_t span = w.dilations[d] * (w.kernel[d] - 1) + 1;
    int64_t padded = inShape[d] + w.padBegin[d] + w.padEnd[d];
    if (padded < span)
      return ctx.error("kernel " + shapeToString(w.kernel) +
                       " is larger than the padded input on spatial axis " +
                       llvm::Twine(d));
    expected.push_back((padded - span) / w.strides[d] + 1);
  }
  SHARDC_CPU_TRY(requireShape(ctx, y, expected, "Y"));
  if (hasBias) {
    SHARDC_CPU_TRY(requireInput(ctx, 2, "B"));
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[2], x.dtype, "B"));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.inputs[2], {m}, "B"));
  }
  llvm::ArrayRef<int64_t> outShape =
      llvm::ArrayRef<int64_t>(expected).drop_front(2);

  return dispatchIn(FloatTypes{}, ctx, x.dtype, "X",
                    [&](auto tag) -> llvm::Error {
                      using T = typename decltype(tag)::type;
                      int64_t inSize = numElements(inShape);
                      int64_t outSize = numElements(outShape);
                      int64_t kprod = numElements(w.kernel);
                      int64_t rows = cg * kprod;
                      int64_t mg = m / group;
                      bool direct = true;
                      for (int64_t d = 0; d < ns; ++d)
                        direct &= w.kernel[d] == 1 && w.strides[d] == 1 &&
                                  w.padBegin[d] == 0 && w.padEnd[d] == 0;
                      std::vector<T> col;
                      if (!direct)
                        col.resize(static_cast<size_t>(rows * outSize));
                      const T *px = x.as<T>();
                      const T *pw = wt.as<T>();
                      T *py = y.as<T>();
                      for (int64_t n = 0; n < batch; ++n) {
                        for (int64_t g = 0; g < group; ++g) {
                          const T *xg = px + (n * channels + g * cg) * inSize;
                          const T *colp = xg;
                          if (!direct) {
                            im2col(xg, cg, inShape, outShape, w, col.data());
                            colp = col.data();
                          }
                          gemm(false, false, mg, outSize, rows, T(1),
                               pw + g * mg * rows, rows, colp, outSize, T(0),
                               py + (n * m + g * mg) * outSize, outSize);
                        }
                      }
                      if (hasBias) {
                        const T *pb = ctx.inputs[2].as<T>();
                        for (int64_t n = 0; n < batch; ++n)
                          for (int64_t c = 0; c < m; ++c) {
                            T *row = py + (n * m + c) * outSize;
                            T bv = pb[c];
                            for (int64_t i = 0; i < outSize; ++i)
                              row[i] += bv;
                          }
                      }
                      return llvm::Error::success();
                    });
}

} // namespace shardc::rt::cpu
