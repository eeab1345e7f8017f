//===- Elementwise.cpp - Elementwise kernels ------------------------------===//
//
// Binary arithmetic with numpy broadcasting, Pow, Where, unary math, Cast,
// Dropout and the activation gradients. Equal shapes take a flat loop;
// broadcasting walks contiguous rows with forEachRow.
//
//===----------------------------------------------------------------------===//
#include "runtime/Philox.h"
#include "runtime/cpu/KernelUtil.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace shardc::rt::cpu {

namespace {

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

/// Integer arithmetic wraps (computed in the unsigned type) instead of
/// overflowing, as numpy does.
template <typename T> using UnsignedOf = std::make_unsigned_t<T>;

struct AddOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(UnsignedOf<T>(a) + UnsignedOf<T>(b));
    else
      return a + b;
  }
};
struct SubOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(UnsignedOf<T>(a) - UnsignedOf<T>(b));
    else
      return a - b;
  }
};
struct MulOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(UnsignedOf<T>(a) * UnsignedOf<T>(b));
    else
      return a * b;
  }
};
/// Integer division truncates toward zero; the divisor is checked for zero
/// before the loop, and MIN / -1 wraps instead of trapping.
struct DivOp {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      if (b == T(-1))
        return static_cast<T>(UnsignedOf<T>(0) - UnsignedOf<T>(a));
    }
    return static_cast<T>(a / b);
  }
};

/// max and min propagate NaN (as torch.maximum and torch.minimum do): a NaN
/// `a` is kept, and a NaN `b` wins because every comparison with it fails.
struct MaxOp {
  template <typename T> T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinOp {
  template <typename T> T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};

/// Checks the operands of a broadcasting binary kernel: inputs A and B of
/// one element type, output C of `resultType` (A's type when none), and
/// computes the strides that broadcast A and B to C's shape.
llvm::Error checkBroadcastOperands(const KernelContext &ctx,
                                   std::optional<DType> resultType,
                                   llvm::SmallVectorImpl<int64_t> &sa,
                                   llvm::SmallVectorImpl<int64_t> &sb) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "A"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "B"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "C"));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &c = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, b, a.dtype, "B"));
  SHARDC_CPU_TRY(requireType(ctx, c, resultType.value_or(a.dtype), "C"));
  SHARDC_CPU_TRY(broadcastTo(ctx, a, c.shape, "A", sa));
  return broadcastTo(ctx, b, c.shape, "B", sb);
}

/// Applies `op` over a broadcast row. The common stride patterns get their
/// own loops so that they vectorize.
template <typename T, typename Op>
void binaryRow(const T *a, int64_t sa, const T *b, int64_t sb, T *c, int64_t n,
               Op op) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i)
      c[i] = op(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    T bv = *b;
    for (int64_t i = 0; i < n; ++i)
      c[i] = op(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    T av = *a;
    for (int64_t i = 0; i < n; ++i)
      c[i] = op(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      c[i] = op(a[i * sa], b[i * sb]);
  }
}

template <typename Op>
llvm::Error binaryKernel(const KernelContext &ctx, Op op, bool checkZero) {
  llvm::SmallVector<int64_t, 6> sa, sb;
  SHARDC_CPU_TRY(checkBroadcastOperands(ctx, std::nullopt, sa, sb));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &c = ctx.outputs[0];

  using Types = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32,
                          DType::I8, DType::U8>;
  return dispatchIn(Types{}, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *pa = a.as<T>();
    const T *pb = b.as<T>();
    T *pc = c.as<T>();
    if constexpr (std::is_integral_v<T>) {
      if (checkZero)
        for (int64_t i = 0, e = b.numel(); i < e; ++i)
          if (pb[i] == 0)
            return ctx.error("integer division by zero");
    }
    if (a.shape == c.shape && b.shape == c.shape) {
      binaryRow(pa, 1, pb, 1, pc, c.numel(), op);
      return llvm::Error::success();
    }
    std::array<llvm::ArrayRef<int64_t>, 2> strides = {sa, sb};
    forEachRow<2>(
        c.shape, strides,
        [&](int64_t o, const int64_t *in, int64_t n, const int64_t *s) {
          binaryRow(pa + in[0], s[0], pb + in[1], s[1], pc + o, n, op);
        });
    return llvm::Error::success();
  });
}

//===----------------------------------------------------------------------===//
// Pow
//===----------------------------------------------------------------------===//

/// x^y for integers by squaring, wrapping on overflow. A negative exponent
/// gives 0 except for bases 1 and -1.
template <typename T, typename E> T integerPow(T x, E y) {
  using U = UnsignedOf<T>;
  if (y < 0) {
    if (x == 1)
      return 1;
    if (x == -1)
      return (y % 2) ? T(-1) : T(1);
    return 0;
  }
  U result = 1, base = U(x);
  while (y > 0) {
    if (y & 1)
      result *= base;
    base *= base;
    y >>= 1;
  }
  return static_cast<T>(result);
}

template <typename TX, typename TY> TX powValue(TX x, TY y) {
  if constexpr (std::is_integral_v<TX> && std::is_integral_v<TY>) {
    return integerPow(x, y);
  } else {
    double r = std::pow(static_cast<double>(x), static_cast<double>(y));
    if constexpr (std::is_integral_v<TX>) {
      if (std::isnan(r))
        return 0;
      if (r <= static_cast<double>(std::numeric_limits<TX>::lowest()))
        return std::numeric_limits<TX>::lowest();
      if (r >= static_cast<double>(std::numeric_limits<TX>::max()))
        return std::numeric_limits<TX>::max();
    }
    return static_cast<TX>(r);
  }
}

//===----------------------------------------------------------------------===//
// Unary math
//===----------------------------------------------------------------------===//

struct SqrtOp {
  template <typename T> T operator()(T x) const { return std::sqrt(x); }
};
struct ExpOp {
  template <typename T> T operator()(T x) const { return std::exp(x); }
};
struct LogOp {
  template <typename T> T operator()(T x) const { return std::log(x); }
};
struct ErfOp {
  template <typename T> T operator()(T x) const { return std::erf(x); }
};
struct TanhOp {
  template <typename T> T operator()(T x) const { return std::tanh(x); }
};
/// Numerically stable logistic function.
struct SigmoidOp {
  template <typename T> T operator()(T x) const {
    if (x >= T(0))
      return T(1) / (T(1) + std::exp(-x));
    T e = std::exp(x);
    return e / (T(1) + e);
  }
};
/// log(1 + exp(x)) without overflow or cancellation.
struct SoftplusOp {
  template <typename T> T operator()(T x) const {
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::fabs(x)));
  }
};
struct NegOp {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(UnsignedOf<T>(0) - UnsignedOf<T>(x));
    else
      return -x;
  }
};
struct AbsOp {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return x < T(0) ? NegOp{}(x) : x;
    else
      return std::fabs(x);
  }
};
struct ReluOp {
  template <typename T> T operator()(T x) const {
    // Keeps NaN (x > 0 is false for NaN, so test the other way round).
    return x < T(0) ? T(0) : x;
  }
};

struct SignOp {
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(x))
        return x;
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
  }
};
struct FloorOp {
  template <typename T> T operator()(T x) const { return std::floor(x); }
};
struct CeilOp {
  template <typename T> T operator()(T x) const { return std::ceil(x); }
};
struct SinOp {
  template <typename T> T operator()(T x) const { return std::sin(x); }
};
struct CosOp {
  template <typename T> T operator()(T x) const { return std::cos(x); }
};
struct NotOp {
  template <typename T> T operator()(T x) const { return !x; }
};

/// The comparisons and boolean logic: C(bool) = op(A, B), broadcasting.
template <typename Types, typename Op>
llvm::Error compareKernel(const KernelContext &ctx, Types types, Op op) {
  llvm::SmallVector<int64_t, 6> sa, sb;
  SHARDC_CPU_TRY(checkBroadcastOperands(ctx, DType::Bool, sa, sb));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &c = ctx.outputs[0];
  std::array<llvm::ArrayRef<int64_t>, 2> strides = {sa, sb};
  return dispatchIn(types, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *pa = a.as<T>();
    const T *pb = b.as<T>();
    uint8_t *pc = c.as<uint8_t>();
    forEachRow<2>(
        c.shape, strides,
        [&](int64_t o, const int64_t *in, int64_t n, const int64_t *s) {
          for (int64_t i = 0; i < n; ++i)
            pc[o + i] = op(pa[in[0] + i * s[0]], pb[in[1] + i * s[1]]);
        });
    return llvm::Error::success();
  });
}

using CompareTypes = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32,
                               DType::I8, DType::U8, DType::Bool>;
using BoolTypes = DTypeList<DType::Bool>;

template <typename Types, typename Op>
llvm::Error unaryKernel(const KernelContext &ctx, Types types, Op op) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  SHARDC_CPU_TRY(requireNumel(ctx, y, x.numel(), "Y"));
  return dispatchIn(types, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *px = x.as<T>();
    T *py = y.as<T>();
    for (int64_t i = 0, e = x.numel(); i < e; ++i)
      py[i] = op(px[i]);
    return llvm::Error::success();
  });
}

} // namespace

llvm::Error addKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, AddOp{}, false);
}
llvm::Error subKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, SubOp{}, false);
}
llvm::Error mulKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, MulOp{}, false);
}
llvm::Error divKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, DivOp{}, true);
}

llvm::Error maxKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, MaxOp{}, false);
}
llvm::Error minKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, MinOp{}, false);
}

llvm::Error equalKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{},
                       [](auto a, auto b) -> uint8_t { return a == b; });
}
llvm::Error greaterKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{},
                       [](auto a, auto b) -> uint8_t { return a > b; });
}
llvm::Error lessKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{},
                       [](auto a, auto b) -> uint8_t { return a < b; });
}
llvm::Error greaterOrEqualKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{},
                       [](auto a, auto b) -> uint8_t { return a >= b; });
}
llvm::Error lessOrEqualKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{},
                       [](auto a, auto b) -> uint8_t { return a <= b; });
}
llvm::Error andKernel(const KernelContext &ctx) {
  return compareKernel(ctx, BoolTypes{},
                       [](auto a, auto b) -> uint8_t { return a && b; });
}
llvm::Error orKernel(const KernelContext &ctx) {
  return compareKernel(ctx, BoolTypes{},
                       [](auto a, auto b) -> uint8_t { return a || b; });
}
llvm::Error xorKernel(const KernelContext &ctx) {
  return compareKernel(ctx, BoolTypes{}, [](auto a, auto b) -> uint8_t {
    return (a != 0) != (b != 0);
  });
}

llvm::Error powKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "Y"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Z"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.inputs[1];
  const TensorView &z = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, z, x.dtype, "Z"));
  llvm::SmallVector<int64_t, 6> sx, sy;
  SHARDC_CPU_TRY(broadcastTo(ctx, x, z.shape, "X", sx));
  SHARDC_CPU_TRY(broadcastTo(ctx, y, z.shape, "Y", sy));
  std::array<llvm::ArrayRef<int64_t>, 2> strides = {sx, sy};
  return dispatchIn(
      ArithTypes{}, ctx, x.dtype, "X", [&](auto xtag) -> llvm::Error {
        using TX = typename decltype(xtag)::type;
        return dispatchIn(
            ArithTypes{}, ctx, y.dtype, "Y", [&](auto ytag) -> llvm::Error {
              using TY = typename decltype(ytag)::type;
              const TX *px = x.as<TX>();
              const TY *py = y.as<TY>();
              TX *pz = z.as<TX>();
              forEachRow<2>(z.shape, strides,
                            [&](int64_t o, const int64_t *in, int64_t n,
                                const int64_t *s) {
                              for (int64_t i = 0; i < n; ++i)
                                pz[o + i] = powValue(px[in[0] + i * s[0]],
                                                     py[in[1] + i * s[1]]);
                            });
              return llvm::Error::success();
            });
      });
}

llvm::Error whereKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "condition"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "X"));
  SHARDC_CPU_TRY(requireInput(ctx, 2, "Y"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Z"));
  const TensorView &cond = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &y = ctx.inputs[2];
  const TensorView &z = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, cond, DType::Bool, "condition"));
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "Y"));
  SHARDC_CPU_TRY(requireType(ctx, z, x.dtype, "Z"));
  llvm::SmallVector<int64_t, 6> sc, sx, sy;
  SHARDC_CPU_TRY(broadcastTo(ctx, cond, z.shape, "condition", sc));
  SHARDC_CPU_TRY(broadcastTo(ctx, x, z.shape, "X", sx));
  SHARDC_CPU_TRY(broadcastTo(ctx, y, z.shape, "Y", sy));
  std::array<llvm::ArrayRef<int64_t>, 3> strides = {sc, sx, sy};
  return dispatchBySize(ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const uint8_t *pc = cond.as<uint8_t>();
    const T *px = x.as<T>();
    const T *py = y.as<T>();
    T *pz = z.as<T>();
    forEachRow<3>(
        z.shape, strides,
        [&](int64_t o, const int64_t *in, int64_t n, const int64_t *s) {
          for (int64_t i = 0; i < n; ++i)
            pz[o + i] = pc[in[0] + i * s[0]] ? px[in[1] + i * s[1]]
                                             : py[in[2] + i * s[2]];
        });
    return llvm::Error::success();
  });
}

llvm::Error sqrtKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, SqrtOp{});
}
llvm::Error expKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ExpOp{});
}
llvm::Error logKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, LogOp{});
}
llvm::Error erfKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ErfOp{});
}
llvm::Error tanhKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, TanhOp{});
}
llvm::Error sigmoidKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, SigmoidOp{});
}

llvm::Error softplusKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, SoftplusOp{});
}
llvm::Error absKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, SignedTypes{}, AbsOp{});
}
llvm::Error negKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, SignedTypes{}, NegOp{});
}
llvm::Error reluKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, SignedTypes{}, ReluOp{});
}
llvm::Error signKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, SignedTypes{}, SignOp{});
}
llvm::Error floorKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, FloorOp{});
}
llvm::Error ceilKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, CeilOp{});
}
llvm::Error sinKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, SinOp{});
}
llvm::Error cosKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, CosOp{});
}
llvm::Error notKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, BoolTypes{}, NotOp{});
}

llvm::Error dropoutKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "output"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "output"));
  uint8_t *mask = nullptr;
  if (ctx.hasOutput(1)) {
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[1], DType::Bool, "mask"));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[1], x.shape, "mask"));
    mask = ctx.outputs[1].as<uint8_t>();
  }
  double ratio = ctx.attrs.getFloat("ratio", 0.5);
  if (!(ratio >= 0.0 && ratio < 1.0))
    return ctx.error("ratio must be in [0, 1), got " +
                     llvm::Twine(std::to_string(ratio)));
  int64_t site = ctx.attrs.getInt("site", 0);
  if (site < 0 || site > int64_t(UINT32_MAX))
    return ctx.error("site must be in [0, 2^32), got " + llvm::Twine(site));
  int64_t axis = ctx.attrs.getInt("batch_axis", 0);
  if (axis < -1 || axis >= x.rank())
    return ctx.error("batch_axis " + llvm::Twine(axis) +
                     " is not -1 or an axis of the input");
  int64_t batchOuter = ctx.attrs.getInt("batch_outer", 1);
  if (batchOuter < 1 || (axis == -1 && batchOuter != 1) ||
      (axis >= 0 && x.shape[static_cast<size_t>(axis)] % batchOuter != 0))
    return ctx.error("batch_outer " + llvm::Twine(batchOuter) +
                     " is not 1 or a divisor of the batch axis's size");
  // This rank's input is [outer, chunk]: the axes before `axis` and the
  // first batch_outer groups of `axis` make the outer rows, each holding
  // this rank's samples. The global batch's input is [outer, world * chunk]
  // with this rank's slab at rank * chunk, so element i of outer row o is
  // global element (o * world + rank) * chunk + i. Without a batch axis,
  // every rank draws the global tensor's mask itself.
  int64_t outer = 1, chunk = x.numel();
  uint64_t world = 1, rank = 0;
  if (axis >= 0) {
    outer = product(x.shape, 0, static_cast<size_t>(axis)) * batchOuter;
    chunk = outer > 0 ? x.numel() / outer : 0;
    world = static_cast<uint64_t>(std::max(ctx.worldSize, 1));
    rank = static_cast<uint64_t>(ctx.rank);
  }
  uint64_t threshold = dropoutThreshold(ratio);
  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        T *py = y.as<T>();
        // Multiplying by 0 rather than writing 0 keeps NaN and inf, as
        // ONNX's x * mask / (1 - ratio) does.
        const T scale = static_cast<T>(1.0 / (1.0 - ratio));
        for (int64_t o = 0; o < outer; ++o) {
          uint64_t g = (static_cast<uint64_t>(o) * world + rank) *
                       static_cast<uint64_t>(chunk);
          Philox4x32Block words{};
          for (int64_t i = o * chunk, e = i + chunk; i < e; ++i, ++g) {
            if (g % 4 == 0 || i == o * chunk)
              words = dropoutBlock(ctx.seed, ctx.step,
                                   static_cast<uint32_t>(site), g / 4);
            bool keep = words.v[g % 4] >= threshold;
            py[i] = px[i] * (keep ? scale : T(0));
            if (mask)
              mask[i] = keep;
          }
        }
        return llvm::Error::success();
      });
}

llvm::Error castKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "input"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireNumel(ctx, y, x.numel(), "output"));
  return dispatchIn(
      CastTypes{}, ctx, x.dtype, "input", [&](auto from) -> llvm::Error {
        constexpr DType From = decltype(from)::dtype;
        using TF = typename decltype(from)::type;
        return dispatchIn(CastTypes{}, ctx, y.dtype, "output",
                          [&](auto to) -> llvm::Error {
                            constexpr DType To = decltype(to)::dtype;
                            using TT = typename decltype(to)::type;
                            const TF *px = x.as<TF>();
                            TT *py = y.as<TT>();
                            for (int64_t i = 0, e = x.numel(); i < e; ++i)
                              py[i] = convertValue<To, From>(px[i]);
                            return llvm::Error::success();
                          });
      });
}

//===----------------------------------------------------------------------===//
// Activation gradients
//===----------------------------------------------------------------------===//

namespace {

/// dX[i] = op(dY[i], Z[i]) where Z (the forward input or output, named
/// `zName`) has dY's shape.
template <typename Op>
llvm::Error activationGradKernel(const KernelContext &ctx,
                                 llvm::StringRef zName, Op op) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, zName));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dX"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &z = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, z, dy.dtype, zName));
  SHARDC_CPU_TRY(requireType(ctx, dx, dy.dtype, "dX"));
  SHARDC_CPU_TRY(requireShape(ctx, z, dy.shape, zName));
  SHARDC_CPU_TRY(requireShape(ctx, dx, dy.shape, "dX"));
  return dispatchIn(FloatTypes{}, ctx, dy.dtype, "dY",
                    [&](auto tag) -> llvm::Error {
                      using T = typename decltype(tag)::type;
                      const T *pdy = dy.as<T>();
                      const T *pz = z.as<T>();
                      T *pdx = dx.as<T>();
                      for (int64_t i = 0, e = dy.numel(); i < e; ++i)
                        pdx[i] = op(pdy[i], pz[i]);
                      return llvm::Error::success();
                    });
}

/// The operation order of PyTorch's CPU backward kernels
/// (aten/src/ATen/native/cpu/BinaryOpsKernel.cpp).
struct ReluGradOp {
  template <typename T> T operator()(T dy, T x) const {
    return x > T(0) ? dy : T(0);
  }
};
struct SigmoidGradOp {
  template <typename T> T operator()(T dy, T y) const {
    return dy * (T(1) - y) * y;
  }
};
struct TanhGradOp {
  template <typename T> T operator()(T dy, T y) const {
    return dy * (T(1) - y * y);
  }
};

} // namespace

llvm::Error reluGradKernel(const KernelContext &ctx) {
  return activationGradKernel(ctx, "X", ReluGradOp{});
}
llvm::Error sigmoidGradKernel(const KernelContext &ctx) {
  return activationGradKernel(ctx, "Y", SigmoidGradOp{});
}
llvm::Error tanhGradKernel(const KernelContext &ctx) {
  return activationGradKernel(ctx, "Y", TanhGradOp{});
}

} // namespace shardc::rt::cpu
