//===- ElementOps.h - Element functions shared by every backend -*- C++ -*-===//
//
// The arithmetic of the elementwise ops, written once as functors that
// compile for the host and, under nvcc, for the device
// (runtime/kernels/HostDevice.h). The CPU kernels (runtime/cpu) call them in
// their loops and the CUDA kernels (runtime/cuda) in theirs, so the CPU
// tests exercise the arithmetic every backend runs, and the backends agree
// bit for bit wherever the operation itself is exact (everything here but
// the transcendental functions, whose last bit may differ between the host
// and the device math libraries).
//
// Semantics are the ONNX operators' with numpy's integer behaviour:
// integer arithmetic wraps instead of overflowing; max and min propagate NaN
// (as torch.maximum and torch.minimum do).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_ELEMENTOPS_H
#define SHARDC_RUNTIME_KERNELS_ELEMENTOPS_H

#include "runtime/kernels/HostDevice.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace shardc::rt::ops {

/// Integer arithmetic wraps (computed in the unsigned type).
template <typename T> using UnsignedOf = std::make_unsigned_t<T>;

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

struct AddOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(UnsignedOf<T>(a) + UnsignedOf<T>(b));
    else
      return a + b;
  }
};
struct SubOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(UnsignedOf<T>(a) - UnsignedOf<T>(b));
    else
      return a - b;
  }
};
struct MulOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(UnsignedOf<T>(a) * UnsignedOf<T>(b));
    else
      return a * b;
  }
};
/// Integer division truncates toward zero; the kernels refuse a zero
/// divisor before they run, and MIN / -1 wraps instead of trapping.
struct DivOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      if (b == T(-1))
        return static_cast<T>(UnsignedOf<T>(0) - UnsignedOf<T>(a));
    }
    return static_cast<T>(a / b);
  }
};
/// A NaN `a` is kept, and a NaN `b` wins because every comparison with it
/// fails.
struct MaxOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};

//===----------------------------------------------------------------------===//
// Comparisons and logic: bool (one byte, 0 or 1) results
//===----------------------------------------------------------------------===//

struct EqualOp {
  template <typename T> SHARDC_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a == b;
  }
};
struct GreaterOp {
  template <typename T> SHARDC_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a > b;
  }
};
struct LessOp {
  template <typename T> SHARDC_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a < b;
  }
};
struct GreaterOrEqualOp {
  template <typename T> SHARDC_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a >= b;
  }
};
struct LessOrEqualOp {
  template <typename T> SHARDC_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a <= b;
  }
};
struct AndOp {
  template <typename T> SHARDC_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a && b;
  }
};
struct OrOp {
  template <typename T> SHARDC_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a || b;
  }
};
struct XorOp {
  template <typename T> SHARDC_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return (a != 0) != (b != 0);
  }
};

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

struct SqrtOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::sqrt(x);
  }
};
struct ExpOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::exp(x);
  }
};
struct LogOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::log(x);
  }
};
struct ErfOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::erf(x);
  }
};
struct TanhOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::tanh(x);
  }
};
/// Numerically stable logistic function.
struct SigmoidOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    if (x >= T(0))
      return T(1) / (T(1) + std::exp(-x));
    T e = std::exp(x);
    return e / (T(1) + e);
  }
};
/// log(1 + exp(x)) without overflow or cancellation.
struct SoftplusOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::fabs(x)));
  }
};
struct NegOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(UnsignedOf<T>(0) - UnsignedOf<T>(x));
    else
      return -x;
  }
};
struct AbsOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return x < T(0) ? NegOp{}(x) : x;
    else
      return std::fabs(x);
  }
};
struct ReluOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    // Keeps NaN (x > 0 is false for NaN, so test the other way round).
    return x < T(0) ? T(0) : x;
  }
};
struct SignOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      if (x != x)
        return x;
    return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0);
  }
};
struct FloorOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::floor(x);
  }
};
struct CeilOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::ceil(x);
  }
};
struct SinOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::sin(x);
  }
};
struct CosOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::cos(x);
  }
};
struct TanOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::tan(x);
  }
};
struct AsinOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::asin(x);
  }
};
struct AcosOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::acos(x);
  }
};
struct AtanOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::atan(x);
  }
};
struct SinhOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::sinh(x);
  }
};
struct CoshOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::cosh(x);
  }
};
struct AsinhOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::asinh(x);
  }
};
struct AcoshOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::acosh(x);
  }
};
struct AtanhOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return std::atanh(x);
  }
};
struct NotOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T x) const {
    return !x;
  }
};

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// ArgMax: whether `a` beats the best so far `b`. A NaN beats every number
/// (as in numpy's argmax) but not an earlier NaN; `last` (select_last_index)
/// lets a later equal value win.
template <typename T>
SHARDC_HOST_DEVICE bool argMaxBetter(T a, T b, bool last) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b != b)
      return last && a != a;
    if (a != a)
      return true;
  }
  return last ? a >= b : a > b;
}

/// TopK's order: whether element (`a`, index `ia`) comes before (`b`,
/// `ib`): the larger value with `largest` (else the smaller), a NaN counting
/// as larger than every number, and of equal values (or two NaNs) the lower
/// index. A strict total order on a line.
template <typename T>
SHARDC_HOST_DEVICE bool topKBefore(T a, int64_t ia, T b, int64_t ib,
                                   bool largest) {
  bool greater = a > b, less = a < b;
  if constexpr (std::is_floating_point_v<T>) {
    bool na = a != a, nb = b != b;
    greater = na ? !nb : (!nb && a > b);
    less = nb ? !na : (!na && a < b);
  }
  if (largest ? greater : less)
    return true;
  if (largest ? less : greater)
    return false;
  return ia < ib;
}

/// ReduceMax / ReduceMin: the running extreme `acc` after seeing `v`; NaN
/// wins once seen.
template <typename T> SHARDC_HOST_DEVICE T extremeStep(T acc, T v, bool max) {
  if (v != v || (max ? v > acc : v < acc))
    if (acc == acc)
      return v;
  return acc;
}

//===----------------------------------------------------------------------===//
// Activation gradients: dX from dY and the forward input X (Relu) or output
// Y, in the operation order of PyTorch's CPU backward kernels
// (aten/src/ATen/native/cpu/BinaryOpsKernel.cpp).
//===----------------------------------------------------------------------===//

struct ReluGradOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T dy, T x) const {
    return x > T(0) ? dy : T(0);
  }
};
struct SigmoidGradOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T dy, T y) const {
    return dy * (T(1) - y) * y;
  }
};
struct TanhGradOp {
  template <typename T> SHARDC_HOST_DEVICE T operator()(T dy, T y) const {
    return dy * (T(1) - y * y);
  }
};

/// x^y for integers by squaring, wrapping on overflow. A negative exponent
/// gives 0 except for bases 1 and -1.
template <typename T, typename E> SHARDC_HOST_DEVICE T integerPow(T x, E y) {
  using U = UnsignedOf<T>;
  if (y < 0) {
    if (x == 1)
      return 1;
    if (x == -1)
      return (y % 2) ? T(-1) : T(1);
    return 0;
  }
  U result = 1, base = U(x);
  while (y > 0) {
    if (y & 1)
      result *= base;
    base *= base;
    y >>= 1;
  }
  return static_cast<T>(result);
}

/// Pow of one element pair: exact by squaring for two integers; otherwise
/// in double, an integer result saturating (NaN gives 0).
template <typename TX, typename TY> SHARDC_HOST_DEVICE TX powValue(TX x, TY y) {
  if constexpr (std::is_integral_v<TX> && std::is_integral_v<TY>) {
    return integerPow(x, y);
  } else {
    double r = std::pow(static_cast<double>(x), static_cast<double>(y));
    if constexpr (std::is_integral_v<TX>) {
      if (std::isnan(r))
        return 0;
      if (r <= static_cast<double>(std::numeric_limits<TX>::lowest()))
        return std::numeric_limits<TX>::lowest();
      if (r >= static_cast<double>(std::numeric_limits<TX>::max()))
        return std::numeric_limits<TX>::max();
    }
    return static_cast<TX>(r);
  }
}

} // namespace shardc::rt::ops

#endif // SHARDC_RUNTIME_KERNELS_ELEMENTOPS_H
