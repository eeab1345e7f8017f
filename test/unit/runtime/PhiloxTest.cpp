//===- PhiloxTest.cpp - Philox4x32-10 and the dropout masks drawn from it -===//
//
// Known answers from Random123's tests/kat_vectors (DEShawResearch/random123
// at commit 9545ff6, lines 27-29, "philox4x32 10": counter, key, expected):
//
//   00000000 00000000 00000000 00000000  00000000 00000000
//     -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
//   ffffffff ffffffff ffffffff ffffffff  ffffffff ffffffff
//     -> 408f276d 41c83b0e a20bc7c6 6d5451fd
//   243f6a88 85a308d3 13198a2e 03707344  a4093822 299f31d0
//     -> d16cfe09 94fdcceb 5001e420 24126ea1
//
//===----------------------------------------------------------------------===//
#include "runtime/Philox.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace shardc::rt {
namespace {

struct Kat {
  Philox4x32Block counter;
  Philox4x32Key key;
  Philox4x32Block expected;
};

constexpr Kat kKats[] = {
    {{{0, 0, 0, 0}},
     {{0, 0}},
     {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};

// The generator is constexpr: the first known answer holds at compile time.
static_assert(philox4x32(kKats[0].counter, kKats[0].key).v[0] == 0x6627e8d5u);
static_assert(philox4x32(kKats[0].counter, kKats[0].key).v[3] == 0x9b00dbd8u);

TEST(Philox, Random123KnownAnswers) {
  for (const Kat &k : kKats) {
    Philox4x32Block got = philox4x32(k.counter, k.key);
    for (int w = 0; w < 4; ++w)
      EXPECT_EQ(got.v[w], k.expected.v[w])
          << "counter " << std::hex << k.counter.v[0] << " word " << w;
  }
}

TEST(Philox, DropoutBlockIsPhiloxOfSeedSiteAndStep) {
  // key = seed (low word first), counter = (block low, block high, site,
  // step): the layout a CUDA kernel must reproduce.
  uint64_t seed = 0x299f31d0a4093822ull, block = 0x85a308d3243f6a88ull;
  Philox4x32Block got = dropoutBlock(seed, 0x03707344, 0x13198a2e, block);
  for (int w = 0; w < 4; ++w)
    EXPECT_EQ(got.v[w], kKats[2].expected.v[w]);
}

TEST(Philox, ThresholdEnds) {
  EXPECT_EQ(dropoutThreshold(0.0), 0u);
  EXPECT_EQ(dropoutThreshold(0.5), uint64_t(1) << 31);
  EXPECT_EQ(dropoutThreshold(0.25), uint64_t(1) << 30);
  EXPECT_EQ(dropoutThreshold(1.0), uint64_t(1) << 32);
  // Ratio 0 keeps every word, even 0.
  EXPECT_TRUE(dropoutKeep(0, 0, 0, 0, dropoutThreshold(0.0)));
}

/// The keep rate over 10^6 elements is within 4 standard deviations of
/// 1 - ratio, for several ratios, seeds, steps and sites.
TEST(Philox, KeepRateMatchesRatio) {
  const int64_t n = 1000000;
  struct Draw {
    double ratio;
    uint64_t seed, step;
    uint32_t site;
  };
  for (Draw d : {Draw{0.1, 0, 0, 0}, Draw{0.2, 7, 3, 1}, Draw{0.5, 1234, 99, 5},
                 Draw{0.9, ~0ull, 1000000, 17}}) {
    uint64_t threshold = dropoutThreshold(d.ratio);
    int64_t kept = 0;
    for (int64_t g = 0; g < n; ++g)
      kept += dropoutKeep(d.seed, d.step, d.site, g, threshold);
    double p = 1.0 - d.ratio;
    double sigma = std::sqrt(n * p * (1.0 - p));
    EXPECT_LT(std::abs(kept - n * p), 4 * sigma)
        << "ratio " << d.ratio << ": kept " << kept << " of " << n;
  }
}

/// Masks of different steps, sites and seeds are unrelated: they agree on
/// about p^2 + (1-p)^2 of the elements (within 4 standard deviations), and
/// the same inputs give the same mask.
TEST(Philox, MasksDifferAcrossStepsSitesAndSeeds) {
  const int64_t n = 100000;
  const double ratio = 0.5;
  uint64_t threshold = dropoutThreshold(ratio);
  auto mask = [&](uint64_t seed, uint64_t step, uint32_t site) {
    std::vector<bool> m(n);
    for (int64_t g = 0; g < n; ++g)
      m[g] = dropoutKeep(seed, step, site, g, threshold);
    return m;
  };
  std::vector<bool> base = mask(1, 10, 2);
  EXPECT_EQ(mask(1, 10, 2), base);
  for (const std::vector<bool> &other :
       {mask(1, 11, 2), mask(1, 10, 3), mask(2, 10, 2)}) {
    int64_t same = 0;
    for (int64_t g = 0; g < n; ++g)
      same += other[g] == base[g];
    double p = 0.5, sigma = std::sqrt(n * p * (1 - p));
    EXPECT_LT(std::abs(same - n * p), 4 * sigma);
  }
}

} // namespace
} // namespace shardc::rt
