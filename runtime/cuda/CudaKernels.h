//===- CudaKernels.h - CUDA kernel entry points and helpers -----*- C++ -*-===//
//
// Private to runtime/cuda: the launch geometry, the broadcast indexer and
// the kernel entry points that Kernels.cu registers. Entry points check
// their operands with the CPU kernels' checks (runtime/cpu/KernelUtil.h), so
// both backends refuse the same operands with the same messages.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_CUDAKERNELS_H
#define SHARDC_RUNTIME_CUDA_CUDAKERNELS_H

#include "runtime/cpu/KernelUtil.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/kernels/HostDevice.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cstdint>

namespace shardc::rt::cuda {

/// Threads per block of the elementwise kernels; grid-stride loops let a
/// bounded grid cover any number of elements.
constexpr int kBlock = 256;
inline unsigned blocksFor(int64_t n) {
  int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 1 ? 1
                                          : (blocks > 65535 ? 65535 : blocks));
}

/// Most dimensions a broadcast can have after merging contiguous ones.
constexpr int kMaxDims = 8;

/// Maps an element of a dense output to the offsets of N inputs read with
/// arbitrary (broadcast) strides. Dimensions are innermost first, merged
/// where every operand is contiguous across them, size-1 ones dropped.
template <int N> struct Indexer {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  SHARDC_HOST_DEVICE void offsets(int64_t out, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k)
      off[k] = 0;
    for (int d = 0; d < rank; ++d) {
      int64_t i = out % dims[d];
      out /= dims[d];
      for (int k = 0; k < N; ++k)
        off[k] += i * strides[k][d];
    }
  }
};

/// The indexer for an output of `shape` and inputs with `inStrides` (per
/// dimension of `shape`, from cpu::broadcastTo), or an error naming the op
/// when more than kMaxDims dimensions remain.
template <int N>
llvm::Error makeIndexer(const KernelContext &ctx, llvm::ArrayRef<int64_t> shape,
                        const std::array<llvm::ArrayRef<int64_t>, N> &inStrides,
                        Indexer<N> &ix) {
  ix = Indexer<N>();
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1)
      continue;
    bool merge = ix.rank > 0;
    for (int k = 0; k < N && merge; ++k)
      merge =
          inStrides[k][d] == ix.strides[k][ix.rank - 1] * ix.dims[ix.rank - 1];
    if (merge) {
      ix.dims[ix.rank - 1] *= shape[d];
      continue;
    }
    if (ix.rank == kMaxDims)
      return ctx.error("the CUDA backend broadcasts over at most " +
                       llvm::Twine(kMaxDims) +
                       " dimensions (after merging contiguous ones); this "
                       "op has more");
    ix.dims[ix.rank] = shape[d];
    for (int k = 0; k < N; ++k)
      ix.strides[k][ix.rank] = inStrides[k][d];
    ++ix.rank;
  }
  return llvm::Error::success();
}

/// Most spatial dimensions of a convolution or a pool on CUDA.
constexpr int kMaxSpatial = kMaxDims;

/// The sliding window of Conv and the pools as a kernel argument: the
/// spatial shapes of input and output and cpu::WindowAttrs, in fixed arrays;
/// prod(in), prod(out) and prod(kernel).
struct WindowDims {
  int ns = 0;
  int64_t in[kMaxSpatial] = {}, out[kMaxSpatial] = {};
  int64_t kernel[kMaxSpatial] = {}, strides[kMaxSpatial] = {};
  int64_t dilations[kMaxSpatial] = {};
  int64_t padBegin[kMaxSpatial] = {}, padEnd[kMaxSpatial] = {};
  int64_t inSize = 0, outSize = 0, kprod = 0;
};

/// Fills `d`, or returns an error for more than kMaxSpatial spatial
/// dimensions ("the CUDA backend <verb> over at most ...").
inline llvm::Error makeWindowDims(const KernelContext &ctx,
                                  llvm::ArrayRef<int64_t> inShape,
                                  llvm::ArrayRef<int64_t> outShape,
                                  const cpu::WindowAttrs &w,
                                  llvm::StringRef verb, WindowDims &d) {
  size_t ns = inShape.size();
  if (ns > static_cast<size_t>(kMaxSpatial))
    return ctx.error("the CUDA backend " + verb + " over at most " +
                     llvm::Twine(kMaxSpatial) + " spatial dimensions, not " +
                     llvm::Twine(ns));
  d = WindowDims();
  d.ns = static_cast<int>(ns);
  for (size_t s = 0; s < ns; ++s) {
    d.in[s] = inShape[s];
    d.out[s] = outShape[s];
    d.kernel[s] = w.kernel[s];
    d.strides[s] = w.strides[s];
    d.dilations[s] = w.dilations[s];
    d.padBegin[s] = w.padBegin[s];
    d.padEnd[s] = w.padEnd[s];
  }
  d.inSize = numElements(inShape);
  d.outSize = numElements(outShape);
  d.kprod = numElements(w.kernel);
  return llvm::Error::success();
}

#if defined(__CUDACC__)
/// The sum over the block of each thread's `v`, returned to every thread:
/// a fixed tree over `shared` (blockDim.x doubles, a power of two), so the
/// order depends only on the block size. Every thread of the block must
/// call it.
__device__ inline double blockSum(double v, double *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  double total = shared[0];
  __syncthreads();
  return total;
}
#endif

/// Checks the launch that was just queued.
inline llvm::Error checkLaunch(const KernelContext &ctx) {
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess)
    return llvm::Error::success();
  return ctx.error(llvm::Twine("the CUDA kernel launch failed: ") +
                   cudaGetErrorName(status) + " (" +
                   cudaGetErrorString(status) + ")");
}

/// Data-dependent errors (a class target or an index out of range) cannot
/// fail a thread: threads record the first bad position in a scratch word
/// (atomicMin; kNoBadPosition when none), which the kernel reads back after
/// its launch and turns into the CPU kernel's error.
constexpr unsigned long long kNoBadPosition = ~0ull;

/// Sets `word` (device memory) to kNoBadPosition on the kernel's stream.
inline llvm::Error resetBadPosition(const KernelContext &ctx,
                                    unsigned long long *word) {
  return check(cudaMemsetAsync(word, 0xff, sizeof *word, cudaStreamOf(ctx)),
               "cudaMemsetAsync (bad position)");
}

/// Waits for the kernel and reads the recorded position: -1 when none, else
/// the position and the i64/i32 value of `values` there (the bad target or
/// index).
inline llvm::Error readBadPosition(const KernelContext &ctx,
                                   const unsigned long long *word,
                                   const void *values, bool wide,
                                   int64_t &position, int64_t &value) {
  unsigned long long p = kNoBadPosition;
  CudaStream &stream = streamOf(ctx);
  SHARDC_CPU_TRY(stream.readBack(&p, word, sizeof p));
  position = p == kNoBadPosition ? -1 : static_cast<int64_t>(p);
  value = 0;
  if (position < 0)
    return llvm::Error::success();
  if (wide)
    return stream.readBack(
        &value, static_cast<const int64_t *>(values) + position, sizeof value);
  int32_t v32 = 0;
  SHARDC_CPU_TRY(stream.readBack(
      &v32, static_cast<const int32_t *>(values) + position, sizeof v32));
  value = v32;
  return llvm::Error::success();
}

/// The element type a CUDA product computes on for DType D: the CPU
/// kernels' storage type, except that 16-bit floats are CUDA's __half and
/// __nv_bfloat16 (2 bytes, converting to and from float).
template <DType D> struct CudaElement {
  using type = typename cpu::DTag<D>::type;
};
template <> struct CudaElement<DType::F16> { using type = __half; };
template <> struct CudaElement<DType::BF16> { using type = __nv_bfloat16; };

/// The type of a product's alpha and beta: float for 16-bit floats (they
/// accumulate in float32), the element type otherwise.
template <typename T> struct GemmScalar { using type = T; };
template <> struct GemmScalar<__half> { using type = float; };
template <> struct GemmScalar<__nv_bfloat16> { using type = float; };

/// Row-major C (m x n, leading dimension ldc) = alpha op(A) op(B) + beta C,
/// `count` times with matrices `strideA`, `strideB`, `strideC` elements
/// apart: cuBLAS for f32 and f64, for bfloat16 and float16 cuBLAS's tensor
/// cores accumulating in float32 (rounded once to the element type), a plain
/// kernel for integers (MatMul.cu, which instantiates the float types for
/// the other kernels).
template <typename T, typename S = typename GemmScalar<T>::type>
llvm::Error gemm(const KernelContext &ctx, bool transA, bool transB, int64_t m,
                 int64_t n, int64_t k, S alpha, const T *a, int64_t lda,
                 int64_t strideA, const T *b, int64_t ldb, int64_t strideB,
                 S beta, T *c, int64_t ldc, int64_t strideC, int64_t count);

// Elementwise.cu
llvm::Error copyKernel(const KernelContext &ctx);
llvm::Error addKernel(const KernelContext &ctx);
llvm::Error subKernel(const KernelContext &ctx);
llvm::Error mulKernel(const KernelContext &ctx);
llvm::Error divKernel(const KernelContext &ctx);
llvm::Error maxKernel(const KernelContext &ctx);
llvm::Error minKernel(const KernelContext &ctx);
llvm::Error equalKernel(const KernelContext &ctx);
llvm::Error greaterKernel(const KernelContext &ctx);
llvm::Error lessKernel(const KernelContext &ctx);
llvm::Error greaterOrEqualKernel(const KernelContext &ctx);
llvm::Error lessOrEqualKernel(const KernelContext &ctx);
llvm::Error andKernel(const KernelContext &ctx);
llvm::Error orKernel(const KernelContext &ctx);
llvm::Error xorKernel(const KernelContext &ctx);
llvm::Error whereKernel(const KernelContext &ctx);
llvm::Error sqrtKernel(const KernelContext &ctx);
llvm::Error expKernel(const KernelContext &ctx);
llvm::Error logKernel(const KernelContext &ctx);
llvm::Error erfKernel(const KernelContext &ctx);
llvm::Error tanhKernel(const KernelContext &ctx);
llvm::Error sigmoidKernel(const KernelContext &ctx);
llvm::Error softplusKernel(const KernelContext &ctx);
llvm::Error absKernel(const KernelContext &ctx);
llvm::Error negKernel(const KernelContext &ctx);
llvm::Error reluKernel(const KernelContext &ctx);
llvm::Error signKernel(const KernelContext &ctx);
llvm::Error floorKernel(const KernelContext &ctx);
llvm::Error ceilKernel(const KernelContext &ctx);
llvm::Error sinKernel(const KernelContext &ctx);
llvm::Error cosKernel(const KernelContext &ctx);
llvm::Error tanKernel(const KernelContext &ctx);
llvm::Error asinKernel(const KernelContext &ctx);
llvm::Error acosKernel(const KernelContext &ctx);
llvm::Error atanKernel(const KernelContext &ctx);
llvm::Error sinhKernel(const KernelContext &ctx);
llvm::Error coshKernel(const KernelContext &ctx);
llvm::Error asinhKernel(const KernelContext &ctx);
llvm::Error acoshKernel(const KernelContext &ctx);
llvm::Error atanhKernel(const KernelContext &ctx);
llvm::Error notKernel(const KernelContext &ctx);
llvm::Error powKernel(const KernelContext &ctx);
llvm::Error castKernel(const KernelContext &ctx);
llvm::Error dropoutKernel(const KernelContext &ctx);
llvm::Error reluGradKernel(const KernelContext &ctx);
llvm::Error sigmoidGradKernel(const KernelContext &ctx);
llvm::Error tanhGradKernel(const KernelContext &ctx);

/// Runs `kernel` with every 16-bit float operand replaced by a float32 copy
/// (inputs widened exactly before, outputs rounded to nearest even after,
/// as the CPU's cpu::runWidened): how the backend runs a kernel that does
/// not take 16-bit floats itself, and how a convolution cuDNN declines in
/// 16 bits runs. `ctx.stream` is the CudaStream the kernel runs on.
llvm::Error runWidened(KernelFn kernel, const KernelContext &ctx);

// Conv.cu
llvm::Error convKernel(const KernelContext &ctx);
llvm::Error convGradInputKernel(const KernelContext &ctx);
llvm::Error convGradWeightKernel(const KernelContext &ctx);

// Pool.cu
llvm::Error maxPoolKernel(const KernelContext &ctx);
llvm::Error averagePoolKernel(const KernelContext &ctx);
llvm::Error globalAveragePoolKernel(const KernelContext &ctx);
llvm::Error maxPoolGradKernel(const KernelContext &ctx);
llvm::Error averagePoolGradKernel(const KernelContext &ctx);

// DataMovement.cu
llvm::Error transposeKernel(const KernelContext &ctx);
llvm::Error expandKernel(const KernelContext &ctx);
llvm::Error sliceKernel(const KernelContext &ctx);
llvm::Error sliceGradKernel(const KernelContext &ctx);
llvm::Error concatKernel(const KernelContext &ctx);
llvm::Error splitKernel(const KernelContext &ctx);
llvm::Error triluKernel(const KernelContext &ctx);
llvm::Error rangeKernel(const KernelContext &ctx);
llvm::Error gatherKernel(const KernelContext &ctx);
llvm::Error gatherGradKernel(const KernelContext &ctx);
llvm::Error gatherElementsKernel(const KernelContext &ctx);
llvm::Error scatterElementsKernel(const KernelContext &ctx);
llvm::Error gatherElementsGradKernel(const KernelContext &ctx);
llvm::Error shardSliceKernel(const KernelContext &ctx);

// MatMul.cu
llvm::Error gemmKernel(const KernelContext &ctx);
llvm::Error matMulKernel(const KernelContext &ctx);
llvm::Error permutedMatMulKernel(const KernelContext &ctx);

// Reduce.cu
llvm::Error reduceSumKernel(const KernelContext &ctx);
llvm::Error reduceMeanKernel(const KernelContext &ctx);
llvm::Error reduceMaxKernel(const KernelContext &ctx);
llvm::Error reduceMinKernel(const KernelContext &ctx);
llvm::Error argMaxKernel(const KernelContext &ctx);
llvm::Error topKIndicesKernel(const KernelContext &ctx);

// Softmax.cu
llvm::Error softmaxKernel(const KernelContext &ctx);
llvm::Error logSoftmaxKernel(const KernelContext &ctx);
llvm::Error softmaxGradKernel(const KernelContext &ctx);
llvm::Error logSoftmaxGradKernel(const KernelContext &ctx);

// Loss.cu
llvm::Error softmaxCrossEntropyLossKernel(const KernelContext &ctx);
llvm::Error negativeLogLikelihoodLossKernel(const KernelContext &ctx);
llvm::Error softmaxCrossEntropyLossGradKernel(const KernelContext &ctx);
llvm::Error negativeLogLikelihoodLossGradKernel(const KernelContext &ctx);
llvm::Error softmaxCrossEntropyLossWithGradKernel(const KernelContext &ctx);

// Normalization.cu
llvm::Error layerNormalizationKernel(const KernelContext &ctx);
llvm::Error layerNormGradKernel(const KernelContext &ctx);
llvm::Error batchNormalizationKernel(const KernelContext &ctx);
llvm::Error batchNormGradKernel(const KernelContext &ctx);
llvm::Error batchNormStatsKernel(const KernelContext &ctx);
llvm::Error batchNormGradStatsKernel(const KernelContext &ctx);

// Optimizer.cu
llvm::Error sgdUpdateKernel(const KernelContext &ctx);
llvm::Error adamUpdateKernel(const KernelContext &ctx);
llvm::Error incrementKernel(const KernelContext &ctx);
llvm::Error partialNormKernel(const KernelContext &ctx);
llvm::Error clipCoefficientKernel(const KernelContext &ctx);
llvm::Error lossScaleKernel(const KernelContext &ctx);

// Fused.cu
llvm::Error fusedElementwiseKernel(const KernelContext &ctx);

} // namespace shardc::rt::cuda

#endif // SHARDC_RUNTIME_CUDA_CUDAKERNELS_H
