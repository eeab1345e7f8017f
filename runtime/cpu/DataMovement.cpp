//===- DataMovement.cpp - Data movement kernels ---------------------------===//
//
// Identity, Reshape, Transpose, Gather, Concat, Split, Slice and Expand, and
// the gradients GatherGrad and SliceGrad. These work on any element type:
// they move elements of 1, 2, 4 or 8 bytes.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"
#include "runtime/kernels/LossOps.h"

#include <algorithm>

namespace shardc::rt::cpu {

namespace {

/// Copies `x` into `y`, which must hold as many elements of the same type.
llvm::Error copyKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(checkUnaryOperands(ctx, "data", "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  if (x.data != y.data && x.bytes() > 0)
    std::memmove(y.data, x.data, x.bytes());
  return llvm::Error::success();
}

/// Copies the elements of `x` read with `strides` (per dimension of `shape`,
/// starting at element `base`) into the dense `y` of that shape.
llvm::Error stridedCopy(const KernelContext &ctx, const TensorView &x,
                        int64_t base, llvm::ArrayRef<int64_t> strides,
                        const TensorView &y) {
  return dispatchBySize(ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *px = x.as<T>() + base;
    T *py = y.as<T>();
    std::array<llvm::ArrayRef<int64_t>, 1> s = {strides};
    forEachRow<1>(
        y.shape, s,
        [&](int64_t o, const int64_t *in, int64_t n, const int64_t *rs) {
          const T *src = px + in[0];
          T *dst = py + o;
          if (rs[0] == 1) {
            std::memcpy(dst, src, n * sizeof(T));
            return;
          }
          for (int64_t i = 0; i < n; ++i)
            dst[i] = src[i * rs[0]];
        });
    return llvm::Error::success();
  });
}

/// Transposes `x` into `y`, where output dimension d reads `x` with stride
/// `strides[d]` (a permutation of x's row-major strides). When the innermost
/// output dimension is not contiguous in `x`, the copy is tiled over that
/// dimension and the one that is, so reads and writes both stay in cache.
template <typename T>
void transposeCopy(const T *px, T *py, llvm::ArrayRef<int64_t> shape,
                   llvm::ArrayRef<int64_t> strides) {
  // Drop size-1 dimensions and merge runs that stay contiguous in x.
  llvm::SmallVector<int64_t, 6> dims, st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!dims.empty() && st.back() == strides[d] * shape[d]) {
      dims.back() *= shape[d];
      st.back() = strides[d];
      continue;
    }
    dims.push_back(shape[d]);
    st.push_back(strides[d]);
  }
  int64_t rank = static_cast<int64_t>(dims.size());
  int64_t total = numElements(dims);
  // An empty tensor: the tiled loop below would still write its first tile.
  if (total == 0)
    return;
  if (rank == 0) {
    if (total == 1)
      py[0] = px[0];
    return;
  }
  int64_t last = rank - 1;
  int64_t unit = -1;
  for (int64_t d = 0; d < rank; ++d)
    if (st[d] == 1)
      unit = d;
  if (unit < 0 || unit == last) {
    // The innermost dimension is contiguous in both: plain row copies.
    std::array<llvm::ArrayRef<int64_t>, 1> s = {st};
    forEachRow<1>(
        dims, s,
        [&](int64_t o, const int64_t *in, int64_t n, const int64_t *rs) {
          for (int64_t i = 0; i < n; ++i)
            py[o + i] = px[in[0] + i * rs[0]];
        });
    return;
  }
  llvm::SmallVector<int64_t, 6> outStrides = rowMajorStrides(dims);
  llvm::SmallVector<int64_t, 6> others;
  for (int64_t d = 0; d < last; ++d)
    if (d != unit)
      others.push_back(d);
  constexpr int64_t tile = 32;
  int64_t na = dims[unit], nb = dims[last];
  int64_t oa = outStrides[unit], sb = st[last];
  llvm::SmallVector<int64_t, 6> idx(others.size(), 0);
  int64_t ib = 0, ob = 0;
  while (true) {
    for (int64_t a0 = 0; a0 < na; a0 += tile) {
      int64_t a1 = std::min(na, a0 + tile);
      for (int64_t b0 = 0; b0 < nb; b0 += tile) {
        int64_t b1 = std::min(nb, b0 + tile);
        for (int64_t a = a0; a < a1; ++a) {
          const T *src = px + ib + a;
          T *dst = py + ob + a * oa;
          for (int64_t b = b0; b < b1; ++b)
            dst[b] = src[b * sb];
        }
      }
    }
    int64_t k = static_cast<int64_t>(others.size()) - 1;
    for (; k >= 0; --k) {
      int64_t d = others[k];
      ib += st[d];
      ob += outStrides[d];
      if (++idx[k] < dims[d])
        break;
      ib -= st[d] * dims[d];
      ob -= outStrides[d] * dims[d];
      idx[k] = 0;
    }
    if (k < 0)
      return;
  }
}

/// Reads a non-negative axis attribute that must be < rank.
llvm::Error getAxis(const KernelContext &ctx, int64_t rank, int64_t &axis) {
  axis = ctx.attrs.getInt("axis", 0);
  if (axis < 0 || axis >= rank)
    return ctx.error("axis " + llvm::Twine(axis) + " out of range for rank " +
                     llvm::Twine(rank));
  return llvm::Error::success();
}

} // namespace

llvm::Error identityKernel(const KernelContext &ctx) { return copyKernel(ctx); }

llvm::Error reshapeKernel(const KernelContext &ctx) { return copyKernel(ctx); }

llvm::Error checkTrilu(const KernelContext &ctx, TriluGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "input"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "output"));
  if (x.shape.size() < 2 || y.shape != x.shape)
    return ctx.error("input and output must have one shape of rank >= 2");
  g.k = ctx.attrs.getInt("k", 0);
  g.upper = ctx.attrs.getInt("upper", 1) != 0;
  g.rows = x.shape[x.shape.size() - 2];
  g.cols = x.shape.back();
  return llvm::Error::success();
}

llvm::Error triluKernel(const KernelContext &ctx) {
  TriluGeometry g;
  SHARDC_CPU_TRY(checkTrilu(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return dispatchBySize(ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *px = x.as<T>();
    T *py = y.as<T>();
    for (int64_t at = 0, e = x.numel(); at < e; ++at)
      py[at] = g.keeps(at) ? px[at] : T(0);
    return llvm::Error::success();
  });
}

template <typename T>
llvm::Error checkRangeCount(const KernelContext &ctx, T start, T limit,
                            T delta) {
  if (delta == T(0))
    return ctx.error("delta is zero");
  double count = std::ceil((static_cast<double>(limit) - start) / delta);
  int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  if (n != ctx.outputs[0].shape[0])
    return ctx.error("start, limit and delta give " + llvm::Twine(n) +
                     " elements, but the output holds " +
                     llvm::Twine(ctx.outputs[0].shape[0]));
  return llvm::Error::success();
}
template llvm::Error checkRangeCount(const KernelContext &, float, float,
                                     float);
template llvm::Error checkRangeCount(const KernelContext &, double, double,
                                     double);
template llvm::Error checkRangeCount(const KernelContext &, int64_t, int64_t,
                                     int64_t);
template llvm::Error checkRangeCount(const KernelContext &, int32_t, int32_t,
                                     int32_t);

llvm::Error checkRange(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "start"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "limit"));
  SHARDC_CPU_TRY(requireInput(ctx, 2, "delta"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &y = ctx.outputs[0];
  static const char *names[] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i) {
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[i], y.dtype, names[i]));
    SHARDC_CPU_TRY(requireNumel(ctx, ctx.inputs[i], 1, names[i]));
  }
  if (y.rank() != 1)
    return ctx.error("output must have rank 1, got shape " +
                     shapeToString(y.shape));
  return dispatchIn(RangeTypes{}, ctx, y.dtype, "output",
                    [](auto) { return llvm::Error::success(); });
}

llvm::Error rangeKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(checkRange(ctx));
  const TensorView &y = ctx.outputs[0];
  return dispatchIn(
      RangeTypes{}, ctx, y.dtype, "output", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        T start = *ctx.inputs[0].as<T>(), limit = *ctx.inputs[1].as<T>();
        T delta = *ctx.inputs[2].as<T>();
        SHARDC_CPU_TRY(checkRangeCount(ctx, start, limit, delta));
        int64_t n = y.shape[0];
        T *py = y.as<T>();
        for (int64_t i = 0; i < n; ++i)
          py[i] = static_cast<T>(start + static_cast<T>(i) * delta);
        return llvm::Error::success();
      });
}

llvm::Error checkTranspose(const KernelContext &ctx,
                           llvm::SmallVectorImpl<int64_t> &outShape,
                           llvm::SmallVectorImpl<int64_t> &strides) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "transposed"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "transposed"));
  int64_t rank = x.rank();
  llvm::SmallVector<int64_t, 6> perm(ctx.attrs.getInts("perm"));
  if (perm.empty() && !ctx.attrs.has("perm"))
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d); // ONNX default: reverse the dimensions.
  llvm::SmallVector<bool, 6> seen(rank, false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= rank || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid)
    return ctx.error("perm is not a permutation of the " + llvm::Twine(rank) +
                     " dimensions of 'data'");
  llvm::SmallVector<int64_t, 6> inStrides = rowMajorStrides(x.shape);
  outShape.clear();
  strides.clear();
  for (int64_t p : perm) {
    outShape.push_back(x.shape[p]);
    strides.push_back(inStrides[p]);
  }
  return requireShape(ctx, y, outShape, "transposed");
}

llvm::Error transposeKernel(const KernelContext &ctx) {
  llvm::SmallVector<int64_t, 6> outShape, strides;
  SHARDC_CPU_TRY(checkTranspose(ctx, outShape, strides));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return dispatchBySize(ctx, x.dtype, "'data'", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    transposeCopy(x.as<const T>(), y.as<T>(), outShape, strides);
    return llvm::Error::success();
  });
}

/// Gather's and GatherGrad's indices (i64 or i32, checked) as non-negative
/// int64, each checked against [-axisDim, axisDim).
static llvm::Error normalizeIndices(const KernelContext &ctx,
                                    const TensorView &indices,
                                    const GatherGeometry &g,
                                    llvm::SmallVectorImpl<int64_t> &idx) {
  idx.resize(g.count);
  for (int64_t i = 0; i < g.count; ++i) {
    int64_t v = ops::loadIndex(indices.data, g.wideIndices, i);
    if (v < -g.axisDim || v >= g.axisDim)
      return indexOutOfRange(ctx, v, g);
    idx[i] = v < 0 ? v + g.axisDim : v;
  }
  return llvm::Error::success();
}

llvm::Error indexOutOfRange(const KernelContext &ctx, int64_t index,
                            const GatherGeometry &g) {
  return ctx.error("index " + llvm::Twine(index) + " out of range [" +
                   llvm::Twine(-g.axisDim) + ", " + llvm::Twine(g.axisDim) +
                   ") on axis " + llvm::Twine(g.axis));
}

/// The geometry of data (outer, axisDim, inner) gathered at `indices`
/// into `gathered` (outer, indices..., inner); `gathered` must have that
/// shape (named `gatheredName`).
static llvm::Error
gatherGeometry(const KernelContext &ctx, const TensorView &data,
               const TensorView &indices, const TensorView &gathered,
               llvm::StringRef gatheredName, GatherGeometry &g) {
  SHARDC_CPU_TRY(getAxis(ctx, data.rank(), g.axis));
  llvm::SmallVector<int64_t, 6> shape(data.shape.begin(),
                                      data.shape.begin() + g.axis);
  shape.append(indices.shape.begin(), indices.shape.end());
  shape.append(data.shape.begin() + g.axis + 1, data.shape.end());
  SHARDC_CPU_TRY(requireShape(ctx, gathered, shape, gatheredName));
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    return unsupportedType(ctx, indices.dtype, "'indices'");
  g.wideIndices = indices.dtype == DType::I64;
  g.outer = product(data.shape, 0, g.axis);
  g.axisDim = data.shape[g.axis];
  g.inner = product(data.shape, g.axis + 1, data.rank());
  g.count = indices.numel();
  return llvm::Error::success();
}

llvm::Error checkGather(const KernelContext &ctx, GatherGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "indices"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &data = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, data.dtype, "output"));
  return gatherGeometry(ctx, data, ctx.inputs[1], y, "output", g);
}

llvm::Error checkGatherGrad(const KernelContext &ctx, GatherGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "indices"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dData"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &dData = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, dData, dy.dtype, "dData"));
  SHARDC_CPU_TRY(gatherGeometry(ctx, dData, ctx.inputs[1], dy, "dY", g));
  return dispatchIn(FloatTypes{}, ctx, dy.dtype, "dY",
                    [](auto) { return llvm::Error::success(); });
}

llvm::Error gatherKernel(const KernelContext &ctx) {
  GatherGeometry g;
  SHARDC_CPU_TRY(checkGather(ctx, g));
  const TensorView &data = ctx.inputs[0];
  size_t innerBytes = static_cast<size_t>(g.inner) * dtypeSize(data.dtype);
  // Normalize and check the indices once.
  llvm::SmallVector<int64_t, 16> idx;
  SHARDC_CPU_TRY(normalizeIndices(ctx, ctx.inputs[1], g, idx));
  if (innerBytes == 0)
    return llvm::Error::success();
  const char *src = data.as<const char>();
  char *dst = ctx.outputs[0].as<char>();
  for (int64_t o = 0; o < g.outer; ++o) {
    const char *block = src + o * g.axisDim * innerBytes;
    for (int64_t i = 0; i < g.count; ++i) {
      std::memcpy(dst, block + idx[i] * innerBytes, innerBytes);
      dst += innerBytes;
    }
  }
  return llvm::Error::success();
}

/// The geometry of GatherElements: `indices` (and `gathered`, of their
/// shape, named `gatheredName`) of `data`'s rank, no larger off the axis.
static llvm::Error gatherElementsGeometry(const KernelContext &ctx,
                                          const TensorView &data,
                                          const TensorView &indices,
                                          const TensorView &gathered,
                                          llvm::StringRef gatheredName,
                                          GatherElementsGeometry &g) {
  int64_t rank = data.rank();
  if (rank < 1 || rank > GatherElementsGeometry::kMaxRank ||
      indices.rank() != rank)
    return ctx.error("data and indices must have one rank, 1 to " +
                     llvm::Twine(GatherElementsGeometry::kMaxRank) + ", got " +
                     llvm::Twine(rank) + " and " + llvm::Twine(indices.rank()));
  SHARDC_CPU_TRY(getAxis(ctx, rank, g.index.axis));
  for (int64_t d = 0; d < rank; ++d)
    if (d != g.index.axis && indices.shape[d] > data.shape[d])
      return ctx.error("indices dimension " + llvm::Twine(d) + " (" +
                       llvm::Twine(indices.shape[d]) +
                       ") exceeds the data's (" + llvm::Twine(data.shape[d]) +
                       ")");
  SHARDC_CPU_TRY(requireShape(ctx, gathered, indices.shape, gatheredName));
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    return unsupportedType(ctx, indices.dtype, "'indices'");
  g.index.wideIndices = indices.dtype == DType::I64;
  g.index.axisDim = data.shape[g.index.axis];
  g.index.count = indices.numel();
  g.rank = static_cast<int>(rank);
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    g.shape[d] = indices.shape[d];
    g.dataShape[d] = data.shape[d];
    g.dataStride[d] = stride;
    stride *= data.shape[d];
  }
  return llvm::Error::success();
}

llvm::Error checkGatherElements(const KernelContext &ctx,
                                GatherElementsGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "indices"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &data = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, data.dtype, "output"));
  return gatherElementsGeometry(ctx, data, ctx.inputs[1], y, "output", g);
}

llvm::Error checkGatherElementsGrad(const KernelContext &ctx,
                                    GatherElementsGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "indices"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dData"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &dData = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, dData, dy.dtype, "dData"));
  SHARDC_CPU_TRY(
      gatherElementsGeometry(ctx, dData, ctx.inputs[1], dy, "dY", g));
  return dispatchIn(FloatTypes{}, ctx, dy.dtype, "dY",
                    [](auto) { return llvm::Error::success(); });
}

llvm::Error gatherElementsKernel(const KernelContext &ctx) {
  GatherElementsGeometry g;
  SHARDC_CPU_TRY(checkGatherElements(ctx, g));
  llvm::SmallVector<int64_t, 16> idx;
  SHARDC_CPU_TRY(normalizeIndices(ctx, ctx.inputs[1], g.index, idx));
  return dispatchBySize(ctx, ctx.inputs[0].dtype, "'data'",
                        [&](auto tag) -> llvm::Error {
                          using T = typename decltype(tag)::type;
                          const T *src = ctx.inputs[0].as<const T>();
                          T *dst = ctx.outputs[0].as<T>();
                          for (int64_t e = 0; e < g.index.count; ++e)
                            dst[e] = src[g.offset(e, idx[e])];
                          return llvm::Error::success();
                        });
}

/// dData zero-filled, then each element of dY added at its index, in the
/// indices' order (repeated indices accumulate in that order; the CUDA
/// kernel adds in the same order).
llvm::Error gatherElementsGradKernel(const KernelContext &ctx) {
  GatherElementsGeometry g;
  SHARDC_CPU_TRY(checkGatherElementsGrad(ctx, g));
  llvm::SmallVector<int64_t, 16> idx;
  SHARDC_CPU_TRY(normalizeIndices(ctx, ctx.inputs[1], g.index, idx));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &dData = ctx.outputs[0];
  return dispatchIn(FloatTypes{}, ctx, dy.dtype, "dY",
                    [&](auto tag) -> llvm::Error {
                      using T = typename decltype(tag)::type;
                      const T *src = dy.as<T>();
                      T *pd = dData.as<T>();
                      std::fill(pd, pd + dData.numel(), T(0));
                      for (int64_t e = 0; e < g.index.count; ++e) {
                        T &dst = pd[g.offset(e, idx[e])];
                        dst += src[e];
                      }
                      return llvm::Error::success();
                    });
}

llvm::Error checkScatterElements(const KernelContext &ctx,
                                 GatherElementsGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "indices"));
  SHARDC_CPU_TRY(requireInput(ctx, 2, "updates"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &data = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[2], data.dtype, "updates"));
  SHARDC_CPU_TRY(requireType(ctx, y, data.dtype, "output"));
  SHARDC_CPU_TRY(requireShape(ctx, y, data.shape, "output"));
  return gatherElementsGeometry(ctx, data, ctx.inputs[1], ctx.inputs[2],
                                "updates", g);
}

/// A copy of data, then each update written at its index in the indices'
/// order (of repeated indices the last wins; the CUDA kernel picks the same).
llvm::Error scatterElementsKernel(const KernelContext &ctx) {
  GatherElementsGeometry g;
  SHARDC_CPU_TRY(checkScatterElements(ctx, g));
  llvm::SmallVector<int64_t, 16> idx;
  SHARDC_CPU_TRY(normalizeIndices(ctx, ctx.inputs[1], g.index, idx));
  const TensorView &data = ctx.inputs[0];
  return dispatchBySize(ctx, data.dtype, "'data'",
                        [&](auto tag) -> llvm::Error {
                          using T = typename decltype(tag)::type;
                          const T *src = data.as<const T>();
                          const T *upd = ctx.inputs[2].as<const T>();
                          T *dst = ctx.outputs[0].as<T>();
                          if (dst != src)
                            std::copy(src, src + data.numel(), dst);
                          for (int64_t e = 0; e < g.index.count; ++e)
                            dst[g.offset(e, idx[e])] = upd[e];
                          return llvm::Error::success();
                        });
}

llvm::Error checkConcatParts(const KernelContext &ctx, const TensorView &whole,
                             llvm::ArrayRef<TensorView> parts,
                             llvm::StringRef partsName, int64_t &axis) {
  SHARDC_CPU_TRY(getAxis(ctx, whole.rank(), axis));
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string name = partsName.str() + "[" + std::to_string(i) + "]";
    SHARDC_CPU_TRY(partsName == "inputs" ? requireInput(ctx, i, name)
                                         : requireOutput(ctx, i, name));
    const TensorView &x = parts[i];
    SHARDC_CPU_TRY(requireType(ctx, x, whole.dtype, name));
    llvm::SmallVector<int64_t, 6> expected(whole.shape.begin(),
                                           whole.shape.end());
    if (x.rank() == whole.rank())
      expected[axis] = x.shape[axis];
    SHARDC_CPU_TRY(requireShape(ctx, x, expected, name));
    total += x.shape[axis];
  }
  if (total != whole.shape[axis])
    return ctx.error(partsName + " add up to " + llvm::Twine(total) +
                     " along axis " + llvm::Twine(axis) + ", " +
                     (partsName == "inputs" ? "output" : "input") + " has " +
                     llvm::Twine(whole.shape[axis]));
  return llvm::Error::success();
}

llvm::Error concatKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "concat_result"));
  const TensorView &y = ctx.outputs[0];
  if (ctx.inputs.empty())
    return ctx.error("needs at least one input");
  int64_t axis;
  SHARDC_CPU_TRY(checkConcatParts(ctx, y, ctx.inputs, "inputs", axis));
  int64_t outer = product(y.shape, 0, axis);
  size_t inner = static_cast<size_t>(product(y.shape, axis + 1, y.rank())) *
                 dtypeSize(y.dtype);
  size_t outRow = static_cast<size_t>(y.shape[axis]) * inner;
  size_t offset = 0;
  for (const TensorView &x : ctx.inputs) {
    size_t row = static_cast<size_t>(x.shape[axis]) * inner;
    if (row == 0)
      continue;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(y.as<char>() + o * outRow + offset,
                  x.as<const char>() + o * row, row);
    offset += row;
  }
  return llvm::Error::success();
}

llvm::Error splitKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "input"));
  const TensorView &x = ctx.inputs[0];
  if (ctx.outputs.empty())
    return ctx.error("needs at least one output");
  int64_t axis;
  SHARDC_CPU_TRY(checkConcatParts(ctx, x, ctx.outputs, "outputs", axis));
  int64_t outer = product(x.shape, 0, axis);
  size_t inner = static_cast<size_t>(product(x.shape, axis + 1, x.rank())) *
                 dtypeSize(x.dtype);
  size_t inRow = static_cast<size_t>(x.shape[axis]) * inner;
  size_t offset = 0;
  for (const TensorView &y : ctx.outputs) {
    size_t row = static_cast<size_t>(y.shape[axis]) * inner;
    if (row == 0)
      continue;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(y.as<char>() + o * row,
                  x.as<const char>() + o * inRow + offset, row);
    offset += row;
  }
  return llvm::Error::success();
}

llvm::Error checkSlice(const KernelContext &ctx, const TensorView &whole,
                       llvm::StringRef wholeName, const TensorView &part,
                       llvm::StringRef partName, int64_t &base,
                       llvm::SmallVectorImpl<int64_t> &strides) {
  SHARDC_CPU_TRY(requireType(ctx, part, whole.dtype, partName));
  llvm::ArrayRef<int64_t> starts = ctx.attrs.getInts("starts");
  llvm::ArrayRef<int64_t> steps = ctx.attrs.getInts("steps");
  int64_t rank = whole.rank();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank || part.rank() != rank)
    return ctx.error(
        "'starts' (" + llvm::Twine(starts.size()) + "), 'steps' (" +
        llvm::Twine(steps.size()) + ") and the rank of '" + partName + "' (" +
        llvm::Twine(part.rank()) + ") must all equal the rank of '" +
        wholeName + "' (" + llvm::Twine(rank) + ")");
  llvm::SmallVector<int64_t, 6> wholeStrides = rowMajorStrides(whole.shape);
  strides.assign(rank, 0);
  base = 0;
  bool empty = part.numel() == 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (steps[d] == 0)
      return ctx.error("step on axis " + llvm::Twine(d) + " is 0");
    int64_t n = part.shape[d];
    if (!empty) {
      int64_t last = starts[d] + (n - 1) * steps[d];
      if (starts[d] < 0 || starts[d] >= whole.shape[d] || last < 0 ||
          last >= whole.shape[d])
        return ctx.error("slice of " + llvm::Twine(n) + " elements from " +
                         llvm::Twine(starts[d]) + " with step " +
                         llvm::Twine(steps[d]) + " leaves axis " +
                         llvm::Twine(d) + " of size " +
                         llvm::Twine(whole.shape[d]));
      base += starts[d] * wholeStrides[d];
    }
    strides[d] = steps[d] * wholeStrides[d];
  }
  return llvm::Error::success();
}

llvm::Error sliceKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  int64_t base = 0;
  llvm::SmallVector<int64_t, 6> strides;
  SHARDC_CPU_TRY(checkSlice(ctx, x, "data", y, "output", base, strides));
  if (y.numel() == 0)
    return llvm::Error::success();
  return stridedCopy(ctx, x, base, strides, y);
}

llvm::Error checkExpand(const KernelContext &ctx,
                        llvm::SmallVectorImpl<int64_t> &strides) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "input"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "output"));
  return broadcastTo(ctx, x, y.shape, "input", strides);
}

llvm::Error expandKernel(const KernelContext &ctx) {
  llvm::SmallVector<int64_t, 6> strides;
  SHARDC_CPU_TRY(checkExpand(ctx, strides));
  return stridedCopy(ctx, ctx.inputs[0], 0, strides, ctx.outputs[0]);
}

/// dData zero-filled, then the rows of dY scatter-added at the normalized
/// indices along `axis` (repeated indices accumulate).
llvm::Error gatherGradKernel(const KernelContext &ctx) {
  GatherGeometry g;
  SHARDC_CPU_TRY(checkGatherGrad(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &dData = ctx.outputs[0];
  llvm::SmallVector<int64_t, 16> idx;
  SHARDC_CPU_TRY(normalizeIndices(ctx, ctx.inputs[1], g, idx));
  return dispatchIn(FloatTypes{}, ctx, dy.dtype, "dY",
                    [&](auto tag) -> llvm::Error {
                      using T = typename decltype(tag)::type;
                      const T *src = dy.as<T>();
                      T *pd = dData.as<T>();
                      std::fill(pd, pd + dData.numel(), T(0));
                      for (int64_t o = 0; o < g.outer; ++o) {
                        T *block = pd + o * g.axisDim * g.inner;
                        for (int64_t i = 0; i < g.count; ++i, src += g.inner) {
                          T *dst = block + idx[i] * g.inner;
                          for (int64_t j = 0; j < g.inner; ++j)
                            dst[j] += src[j];
                        }
                      }
                      return llvm::Error::success();
                    });
}

/// dX zero-filled, then dX[starts + i * steps] = dY[i] (the inverse
/// placement of sliceKernel). Any element type.
llvm::Error sliceGradKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dX"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &dx = ctx.outputs[0];
  int64_t base = 0;
  llvm::SmallVector<int64_t, 6> strides;
  SHARDC_CPU_TRY(checkSlice(ctx, dx, "dX", dy, "dY", base, strides));
  bool empty = dy.numel() == 0;
  if (dx.bytes() > 0)
    std::memset(dx.data, 0, dx.bytes());
  if (empty)
    return llvm::Error::success();
  return dispatchBySize(ctx, dy.dtype, "'dY'", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *src = dy.as<const T>();
    T *dst = dx.as<T>() + base;
    std::array<llvm::ArrayRef<int64_t>, 1> s = {strides};
    forEachRow<1>(
        dy.shape, s,
        [&](int64_t o, const int64_t *in, int64_t n, const int64_t *rs) {
          for (int64_t i = 0; i < n; ++i)
            dst[in[0] + i * rs[0]] = src[o + i];
        });
    return llvm::Error::success();
  });
}

} // namespace shardc::rt::cpu
