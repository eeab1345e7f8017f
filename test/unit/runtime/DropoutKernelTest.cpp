//===- DropoutKernelTest.cpp - The Dropout kernel -------------------------===//
//
// Scaling and keep rate, the mask output, determinism in (seed, step, site),
// and the global element index: N ranks holding slabs of a batch along the
// batch axis draw the mask one rank draws for the whole batch.
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

AttrMap dropoutAttrs(double ratio, int64_t site, int64_t batchAxis) {
  return attrs({{"ratio", floatv(ratio)},
                {"site", intv(site)},
                {"batch_axis", intv(batchAxis)}});
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

/// The global batch [2, 8, 3] with batch axis 1, on one rank, against the
/// same batch split over 2 and 4 ranks ([2, 8/N, 3] each): rank r's output
/// is slab r along axis 1 of the one-rank output. With batch axis 0 the
/// slabs are along axis 0; with -1 every rank draws the whole mask itself.
TEST(DropoutKernel, RanksDrawTheSlabsOfTheGlobalMask) {
  struct Layout {
    int64_t batchAxis;
    std::vector<int64_t> global;
  };
  for (Layout layout : {Layout{1, {2, 8, 3}}, Layout{0, {8, 2, 3}}}) {
    int64_t a = layout.batchAxis;
    Buf x = randomF32(layout.global, 3);
    Buf y(DType::F32, layout.global);
    RandomState one{77, 4, 0, 1};
    ASSERT_KERNEL_OK(runDropout(dropoutAttrs(0.3, 2, a), x, y, nullptr, one));
    std::vector<float> gx = x.values<float>(), gy = y.values<float>();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < a; ++d)
      outer *= layout.global[d];
    for (size_t d = a + 1; d < layout.global.size(); ++d)
      inner *= layout.global[d];
    int64_t rows = layout.global[a];
    for (int world : {2, 4}) {
      std::vector<int64_t> local = layout.global;
      local[a] = rows / world;
      int64_t chunk = local[a] * inner;
      for (int r = 0; r < world; ++r) {
        // Rank r's slab of the global input.
        std::vector<float> lx;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < chunk; ++i)
            lx.push_back(gx[(o * rows + r * local[a]) * inner + i]);
        Buf bx = f32(local, lx), by(DType::F32, local);
        RandomState s{77, 4, r, world};
        ASSERT_KERNEL_OK(
            runDropout(dropoutAttrs(0.3, 2, a), bx, by, nullptr, s));
        std::vector<float> ly = by.values<float>();
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < chunk; ++i)
            ASSERT_EQ(ly[o * chunk + i],
                      gy[(o * rows + r * local[a]) * inner + i])
                << "batch axis " << a << ", rank " << r << " of " << world;
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
  Buf wrongMask(DType::F32, {2, 2});
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(0.5, 0, 0), x, y, &wrongMask),
                      "mask");
  Buf ix = i64({2}, {1, 2}), iy(DType::I64, {2});
  EXPECT_KERNEL_ERROR(runDropout(dropoutAttrs(0.5, 0, 0), ix, iy, nullptr),
                      "int64");
}

} // namespace
} // namespace shardc::rt::test
