//===- KernelUtil.h - Helpers shared by the CPU kernels ---------*- C++ -*-===//
//
// Element-type dispatch, operand checks, broadcasting iteration and the
// kernel entry points that Kernels.cpp registers. Private to the kernels: the
// CUDA kernels (runtime/cuda) use the dispatch and the operand checks, so
// both backends refuse the same operands with the same messages.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CPU_KERNELUTIL_H
#define SHARDC_RUNTIME_CPU_KERNELUTIL_H

#include "runtime/Backend.h"
#include "runtime/kernels/CastOps.h"
#include "runtime/kernels/FusedOps.h"
#include "runtime/kernels/OptimizerOps.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

/// Returns from the enclosing function if `expr` yields an error.
#define SHARDC_CPU_TRY(expr)                                                   \
  do {                                                                         \
    if (llvm::Error shardcCpuErr = (expr))                                     \
      return shardcCpuErr;                                                     \
  } while (false)

namespace shardc::rt::cpu {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

using ops::StorageOf;

/// A compile-time element type handed to dispatch callbacks.
template <DType D> struct DTag {
  static constexpr DType dtype = D;
  using type = typename StorageOf<D>::type;
};

template <DType... Ds> struct DTypeList {};

using FloatTypes = DTypeList<DType::F32, DType::F64>;
using ArithTypes = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32>;
using SignedTypes = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32>;
using CastTypes =
    DTypeList<DType::F32, DType::F64, DType::I64, DType::I32, DType::Bool,
              DType::U8, DType::I8, DType::F16, DType::BF16>;

/// The error a kernel returns for an element type it does not support.
llvm::Error unsupportedType(const KernelContext &ctx, DType t,
                            const llvm::Twine &operand);

template <typename Fn>
llvm::Error dispatchIn(DTypeList<>, const KernelContext &ctx, DType t,
                       const llvm::Twine &operand, Fn &&) {
  return unsupportedType(ctx, t, operand);
}

/// Calls `fn(DTag<D>{})` for the DType `t` if it is in the list, and returns
/// its error; otherwise returns an error naming `operand` and `t`.
template <DType D, DType... Rest, typename Fn>
llvm::Error dispatchIn(DTypeList<D, Rest...>, const KernelContext &ctx, DType t,
                       const llvm::Twine &operand, Fn &&fn) {
  if (t == D)
    return fn(DTag<D>{});
  return dispatchIn(DTypeList<Rest...>{}, ctx, t, operand,
                    std::forward<Fn>(fn));
}

/// Unsigned integer of a given byte size, for kernels that only move bytes.
template <size_t N> struct UIntOfSize;
template <> struct UIntOfSize<1> { using type = uint8_t; };
template <> struct UIntOfSize<2> { using type = uint16_t; };
template <> struct UIntOfSize<4> { using type = uint32_t; };
template <> struct UIntOfSize<8> { using type = uint64_t; };

/// Calls `fn(Tag)` with `Tag::type` an unsigned integer as wide as an element
/// of `t` (any type of 1, 2, 4 or 8 bytes).
template <typename Fn>
llvm::Error dispatchBySize(const KernelContext &ctx, DType t,
                           const llvm::Twine &operand, Fn &&fn) {
  switch (dtypeSize(t)) {
  case 1:
    return fn(std::common_type<uint8_t>{});
  case 2:
    return fn(std::common_type<uint16_t>{});
  case 4:
    return fn(std::common_type<uint32_t>{});
  case 8:
    return fn(std::common_type<uint64_t>{});
  default:
    return unsupportedType(ctx, t, operand);
  }
}

using ops::convertValue;
using ops::floatToHalf;
using ops::halfToFloat;

//===----------------------------------------------------------------------===//
// Operand checks
//===----------------------------------------------------------------------===//

/// Input `i` must be present (with data unless it is empty).
llvm::Error requireInput(const KernelContext &ctx, size_t i,
                         llvm::StringRef name);
/// Output `i` must be present.
llvm::Error requireOutput(const KernelContext &ctx, size_t i,
                          llvm::StringRef name);
/// `view` must have element type `t`.
llvm::Error requireType(const KernelContext &ctx, const TensorView &view,
                        DType t, llvm::StringRef name);
/// `view` must have exactly `shape`.
llvm::Error requireShape(const KernelContext &ctx, const TensorView &view,
                         llvm::ArrayRef<int64_t> shape, llvm::StringRef name);
/// `view` must hold `n` elements.
llvm::Error requireNumel(const KernelContext &ctx, const TensorView &view,
                         int64_t n, llvm::StringRef name);

/// Reads attribute `axis` (default `def`; negative counts from the end) of
/// a tensor of rank `rank` into `axis`, in [0, rank).
llvm::Error readAxis(const KernelContext &ctx, int64_t rank, int64_t def,
                     int64_t &axis);

/// The operand checks of the kernel families, shared by the CPU and CUDA
/// kernels (one message for one mistake on every backend):
/// input 0 (`xName`) and output 0 (`yName`) of one type and element count;
llvm::Error checkUnaryOperands(const KernelContext &ctx, llvm::StringRef xName,
                               llvm::StringRef yName);
/// A and B of one type, C of `resultType` (A's when Undefined), and the
/// strides that broadcast A and B to C;
llvm::Error checkBroadcastOperands(const KernelContext &ctx, DType resultType,
                                   llvm::SmallVectorImpl<int64_t> &sa,
                                   llvm::SmallVectorImpl<int64_t> &sb);
/// Where's bool condition, X, Y and Z, broadcast to Z;
llvm::Error checkWhereOperands(const KernelContext &ctx,
                               llvm::SmallVectorImpl<int64_t> &sc,
                               llvm::SmallVectorImpl<int64_t> &sx,
                               llvm::SmallVectorImpl<int64_t> &sy);
/// dY, the forward value `zName` and dX of one type and shape.
llvm::Error checkActivationGradOperands(const KernelContext &ctx,
                                        llvm::StringRef zName);

/// Product of `shape[begin, end)`.
int64_t product(llvm::ArrayRef<int64_t> shape, size_t begin, size_t end);

/// Row-major strides (in elements) of `shape`.
llvm::SmallVector<int64_t, 6> rowMajorStrides(llvm::ArrayRef<int64_t> shape);

/// Strides (in elements) that read a tensor of shape `in` broadcast to `out`
/// (numpy rules, right-aligned; 0 on broadcast dims). Returns false when `in`
/// does not broadcast to `out`.
bool broadcastStrides(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out,
                      llvm::SmallVectorImpl<int64_t> &strides);

/// Like broadcastStrides, but returns an error naming `name` on failure.
llvm::Error broadcastTo(const KernelContext &ctx, const TensorView &in,
                        llvm::ArrayRef<int64_t> out, llvm::StringRef name,
                        llvm::SmallVectorImpl<int64_t> &strides);

/// Sliding-window attributes of Conv and the pools, one entry per spatial
/// dimension (pads: begins then ends).
struct WindowAttrs {
  llvm::SmallVector<int64_t, 3> kernel, strides, dilations, padBegin, padEnd;
};

/// Reads `strides`, `dilations` and `pads` for `numSpatial` dimensions
/// (defaults 1, 1, 0) and checks them; `kernel` comes from `kernel_shape`,
/// or from `weightKernel` when given (Conv), which `kernel_shape` must match.
llvm::Error readWindowAttrs(const KernelContext &ctx, int64_t numSpatial,
                            llvm::ArrayRef<int64_t> weightKernel,
                            bool useWeightKernel, WindowAttrs &w);

//===----------------------------------------------------------------------===//
// Strided iteration
//===----------------------------------------------------------------------===//

/// Walks an output of shape `shape` row by row (innermost dimension) while
/// tracking the matching offsets in `N` inputs with arbitrary strides.
/// Adjacent dimensions that are contiguous for every operand are merged and
/// size-1 dimensions dropped, so equal shapes become a single row.
///
///   body(int64_t outOffset, const int64_t *inOffsets, int64_t rowLength,
///        const int64_t *inRowStrides)
template <size_t N, typename Body>
void forEachRow(llvm::ArrayRef<int64_t> shape,
                const std::array<llvm::ArrayRef<int64_t>, N> &inStrides,
                Body &&body) {
  int64_t total = numElements(shape);
  if (total == 0)
    return;
  // Collapse from the innermost dimension outwards.
  llvm::SmallVector<int64_t, 6> dims;
  std::array<llvm::SmallVector<int64_t, 6>, N> strides;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1)
      continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = inStrides[k][d] == strides[k].back() * dims.back();
    if (merge) {
      dims.back() *= shape[d];
      continue;
    }
    dims.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k)
      strides[k].push_back(inStrides[k][d]);
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (size_t k = 0; k < N; ++k)
      strides[k].push_back(0);
  }
  // dims[0] is now the innermost dimension.
  int64_t rank = static_cast<int64_t>(dims.size());
  int64_t row = dims[0];
  std::array<int64_t, N> rowStrides;
  for (size_t k = 0; k < N; ++k)
    rowStrides[k] = strides[k][0];
  llvm::SmallVector<int64_t, 6> idx(rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t out = 0; out < total; out += row) {
    body(out, off.data(), row, rowStrides.data());
    for (int64_t d = 1; d < rank; ++d) {
      if (++idx[d] < dims[d]) {
        for (size_t k = 0; k < N; ++k)
          off[k] += strides[k][d];
        break;
      }
      idx[d] = 0;
      for (size_t k = 0; k < N; ++k)
        off[k] -= strides[k][d] * (dims[d] - 1);
    }
  }
}

//===----------------------------------------------------------------------===//
// BLAS
//===----------------------------------------------------------------------===//

/// C = alpha * op(A) * op(B) + beta * C with row-major operands. f32/f64 go
/// to OpenBLAS; integer types use a plain loop with wrap-around arithmetic.
/// beta == 0 ignores C's contents.
#define SHARDC_CPU_DECLARE_GEMM(T)                                             \
  void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,         \
            T alpha, const T *a, int64_t lda, const T *b, int64_t ldb, T beta, \
            T *c, int64_t ldc);
SHARDC_CPU_DECLARE_GEMM(float)
SHARDC_CPU_DECLARE_GEMM(double)
SHARDC_CPU_DECLARE_GEMM(int64_t)
SHARDC_CPU_DECLARE_GEMM(int32_t)
#undef SHARDC_CPU_DECLARE_GEMM

//===----------------------------------------------------------------------===//
// Kernel entry points (one per op type; see docs/ops.md)
//===----------------------------------------------------------------------===//

// Elementwise.cpp
llvm::Error addKernel(const KernelContext &ctx);
llvm::Error subKernel(const KernelContext &ctx);
llvm::Error mulKernel(const KernelContext &ctx);
llvm::Error divKernel(const KernelContext &ctx);
llvm::Error powKernel(const KernelContext &ctx);
llvm::Error whereKernel(const KernelContext &ctx);
llvm::Error sqrtKernel(const KernelContext &ctx);
llvm::Error expKernel(const KernelContext &ctx);
llvm::Error logKernel(const KernelContext &ctx);
llvm::Error erfKernel(const KernelContext &ctx);
llvm::Error tanhKernel(const KernelContext &ctx);
llvm::Error sigmoidKernel(const KernelContext &ctx);
llvm::Error softplusKernel(const KernelContext &ctx);
llvm::Error equalKernel(const KernelContext &ctx);
llvm::Error greaterKernel(const KernelContext &ctx);
llvm::Error lessKernel(const KernelContext &ctx);
llvm::Error greaterOrEqualKernel(const KernelContext &ctx);
llvm::Error lessOrEqualKernel(const KernelContext &ctx);
llvm::Error andKernel(const KernelContext &ctx);
llvm::Error orKernel(const KernelContext &ctx);
llvm::Error xorKernel(const KernelContext &ctx);
llvm::Error notKernel(const KernelContext &ctx);
llvm::Error maxKernel(const KernelContext &ctx);
llvm::Error minKernel(const KernelContext &ctx);
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
llvm::Error negKernel(const KernelContext &ctx);
llvm::Error absKernel(const KernelContext &ctx);
llvm::Error reluKernel(const KernelContext &ctx);
llvm::Error castKernel(const KernelContext &ctx);
llvm::Error dropoutKernel(const KernelContext &ctx);

// DataMovement.cpp
llvm::Error identityKernel(const KernelContext &ctx);
llvm::Error reshapeKernel(const KernelContext &ctx);
llvm::Error transposeKernel(const KernelContext &ctx);
llvm::Error triluKernel(const KernelContext &ctx);
llvm::Error rangeKernel(const KernelContext &ctx);
llvm::Error gatherKernel(const KernelContext &ctx);
llvm::Error gatherElementsKernel(const KernelContext &ctx);
llvm::Error scatterElementsKernel(const KernelContext &ctx);
llvm::Error concatKernel(const KernelContext &ctx);
llvm::Error splitKernel(const KernelContext &ctx);
llvm::Error sliceKernel(const KernelContext &ctx);
llvm::Error expandKernel(const KernelContext &ctx);

/// Data movement checks shared with the CUDA kernels: Transpose's output
/// shape and the input stride of each output dimension; Expand's broadcast
/// strides; a Slice (or SliceGrad) of `part` out of `whole`: the first
/// element and the stride of each dimension in `whole`; Concat's inputs (or
/// Split's outputs) `parts` of `whole` along `axis`.
llvm::Error checkTranspose(const KernelContext &ctx,
                           llvm::SmallVectorImpl<int64_t> &outShape,
                           llvm::SmallVectorImpl<int64_t> &strides);
llvm::Error checkExpand(const KernelContext &ctx,
                        llvm::SmallVectorImpl<int64_t> &strides);
llvm::Error checkSlice(const KernelContext &ctx, const TensorView &whole,
                       llvm::StringRef wholeName, const TensorView &part,
                       llvm::StringRef partName, int64_t &base,
                       llvm::SmallVectorImpl<int64_t> &strides);
llvm::Error checkConcatParts(const KernelContext &ctx, const TensorView &whole,
                             llvm::ArrayRef<TensorView> parts,
                             llvm::StringRef partsName, int64_t &axis);

/// Trilu over the last two dimensions (rows x cols) of each matrix.
struct TriluGeometry {
  int64_t rows = 0, cols = 0, k = 0;
  bool upper = true;
  /// Whether flat element `at` is kept.
  SHARDC_HOST_DEVICE bool keeps(int64_t at) const {
    int64_t i = (at / cols) % rows, j = at % cols;
    return upper ? j - i >= k : j - i <= k;
  }
};
llvm::Error checkTrilu(const KernelContext &ctx, TriluGeometry &g);

/// Range: the operands (checkRange), then, once start, limit and delta are
/// known, the element count they give against the output's
/// (checkRangeCount; instantiated for the RangeTypes).
using RangeTypes = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32>;
llvm::Error checkRange(const KernelContext &ctx);
template <typename T>
llvm::Error checkRangeCount(const KernelContext &ctx, T start, T limit,
                            T delta);

/// Gather (and GatherGrad): data as outer x axisDim x inner, `count`
/// indices (i64 when `wideIndices`, else i32) in [-axisDim, axisDim),
/// checked while the kernels run (indexOutOfRange).
struct GatherGeometry {
  int64_t axis = 0, outer = 0, axisDim = 0, inner = 0, count = 0;
  bool wideIndices = true;
};
llvm::Error checkGather(const KernelContext &ctx, GatherGeometry &g);
llvm::Error checkGatherGrad(const KernelContext &ctx, GatherGeometry &g);
llvm::Error indexOutOfRange(const KernelContext &ctx, int64_t index,
                            const GatherGeometry &g);

/// GatherElements (and its gradient): `index` (GatherGeometry's axis,
/// axisDim, count = the indices' elements, wideIndices) plus the indices'
/// shape and the data's strides, so that element e of the indices (and of
/// the output) reads data at offset(e, its normalized index).
struct GatherElementsGeometry {
  static constexpr int kMaxRank = 8;
  GatherGeometry index;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t dataShape[kMaxRank] = {};
  int64_t dataStride[kMaxRank] = {};
  /// The data offset of indices element `e` whose index is `v`.
  SHARDC_HOST_DEVICE int64_t offset(int64_t e, int64_t v) const {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t c = e % shape[d];
      e /= shape[d];
      off += (d == index.axis ? v : c) * dataStride[d];
    }
    return off;
  }
};
llvm::Error checkGatherElements(const KernelContext &ctx,
                                GatherElementsGeometry &g);
llvm::Error checkGatherElementsGrad(const KernelContext &ctx,
                                    GatherElementsGeometry &g);
/// ScatterElements: the geometry of its indices and updates in the data.
llvm::Error checkScatterElements(const KernelContext &ctx,
                                 GatherElementsGeometry &g);

// runtime/comm/ShardSlice.cpp (the rank-local part of sharding)
llvm::Error shardSliceKernel(const KernelContext &ctx);
/// ShardSlice's operands: this rank's chunk of `bytes` bytes starts at
/// rank * bytes of its inputs laid end to end.
llvm::Error checkShardSlice(const KernelContext &ctx, size_t &bytes);
/// Calls copy(offset in the output, source, bytes) for each piece of an
/// input in this rank's chunk of `bytes` bytes (checkShardSlice's).
void forEachShardPiece(
    const KernelContext &ctx, size_t bytes,
    llvm::function_ref<void(size_t outOffset, const void *src, size_t n)> copy);

// MatMul.cpp
llvm::Error gemmKernel(const KernelContext &ctx);
llvm::Error matMulKernel(const KernelContext &ctx);
llvm::Error permutedMatMulKernel(const KernelContext &ctx);

/// Gemm's checked operands and attributes (shared with the CUDA kernel):
/// Y (m x n) = alpha op(A) op(B) + beta C, C read with `cStrides`.
struct GemmGeometry {
  bool transA = false, transB = false, hasC = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1, beta = 1;
  llvm::SmallVector<int64_t, 6> cStrides;
};
llvm::Error checkGemm(const KernelContext &ctx, GemmGeometry &g);

/// MatMul's checked operands (shared with the CUDA kernel): 1-D operands
/// promoted, batch dimensions broadcast; the strides count matrices.
struct MatMulGeometry {
  int64_t m = 0, n = 0, k = 0, batchCount = 0;
  llvm::SmallVector<int64_t, 6> batch, aStrides, bStrides;
  /// A (B) has one matrix for all batches / one per batch.
  bool aShared = false, bShared = false, aFull = false, bFull = false;

  /// Calls fn(batch index, A's matrix, B's matrix) for every batch.
  template <typename Fn> void forEachBatch(Fn &&fn) const {
    llvm::SmallVector<int64_t, 6> idx(batch.size(), 0);
    for (int64_t bi = 0; bi < batchCount; ++bi) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d < batch.size(); ++d) {
        oa += idx[d] * aStrides[d];
        ob += idx[d] * bStrides[d];
      }
      fn(bi, oa, ob);
      for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
        if (++idx[d] < batch[d])
          break;
        idx[d] = 0;
      }
    }
  }
};
llvm::Error checkMatMul(const KernelContext &ctx, MatMulGeometry &g);

/// PermutedMatMul's product as strided BLAS calls (shared with the CUDA
/// kernel): the matrices' sizes, transpose flags and leading dimensions in
/// the operands' and the result's memory, and each batch dimension's
/// stride in each of them.
struct PermutedMatMulGeometry {
  int64_t m = 0, n = 0, k = 0, batchCount = 0;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  llvm::SmallVector<int64_t, 6> batch, aStrides, bStrides, yStrides;

  /// Calls fn(A's matrix, B's matrix, Y's matrix), element offsets, for
  /// every batch but the innermost dimension's (whose strides are
  /// aStrides.back() etc.) when `inner` is false, for every batch else.
  template <typename Fn> void forEachBatch(bool inner, Fn &&fn) const {
    size_t dims = batch.size() - (inner ? 0 : 1);
    llvm::SmallVector<int64_t, 6> idx(dims, 0);
    while (true) {
      int64_t oa = 0, ob = 0, oy = 0;
      for (size_t d = 0; d < dims; ++d) {
        oa += idx[d] * aStrides[d];
        ob += idx[d] * bStrides[d];
        oy += idx[d] * yStrides[d];
      }
      fn(oa, ob, oy);
      int64_t d = static_cast<int64_t>(dims) - 1;
      for (; d >= 0; --d) {
        if (++idx[d] < batch[d])
          break;
        idx[d] = 0;
      }
      if (d < 0)
        return;
    }
  }
};
llvm::Error checkPermutedMatMul(const KernelContext &ctx,
                                PermutedMatMulGeometry &g);

// Conv.cpp
llvm::Error convKernel(const KernelContext &ctx);

// Pool.cpp
llvm::Error maxPoolKernel(const KernelContext &ctx);
llvm::Error averagePoolKernel(const KernelContext &ctx);
llvm::Error globalAveragePoolKernel(const KernelContext &ctx);

// Normalization.cpp
/// Softmax-like ops along one axis: `outer` x `inner` lines of `n` elements
/// `inner` apart. The checks of Softmax/LogSoftmax and of their gradients
/// (shared with the CUDA kernels).
struct LineGeometry {
  int64_t outer = 0, n = 0, inner = 0;
};
llvm::Error checkSoftmax(const KernelContext &ctx, LineGeometry &g);
llvm::Error checkSoftmaxGrad(const KernelContext &ctx, LineGeometry &g);
llvm::Error softmaxKernel(const KernelContext &ctx);
llvm::Error logSoftmaxKernel(const KernelContext &ctx);
/// LayerNormalization and LayerNormGrad (shared with the CUDA kernels):
/// `rows` x `cols` with cols the normalized shape's elements; Scale's (and
/// B's) strides over the normalized shape (they may broadcast to it); the
/// optional operands present. Statistics are f32 or f64 whatever X is.
struct LayerNormGeometry {
  int64_t rows = 0, cols = 0;
  double epsilon = 1e-5;
  llvm::SmallVector<int64_t, 6> normShape, scaleStrides, biasStrides;
  bool hasBias = false, wantMean = false, wantInvStd = false;
  bool wantDx = false, wantDScale = false, wantDBias = false;
};
llvm::Error checkLayerNorm(const KernelContext &ctx, LayerNormGeometry &g);
llvm::Error checkLayerNormGrad(const KernelContext &ctx, LayerNormGeometry &g);
/// BatchNormalization and BatchNormGrad: X (batch, channels, spatial...).
struct BatchNormGeometry {
  int64_t batch = 0, channels = 0, spatial = 0;
  bool training = false, unbiasedVar = false;
  bool hasRunningMean = false, hasRunningVar = false;
  double epsilon = 1e-5, momentum = 0.9;
  /// A synchronized BatchNorm's global statistics (shardc-sync-batchnorm),
  /// null otherwise: `moments` = [mean, mean of squares] and `gradMoments`
  /// = [mean(dY), mean(dY * (X - mean))], C values each, f64, in the
  /// kernel's memory; `batchCount` the global values per channel.
  const double *moments = nullptr;
  const double *gradMoments = nullptr;
  int64_t batchCount = 0;
  /// Channel c's mean and (population) variance from `moments`.
  double globalMean(int64_t c) const { return moments[c]; }
  double globalVar(int64_t c) const {
    double v = moments[channels + c] - moments[c] * moments[c];
    return v > 0.0 ? v : 0.0;
  }
};
llvm::Error checkBatchNorm(const KernelContext &ctx, BatchNormGeometry &g);
llvm::Error checkBatchNormGrad(const KernelContext &ctx, BatchNormGeometry &g);
/// BatchNormStats and BatchNormGradStats: the (N, C, ...) input's geometry
/// and the divisor `count`.
llvm::Error checkBatchNormStats(const KernelContext &ctx, BatchNormGeometry &g,
                                double &count);
llvm::Error checkBatchNormGradStats(const KernelContext &ctx,
                                    BatchNormGeometry &g, double &count);
llvm::Error layerNormalizationKernel(const KernelContext &ctx);
llvm::Error batchNormalizationKernel(const KernelContext &ctx);

// Reduce.cpp
/// ReduceSum/Mean/Max/Min's checked operands (shared with the CUDA kernels):
/// which axes are reduced, the keepdims shape, and how many elements each
/// output reduces; `noop` when the op copies its input (empty axes with
/// noop_with_empty_axes).
struct ReduceGeometry {
  llvm::SmallVector<bool, 6> reduced;
  llvm::SmallVector<int64_t, 6> keptShape;
  int64_t count = 0;
  bool noop = false;
};
llvm::Error checkReduce(const KernelContext &ctx, ReduceGeometry &g);
/// ArgMax's checked operands: `outer` lines of `len` elements `inner` apart
/// per output; `last`: select_last_index.
struct ArgMaxGeometry {
  int64_t outer = 0, len = 0, inner = 0;
  bool last = false;
};
llvm::Error checkArgMax(const KernelContext &ctx, ArgMaxGeometry &g);
/// TopKIndices: lines of `len` elements `inner` apart, `outer` blocks of
/// them; the k best of each by ops::topKBefore.
struct TopKGeometry {
  int64_t outer = 0, len = 0, inner = 0, k = 0;
  bool largest = true;
};
using TopKTypes = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32>;
llvm::Error checkTopKIndices(const KernelContext &ctx, TopKGeometry &g);
llvm::Error topKIndicesKernel(const KernelContext &ctx);
llvm::Error reduceMeanKernel(const KernelContext &ctx);
llvm::Error reduceSumKernel(const KernelContext &ctx);
llvm::Error reduceMaxKernel(const KernelContext &ctx);
llvm::Error reduceMinKernel(const KernelContext &ctx);
llvm::Error argMaxKernel(const KernelContext &ctx);

// Elementwise.cpp
/// Dropout's checked operands (shared with the CUDA kernel): the input is
/// `outer` rows of `chunk` elements, this rank's slab of a global batch of
/// `world` slabs per row; element i's mask word is drawn for its global
/// index (runtime/Philox.h), so every backend and world size draws the
/// same mask for the same sample.
struct DropoutGeometry {
  double ratio = 0.5;
  uint32_t site = 0;
  int64_t outer = 1, chunk = 0;
  uint64_t world = 1, rank = 0;
  uint64_t threshold = 0;
  bool hasMask = false;
  /// The global index of this rank's element `i` (row-major over outer
  /// rows of chunk elements).
  SHARDC_HOST_DEVICE uint64_t globalIndex(int64_t i) const {
    int64_t o = chunk ? i / chunk : 0;
    return (static_cast<uint64_t>(o) * world + rank) *
               static_cast<uint64_t>(chunk) +
           static_cast<uint64_t>(i - o * chunk);
  }
};
llvm::Error checkDropout(const KernelContext &ctx, DropoutGeometry &g);
/// Pow's operands: Z has X's type; X's and Y's strides broadcast to Z.
llvm::Error checkPowOperands(const KernelContext &ctx,
                             llvm::SmallVectorImpl<int64_t> &sx,
                             llvm::SmallVectorImpl<int64_t> &sy);
/// Cast's operands: as many output elements as input elements.
llvm::Error checkCastOperands(const KernelContext &ctx);
/// Z = X^e for the exponents exported models use most (x^2 in LayerNorm's
/// variance, its gradient's x^1, x^3 in tanh GELU), as plain products:
/// x * x is the exact square rounded once, as a correctly rounded pow; for a
/// float x the double x * x is exact, so x * x * x rounds once to double and
/// then to float, as the double pow and its cast do. Returns false, writing
/// nothing, for other exponents (Pow and FusedElementwise share it).
template <typename T> bool smallPower(const T *x, double e, T *z, int64_t n) {
  if (e == 1.0) {
    if (z != x)
      std::copy(x, x + n, z);
  } else if (e == 2.0) {
    for (int64_t i = 0; i < n; ++i)
      z[i] = x[i] * x[i];
  } else if (e == 3.0 && std::is_same_v<T, float>) {
    for (int64_t i = 0; i < n; ++i) {
      double v = x[i];
      z[i] = static_cast<T>(v * v * v);
    }
  } else {
    return false;
  }
  return true;
}

// Fused.cpp
/// A FusedElementwise op's program (runtime/kernels/FusedOps.h), checked
/// against its operands: every value read exists and comes first, each
/// input broadcasts to the outputs' shape, a Where reads its condition from
/// a bool input and bool inputs only there.
struct FusedProgram {
  struct Instr {
    ops::FusedOpcode op;
    int32_t args[ops::kFusedArgs];
  };
  std::vector<Instr> instrs;
  std::vector<int32_t> results;
  std::vector<ops::BroadcastPattern> inputs;
  int64_t numel = 0;
};
llvm::Error checkFused(const KernelContext &ctx, FusedProgram &p);

// Loss.cpp
/// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss's checked operands
/// (shared with the CUDA kernels): scores (N, C, D...) as `batch` x
/// `classes` x `inner`, the reduction and the optional operands. Targets
/// are checked to be classes while the kernels run (targetOutOfRange).
enum class LossReduction { None, Sum, Mean };
struct LossGeometry {
  int64_t batch = 0, classes = 0, inner = 0;
  LossReduction reduction = LossReduction::Mean;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  bool hasWeights = false;
  bool wantLogProb = false;
  bool wideTargets = true; // i64 targets; i32 otherwise.
};
llvm::Error checkLoss(const KernelContext &ctx, bool softmax, LossGeometry &g);
llvm::Error checkLossGrad(const KernelContext &ctx, bool softmax,
                          LossGeometry &g);
/// SoftmaxCrossEntropyLossWithGrad's: checkLoss's, the reduction sum or
/// mean, and a scores-shaped gradient output.
llvm::Error checkLossWithGrad(const KernelContext &ctx, LossGeometry &g);
llvm::Error targetOutOfRange(const KernelContext &ctx, int64_t target,
                             int64_t position, int64_t classes);
llvm::Error softmaxCrossEntropyLossKernel(const KernelContext &ctx);
llvm::Error negativeLogLikelihoodLossKernel(const KernelContext &ctx);

//===----------------------------------------------------------------------===//
// Training kernels (docs/ops.md, "Training ops")
//===----------------------------------------------------------------------===//

// Elementwise.cpp
llvm::Error reluGradKernel(const KernelContext &ctx);
llvm::Error sigmoidGradKernel(const KernelContext &ctx);
llvm::Error tanhGradKernel(const KernelContext &ctx);

// Normalization.cpp
llvm::Error softmaxGradKernel(const KernelContext &ctx);
llvm::Error logSoftmaxGradKernel(const KernelContext &ctx);
llvm::Error layerNormGradKernel(const KernelContext &ctx);
llvm::Error batchNormGradKernel(const KernelContext &ctx);
llvm::Error batchNormStatsKernel(const KernelContext &ctx);
llvm::Error batchNormGradStatsKernel(const KernelContext &ctx);

// Conv.cpp
llvm::Error convGradInputKernel(const KernelContext &ctx);
llvm::Error convGradWeightKernel(const KernelContext &ctx);

// Pool.cpp
llvm::Error maxPoolGradKernel(const KernelContext &ctx);
llvm::Error averagePoolGradKernel(const KernelContext &ctx);

// Loss.cpp
llvm::Error softmaxCrossEntropyLossGradKernel(const KernelContext &ctx);
llvm::Error negativeLogLikelihoodLossGradKernel(const KernelContext &ctx);
llvm::Error softmaxCrossEntropyLossWithGradKernel(const KernelContext &ctx);

// DataMovement.cpp
llvm::Error gatherGradKernel(const KernelContext &ctx);
llvm::Error gatherElementsGradKernel(const KernelContext &ctx);
llvm::Error sliceGradKernel(const KernelContext &ctx);

// Optimizer.cpp
llvm::Error sgdUpdateKernel(const KernelContext &ctx);
/// The operand checks and attributes of SGDUpdate and AdamUpdate, shared
/// with the CUDA kernels. `hasBuffer`: a momentum buffer is passed.
llvm::Error checkSgdOperands(const KernelContext &ctx, bool &hasBuffer);
llvm::Error checkAdamOperands(const KernelContext &ctx);
/// Their hyper-parameters and learning-rate schedule, checked.
llvm::Error sgdHyper(const KernelContext &ctx, ops::SgdHyper &h);
llvm::Error adamHyper(const KernelContext &ctx, ops::AdamHyper &h);
llvm::Error adamUpdateKernel(const KernelContext &ctx);
llvm::Error incrementKernel(const KernelContext &ctx);
/// Gradient clipping: PartialNorm and ClipCoefficient, and their operand
/// and attribute checks (shared with the CUDA kernels); `l2` is norm_type.
llvm::Error partialNormKernel(const KernelContext &ctx);
llvm::Error clipCoefficientKernel(const KernelContext &ctx);
llvm::Error checkPartialNormOperands(const KernelContext &ctx, bool &l2);
llvm::Error checkClipCoefficientOperands(const KernelContext &ctx, bool &l2,
                                         double &maxNorm);
/// Loss scaling: LossScale, its operand and attribute checks, and the check
/// of an update's optional skip flag at input `i` (a bool scalar); shared
/// with the CUDA kernels.
llvm::Error lossScaleKernel(const KernelContext &ctx);
llvm::Error fusedElementwiseKernel(const KernelContext &ctx);
llvm::Error checkLossScaleOperands(const KernelContext &ctx,
                                   ops::LossScaling &ls);
llvm::Error checkSkipFlag(const KernelContext &ctx, size_t i);

} // namespace shardc::rt::cpu

#endif // SHARDC_RUNTIME_CPU_KERNELUTIL_H
