//===- LineOps.h - Softmax over one line, for every backend -----*- C++ -*-===//
//
// Softmax, LogSoftmax and their gradients along one line of `n` elements
// `stride` apart (one (outer, inner) position of the op's axis), written once
// for the CPU kernels (runtime/cpu/Normalization.cpp) and the CUDA kernels
// (runtime/cuda/Softmax.cu), which run one line per thread. The sums
// accumulate in double; exp and log run in the element type's precision
// (exact enough once shifted by the line's maximum).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_LINEOPS_H
#define SHARDC_RUNTIME_KERNELS_LINEOPS_H

#include "runtime/kernels/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace shardc::rt::ops {

/// y = softmax(x) or log_softmax(x) along the line. A NaN does not become
/// the maximum (it then makes every output NaN through the sum); an all
/// -inf (or +inf) line is not shifted, to avoid inf - inf.
template <typename T>
SHARDC_HOST_DEVICE void softmaxLine(const T *x, T *y, int64_t n, int64_t stride,
                                    bool logarithm) {
  T maxV = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    T v = x[j * stride];
    maxV = maxV < v ? v : maxV;
  }
  if (maxV == T(INFINITY) || maxV == T(-INFINITY))
    maxV = T(0);
  double sum = 0.0;
  if (logarithm) {
    for (int64_t j = 0; j < n; ++j)
      sum += std::exp(x[j * stride] - maxV);
    double shift = static_cast<double>(maxV) + std::log(sum);
    for (int64_t j = 0; j < n; ++j)
      y[j * stride] = static_cast<T>(x[j * stride] - shift);
  } else {
    for (int64_t j = 0; j < n; ++j) {
      T e = std::exp(x[j * stride] - maxV);
      y[j * stride] = e;
      sum += e;
    }
    T scale = static_cast<T>(1.0 / sum);
    for (int64_t j = 0; j < n; ++j)
      y[j * stride] *= scale;
  }
}

/// Softmax and LogSoftmax backward from the forward output y:
///   softmax:    dx = y * (dy - sum(dy * y))
///   logsoftmax: dx = dy - exp(y) * sum(dy)
/// (PyTorch's _softmax_backward_data / _log_softmax_backward_data).
template <typename T>
SHARDC_HOST_DEVICE void softmaxGradLine(const T *dy, const T *y, T *dx,
                                        int64_t n, int64_t stride,
                                        bool logarithm) {
  double sum = 0.0;
  if (logarithm) {
    for (int64_t j = 0; j < n; ++j)
      sum += dy[j * stride];
    T s = static_cast<T>(sum);
    for (int64_t j = 0; j < n; ++j)
      dx[j * stride] = dy[j * stride] - std::exp(y[j * stride]) * s;
  } else {
    for (int64_t j = 0; j < n; ++j)
      sum += static_cast<double>(dy[j * stride]) * y[j * stride];
    T s = static_cast<T>(sum);
    for (int64_t j = 0; j < n; ++j)
      dx[j * stride] = y[j * stride] * (dy[j * stride] - s);
  }
}

} // namespace shardc::rt::ops

#endif // SHARDC_RUNTIME_KERNELS_LINEOPS_H
