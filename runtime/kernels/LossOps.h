//===- LossOps.h - Cross-entropy terms, for every backend -------*- C++ -*-===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss at one target
// position (n, d) of scores x (N, C, D...): the log-softmax over the C
// classes at that position, the position's loss term and its gradient,
// written once for the CPU kernels (runtime/cpu/Loss.cpp) and the CUDA
// kernels (runtime/cuda/Loss.cu), which run one position per thread. `xn`
// points at the position's first class (x + n*C*D + d), classes `stride`
// (= D) apart. Everything accumulates in double, as PyTorch's CPU kernels.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_LOSSOPS_H
#define SHARDC_RUNTIME_KERNELS_LOSSOPS_H

#include "runtime/kernels/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace shardc::rt::ops {

/// The shift of a log-softmax over one class line: log p[c] = x[c] - maxV -
/// log(sum), p[c] = exp(x[c] - maxV) / sum. An infinite maximum is not
/// subtracted (inf - inf).
struct ClassShift {
  double maxV = 0.0, sum = 0.0;
};

template <typename T>
SHARDC_HOST_DEVICE ClassShift classShift(const T *xn, int64_t classes,
                                         int64_t stride) {
  ClassShift s;
  double maxV = -INFINITY;
  for (int64_t c = 0; c < classes; ++c) {
    double v = static_cast<double>(xn[c * stride]);
    maxV = maxV < v ? v : maxV;
  }
  if (maxV == INFINITY || maxV == -INFINITY)
    maxV = 0.0;
  s.maxV = maxV;
  for (int64_t c = 0; c < classes; ++c)
    s.sum += std::exp(static_cast<double>(xn[c * stride]) - maxV);
  return s;
}

/// Element `i` of an i64 (`wide`) or i32 tensor of targets or indices.
SHARDC_HOST_DEVICE inline int64_t loadIndex(const void *target, bool wide,
                                            int64_t i) {
  return wide ? static_cast<const int64_t *>(target)[i]
              : static_cast<const int32_t *>(target)[i];
}

/// Whether target `t` takes part in the loss, and whether it is a class.
SHARDC_HOST_DEVICE inline bool targetCounted(int64_t t, bool hasIgnore,
                                             int64_t ignoreIndex) {
  return !hasIgnore || t != ignoreIndex;
}
SHARDC_HOST_DEVICE inline bool targetInRange(int64_t t, int64_t classes) {
  return t >= 0 && t < classes;
}

/// The loss term -w[t] * logp[t] of one position whose target `t` is
/// counted and in range; the log-probabilities of every class go to
/// `logProbN` (same layout as xn) when it is not null. `w` is the class
/// weight (1 without weights).
template <typename T>
SHARDC_HOST_DEVICE double lossTerm(const T *xn, int64_t classes, int64_t stride,
                                   int64_t t, double w, bool softmax,
                                   T *logProbN) {
  if (!softmax)
    return -static_cast<double>(xn[t * stride]) * w;
  ClassShift s = classShift(xn, classes, stride);
  double logSum = std::log(s.sum);
  if (logProbN)
    for (int64_t c = 0; c < classes; ++c)
      logProbN[c * stride] =
          static_cast<T>(static_cast<double>(xn[c * stride]) - s.maxV - logSum);
  return -(static_cast<double>(xn[t * stride]) - s.maxV - logSum) * w;
}

/// The log-probabilities of a position whose target is not counted (its
/// term is 0, but log_prob is still an output).
template <typename T>
SHARDC_HOST_DEVICE void logProbOnly(const T *xn, int64_t classes,
                                    int64_t stride, T *logProbN) {
  ClassShift s = classShift(xn, classes, stride);
  double logSum = std::log(s.sum);
  for (int64_t c = 0; c < classes; ++c)
    logProbN[c * stride] =
        static_cast<T>(static_cast<double>(xn[c * stride]) - s.maxV - logSum);
}

/// The gradient of one position's term: g = w[t] * (the term's scale) for a
/// counted target, and then
///   softmax: dx[c] = (p[c] - (c == t)) * g
///   NLL:     dx[c] = -(c == t) * g
/// (PyTorch's nll_loss backward followed by log_softmax backward); zeros
/// for a target that is not counted.
template <typename T>
SHARDC_HOST_DEVICE void lossTermGrad(const T *xn, T *dn, int64_t classes,
                                     int64_t stride, int64_t t, bool counted,
                                     double g, bool softmax) {
  if (!counted || !softmax) {
    for (int64_t c = 0; c < classes; ++c)
      dn[c * stride] = T(0);
    if (counted)
      dn[t * stride] = static_cast<T>(-g);
    return;
  }
  ClassShift s = classShift(xn, classes, stride);
  for (int64_t c = 0; c < classes; ++c) {
    double p = std::exp(static_cast<double>(xn[c * stride]) - s.maxV) / s.sum;
    dn[c * stride] = static_cast<T>((c == t ? p - 1.0 : p) * g);
  }
}

} // namespace shardc::rt::ops

#endif // SHARDC_RUNTIME_KERNELS_LOSSOPS_H
