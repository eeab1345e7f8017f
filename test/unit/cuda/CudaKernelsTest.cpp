//===- CudaKernelsTest.cpp - The CUDA backend against the CPU backend -----===//
//
// Every kernel of the CUDA table runs on inputs drawn at random (with NaN,
// infinities and signed zeros among them) and must give the CPU kernel's
// result, bit for bit where the shared element functions make it exact.
// Needs a GPU: without one the binary prints "skipped: no GPU" and exits 77,
// which ctest counts as skipped (test/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CudaBackend.h"

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

using namespace shardc::rt;

namespace {

KernelBackend &gpu() {
  static std::unique_ptr<KernelBackend> backend = [] {
    auto b = cuda::createBackend(0);
    if (!b) {
      std::fprintf(stderr, "%s\n", llvm::toString(b.takeError()).c_str());
      std::abort();
    }
    return std::move(*b);
  }();
  return *backend;
}

/// Host bytes of `n` random elements of `dtype`, special values first
/// (zeros of both signs, NaN, infinities, a subnormal, integer minimums).
/// `nonZero` keeps integers away from 0 (divisors).
std::vector<uint8_t> randomBytes(DType dtype, int64_t n, std::mt19937 &rng,
                                 bool nonZero = false) {
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
  /// Every element this value (a float type) instead of random ones.
  std::optional<double> fill;
};

std::vector<uint8_t> inputBytes(const Operand &op, std::mt19937 &rng) {
  int64_t n = numElements(op.shape);
  if (!op.fill)
    return randomBytes(op.dtype, n, rng, op.nonZero);
  std::vector<uint8_t> bytes(n * dtypeSize(op.dtype));
  for (int64_t i = 0; i < n; ++i) {
    if (op.dtype == DType::F32) {
      float f = static_cast<float>(*op.fill);
      std::memcpy(&bytes[i * 4], &f, 4);
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

/// Runs `opType` on both backends with random `inputs` and compares every
/// output.
void expectSameAsCpu(llvm::StringRef opType, std::vector<Operand> inputs,
                     std::vector<Operand> outputs, Tolerance tol = {},
                     AttrMap attrs = {}) {
  std::string what = (opType + " (" + dtypeName(inputs[0].dtype) + " " +
                      shapeToString(inputs[0].shape) + ")")
                         .str();
  SCOPED_TRACE(what);
  std::mt19937 rng(42);
  KernelBackend &dev = gpu();
  std::unique_ptr<Stream> stream = dev.createStream();
  ASSERT_TRUE(stream);
  std::vector<std::vector<uint8_t>> hostIn, cpuOut;
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
  cpuOut.reserve(outputs.size());
  for (const Operand &op : outputs) {
    size_t bytes = numElements(op.shape) * dtypeSize(op.dtype);
    cpuOut.emplace_back(bytes, 0xA5);
    cpuOutViews.emplace_back(op.dtype, op.shape, cpuOut.back().data());
    void *d = llvm::cantFail(dev.allocate(bytes));
    deviceMemory.push_back(d);
    ASSERT_FALSE(llvm::errorToBool(dev.fillZero(d, bytes, *stream)));
    gpuOutViews.emplace_back(op.dtype, op.shape, d);
  }
  KernelContext cpuCtx{opType, "cpu", attrs, cpuInViews, cpuOutViews};
  ASSERT_FALSE(llvm::errorToBool(cpu::runKernel(cpuCtx)));
  KernelContext gpuCtx{opType, "gpu", attrs, gpuInViews, gpuOutViews};
  KernelFn fn = dev.lookup(opType);
  ASSERT_NE(fn, nullptr) << "no CUDA kernel for " << opType.str();
  ASSERT_FALSE(llvm::errorToBool(dev.launch(fn, gpuCtx, *stream)));
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::vector<uint8_t> gpuOut(cpuOut[k].size());
    ASSERT_FALSE(llvm::errorToBool(dev.copyToHost(
        gpuOut.data(), gpuOutViews[k].data, gpuOut.size(), *stream)));
    // Floats: NaN matches any NaN (the host and device libraries set
    // different payloads and signs); otherwise within `tol`.
    if (outputs[k].dtype != DType::F32 && outputs[k].dtype != DType::F64)
      EXPECT_EQ(gpuOut, cpuOut[k]) << "output " << k;
    else if (outputs[k].dtype == DType::F32)
      expectClose<float>(gpuOut, cpuOut[k], tol);
    else
      expectClose<double>(gpuOut, cpuOut[k], tol);
  }
  for (void *d : deviceMemory)
    dev.deallocate(d);
}

const DType kNumeric[] = {DType::F32, DType::F64, DType::I64,
                          DType::I32, DType::I8,  DType::U8};
const DType kSigned[] = {DType::F32, DType::F64, DType::I64, DType::I32};
const DType kFloat[] = {DType::F32, DType::F64};

/// Output shape, A shape, B shape: equal, scalar, row and column
/// broadcasts, and a broadcast of both sides.
const std::vector<std::vector<int64_t>> kBroadcasts[] = {
    {{1000}, {1000}, {1000}},
    {{300001}, {300001}, {300001}},
    {{4, 5}, {4, 5}, {}},
    {{4, 5}, {1}, {4, 5}},
    {{3, 4, 5}, {3, 4, 5}, {5}},
    {{3, 4, 5}, {3, 1, 5}, {3, 4, 1}},
    {{2, 3, 4, 5}, {2, 1, 4, 1}, {1, 3, 1, 5}},
    {{0, 5}, {0, 5}, {5}},
};

TEST(CudaKernelsTest, ArithmeticMatchesCpu) {
  for (const char *op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    for (DType t : kNumeric)
      for (const auto &shapes : kBroadcasts)
        expectSameAsCpu(
            op, {{t, shapes[1]}, {t, shapes[2], std::string(op) == "Div"}},
            {{t, shapes[0]}});
}

TEST(CudaKernelsTest, ComparisonsAndLogicMatchCpu) {
  for (const char *op :
       {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"})
    for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8,
                    DType::U8, DType::Bool})
      for (const auto &shapes : kBroadcasts)
        expectSameAsCpu(op, {{t, shapes[1]}, {t, shapes[2]}},
                        {{DType::Bool, shapes[0]}});
  for (const char *op : {"And", "Or", "Xor"})
    for (const auto &shapes : kBroadcasts)
      expectSameAsCpu(op, {{DType::Bool, shapes[1]}, {DType::Bool, shapes[2]}},
                      {{DType::Bool, shapes[0]}});
}

TEST(CudaKernelsTest, WhereMatchesCpu) {
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::U8})
    for (const auto &shapes : kBroadcasts)
      expectSameAsCpu("Where",
                      {{DType::Bool, shapes[2]}, {t, shapes[1]}, {t, {1}}},
                      {{t, shapes[0]}});
}

TEST(CudaKernelsTest, UnaryMatchesCpu) {
  for (const char *op : {"Relu", "Neg", "Abs", "Sign"})
    for (DType t : kSigned)
      for (int64_t n : {1, 7, 1000, 300001})
        expectSameAsCpu(op, {{t, {n}}}, {{t, {n}}});
  // Correctly rounded on both backends.
  for (const char *op : {"Sqrt", "Floor", "Ceil"})
    for (DType t : kFloat)
      expectSameAsCpu(op, {{t, {1000}}}, {{t, {1000}}});
  for (const char *op :
       {"Exp", "Log", "Erf", "Tanh", "Sigmoid", "Softplus", "Sin", "Cos"})
    for (DType t : kFloat)
      expectSameAsCpu(op, {{t, {1000}}}, {{t, {1000}}}, Tolerance{4});
  expectSameAsCpu("Not", {{DType::Bool, {1000}}}, {{DType::Bool, {1000}}});
}

TEST(CudaKernelsTest, ActivationGradientsMatchCpu) {
  for (const char *op : {"ReluGrad", "SigmoidGrad", "TanhGrad"})
    for (DType t : kFloat)
      expectSameAsCpu(op, {{t, {3, 333}}, {t, {3, 333}}}, {{t, {3, 333}}});
}

AttrMap optimizerAttrs(
    std::initializer_list<std::pair<const char *, double>> floats,
    std::initializer_list<std::pair<const char *, int64_t>> ints = {}) {
  AttrMap attrs;
  for (const auto &[name, v] : floats)
    attrs.set(name, AttrValue::ofFloat(v));
  for (const auto &[name, v] : ints)
    attrs.set(name, AttrValue::ofInt(v));
  return attrs;
}

TEST(CudaKernelsTest, OptimizersMatchCpu) {
  const std::vector<int64_t> shape = {4099};
  for (DType t : kFloat)
    for (DType stepType : kFloat)
      for (double step : {1.0, 5.0}) {
        // Random params, grads and state: NaN and infinities among them
        // propagate alike.
        Operand stepIn{stepType, {}, false, step};
        expectSameAsCpu("SGDUpdate",
                        {{t, shape}, {t, shape}, {t, shape}, stepIn},
                        {{t, shape}, {t, shape}}, Tolerance{},
                        optimizerAttrs({{"lr", 0.1},
                                        {"momentum", 0.9},
                                        {"dampening", 0.1},
                                        {"weight_decay", 0.01}},
                                       {{"nesterov", 1}}));
        expectSameAsCpu("SGDUpdate", {{t, shape}, {t, shape}, {}, stepIn},
                        {{t, shape}}, Tolerance{},
                        optimizerAttrs({{"lr", 0.1}}));
        for (int64_t decoupled : {0, 1})
          expectSameAsCpu(
              "AdamUpdate",
              {{t, shape}, {t, shape}, {t, shape}, {t, shape}, stepIn},
              {{t, shape}, {t, shape}, {t, shape}},
              // pow(beta, step) of the device's libm may differ in the last
              // bit of a double, which can round the float scalars apart.
              Tolerance{2},
              optimizerAttrs({{"lr", 1e-3},
                              {"beta1", 0.9},
                              {"beta2", 0.999},
                              {"eps", 1e-8},
                              {"weight_decay", 0.01}},
                             {{"decoupled", decoupled}}));
      }
  for (DType t : {DType::F32, DType::F64, DType::I64})
    expectSameAsCpu("Increment", {{t, {}}}, {{t, {}}});
}

Tolerance productTolerance(DType t) {
  return t == DType::F32 ? Tolerance{0, 1e-3} : Tolerance{0, 1e-11};
}

TEST(CudaKernelsTest, MatMulMatchesCpu) {
  // A shape, B shape, Y shape.
  const std::vector<std::vector<int64_t>> cases[] = {
      {{7, 64}, {64, 5}, {7, 5}},
      {{64}, {64, 5}, {5}},
      {{7, 64}, {64}, {7}},
      {{3, 7, 16}, {3, 16, 5}, {3, 7, 5}},
      {{3, 7, 16}, {16, 5}, {3, 7, 5}},
      {{7, 16}, {3, 16, 5}, {3, 7, 5}},
      {{2, 1, 3, 4}, {1, 5, 4, 6}, {2, 5, 3, 6}},
      {{4, 0}, {0, 3}, {4, 3}},
      {{0, 8}, {8, 3}, {0, 3}},
  };
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32})
    for (const auto &c : cases)
      expectSameAsCpu("MatMul", {{t, c[0]}, {t, c[1]}}, {{t, c[2]}},
                      productTolerance(t));
}

TEST(CudaKernelsTest, GemmMatchesCpu) {
  for (DType t : {DType::F32, DType::F64, DType::I64})
    for (int64_t transA : {0, 1})
      for (int64_t transB : {0, 1})
        for (const std::vector<int64_t> &cShape :
             std::vector<std::vector<int64_t>>{{}, {5}, {7, 1}, {7, 5}}) {
          AttrMap attrs =
              optimizerAttrs({{"alpha", 0.5}, {"beta", 2.0}},
                             {{"transA", transA}, {"transB", transB}});
          std::vector<int64_t> aShape = transA ? std::vector<int64_t>{33, 7}
                                               : std::vector<int64_t>{7, 33};
          std::vector<int64_t> bShape = transB ? std::vector<int64_t>{5, 33}
                                               : std::vector<int64_t>{33, 5};
          expectSameAsCpu("Gemm", {{t, aShape}, {t, bShape}, {t, cShape}},
                          {{t, {7, 5}}}, productTolerance(t), attrs);
        }
}

AttrMap reduceAttrs(std::vector<int64_t> axes, int64_t keepDims) {
  AttrMap attrs;
  if (!axes.empty())
    attrs.set("axes", AttrValue::ofInts(std::move(axes)));
  attrs.set("keepdims", AttrValue::ofInt(keepDims));
  return attrs;
}

TEST(CudaKernelsTest, ReductionsMatchCpu) {
  // Input shape, axes, keepdims output shape.
  struct Case {
    std::vector<int64_t> in, axes, out;
  };
  const Case cases[] = {
      {{7, 300}, {1}, {7, 1}},
      {{7, 300}, {0}, {1, 300}},
      {{4, 5, 6}, {0, 2}, {1, 5, 1}},
      {{4, 5, 6}, {}, {1, 1, 1}},
      {{2, 3, 4, 5}, {-1, 1}, {2, 1, 4, 1}},
      {{100000}, {0}, {1}},
      {{3, 0}, {1}, {3, 1}},
  };
  for (const char *op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})
    for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32})
      for (const Case &c : cases) {
        // The sums' order differs (blocks against a running loop).
        Tolerance tol =
            t == DType::F32 ? Tolerance{0, 1e-4} : Tolerance{0, 1e-9};
        expectSameAsCpu(op, {{t, c.in}}, {{t, c.out}}, tol,
                        reduceAttrs(c.axes, 1));
      }
  expectSameAsCpu("ReduceSum", {{DType::F32, {4, 5, 6}}}, {{DType::F32, {5}}},
                  Tolerance{0, 1e-4}, reduceAttrs({0, 2}, 0));
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::U8})
    for (int64_t last : {0, 1}) {
      AttrMap attrs;
      attrs.set("axis", AttrValue::ofInt(1));
      attrs.set("keepdims", AttrValue::ofInt(0));
      attrs.set("select_last_index", AttrValue::ofInt(last));
      expectSameAsCpu("ArgMax", {{t, {9, 10, 3}}}, {{DType::I64, {9, 3}}},
                      Tolerance{}, attrs);
    }
}

TEST(CudaKernelsTest, DataMovementMatchesCpu) {
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::U8}) {
    AttrMap perm;
    perm.set("perm", AttrValue::ofInts({2, 0, 1}));
    expectSameAsCpu("Transpose", {{t, {3, 4, 5}}}, {{t, {5, 3, 4}}},
                    Tolerance{}, perm);
    expectSameAsCpu("Transpose", {{t, {33, 65}}}, {{t, {65, 33}}});
    expectSameAsCpu("Expand", {{t, {3, 1, 5}}}, {{t, {2, 3, 4, 5}}});
    AttrMap slice;
    slice.set("starts", AttrValue::ofInts({1, 4}));
    slice.set("steps", AttrValue::ofInts({2, -1}));
    expectSameAsCpu("Slice", {{t, {7, 6}}}, {{t, {3, 5}}}, Tolerance{}, slice);
    expectSameAsCpu("SliceGrad", {{t, {3, 5}}}, {{t, {7, 6}}}, Tolerance{},
                    slice);
    AttrMap axis1;
    axis1.set("axis", AttrValue::ofInt(1));
    expectSameAsCpu("Concat", {{t, {2, 3, 4}}, {t, {2, 0, 4}}, {t, {2, 5, 4}}},
                    {{t, {2, 8, 4}}}, Tolerance{}, axis1);
    expectSameAsCpu("Split", {{t, {2, 8, 4}}}, {{t, {2, 3, 4}}, {t, {2, 5, 4}}},
                    Tolerance{}, axis1);
  }
}

TEST(CudaKernelsTest, SoftmaxMatchesCpu) {
  for (DType t : kFloat)
    for (int64_t axis : {-1, 1, 0}) {
      AttrMap attrs;
      attrs.set("axis", AttrValue::ofInt(axis));
      // exp and log of the device may differ from the host's in the last
      // bits; the sums run in one order on both.
      Tolerance tol =
          t == DType::F32 ? Tolerance{8, 1e-5} : Tolerance{8, 1e-13};
      for (const char *op : {"Softmax", "LogSoftmax"})
        expectSameAsCpu(op, {{t, {6, 50, 7}}}, {{t, {6, 50, 7}}}, tol, attrs);
      for (const char *op : {"SoftmaxGrad", "LogSoftmaxGrad"})
        expectSameAsCpu(op, {{t, {6, 50, 7}}, {t, {6, 50, 7}}},
                        {{t, {6, 50, 7}}}, tol, attrs);
    }
}

TEST(CudaKernelsTest, CopiesMatchCpu) {
  for (const char *op : {"Identity", "Reshape"})
    for (DType t : {DType::F32, DType::I64, DType::U8})
      expectSameAsCpu(op, {{t, {6, 35}}}, {{t, {210}}});
}

TEST(CudaKernelsTest, IntegerDivisionByZeroIsAnError) {
  KernelBackend &dev = gpu();
  std::unique_ptr<Stream> stream = dev.createStream();
  std::vector<int32_t> a = {1, 2, 3}, b = {1, 0, 1};
  TensorView va(DType::I32, {3}, llvm::cantFail(dev.allocate(12)));
  TensorView vb(DType::I32, {3}, llvm::cantFail(dev.allocate(12)));
  TensorView vc(DType::I32, {3}, llvm::cantFail(dev.allocate(12)));
  ASSERT_FALSE(
      llvm::errorToBool(dev.copyToDevice(va.data, a.data(), 12, *stream)));
  ASSERT_FALSE(
      llvm::errorToBool(dev.copyToDevice(vb.data, b.data(), 12, *stream)));
  AttrMap attrs;
  TensorView ins[] = {va, vb};
  KernelContext ctx{"Div", "d", attrs, ins, vc};
  llvm::Error err = dev.launch(dev.lookup("Div"), ctx, *stream);
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "Div 'd': integer division by zero");
  for (void *p : {va.data, vb.data, vc.data})
    dev.deallocate(p);
}

/// Every CUDA kernel is one the CPU backend has (the CPU is the reference).
TEST(CudaKernelsTest, EveryCudaOpHasACpuKernel) {
  for (const auto &[type, fn] : cuda::kernelTable()) {
    bool found = false;
    for (const auto &[cpuType, cpuFn] : cpu::kernelTable())
      found = found || cpuType == type;
    EXPECT_TRUE(found) << type.str();
  }
}

TEST(CudaKernelsTest, ErrorsNameTheOp) {
  KernelBackend &dev = gpu();
  std::unique_ptr<Stream> stream = dev.createStream();
  TensorView x(DType::F32, {4}, llvm::cantFail(dev.allocate(16)));
  TensorView y(DType::F64, {4}, llvm::cantFail(dev.allocate(32)));
  AttrMap attrs;
  KernelContext ctx{"Relu", "r", attrs, x, y};
  llvm::Error err = dev.launch(dev.lookup("Relu"), ctx, *stream);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("Relu 'r'"), std::string::npos);
  dev.deallocate(x.data);
  dev.deallocate(y.data);
}

TEST(CudaBackendTest, CopiesLargerThanStagingRoundTrip) {
  KernelBackend &dev = gpu();
  std::unique_ptr<Stream> stream = dev.createStream();
  std::vector<uint8_t> host(20 << 20);
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = static_cast<uint8_t>(i * 7 + 3);
  void *d = llvm::cantFail(dev.allocate(host.size()));
  ASSERT_FALSE(llvm::errorToBool(
      dev.copyToDevice(d, host.data(), host.size(), *stream)));
  std::vector<uint8_t> back(host.size());
  ASSERT_FALSE(
      llvm::errorToBool(dev.copyToHost(back.data(), d, back.size(), *stream)));
  EXPECT_EQ(back, host);
  ASSERT_FALSE(llvm::errorToBool(dev.fillZero(d, 1000, *stream)));
  ASSERT_FALSE(
      llvm::errorToBool(dev.copyToHost(back.data(), d, back.size(), *stream)));
  EXPECT_EQ(std::vector<uint8_t>(back.begin(), back.begin() + 1000),
            std::vector<uint8_t>(1000, 0));
  EXPECT_EQ(back[1000], host[1000]);
  dev.deallocate(d);
}

TEST(CudaBackendTest, OutOfMemoryIsAnError) {
  llvm::Expected<void *> p = gpu().allocate(size_t(1) << 50);
  ASSERT_FALSE(bool(p));
  EXPECT_NE(llvm::toString(p.takeError()).find("out of GPU memory"),
            std::string::npos);
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string why;
  llvm::Expected<int> count = cuda::deviceCount(&why);
  if (!count) {
    std::printf("skipped: no GPU (%s)\n",
                llvm::toString(count.takeError()).c_str());
    return 77;
  }
  if (*count == 0) {
    std::printf("skipped: no GPU (%s)\n", why.c_str());
    return 77;
  }
  return RUN_ALL_TESTS();
}
