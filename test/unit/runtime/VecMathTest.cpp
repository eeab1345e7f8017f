//===- VecMathTest.cpp - The vectorized CPU loops, on every path ----------===//
//
// runtime/cpu/VecMath.h: exp and erf within their documented error of the
// double-precision library functions, their special values, and every
// instruction-set path this CPU can run computing the same bits as every
// other, with lengths that leave remainders, and AdamUpdate's loop the bits
// of ops::AdamStep::apply, in place or not.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/VecMath.h"
#include "runtime/kernels/FusedOps.h"
#include "test/unit/runtime/KernelTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace shardc::rt;
using namespace shardc::rt::cpu;
using shardc::rt::test::randomFloats;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The float spacing at |r| (r a normal float's magnitude).
double ulpAt(double r) {
  return std::ldexp(1.0, std::ilogb(static_cast<float>(r)) - 23);
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(VecMath, TheBestPathComesFirstAndBaseIsAlwaysThere) {
  llvm::ArrayRef<vec::Path> paths = vec::availablePaths();
  ASSERT_FALSE(paths.empty());
  EXPECT_STREQ(paths.back().name, "base");
  if (!std::getenv("SHARD_CPU_PATH")) {
    EXPECT_STREQ(vec::activePath().name, paths.front().name);
  }
}

TEST(VecMath, ExpIsWithinTwoUlpWhereTheResultIsNormal) {
  for (const vec::Path &p : vec::availablePaths()) {
    std::vector<float> x;
    for (float v = -87.3f; v < 88.7f; v += 0.000731f)
      x.push_back(v);
    std::vector<float> y(x.size());
    p.expArray(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double r = std::exp(static_cast<double>(x[i]));
      worst = std::max(worst, std::fabs(y[i] - r) / ulpAt(r));
    }
    EXPECT_LE(worst, 2.0) << p.name;
  }
}

TEST(VecMath, ExpSpecialValues) {
  for (const vec::Path &p : vec::availablePaths()) {
    // 17 values: a full step of every width and a remainder.
    std::vector<float> x = {0.0f,   -0.0f,   kInf,   -kInf,   kNaN,   88.72f,
                            88.73f, -87.33f, -87.4f, -200.0f, 1.0f,   -1.0f,
                            1e-30f, 0.5f,    10.0f,  89.0f,   -104.0f};
    std::vector<float> y(x.size());
    p.expArray(x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y[0], 1.0f) << p.name;
    EXPECT_EQ(y[1], 1.0f) << p.name;
    EXPECT_EQ(y[2], kInf) << p.name;
    EXPECT_EQ(y[3], 0.0f) << p.name;
    EXPECT_TRUE(std::isnan(y[4])) << p.name;
    EXPECT_TRUE(std::isfinite(y[5]) && y[5] > 3.3e38f) << p.name;
    EXPECT_EQ(y[6], kInf) << p.name;
    EXPECT_GT(y[7], 0.0f) << p.name;
    EXPECT_EQ(y[8], 0.0f) << p.name; // below FLT_MIN: flushed
    EXPECT_EQ(y[9], 0.0f) << p.name;
    EXPECT_NEAR(y[10], 2.7182817f, 3e-7f) << p.name;
    EXPECT_EQ(y[15], kInf) << p.name;
    EXPECT_EQ(y[16], 0.0f) << p.name;
  }
}

TEST(VecMath, ErfIsWithinItsBounds) {
  for (const vec::Path &p : vec::availablePaths()) {
    std::vector<float> x;
    for (float v = -6.0f; v < 6.0f; v += 0.0001f)
      x.push_back(v);
    for (float v = 1e-30f; v < 0.9f; v *= 1.01f) {
      x.push_back(v);
      x.push_back(-v);
    }
    std::vector<float> y(x.size());
    p.erfArray(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worstUlp = 0, worstAbs = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double r = std::erf(static_cast<double>(x[i]));
      double err = std::fabs(y[i] - r);
      if (std::fabs(x[i]) < 0.9f && r != 0)
        worstUlp = std::max(worstUlp, err / ulpAt(r));
      else
        worstAbs = std::max(worstAbs, err);
    }
    EXPECT_LE(worstUlp, 3.0) << p.name;
    EXPECT_LE(worstAbs, 2.4e-7) << p.name;
    float special[] = {kInf, -kInf, kNaN, 0.0f, -0.0f};
    float out[5];
    p.erfArray(special, out, 5);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], -1.0f);
    EXPECT_TRUE(std::isnan(out[2]));
    EXPECT_EQ(out[3], 0.0f);
    EXPECT_TRUE(std::signbit(out[4]));
  }
}

TEST(VecMath, MaxOfPropagatesNaNAndHandlesEmptyAndInfinite) {
  for (const vec::Path &p : vec::availablePaths()) {
    std::vector<float> x = randomFloats(37, 1, -5, 5);
    x[20] = 7.5f;
    EXPECT_EQ(p.maxOf(x.data(), 37), 7.5f) << p.name;
    EXPECT_EQ(p.maxOf(x.data(), 0), -kInf) << p.name;
    for (size_t at : {3u, 20u, 36u}) { // in a full step and in the remainder
      std::vector<float> y = x;
      y[at] = kNaN;
      EXPECT_TRUE(std::isnan(p.maxOf(y.data(), 37))) << p.name << " " << at;
    }
    std::vector<float> masked(40, -kInf);
    EXPECT_EQ(p.maxOf(masked.data(), 40), -kInf) << p.name;
    EXPECT_EQ(vec::softmaxShift(masked.data(), 40), 0.0f);
  }
}

/// maxOf's chains and lane tree: the largest value wherever it stands (each
/// chain, each lane, the remainder), NaN from any position, and one result
/// on every path where +0 and -0 tie.
TEST(VecMath, MaxOfFindsTheLargestInEveryChainAndLane) {
  llvm::ArrayRef<vec::Path> paths = vec::availablePaths();
  for (int64_t n : {64, 130, 200}) {
    std::vector<float> x = randomFloats(n, 21 + n, -5, -1);
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> y = x;
      y[at] = 3.25f;
      std::vector<float> z = x;
      z[at] = kNaN;
      for (const vec::Path &p : paths) {
        ASSERT_EQ(p.maxOf(y.data(), n), 3.25f) << p.name << " at " << at;
        ASSERT_TRUE(std::isnan(p.maxOf(z.data(), n))) << p.name << " at " << at;
      }
    }
    std::vector<float> zeros(n);
    for (int64_t i = 0; i < n; ++i)
      zeros[i] = (i * 7) % 3 ? 0.0f : -0.0f;
    float ref = paths.front().maxOf(zeros.data(), n);
    EXPECT_EQ(ref, 0.0f);
    for (const vec::Path &p : paths.drop_front())
      EXPECT_TRUE(sameBits(p.maxOf(zeros.data(), n), ref)) << p.name;
  }
}

/// scale and addToDouble: x * s and acc + x, element by element, on every
/// path (lengths with remainders; in place for scale).
TEST(VecMath, ScaleAndAddToDoubleAreElementwiseOnEveryPath) {
  for (int64_t n : {1, 15, 16, 17, 1000}) {
    std::vector<float> x = randomFloats(n, 31 + n, -3, 3);
    std::vector<float> acc0 = randomFloats(n, 37 + n, -1e6, 1e6);
    for (const vec::Path &p : vec::availablePaths()) {
      std::vector<float> y = x;
      p.scale(y.data(), 0.37f, n);
      std::vector<double> acc(acc0.begin(), acc0.end());
      p.addToDouble(acc.data(), x.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(sameBits(y[i], x[i] * 0.37f)) << p.name << " " << i;
        ASSERT_EQ(acc[i], static_cast<double>(acc0[i]) + x[i])
            << p.name << " " << i;
      }
    }
  }
}

/// Division by a scalar through its reciprocal: where a path says it
/// divides by c, every float's quotient is the division's, bit for bit:
/// random values over the whole exponent range, zeros, infinities, NaN,
/// subnormals, the extremes; paths without fused multiply-add say no.
TEST(VecMath, ReciprocalDivisionIsTheDivisionWhereAPathTakesIt) {
  std::vector<float> x = randomFloats(4000, 41, -2, 2);
  std::mt19937 rng(43);
  std::uniform_int_distribution<uint32_t> anyBits;
  for (int i = 0; i < 20000; ++i) {
    uint32_t b = anyBits(rng);
    float f;
    std::memcpy(&f, &b, sizeof f);
    x.push_back(f);
  }
  for (float f : {0.0f, -0.0f, kInf, -kInf, kNaN, 1e-45f, -1e-40f, 1.17e-38f,
                  3.4e38f, -3.4e38f, 0x1p-60f, 0x1p60f, 0x1.fffffep59f})
    x.push_back(f);
  int takes = 0;
  for (float c : {1.41421354f, -3.0f, 7.0f, 0.7f, 5.65685415f, 1e-9f}) {
    for (const vec::Path &p : vec::availablePaths()) {
      if (!p.reciprocalDivides(c))
        continue;
      ++takes;
      std::vector<float> out(x.size());
      p.divideByReciprocal(x.data(), c, 1.0f / c, out.data(), x.size());
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_TRUE(sameBits(out[i], x[i] / c) ||
                    (std::isnan(out[i]) && std::isnan(x[i] / c)))
            << p.name << ": " << x[i] << " / " << c << " gave " << out[i];
    }
  }
  // Where a path has fused multiply-add, sqrt(2) (GELU's divisor) qualifies.
  for (const vec::Path &p : vec::availablePaths()) {
    bool fma = llvm::StringRef(p.name) != "base";
    EXPECT_EQ(p.reciprocalDivides(1.41421354f), fma) << p.name;
    for (float c : {0.0f, kInf, kNaN, 0x1p40f, 1e-12f})
      EXPECT_FALSE(p.reciprocalDivides(c)) << p.name << " " << c;
  }
  if (vec::availablePaths().size() > 1) {
    EXPECT_GT(takes, 0);
  }
  // The remembered answer is the active path's.
  std::optional<float> r = vec::divisorReciprocal(1.41421354f);
  EXPECT_EQ(r.has_value(), vec::activePath().reciprocalDivides(1.41421354f));
  if (r) {
    EXPECT_EQ(*r, 1.0f / 1.41421354f);
  }
}

/// Every path's results, compared bit for bit with the first path's.
TEST(VecMath, EveryPathComputesTheSameBits) {
  llvm::ArrayRef<vec::Path> paths = vec::availablePaths();
  for (int64_t n : {1, 15, 16, 17, 1000, 8195}) {
    std::vector<float> x = randomFloats(n, 7 + n, -30, 30);
    std::vector<float> refExp(n), refErf(n), refTerms(n);
    const vec::Path &ref = paths.front();
    ref.expArray(x.data(), refExp.data(), n);
    ref.erfArray(x.data(), refErf.data(), n);
    float refMax = ref.maxOf(x.data(), n);
    double refSum = ref.expSum(x.data(), refMax, refTerms.data(), n);
    EXPECT_EQ(ref.expSum(x.data(), refMax, nullptr, n), refSum);
    for (const vec::Path &p : paths.drop_front()) {
      std::vector<float> e(n), f(n), t(n);
      p.expArray(x.data(), e.data(), n);
      p.erfArray(x.data(), f.data(), n);
      float m = p.maxOf(x.data(), n);
      double s = p.expSum(x.data(), m, t.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(sameBits(e[i], refExp[i])) << p.name << " exp " << x[i];
        ASSERT_TRUE(sameBits(f[i], refErf[i])) << p.name << " erf " << x[i];
        ASSERT_TRUE(sameBits(t[i], refTerms[i])) << p.name << " term " << i;
      }
      EXPECT_TRUE(sameBits(m, refMax)) << p.name;
      EXPECT_EQ(s, refSum) << p.name << " n=" << n;
    }
  }
}

/// LayerNorm rows, forward and backward: every path computes the same bits,
/// and those are within float rounding of a double-precision reference (an
/// offset mean of 100 checks the two-pass variance and the centred
/// gradient).
TEST(VecMath, LayerNormRowsAreOneResultOnEveryPath) {
  llvm::ArrayRef<vec::Path> paths = vec::availablePaths();
  for (int64_t n : {1, 15, 16, 17, 256, 1000}) {
    std::vector<float> x = randomFloats(n, 3 + n, 99, 101);
    std::vector<float> w = randomFloats(n, 5 + n, -2, 2);
    std::vector<float> b = randomFloats(n, 9 + n, -1, 1);
    std::vector<float> dy = randomFloats(n, 11 + n, -1, 1);
    // The reference, in double.
    double mu = 0, var = 0;
    for (float v : x)
      mu += v;
    mu /= n;
    for (float v : x)
      var += (v - mu) * (v - mu);
    var /= n;
    double a = 1.0 / std::sqrt(var + 1e-5);
    double sumG = 0, sumGX = 0;
    for (int64_t i = 0; i < n; ++i) {
      sumG += double(dy[i]) * w[i];
      sumGX += double(dy[i]) * w[i] * (x[i] - mu) * a;
    }
    std::vector<float> refY, refDx;
    std::vector<double> refDs, refDb;
    for (const vec::Path &p : paths) {
      std::vector<float> y(n), dx(n);
      std::vector<double> ds(n, 0.5), db(n, -0.5); // accumulated into
      double mean = 0, inv = 0;
      p.layerNormRow(x.data(), w.data(), b.data(), 1e-5, y.data(), n, &mean,
                     &inv);
      EXPECT_NEAR(mean, mu, 1e-5 * 100) << p.name;
      EXPECT_NEAR(inv, a, 1e-4 * a) << p.name;
      p.layerNormGradRow(dy.data(), x.data(), w.data(), mean, inv, dx.data(),
                         ds.data(), db.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        double xhat = (x[i] - mu) * a;
        EXPECT_NEAR(y[i], xhat * w[i] + b[i], 2e-3) << p.name << " y " << i;
        double g = double(dy[i]) * w[i];
        double wantDx = a * (g - sumG / n - xhat * sumGX / n);
        EXPECT_NEAR(dx[i], wantDx, 2e-3 * a) << p.name << " dx " << i;
        EXPECT_NEAR(ds[i], 0.5 + dy[i] * xhat, 2e-3) << p.name;
        EXPECT_DOUBLE_EQ(db[i], -0.5 + dy[i]) << p.name;
      }
      // Without dx only the accumulators move.
      std::vector<double> ds2(n, 0.0), db2(n, 0.0);
      p.layerNormGradRow(dy.data(), x.data(), w.data(), mean, inv, nullptr,
                         ds2.data(), db2.data(), n);
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(ds2[i] + 0.5, ds[i]) << p.name;
      // No bias: y less b.
      std::vector<float> y0(n);
      p.layerNormRow(x.data(), w.data(), nullptr, 1e-5, y0.data(), n, &mean,
                     &inv);
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(y0[i], y[i] - b[i], 1e-5) << p.name;
      if (refY.empty()) {
        refY = y, refDx = dx, refDs = ds, refDb = db;
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(sameBits(y[i], refY[i])) << p.name << " y " << i;
        ASSERT_TRUE(sameBits(dx[i], refDx[i])) << p.name << " dx " << i;
        ASSERT_EQ(ds[i], refDs[i]) << p.name << " dScale " << i;
        ASSERT_EQ(db[i], refDb[i]) << p.name << " dBias " << i;
      }
    }
  }
}

TEST(VecMath, SoftmaxGradRowsAreOneResultOnEveryPath) {
  llvm::ArrayRef<vec::Path> paths = vec::availablePaths();
  for (int64_t n : {1, 15, 16, 17, 64, 1000}) {
    std::vector<float> y = randomFloats(n, 21 + n, 0, 1);
    std::vector<float> dy = randomFloats(n, 23 + n, -1, 1);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += double(dy[i]) * y[i];
    std::vector<float> ref;
    for (const vec::Path &p : paths) {
      std::vector<float> dx(n);
      p.softmaxGradRow(dy.data(), y.data(), dx.data(), n);
      for (int64_t i = 0; i < n; ++i)
        EXPECT_NEAR(dx[i], y[i] * (dy[i] - sum), 1e-5) << p.name << " " << i;
      // In place over dy, as a plan may place it.
      std::vector<float> inPlace = dy;
      p.softmaxGradRow(inPlace.data(), y.data(), inPlace.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(sameBits(inPlace[i], dx[i])) << p.name << " " << i;
      if (ref.empty()) {
        ref = dx;
        continue;
      }
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(sameBits(dx[i], ref[i])) << p.name << " " << i;
    }
  }
}

TEST(VecMath, AdamIsAdamStepOnEveryPathInPlaceOrNot) {
  const int64_t n = 1003;
  std::vector<float> p0 = randomFloats(n, 11, -1, 1);
  std::vector<float> g0 = randomFloats(n, 12, -1, 1);
  std::vector<float> m0 = randomFloats(n, 13, -0.1f, 0.1f);
  std::vector<float> v0 = randomFloats(n, 14, 0, 0.01f);
  float scale = 0.25f;
  for (bool decoupled : {false, true})
    for (double wd : {0.0, 0.01})
      for (bool scaled : {false, true}) {
        ops::AdamHyper h;
        h.weightDecay = wd;
        h.decoupled = decoupled;
        auto s = ops::AdamStep<float>::make(h, 3.0, scaled ? &scale : nullptr);
        std::vector<float> rp(n), rm(n), rv(n);
        for (int64_t i = 0; i < n; ++i)
          s.apply(p0[i], g0[i], m0[i], v0[i], rp[i], rm[i], rv[i]);
        for (const vec::Path &path : vec::availablePaths()) {
          std::vector<float> op(n), om(n), ov(n);
          path.adam(s, p0.data(), g0.data(), m0.data(), v0.data(), op.data(),
                    om.data(), ov.data(), n);
          std::vector<float> ip = p0, im = m0, iv = v0;
          path.adam(s, ip.data(), g0.data(), im.data(), iv.data(), ip.data(),
                    im.data(), iv.data(), n);
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_TRUE(sameBits(op[i], rp[i]) && sameBits(om[i], rm[i]) &&
                        sameBits(ov[i], rv[i]))
                << path.name << " element " << i << " decoupled " << decoupled
                << " wd " << wd << " scaled " << scaled;
            ASSERT_TRUE(sameBits(ip[i], rp[i]) && sameBits(im[i], rm[i]) &&
                        sameBits(iv[i], rv[i]))
                << path.name << " in place, element " << i;
          }
        }
      }
}

} // namespace

namespace {

// The fused instructions are their single ops' functors (ElementOps.h) bit
// for bit on every path, special values included: NaN (which NaN comes out
// is not compared: Max and Min must give one where the functor does),
// signed zeros, infinities, a denormal; a length that leaves a remainder on
// every width.
TEST(VecMath, FusedInstructionsAreTheirFunctorsOnEveryPath) {
  std::vector<float> specials = {0.0f,  -0.0f, 1.0f,   -1.0f,  kInf,
                                 -kInf, kNaN,  -kNaN,  1e-40f, -2.5f,
                                 3.0f,  0.5f,  -0.75f, 7.25f,  100.0f};
  std::vector<float> a, b, c;
  for (float x : specials)
    for (float y : specials) {
      a.push_back(x);
      b.push_back(y);
      c.push_back(x == x ? -y : 0.0f);
    }
  std::vector<float> r = randomFloats(37, 5, -4.0f, 4.0f);
  a.insert(a.end(), r.begin(), r.end());
  b.insert(b.end(), r.rbegin(), r.rend());
  c.insert(c.end(), r.begin(), r.end());
  int64_t n = static_cast<int64_t>(a.size());
  std::vector<float> cond(n);
  for (int64_t i = 0; i < n; ++i)
    cond[i] = (i % 3) == 0 ? 1.0f : 0.0f;
  using ops::FusedOpcode;
  for (const ops::FusedOpInfo &info : ops::kFusedOps) {
    SCOPED_TRACE(std::string(info.name));
    const float *x = ops::readsBool(info.code, 0) ? cond.data() : a.data();
    for (const vec::Path &path : vec::availablePaths()) {
      SCOPED_TRACE(path.name);
      std::vector<float> out(n, 42.0f), want(n);
      if (!path.fused(info.code, x, b.data(), c.data(), out.data(), n))
        continue; // Computed by the functor itself (fusedApply).
      // Exp and Erf are the path's own loops (tested above); the rest the
      // functors.
      if (info.code == FusedOpcode::Exp)
        path.expArray(x, want.data(), n);
      else if (info.code == FusedOpcode::Erf)
        path.erfArray(x, want.data(), n);
      else
        for (int64_t i = 0; i < n; ++i)
          want[i] = ops::fusedApply(info.code, x[i], b[i], c[i]);
      // A NaN's sign and payload are the compiler's choice (it may swap
      // the operands of a + b): any NaN for a NaN.
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(want[i]) && std::isnan(out[i]))
          continue;
        ASSERT_TRUE(sameBits(out[i], want[i]))
            << "element " << i << " (" << x[i] << ", " << b[i] << ", " << c[i]
            << "): " << out[i] << ", functor " << want[i];
      }
    }
  }
}

} // namespace
