//===- MatMul.cpp - Gemm and MatMul kernels -------------------------------===//
//
// f32 products whose three sizes are all at least kOneDnnMinSize go to
// oneDNN (dnnl_sgemm), smaller ones and f64 to OpenBLAS (cblas_sgemm /
// cblas_dgemm); integer products use a plain i-k-j loop.
//
// Why two libraries. On the step-time GPT's products (bench/step_time.py;
// 512 x 256 x 1024 to 512 x 256 x 8192, single thread, AMD EPYC with
// AVX-512) oneDNN's kernels ran 93-111 GFLOP/s where OpenBLAS's ran 86-102,
// 4-13 % faster on most shapes and within 8 % slower on a few
// (bench/gemm_libraries.c); a training step of that GPT on 2 ranks took
// 196-214 ms with every product on oneDNN (bench/sgemm_on_onednn.c) against
// 211-224 ms on OpenBLAS (five runs each, alternating). Below 128
// in any size oneDNN's fixed cost per call shows: 64 x 64 x 64 ran 97
// GFLOP/s against OpenBLAS's 112, 16 x 16 x 16 three times slower, a
// 64 x 10 x 384 classifier head 2.4 times slower. Both pick their kernels
// for the CPU at run time, and one shape always goes to one library, so a
// product's bits depend on its shape and the CPU, never on the rank or the
// ZeRO stage.
//
// Threads: setCpuKernelThreads sets OpenBLAS's (process-wide) and oneDNN's,
// which are GNU OpenMP's and belong to the calling thread: each thread that
// multiplies applies the setting before its first oneDNN product.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"
#include "runtime/cpu/KernelUtil.h"

#include <cblas.h>
#include <dnnl.h>

#include <algorithm>
#include <atomic>

// GNU OpenMP's (libgomp's) C API, which Debian's oneDNN runs on: declared
// here so that compiling this file needs no OpenMP flags (the fuzz
// sub-build's clang has no omp.h of libgomp's).
extern "C" void omp_set_num_threads(int threads);

namespace shardc::rt::cpu {

namespace {

/// Handles the degenerate sizes BLAS rejects or that need no product.
/// Returns true when nothing is left to compute.
template <typename T>
bool gemmDegenerate(int64_t m, int64_t n, int64_t k, T beta, T *c,
                    int64_t ldc) {
  if (m == 0 || n == 0)
    return true;
  if (k != 0)
    return false;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  return true;
}

/// The smallest m, n and k of a product that goes to oneDNN (see the top
/// of the file).
constexpr int64_t kOneDnnMinSize = 128;

/// setCpuKernelThreads's value; 0 until it is called.
std::atomic<int> kernelThreads{0};

/// Applies kernelThreads to this thread's OpenMP setting, which oneDNN reads
/// (once per thread and setting).
void applyOneDnnThreads() {
  static thread_local int applied = 0;
  int want = kernelThreads.load(std::memory_order_relaxed);
  if (want > 0 && want != applied) {
    omp_set_num_threads(want);
    applied = want;
  }
}

} // namespace

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
          float beta, float *c, int64_t ldc) {
  if (gemmDegenerate(m, n, k, beta, c, ldc))
    return;
  if (std::min({m, n, k}) >= kOneDnnMinSize) {
    applyOneDnnThreads();
    // oneDNN checks only its arguments, which are valid here; if it refused
    // anyway, OpenBLAS computes the product.
    if (dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, alpha, a,
                   std::max<int64_t>(lda, 1), b, std::max<int64_t>(ldb, 1),
                   beta, c, std::max<int64_t>(ldc, 1)) == dnnl_success)
      return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(std::max<int64_t>(lda, 1)), b,
              static_cast<blasint>(std::max<int64_t>(ldb, 1)), beta, c,
              static_cast<blasint>(std::max<int64_t>(ldc, 1)));
}

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          double alpha, const double *a, int64_t lda, const double *b,
          int64_t ldb, double beta, double *c, int64_t ldc) {
  if (gemmDegenerate(m, n, k, beta, c, ldc))
    return;
  cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(std::max<int64_t>(lda, 1)), b,
              static_cast<blasint>(std::max<int64_t>(ldb, 1)), beta, c,
              static_cast<blasint>(std::max<int64_t>(ldc, 1)));
}

/// Integer GEMM with wrap-around arithmetic (computed in unsigned).
template <typename T>
static void integerGemm(bool transA, bool transB, int64_t m, int64_t n,
                        int64_t k, T alpha, const T *a, int64_t lda, const T *b,
                        int64_t ldb, T beta, T *c, int64_t ldc) {
  using U = std::make_unsigned_t<T>;
  for (int64_t i = 0; i < m; ++i) {
    U *row = reinterpret_cast<U *>(c + i * ldc);
    for (int64_t j = 0; j < n; ++j)
      row[j] = beta == 0 ? 0 : U(beta) * row[j];
    for (int64_t p = 0; p < k; ++p) {
      U av = U(alpha) * U(transA ? a[p * lda + i] : a[i * lda + p]);
      if (av == 0)
        continue;
      if (!transB) {
        const T *brow = b + p * ldb;
        for (int64_t j = 0; j < n; ++j)
          row[j] += av * U(brow[j]);
      } else {
        for (int64_t j = 0; j < n; ++j)
          row[j] += av * U(b[j * ldb + p]);
      }
    }
  }
}

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          int64_t alpha, const int64_t *a, int64_t lda, const int64_t *b,
          int64_t ldb, int64_t beta, int64_t *c, int64_t ldc) {
  integerGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          int32_t alpha, const int32_t *a, int64_t lda, const int32_t *b,
          int64_t ldb, int32_t beta, int32_t *c, int64_t ldc) {
  integerGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

llvm::Error checkGemm(const KernelContext &ctx, GemmGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "A"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "B"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  g.hasC = ctx.hasInput(2);
  g.transA = ctx.attrs.getInt("transA", 0) != 0;
  g.transB = ctx.attrs.getInt("transB", 0) != 0;
  g.alpha = ctx.attrs.getFloat("alpha", 1.0);
  g.beta = ctx.attrs.getFloat("beta", 1.0);
  if (a.rank() != 2 || b.rank() != 2 || y.rank() != 2)
    return ctx.error("A " + shapeToString(a.shape) + ", B " +
                     shapeToString(b.shape) + " and Y " +
                     shapeToString(y.shape) + " must be matrices");
  g.m = g.transA ? a.shape[1] : a.shape[0];
  g.k = g.transA ? a.shape[0] : a.shape[1];
  int64_t kb = g.transB ? b.shape[1] : b.shape[0];
  g.n = g.transB ? b.shape[0] : b.shape[1];
  if (g.k != kb)
    return ctx.error("inner dimensions of A " + shapeToString(a.shape) +
                     " and B " + shapeToString(b.shape) +
                     " differ (transA=" + llvm::Twine(g.transA) +
                     ", transB=" + llvm::Twine(g.transB) + ")");
  SHARDC_CPU_TRY(requireShape(ctx, y, {g.m, g.n}, "Y"));
  SHARDC_CPU_TRY(requireType(ctx, b, a.dtype, "B"));
  SHARDC_CPU_TRY(requireType(ctx, y, a.dtype, "Y"));
  g.cStrides.clear();
  if (g.hasC) {
    SHARDC_CPU_TRY(requireInput(ctx, 2, "C"));
    SHARDC_CPU_TRY(requireType(ctx, ctx.inputs[2], a.dtype, "C"));
    SHARDC_CPU_TRY(broadcastTo(ctx, ctx.inputs[2], y.shape, "C", g.cStrides));
  }
  return llvm::Error::success();
}

llvm::Error gemmKernel(const KernelContext &ctx) {
  GemmGeometry g;
  SHARDC_CPU_TRY(checkGemm(ctx, g));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  using Types = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32>;
  return dispatchIn(Types{}, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    T *out = y.as<T>();
    T betaT = static_cast<T>(g.beta);
    if (g.hasC && betaT != T(0)) {
      const T *c = ctx.inputs[2].as<T>();
      std::array<llvm::ArrayRef<int64_t>, 1> strides = {g.cStrides};
      forEachRow<1>(
          y.shape, strides,
          [&](int64_t o, const int64_t *in, int64_t len, const int64_t *s) {
            // A bias row (stride 1) or a broadcast value (stride 0) are
            // what a linear layer's C is.
            if (s[0] == 1)
              std::copy(c + in[0], c + in[0] + len, out + o);
            else if (s[0] == 0)
              std::fill(out + o, out + o + len, c[in[0]]);
            else
              for (int64_t i = 0; i < len; ++i)
                out[o + i] = c[in[0] + i * s[0]];
          });
    } else {
      betaT = T(0);
    }
    gemm(g.transA, g.transB, g.m, g.n, g.k, static_cast<T>(g.alpha), a.as<T>(),
         a.shape[1], b.as<T>(), b.shape[1], betaT, out, g.n);
    return llvm::Error::success();
  });
}

llvm::Error checkMatMul(const KernelContext &ctx, MatMulGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "A"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "B"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  if (a.rank() < 1 || b.rank() < 1)
    return ctx.error("operands must have rank >= 1, got A " +
                     shapeToString(a.shape) + " and B " +
                     shapeToString(b.shape));
  SHARDC_CPU_TRY(requireType(ctx, b, a.dtype, "B"));
  SHARDC_CPU_TRY(requireType(ctx, y, a.dtype, "Y"));

  // Promote 1-D operands to matrices.
  llvm::SmallVector<int64_t, 6> aShape(a.shape.begin(), a.shape.end());
  llvm::SmallVector<int64_t, 6> bShape(b.shape.begin(), b.shape.end());
  bool aVec = aShape.size() == 1, bVec = bShape.size() == 1;
  if (aVec)
    aShape.insert(aShape.begin(), 1);
  if (bVec)
    bShape.push_back(1);
  g.m = aShape[aShape.size() - 2];
  g.k = aShape.back();
  g.n = bShape.back();
  if (bShape[bShape.size() - 2] != g.k)
    return ctx.error("inner dimensions of A " + shapeToString(a.shape) +
                     " and B " + shapeToString(b.shape) + " differ");

  // Broadcast batch dimensions.
  llvm::ArrayRef<int64_t> aBatch = llvm::ArrayRef<int64_t>(aShape).drop_back(2);
  llvm::ArrayRef<int64_t> bBatch = llvm::ArrayRef<int64_t>(bShape).drop_back(2);
  size_t batchRank = std::max(aBatch.size(), bBatch.size());
  g.batch.assign(batchRank, 1);
  for (size_t i = 0; i < batchRank; ++i) {
    int64_t da = i + aBatch.size() >= batchRank
                     ? aBatch[i + aBatch.size() - batchRank]
                     : 1;
    int64_t db = i + bBatch.size() >= batchRank
                     ? bBatch[i + bBatch.size() - batchRank]
                     : 1;
    if (da != db && da != 1 && db != 1)
      return ctx.error("batch dimensions of A " + shapeToString(a.shape) +
                       " and B " + shapeToString(b.shape) +
                       " do not broadcast");
    g.batch[i] = da == 1 ? db : da;
  }
  llvm::SmallVector<int64_t, 6> expected(g.batch.begin(), g.batch.end());
  if (!aVec)
    expected.push_back(g.m);
  if (!bVec)
    expected.push_back(g.n);
  SHARDC_CPU_TRY(requireShape(ctx, y, expected, "Y"));

  broadcastStrides(aBatch, g.batch, g.aStrides);
  broadcastStrides(bBatch, g.batch, g.bStrides);
  g.batchCount = numElements(g.batch);
  auto allZero = [](llvm::ArrayRef<int64_t> v) {
    return llvm::all_of(v, [](int64_t s) { return s == 0; });
  };
  g.aShared = allZero(g.aStrides);
  g.bShared = allZero(g.bStrides);
  g.aFull = numElements(aBatch) == g.batchCount;
  g.bFull = numElements(bBatch) == g.batchCount;
  return llvm::Error::success();
}

llvm::Error matMulKernel(const KernelContext &ctx) {
  MatMulGeometry g;
  SHARDC_CPU_TRY(checkMatMul(ctx, g));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  int64_t m = g.m, n = g.n, k = g.k;
  using Types = DTypeList<DType::F32, DType::F64, DType::I64, DType::I32>;
  return dispatchIn(Types{}, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *pa = a.as<T>();
    const T *pb = b.as<T>();
    T *py = y.as<T>();
    if (g.bShared && g.aFull) {
      // One B for every batch and A not broadcast: fold the batch into M.
      gemm(false, false, g.batchCount * m, n, k, T(1), pa, k, pb, n, T(0), py,
           n);
      return llvm::Error::success();
    }
    g.forEachBatch([&](int64_t bi, int64_t oa, int64_t ob) {
      gemm(false, false, m, n, k, T(1), pa + oa * m * k, k, pb + ob * k * n, n,
           T(0), py + bi * m * n, n);
    });
    return llvm::Error::success();
  });
}

/// Reads a permutation attribute of `rank` entries.
static llvm::Error readPermutation(const KernelContext &ctx,
                                   llvm::StringRef name, size_t rank,
                                   llvm::SmallVectorImpl<int64_t> &perm) {
  llvm::ArrayRef<int64_t> p = ctx.attrs.getInts(name);
  llvm::SmallVector<bool, 6> seen(rank, false);
  bool ok = p.size() == rank;
  for (int64_t d : p) {
    ok = ok && d >= 0 && d < static_cast<int64_t>(rank) && !seen[d];
    if (ok)
      seen[d] = true;
  }
  if (!ok)
    return ctx.error("attribute '" + name + "' must be a permutation of the " +
                     llvm::Twine(rank) + " dimensions");
  perm.assign(p.begin(), p.end());
  return llvm::Error::success();
}

llvm::Error checkPermutedMatMul(const KernelContext &ctx,
                                PermutedMatMulGeometry &g) {
  SHARDC_CPU_TRY(requireInput(ctx, 0, "A"));
  SHARDC_CPU_TRY(requireInput(ctx, 1, "B"));
  SHARDC_CPU_TRY(requireOutput(ctx, 0, "Y"));
  const TensorView &a = ctx.inputs[0];
  const TensorView &b = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  size_t rank = a.rank();
  if (rank < 3 || size_t(b.rank()) != rank || size_t(y.rank()) != rank)
    return ctx.error("operands and result must have one rank, at least 3; "
                     "got A " +
                     shapeToString(a.shape) + ", B " + shapeToString(b.shape) +
                     " and Y " + shapeToString(y.shape));
  SHARDC_CPU_TRY(requireType(ctx, b, a.dtype, "B"));
  SHARDC_CPU_TRY(requireType(ctx, y, a.dtype, "Y"));
  llvm::SmallVector<int64_t, 6> ap, bp, yp;
  SHARDC_CPU_TRY(readPermutation(ctx, "a_perm", rank, ap));
  SHARDC_CPU_TRY(readPermutation(ctx, "b_perm", rank, bp));
  SHARDC_CPU_TRY(readPermutation(ctx, "output_perm", rank, yp));
  int64_t last = static_cast<int64_t>(rank) - 1;
  if ((ap[last] != last && ap[last - 1] != last) ||
      (bp[last] != last && bp[last - 1] != last) || yp[last] != last)
    return ctx.error("a permutation leaves no matrix dimension innermost "
                     "(a_perm and b_perm must end with rank - 1 among their "
                     "last two entries, output_perm with rank - 1)");
  // The permuted (logical) shapes and strides.
  llvm::SmallVector<int64_t, 6> as = rowMajorStrides(a.shape),
                                bs = rowMajorStrides(b.shape),
                                ys = rowMajorStrides(y.shape);
  llvm::SmallVector<int64_t, 6> aShape, aStr, bShape, bStr, yShape(rank, 0),
      yStr(rank, 0);
  for (size_t i = 0; i < rank; ++i) {
    aShape.push_back(a.shape[ap[i]]);
    aStr.push_back(as[ap[i]]);
    bShape.push_back(b.shape[bp[i]]);
    bStr.push_back(bs[bp[i]]);
    // Result dimension j is the product's dimension yp[j].
    yShape[yp[i]] = y.shape[i];
    yStr[yp[i]] = ys[i];
  }
  g.m = aShape[last - 1];
  g.k = aShape[last];
  g.n = bShape[last];
  if (bShape[last - 1] != g.k)
    return ctx.error("inner dimensions of the permuted A " +
                     shapeToString(aShape) + " and B " + shapeToString(bShape) +
                     " differ");
  llvm::SmallVector<int64_t, 6> expected(aShape.begin(), aShape.end() - 1);
  expected.push_back(g.n);
  if (llvm::ArrayRef<int64_t>(aShape).drop_back(2) !=
          llvm::ArrayRef<int64_t>(bShape).drop_back(2) ||
      yShape != expected)
    return ctx.error("permuted shapes A " + shapeToString(aShape) + ", B " +
                     shapeToString(bShape) + " and Y " + shapeToString(yShape) +
                     " are not a batched product with equal batches");
  g.transA = ap[last] != last;
  g.lda = g.transA ? aStr[last] : aStr[last - 1];
  g.transB = bp[last] != last;
  g.ldb = g.transB ? bStr[last] : bStr[last - 1];
  g.ldc = yStr[last - 1];
  g.batch.assign(aShape.begin(), aShape.end() - 2);
  g.aStrides.assign(aStr.begin(), aStr.end() - 2);
  g.bStrides.assign(bStr.begin(), bStr.end() - 2);
  g.yStrides.assign(yStr.begin(), yStr.end() - 2);
  g.batchCount = numElements(g.batch);
  return llvm::Error::success();
}

llvm::Error permutedMatMulKernel(const KernelContext &ctx) {
  PermutedMatMulGeometry g;
  SHARDC_CPU_TRY(checkPermutedMatMul(ctx, g));
  const TensorView &a = ctx.inputs[0];
  using Types = DTypeList<DType::F32, DType::F64>;
  return dispatchIn(Types{}, ctx, a.dtype, "A", [&](auto tag) -> llvm::Error {
    using T = typename decltype(tag)::type;
    const T *pa = a.as<T>();
    const T *pb = ctx.inputs[1].as<T>();
    T *py = ctx.outputs[0].as<T>();
    if (g.batchCount == 0)
      return llvm::Error::success();
    g.forEachBatch(/*inner=*/true, [&](int64_t oa, int64_t ob, int64_t oy) {
      gemm(g.transA, g.transB, g.m, g.n, g.k, T(1), pa + oa, g.lda, pb + ob,
           g.ldb, T(0), py + oy, g.ldc);
    });
    return llvm::Error::success();
  });
}

} // namespace shardc::rt::cpu

namespace shardc::rt {

void setCpuKernelThreads(int threads) {
  threads = std::max(threads, 1);
  cpu::kernelThreads.store(threads, std::memory_order_relaxed);
  openblas_set_num_threads(threads);
}

} // namespace shardc::rt
