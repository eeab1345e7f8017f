//===- CudaTestUtil.h - Running a kernel on both backends -------*- C++ -*-===//
//
// What the CUDA kernel tests share: the backend on device 0, random operands
// (with NaN, infinities and signed zeros among them), and expectSameAsCpu,
// which runs one op on the CPU and the CUDA backend and compares outputs.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TEST_UNIT_CUDA_CUDATESTUTIL_H
#define SHARDC_TEST_UNIT_CUDA_CUDATESTUTIL_H

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/kernels/CastOps.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace shardc::rt::cudatest {

/// The backend on device 0; `cudnn` false: with its own Conv and BatchNorm
/// kernels instead of cuDNN's (shardrun --cudnn=false).
inline KernelBackend &gpu(bool cudnn = true) {
  auto make = [](bool cudnn) {
    cuda::BackendOptions options;
    options.cudnn = cudnn;
    auto b = cuda::createBackend(0, options);
    if (!b) {
      std::fprintf(stderr, "%s\n", llvm::toString(b.takeError()).c_str());
      std::abort();
    }
    return std::move(*b);
  };
  static std::unique_ptr<KernelBackend> withCudnn = make(true);
  static std::unique_ptr<KernelBackend> withoutCudnn = make(false);
  return cudnn ? *withCudnn : *withoutCudnn;
}

/// Host bytes of `n` random elements of `dtype`, special values first
/// (zeros of both signs, NaN, infinities, a subnormal, integer minimums).
/// `nonZero` keeps integers away from 0 (divisors). 16-bit floats are
/// values in [-4, 4] after the specials, or with `anyBits` random bit
/// patterns (every NaN payload and subnormal by chance: Cast's inputs).
inline std::vector<uint8_t> randomBytes(DType dtype, int64_t n,
                                        std::mt19937 &rng, bool nonZero = false,
                                        bool anyBits = false) {
  std::vector<uint8_t> bytes(n * dtypeSize(dtype));
  std::uniform_real_distribution<double> real(-4, 4);
  const double specials[] = {0.0,
                             -0.0,
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             1e-40};
  for (int64_t i = 0; i < n; ++i) {
    double v = i < 6 ? specials[i] : real(rng);
    auto put = [&](auto x) { std::memcpy(&bytes[i * sizeof x], &x, sizeof x); };
    int64_t r = static_cast<int64_t>(rng() % 200) - 100;
    if (nonZero && r == 0)
      r = 7;
    switch (dtype) {
    case DType::F32:
      put(static_cast<float>(v));
      break;
    case DType::F64:
      put(v);
      break;
    case DType::I64:
      put(i == 0 && !nonZero ? std::numeric_limits<int64_t>::min() : r);
      break;
    case DType::I32:
      put(i == 0 && !nonZero ? std::numeric_limits<int32_t>::min()
                             : static_cast<int32_t>(r));
      break;
    case DType::I8:
      put(static_cast<int8_t>(r));
      break;
    case DType::U8:
      put(static_cast<uint8_t>(nonZero ? 1 + rng() % 255 : rng() % 256));
      break;
    case DType::Bool:
      put(static_cast<uint8_t>(rng() % 2));
      break;
    case DType::F16:
      put(anyBits ? static_cast<uint16_t>(rng())
                  : ops::floatToHalf(static_cast<float>(v)));
      break;
    case DType::BF16:
      put(anyBits ? static_cast<uint16_t>(rng())
                  : ops::floatToBfloat16(static_cast<float>(v)));
      break;
    default:
      for (size_t b = 0; b < dtypeSize(dtype); ++b)
        bytes[i * dtypeSize(dtype) + b] = static_cast<uint8_t>(rng());
    }
  }
  return bytes;
}

/// An operand of a kernel under test; DType::Undefined is an absent one.
struct Operand {
  DType dtype = DType::Undefined;
  std::vector<int64_t> shape;
  bool nonZero = false;
  /// Every element this value (a float type, or bool) instead of random
  /// ones.
  std::optional<double> fill;
  /// When positive, integers drawn from [0, below) (class targets, indices).
  int64_t below = 0;
  /// 16-bit floats of random bit patterns instead of values (randomBytes).
  bool anyBits = false;
};

inline std::vector<uint8_t> inputBytes(const Operand &op, std::mt19937 &rng) {
  int64_t n = numElements(op.shape);
  if (op.below > 0) {
    std::vector<uint8_t> bytes(n * dtypeSize(op.dtype));
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = static_cast<int64_t>(rng() % op.below);
      if (op.dtype == DType::I64)
        std::memcpy(&bytes[i * 8], &v, 8);
      else {
        int32_t v32 = static_cast<int32_t>(v);
        std::memcpy(&bytes[i * 4], &v32, 4);
      }
    }
    return bytes;
  }
  if (!op.fill)
    return randomBytes(op.dtype, n, rng, op.nonZero, op.anyBits);
  std::vector<uint8_t> bytes(n * dtypeSize(op.dtype));
  for (int64_t i = 0; i < n; ++i) {
    if (op.dtype == DType::F32) {
      float f = static_cast<float>(*op.fill);
      std::memcpy(&bytes[i * 4], &f, 4);
    } else if (op.dtype == DType::Bool) {
      bytes[i] = *op.fill != 0 ? 1 : 0;
    } else {
      double d = *op.fill;
      std::memcpy(&bytes[i * 8], &d, 8);
    }
  }
  return bytes;
}

/// How close a float CUDA result must be: equal (0), or within `ulps` units
/// in the last place (transcendental functions: the device's math library
/// may round differently).
struct Tolerance {
  int ulps = 0;
  /// Or, when set, within this absolute difference (sums whose order
  /// differs between cuBLAS and OpenBLAS).
  double abs = 0;
};

template <typename T> int64_t ulpDistance(T a, T b) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  I ia, ib;
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  if (ia < 0)
    ia = std::numeric_limits<I>::min() - ia;
  if (ib < 0)
    ib = std::numeric_limits<I>::min() - ib;
  return ia > ib ? int64_t(ia) - ib : int64_t(ib) - ia;
}

template <typename T>
void expectClose(const std::vector<uint8_t> &gpuBytes,
                 const std::vector<uint8_t> &cpuBytes, Tolerance tol) {
  int ulps = tol.ulps;
  size_t n = cpuBytes.size() / sizeof(T);
  int failures = 0;
  for (size_t i = 0; i < n && failures < 5; ++i) {
    T g, c;
    std::memcpy(&g, &gpuBytes[i * sizeof(T)], sizeof(T));
    std::memcpy(&c, &cpuBytes[i * sizeof(T)], sizeof(T));
    bool ok = (std::isnan(g) && std::isnan(c)) || ulpDistance(g, c) <= ulps ||
              (tol.abs > 0 && std::fabs(double(g) - double(c)) <= tol.abs);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "element " << i << ": cuda " << g << ", cpu " << c;
    }
  }
}

/// 16-bit floats: equal as float32 values, NaN matching any NaN, or within
/// `tol.ulps` steps of the 16-bit format or `tol.abs`.
inline void expectClose16(const std::vector<uint8_t> &gpuBytes,
                          const std::vector<uint8_t> &cpuBytes, DType dtype,
                          Tolerance tol) {
  auto value = [&](const std::vector<uint8_t> &bytes, size_t i) {
    uint16_t h;
    std::memcpy(&h, &bytes[i * 2], 2);
    return dtype == DType::F16 ? ops::halfToFloat(h) : ops::bfloat16ToFloat(h);
  };
  // Ordered integers of the 16-bit encodings, as ulpDistance does for float.
  auto ordered = [&](const std::vector<uint8_t> &bytes, size_t i) {
    int16_t h;
    std::memcpy(&h, &bytes[i * 2], 2);
    return h < 0 ? int32_t(std::numeric_limits<int16_t>::min()) - h
                 : int32_t(h);
  };
  int failures = 0;
  for (size_t i = 0, n = cpuBytes.size() / 2; i < n && failures < 5; ++i) {
    float g = value(gpuBytes, i), c = value(cpuBytes, i);
    bool ok =
        (std::isnan(g) && std::isnan(c)) || g == c ||
        std::abs(ordered(gpuBytes, i) - ordered(cpuBytes, i)) <= tol.ulps ||
        (tol.abs > 0 && std::fabs(double(g) - double(c)) <= tol.abs);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "element " << i << ": cuda " << g << ", cpu " << c;
    }
  }
}

/// Runs `opType` with random `inputs` (the same for the same operands) on
/// `dev`, and on the CPU when `cpuOut` is given; `gpuOut` receives the
/// device's outputs.
inline void runOp(KernelBackend &dev, llvm::StringRef opType,
                  const std::vector<Operand> &inputs,
                  const std::vector<Operand> &outputs, const AttrMap &attrs,
                  std::vector<std::vector<uint8_t>> &gpuOut,
                  std::vector<std::vector<uint8_t>> *cpuOut) {
  std::mt19937 rng(42);
  std::unique_ptr<Stream> stream = dev.createStream();
  ASSERT_TRUE(stream);
  std::vector<std::vector<uint8_t>> hostIn, hostOut;
  std::vector<TensorView> cpuInViews, cpuOutViews, gpuInViews, gpuOutViews;
  std::vector<void *> deviceMemory;
  hostIn.reserve(inputs.size());
  for (const Operand &op : inputs) {
    if (op.dtype == DType::Undefined) {
      cpuInViews.emplace_back();
      gpuInViews.emplace_back();
      continue;
    }
    hostIn.push_back(inputBytes(op, rng));
    cpuInViews.emplace_back(op.dtype, op.shape, hostIn.back().data());
    void *d = llvm::cantFail(dev.allocate(hostIn.back().size()));
    deviceMemory.push_back(d);
    ASSERT_FALSE(llvm::errorToBool(dev.copyToDevice(
        d, hostIn.back().data(), hostIn.back().size(), *stream)));
    gpuInViews.emplace_back(op.dtype, op.shape, d);
  }
  hostOut.reserve(outputs.size());
  for (const Operand &op : outputs) {
    if (op.dtype == DType::Undefined) {
      hostOut.emplace_back();
      cpuOutViews.emplace_back();
      gpuOutViews.emplace_back();
      continue;
    }
    size_t bytes = numElements(op.shape) * dtypeSize(op.dtype);
    hostOut.emplace_back(bytes, 0xA5);
    cpuOutViews.emplace_back(op.dtype, op.shape, hostOut.back().data());
    void *d = llvm::cantFail(dev.allocate(bytes));
    deviceMemory.push_back(d);
    ASSERT_FALSE(llvm::errorToBool(dev.fillZero(d, bytes, *stream)));
    gpuOutViews.emplace_back(op.dtype, op.shape, d);
  }
  if (cpuOut) {
    KernelContext cpuCtx{opType, "cpu", attrs, cpuInViews, cpuOutViews};
    ASSERT_FALSE(llvm::errorToBool(cpu::runKernel(cpuCtx)));
    *cpuOut = hostOut;
  }
  KernelContext gpuCtx{opType, "gpu", attrs, gpuInViews, gpuOutViews};
  KernelFn fn = dev.lookup(opType);
  ASSERT_NE(fn, nullptr) << "no CUDA kernel for " << opType.str();
  ASSERT_FALSE(llvm::errorToBool(dev.launch(fn, gpuCtx, *stream)));
  gpuOut.assign(outputs.size(), {});
  for (size_t k = 0; k < outputs.size(); ++k) {
    gpuOut[k].resize(hostOut[k].size());
    if (!gpuOut[k].empty()) {
      ASSERT_FALSE(llvm::errorToBool(dev.copyToHost(
          gpuOut[k].data(), gpuOutViews[k].data, gpuOut[k].size(), *stream)));
    }
  }
  for (void *d : deviceMemory)
    dev.deallocate(d);
}

/// Runs `opType` on the CPU and on `dev` (default: gpu()) with random
/// `inputs` and compares every output.
inline void expectSameAsCpu(llvm::StringRef opType, std::vector<Operand> inputs,
                            std::vector<Operand> outputs, Tolerance tol = {},
                            AttrMap attrs = {}, KernelBackend *dev = nullptr) {
  std::string what = (opType + " (" + dtypeName(inputs[0].dtype) + " " +
                      shapeToString(inputs[0].shape) + ")")
                         .str();
  SCOPED_TRACE(what);
  std::vector<std::vector<uint8_t>> gpuOut, cpuOut;
  runOp(dev ? *dev : gpu(), opType, inputs, outputs, attrs, gpuOut, &cpuOut);
  if (testing::Test::HasFatalFailure())
    return;
  for (size_t k = 0; k < outputs.size(); ++k) {
    // Floats: NaN matches any NaN (the host and device libraries set
    // different payloads and signs); otherwise within `tol`.
    if (outputs[k].dtype == DType::F16 || outputs[k].dtype == DType::BF16)
      expectClose16(gpuOut[k], cpuOut[k], outputs[k].dtype, tol);
    else if (outputs[k].dtype != DType::F32 && outputs[k].dtype != DType::F64)
      EXPECT_EQ(gpuOut[k], cpuOut[k]) << "output " << k;
    else if (outputs[k].dtype == DType::F32)
      expectClose<float>(gpuOut[k], cpuOut[k], tol);
    else
      expectClose<double>(gpuOut[k], cpuOut[k], tol);
  }
}

/// Runs `opType` on `dev` twice with the same inputs and expects the same
/// bytes: no result may depend on scheduling.
inline void expectReproducible(KernelBackend &dev, llvm::StringRef opType,
                               const std::vector<Operand> &inputs,
                               const std::vector<Operand> &outputs,
                               const AttrMap &attrs = {}) {
  SCOPED_TRACE((opType + " run twice").str());
  std::vector<std::vector<uint8_t>> first, second;
  runOp(dev, opType, inputs, outputs, attrs, first, nullptr);
  runOp(dev, opType, inputs, outputs, attrs, second, nullptr);
  for (size_t k = 0; k < outputs.size(); ++k)
    EXPECT_TRUE(first[k] == second[k]) << "output " << k << " differs";
}

/// Matrix products (Gemm, MatMul, Conv): cuBLAS sums in another order than
/// OpenBLAS.
inline Tolerance productTolerance(DType t) {
  switch (t) {
  case DType::F32:
    return Tolerance{0, 1e-3};
  case DType::F16:
  case DType::BF16:
    // Both sum in float32 and round once: one step of the 16-bit format
    // where the float32 sums round to different sides of a midpoint, or the
    // float32 tolerance where a sum cancels.
    return Tolerance{1, 1e-3};
  default:
    return Tolerance{0, 1e-11};
  }
}

inline const DType kNumeric[] = {DType::F32, DType::F64, DType::I64,
                                 DType::I32, DType::I8,  DType::U8};
inline const DType kSigned[] = {DType::F32, DType::F64, DType::I64, DType::I32};
inline const DType kFloat[] = {DType::F32, DType::F64};
} // namespace shardc::rt::cudatest

#endif // SHARDC_TEST_UNIT_CUDA_CUDATESTUTIL_H
