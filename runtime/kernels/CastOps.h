//===- CastOps.h - Element conversions, for every backend -------*- C++ -*-===//
//
// ONNX Cast of one element, and the half and bfloat16 conversions it needs,
// written once for the CPU kernels (runtime/cpu/Elementwise.cpp) and the CUDA
// kernels (runtime/cuda/Elementwise.cu).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_CASTOPS_H
#define SHARDC_RUNTIME_KERNELS_CASTOPS_H

#include "runtime/Tensor.h"
#include "runtime/kernels/HostDevice.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace shardc::rt::ops {

/// The C++ storage type of a DType. Bool is one byte holding 0 or 1 (read as
/// uint8_t so that any non-zero byte means true); F16 is its raw bit pattern.
template <DType D> struct StorageOf;
template <> struct StorageOf<DType::F32> { using type = float; };
template <> struct StorageOf<DType::F64> { using type = double; };
template <> struct StorageOf<DType::I64> { using type = int64_t; };
template <> struct StorageOf<DType::I32> { using type = int32_t; };
template <> struct StorageOf<DType::I8> { using type = int8_t; };
template <> struct StorageOf<DType::U8> { using type = uint8_t; };
template <> struct StorageOf<DType::Bool> { using type = uint8_t; };
template <> struct StorageOf<DType::F16> { using type = uint16_t; };
template <> struct StorageOf<DType::BF16> { using type = uint16_t; };

/// bfloat16 (the upper half of a float) <-> float. Narrowing rounds to
/// nearest even, as PyTorch, ONNX Runtime and current ONNX do (ONNX 1.12's
/// test data truncated; see test/conformance/run_conformance.py), and keeps
/// NaN a quiet NaN of the same sign; values past the bfloat16 range round
/// to infinity.
SHARDC_HOST_DEVICE inline float bfloat16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

SHARDC_HOST_DEVICE inline uint16_t floatToBfloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet.
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

/// IEEE half <-> float conversions (round to nearest even).
SHARDC_HOST_DEVICE inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      // Subnormal: normalize.
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 |
             (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

SHARDC_HOST_DEVICE inline uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t absBits = bits & 0x7fffffffu;
  if (absBits >= 0x7f800000u) // Inf or NaN (keep NaN quiet).
    return sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u : 0u);
  if (absBits >= 0x477ff000u) // Rounds to a value beyond the half range.
    return sign | 0x7c00u;
  if (absBits < 0x38800000u) {
    // Half subnormal or zero: value = mant * 2^-24.
    if (absBits < 0x33000000u) // Below half of the smallest subnormal.
      return sign;
    uint32_t exp = absBits >> 23;
    uint32_t mant = (absBits & 0x7fffffu) | 0x800000u;
    // The value is mant * 2^(exp - 150); in units of 2^-24 (the smallest
    // half subnormal) that is mant * 2^(exp - 126) = mant >> (126 - exp).
    uint32_t shift = 126 - exp;
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u)))
      ++q;
    return sign | static_cast<uint16_t>(q);
  }
  // Normal: rebias the exponent and round the mantissa to 10 bits.
  uint32_t v = absBits - 0x38000000u; // exp - 112 (127 - 15) in place.
  uint32_t q = v >> 13;
  uint32_t rem = v & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
    ++q; // May carry into the exponent, which is the right result.
  return sign | static_cast<uint16_t>(q);
}

/// Converts one value to the storage type of `To`, following ONNX Cast:
/// float to integer truncates toward zero (NaN gives 0, out-of-range values
/// saturate), anything to bool is `!= 0`, integer narrowing wraps.
template <DType To, DType From>
SHARDC_HOST_DEVICE typename StorageOf<To>::type
convertValue(typename StorageOf<From>::type v) {
  using ToT = typename StorageOf<To>::type;
  if constexpr (From == DType::F16) {
    return convertValue<To, DType::F32>(halfToFloat(v));
  } else if constexpr (From == DType::BF16) {
    return convertValue<To, DType::F32>(bfloat16ToFloat(v));
  } else if constexpr (To == DType::Bool) {
    return v != 0 ? 1 : 0;
  } else if constexpr (From == DType::Bool) {
    return convertValue<To, DType::U8>(v != 0 ? 1 : 0);
  } else if constexpr (To == DType::F16) {
    return floatToHalf(static_cast<float>(v));
  } else if constexpr (To == DType::BF16) {
    return floatToBfloat16(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<ToT>) {
    return static_cast<ToT>(v);
  } else if constexpr (std::is_floating_point_v<
                           typename StorageOf<From>::type>) {
    if (std::isnan(v))
      return 0;
    double t = std::trunc(static_cast<double>(v));
    if (t <= static_cast<double>(std::numeric_limits<ToT>::lowest()))
      return std::numeric_limits<ToT>::lowest();
    if (t >= static_cast<double>(std::numeric_limits<ToT>::max()))
      return std::numeric_limits<ToT>::max();
    return static_cast<ToT>(t);
  } else {
    // Integer to integer: modular, as numpy's astype.
    return static_cast<ToT>(v);
  }
}

} // namespace shardc::rt::ops

#endif // SHARDC_RUNTIME_KERNELS_CASTOPS_H
