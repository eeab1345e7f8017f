//===- MatMul.cu - Gemm and MatMul on CUDA --------------------------------===//
//
// f32 and f64 products go to cuBLAS (the stream's handle, default math: no
// TF32); bfloat16 and float16 products to cuBLAS's tensor cores with float32
// accumulation and scalars (CUBLAS_COMPUTE_32F; the handle disallows
// reduced-precision reductions), rounded once to the element type: what the
// CPU backend computes on float32 copies, up to the order of the sums.
// Integer products, which only shape arithmetic produces, use a plain
// kernel with wrap-around arithmetic. Shapes are checked as the CPU kernels
// check them (runtime/cpu/MatMul.cpp).
//
// cuBLAS is column-major: a row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T, which reads the same memory.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"

#include <type_traits>

namespace shardc::rt::cuda {

namespace {

template <typename T>
__global__ void integerGemmElements(bool transA, bool transB, int64_t m,
                                    int64_t n, int64_t k, T alpha, const T *a,
                                    int64_t lda, const T *b, int64_t ldb,
                                    T beta, T *c, int64_t ldc) {
  using U = std::make_unsigned_t<T>;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < m * n;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t i = e / n, j = e % n;
    U acc = beta == 0 ? U(0) : U(beta) * U(c[i * ldc + j]);
    for (int64_t p = 0; p < k; ++p) {
      U av = U(transA ? a[p * lda + i] : a[i * lda + p]);
      U bv = U(transB ? b[j * ldb + p] : b[p * ldb + j]);
      acc += U(alpha) * av * bv;
    }
    c[i * ldc + j] = static_cast<T>(acc);
  }
}

/// C = beta C (in S, the product's scalar type), 0 where beta is 0.
template <typename T, typename S>
__global__ void scaleElements(T *c, int64_t n, S beta) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    c[i] = beta == S(0) ? T(S(0)) : T(beta * S(c[i]));
}

/// Y = broadcast(C), before the product accumulates into it.
template <typename T>
__global__ void broadcastCopy(const T *src, T *dst, int64_t n, Indexer<1> ix) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    int64_t off[1];
    ix.offsets(i, off);
    dst[i] = src[off[0]];
  }
}

} // namespace

template <typename T, typename S>
llvm::Error gemm(const KernelContext &ctx, bool transA, bool transB, int64_t m,
                 int64_t n, int64_t k, S alpha, const T *a, int64_t lda,
                 int64_t strideA, const T *b, int64_t ldb, int64_t strideB,
                 S beta, T *c, int64_t ldc, int64_t strideC, int64_t count) {
  if (m == 0 || n == 0 || count == 0)
    return llvm::Error::success();
  cudaStream_t s = cudaStreamOf(ctx);
  if (k == 0) {
    // No product: C = beta C for each matrix (contiguous here).
    scaleElements<<<blocksFor(m * n * count), kBlock, 0, s>>>(c, m * n * count,
                                                              beta);
    return checkLaunch(ctx);
  }
  if constexpr (std::is_integral_v<T>) {
    for (int64_t i = 0; i < count; ++i)
      integerGemmElements<<<blocksFor(m * n), kBlock, 0, s>>>(
          transA, transB, m, n, k, alpha, a + i * strideA, lda, b + i * strideB,
          ldb, beta, c + i * strideC, ldc);
    return checkLaunch(ctx);
  } else {
    constexpr int64_t kMax = 0x7fffffff;
    if (m > kMax || n > kMax || k > kMax || lda > kMax || ldb > kMax ||
        ldc > kMax || count > kMax)
      return ctx.error("a matrix dimension exceeds cuBLAS's 2^31 - 1");
    llvm::Expected<cublasHandle_t> h = streamOf(ctx).blas();
    if (!h)
      return ctx.error(llvm::toString(h.takeError()));
    // Column-major C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m).
    cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t status;
    int ni = int(n), mi = int(m), ki = int(k);
    int ldbi = int(std::max<int64_t>(ldb, 1)),
        ldai = int(std::max<int64_t>(lda, 1)),
        ldci = int(std::max<int64_t>(ldc, 1));
    if constexpr (std::is_same_v<T, float>) {
      status = cublasSgemmStridedBatched(*h, opB, opA, ni, mi, ki, &alpha, b,
                                         ldbi, strideB, a, ldai, strideA, &beta,
                                         c, ldci, strideC, int(count));
    } else if constexpr (std::is_same_v<T, double>) {
      status = cublasDgemmStridedBatched(*h, opB, opA, ni, mi, ki, &alpha, b,
                                         ldbi, strideB, a, ldai, strideA, &beta,
                                         c, ldci, strideC, int(count));
    } else {
      static_assert(std::is_same_v<S, float>,
                    "16-bit products take float32 scalars");
      cudaDataType_t type =
          std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;
      status = cublasGemmStridedBatchedEx(
          *h, opB, opA, ni, mi, ki, &alpha, b, type, ldbi, strideB, a, type,
          ldai, strideA, &beta, c, type, ldci, strideC, int(count),
          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    if (llvm::Error err = checkBlas(status, "cublas<T>gemmStridedBatched"))
      return ctx.error(llvm::toString(std::move(err)));
    return llvm::Error::success();
  }
}

template llvm::Error gemm<float>(const KernelContext &, bool, bool, int64_t,
                                 int64_t, int64_t, float, const float *,
                                 int64_t, int64_t, const float *, int64_t,
                                 int64_t, float, float *, int64_t, int64_t,
                                 int64_t);
template llvm::Error gemm<double>(const KernelContext &, bool, bool, int64_t,
                                  int64_t, int64_t, double, const double *,
                                  int64_t, int64_t, const double *, int64_t,
                                  int64_t, double, double *, int64_t, int64_t,
                                  int64_t);
template llvm::Error gemm<__half>(const KernelContext &, bool, bool, int64_t,
                                  int64_t, int64_t, float, const __half *,
                                  int64_t, int64_t, const __half *, int64_t,
                                  int64_t, float, __half *, int64_t, int64_t,
                                  int64_t);
template llvm::Error
gemm<__nv_bfloat16>(const KernelContext &, bool, bool, int64_t, int64_t,
                    int64_t, float, const __nv_bfloat16 *, int64_t, int64_t,
                    const __nv_bfloat16 *, int64_t, int64_t, float,
                    __nv_bfloat16 *, int64_t, int64_t, int64_t);

namespace {

using GemmTypes = cpu::DTypeList<DType::F32, DType::F64, DType::BF16,
                                 DType::F16, DType::I64, DType::I32>;

/// The element and scalar types of a dispatched DType's product.
template <typename Tag>
using ElementOf = typename CudaElement<Tag::dtype>::type;
template <typename Tag>
using ScalarOf = typename GemmScalar<ElementOf<Tag>>::type;

} // namespace

llvm::Error gemmKernel(const KernelContext &ctx) {
  cpu::GemmGeometry g;
  SHARDC_CPU_TRY(cpu::checkGemm(ctx, g));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  Indexer<1> ix;
  if (g.hasC)
    SHARDC_CPU_TRY(makeIndexer<1>(ctx, y.shape, {g.cStrides}, ix));
  return cpu::dispatchIn(
      GemmTypes{}, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
        using T = ElementOf<decltype(tag)>;
        using S = ScalarOf<decltype(tag)>;
        T *out = y.as<T>();
        S betaS = static_cast<S>(g.beta);
        if (g.hasC && betaS != S(0)) {
          if (y.numel() > 0) {
            broadcastCopy<<<blocksFor(y.numel()), kBlock, 0,
                            cudaStreamOf(ctx)>>>(ctx.inputs[2].as<T>(), out,
                                                 y.numel(), ix);
            SHARDC_CPU_TRY(checkLaunch(ctx));
          }
        } else {
          betaS = S(0);
        }
        return gemm<T>(ctx, g.transA, g.transB, g.m, g.n, g.k,
                       static_cast<S>(g.alpha), a.as<T>(), a.shape[1], 0,
                       b.as<T>(), b.shape[1], 0, betaS, out, g.n, 0, 1);
      });
}

llvm::Error matMulKernel(const KernelContext &ctx) {
  cpu::MatMulGeometry g;
  SHARDC_CPU_TRY(cpu::checkMatMul(ctx, g));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  int64_t m = g.m, n = g.n, k = g.k;
  return cpu::dispatchIn(
      GemmTypes{}, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
        using T = ElementOf<decltype(tag)>;
        using S = ScalarOf<decltype(tag)>;
        const T *pa = a.as<T>();
        const T *pb = b.as<T>();
        T *py = y.as<T>();
        // One B for every batch and A not broadcast: fold the batch into M.
        if (g.bShared && g.aFull)
          return gemm<T>(ctx, false, false, g.batchCount * m, n, k, S(1), pa, k,
                         0, pb, n, 0, S(0), py, n, 0, 1);
        // Batches that step uniformly: one strided-batched call.
        if ((g.aFull || g.aShared) && (g.bFull || g.bShared))
          return gemm<T>(ctx, false, false, m, n, k, S(1), pa, k,
                         g.aShared ? 0 : m * k, pb, n, g.bShared ? 0 : k * n,
                         S(0), py, n, m * n, g.batchCount);
        // General broadcasting: one product per batch.
        llvm::Error err = llvm::Error::success();
        g.forEachBatch([&](int64_t bi, int64_t oa, int64_t ob) {
          if (!err) // Error's operator= is [[nodiscard]] to nvcc.
            static_cast<void>(err = gemm<T>(ctx, false, false, m, n, k, S(1),
                                            pa + oa * m * k, k, 0,
                                            pb + ob * k * n, n, 0, S(0),
                                            py + bi * m * n, n, 0, 1));
        });
        return err;
      });
}

/// The innermost batch dimension in one strided-batched call, every index
/// of the others one call each.
llvm::Error permutedMatMulKernel(const KernelContext &ctx) {
  cpu::PermutedMatMulGeometry g;
  SHARDC_CPU_TRY(cpu::checkPermutedMatMul(ctx, g));
  if (g.k == 0 && g.batchCount > 0 && g.m > 0 && g.n > 0)
    return ctx.error("has an empty inner dimension, which the strided "
                     "result cannot take on CUDA; shardc never emits it");
  const TensorView &a = ctx.inputs[0];
  using Types = cpu::DTypeList<DType::F32, DType::F64, DType::BF16, DType::F16>;
  return cpu::dispatchIn(
      Types{}, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
        using T = ElementOf<decltype(tag)>;
        using S = ScalarOf<decltype(tag)>;
        const T *pa = a.as<T>();
        const T *pb = ctx.inputs[1].as<T>();
        T *py = ctx.outputs[0].as<T>();
        if (g.batchCount == 0)
          return llvm::Error::success();
        llvm::Error err = llvm::Error::success();
        g.forEachBatch(
            /*inner=*/false, [&](int64_t oa, int64_t ob, int64_t oy) {
              if (!err) // Error's operator= is [[nodiscard]] to nvcc.
                static_cast<void>(
                    err = gemm<T>(ctx, g.transA, g.transB, g.m, g.n, g.k, S(1),
                                  pa + oa, g.lda, g.aStrides.back(), pb + ob,
                                  g.ldb, g.bStrides.back(), S(0), py + oy,
                                  g.ldc, g.yStrides.back(), g.batch.back()));
            });
        return err;
      });
}

} // namespace shardc::rt::cuda
