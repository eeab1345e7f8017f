//===- VecMath.h - Vectorized float loops for the CPU kernels ---*- C++ -*-===//
//
// The loops the hot float kernels spend their time in, over contiguous
// arrays: exp, erf, a row's maximum, its sum of exponentials, the Adam
// update, the instructions of a fused elementwise chain and a LayerNorm
// row, forward and backward. Each is compiled
// once per instruction set (VecMathImpl.h, included by VecMathAvx512.cpp for
// x86-64-v4, VecMathAvx2.cpp for x86-64-v3 and VecMathBase.cpp for any CPU; the
// first two in GCC builds for x86-64), and the best path the CPU has is chosen
// when the program starts (the SHARD_CPU_PATH environment variable may pick a
// lesser one: avx512, avx2, base). No -march=native: one binary runs on every
// x86-64 CPU.
//
// Every path computes the same bits: the element functions are branch-free
// arithmetic that never contracts a multiply and an add into a fused one (the
// CPU kernels build with -ffp-contract=off), and every loop steps kLanes
// floats at a time whatever the vector width, so reductions add in one
// fixed order. Ranks on different CPUs therefore agree, as they must where
// replicas step their own copy of a parameter.
//
// Accuracy: exp is within 2 ulp of the correctly rounded result for inputs
// whose result is a normal float; results below FLT_MIN flush to 0. erf is
// within 3 ulp below |x| = 0.9 and within 2.4e-7 absolute above
// (Abramowitz and Stegun 7.1.26, the form PyTorch's vectorized CPU erf
// uses).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CPU_VECMATH_H
#define SHARDC_RUNTIME_CPU_VECMATH_H

#include "runtime/kernels/FusedOpcode.h"
#include "runtime/kernels/OptimizerOps.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace shardc::rt::cpu::vec {

/// The floats every loop steps at a time: one AVX-512 register.
constexpr int kLanes = 16;

/// The loops of one instruction set.
struct Path {
  const char *name;
  /// out[i] = exp(x[i]).
  void (*expArray)(const float *x, float *out, int64_t n);
  /// out[i] = erf(x[i]).
  void (*erfArray)(const float *x, float *out, int64_t n);
  /// erfOut[i] = erf(x[i]) and gaussOut[i] = exp(-(x[i] * x[i])), the bits
  /// of erfArray and of expArray over -(x * x), from one exponential (erf's
  /// gradient reads the second).
  void (*erfAndGaussian)(const float *x, float *erfOut, float *gaussOut,
                         int64_t n);
  /// The largest of x[0..n), NaN when any is NaN, -inf when n = 0. Between
  /// a +0 and a -0 maximum the positions decide, the same on every path.
  float (*maxOf)(const float *x, int64_t n);
  /// The sum of exp(x[i] - shift), accumulated in kLanes float lanes, then
  /// in double; the terms go to out[i] when out is not null.
  double (*expSum)(const float *x, float shift, float *out, int64_t n);
  /// One AdamUpdate over n elements (ops::AdamStep::apply, the same bits);
  /// the outputs may be the inputs (in place).
  void (*adam)(const ops::AdamStep<float> &s, const float *p, const float *g,
               const float *m, const float *v, float *outP, float *outM,
               float *outV, int64_t n);
  /// One FusedElementwise instruction over n elements: out[i] = op(a[i],
  /// b[i], c[i]) with the single op's arithmetic (runtime/kernels/
  /// ElementOps.h), for the opcodes that are plain arithmetic, comparisons,
  /// Sqrt, Exp and Erf; false, writing nothing, for the others.
  bool (*fused)(ops::FusedOpcode op, const float *a, const float *b,
                const float *c, float *out, int64_t n);
  /// LayerNorm of one row of n: its mean and 1 / sqrt(variance + eps)
  /// (two passes, each summed in kLanes float lanes, then in double), and
  /// y[i] = (x[i] - mean) * invStd * w[i] + b[i] in float (b may be null:
  /// no bias).
  void (*layerNormRow)(const float *x, const float *w, const float *b,
                       double eps, float *y, int64_t n, double *mean,
                       double *invStd);
  /// LayerNorm's gradient for one row of n, given the row's mean and invStd:
  /// dx[i] (when dx is not null) from the sums of dy * w and of
  /// dy * w * (x - mean) (kLanes float lanes, then double), and
  /// dScale[i] += dy[i] * (x[i] - mean) * invStd, dBias[i] += dy[i], both
  /// accumulated in double.
  void (*layerNormGradRow)(const float *dy, const float *x, const float *w,
                           double mean, double invStd, float *dx,
                           double *dScale, double *dBias, int64_t n);
  /// Softmax's gradient for one row of n: s = the sum of dy[i] * y[i]
  /// (products in float, kLanes float lanes, then double), and
  /// dx[i] = y[i] * (dy[i] - s) in float.
  void (*softmaxGradRow)(const float *dy, const float *y, float *dx, int64_t n);
  /// x[i] *= s.
  void (*scale)(float *x, float s, int64_t n);
  /// acc[i] += x[i] in double (a column sum's step over one row).
  void (*addToDouble)(double *acc, const float *x, int64_t n);
  /// Whether divideByReciprocal divides by c with the bits of a / c for
  /// every float a: checked on every significand (2^23 quotients, about 2
  /// ms), false on a path without fused multiply-add. Use
  /// divisorReciprocal(), which remembers the answer.
  bool (*reciprocalDivides)(float c);
  /// out[i] = a[i] / c, bit for bit, where reciprocalDivides(c) and r is
  /// 1.0f / c: a product with r corrected by two fused multiply-adds, which
  /// costs less than a division (GELU's x / sqrt(2)).
  void (*divideByReciprocal)(const float *a, float c, float r, float *out,
                             int64_t n);
};

/// The paths this CPU can run, the best first.
llvm::ArrayRef<Path> availablePaths();
/// The path the kernels use.
const Path &activePath();
/// Why SHARD_CPU_PATH cannot be honoured (it names no path this CPU can
/// run), or nothing; a tool checks it when it starts.
std::optional<std::string> pathChoiceError();

inline void expArray(const float *x, float *out, int64_t n) {
  activePath().expArray(x, out, n);
}
inline void erfArray(const float *x, float *out, int64_t n) {
  activePath().erfArray(x, out, n);
}
inline void erfAndGaussian(const float *x, float *erfOut, float *gaussOut,
                           int64_t n) {
  activePath().erfAndGaussian(x, erfOut, gaussOut, n);
}
inline float maxOf(const float *x, int64_t n) {
  return activePath().maxOf(x, n);
}
inline double expSum(const float *x, float shift, float *out, int64_t n) {
  return activePath().expSum(x, shift, out, n);
}

inline void adam(const ops::AdamStep<float> &s, const float *p, const float *g,
                 const float *m, const float *v, float *outP, float *outM,
                 float *outV, int64_t n) {
  activePath().adam(s, p, g, m, v, outP, outM, outV, n);
}

inline bool fused(ops::FusedOpcode op, const float *a, const float *b,
                  const float *c, float *out, int64_t n) {
  return activePath().fused(op, a, b, c, out, n);
}

inline void layerNormRow(const float *x, const float *w, const float *b,
                         double eps, float *y, int64_t n, double *mean,
                         double *invStd) {
  activePath().layerNormRow(x, w, b, eps, y, n, mean, invStd);
}
inline void layerNormGradRow(const float *dy, const float *x, const float *w,
                             double mean, double invStd, float *dx,
                             double *dScale, double *dBias, int64_t n) {
  activePath().layerNormGradRow(dy, x, w, mean, invStd, dx, dScale, dBias, n);
}
inline void softmaxGradRow(const float *dy, const float *y, float *dx,
                           int64_t n) {
  activePath().softmaxGradRow(dy, y, dx, n);
}
/// What a softmax subtracts before exponentiating: the largest of x[0..n),
/// or 0 when that is infinite (inf - inf is NaN).
inline float softmaxShift(const float *x, int64_t n) {
  float m = maxOf(x, n);
  return (m == std::numeric_limits<float>::infinity() ||
          m == -std::numeric_limits<float>::infinity())
             ? 0.0f
             : m;
}

/// x[i] *= s.
inline void scale(float *x, float s, int64_t n) { activePath().scale(x, s, n); }

/// 1.0f / c where the active path's divideByReciprocal divides by c bit for
/// bit, or nothing (each divisor is checked once per process).
std::optional<float> divisorReciprocal(float c);
inline void divideByReciprocal(const float *a, float c, float r, float *out,
                               int64_t n) {
  activePath().divideByReciprocal(a, c, r, out, n);
}
inline void addToDouble(double *acc, const float *x, int64_t n) {
  activePath().addToDouble(acc, x, n);
}

} // namespace shardc::rt::cpu::vec

#endif // SHARDC_RUNTIME_CPU_VECMATH_H
