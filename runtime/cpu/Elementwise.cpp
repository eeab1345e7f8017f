//===- Elementwise.cpp - Elementwise kernels ------------------------------===//
//
// Binary arithmetic with numpy broadcasting, Pow, Where, unary math, Cast,
// Dropout and the activation gradients. Equal shapes take a flat loop;
// broadcasting walks contiguous rows with forEachRow.
//
//===----------------------------------------------------------------------===//
#include "runtime/Philox.h"
#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/VecMath.h"
#include "runtime/kernels/ElementOps.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace shardc::rt::cpu {

namespace {

// The element functions, shared with the CUDA kernels
// (runtime/kernels/ElementOps.h).
using ops::AbsOp;
using ops::AddOp;
using ops::CeilOp;
using ops::CosOp;
using ops::DivOp;
using ops::ErfOp;
using ops::ExpOp;
using ops::FloorOp;
using ops::LogOp;
using ops::MaxOp;
using ops::MinOp;
using ops::MulOp;
using ops::NegOp;
using ops::NotOp;
using ops::ReluOp;
using ops::SigmoidOp;
using ops::SignOp;
using ops::SinOp;
using ops::SoftplusOp;
using ops::SqrtOp;
using ops::SubOp;
using ops::TanhOp;
using ops::UnsignedOf;

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

/// Applies `op` over a broadcast row. The common stride patterns get their
/// own loops so that they vectorize; float rows of two contiguous operands
/// run VecMath's loop for `vecOp` (the CPU's widest vectors, the same
/// arithmetic) where the op has one.
template <typename T, typename Op>
void binaryRow(const T *a, int64_t sa, const T *b, int64_t sb, T *c, int64_t n,
               Op op, std::optional<ops::FusedOpcode> vecOp) {
  if constexpr (std::is_same_v<T, float>)
    if (vecOp && sa == 1 && sb == 1 && vec::fused(*vecOp, a, b, nullptr, c, n))
      return;
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
llvm::Error binaryKernel(const KernelContext &ctx, Op op, bool checkZero,
                         std::optional<ops::FusedOpcode> vecOp = std::nullopt) {
  llvm::SmallVector<int64_t, 6> sa, sb;
  SHARDC_CPU_TRY(checkBroadcastOperands(ctx, DType::Undefined, sa, sb));
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
      binaryRow(pa, 1, pb, 1, pc, c.numel(), op, vecOp);
      return llvm::Error::success();
    }
    std::array<llvm::ArrayRef<int64_t>, 2> strides = {sa, sb};
    forEachRow<2>(
        c.shape, strides,
        [&](int64_t o, const int64_t *in, int64_t n, const int64_t *s) {
          binaryRow(pa + in[0], s[0], pb + in[1], s[1], pc + o, n, op, vecOp);
        });
    return llvm::Error::success();
  });
}

//===----------------------------------------------------------------------===//
// Pow
//===----------------------------------------------------------------------===//

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

/// A vectorized loop over a float array (VecMath.h).
using FloatArrayFn = void (*)(const float *, float *, int64_t);

/// Y = op(X); float arrays go through `floatArray` when one is given.
template <typename Types, typename Op>
llvm::Error unaryKernel(const KernelContext &ctx, Types types, Op op,
                        FloatArrayFn floatArray = nullptr) {
  SHARDC_CPU_TRY(checkUnaryOperands(ctx, "X", "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return dispatchIn(types, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *px = x.as<T>();
    T *py = y.as<T>();
    if constexpr (std::is_same_v<T, float>)
      if (floatArray) {
        floatArray(px, py, x.numel());
        return llvm::Error::success();
      }
    for (int64_t i = 0, e = x.numel(); i < e; ++i)
      py[i] = op(px[i]);
    return llvm::Error::success();
  });
}

} // namespace

llvm::Error addKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, AddOp{}, false, ops::FusedOpcode::Add);
}
llvm::Error subKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, SubOp{}, false, ops::FusedOpcode::Sub);
}
llvm::Error mulKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, MulOp{}, false, ops::FusedOpcode::Mul);
}
llvm::Error divKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, DivOp{}, true, ops::FusedOpcode::Div);
}

llvm::Error maxKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, MaxOp{}, false);
}
llvm::Error minKernel(const KernelContext &ctx) {
  return binaryKernel(ctx, MinOp{}, false);
}

llvm::Error equalKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{}, ops::EqualOp{});
}
llvm::Error greaterKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{}, ops::GreaterOp{});
}
llvm::Error lessKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{}, ops::LessOp{});
}
llvm::Error greaterOrEqualKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{}, ops::GreaterOrEqualOp{});
}
llvm::Error lessOrEqualKernel(const KernelContext &ctx) {
  return compareKernel(ctx, CompareTypes{}, ops::LessOrEqualOp{});
}
llvm::Error andKernel(const KernelContext &ctx) {
  return compareKernel(ctx, BoolTypes{}, ops::AndOp{});
}
llvm::Error orKernel(const KernelContext &ctx) {
  return compareKernel(ctx, BoolTypes{}, ops::OrOp{});
}
llvm::Error xorKernel(const KernelContext &ctx) {
  return compareKernel(ctx, BoolTypes{}, ops::XorOp{});
}

llvm::Error checkPowOperands(const KernelContext &ctx,
                             llvm::SmallVectorImpl<int64_t> &sx,
                             llvm::SmallVectorImpl<int64_t> &sy) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "X"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "Y"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Z"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &z = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, z, x.dtype, "Z"));
  SHARDC_CPU_TRY(broadcastTo(ctx, x, z.shape, "X", sx));
  return broadcastTo(ctx, ctx.inputs[1], z.shape, "Y", sy);
}

llvm::Error powKernel(const KernelContext &ctx) {
  llvm::SmallVector<int64_t, 6> sx, sy;
  SHARDC_CPU_TRY(checkPowOperands(ctx, sx, sy));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.inputs[1];
  const TensorView &z = ctx.outputs[0];
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
              if constexpr (std::is_floating_point_v<TX>)
                if (y.numel() == 1 && x.shape == z.shape &&
                    smallPower(px, static_cast<double>(py[0]), pz, z.numel()))
                  return llvm::Error::success();
              forEachRow<2>(z.shape, strides,
                            [&](int64_t o, const int64_t *in, int64_t n,
                                const int64_t *s) {
                              for (int64_t i = 0; i < n; ++i)
                                pz[o + i] = ops::powValue(px[in[0] + i * s[0]],
                                                          py[in[1] + i * s[1]]);
                            });
              return llvm::Error::success();
            });
      });
}

llvm::Error whereKernel(const KernelContext &ctx) {
  llvm::SmallVector<int64_t, 6> sc, sx, sy;
  SHARDC_CPU_TRY(checkWhereOperands(ctx, sc, sx, sy));
  const TensorView &cond = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &y = ctx.inputs[2];
  const TensorView &z = ctx.outputs[0];
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
  return unaryKernel(ctx, FloatTypes{}, ExpOp{}, vec::expArray);
}
llvm::Error logKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, LogOp{});
}
llvm::Error erfKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ErfOp{}, vec::erfArray);
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
llvm::Error tanKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ops::TanOp{});
}
llvm::Error asinKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ops::AsinOp{});
}
llvm::Error acosKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ops::AcosOp{});
}
llvm::Error atanKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ops::AtanOp{});
}
llvm::Error sinhKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ops::SinhOp{});
}
llvm::Error coshKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ops::CoshOp{});
}
llvm::Error asinhKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ops::AsinhOp{});
}
llvm::Error acoshKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ops::AcoshOp{});
}
llvm::Error atanhKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, FloatTypes{}, ops::AtanhOp{});
}
llvm::Error notKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, BoolTypes{}, NotOp{});
}

llvm::Error checkDropout(const KernelContext &ctx, DropoutGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, "output"));
  SHARDC_CPU_TRY(requireShape(ctx, y, x.shape, "output"));
  g.hasMask = ctx.hasOutput(1);
  if (g.hasMask) {
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[1], DType::Bool, "mask"));
    SHARDC_CPU_TRY(requireShape(ctx, ctx.outputs[1], x.shape, "mask"));
  }
  g.ratio = ctx.attrs.getFloat("ratio", 0.5);
  if (!(g.ratio >= 0.0 && g.ratio < 1.0))
    return ctx.error("ratio must be in [0, 1), got " +
                     llvm::Twine(std::to_string(g.ratio)));
  int64_t site = ctx.attrs.getInt("site", 0);
  if (site < 0 || site > int64_t(UINT32_MAX))
    return ctx.error("site must be in [0, 2^32), got " + llvm::Twine(site));
  g.site = static_cast<uint32_t>(site);
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
  // with this rank's slab at rank * chunk. Without a batch axis, every rank
  // draws the global tensor's mask itself.
  // With gradient accumulation, micro-batch m of K on rank r of N draws as
  // rank m * N + r of N * K.
  int64_t micro = ctx.attrs.getInt("micro_batch", 0);
  int64_t micros = ctx.attrs.getInt("micro_batches", 1);
  if (micros < 1 || micro < 0 || micro >= micros)
    return ctx.error("micro_batch " + llvm::Twine(micro) +
                     " is not in [0, micro_batches = " + llvm::Twine(micros) +
                     ")");
  g.outer = 1;
  g.chunk = x.numel();
  g.world = 1;
  g.rank = 0;
  if (axis >= 0) {
    g.outer = product(x.shape, 0, static_cast<size_t>(axis)) * batchOuter;
    g.chunk = g.outer > 0 ? x.numel() / g.outer : 0;
    uint64_t n = static_cast<uint64_t>(std::max(ctx.worldSize, 1));
    g.world = n * static_cast<uint64_t>(micros);
    g.rank = static_cast<uint64_t>(micro) * n + static_cast<uint64_t>(ctx.rank);
  }
  g.threshold = dropoutThreshold(g.ratio);
  return dispatchIn(FloatTypes{}, ctx, x.dtype, "data",
                    [](auto) { return llvm::Error::success(); });
}

llvm::Error dropoutKernel(const KernelContext &ctx) {
  DropoutGeometry g;
  SHARDC_CPU_TRY(checkDropout(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  uint8_t *mask = g.hasMask ? ctx.outputs[1].as<uint8_t>() : nullptr;
  return dispatchIn(
      FloatTypes{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        T *py = y.as<T>();
        // Multiplying by 0 rather than writing 0 keeps NaN and inf, as
        // ONNX's x * mask / (1 - ratio) does.
        const T scale = static_cast<T>(1.0 / (1.0 - g.ratio));
        for (int64_t o = 0; o < g.outer; ++o) {
          uint64_t gi = g.globalIndex(o * g.chunk);
          Philox4x32Block words{};
          for (int64_t i = o * g.chunk, e = i + g.chunk; i < e; ++i, ++gi) {
            if (gi % 4 == 0 || i == o * g.chunk)
              words = dropoutBlock(ctx.seed, ctx.step, g.site, gi / 4);
            bool keep = words.v[gi % 4] >= g.threshold;
            py[i] = px[i] * (keep ? scale : T(0));
            if (mask)
              mask[i] = keep;
          }
        }
        return llvm::Error::success();
      });
}

llvm::Error checkCastOperands(const KernelContext &ctx) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "input"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "output"));
  return requireNumel(ctx, ctx.outputs[0], ctx.inputs[0].numel(), "output");
}

llvm::Error castKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(checkCastOperands(ctx));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
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
  SHARDC_CPU_TRY(checkActivationGradOperands(ctx, zName));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &z = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
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

} // namespace

llvm::Error reluGradKernel(const KernelContext &ctx) {
  return activationGradKernel(ctx, "X", ops::ReluGradOp{});
}
llvm::Error sigmoidGradKernel(const KernelContext &ctx) {
  return activationGradKernel(ctx, "Y", ops::SigmoidGradOp{});
}
llvm::Error tanhGradKernel(const KernelContext &ctx) {
  return activationGradKernel(ctx, "Y", ops::TanhGradOp{});
}

//===----------------------------------------------------------------------===//
// Operand checks shared with the CUDA kernels
//===----------------------------------------------------------------------===//

llvm::Error checkUnaryOperands(const KernelContext &ctx, llvm::StringRef xName,
                               llvm::StringRef yName) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, xName));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, yName));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, y, x.dtype, yName));
  return requireNumel(ctx, y, x.numel(), yName);
}

llvm::Error checkBroadcastOperands(const KernelContext &ctx, DType resultType,
                                   llvm::SmallVectorImpl<int64_t> &sa,
                                   llvm::SmallVectorImpl<int64_t> &sb) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "A"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "B"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "C"));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &c = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, b, a.dtype, "B"));
  SHARDC_CPU_TRY(requireType(
      ctx, c, resultType == DType::Undefined ? a.dtype : resultType, "C"));
  SHARDC_CPU_TRY(broadcastTo(ctx, a, c.shape, "A", sa));
  return broadcastTo(ctx, b, c.shape, "B", sb);
}

llvm::Error checkWhereOperands(const KernelContext &ctx,
                               llvm::SmallVectorImpl<int64_t> &sc,
                               llvm::SmallVectorImpl<int64_t> &sx,
                               llvm::SmallVectorImpl<int64_t> &sy) {
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
  SHARDC_CPU_TRY(broadcastTo(ctx, cond, z.shape, "condition", sc));
  SHARDC_CPU_TRY(broadcastTo(ctx, x, z.shape, "X", sx));
  return broadcastTo(ctx, y, z.shape, "Y", sy);
}

llvm::Error checkActivationGradOperands(const KernelContext &ctx,
                                        llvm::StringRef zName) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, zName));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "dX"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &z = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  SHARDC_CPU_TRY(requireType(ctx, z, dy.dtype, zName));
  SHARDC_CPU_TRY(requireType(ctx, dx, dy.dtype, "dX"));
  SHARDC_CPU_TRY(requireShape(ctx, z, dy.shape, zName));
  return requireShape(ctx, dx, dy.shape, "dX");
}

} // namespace shardc::rt::cpu
