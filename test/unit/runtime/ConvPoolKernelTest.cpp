//===- ConvPoolKernelTest.cpp - CPU kernels: Gemm, MatMul, Conv, pools ----===//
//
// BLAS-backed kernels are checked against direct loops written here from
// the ONNX definitions; pools also against ONNX's documented examples.
//
//===----------------------------------------------------------------------===//
#include "test/unit/runtime/KernelTestUtil.h"
#include <cmath>
#include <limits>
#include <string>

using namespace shardc::rt;
using namespace shardc::rt::test;

namespace {

/// Row-major flat index of `idx` in `shape`.
int64_t flatIndex(const std::vector<int64_t> &shape,
                  const std::vector<int64_t> &idx) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    f = f * shape[d] + idx[d];
  return f;
}

/// Advances a row-major multi-index; false after the last one.
bool next(std::vector<int64_t> &idx, const std::vector<int64_t> &shape) {
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (++idx[d] < shape[d])
      return true;
    idx[d] = 0;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Gemm and MatMul
//===----------------------------------------------------------------------===//

/// Gemm of m x k by k x n with every pair of transpose flags, alpha, beta
/// and a C broadcast over the rows, against a loop in double.
void checkGemm(int64_t m, int64_t k, int64_t n, double tolerance) {
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE("transA=" + std::to_string(ta) +
                   " transB=" + std::to_string(tb));
      Buf a = randomF32(ta ? std::vector<int64_t>{k, m}
                           : std::vector<int64_t>{m, k},
                        10 + ta);
      Buf b = randomF32(tb ? std::vector<int64_t>{n, k}
                           : std::vector<int64_t>{k, n},
                        20 + tb);
      Buf c = randomF32({n}, 30); // Broadcast over rows.
      Buf y(DType::F32, {m, n});
      double alpha = 0.75, beta = -1.5;
      ASSERT_KERNEL_OK(run("Gemm",
                           attrs({{"alpha", floatv(alpha)},
                                  {"beta", floatv(beta)},
                                  {"transA", intv(ta)},
                                  {"transB", intv(tb)}}),
                           {&a, &b, &c}, {&y}));
      std::vector<float> av = a.values<float>(), bv = b.values<float>(),
                         cv = c.values<float>();
      std::vector<double> want;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < k; ++p)
            s += double(ta ? av[p * m + i] : av[i * k + p]) *
                 (tb ? bv[j * k + p] : bv[p * n + j]);
          want.push_back(alpha * s + beta * cv[j]);
        }
      expectClose(y.values<float>(), want, tolerance, tolerance);
    }
  }
}

TEST(GemmKernel, TransposeFlagsAlphaBetaAndBroadcastC) {
  checkGemm(3, 5, 4, 1e-5);
}

// Products of at least 128 in every size go to oneDNN, smaller ones to
// OpenBLAS (runtime/cpu/MatMul.cpp): both, and both sides of the line.
TEST(GemmKernel, LargeProductsOnEitherLibrary) {
  checkGemm(128, 130, 144, 1e-4);
  checkGemm(127, 130, 144, 1e-4);
  checkGemm(150, 129, 128, 1e-4);
}

// The thread setting reaches the libraries; a product on more threads is
// still the product (whatever order its sums take).
TEST(GemmKernel, ThreadsSetting) {
  setCpuKernelThreads(2);
  checkGemm(160, 200, 136, 1e-4);
  setCpuKernelThreads(0); // At least 1.
  checkGemm(160, 200, 136, 1e-4);
}

TEST(GemmKernel, ColumnBiasAndNoBias) {
  Buf a = f32({2, 2}, {1, 2, 3, 4});
  Buf b = f32({2, 2}, {5, 6, 7, 8});
  Buf c = f32({2, 1}, {100, 200});
  Buf y(DType::F32, {2, 2});
  ASSERT_KERNEL_OK(run("Gemm",
                       attrs({{"alpha", floatv(1.0)},
                              {"beta", floatv(1.0)},
                              {"transA", intv(0)},
                              {"transB", intv(0)}}),
                       {&a, &b, &c}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{119, 122, 243, 250}));
  ASSERT_KERNEL_OK(
      run("Gemm", attrs({{"alpha", floatv(2.0)}}), {&a, &b}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{38, 44, 86, 100}));

  Buf bad = f32({3, 2}, {0, 0, 0, 0, 0, 0});
  EXPECT_KERNEL_ERROR(run("Gemm", attrs(), {&a, &bad}, {&y}),
                      "inner dimensions");
}

/// numpy matmul on (batch..., m, k) x (batch..., k, n) with broadcast batch.
std::vector<double> naiveMatMul(const std::vector<float> &a,
                                std::vector<int64_t> as,
                                const std::vector<float> &b,
                                std::vector<int64_t> bs,
                                std::vector<int64_t> ys) {
  // ys is the full output shape with matrix dims; pad batch dims with 1s.
  size_t r = ys.size();
  while (as.size() < r)
    as.insert(as.begin(), 1);
  while (bs.size() < r)
    bs.insert(bs.begin(), 1);
  int64_t m = ys[r - 2], n = ys[r - 1], k = as[r - 1];
  std::vector<double> y(static_cast<size_t>(numElements(ys)));
  std::vector<int64_t> idx(r, 0);
  do {
    std::vector<int64_t> ia(r), ib(r);
    for (size_t d = 0; d + 2 < r; ++d) {
      ia[d] = as[d] == 1 ? 0 : idx[d];
      ib[d] = bs[d] == 1 ? 0 : idx[d];
    }
    double s = 0;
    for (int64_t p = 0; p < k; ++p) {
      ia[r - 2] = idx[r - 2];
      ia[r - 1] = p;
      ib[r - 2] = p;
      ib[r - 1] = idx[r - 1];
      s += double(a[flatIndex(as, ia)]) * b[flatIndex(bs, ib)];
    }
    y[flatIndex(ys, idx)] = s;
  } while (next(idx, ys));
  (void)m;
  (void)n;
  return y;
}

TEST(MatMulKernel, BatchedWithBroadcastBatchDims) {
  Buf a = randomF32({2, 1, 3, 4}, 41);
  Buf b = randomF32({3, 4, 5}, 42);
  Buf y(DType::F32, {2, 3, 3, 5});
  ASSERT_KERNEL_OK(run("MatMul", attrs(), {&a, &b}, {&y}));
  expectClose(y.values<float>(),
              naiveMatMul(a.values<float>(), a.shape, b.values<float>(),
                          b.shape, y.shape),
              1e-5, 1e-5);

  // Shared B: the batch folds into M.
  Buf a3 = randomF32({2, 3, 4}, 43);
  Buf b2 = randomF32({4, 5}, 44);
  Buf y3(DType::F32, {2, 3, 5});
  ASSERT_KERNEL_OK(run("MatMul", attrs(), {&a3, &b2}, {&y3}));
  expectClose(y3.values<float>(),
              naiveMatMul(a3.values<float>(), a3.shape, b2.values<float>(),
                          b2.shape, y3.shape),
              1e-5, 1e-5);

  // Broadcast A against a batched B.
  Buf a2 = randomF32({3, 4}, 45);
  Buf b3 = randomF32({2, 4, 5}, 46);
  ASSERT_KERNEL_OK(run("MatMul", attrs(), {&a2, &b3}, {&y3}));
  expectClose(y3.values<float>(),
              naiveMatMul(a2.values<float>(), a2.shape, b3.values<float>(),
                          b3.shape, y3.shape),
              1e-5, 1e-5);
}

TEST(MatMulKernel, VectorOperandsArePromotedAndSqueezed) {
  Buf v = f32({3}, {1, 2, 3});
  Buf m = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Buf y(DType::F32, {2});
  ASSERT_KERNEL_OK(run("MatMul", attrs(), {&v, &m}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{22, 28}));

  Buf mt = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  ASSERT_KERNEL_OK(run("MatMul", attrs(), {&mt, &v}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{14, 32}));

  Buf dot(DType::F32, {});
  ASSERT_KERNEL_OK(run("MatMul", attrs(), {&v, &v}, {&dot}));
  EXPECT_EQ(dot.values<float>(), (std::vector<float>{14}));
}

TEST(MatMulKernel, Int64AndErrors) {
  Buf a = i64({2, 2}, {1, 2, 3, 4});
  Buf b = i64({2, 2}, {5, 6, 7, 8});
  Buf y(DType::I64, {2, 2});
  ASSERT_KERNEL_OK(run("MatMul", attrs(), {&a, &b}, {&y}));
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{19, 22, 43, 50}));

  Buf c = i64({3, 2}, {0, 0, 0, 0, 0, 0});
  EXPECT_KERNEL_ERROR(run("MatMul", attrs(), {&a, &c}, {&y}),
                      "inner dimensions");
  Buf wrong(DType::I64, {2, 3});
  EXPECT_KERNEL_ERROR(run("MatMul", attrs(), {&a, &b}, {&wrong}), "'Y'");
  Buf h(DType::U8, {2, 2});
  Buf hy(DType::U8, {2, 2});
  EXPECT_KERNEL_ERROR(run("MatMul", attrs(), {&h, &h}, {&hy}), "uint8");
}

/// The shape of `x` transposed by `perm`.
std::vector<int64_t> permuted(const std::vector<int64_t> &shape,
                              const std::vector<int64_t> &perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(shape[p]);
  return out;
}

// PermutedMatMul equals Transpose, MatMul and Transpose run one after the
// other: attention's head split and merge, K^T over the stored key, and
// the transposed operands of its gradients, in f32 and f64, rank 3 and 4.
TEST(PermutedMatMulKernel, EqualsTransposesAroundMatMul) {
  struct Case {
    std::vector<int64_t> a, b, aPerm, bPerm, yPerm;
  };
  // q, k, v stored [batch, time, heads, dim] = [2, 5, 3, 4].
  const Case cases[] = {
      // scores = q k^T: [2, 3, 5, 5].
      {{2, 5, 3, 4}, {2, 5, 3, 4}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 1, 2, 3}},
      // out = p v, merged back to [2, 5, 3, 4].
      {{2, 3, 5, 5}, {2, 5, 3, 4}, {0, 1, 2, 3}, {0, 2, 1, 3}, {0, 2, 1, 3}},
      // q k^T written with heads and query time swapped: [2, 5, 3, 5].
      {{2, 5, 3, 4}, {2, 5, 3, 4}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 2, 1, 3}},
      // dv = p^T dout, written [2, 5, 3, 4].
      {{2, 3, 5, 5}, {2, 5, 3, 4}, {0, 1, 3, 2}, {0, 2, 1, 3}, {0, 2, 1, 3}},
      // Rank 3, batch moved and both matrices transposed.
      {{2, 3, 4}, {5, 3, 2}, {1, 2, 0}, {1, 2, 0}, {0, 1, 2}},
  };
  unsigned seed = 900;
  for (const Case &c : cases)
    for (DType dtype : {DType::F32, DType::F64}) {
      SCOPED_TRACE(shapeToString(c.a) + " x " + shapeToString(c.b) + " " +
                   dtypeName(dtype).str());
      std::vector<int64_t> at = permuted(c.a, c.aPerm),
                           bt = permuted(c.b, c.bPerm);
      std::vector<int64_t> prod(at.begin(), at.end() - 1);
      prod.push_back(bt.back());
      std::vector<int64_t> yShape = permuted(prod, c.yPerm);
      Buf a = randomF32(c.a, ++seed), b = randomF32(c.b, ++seed);
      if (dtype == DType::F64) {
        std::vector<float> av = a.values<float>(), bv = b.values<float>();
        a = makeBuf<double>(dtype, c.a,
                            std::vector<double>(av.begin(), av.end()));
        b = makeBuf<double>(dtype, c.b,
                            std::vector<double>(bv.begin(), bv.end()));
      }
      Buf ta(dtype, at), tb(dtype, bt), p(dtype, prod), want(dtype, yShape),
          got(dtype, yShape);
      ASSERT_KERNEL_OK(
          run("Transpose", attrs({{"perm", ints(c.aPerm)}}), {&a}, {&ta}));
      ASSERT_KERNEL_OK(
          run("Transpose", attrs({{"perm", ints(c.bPerm)}}), {&b}, {&tb}));
      ASSERT_KERNEL_OK(run("MatMul", attrs(), {&ta, &tb}, {&p}));
      ASSERT_KERNEL_OK(
          run("Transpose", attrs({{"perm", ints(c.yPerm)}}), {&p}, {&want}));
      ASSERT_KERNEL_OK(run("PermutedMatMul",
                           attrs({{"a_perm", ints(c.aPerm)},
                                  {"b_perm", ints(c.bPerm)},
                                  {"output_perm", ints(c.yPerm)}}),
                           {&a, &b}, {&got}));
      if (dtype == DType::F32)
        expectClose(got.values<float>(), want.values<float>(), 1e-6, 1e-6);
      else
        expectClose(got.values<double>(), want.values<double>(), 1e-13, 1e-13);
    }
}

TEST(PermutedMatMulKernel, Errors) {
  Buf a = randomF32({2, 5, 3, 4}, 1), b = randomF32({2, 5, 3, 4}, 2);
  Buf y(DType::F32, {2, 3, 5, 5});
  auto perms = [](std::vector<int64_t> ap, std::vector<int64_t> bp,
                  std::vector<int64_t> yp) {
    return attrs({{"a_perm", ints(ap)},
                  {"b_perm", ints(bp)},
                  {"output_perm", ints(yp)}});
  };
  ASSERT_KERNEL_OK(run("PermutedMatMul",
                       perms({0, 2, 1, 3}, {0, 2, 3, 1}, {0, 1, 2, 3}),
                       {&a, &b}, {&y}));
  EXPECT_KERNEL_ERROR(run("PermutedMatMul",
                          perms({0, 2, 1, 1}, {0, 2, 3, 1}, {0, 1, 2, 3}),
                          {&a, &b}, {&y}),
                      "'a_perm' must be a permutation");
  // The key's dim (innermost in memory) is a batch dimension here.
  EXPECT_KERNEL_ERROR(run("PermutedMatMul",
                          perms({0, 2, 1, 3}, {0, 3, 2, 1}, {0, 1, 2, 3}),
                          {&a, &b}, {&y}),
                      "innermost");
  EXPECT_KERNEL_ERROR(run("PermutedMatMul",
                          perms({0, 2, 1, 3}, {0, 2, 1, 3}, {0, 1, 2, 3}),
                          {&a, &b}, {&y}),
                      "inner dimensions");
  Buf wrong(DType::F32, {2, 3, 5, 4});
  EXPECT_KERNEL_ERROR(run("PermutedMatMul",
                          perms({0, 2, 1, 3}, {0, 2, 3, 1}, {0, 1, 2, 3}),
                          {&a, &b}, {&wrong}),
                      "not a batched product");
  Buf r3 = randomF32({5, 3, 4}, 3);
  EXPECT_KERNEL_ERROR(run("PermutedMatMul",
                          perms({0, 2, 1, 3}, {0, 2, 3, 1}, {0, 1, 2, 3}),
                          {&a, &r3}, {&y}),
                      "one rank");
}

//===----------------------------------------------------------------------===//
// Conv
//===----------------------------------------------------------------------===//

struct ConvParams {
  std::vector<int64_t> strides, padBegin, padEnd, dilations;
  int64_t group = 1;
};

/// Output spatial size from the ONNX formula.
std::vector<int64_t> convOutShape(const std::vector<int64_t> &xs,
                                  const std::vector<int64_t> &ws,
                                  const ConvParams &p) {
  std::vector<int64_t> y = {xs[0], ws[0]};
  for (size_t d = 0; d + 2 < xs.size(); ++d)
    y.push_back((xs[d + 2] + p.padBegin[d] + p.padEnd[d] -
                 p.dilations[d] * (ws[d + 2] - 1) - 1) /
                    p.strides[d] +
                1);
  return y;
}

/// Direct convolution from the definition.
std::vector<double> naiveConv(const Buf &x, const Buf &w, const Buf *bias,
                              const std::vector<int64_t> &ys,
                              const ConvParams &p) {
  std::vector<float> xv = x.values<float>(), wv = w.values<float>();
  size_t ns = x.shape.size() - 2;
  int64_t cg = w.shape[1], mg = w.shape[0] / p.group;
  std::vector<int64_t> kShape(w.shape.begin() + 2, w.shape.end());
  std::vector<double> y(static_cast<size_t>(numElements(ys)));
  std::vector<int64_t> o(ys.size(), 0);
  do {
    int64_t n = o[0], m = o[1], g = m / mg;
    double s = bias ? bias->values<float>()[m] : 0.0;
    for (int64_t c = 0; c < cg; ++c) {
      std::vector<int64_t> k(ns, 0);
      do {
        std::vector<int64_t> xi = {n, g * cg + c};
        bool inside = true;
        for (size_t d = 0; d < ns; ++d) {
          int64_t i =
              o[d + 2] * p.strides[d] - p.padBegin[d] + k[d] * p.dilations[d];
          inside &= i >= 0 && i < x.shape[d + 2];
          xi.push_back(i);
        }
        if (!inside)
          continue;
        std::vector<int64_t> wi = {m, c};
        wi.insert(wi.end(), k.begin(), k.end());
        s += double(xv[flatIndex(x.shape, xi)]) * wv[flatIndex(w.shape, wi)];
      } while (next(k, kShape));
    }
    y[flatIndex(ys, o)] = s;
  } while (next(o, ys));
  return y;
}

AttrMap convAttrs(const std::vector<int64_t> &kernel, const ConvParams &p) {
  std::vector<int64_t> pads = p.padBegin;
  pads.insert(pads.end(), p.padEnd.begin(), p.padEnd.end());
  return attrs({{"kernel_shape", ints(kernel)},
                {"strides", ints(p.strides)},
                {"pads", ints(pads)},
                {"dilations", ints(p.dilations)},
                {"group", intv(p.group)}});
}

void checkConv(std::vector<int64_t> xs, std::vector<int64_t> ws,
               const ConvParams &p, bool withBias, unsigned seed) {
  Buf x = randomF32(xs, seed);
  Buf w = randomF32(ws, seed + 1);
  Buf b = randomF32({ws[0]}, seed + 2);
  std::vector<int64_t> ys = convOutShape(xs, ws, p);
  Buf y(DType::F32, ys);
  std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  ASSERT_KERNEL_OK(run("Conv", convAttrs(kernel, p),
                       {&x, &w, withBias ? &b : nullptr}, {&y}));
  expectClose(y.values<float>(),
              naiveConv(x, w, withBias ? &b : nullptr, ys, p), 1e-5, 1e-5);
}

TEST(ConvKernel, OnnxBasicExample) {
  // ONNX's test_basic_conv_with_padding: 5x5 ramp, 3x3 ones, pads 1.
  std::vector<float> xs(25);
  for (int i = 0; i < 25; ++i)
    xs[i] = static_cast<float>(i);
  Buf x = f32({1, 1, 5, 5}, xs);
  Buf w = f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  Buf y(DType::F32, {1, 1, 5, 5});
  ConvParams p{{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1};
  ASSERT_KERNEL_OK(run("Conv", convAttrs({3, 3}, p), {&x, &w}, {&y}));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{12,  21,  27, 33,  24,  33,  54, 63,  72,
                                51,  63,  99, 108, 117, 81,  93, 144, 153,
                                162, 111, 72, 111, 117, 123, 84}));
}

TEST(ConvKernel, StridePadDilationGroups2D) {
  ConvParams p{{2, 1}, {1, 0}, {2, 1}, {1, 2}, 2};
  checkConv({2, 4, 7, 6}, {6, 2, 3, 2}, p, /*withBias=*/true, 100);
}

TEST(ConvKernel, DepthwiseAndAsymmetricPads2D) {
  ConvParams p{{1, 2}, {0, 2}, {1, 0}, {1, 1}, 3};
  checkConv({1, 3, 5, 8}, {3, 1, 3, 3}, p, /*withBias=*/false, 200);
}

TEST(ConvKernel, OneAndThreeSpatialDims) {
  ConvParams p1{{2}, {1}, {2}, {2}, 1};
  checkConv({2, 3, 11}, {4, 3, 3}, p1, /*withBias=*/true, 300);
  ConvParams p3{{1, 2, 1}, {1, 0, 1}, {0, 1, 1}, {1, 1, 2}, 2};
  checkConv({1, 4, 4, 5, 6}, {2, 2, 2, 3, 2}, p3, /*withBias=*/true, 400);
}

TEST(ConvKernel, PointwiseTakesTheDirectPath) {
  ConvParams p{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  checkConv({2, 5, 3, 4}, {7, 5, 1, 1}, p, /*withBias=*/true, 500);
  ConvParams pg{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 5};
  checkConv({2, 5, 3, 4}, {5, 1, 1, 1}, pg, /*withBias=*/false, 600);
}

TEST(ConvKernel, InconsistentShapesAreErrors) {
  Buf x = randomF32({1, 4, 5, 5}, 1);
  Buf w = randomF32({2, 3, 3, 3}, 2); // 3 input channels, X has 4.
  Buf y(DType::F32, {1, 2, 3, 3});
  ConvParams p{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1};
  EXPECT_KERNEL_ERROR(run("Conv", convAttrs({3, 3}, p), {&x, &w}, {&y}),
                      "group");
  Buf w2 = randomF32({2, 4, 3, 3}, 3);
  Buf yBad(DType::F32, {1, 2, 4, 4});
  EXPECT_KERNEL_ERROR(run("Conv", convAttrs({3, 3}, p), {&x, &w2}, {&yBad}),
                      "'Y'");
  Buf xi(DType::I64, {1, 4, 5, 5});
  Buf wi(DType::I64, {2, 4, 3, 3});
  Buf yi(DType::I64, {1, 2, 3, 3});
  EXPECT_KERNEL_ERROR(run("Conv", convAttrs({3, 3}, p), {&xi, &wi}, {&yi}),
                      "int64");
}

/// sum(a * b) in double.
double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += double(a[i]) * b[i];
  return s;
}

TEST(ConvKernel, LargeImagesGoInColumnBlocks) {
  // The im2col matrix is built a block of output columns at a time, at most
  // 2^22 elements: here 36 rows x 131,584 columns take two blocks, and the
  // block ends inside an output row; the 1-d case splits its one output
  // row into four. Conv matches the definition; its gradients are its
  // adjoints: <ConvGradInput(r), x> = <r, Conv(x)> = <ConvGradWeight(r, x),
  // w>.
  struct Case {
    std::vector<int64_t> xs, ws;
    ConvParams p;
  };
  for (const Case &c :
       {Case{{1, 4, 258, 1030},
             {2, 4, 3, 3},
             {{2, 1}, {1, 0}, {0, 1}, {2, 1}, 1}},
        Case{{1, 64, 70000}, {2, 64, 3}, {{1}, {1}, {1}, {1}, 1}}}) {
    SCOPED_TRACE(shapeToString(c.xs));
    checkConv(c.xs, c.ws, c.p, /*withBias=*/false, 700);
    Buf x = randomF32(c.xs, 701), w = randomF32(c.ws, 702);
    std::vector<int64_t> ys = convOutShape(c.xs, c.ws, c.p);
    Buf r = randomF32(ys, 703), y(DType::F32, ys);
    std::vector<int64_t> kernel(c.ws.begin() + 2, c.ws.end());
    AttrMap a = convAttrs(kernel, c.p);
    ASSERT_KERNEL_OK(run("Conv", a, {&x, &w}, {&y}));
    Buf dx(DType::F32, c.xs), dw(DType::F32, c.ws);
    ASSERT_KERNEL_OK(run("ConvGradInput", a, {&r, &w}, {&dx}));
    ASSERT_KERNEL_OK(run("ConvGradWeight", a, {&r, &x}, {&dw}));
    double ry = dot(r.values<float>(), y.values<float>());
    EXPECT_NEAR(dot(dx.values<float>(), x.values<float>()), ry,
                1e-4 * std::abs(ry) + 1e-2);
    EXPECT_NEAR(dot(dw.values<float>(), w.values<float>()), ry,
                1e-4 * std::abs(ry) + 1e-2);
  }
}

//===----------------------------------------------------------------------===//
// Pools
//===----------------------------------------------------------------------===//

std::vector<float> ramp(int n, float start = 1.0f) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i)
    v[i] = start + static_cast<float>(i);
  return v;
}

TEST(PoolKernel, MaxPoolWithIndicesOnnxExample) {
  // ONNX test_maxpool_with_argmax_2d_precomputed_pads.
  Buf x = f32({1, 1, 5, 5}, ramp(25));
  Buf y(DType::F32, {1, 1, 5, 5});
  Buf idx(DType::I64, {1, 1, 5, 5});
  ASSERT_KERNEL_OK(run("MaxPool",
                       attrs({{"kernel_shape", ints({5, 5})},
                              {"pads", ints({2, 2, 2, 2})},
                              {"strides", ints({1, 1})},
                              {"dilations", ints({1, 1})},
                              {"ceil_mode", intv(0)},
                              {"storage_order", intv(0)}}),
                       {&x}, {&y, &idx}));
  EXPECT_EQ(
      y.values<float>(),
      (std::vector<float>{13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
                          25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25}));
  EXPECT_EQ(
      idx.values<int64_t>(),
      (std::vector<int64_t>{12, 13, 14, 14, 14, 17, 18, 19, 19, 19, 22, 23, 24,
                            24, 24, 22, 23, 24, 24, 24, 22, 23, 24, 24, 24}));
}

TEST(PoolKernel, MaxPoolIndicesColumnMajorAndPerChannel) {
  // ONNX test_maxpool_with_argmax_2d_precomputed_strides, storage_order 1,
  // with a second channel to check the per-plane offset.
  std::vector<float> xs = ramp(25);
  std::vector<float> second = ramp(25, 101);
  xs.insert(xs.end(), second.begin(), second.end());
  Buf x = f32({1, 2, 5, 5}, xs);
  Buf y(DType::F32, {1, 2, 2, 2});
  Buf idx(DType::I64, {1, 2, 2, 2});
  ASSERT_KERNEL_OK(run("MaxPool",
                       attrs({{"kernel_shape", ints({2, 2})},
                              {"strides", ints({2, 2})},
                              {"storage_order", intv(1)}}),
                       {&x}, {&y, &idx}));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{7, 9, 17, 19, 107, 109, 117, 119}));
  EXPECT_EQ(idx.values<int64_t>(),
            (std::vector<int64_t>{6, 16, 8, 18, 31, 41, 33, 43}));
}

TEST(PoolKernel, MaxPoolDilationsAndCeilMode) {
  Buf x = f32({1, 1, 4, 4}, ramp(16));
  // ONNX test_maxpool_2d_dilations.
  Buf y(DType::F32, {1, 1, 2, 2});
  ASSERT_KERNEL_OK(run("MaxPool",
                       attrs({{"kernel_shape", ints({2, 2})},
                              {"strides", ints({1, 1})},
                              {"dilations", ints({2, 2})}}),
                       {&x}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{11, 12, 15, 16}));
  // ONNX test_maxpool_2d_ceil: k3 s2 on 4x4 with ceil_mode -> 2x2.
  ASSERT_KERNEL_OK(run("MaxPool",
                       attrs({{"kernel_shape", ints({3, 3})},
                              {"strides", ints({2, 2})},
                              {"ceil_mode", intv(1)}}),
                       {&x}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{11, 12, 15, 16}));
}

TEST(PoolKernel, MaxPoolOneAndThreeDims) {
  // 1-D: k2 s1 on [1, 3, 2, 5, 4] with pads (1, 1) -> 6 outputs.
  Buf x1 = f32({1, 1, 5}, {1, 3, 2, 5, 4});
  Buf y1(DType::F32, {1, 1, 6});
  Buf i1(DType::I64, {1, 1, 6});
  ASSERT_KERNEL_OK(run(
      "MaxPool", attrs({{"kernel_shape", ints({2})}, {"pads", ints({1, 1})}}),
      {&x1}, {&y1, &i1}));
  EXPECT_EQ(y1.values<float>(), (std::vector<float>{1, 3, 3, 5, 5, 4}));
  EXPECT_EQ(i1.values<int64_t>(), (std::vector<int64_t>{0, 1, 1, 3, 3, 4}));

  // 3-D: a 2x2x2 window over a 3x3x3 ramp takes the far corner.
  Buf x3 = f32({1, 1, 3, 3, 3}, ramp(27, 0));
  Buf y3(DType::F32, {1, 1, 2, 2, 2});
  ASSERT_KERNEL_OK(
      run("MaxPool", attrs({{"kernel_shape", ints({2, 2, 2})}}), {&x3}, {&y3}));
  EXPECT_EQ(y3.values<float>(),
            (std::vector<float>{13, 14, 16, 17, 22, 23, 25, 26}));
}

TEST(PoolKernel, MaxPoolPaddingNeverWins) {
  Buf x = f32({1, 1, 2, 2}, {-5, -6, -7, -8});
  Buf y(DType::F32, {1, 1, 3, 3});
  ASSERT_KERNEL_OK(
      run("MaxPool",
          attrs({{"kernel_shape", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}),
          {&x}, {&y}));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{-5, -5, -6, -5, -5, -6, -7, -7, -8}));
}

/// AveragePool from the definition over a 2-D input.
std::vector<double> naiveAvgPool2D(const std::vector<float> &x, int64_t h,
                                   int64_t w, int64_t k, int64_t s, int64_t pad,
                                   int64_t oh, int64_t ow, bool includePad) {
  std::vector<double> y;
  for (int64_t i = 0; i < oh; ++i)
    for (int64_t j = 0; j < ow; ++j) {
      double sum = 0;
      int64_t valid = 0, padded = 0;
      for (int64_t a = 0; a < k; ++a)
        for (int64_t b = 0; b < k; ++b) {
          int64_t r = i * s - pad + a, c = j * s - pad + b;
          if (r >= h + pad || c >= w + pad)
            continue; // Beyond the padded input.
          ++padded;
          if (r < 0 || c < 0 || r >= h || c >= w)
            continue;
          ++valid;
          sum += x[r * w + c];
        }
      y.push_back(sum / (includePad ? padded : valid));
    }
  return y;
}

TEST(PoolKernel, AveragePoolCountIncludePadBothWays) {
  Buf x = randomF32({1, 1, 5, 5}, 77);
  Buf y(DType::F32, {1, 1, 4, 4});
  for (int include = 0; include < 2; ++include) {
    SCOPED_TRACE("count_include_pad=" + std::to_string(include));
    ASSERT_KERNEL_OK(run("AveragePool",
                         attrs({{"kernel_shape", ints({3, 3})},
                                {"strides", ints({2, 2})},
                                {"pads", ints({2, 2, 2, 2})},
                                {"ceil_mode", intv(0)},
                                {"count_include_pad", intv(include)}}),
                         {&x}, {&y}));
    expectClose(y.values<float>(), naiveAvgPool2D(x.values<float>(), 5, 5, 3, 2,
                                                  2, 4, 4, include != 0));
  }
  // Hand-checked corner: window rows/cols -2..0 holds only x[0][0].
  ASSERT_KERNEL_OK(run("AveragePool",
                       attrs({{"kernel_shape", ints({3, 3})},
                              {"strides", ints({2, 2})},
                              {"pads", ints({2, 2, 2, 2})},
                              {"count_include_pad", intv(1)}}),
                       {&x}, {&y}));
  EXPECT_NEAR(y.values<float>()[0], x.values<float>()[0] / 9.0f, 1e-7);
}

TEST(PoolKernel, AveragePoolCeilModeWindowPastThePaddedEdge) {
  // 1-D, in 5, k3, s2, pads (0, 1), ceil_mode: windows start at 0, 2, 4.
  // The last covers 4 (data), 5 (pad) and 6 (beyond the padded edge).
  Buf x = f32({1, 1, 5}, {1, 2, 3, 4, 10});
  Buf y(DType::F32, {1, 1, 3});
  ASSERT_KERNEL_OK(run("AveragePool",
                       attrs({{"kernel_shape", ints({3})},
                              {"strides", ints({2})},
                              {"pads", ints({0, 1})},
                              {"ceil_mode", intv(1)},
                              {"count_include_pad", intv(1)}}),
                       {&x}, {&y}));
  expectClose(y.values<float>(), std::vector<float>{2, 17.0f / 3, 5});
  ASSERT_KERNEL_OK(run("AveragePool",
                       attrs({{"kernel_shape", ints({3})},
                              {"strides", ints({2})},
                              {"pads", ints({0, 1})},
                              {"ceil_mode", intv(1)},
                              {"count_include_pad", intv(0)}}),
                       {&x}, {&y}));
  expectClose(y.values<float>(), std::vector<float>{2, 17.0f / 3, 10});
}

TEST(PoolKernel, AveragePoolThreeDims) {
  Buf x = f32({1, 1, 2, 2, 2}, ramp(8));
  Buf y(DType::F32, {1, 1, 1, 1, 1});
  ASSERT_KERNEL_OK(run("AveragePool",
                       attrs({{"kernel_shape", ints({2, 2, 2})}}), {&x}, {&y}));
  expectClose(y.values<float>(), std::vector<float>{4.5f});
}

TEST(PoolKernel, GlobalAveragePool) {
  Buf x = f32({1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40});
  Buf y(DType::F32, {1, 2, 1, 1});
  ASSERT_KERNEL_OK(run("GlobalAveragePool", attrs(), {&x}, {&y}));
  expectClose(y.values<float>(), std::vector<float>{2.5f, 25.0f});
  Buf bad(DType::F32, {1, 2});
  EXPECT_KERNEL_ERROR(run("GlobalAveragePool", attrs(), {&x}, {&bad}), "'Y'");
}

TEST(PoolKernel, BadAttributesAreErrors) {
  Buf x = f32({1, 1, 4, 4}, ramp(16));
  Buf y(DType::F32, {1, 1, 2, 2});
  EXPECT_KERNEL_ERROR(
      run("MaxPool", attrs({{"kernel_shape", ints({2})}}), {&x}, {&y}),
      "kernel_shape");
  EXPECT_KERNEL_ERROR(
      run("AveragePool",
          attrs({{"kernel_shape", ints({2, 2})}, {"pads", ints({1, 1})}}), {&x},
          {&y}),
      "pads");
  Buf xi(DType::I64, {1, 1, 4, 4});
  Buf yi(DType::I64, {1, 1, 3, 3});
  EXPECT_KERNEL_ERROR(
      run("AveragePool", attrs({{"kernel_shape", ints({2, 2})}}), {&xi}, {&yi}),
      "int64");
  // Y has the windows the attributes give: 3 per axis here (4 with
  // ceil_mode), not 2 (a plan could otherwise ask for any number).
  EXPECT_KERNEL_ERROR(
      run("MaxPool", attrs({{"kernel_shape", ints({2, 2})}}), {&x}, {&y}),
      "has 2 windows on spatial axis 0; the input, kernel, strides and pads "
      "give 3 (or 4 with ceil_mode)");
  // Window attributes stay below 2^31, so their arithmetic cannot wrap.
  Buf y1(DType::F32, {1, 1, 1, 1});
  EXPECT_KERNEL_ERROR(run("MaxPool",
                          attrs({{"kernel_shape", ints({4, 4})},
                                 {"strides", ints({int64_t(1) << 40, 1})}}),
                          {&x}, {&y1}),
                      "strides [1099511627776, 1] has an entry outside [1, "
                      "2^31]");
}

TEST(PoolKernel, MaxPool2DMatchesTheGenericWindowLoop) {
  // Two spatial axes take a branch-free loop; the same windows with a third
  // axis of size 1 take the generic one. Values, and indices in both storage
  // orders, agree on data with ties, infinities and NaNs (a window of NaNs
  // only, one NaN first, one NaN last), with padding, dilation and ceil_mode.
  const int64_t n = 2, c = 3, h = 9, w = 8;
  std::vector<float> xs(n * c * h * w);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  uint32_t state = 12345;
  for (float &v : xs) {
    state = state * 1664525u + 1013904223u;
    uint32_t r = state >> 24;
    v = r < 20 ? nan : r < 30 ? -inf : r < 35 ? inf : float(r % 7) - 3.0f;
  }
  for (int64_t i = 0; i < 16; ++i) // NaNs only in plane 0's first 4x4
    xs[(i / 4) * w + i % 4] = nan;
  struct Geometry {
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil;
  };
  for (const Geometry &g :
       {Geometry{{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0},
        Geometry{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
        Geometry{{3, 2}, {1, 2}, {2, 0, 1, 1}, {2, 1}, 1},
        Geometry{{2, 3}, {3, 1}, {0, 1, 0, 0}, {1, 2}, 1}}) {
    auto out = [&](int64_t in, int64_t d) {
      int64_t span = g.dilations[d] * (g.kernel[d] - 1) + 1;
      int64_t room = in + g.pads[d] + g.pads[d + 2] - span;
      return (g.ceil ? (room + g.strides[d] - 1) : room) / g.strides[d] + 1;
    };
    int64_t oh = out(h, 0), ow = out(w, 1);
    for (int64_t order : {0, 1}) {
      SCOPED_TRACE("kernel " + std::to_string(g.kernel[0]) + "x" +
                   std::to_string(g.kernel[1]) + ", storage_order " +
                   std::to_string(order));
      Buf x2 = f32({n, c, h, w}, xs);
      Buf y2(DType::F32, {n, c, oh, ow});
      Buf i2(DType::I64, {n, c, oh, ow});
      ASSERT_KERNEL_OK(run("MaxPool",
                           attrs({{"kernel_shape", ints(g.kernel)},
                                  {"strides", ints(g.strides)},
                                  {"pads", ints(g.pads)},
                                  {"dilations", ints(g.dilations)},
                                  {"ceil_mode", intv(g.ceil)},
                                  {"storage_order", intv(order)}}),
                           {&x2}, {&y2, &i2}));
      Buf x3 = f32({n, c, h, w, 1}, xs);
      Buf y3(DType::F32, {n, c, oh, ow, 1});
      Buf i3(DType::I64, {n, c, oh, ow, 1});
      ASSERT_KERNEL_OK(
          run("MaxPool",
              attrs({{"kernel_shape", ints({g.kernel[0], g.kernel[1], 1})},
                     {"strides", ints({g.strides[0], g.strides[1], 1})},
                     {"pads",
                      ints({g.pads[0], g.pads[1], 0, g.pads[2], g.pads[3], 0})},
                     {"dilations", ints({g.dilations[0], g.dilations[1], 1})},
                     {"ceil_mode", intv(g.ceil)},
                     {"storage_order", intv(order)}}),
              {&x3}, {&y3, &i3}));
      std::vector<float> v2 = y2.values<float>(), v3 = y3.values<float>();
      ASSERT_EQ(v2.size(), v3.size());
      int nans = 0;
      for (size_t i = 0; i < v2.size(); ++i) {
        nans += std::isnan(v3[i]);
        EXPECT_TRUE(std::isnan(v2[i]) ? std::isnan(v3[i]) : v2[i] == v3[i])
            << "output " << i << ": " << v2[i] << " against " << v3[i];
      }
      EXPECT_GT(nans, 0);
      EXPECT_EQ(i2.values<int64_t>(), i3.values<int64_t>());
    }
  }
}

} // namespace
