//===- Elementwise.cu - Elementwise CUDA kernels --------------------------===//
//
// Binary arithmetic, comparisons and logic with numpy broadcasting, Where,
// Pow, Cast, Dropout, unary math and the activation gradients: one thread
// per output element (grid-stride), the element functions of
// runtime/kernels/ElementOps.h and CastOps.h, and Dropout's Philox words
// (runtime/Philox.h) drawn for each element's global index, so the masks are
// the CPU backend's.
//
//===----------------------------------------------------------------------===//
#include "runtime/Philox.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/CastOps.h"
#include "runtime/kernels/ElementOps.h"

#include <vector>

namespace shardc::rt::cuda {

using cpu::dispatchBySize;
using cpu::dispatchIn;
using cpu::DTypeList;

namespace {

#define GRID_STRIDE_LOOP(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

template <typename T, typename R, typename Op>
__global__ void binaryElements(const T *a, const T *b, R *c, int64_t n,
                               Indexer<2> ix, Op op) {
  GRID_STRIDE_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    c[i] = op(a[off[0]], b[off[1]]);
  }
}

/// The operands of a broadcasting binary kernel (the CPU kernels' checks)
/// and the indexer that reads A and B for each element of C.
llvm::Error binaryIndexer(const KernelContext &ctx, DType resultType,
                          Indexer<2> &ix) {
  llvm::SmallVector<int64_t, 6> sa, sb;
  SHARDC_CPU_TRY(cpu::checkBroadcastOperands(ctx, resultType, sa, sb));
  return makeIndexer<2>(ctx, ctx.outputs[0].shape, {sa, sb}, ix);
}

/// Integer division by zero is an error on every backend: the divisor is
/// read back and scanned before the kernel is queued.
template <typename T>
llvm::Error checkNoZeroDivisor(const KernelContext &ctx, const TensorView &b) {
  std::vector<T> host(static_cast<size_t>(b.numel()));
  if (host.empty())
    return llvm::Error::success();
  cudaStream_t s = cudaStreamOf(ctx);
  SHARDC_CPU_TRY(check(cudaMemcpyAsync(host.data(), b.data, b.bytes(),
                                       cudaMemcpyDeviceToHost, s),
                       "cudaMemcpyAsync"));
  SHARDC_CPU_TRY(check(cudaStreamSynchronize(s), "cudaStreamSynchronize"));
  for (T v : host)
    if (v == 0)
      return ctx.error("integer division by zero");
  return llvm::Error::success();
}

template <typename Op>
llvm::Error arithmeticKernel(const KernelContext &ctx, Op op, bool checkZero) {
  Indexer<2> ix;
  SHARDC_CPU_TRY(binaryIndexer(ctx, DType::Undefined, ix));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &c = ctx.outputs[0];
  using Types = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32,
                          DType::I8, DType::U8>;
  return dispatchIn(Types{}, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>)
      if (checkZero)
        SHARDC_CPU_TRY(checkNoZeroDivisor<T>(ctx, b));
    int64_t n = c.numel();
    if (n == 0)
      return llvm::Error::success();
    binaryElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
        a.as<T>(), b.as<T>(), c.as<T>(), n, ix, op);
    return checkLaunch(ctx);
  });
}

using CompareTypes = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32,
                               DType::I8, DType::U8, DType::Bool>;
using BoolTypes = DTypeList<DType::Bool>;

template <typename Types, typename Op>
llvm::Error compareKernel(const KernelContext &ctx, Types types, Op op) {
  Indexer<2> ix;
  SHARDC_CPU_TRY(binaryIndexer(ctx, DType::Bool, ix));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &c = ctx.outputs[0];
  return dispatchIn(types, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    int64_t n = c.numel();
    if (n == 0)
      return llvm::Error::success();
    binaryElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
        a.as<T>(), b.as<T>(), c.as<uint8_t>(), n, ix, op);
    return checkLaunch(ctx);
  });
}

//===----------------------------------------------------------------------===//
// Where
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void whereElements(const uint8_t *cond, const T *x, const T *y, T *z,
                              int64_t n, Indexer<3> ix) {
  GRID_STRIDE_LOOP(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    z[i] = cond[off[0]] ? x[off[1]] : y[off[2]];
  }
}

//===----------------------------------------------------------------------===//
// Pow, Cast, Dropout
//===----------------------------------------------------------------------===//

template <typename TX, typename TY>
__global__ void powElements(const TX *x, const TY *y, TX *z, int64_t n,
                            Indexer<2> ix) {
  GRID_STRIDE_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    z[i] = ops::powValue(x[off[0]], y[off[1]]);
  }
}

template <DType To, DType From>
__global__ void castElements(const typename ops::StorageOf<From>::type *x,
                             typename ops::StorageOf<To>::type *y, int64_t n) {
  GRID_STRIDE_LOOP(i, n) { y[i] = ops::convertValue<To, From>(x[i]); }
}

template <typename T>
__global__ void dropoutElements(const T *x, T *y, uint8_t *mask, int64_t n,
                                cpu::DropoutGeometry g, uint64_t seed,
                                uint64_t step, T scale) {
  GRID_STRIDE_LOOP(i, n) {
    bool keep = dropoutKeep(seed, step, g.site, g.globalIndex(i), g.threshold);
    y[i] = x[i] * (keep ? scale : T(0));
    if (mask)
      mask[i] = keep;
  }
}

//===----------------------------------------------------------------------===//
// Unary and activation gradients
//===----------------------------------------------------------------------===//

template <typename T, typename Op>
__global__ void unaryElements(const T *x, T *y, int64_t n, Op op) {
  GRID_STRIDE_LOOP(i, n) { y[i] = op(x[i]); }
}

template <typename Types, typename Op>
llvm::Error unaryKernel(const KernelContext &ctx, Types types, Op op) {
  SHARDC_CPU_TRY(cpu::checkUnaryOperands(ctx, "X", "Y"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return dispatchIn(types, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    int64_t n = x.numel();
    if (n == 0)
      return llvm::Error::success();
    unaryElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
        x.as<T>(), y.as<T>(), n, op);
    return checkLaunch(ctx);
  });
}

template <typename T, typename Op>
__global__ void gradElements(const T *dy, const T *z, T *dx, int64_t n, Op op) {
  GRID_STRIDE_LOOP(i, n) { dx[i] = op(dy[i], z[i]); }
}

/// dX[i] = op(dY[i], Z[i]) where Z (the forward input or output, named
/// `zName`) has dY's shape.
template <typename Op>
llvm::Error activationGradKernel(const KernelContext &ctx,
                                 llvm::StringRef zName, Op op) {
  SHARDC_CPU_TRY(cpu::checkActivationGradOperands(ctx, zName));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &z = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  return dispatchIn(
      cpu::FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        int64_t n = dy.numel();
        if (n == 0)
          return llvm::Error::success();
        gradElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
            dy.as<T>(), z.as<T>(), dx.as<T>(), n, op);
        return checkLaunch(ctx);
      });
}

} // namespace

llvm::Error copyKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::checkUnaryOperands(ctx, "data", "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  if (x.data == y.data || x.bytes() == 0)
    return llvm::Error::success();
  return check(cudaMemcpyAsync(y.data, x.data, x.bytes(),
                               cudaMemcpyDeviceToDevice, cudaStreamOf(ctx)),
               "cudaMemcpyAsync");
}

llvm::Error addKernel(const KernelContext &ctx) {
  return arithmeticKernel(ctx, ops::AddOp{}, false);
}
llvm::Error subKernel(const KernelContext &ctx) {
  return arithmeticKernel(ctx, ops::SubOp{}, false);
}
llvm::Error mulKernel(const KernelContext &ctx) {
  return arithmeticKernel(ctx, ops::MulOp{}, false);
}
llvm::Error divKernel(const KernelContext &ctx) {
  return arithmeticKernel(ctx, ops::DivOp{}, true);
}
llvm::Error maxKernel(const KernelContext &ctx) {
  return arithmeticKernel(ctx, ops::MaxOp{}, false);
}
llvm::Error minKernel(const KernelContext &ctx) {
  return arithmeticKernel(ctx, ops::MinOp{}, false);
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

llvm::Error whereKernel(const KernelContext &ctx) {
  llvm::SmallVector<int64_t, 6> sc, sx, sy;
  SHARDC_CPU_TRY(cpu::checkWhereOperands(ctx, sc, sx, sy));
  const TensorView &cond = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &y = ctx.inputs[2];
  const TensorView &z = ctx.outputs[0];
  Indexer<3> ix;
  SHARDC_CPU_TRY(makeIndexer<3>(ctx, z.shape, {sc, sx, sy}, ix));
  return dispatchBySize(ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    int64_t n = z.numel();
    if (n == 0)
      return llvm::Error::success();
    whereElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
        cond.as<uint8_t>(), x.as<T>(), y.as<T>(), z.as<T>(), n, ix);
    return checkLaunch(ctx);
  });
}

llvm::Error powKernel(const KernelContext &ctx) {
  llvm::SmallVector<int64_t, 6> sx, sy;
  SHARDC_CPU_TRY(cpu::checkPowOperands(ctx, sx, sy));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.inputs[1];
  const TensorView &z = ctx.outputs[0];
  Indexer<2> ix;
  SHARDC_CPU_TRY(makeIndexer<2>(ctx, z.shape, {sx, sy}, ix));
  return dispatchIn(
      cpu::ArithTypes{}, ctx, x.dtype, "X", [&](auto xtag) -> llvm::Error {
        using TX = typename decltype(xtag)::type;
        return dispatchIn(
            cpu::ArithTypes{}, ctx, y.dtype, "Y",
            [&](auto ytag) -> llvm::Error {
              using TY = typename decltype(ytag)::type;
              int64_t n = z.numel();
              if (n == 0)
                return llvm::Error::success();
              powElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
                  x.as<TX>(), y.as<TY>(), z.as<TX>(), n, ix);
              return checkLaunch(ctx);
            });
      });
}

llvm::Error castKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::checkCastOperands(ctx));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  return dispatchIn(
      cpu::CastTypes{}, ctx, x.dtype, "input", [&](auto from) -> llvm::Error {
        constexpr DType From = decltype(from)::dtype;
        using TF = typename decltype(from)::type;
        return dispatchIn(
            cpu::CastTypes{}, ctx, y.dtype, "output",
            [&](auto to) -> llvm::Error {
              constexpr DType To = decltype(to)::dtype;
              using TT = typename decltype(to)::type;
              int64_t n = x.numel();
              if (n == 0)
                return llvm::Error::success();
              castElements<To, From>
                  <<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
                      x.as<TF>(), y.as<TT>(), n);
              return checkLaunch(ctx);
            });
      });
}

llvm::Error dropoutKernel(const KernelContext &ctx) {
  cpu::DropoutGeometry g;
  SHARDC_CPU_TRY(cpu::checkDropout(ctx, g));
  const TensorView &x = ctx.inputs[0];
  uint8_t *mask = g.hasMask ? ctx.outputs[1].as<uint8_t>() : nullptr;
  return dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        int64_t n = x.numel();
        if (n == 0)
          return llvm::Error::success();
        dropoutElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), ctx.outputs[0].as<T>(), mask, n, g, ctx.seed, ctx.step,
            static_cast<T>(1.0 / (1.0 - g.ratio)));
        return checkLaunch(ctx);
      });
}

llvm::Error sqrtKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::SqrtOp{});
}
llvm::Error expKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::ExpOp{});
}
llvm::Error logKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::LogOp{});
}
llvm::Error erfKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::ErfOp{});
}
llvm::Error tanhKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::TanhOp{});
}
llvm::Error sigmoidKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::SigmoidOp{});
}
llvm::Error softplusKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::SoftplusOp{});
}
llvm::Error absKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::SignedTypes{}, ops::AbsOp{});
}
llvm::Error negKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::SignedTypes{}, ops::NegOp{});
}
llvm::Error reluKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::SignedTypes{}, ops::ReluOp{});
}
llvm::Error signKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::SignedTypes{}, ops::SignOp{});
}
llvm::Error floorKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::FloorOp{});
}
llvm::Error ceilKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::CeilOp{});
}
llvm::Error sinKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::SinOp{});
}
llvm::Error cosKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::CosOp{});
}
llvm::Error tanKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::TanOp{});
}
llvm::Error asinKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::AsinOp{});
}
llvm::Error acosKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::AcosOp{});
}
llvm::Error atanKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::AtanOp{});
}
llvm::Error sinhKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::SinhOp{});
}
llvm::Error coshKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::CoshOp{});
}
llvm::Error asinhKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::AsinhOp{});
}
llvm::Error acoshKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::AcoshOp{});
}
llvm::Error atanhKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, cpu::FloatTypes{}, ops::AtanhOp{});
}
llvm::Error notKernel(const KernelContext &ctx) {
  return unaryKernel(ctx, BoolTypes{}, ops::NotOp{});
}

llvm::Error reluGradKernel(const KernelContext &ctx) {
  return activationGradKernel(ctx, "X", ops::ReluGradOp{});
}
llvm::Error sigmoidGradKernel(const KernelContext &ctx) {
  return activationGradKernel(ctx, "Y", ops::SigmoidGradOp{});
}
llvm::Error tanhGradKernel(const KernelContext &ctx) {
  return activationGradKernel(ctx, "Y", ops::TanhGradOp{});
}

} // namespace shardc::rt::cuda
