//===- ConvPoolTest.cpp - CUDA Conv and pooling against the CPU kernels ---===//
//
// Conv and its gradients (1-D, 2-D, 3-D; strides, dilations, asymmetric
// pads, groups, bias, the direct 1x1 case) must match the CPU within the
// tolerance of a differently ordered product (cuBLAS against OpenBLAS); the
// pools and their gradients, which sum in the CPU's order, bit for bit.
// MaxPoolGrad runs on indices from the CPU's MaxPool, on indices that leave
// their plane, and on an index outside dX, which must fail with the CPU's
// message. The binary's main() is in CudaKernelsTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/CudaTestUtil.h"

using namespace shardc::rt;
using namespace shardc::rt::cudatest;

namespace {

using Shape = std::vector<int64_t>;

/// Window attributes; empty lists are left unset (the defaults).
AttrMap windowAttrs(Shape kernel, Shape strides = {}, Shape pads = {},
                    Shape dilations = {}, int64_t group = 0) {
  AttrMap attrs;
  if (!kernel.empty())
    attrs.set("kernel_shape", AttrValue::ofInts(std::move(kernel)));
  if (!strides.empty())
    attrs.set("strides", AttrValue::ofInts(std::move(strides)));
  if (!pads.empty())
    attrs.set("pads", AttrValue::ofInts(std::move(pads)));
  if (!dilations.empty())
    attrs.set("dilations", AttrValue::ofInts(std::move(dilations)));
  if (group > 0)
    attrs.set("group", AttrValue::ofInt(group));
  return attrs;
}

/// One convolution: X, W and Y shapes, its attributes, whether it has a
/// bias.
struct ConvCase {
  const char *what;
  Shape x, w, y;
  AttrMap attrs;
  bool bias = true;
};

std::vector<ConvCase> convCases() {
  return {
      {"1-D strided dilated, asymmetric pads",
       {2, 4, 11},
       {6, 4, 3},
       {2, 6, 5},
       windowAttrs({}, {2}, {1, 2}, {2})},
      {"2-D same padding",
       {2, 3, 9, 8},
       {4, 3, 3, 3},
       {2, 4, 9, 8},
       windowAttrs({3, 3}, {}, {1, 1, 1, 1})},
      {"2-D groups, strides, dilations, asymmetric pads",
       {2, 4, 10, 9},
       {6, 2, 3, 2},
       {2, 6, 5, 8},
       windowAttrs({}, {2, 1}, {0, 1, 2, 0}, {1, 2}, 2)},
      {"2-D depthwise",
       {2, 5, 7, 7},
       {5, 1, 3, 3},
       {2, 5, 7, 7},
       windowAttrs({}, {}, {1, 1, 1, 1}, {}, 5),
       false},
      {"2-D direct 1x1",
       {3, 8, 5, 6},
       {4, 8, 1, 1},
       {3, 4, 5, 6},
       windowAttrs({})},
      {"2-D direct 1x1, groups",
       {3, 8, 5, 6},
       {6, 4, 1, 1},
       {3, 6, 5, 6},
       windowAttrs({}, {}, {}, {}, 2),
       false},
      {"2-D 1x1 strided",
       {2, 3, 7, 6},
       {4, 3, 1, 1},
       {2, 4, 4, 3},
       windowAttrs({}, {2, 2})},
      {"2-D padding wider than the kernel",
       {1, 2, 3, 3},
       {3, 2, 2, 2},
       {1, 3, 6, 6},
       windowAttrs({}, {}, {2, 2, 2, 2})},
      {"3-D",
       {2, 2, 5, 6, 4},
       {3, 2, 2, 3, 2},
       {2, 3, 5, 3, 4},
       windowAttrs({}, {1, 2, 1}, {1, 0, 1, 0, 1, 0})},
  };
}

/// Every case on both convolution paths: cuDNN (where it takes the case:
/// symmetric pads) and the backend's own kernels.
TEST(CudaConvTest, ConvMatchesCpu) {
  for (bool cudnn : {true, false})
    for (const ConvCase &c : convCases())
      for (DType t : kFloat) {
        SCOPED_TRACE(std::string(c.what) + (cudnn ? ", cuDNN" : ", own"));
        Operand bias = c.bias ? Operand{t, {c.w[0]}} : Operand{};
        expectSameAsCpu("Conv", {{t, c.x}, {t, c.w}, bias}, {{t, c.y}},
                        productTolerance(t), c.attrs, &gpu(cudnn));
      }
}

TEST(CudaConvTest, ConvGradInputMatchesCpu) {
  for (bool cudnn : {true, false})
    for (const ConvCase &c : convCases())
      for (DType t : kFloat) {
        SCOPED_TRACE(std::string(c.what) + (cudnn ? ", cuDNN" : ", own"));
        expectSameAsCpu("ConvGradInput", {{t, c.y}, {t, c.w}}, {{t, c.x}},
                        productTolerance(t), c.attrs, &gpu(cudnn));
      }
}

TEST(CudaConvTest, ConvGradWeightMatchesCpu) {
  for (bool cudnn : {true, false})
    for (const ConvCase &c : convCases())
      for (DType t : kFloat) {
        SCOPED_TRACE(std::string(c.what) + (cudnn ? ", cuDNN" : ", own"));
        expectSameAsCpu("ConvGradWeight", {{t, c.y}, {t, c.x}}, {{t, c.w}},
                        productTolerance(t), c.attrs, &gpu(cudnn));
      }
}

/// Float16 and bfloat16 convolutions: through cuDNN in 16 bits (summing in
/// float32, Conv's bias added after rounding) where it takes the case, on
/// widened copies otherwise (asymmetric pads; cuDNN off). The CPU widens
/// every case and rounds once; the two differ by the products' summation
/// order and, with a bias, the second rounding.
TEST(CudaConvTest, SixteenBitConvolutionsMatchCpu) {
  for (bool cudnn : {true, false})
    for (const ConvCase &c : convCases())
      for (DType t : {DType::BF16, DType::F16}) {
        SCOPED_TRACE(std::string(c.what) + (cudnn ? ", cuDNN" : ", own"));
        Tolerance tol = productTolerance(t);
        if (c.bias)
          tol.ulps += 1;
        Operand bias = c.bias ? Operand{t, {c.w[0]}} : Operand{};
        expectSameAsCpu("Conv", {{t, c.x}, {t, c.w}, bias}, {{t, c.y}}, tol,
                        c.attrs, &gpu(cudnn));
        expectSameAsCpu("ConvGradInput", {{t, c.y}, {t, c.w}}, {{t, c.x}},
                        productTolerance(t), c.attrs, &gpu(cudnn));
        expectSameAsCpu("ConvGradWeight", {{t, c.y}, {t, c.x}}, {{t, c.w}},
                        productTolerance(t), c.attrs, &gpu(cudnn));
        if (testing::Test::HasFailure())
          return;
      }
}

/// The same operands give the same bytes on every run, on both paths and in
/// 16 bits (the gradients are where nondeterministic algorithms would sum
/// with atomics).
TEST(CudaConvTest, Reproducible) {
  for (bool cudnn : {true, false})
    for (const ConvCase &c : convCases())
      for (DType t : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(std::string(c.what) + (cudnn ? ", cuDNN" : ", own"));
        expectReproducible(gpu(cudnn), "Conv", {{t, c.x}, {t, c.w}}, {{t, c.y}},
                           c.attrs);
        expectReproducible(gpu(cudnn), "ConvGradInput", {{t, c.y}, {t, c.w}},
                           {{t, c.x}}, c.attrs);
        expectReproducible(gpu(cudnn), "ConvGradWeight", {{t, c.y}, {t, c.x}},
                           {{t, c.w}}, c.attrs);
      }
}

TEST(CudaConvTest, EmptyBatches) {
  AttrMap attrs = windowAttrs({}, {}, {1, 1, 1, 1});
  for (DType t : {DType::F32, DType::F64, DType::BF16}) {
    // No images: dW is zero, Y and dX are empty.
    expectSameAsCpu("ConvGradWeight", {{t, {0, 4, 5, 5}}, {t, {0, 3, 5, 5}}},
                    {{t, {4, 3, 3, 3}}}, Tolerance{}, attrs);
    expectSameAsCpu("Conv", {{t, {0, 3, 5, 5}}, {t, {4, 3, 3, 3}}},
                    {{t, {0, 4, 5, 5}}}, Tolerance{}, attrs);
    expectSameAsCpu("ConvGradInput", {{t, {0, 4, 5, 5}}, {t, {4, 3, 3, 3}}},
                    {{t, {0, 3, 5, 5}}}, Tolerance{}, attrs);
  }
}

/// One pool: X and Y shapes (Y encoding ceil_mode) and the attributes.
struct PoolCase {
  const char *what;
  Shape x, y;
  AttrMap attrs;
};

std::vector<PoolCase> poolCases() {
  return {
      {"2-D padded, ceil-mode output",
       {2, 3, 9, 8},
       {2, 3, 5, 5},
       windowAttrs({3, 3}, {2, 2}, {1, 1, 1, 1})},
      {"2-D floor-mode output",
       {2, 3, 9, 8},
       {2, 3, 5, 4},
       windowAttrs({3, 3}, {2, 2}, {1, 1, 1, 1})},
      {"2-D asymmetric pads",
       {1, 4, 6, 7},
       {1, 4, 4, 3},
       windowAttrs({2, 3}, {2, 2}, {1, 0, 0, 1})},
      // Stride beyond the kernel with ceil_mode: the last windows hold no
      // input element.
      {"2-D empty windows",
       {1, 2, 5, 5},
       {1, 2, 3, 3},
       windowAttrs({1, 1}, {3, 3})},
      {"1-D dilated",
       {2, 3, 20},
       {2, 3, 19},
       windowAttrs({3}, {1}, {2, 1}, {2})},
      {"3-D",
       {1, 2, 5, 6, 7},
       {1, 2, 3, 3, 4},
       windowAttrs({2, 2, 2}, {2, 2, 2}, {0, 1, 0, 1, 0, 1})},
  };
}

TEST(CudaPoolTest, MaxPoolMatchesCpu) {
  for (const PoolCase &c : poolCases())
    for (DType t :
         {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8, DType::U8})
      for (int64_t order : {0, 1}) {
        SCOPED_TRACE(c.what);
        AttrMap attrs = c.attrs;
        attrs.set("storage_order", AttrValue::ofInt(order));
        expectSameAsCpu("MaxPool", {{t, c.x}}, {{t, c.y}, {DType::I64, c.y}},
                        Tolerance{}, attrs);
      }
  // Without the Indices output.
  for (DType t : kFloat)
    expectSameAsCpu("MaxPool", {{t, {2, 3, 9, 8}}}, {{t, {2, 3, 5, 5}}},
                    Tolerance{}, windowAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}));
}

TEST(CudaPoolTest, AveragePoolMatchesCpu) {
  for (const PoolCase &c : poolCases())
    for (DType t : kFloat)
      for (int64_t includePad : {0, 1}) {
        SCOPED_TRACE(c.what);
        AttrMap attrs = c.attrs;
        attrs.set("count_include_pad", AttrValue::ofInt(includePad));
        expectSameAsCpu("AveragePool", {{t, c.x}}, {{t, c.y}}, Tolerance{},
                        attrs);
        expectSameAsCpu("AveragePoolGrad", {{t, c.y}}, {{t, c.x}}, Tolerance{},
                        attrs);
      }
}

TEST(CudaPoolTest, GlobalAveragePoolMatchesCpu) {
  const std::vector<Shape> cases[] = {
      {{3, 5, 7, 6}, {3, 5, 1, 1}},       {{2, 3, 10}, {2, 3, 1}},
      {{2, 2, 3, 4, 5}, {2, 2, 1, 1, 1}}, {{4, 6}, {4, 6}},
      {{0, 3, 4, 4}, {0, 3, 1, 1}},
  };
  for (DType t : kFloat)
    for (const auto &c : cases)
      expectSameAsCpu("GlobalAveragePool", {{t, c[0]}}, {{t, c[1]}});
}

/// A host tensor for runOn.
struct HostTensor {
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;

  HostTensor(DType dtype, Shape shape)
      : dtype(dtype), shape(std::move(shape)),
        bytes(numElements(this->shape) * dtypeSize(dtype)) {}
  template <typename T> T *as() { return reinterpret_cast<T *>(bytes.data()); }
};

/// Runs `opType` on the CPU or the device with `inputs`, filling `outputs`;
/// returns the kernel's error message, "" on success. The op has the same
/// name on both, so that the messages compare.
std::string runOn(bool device, llvm::StringRef opType, const AttrMap &attrs,
                  std::vector<HostTensor> &inputs,
                  std::vector<HostTensor> &outputs) {
  std::vector<TensorView> in, out;
  if (!device) {
    for (HostTensor &h : inputs)
      in.emplace_back(h.dtype, h.shape, h.bytes.data());
    for (HostTensor &h : outputs)
      out.emplace_back(h.dtype, h.shape, h.bytes.data());
    KernelContext ctx{opType, "op", attrs, in, out};
    llvm::Error err = cpu::runKernel(ctx);
    return err ? llvm::toString(std::move(err)) : "";
  }
  KernelBackend &dev = gpu();
  std::unique_ptr<Stream> stream = dev.createStream();
  std::vector<void *> memory;
  for (HostTensor &h : inputs) {
    void *d = llvm::cantFail(dev.allocate(h.bytes.size()));
    memory.push_back(d);
    EXPECT_FALSE(llvm::errorToBool(
        dev.copyToDevice(d, h.bytes.data(), h.bytes.size(), *stream)));
    in.emplace_back(h.dtype, h.shape, d);
  }
  for (HostTensor &h : outputs) {
    void *d = llvm::cantFail(dev.allocate(h.bytes.size()));
    memory.push_back(d);
    EXPECT_FALSE(llvm::errorToBool(dev.fillZero(d, h.bytes.size(), *stream)));
    out.emplace_back(h.dtype, h.shape, d);
  }
  KernelContext ctx{opType, "op", attrs, in, out};
  KernelFn fn = dev.lookup(opType);
  EXPECT_NE(fn, nullptr) << "no CUDA kernel for " << opType.str();
  std::string message;
  if (fn) {
    llvm::Error err = dev.launch(fn, ctx, *stream);
    message = err ? llvm::toString(std::move(err)) : "";
  }
  if (message.empty()) {
    for (size_t k = 0; k < outputs.size(); ++k) {
      EXPECT_FALSE(
          llvm::errorToBool(dev.copyToHost(outputs[k].bytes.data(), out[k].data,
                                           outputs[k].bytes.size(), *stream)));
    }
  }
  for (void *d : memory)
    dev.deallocate(d);
  return message;
}

/// MaxPoolGrad on both backends with `dy` and `indices` into dX of
/// `dxShape`: the same dX bit for bit, or the same error.
void expectMaxPoolGradSame(DType t, const HostTensor &dy,
                           const HostTensor &indices, const Shape &dxShape,
                           std::string *error = nullptr) {
  AttrMap attrs;
  std::vector<HostTensor> in = {dy, indices};
  std::vector<HostTensor> cpuOut = {HostTensor(t, dxShape)};
  std::vector<HostTensor> gpuOut = cpuOut;
  std::string cpuMessage = runOn(false, "MaxPoolGrad", attrs, in, cpuOut);
  std::string gpuMessage = runOn(true, "MaxPoolGrad", attrs, in, gpuOut);
  EXPECT_EQ(gpuMessage, cpuMessage);
  if (error) {
    *error = cpuMessage;
  } else if (cpuMessage.empty()) {
    EXPECT_EQ(gpuOut[0].bytes, cpuOut[0].bytes);
  }
}

HostTensor randomTensor(DType t, Shape shape, std::mt19937 &rng) {
  HostTensor h(t, std::move(shape));
  h.bytes = randomBytes(t, numElements(h.shape), rng);
  return h;
}

TEST(CudaPoolTest, MaxPoolGradOfMaxPoolIndicesMatchesCpu) {
  std::mt19937 rng(7);
  for (const PoolCase &c : poolCases())
    for (DType t : kFloat)
      for (int64_t order : {0, 1}) {
        SCOPED_TRACE(c.what);
        AttrMap attrs = c.attrs;
        attrs.set("storage_order", AttrValue::ofInt(order));
        std::vector<HostTensor> in = {randomTensor(t, c.x, rng)};
        std::vector<HostTensor> out = {HostTensor(t, c.y),
                                       HostTensor(DType::I64, c.y)};
        ASSERT_EQ(runOn(false, "MaxPool", attrs, in, out), "");
        expectMaxPoolGradSame(t, randomTensor(t, c.y, rng), out[1], c.x);
      }
}

TEST(CudaPoolTest, MaxPoolGradAcrossPlanesMatchesCpu) {
  // Indices anywhere in dX (other planes, repeated): the sequential path.
  for (DType t : kFloat) {
    expectSameAsCpu("MaxPoolGrad",
                    {{t, {2, 3, 4, 4}},
                     {DType::I64, {2, 3, 4, 4}, false, {}, 2 * 3 * 6 * 6}},
                    {{t, {2, 3, 6, 6}}});
    // dY and dX planes that do not line up.
    expectSameAsCpu("MaxPoolGrad",
                    {{t, {5, 7}}, {DType::I64, {5, 7}, false, {}, 12}},
                    {{t, {3, 4}}});
  }
}

TEST(CudaPoolTest, MaxPoolGradIndexOutsideDxIsTheCpuError) {
  for (DType t : kFloat) {
    std::mt19937 rng(3);
    HostTensor dy = randomTensor(t, {1, 2, 2, 2}, rng);
    HostTensor indices(DType::I64, {1, 2, 2, 2});
    int64_t values[] = {0, 5, -1, 18, 2, -7, 6, 40};
    std::memcpy(indices.bytes.data(), values, sizeof values);
    std::string message;
    expectMaxPoolGradSame(t, dy, indices, {1, 2, 3, 3}, &message);
    EXPECT_NE(message.find("index 18 at position 3 is outside 'dX' of shape "
                           "[1, 2, 3, 3]"),
              std::string::npos)
        << message;
  }
}

TEST(CudaPoolTest, OperandErrorsAreTheCpuErrors) {
  std::mt19937 rng(5);
  // (op, inputs, outputs, attrs) the CPU refuses.
  struct Bad {
    const char *op;
    std::vector<HostTensor> in, out;
    AttrMap attrs;
  };
  std::vector<Bad> cases;
  cases.push_back({"Conv",
                   {randomTensor(DType::F32, {1, 3, 5, 5}, rng),
                    randomTensor(DType::F32, {4, 3, 3, 3}, rng)},
                   {HostTensor(DType::F32, {1, 4, 5, 5})},
                   windowAttrs({})});
  cases.push_back({"Conv",
                   {randomTensor(DType::F32, {1, 4, 5, 5}, rng),
                    randomTensor(DType::F32, {4, 3, 3, 3}, rng)},
                   {HostTensor(DType::F32, {1, 4, 3, 3})},
                   windowAttrs({}, {}, {}, {}, 2)});
  cases.push_back({"Conv",
                   {randomTensor(DType::I64, {1, 3, 5, 5}, rng),
                    randomTensor(DType::I64, {4, 3, 3, 3}, rng)},
                   {HostTensor(DType::I64, {1, 4, 3, 3})},
                   windowAttrs({})});
  cases.push_back({"ConvGradWeight",
                   {randomTensor(DType::F64, {1, 4, 3, 3}, rng),
                    randomTensor(DType::F64, {1, 3, 5, 5}, rng)},
                   {HostTensor(DType::F64, {4, 3, 2, 2})},
                   windowAttrs({3, 3})});
  cases.push_back({"MaxPool",
                   {randomTensor(DType::F32, {1, 2, 5, 5}, rng)},
                   {HostTensor(DType::F32, {1, 2, 2, 2})},
                   windowAttrs({7, 7})});
  AttrMap badOrder = windowAttrs({2, 2});
  badOrder.set("storage_order", AttrValue::ofInt(2));
  cases.push_back({"MaxPool",
                   {randomTensor(DType::F32, {1, 2, 5, 5}, rng)},
                   {HostTensor(DType::F32, {1, 2, 4, 4}),
                    HostTensor(DType::I64, {1, 2, 4, 4})},
                   badOrder});
  cases.push_back({"AveragePool",
                   {randomTensor(DType::I32, {1, 2, 5, 5}, rng)},
                   {HostTensor(DType::I32, {1, 2, 4, 4})},
                   windowAttrs({2, 2})});
  cases.push_back({"GlobalAveragePool",
                   {randomTensor(DType::F32, {1, 2, 5, 5}, rng)},
                   {HostTensor(DType::F32, {1, 2, 1})},
                   AttrMap()});
  for (Bad &c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<HostTensor> cpuOut = c.out, gpuOut = c.out;
    std::string cpuMessage = runOn(false, c.op, c.attrs, c.in, cpuOut);
    EXPECT_NE(cpuMessage, "");
    EXPECT_EQ(runOn(true, c.op, c.attrs, c.in, gpuOut), cpuMessage);
  }
}

} // namespace
