//===- DropoutKernelTest.cpp - The Dropout kernel -------------------------===//
//
// Scaling and keep rate, the mask output, determinism in (seed, step, site),
// and the global element index: N ranks holding slabs of a batch along the
// batch axis (which may merge the samples with other axes) draw the mask one
// rank draws for the whole batch.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include "runtime/Philox.h"

namespace shardc::rt::test {
namespace {

struct RandomState {
  uint64_t seed = 0, step = 0;
  int rank = 0, worldSize = 1;
};

std::string runDropout(const AttrMap &a, Buf &x, Buf &y, Buf *mask,
                       RandomState s = {}) {
  std::vector<TensorView> in{x.view()};
  std::vector<TensorView> out{y.view()};
  if (mask)
    out.push_back(mask->view());
  KernelContext ctx{"Dropout", "test", a, in, out};
  ctx.seed = s.seed;
  ctx.step = s.step;
  ctx.rank = s.rank;
  ctx.worldSize = s.worldSize;
  if (llvm::Error e = cpu::runKernel(ctx))
    return llvm::toString(std::move(e));
  return "";
}

AttrMap dropoutAttrs(double ratio, int64_t site, int64_t batchAxis,
                     int64_t batchOuter = 1) {
  return attrs({{"ratio", floatv(ratio)},
                {"site", intv(site)},
                {"batch_axis", intv(batchAxis)},
                {"batch_outer", intv(batchOuter)}});
}

/// Over 10^6 elements: every output is 0 or x / (1 - ratio) exactly, the
/// mask says which, and the keep rate is within 4 standard deviations of
/// 1 - ratio.
TEST(DropoutKernel, ScalesKeptValuesAndKeepsAtTheRate) {
  const int64_t n = 1000000;
  const double ratio = 0.2;
  Buf x = f32({1000, 1000}, std::vector<float>(n, 3.0f));
  Buf y(DType::F32, {1000, 1000}), mask(DType::Bool, {1000, 1000});
  ASSERT_KERNEL_OK(
      runDropout(dropoutAttrs(ratio, 0, 0), x, y, &mask, {42, 7, 0, 1}));
  std::vector<float> v = y.values<float>();
  std::vector<uint8_t> m = mask.values<uint8_t>();
  const float kept = 3.0f * static_cast<float>(1.0 / (1.0 - ratio));
  int64_t keptCount = 0, bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad += m[i] > 1 || v[i] != (m[i] ? kept : 0.0f);
    keptCount += m[i];
  }
  EXPECT_EQ(bad, 0);
  double p = 1 - ratio, sigma = std::sqrt(n * p * (1 - p));
  EXPECT_LT(std::abs(keptCount - n * p), 4 * sigma) << keptCount;
}

/// The mask is word g % 4 of dropoutBlock(seed, step, site, g / 4) against
/// the threshold, element by element, and f64 scales as f32 does.
TEST(DropoutKernel, MaskIsPhiloxOfTheElementIndex) {
  const int64_t n = 37;
  Buf x = f64({n}, std::vector<double>(n, 1.0));
  Buf y(DType::F64, {n}), mask(DType::Bool, {n});
  RandomState s{5, 11, 0, 1};
  ASSERT_KERNEL_OK(runDropout(dropoutAttrs(0.5, 3, 0), x, y, &mask, s));
  std::vector<uint8_t> m = mask.values<uint8_t>();
  std::vector<double> v = y.values<double>();
  for (int64_t g = 0; g < n; ++g) {
    bool want = dropoutKeep(5, 11, 3, g, dropoutThreshold(0.5));
    EXPECT_EQ(m[g] != 0, want) << "element " << g;
    EXPECT_EQ(v[g], want ? 2.0 : 0.0) << "element " << g;
  }
}

TEST(DropoutKernel, SameStateSameMaskOtherStateOtherMask) {
  Buf x = randomF32({4, 64}, 1);
  auto maskOf = [&](int64_t site, RandomState s) {
    Buf y(DType::F32, {4, 64}), m(DType::Bool, {4, 64});
    EXPECT_KERNEL_OK(runDropout(dropoutAttrs(0.5, site, 0), x, y, &m, s));
    return m.values<uint8_t>();
  };
  std::vector<uint8_t> base = maskOf(0, {1, 2, 0, 1});
  EXPECT_EQ(maskOf(0, {1, 2, 0, 1}), base);
  EXPECT_NE(maskOf(1, {1, 2, 0, 1}), base); // another site
  EXPECT_NE(maskOf(0, {1, 3, 0, 1}), base); // another step
  EXPECT_NE(maskOf(0, {9, 2, 0, 1}), base); // another seed
}

/// A global batch of 8 samples on one rank, against the same batch split
/// over 2 and 4 ranks: rank r's output is its slab of the one-rank output.
/// The batch axis has size batch_outer * samples * inner; along it, the
/// one-rank index (p * 8 + s) * inner + j is rank r's (p * b + s - r * b) *
/// inner + j for the rank's b = 8 / N samples. Layouts: batch axis 1 of
/// [2, 8, 3]; axis 0 of [8, 2, 3]; attention's [T*B, D] (axis 0, outer
/// T = 3); and samples inside an axis on both sides, [2, 3*8*2, 3] (axis 1,
/// outer 3, inner 2). With batch axis -1 every rank draws the whole mask.
TEST(DropoutKernel, RanksDrawTheSlabsOfTheGlobalMask) {
  const int64_t samples = 8;
  struct Layout {
    int64_t batchAxis, batchOuter;
    std::vector<int64_t> global;
  };
  for (Layout layout :
       {Layout{1, 1, {2, 8, 3}}, Layout{0, 1, {8, 2, 3}},
        Layout{0, 3, {3 * 8, 5}}, Layout{1, 3, {2, 3 * 8 * 2, 3}}}) {
    int64_t a = layout.batchAxis, p = layout.batchOuter;
    std::vector<int64_t> shape = layout.global;
    int64_t inner = shape[a] / (p * samples);
    Buf x = randomF32(shape, 3);
    Buf y(DType::F32, shape);
    RandomState one{77, 4, 0, 1};
    ASSERT_KERNEL_OK(
        runDropout(dropoutAttrs(0.3, 2, a, p), x, y, nullptr, one));
    std::vector<float> gx = x.values<float>(), gy = y.values<float>();
    int64_t before = 1, after = 1;
    for (int64_t d = 0; d < a; ++d)
      before *= shape[d];
    for (size_t d = a + 1; d < shape.size(); ++d)
      after *= shape[d];
    for (int world : {2, 4}) {
      int64_t b = samples / world;
      std::vector<int64_t> local = shape;
      local[a] = p * b * inner;
      for (int r = 0; r < world; ++r) {
        // The one-rank element of rank r's element (o, k, i): o over the
        // axes before the batch axis, k along it, i over the axes after.
        auto global = [&](int64_t o, int64_t k, int64_t i) {
          int64_t g = k / (b * inner), s = k / inner % b, j = k % inner;
          int64_t gk = (g * samples + r * b + s) * inner + j;
          return (o * shape[a] + gk) * after + i;
        };
        std::vector<float> lx;
        for (int64_t o = 0; o < before; ++o)
          for (int64_t k = 0; k < local[a]; ++k)
            for (int64_t i = 0; i < after; ++i)
              lx.push_back(gx[global(o, k, i)]);
        Buf bx = f32(local, lx), by(DType::F32, local);
        RandomState s{77, 4, r, world};
        ASSERT_KERNEL_OK(
            runDropout(dropoutAttrs(0.3, 2, a, p), bx, by, nullptr, s));
        std::vector<float> ly = by.values<float>();
        int64_t n = 0;
        for (int64_t o = 0; o < before; ++o)
          for (int64_t k = 0; k < local[a]; ++k)
            for (int64_t i = 0; i < after; ++i, ++n)
              ASSERT_EQ(ly[n], gy[global(o, k, i)])
                  << "batch axis " << a << " (outer " << p << "), rank " << r
                  << " of " << world << ", element " << n;
      }
    }
  }
  // No batch axis: every rank draws what one rank draws.
  Buf x = randomF32({5, 4}, 4);
  Buf y0(DType::F32, {5, 4}), y1(DType::F32, {5, 4});
  ASSERT_KERNEL_OK(
      runDropout(dropoutAttrs(0.5, 0, -1), x, y0, nullptr, {1, 1, 0, 1}));
  ASSERT_KERNEL_OK(
      runDropout(dropoutAttrs(0.5, 0, -1), x, y1, nullptr, {1, 1, 3, 4}));
  EXPECT_EQ(y0.values<float>(), y1.values<float>());
}

/// The outer factor matters: [T*B, D] read as batch axis 0 without it (the
/// samples first) draws other masks on 2 ranks than with batch_outer T.
TEST(DropoutKernel, BatchOuterMovesTheSlabs) {
  Buf x = randomF32({6, 4}, 5);
  Buf plain(DType::F32, {6, 4}), merged(DType::F32, {6, 4});
  RandomState s{3, 1, 1, 2};
  ASSERT_KERNEL_OK(runDropout(dropoutAttrs(0.5, 0, 0), x, plain, nullptr, s));
  ASSERT_KERNEL_OK(
      runDropout(dropoutAttrs(0.5, 0, 0, 3), x, merged, nullptr, s));
  EXPECT_NE(plain.values<float>(), merged.values<float>());
}

TEST(DropoutKernel, KeepsNanAndInfLikeOnnx) {
  // ratio 0 keeps everything: x * 1.
  Buf x = f32({3}, {NAN, INFINITY, 2.0f});
  Buf y(DType::F32, {3});
  ASSERT_KERNEL_OK(runDropout(dropoutAttrs(0.0, 0, 0), x, y, nullptr));
  std::vector<float> v = y.values<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], INFINITY);
  EXPECT_EQ(v[2], 2.0f);
}

TEST(DropoutKernel, BadAttributesAndTypesAreErrors) {
  Buf x = f32({2, 2}, {1, 2, 3, 4});
  Buf y(DType::F32, {2, 2});
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(1.0, 0, 0), x, y, nullptr),
                      "ratio must be in [0, 1)");
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(0.5, -1, 0), x, y, nullptr),
                      "site must be");
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(0.5, 0, 2), x, y, nullptr),
                      "batch_axis 2");
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(0.5, 0, 0, 0), x, y, nullptr),
                      "batch_outer 0");
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(0.5, 0, 1, 3), x, y, nullptr),
                      "batch_outer 3");
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(0.5, 0, -1, 2), x, y, nullptr),
                      "batch_outer 2");
  Buf wrongMask(DType::F32, {2, 2});
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(0.5, 0, 0), x, y, &wrongMask),
                      "mask");
  Buf ix = i64({2}, {1, 2}), iy(DType::I64, {2});
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(0.5, 0, 0), ix, iy, nullptr),
                      "int64");
}

} // namespace
} // namespace shardc::rt::test
