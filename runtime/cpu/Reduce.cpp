//===- Reduce.cpp - ReduceSum, ReduceMean, ReduceMax/Min and ArgMax -------===//
//
// ReduceSum and ReduceMean walk the input contiguously and accumulate into
// the output (in double for floating-point types, wrapping int64 for
// integers); ReduceMax and ReduceMin keep the running extreme in the element
// type, NaN winning. ArgMax scans each reduced line for its largest element.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/VecMath.h"
#include "runtime/kernels/ElementOps.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace shardc::rt::cpu {

namespace {

enum class Reduction { Sum, Mean, Max, Min };

/// Max or Min into `acc` of the values at `row` (stride `rs`), keeping NaN
/// once one is seen.
template <typename T>
void extremeRow(const T *row, int64_t n, T *acc, int64_t rs, bool max) {
  for (int64_t i = 0; i < n; ++i)
    acc[i * rs] = ops::extremeStep(acc[i * rs], row[i], max);
}

/// ReduceMax and ReduceMin accumulate in the element type: the running
/// extreme starts at the type's lowest (highest) value, -inf (inf) for
/// floats.
template <typename T>
void reduceExtreme(const TensorView &x, const TensorView &y,
                   llvm::ArrayRef<int64_t> accStrides, bool max) {
  T init;
  if constexpr (std::is_floating_point_v<T>)
    init = max ? -std::numeric_limits<T>::infinity()
               : std::numeric_limits<T>::infinity();
  else
    init =
        max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  T *py = y.as<T>();
  std::fill(py, py + y.numel(), init);
  const T *px = x.as<T>();
  std::array<llvm::ArrayRef<int64_t>, 1> strides = {accStrides};
  forEachRow<1>(
      x.shape, strides,
      [&](int64_t o, const int64_t *in, int64_t n, const int64_t *rs) {
        extremeRow(px + o, n, py + in[0], rs[0], max);
      });
}

llvm::Error reduceImpl(const KernelContext &ctx, Reduction kind) {
  bool mean = kind == Reduction::Mean;
  ReduceGeometry g;
  SHARDC_CPU_TRY(checkReduce(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  if (g.noop) {
    if (x.data != y.data && x.bytes() > 0)
      std::memmove(y.data, x.data, x.bytes());
    return llvm::Error::success();
  }
  int64_t rank = x.rank();
  // Accumulator offset of each input element: row-major in the keepdims
  // shape, 0 along reduced axes.
  llvm::SmallVector<int64_t, 6> accStrides = rowMajorStrides(g.keptShape);
  for (int64_t d = 0; d < rank; ++d)
    if (g.reduced[d])
      accStrides[d] = 0;
  int64_t outCount = y.numel();
  int64_t count = g.count;

  if (kind == Reduction::Max || kind == Reduction::Min) {
    using Types = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32,
                            DType::I8, DType::U8>;
    return dispatchIn(
        Types{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
          using T = typename decltype(tag)::type;
          reduceExtreme<T>(x, y, accStrides, kind == Reduction::Max);
          return llvm::Error::success();
        });
  }
  return dispatchIn(
      ArithTypes{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        using Acc = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;
        std::vector<Acc> acc(static_cast<size_t>(outCount), Acc(0));
        const T *px = x.as<T>();
        std::array<llvm::ArrayRef<int64_t>, 1> strides = {accStrides};
        forEachRow<1>(
            x.shape, strides,
            [&](int64_t o, const int64_t *in, int64_t n, const int64_t *rs) {
              const T *row = px + o;
              Acc *a = acc.data() + in[0];
              if (rs[0] == 0) {
                Acc s = 0;
                for (int64_t i = 0; i < n; ++i)
                  s += static_cast<Acc>(row[i]);
                *a += s;
              } else {
                if constexpr (std::is_same_v<T, float>)
                  if (rs[0] == 1) {
                    vec::addToDouble(a, row, n);
                    return;
                  }
                for (int64_t i = 0; i < n; ++i)
                  a[i * rs[0]] += static_cast<Acc>(row[i]);
              }
            });
        T *py = y.as<T>();
        for (int64_t i = 0; i < outCount; ++i) {
          if constexpr (std::is_integral_v<T>) {
            T s = static_cast<T>(acc[i]);
            py[i] = !mean ? s : count ? static_cast<T>(s / count) : T(0);
          } else {
            py[i] = static_cast<T>(
                !mean ? acc[i]
                      : (count ? acc[i] / count
                               : std::numeric_limits<double>::quiet_NaN()));
          }
        }
        return llvm::Error::success();
      });
}

} // namespace

llvm::Error reduceMeanKernel(const KernelContext &ctx) {
  return reduceImpl(ctx, Reduction::Mean);
}

llvm::Error reduceSumKernel(const KernelContext &ctx) {
  return reduceImpl(ctx, Reduction::Sum);
}

llvm::Error reduceMaxKernel(const KernelContext &ctx) {
  return reduceImpl(ctx, Reduction::Max);
}

llvm::Error reduceMinKernel(const KernelContext &ctx) {
  return reduceImpl(ctx, Reduction::Min);
}

/// The index of the largest element along `axis`: the first of equal maxima,
/// or the last with `select_last_index`. A NaN is larger than every number,
/// as in numpy's argmax.
llvm::Error checkArgMax(const KernelContext &ctx, ArgMaxGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "reduced"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, DType::I64, "reduced"));
  int64_t rank = x.rank();
  int64_t axis;
  SHARDC_CPU_TRY(readAxis(ctx, rank, 0, axis));
  bool keepDims = ctx.attrs.getInt("keepdims", 1) != 0;
  g.last = ctx.attrs.getInt("select_last_index", 0) != 0;
  llvm::SmallVector<int64_t, 6> expected(x.shape.begin(), x.shape.end());
  if (keepDims)
    expected[axis] = 1;
  else
    expected.erase(expected.begin() + axis);
  SHARDC_CPU_TRY(requireShape(ctx, y, expected, "reduced"));
  g.outer = product(x.shape, 0, axis);
  g.len = x.shape[axis];
  g.inner = product(x.shape, axis + 1, rank);
  if (g.len == 0 && y.numel() > 0)
    return ctx.error("cannot take the argmax of an empty axis");
  return llvm::Error::success();
}

llvm::Error argMaxKernel(const KernelContext &ctx) {
  ArgMaxGeometry g;
  SHARDC_CPU_TRY(checkArgMax(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  int64_t outer = g.outer, len = g.len, inner = g.inner;
  bool last = g.last;
  using Types = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32,
                          DType::I8, DType::U8>;
  return dispatchIn(
      Types{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        int64_t *py = y.as<int64_t>();
        auto better = [&](T a, T b) { return ops::argMaxBetter(a, b, last); };
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            const T *line = px + o * len * inner + i;
            int64_t best = 0;
            for (int64_t k = 1; k < len; ++k)
              if (better(line[k * inner], line[best * inner]))
                best = k;
            py[o * inner + i] = best;
          }
        return llvm::Error::success();
      });
}

llvm::Error checkTopKIndices(const KernelContext &ctx, TopKGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "indices"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, DType::I64, "indices"));
  int64_t rank = x.rank();
  int64_t axis;
  SHARDC_CPU_TRY(readAxis(ctx, rank, -1, axis));
  g.k = ctx.attrs.getInt("k", 0);
  if (g.k < 0 || g.k > x.shape[axis])
    return ctx.error("k " + llvm::Twine(g.k) + " is out of range [0, " +
                     llvm::Twine(x.shape[axis]) + "]");
  g.largest = ctx.attrs.getInt("largest", 1) != 0;
  llvm::SmallVector<int64_t, 6> expected(x.shape.begin(), x.shape.end());
  expected[axis] = g.k;
  SHARDC_CPU_TRY(requireShape(ctx, y, expected, "indices"));
  g.outer = product(x.shape, 0, axis);
  g.len = x.shape[axis];
  g.inner = product(x.shape, axis + 1, rank);
  return llvm::Error::success();
}

/// Per line, the indices sorted by topKBefore and the first k kept (the
/// CUDA kernel ranks each element by the same order).
llvm::Error topKIndicesKernel(const KernelContext &ctx) {
  TopKGeometry g;
  SHARDC_CPU_TRY(checkTopKIndices(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return dispatchIn(
      TopKTypes{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        int64_t *py = y.as<int64_t>();
        std::vector<int64_t> order(g.len);
        for (int64_t o = 0; o < g.outer; ++o)
          for (int64_t i = 0; i < g.inner; ++i) {
            const T *line = px + o * g.len * g.inner + i;
            for (int64_t e = 0; e < g.len; ++e)
              order[e] = e;
            std::partial_sort(order.begin(), order.begin() + g.k, order.end(),
                              [&](int64_t a, int64_t b) {
                                return ops::topKBefore(line[a * g.inner], a,
                                                       line[b * g.inner], b,
                                                       g.largest);
                              });
            for (int64_t r = 0; r < g.k; ++r)
              py[(o * g.k + r) * g.inner + i] = order[r];
          }
        return llvm::Error::success();
      });
}

llvm::Error checkReduce(const KernelContext &ctx, ReduceGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "reduced"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "reduced"));
  int64_t rank = x.rank();
  bool keepDims = ctx.attrs.getInt("keepdims", 1) != 0;
  g = ReduceGeometry();
  g.reduced.assign(rank, false);
  llvm::ArrayRef<int64_t> axes = ctx.attrs.getInts("axes");
  if (axes.empty()) {
    // A no-op reduction (noop_with_empty_axes) leaves the data as is; an
    // empty list with a smaller output means "all axes" (ONNX's default).
    if (y.numel() == x.numel() && y.rank() == rank) {
      g.noop = true;
      return llvm::Error::success();
    }
    g.reduced.assign(rank, true);
  }
  for (int64_t a : axes) {
    int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank || g.reduced[axis])
      return ctx.error("axes " + shapeToString(axes) +
                       " are out of range or repeated for rank " +
                       llvm::Twine(rank));
    g.reduced[axis] = true;
  }
  llvm::SmallVector<int64_t, 6> expected;
  for (int64_t d = 0; d < rank; ++d) {
    g.keptShape.push_back(g.reduced[d] ? 1 : x.shape[d]);
    if (!g.reduced[d] || keepDims)
      expected.push_back(g.keptShape.back());
  }
  SHARDC_CPU_TRY(requireShape(ctx, y, expected, "reduced"));
  int64_t outCount = y.numel();
  g.count = outCount ? x.numel() / outCount : 0;
  return llvm::Error::success();
}

} // namespace shardc::rt::cpu
