//===- VecMathImpl.h - The loops of VecMath.h, per ISA ----------*- C++ -*-===//
//
// Included once by each of VecMathAvx512.cpp, VecMathAvx2.cpp and
// VecMathBase.cpp, which define SHARDC_VEC_ISA (the namespace of that
// instruction set's loops) and SHARDC_VEC_WIDTH (its floats per register),
// and are compiled with its -march. Everything here has internal linkage or
// lives in that namespace, and calls no library function (only compiler
// builtins), so the three copies never meet at link time: an inline
// function shared between them, emitted out of line in a debug build, could
// be resolved to the AVX-512 copy on a CPU without it.
//
// The loops work on Floats values of SHARDC_VEC_WIDTH floats (16, 8 or 4:
// one register of the instruction set), GCC's vector extensions, which Clang
// has too. A reduction steps kLanes floats at a time, kParts registers, and
// combines its kLanes partial results in one fixed order, so every width adds
// in the same order (a tree, laneTotal). The remainder goes one float at a
// time through the same element functions.
//
//===----------------------------------------------------------------------===//
#if !defined(SHARDC_VEC_ISA) || !defined(SHARDC_VEC_WIDTH)
#error                                                                         \
    "define SHARDC_VEC_ISA and SHARDC_VEC_WIDTH before including VecMathImpl.h"
#endif

#include "runtime/cpu/VecMath.h"

#include <type_traits>

namespace shardc::rt::cpu::vec {
namespace {

/// Every helper is inlined into the loops: they pass kLanes-float vectors
/// by value.
#define SHARDC_VEC_INLINE inline __attribute__((always_inline))
/// Before a loop whose iterations touch disjoint elements (each read before
/// it is written): lets the compiler vectorize it without proving so.
#if defined(__clang__)
#define SHARDC_VEC_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define SHARDC_VEC_IVDEP _Pragma("GCC ivdep")
#else
#define SHARDC_VEC_IVDEP
#endif

/// One register of floats and of int32s.
typedef float Floats __attribute__((vector_size(4 * SHARDC_VEC_WIDTH)));
typedef int32_t Ints __attribute__((vector_size(4 * SHARDC_VEC_WIDTH)));
constexpr int kWidth = SHARDC_VEC_WIDTH;
/// The registers a loop step of kLanes floats takes.
constexpr int kParts = kLanes / kWidth;
static_assert(kParts * kWidth == kLanes, "the width must divide kLanes");

/// The element functions below are written once for a float and for
/// Floats: `Lanes<F>` is the matching integer type, `splat<F>(c)` the
/// constant c in every lane, `toInts` the conversion (toward zero).
template <typename F> struct LanesOf { using type = int32_t; };
template <> struct LanesOf<Floats> { using type = Ints; };
template <typename F> using Lanes = typename LanesOf<F>::type;
template <typename F> SHARDC_VEC_INLINE F splat(float c) {
  if constexpr (std::is_same_v<F, float>)
    return c;
  else
    return F{} + c;
}
template <typename F> SHARDC_VEC_INLINE Lanes<F> toInts(F v) {
  if constexpr (std::is_same_v<F, float>)
    return static_cast<int32_t>(v);
  else
    return __builtin_convertvector(v, Ints);
}
template <typename F> SHARDC_VEC_INLINE F select(bool c, F a, F b) {
  return c ? a : b;
}
template <typename F, typename M> SHARDC_VEC_INLINE F select(M c, F a, F b) {
  return c ? a : b;
}

/// exp(x), branch-free: x = n ln2 + r with |r| <= ln2 / 2 (Cody and Waite's
/// two-part ln2), Cephes expf's polynomial for exp(r), and 2^n put into the
/// exponent bits. Overflows to +inf above log(FLT_MAX), flushes to 0 below
/// log(FLT_MIN), keeps NaN.
template <typename F> SHARDC_VEC_INLINE F expOf(F x) {
  const F lo = splat<F>(-87.33654022216797f); // log(FLT_MIN)
  // log(FLT_MAX) rounded up: exp of it overflows to inf, as it should.
  const F hi = splat<F>(88.72283935546875f);
  // NaN becomes 0 here (the result keeps it below): converting NaN to an
  // integer is undefined.
  F c =
      select(x < lo, lo, select(x > hi, hi, select(x != x, splat<F>(0.0f), x)));
  // Round c / ln2 to the nearest integer without a rounding instruction:
  // adding 1.5 * 2^23 leaves no fraction bits.
  const float shift = 12582912.0f;
  F n = (c * 1.44269504088896341f + shift) - shift;
  F r = c - n * 0.693359375f;  // ln2's leading bits: n * this is exact
  r = r - n * -2.12194440e-4f; // the rest of ln2
  F p = splat<F>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n in two factors, so that n = 128 (c near hi) stays finite.
  Lanes<F> ni = toInts(n);
  Lanes<F> half = ni >> 1;
  Lanes<F> b1 = (half + 127) << 23, b2 = (ni - half + 127) << 23;
  F s1, s2;
  __builtin_memcpy(&s1, &b1, sizeof s1);
  __builtin_memcpy(&s2, &b2, sizeof s2);
  F y = p * s1 * s2;
  y = select(x < lo, splat<F>(0.0f), y);
  y = select(x > hi, splat<F>(__builtin_huge_valf()), y);
  return select(x != x, x, y);
}

/// erf(x): for |x| < 0.9 its Taylor series to x^17 (x P(x^2)); above,
/// sign(x) (1 - t (a1 + t (a2 + ... t a5)) exp(-x^2)), t = 1 / (1 + p |x|)
/// (Abramowitz and Stegun 7.1.26). Both are computed and one is selected.
/// `gauss` is exp(-(x * x)), expOf's bits (erfAndGaussian computes it once
/// for erf and for a gradient that reads it).
template <typename F> SHARDC_VEC_INLINE F erfOf(F x, F gauss) {
  F z = x * x;
  F s = splat<F>(1.6462114366e-6f);
  s = s * z - 1.4925650358e-5f;
  s = s * z + 1.2055332982e-4f;
  s = s * z - 8.5483270235e-4f;
  s = s * z + 5.2239776254e-3f;
  s = s * z - 2.6866170645e-2f;
  s = s * z + 1.1283791671e-1f;
  s = s * z - 3.7612638903e-1f;
  s = s * z + 1.1283791671e+0f;
  F small = x * s;
  F a = select(x < 0.0f, -x, x);
  F t = 1.0f / (1.0f + 0.3275911f * a);
  F q = splat<F>(1.061405429f);
  q = q * t - 1.453152027f;
  q = q * t + 1.421413741f;
  q = q * t - 0.284496736f;
  q = q * t + 0.254829592f;
  F y = 1.0f - q * t * gauss;
  y = select(x < 0.0f, -y, y);
  return select(a < 0.9f, small, y);
}
template <typename F> SHARDC_VEC_INLINE F erfOf(F x) {
  return erfOf(x, expOf(-(x * x)));
}

SHARDC_VEC_INLINE Floats load(const float *p) {
  Floats v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
SHARDC_VEC_INLINE void store(float *p, Floats v) {
  __builtin_memcpy(p, &v, sizeof v);
}

/// The sum of kLanes float lanes in double, as a tree (lane j plus lane
/// j + h, h halving from kLanes / 2): every width adds in this order, in a
/// few dependent steps instead of kLanes.
SHARDC_VEC_INLINE double laneTotal(const Floats (&s)[kParts]) {
  double t[kLanes];
  for (int j = 0; j < kLanes; ++j)
    t[j] = s[j / kWidth][j % kWidth];
  for (int h = kLanes / 2; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j)
      t[j] += t[j + h];
  return t[0];
}

/// ops::AdamStep::apply with its flags fixed, so that the loop has no
/// branch. Each element is read before it is written and no other element
/// is touched: `ivdep` (Clang: `assume_safety`) lets the compiler vectorize the
/// in-place update, and sqrt vectorizes with -fno-math-errno (CMakeLists.txt).
template <bool Scaled, bool Decoupled, bool Wd>
void adamLoop(const ops::AdamStep<float> &step, const float *p, const float *g,
              const float *m, const float *v, float *outP, float *outM,
              float *outV, int64_t n) {
  // A copy the outputs cannot alias, so that its fields stay in registers.
  const ops::AdamStep<float> s = step;
  SHARDC_VEC_IVDEP
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i], pi = p[i];
    if (Scaled)
      gi = gi * s.gradScale;
    if (Decoupled)
      pi = pi * s.decay;
    else if (Wd)
      gi = gi + s.wd * pi;
    float mi = m[i] * s.b1 + s.oneMinusB1 * gi;
    float vi = v[i] * s.b2 + s.oneMinusB2 * gi * gi;
    float denom = __builtin_sqrtf(vi) / s.bc2Sqrt + s.eps;
    outM[i] = mi;
    outV[i] = vi;
    outP[i] = pi + s.negStepSize * mi / denom;
  }
}

/// a * b + c rounded once, on the paths whose instruction set has a fused
/// multiply-add (AVX2 and AVX-512; -ffp-contract=off never makes one).
#if SHARDC_VEC_WIDTH == 16 || SHARDC_VEC_WIDTH == 8
constexpr bool kHasFma = true;
SHARDC_VEC_INLINE Floats fmaOf(Floats a, Floats b, Floats c) {
#if SHARDC_VEC_WIDTH == 16
  return __builtin_ia32_vfmaddps512_mask(a, b, c, -1, 4);
#else
  return __builtin_ia32_vfmaddps256(a, b, c);
#endif
}
#else
constexpr bool kHasFma = false;
SHARDC_VEC_INLINE Floats fmaOf(Floats a, Floats b, Floats c) {
  return a * b + c; // never called: kHasFma is false
}
#endif

/// Whether every lane of a comparison's result (-1 or 0) is true: the
/// lanes' sign bits as one mask.
SHARDC_VEC_INLINE bool allOf(Ints m) {
#if SHARDC_VEC_WIDTH == 16
  return __builtin_ia32_cvtd2mask512(m) == 0xffff;
#elif SHARDC_VEC_WIDTH == 8
  Floats f;
  __builtin_memcpy(&f, &m, sizeof f);
  return __builtin_ia32_movmskps256(f) == 0xff;
#else
  int32_t all = -1;
  for (int k = 0; k < kWidth; ++k)
    all &= m[k];
  return all != 0;
#endif
}

/// a / c where a reciprocalDivides(c): q = a r, its remainder a - q c
/// (exact, one fused multiply-add), and q + e r rounded once. Outside
/// [2^-60, 2^60] (zeros, infinities, NaN, the tiny and the huge) a lane takes
/// the division itself.
SHARDC_VEC_INLINE Floats divideByReciprocalOf(Floats a, Floats c, Floats r) {
  Floats q = a * r;
  Floats e = fmaOf(-q, c, a);
  Floats o = fmaOf(e, r, q);
  Ints bits;
  __builtin_memcpy(&bits, &a, sizeof bits);
  Floats mag;
  Ints absBits = bits & 0x7fffffff;
  __builtin_memcpy(&mag, &absBits, sizeof mag);
  Ints safe = (mag >= 0x1p-60f) & (mag <= 0x1p60f);
  if (__builtin_expect(allOf(safe), 1))
    return o;
  return safe ? o : a / c;
}

/// out[i] = f(i) for i < n; the compiler vectorizes it at this file's width.
/// The operands are the fused kernel's distinct blocks, or one array read
/// and written element by element in place: `ivdep` is safe.
template <typename Fn>
SHARDC_VEC_INLINE void eachElement(float *out, int64_t n, Fn f) {
  SHARDC_VEC_IVDEP
  for (int64_t i = 0; i < n; ++i)
    out[i] = f(i);
}

/// m, or v where v is larger or NaN.
template <typename F> SHARDC_VEC_INLINE F maxStep(F m, F v) {
  return select((v > m) | (v != v), v, m);
}

} // namespace

namespace SHARDC_VEC_ISA {

void expArray(const float *x, float *out, int64_t n) {
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth)
    store(out + i, expOf(load(x + i)));
  for (; i < n; ++i)
    out[i] = expOf(x[i]);
}

void erfArray(const float *x, float *out, int64_t n) {
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth)
    store(out + i, erfOf(load(x + i)));
  for (; i < n; ++i)
    out[i] = erfOf(x[i]);
}

void erfAndGaussian(const float *x, float *erfOut, float *gaussOut, int64_t n) {
  int64_t i = 0;
  for (; i + kWidth <= n; i += kWidth) {
    Floats v = load(x + i);
    Floats g = expOf(-(v * v));
    store(gaussOut + i, g);
    store(erfOut + i, erfOf(v, g));
  }
  for (; i < n; ++i) {
    float g = expOf(-(x[i] * x[i]));
    gaussOut[i] = g;
    erfOut[i] = erfOf(x[i], g);
  }
}

float maxOf(const float *x, int64_t n) {
  // kChains independent chains of kLanes lanes, so that the loop is not
  // bound by one chain's latency: element i goes to chain lane
  // i % (kChains * kLanes), in order; the lanes then combine as a tree
  // (lane j with lane j + h, h halving), which every width computes alike.
  constexpr int kChains = 4;
  constexpr int kRegs = kChains * kParts;
  constexpr int kStep = kChains * kLanes;
  Floats m[kRegs];
  for (int k = 0; k < kRegs; ++k)
    m[k] = splat<Floats>(-__builtin_huge_valf());
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep)
    for (int k = 0; k < kRegs; ++k)
      m[k] = maxStep(m[k], load(x + i + k * kWidth));
  for (int h = kRegs / 2; h >= 1; h /= 2)
    for (int k = 0; k < h; ++k)
      m[k] = maxStep(m[k], m[k + h]);
  float lane[kWidth];
  for (int j = 0; j < kWidth; ++j)
    lane[j] = m[0][j];
  for (int h = kWidth / 2; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j)
      lane[j] = maxStep(lane[j], lane[j + h]);
  float r = lane[0];
  for (; i < n; ++i)
    r = maxStep(r, x[i]);
  return r;
}

double expSum(const float *x, float shift, float *out, int64_t n) {
  Floats s[kParts] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kParts; ++k) {
      Floats e = expOf(load(x + i + k * kWidth) - shift);
      if (out)
        store(out + i + k * kWidth, e);
      s[k] += e;
    }
  double total = laneTotal(s);
  for (; i < n; ++i) {
    float e = expOf(x[i] - shift);
    if (out)
      out[i] = e;
    total += e;
  }
  return total;
}

bool reciprocalDivides(float c) {
  float mag = c < 0 ? -c : c;
  if (!kHasFma || !(mag >= 0x1p-30f && mag <= 0x1p30f))
    return false;
  float r = 1.0f / c;
  const Floats vc = splat<Floats>(c), vr = splat<Floats>(r);
  // Every significand: a in [1, 2). Scaling a by a power of two scales
  // every step exactly within the range divideByReciprocalOf takes.
  Ints step;
  for (int k = 0; k < kWidth; ++k)
    step[k] = k;
  for (int32_t s = 0; s < (1 << 23); s += kWidth) {
    Ints bits = (0x3f800000 + s) + step;
    Floats a;
    __builtin_memcpy(&a, &bits, sizeof a);
    Floats q = a * vr;
    Floats o = fmaOf(fmaOf(-q, vc, a), vr, q);
    if (!allOf(o == a / vc))
      return false;
  }
  return true;
}

void divideByReciprocal(const float *a, float c, float r, float *out,
                        int64_t n) {
  const Floats vc = splat<Floats>(c), vr = splat<Floats>(r);
  int64_t i = 0;
  if constexpr (kHasFma)
    for (; i + kWidth <= n; i += kWidth)
      store(out + i, divideByReciprocalOf(load(a + i), vc, vr));
  for (; i < n; ++i)
    out[i] = a[i] / c; // the same bits: reciprocalDivides(c)
}

void adam(const ops::AdamStep<float> &s, const float *p, const float *g,
          const float *m, const float *v, float *outP, float *outM, float *outV,
          int64_t n) {
  auto loop = s.decoupled ? (s.scaled ? adamLoop<true, true, false>
                                      : adamLoop<false, true, false>)
              : s.hasWd   ? (s.scaled ? adamLoop<true, false, true>
                                      : adamLoop<false, false, true>)
                          : (s.scaled ? adamLoop<true, false, false>
                                      : adamLoop<false, false, false>);
  loop(s, p, g, m, v, outP, outM, outV, n);
}

bool fused(ops::FusedOpcode op, const float *a, const float *b, const float *c,
           float *out, int64_t n) {
  // Each expression is its ElementOps.h functor's for float, term for term.
  using ops::FusedOpcode;
  switch (op) {
  case FusedOpcode::Add:
    eachElement(out, n, [&](int64_t i) { return a[i] + b[i]; });
    return true;
  case FusedOpcode::Sub:
    eachElement(out, n, [&](int64_t i) { return a[i] - b[i]; });
    return true;
  case FusedOpcode::Mul:
    eachElement(out, n, [&](int64_t i) { return a[i] * b[i]; });
    return true;
  case FusedOpcode::Div:
    eachElement(out, n, [&](int64_t i) { return a[i] / b[i]; });
    return true;
  case FusedOpcode::Max:
    eachElement(out, n, [&](int64_t i) {
      return (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i];
    });
    return true;
  case FusedOpcode::Min:
    eachElement(out, n, [&](int64_t i) {
      return (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i];
    });
    return true;
  case FusedOpcode::Neg:
    eachElement(out, n, [&](int64_t i) { return -a[i]; });
    return true;
  case FusedOpcode::Abs:
    eachElement(out, n, [&](int64_t i) { return __builtin_fabsf(a[i]); });
    return true;
  case FusedOpcode::Sqrt:
    eachElement(out, n, [&](int64_t i) { return __builtin_sqrtf(a[i]); });
    return true;
  case FusedOpcode::Relu:
    eachElement(out, n, [&](int64_t i) { return a[i] < 0.0f ? 0.0f : a[i]; });
    return true;
  case FusedOpcode::Where:
    eachElement(out, n, [&](int64_t i) { return a[i] != 0.0f ? b[i] : c[i]; });
    return true;
  case FusedOpcode::ReluGrad:
    eachElement(out, n, [&](int64_t i) { return b[i] > 0.0f ? a[i] : 0.0f; });
    return true;
  case FusedOpcode::SigmoidGrad:
    eachElement(out, n, [&](int64_t i) { return a[i] * (1.0f - b[i]) * b[i]; });
    return true;
  case FusedOpcode::TanhGrad:
    eachElement(out, n, [&](int64_t i) { return a[i] * (1.0f - b[i] * b[i]); });
    return true;
  case FusedOpcode::Exp:
    expArray(a, out, n);
    return true;
  case FusedOpcode::Erf:
    erfArray(a, out, n);
    return true;
  default:
    return false;
  }
}

/// The sum of f(i) over [0, n): kLanes float lanes in lane order, then the
/// remainder, in double.
template <typename VecFn, typename ScalarFn>
SHARDC_VEC_INLINE double laneSum(int64_t n, VecFn fv, ScalarFn fs) {
  Floats s[kParts] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kParts; ++k)
      s[k] += fv(i + k * kWidth);
  double total = laneTotal(s);
  for (; i < n; ++i)
    total += fs(i);
  return total;
}

void layerNormRow(const float *x, const float *w, const float *b, double eps,
                  float *y, int64_t n, double *mean, double *invStd) {
  double mu = n ? laneSum(
                      n, [&](int64_t i) { return load(x + i); },
                      [&](int64_t i) { return x[i]; }) /
                      static_cast<double>(n)
                : 0.0;
  float m = static_cast<float>(mu);
  double sq = laneSum(
      n,
      [&](int64_t i) {
        Floats d = load(x + i) - m;
        return d * d;
      },
      [&](int64_t i) {
        float d = x[i] - m;
        return d * d;
      });
  double inv =
      1.0 / __builtin_sqrt((n ? sq / static_cast<double>(n) : 0.0) + eps);
  *mean = mu;
  *invStd = inv;
  float a = static_cast<float>(inv);
  if (b)
    eachElement(y, n, [&](int64_t i) { return (x[i] - m) * a * w[i] + b[i]; });
  else
    eachElement(y, n, [&](int64_t i) { return (x[i] - m) * a * w[i]; });
}

void layerNormGradRow(const float *dy, const float *x, const float *w,
                      double mean, double invStd, float *dx, double *dScale,
                      double *dBias, int64_t n) {
  float m = static_cast<float>(mean), a = static_cast<float>(invStd);
  if (dx) {
    // dx = a (dy w - mean(dy w) - xhat mean(dy w xhat)), xhat = (x - m) a.
    double sumG = laneSum(
        n, [&](int64_t i) { return load(dy + i) * load(w + i); },
        [&](int64_t i) { return dy[i] * w[i]; });
    double sumGX = laneSum(
        n,
        [&](int64_t i) {
          return load(dy + i) * load(w + i) * (load(x + i) - m);
        },
        [&](int64_t i) { return dy[i] * w[i] * (x[i] - m); });
    double invN = n ? 1.0 / static_cast<double>(n) : 0.0;
    float c1 = static_cast<float>(sumG * invN);
    float c2 = static_cast<float>(sumGX * invStd * invStd * invN);
    eachElement(dx, n, [&](int64_t i) {
      return a * (dy[i] * w[i] - c1 - (x[i] - m) * c2);
    });
  }
  SHARDC_VEC_IVDEP
  for (int64_t i = 0; i < n; ++i) {
    dScale[i] += static_cast<double>(dy[i] * ((x[i] - m) * a));
    dBias[i] += static_cast<double>(dy[i]);
  }
}

void softmaxGradRow(const float *dy, const float *y, float *dx, int64_t n) {
  float s = static_cast<float>(laneSum(
      n, [&](int64_t i) { return load(dy + i) * load(y + i); },
      [&](int64_t i) { return dy[i] * y[i]; }));
  eachElement(dx, n, [&](int64_t i) { return y[i] * (dy[i] - s); });
}

void scale(float *x, float s, int64_t n) {
  eachElement(x, n, [&](int64_t i) { return x[i] * s; });
}

void addToDouble(double *acc, const float *x, int64_t n) {
  SHARDC_VEC_IVDEP
  for (int64_t i = 0; i < n; ++i)
    acc[i] += static_cast<double>(x[i]);
}

} // namespace SHARDC_VEC_ISA
} // namespace shardc::rt::cpu::vec
