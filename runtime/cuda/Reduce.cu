//===- Reduce.cu - ReduceSum, ReduceMean, ReduceMax/Min and ArgMax --------===//
//
// One block per output element (grid-stride over outputs): its threads walk
// the reduced elements, accumulating as the CPU kernels do (double for
// floating-point sums, wrapping 64-bit integers, the element type for the
// extremes, NaN winning), then combine through shared memory. Operand
// checks are the CPU kernels' (cpu::checkReduce, cpu::checkArgMax).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/ElementOps.h"

#include <limits>
#include <type_traits>

namespace shardc::rt::cuda {

namespace {

enum class Reduction { Sum, Mean, Max, Min };

/// Threads per block of the reductions.
constexpr int kReduceBlock = 256;

/// An output element's input base (`kept`) and the offsets of the elements
/// it reduces (`over`).
struct ReduceIndex {
  Indexer<1> kept, over;
};

template <typename T, typename Acc>
__global__ void sumReduce(const T *x, T *y, int64_t outCount, int64_t count,
                          ReduceIndex ix, bool mean) {
  __shared__ Acc partial[kReduceBlock];
  for (int64_t o = blockIdx.x; o < outCount; o += gridDim.x) {
    int64_t base[1];
    ix.kept.offsets(o, base);
    Acc acc = 0;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
      int64_t off[1];
      ix.over.offsets(j, off);
      acc += static_cast<Acc>(x[base[0] + off[0]]);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride)
        partial[threadIdx.x] += partial[threadIdx.x + stride];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      Acc total = partial[0];
      if constexpr (std::is_integral_v<T>) {
        T s = static_cast<T>(total);
        y[o] = !mean ? s : count ? static_cast<T>(s / count) : T(0);
      } else {
        y[o] = static_cast<T>(!mean ? total
                              : count
                                  ? total / count
                                  : __longlong_as_double(0x7ff8000000000000ll));
      }
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void extremeReduce(const T *x, T *y, int64_t outCount, int64_t count,
                              ReduceIndex ix, bool max, T init) {
  __shared__ T partial[kReduceBlock];
  for (int64_t o = blockIdx.x; o < outCount; o += gridDim.x) {
    int64_t base[1];
    ix.kept.offsets(o, base);
    T acc = init;
    for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
      int64_t off[1];
      ix.over.offsets(j, off);
      acc = ops::extremeStep(acc, x[base[0] + off[0]], max);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride)
        partial[threadIdx.x] = ops::extremeStep(
            partial[threadIdx.x], partial[threadIdx.x + stride], max);
      __syncthreads();
    }
    if (threadIdx.x == 0)
      y[o] = partial[0];
    __syncthreads();
  }
}

/// One thread per output: lines are short next to the number of outputs in
/// the models that use ArgMax (the class axis of a batch of logits).
template <typename T>
__global__ void argMaxLines(const T *x, int64_t *y, int64_t outer, int64_t len,
                            int64_t inner, bool last) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       e < outer * inner; e += int64_t(blockDim.x) * gridDim.x) {
    int64_t o = e / inner, i = e % inner;
    const T *line = x + o * len * inner + i;
    int64_t best = 0;
    for (int64_t k = 1; k < len; ++k)
      if (ops::argMaxBetter(line[k * inner], line[best * inner], last))
        best = k;
    y[e] = best;
  }
}

/// One thread per element: its rank in its line by topKBefore (the number
/// of elements before it, a strict total order, so ranks are distinct);
/// ranks below k write its index there. O(len) per element: for the short
/// lines TopK sees in training (a router's experts, a few classes).
template <typename T>
__global__ void topKRanks(const T *x, int64_t *y, cpu::TopKGeometry g) {
  int64_t n = g.outer * g.len * g.inner;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t o = e / (g.len * g.inner), a = (e / g.inner) % g.len,
            i = e % g.inner;
    const T *line = x + o * g.len * g.inner + i;
    int64_t rank = 0;
    for (int64_t b = 0; b < g.len && rank < g.k; ++b)
      if (ops::topKBefore(line[b * g.inner], b, line[a * g.inner], a,
                          g.largest))
        ++rank;
    if (rank < g.k)
      y[(o * g.k + rank) * g.inner + i] = a;
  }
}

llvm::Error reduceImpl(const KernelContext &ctx, Reduction kind) {
  cpu::ReduceGeometry g;
  SHARDC_CPU_TRY(cpu::checkReduce(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  cudaStream_t s = cudaStreamOf(ctx);
  if (g.noop) {
    if (x.data == y.data || x.bytes() == 0)
      return llvm::Error::success();
    return check(
        cudaMemcpyAsync(y.data, x.data, x.bytes(), cudaMemcpyDeviceToDevice, s),
        "cudaMemcpyAsync");
  }
  // Kept and reduced dimensions of the input, with its row-major strides.
  llvm::SmallVector<int64_t, 6> strides = cpu::rowMajorStrides(x.shape);
  llvm::SmallVector<int64_t, 6> keptSizes, keptStrides, overSizes, overStrides;
  for (int64_t d = 0; d < x.rank(); ++d) {
    (g.reduced[d] ? overSizes : keptSizes).push_back(x.shape[d]);
    (g.reduced[d] ? overStrides : keptStrides).push_back(strides[d]);
  }
  ReduceIndex ix;
  SHARDC_CPU_TRY(makeIndexer<1>(ctx, keptSizes, {keptStrides}, ix.kept));
  SHARDC_CPU_TRY(makeIndexer<1>(ctx, overSizes, {overStrides}, ix.over));
  int64_t outCount = y.numel();
  if (outCount == 0)
    return llvm::Error::success();
  unsigned blocks = static_cast<unsigned>(std::min<int64_t>(outCount, 65535));
  if (kind == Reduction::Max || kind == Reduction::Min) {
    using Types = cpu::DTypeList<DType::F32, DType::F64, DType::I64, DType::I32,
                                 DType::I8, DType::U8>;
    bool max = kind == Reduction::Max;
    return cpu::dispatchIn(
        Types{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
          using T = typename decltype(tag)::type;
          T init;
          if constexpr (std::is_floating_point_v<T>)
            init = max ? -std::numeric_limits<T>::infinity()
                       : std::numeric_limits<T>::infinity();
          else
            init = max ? std::numeric_limits<T>::lowest()
                       : std::numeric_limits<T>::max();
          extremeReduce<<<blocks, kReduceBlock, 0, s>>>(
              x.as<T>(), y.as<T>(), outCount, g.count, ix, max, init);
          return checkLaunch(ctx);
        });
  }
  return cpu::dispatchIn(
      cpu::ArithTypes{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        using Acc = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;
        sumReduce<T, Acc><<<blocks, kReduceBlock, 0, s>>>(
            x.as<T>(), y.as<T>(), outCount, g.count, ix,
            kind == Reduction::Mean);
        return checkLaunch(ctx);
      });
}

} // namespace

llvm::Error reduceSumKernel(const KernelContext &ctx) {
  return reduceImpl(ctx, Reduction::Sum);
}
llvm::Error reduceMeanKernel(const KernelContext &ctx) {
  return reduceImpl(ctx, Reduction::Mean);
}
llvm::Error reduceMaxKernel(const KernelContext &ctx) {
  return reduceImpl(ctx, Reduction::Max);
}
llvm::Error reduceMinKernel(const KernelContext &ctx) {
  return reduceImpl(ctx, Reduction::Min);
}

llvm::Error argMaxKernel(const KernelContext &ctx) {
  cpu::ArgMaxGeometry g;
  SHARDC_CPU_TRY(cpu::checkArgMax(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  int64_t n = g.outer * g.inner;
  if (n == 0)
    return llvm::Error::success();
  using Types = cpu::DTypeList<DType::F32, DType::F64, DType::I64, DType::I32,
                               DType::I8, DType::U8>;
  return cpu::dispatchIn(
      Types{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        argMaxLines<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), y.as<int64_t>(), g.outer, g.len, g.inner, g.last);
        return checkLaunch(ctx);
      });
}

llvm::Error topKIndicesKernel(const KernelContext &ctx) {
  cpu::TopKGeometry g;
  SHARDC_CPU_TRY(cpu::checkTopKIndices(ctx, g));
  const TensorView &x = ctx.inputs[0];
  int64_t n = x.numel();
  if (n == 0 || g.k == 0)
    return llvm::Error::success();
  return cpu::dispatchIn(
      cpu::TopKTypes{}, ctx, x.dtype, "data", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        topKRanks<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), ctx.outputs[0].as<int64_t>(), g);
        return checkLaunch(ctx);
      });
}

} // namespace shardc::rt::cuda
