//===- KernelTestUtil.h - Helpers for the CPU kernel tests ------*- C++ -*-===//
//
// Owned tensors, a one-call kernel runner and comparison helpers shared by
// the *Kernel*Test.cpp files.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H
#define SHARDC_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H

#include "runtime/cpu/Kernels.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace shardc::rt::test {

/// A tensor that owns its bytes.
struct Buf {
  DType dtype = DType::Undefined;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  Buf() = default;
  Buf(DType dtype, std::vector<int64_t> shape)
      : dtype(dtype), shape(std::move(shape)) {
    // Poison outputs so that unwritten elements show up.
    bytes.assign(
        static_cast<size_t>(numElements(this->shape)) * dtypeSize(dtype), 0xA5);
  }
  TensorView view() {
    return TensorView(dtype, shape, bytes.empty() ? nullptr : bytes.data());
  }
  int64_t numel() const { return numElements(shape); }
  template <typename T> T *data() {
    return reinterpret_cast<T *>(bytes.data());
  }
  template <typename T> std::vector<T> values() const {
    std::vector<T> v(static_cast<size_t>(numel()));
    if (!v.empty())
      std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
  }
};

template <typename T>
Buf makeBuf(DType dtype, std::vector<int64_t> shape, const std::vector<T> &v) {
  Buf b(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(v.size()), b.numel()) << "test data size";
  if (!v.empty() && static_cast<int64_t>(v.size()) == b.numel())
    std::memcpy(b.bytes.data(), v.data(), v.size() * sizeof(T));
  return b;
}
inline Buf f32(std::vector<int64_t> shape, const std::vector<float> &v) {
  return makeBuf(DType::F32, std::move(shape), v);
}
inline Buf f64(std::vector<int64_t> shape, const std::vector<double> &v) {
  return makeBuf(DType::F64, std::move(shape), v);
}
inline Buf i64(std::vector<int64_t> shape, const std::vector<int64_t> &v) {
  return makeBuf(DType::I64, std::move(shape), v);
}
inline Buf i32(std::vector<int64_t> shape, const std::vector<int32_t> &v) {
  return makeBuf(DType::I32, std::move(shape), v);
}
inline Buf boolean(std::vector<int64_t> shape, const std::vector<uint8_t> &v) {
  return makeBuf(DType::Bool, std::move(shape), v);
}

/// Deterministic uniform values in [lo, hi).
inline std::vector<float> randomFloats(size_t n, unsigned seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}
inline Buf randomF32(std::vector<int64_t> shape, unsigned seed,
                     float lo = -1.0f, float hi = 1.0f) {
  size_t n = static_cast<size_t>(numElements(shape));
  return f32(std::move(shape), randomFloats(n, seed, lo, hi));
}

/// Builds an AttrMap inline: attrs({{"axis", AttrValue::ofInt(1)}}).
inline AttrMap
attrs(std::initializer_list<std::pair<std::string, AttrValue>> list = {}) {
  AttrMap m;
  for (const auto &[name, value] : list)
    m.set(name, value);
  return m;
}
inline AttrValue ints(std::vector<int64_t> v) {
  return AttrValue::ofInts(std::move(v));
}
inline AttrValue intv(int64_t v) { return AttrValue::ofInt(v); }
inline AttrValue floatv(double v) { return AttrValue::ofFloat(v); }
inline AttrValue str(std::string v) {
  return AttrValue::ofString(std::move(v));
}

/// Runs `op` through cpu::runKernel. A null input or output is absent.
/// Returns "" on success, the error message otherwise.
inline std::string run(llvm::StringRef op, const AttrMap &a,
                       std::vector<Buf *> ins, std::vector<Buf *> outs) {
  std::vector<TensorView> inViews, outViews;
  for (Buf *b : ins)
    inViews.push_back(b ? b->view() : TensorView());
  for (Buf *b : outs)
    outViews.push_back(b ? b->view() : TensorView());
  KernelContext ctx{op, "test", a, inViews, outViews};
  if (llvm::Error e = cpu::runKernel(ctx))
    return llvm::toString(std::move(e));
  return "";
}

/// Expects `got` to match `want` elementwise within atol + rtol * |want|.
template <typename T, typename U>
void expectClose(const std::vector<T> &got, const std::vector<U> &want,
                 double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double g = static_cast<double>(got[i]);
    double w = static_cast<double>(want[i]);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << "at index " << i;
      continue;
    }
    EXPECT_NEAR(g, w, atol + rtol * std::fabs(w)) << "at index " << i;
  }
}

/// Expects a kernel error message containing `needle`.
#define EXPECT_KERNEL_ERROR(msg, needle)                                       \
  do {                                                                         \
    std::string kernelMsg = (msg);                                             \
    EXPECT_NE(kernelMsg, "") << "expected an error";                           \
    EXPECT_NE(kernelMsg.find(needle), std::string::npos)                       \
        << "error was: " << kernelMsg;                                         \
  } while (false)

/// Expects a kernel to succeed.
#define EXPECT_KERNEL_OK(msg) EXPECT_EQ((msg), "")
#define ASSERT_KERNEL_OK(msg) ASSERT_EQ((msg), "")

} // namespace shardc::rt::test

#endif // SHARDC_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H
