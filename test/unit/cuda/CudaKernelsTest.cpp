//===- CudaKernelsTest.cpp - The CUDA backend against the CPU backend -----===//
//
// Every kernel of the CUDA table runs on inputs drawn at random (with NaN,
// infinities and signed zeros among them) and must give the CPU kernel's
// result, bit for bit where the shared element functions make it exact.
// Needs a GPU: without one the binary prints "skipped: no GPU" and exits 77,
// which ctest counts as skipped (test/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/CudaTestUtil.h"

#include <set>

using namespace shardc::rt;
using namespace shardc::rt::cudatest;

namespace {

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
       {"Exp", "Log", "Erf", "Tanh", "Sigmoid", "Softplus", "Sin", "Cos", "Tan",
        "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"})
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
  // With gradient clipping's coefficient as grad_scale.
  const Operand step{DType::F32, {}, false, 3.0},
      scale{DType::F32, {}, false, 0.37};
  for (DType t : kFloat) {
    expectSameAsCpu("SGDUpdate",
                    {{t, shape}, {t, shape}, {t, shape}, step, scale},
                    {{t, shape}, {t, shape}}, Tolerance{},
                    optimizerAttrs({{"lr", 0.1}, {"momentum", 0.9}}));
    expectSameAsCpu(
        "AdamUpdate",
        {{t, shape}, {t, shape}, {t, shape}, {t, shape}, step, scale},
        {{t, shape}, {t, shape}, {t, shape}}, Tolerance{2},
        optimizerAttrs({{"lr", 1e-3},
                        {"beta1", 0.9},
                        {"beta2", 0.999},
                        {"eps", 1e-8},
                        {"weight_decay", 0.01}},
                       {{"decoupled", 1}}));
  }
}

TEST(CudaKernelsTest, LossScalingMatchesCpu) {
  AttrMap attrs =
      optimizerAttrs({{"growth_factor", 2.0}, {"backoff_factor", 0.5}},
                     {{"growth_interval", 3}});
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double total : {2.5, inf, nan})
    for (double tracker : {0.0, 2.0})
      expectSameAsCpu("LossScale",
                      {{DType::F64, {}, false, total},
                       {DType::F32, {}, false, 65536.0},
                       {DType::F32, {}, false, tracker}},
                      {{DType::Bool, {}},
                       {DType::F32, {}},
                       {DType::F32, {}},
                       {DType::F32, {}},
                       {DType::F32, {}}},
                      Tolerance{}, attrs);
  // The updates and the counter with a skip flag (and a schedule counter).
  const std::vector<int64_t> shape = {4099};
  const Operand step{DType::F32, {}, false, 3.0},
      unscale{DType::F32, {}, false, 1.0 / 1024},
      lrStep{DType::F32, {}, false, 5.0};
  AttrMap sgd =
      optimizerAttrs({{"lr", 0.1}, {"momentum", 0.9}}, {{"warmup_steps", 8}});
  AttrMap adam = optimizerAttrs({{"lr", 1e-3},
                                 {"beta1", 0.9},
                                 {"beta2", 0.999},
                                 {"eps", 1e-8},
                                 {"weight_decay", 0.01}},
                                {{"decoupled", 1}, {"warmup_steps", 8}});
  for (double skip : {0.0, 1.0}) {
    const Operand flag{DType::Bool, {}, false, skip};
    for (DType t : kFloat) {
      expectSameAsCpu(
          "SGDUpdate",
          {{t, shape}, {t, shape}, {t, shape}, step, unscale, flag, lrStep},
          {{t, shape}, {t, shape}}, Tolerance{}, sgd);
      expectSameAsCpu("AdamUpdate",
                      {{t, shape},
                       {t, shape},
                       {t, shape},
                       {t, shape},
                       step,
                       unscale,
                       flag,
                       lrStep},
                      {{t, shape}, {t, shape}, {t, shape}}, Tolerance{2}, adam);
    }
    expectSameAsCpu("Increment", {{DType::F32, {}}, flag}, {{DType::F32, {}}});
  }
  AttrMap clip;
  clip.set("norm_type", AttrValue::ofString("l2"));
  clip.set("max_norm", AttrValue::ofFloat(1.5));
  for (double total : {0.25, 9.0e6, inf})
    expectSameAsCpu("ClipCoefficient",
                    {{DType::F64, {}, false, total}, unscale},
                    {{DType::F32, {}}, {DType::F32, {}}}, Tolerance{}, clip);
}

TEST(CudaKernelsTest, ClippingMatchesCpu) {
  // Both accumulate in double, in different orders: the CPU one element
  // after another, the GPU in 256 strided shares and a tree. For up to 3e5
  // positive terms the two sums differ by about sqrt(n) f64 ulps (~550),
  // far below what the f32 norm resolves (2^29 f64 ulps); allow 2^14.
  for (const char *type : {"l2", "inf"}) {
    AttrMap attrs;
    attrs.set("norm_type", AttrValue::ofString(type));
    for (DType t : kFloat)
      for (int64_t n : {1, 1000, 300001}) {
        expectSameAsCpu("PartialNorm", {{t, {n}}}, {{DType::F64, {}}},
                        Tolerance{1 << 14}, attrs);
        expectSameAsCpu("PartialNorm", {{t, {n}}, {DType::F64, {}, false, 2.5}},
                        {{DType::F64, {}}}, Tolerance{1 << 14}, attrs);
      }
    attrs.set("max_norm", AttrValue::ofFloat(1.5));
    for (double total : {0.25, 9.0, 1e30, 1e60})
      expectSameAsCpu("ClipCoefficient", {{DType::F64, {}, false, total}},
                      {{DType::F32, {}}, {DType::F32, {}}}, Tolerance{}, attrs);
  }
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
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I64,
                  DType::I32})
    for (const auto &c : cases)
      expectSameAsCpu("MatMul", {{t, c[0]}, {t, c[1]}}, {{t, c[2]}},
                      productTolerance(t));
}

TEST(CudaKernelsTest, PermutedMatMulMatchesCpu) {
  // Attention's products over q, k, v stored [batch, time, heads, dim]:
  // two batch dimensions (one strided-batched call per outer index), the
  // transposed flags, and a merged result; and a rank-3 case.
  struct Case {
    std::vector<int64_t> a, b, y, aPerm, bPerm, yPerm;
  };
  const Case cases[] = {
      {{2, 5, 3, 4},
       {2, 5, 3, 4},
       {2, 3, 5, 5},
       {0, 2, 1, 3},
       {0, 2, 3, 1},
       {0, 1, 2, 3}},
      {{2, 3, 5, 5},
       {2, 5, 3, 4},
       {2, 5, 3, 4},
       {0, 1, 2, 3},
       {0, 2, 1, 3},
       {0, 2, 1, 3}},
      {{2, 3, 5, 5},
       {2, 5, 3, 4},
       {2, 5, 3, 4},
       {0, 1, 3, 2},
       {0, 2, 1, 3},
       {0, 2, 1, 3}},
      {{2, 3, 4}, {5, 3, 2}, {3, 4, 5}, {1, 2, 0}, {1, 2, 0}, {0, 1, 2}},
  };
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16})
    for (const Case &c : cases) {
      AttrMap attrs;
      attrs.set("a_perm", AttrValue::ofInts(c.aPerm));
      attrs.set("b_perm", AttrValue::ofInts(c.bPerm));
      attrs.set("output_perm", AttrValue::ofInts(c.yPerm));
      expectSameAsCpu("PermutedMatMul", {{t, c.a}, {t, c.b}}, {{t, c.y}},
                      productTolerance(t), attrs);
    }
}

TEST(CudaKernelsTest, GemmMatchesCpu) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I64})
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

TEST(CudaKernelsTest, LossesMatchCpu) {
  // (N, C) and (N, C, D) scores, i64 and i32 targets, every reduction, with
  // and without class weights and an ignored class.
  const std::vector<std::vector<int64_t>> shapes = {{37, 11}, {5, 7, 9}};
  for (DType t : kFloat)
    for (const std::vector<int64_t> &shape : shapes)
      for (DType targetType : {DType::I64, DType::I32})
        for (const char *reduction : {"mean", "sum", "none"})
          for (bool weighted : {false, true})
            for (bool ignore : {false, true}) {
              AttrMap attrs;
              attrs.set("reduction", AttrValue::ofString(reduction));
              if (ignore)
                attrs.set("ignore_index", AttrValue::ofInt(3));
              std::vector<int64_t> targetShape = {shape[0]};
              targetShape.insert(targetShape.end(), shape.begin() + 2,
                                 shape.end());
              std::vector<int64_t> lossShape =
                  llvm::StringRef(reduction) == "none" ? targetShape
                                                       : std::vector<int64_t>{};
              Operand scores{t, shape};
              Operand targets{targetType, targetShape};
              targets.below = shape[1];
              Operand weights = weighted ? Operand{t, {shape[1]}} : Operand{};
              Tolerance tol =
                  t == DType::F32 ? Tolerance{8, 1e-5} : Tolerance{8, 1e-12};
              expectSameAsCpu("SoftmaxCrossEntropyLoss",
                              {scores, targets, weights},
                              {{t, lossShape}, {t, shape}}, tol, attrs);
              expectSameAsCpu("NegativeLogLikelihoodLoss",
                              {scores, targets, weights}, {{t, lossShape}}, tol,
                              attrs);
              for (const char *op : {"SoftmaxCrossEntropyLossGrad",
                                     "NegativeLogLikelihoodLossGrad"})
                expectSameAsCpu(op, {{t, lossShape}, scores, targets, weights},
                                {{t, shape}}, tol, attrs);
              if (!lossShape.empty())
                continue;
              expectSameAsCpu("SoftmaxCrossEntropyLossWithGrad",
                              {scores, targets, weights},
                              {{t, lossShape}, {t, shape}}, tol, attrs);
            }
}

TEST(CudaKernelsTest, OutOfRangeTargetIsTheCpuError) {
  KernelBackend &dev = gpu();
  std::unique_ptr<Stream> stream = dev.createStream();
  std::vector<float> scores(4 * 3, 0.5f);
  std::vector<int64_t> targets = {0, 2, 7, 1};
  float loss = 0;
  auto run = [&](KernelBackend *backend) {
    std::vector<TensorView> in, out;
    void *ds = scores.data(), *dt = targets.data(), *dl = &loss;
    if (backend) {
      ds = llvm::cantFail(dev.allocate(scores.size() * 4));
      dt = llvm::cantFail(dev.allocate(targets.size() * 8));
      dl = llvm::cantFail(dev.allocate(4));
      EXPECT_FALSE(llvm::errorToBool(
          dev.copyToDevice(ds, scores.data(), scores.size() * 4, *stream)));
      EXPECT_FALSE(llvm::errorToBool(
          dev.copyToDevice(dt, targets.data(), targets.size() * 8, *stream)));
    }
    in.emplace_back(DType::F32, std::vector<int64_t>{4, 3}, ds);
    in.emplace_back(DType::I64, std::vector<int64_t>{4}, dt);
    out.emplace_back(DType::F32, std::vector<int64_t>{}, dl);
    AttrMap attrs;
    KernelContext ctx{"SoftmaxCrossEntropyLoss", "loss", attrs, in, out};
    llvm::Error err = backend ? dev.launch(dev.lookup(ctx.opType), ctx, *stream)
                              : cpu::runKernel(ctx);
    std::string message = err ? llvm::toString(std::move(err)) : "";
    if (backend)
      for (void *p : {ds, dt, dl})
        dev.deallocate(p);
    return message;
  };
  std::string cpuMessage = run(nullptr);
  EXPECT_NE(cpuMessage.find("target 7 at position 2 is outside [0, 3)"),
            std::string::npos)
      << cpuMessage;
  EXPECT_EQ(run(&dev), cpuMessage);
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
// The two backends run the same ops: every plan the CPU backend runs has a
// kernel for each of its ops on the CUDA backend. Needs no GPU (main runs
// this suite alone when there is none).
TEST(CudaTableTest, TheBackendsHaveTheSameOps) {
  std::set<std::string> cpuOps, cudaOps;
  for (const auto &entry : cpu::kernelTable())
    cpuOps.insert(entry.first.str());
  for (const auto &entry : cuda::kernelTable())
    EXPECT_TRUE(cudaOps.insert(entry.first.str()).second)
        << "registered twice: " << entry.first.str();
  for (const std::string &op : cpuOps)
    EXPECT_TRUE(cudaOps.count(op)) << "no CUDA kernel for " << op;
  for (const std::string &op : cudaOps)
    EXPECT_TRUE(cpuOps.count(op)) << "no CPU kernel for " << op;
}

AttrMap intAttrs(std::initializer_list<std::pair<const char *, int64_t>> kv) {
  AttrMap attrs;
  for (const auto &[k, v] : kv)
    attrs.set(k, AttrValue::ofInt(v));
  return attrs;
}

TEST(CudaKernelsTest, PowMatchesCpu) {
  for (DType x : kSigned)
    for (DType y : kSigned) {
      // Integer powers are exact on both; float ones go through pow.
      Tolerance tol{2};
      expectSameAsCpu("Pow", {{x, {3, 4, 5}}, {y, {4, 1}}}, {{x, {3, 4, 5}}},
                      tol);
    }
}

TEST(CudaKernelsTest, CastMatchesCpu) {
  const DType types[] = {DType::F32,  DType::F64, DType::I64, DType::I32,
                         DType::Bool, DType::U8,  DType::I8,  DType::F16};
  // 16-bit inputs of every bit pattern by chance (NaN payloads, subnormals).
  for (DType from : types)
    for (DType to : types) {
      Operand in{from, {1000}};
      in.anyBits = true;
      expectSameAsCpu("Cast", {in}, {{to, {1000}}});
    }
}

TEST(CudaKernelsTest, DropoutDrawsTheCpuMasks) {
  for (DType t : kFloat)
    for (int64_t axis : {0, 1, -1}) {
      AttrMap attrs = intAttrs({{"batch_axis", axis}, {"site", 7}});
      attrs.set("ratio", AttrValue::ofFloat(0.3));
      expectSameAsCpu("Dropout", {{t, {8, 13, 5}}},
                      {{t, {8, 13, 5}}, {DType::Bool, {8, 13, 5}}}, Tolerance{},
                      attrs);
    }
}

TEST(CudaKernelsTest, LayerNormMatchesCpu) {
  // Sums in a different order than the CPU's sequential ones.
  for (DType t : kFloat) {
    Tolerance tol =
        t == DType::F32 ? Tolerance{16, 1e-4} : Tolerance{16, 1e-11};
    DType stat = DType::F32;
    // Normalized over the last axis; over the last two with a Scale that
    // broadcasts; without a bias.
    expectSameAsCpu("LayerNormalization",
                    {{t, {6, 300}}, {t, {300}}, {t, {300}}},
                    {{t, {6, 300}}, {stat, {6, 1}}, {stat, {6, 1}}}, tol,
                    intAttrs({{"axis", -1}}));
    expectSameAsCpu("LayerNormalization",
                    {{t, {4, 5, 6}}, {t, {5, 1}}, {t, {6}}},
                    {{t, {4, 5, 6}}, {DType::F64, {4, 1, 1}}, {}}, tol,
                    intAttrs({{"axis", 1}}));
    expectSameAsCpu("LayerNormalization", {{t, {7, 33}}, {t, {33}}},
                    {{t, {7, 33}}}, tol, intAttrs({{"axis", 1}}));
    // Backward: dY, X, Scale, Mean, InvStdDev -> dX, dScale, dB.
    for (DType statType : {DType::F32, DType::F64}) {
      Operand mean{statType, {6, 1}};
      Operand invStd{statType, {6, 1}};
      invStd.fill = 1.7;
      expectSameAsCpu("LayerNormGrad",
                      {{t, {6, 300}}, {t, {6, 300}}, {t, {300}}, mean, invStd},
                      {{t, {6, 300}}, {t, {300}}, {t, {300}}}, tol,
                      intAttrs({{"axis", -1}}));
    }
    Operand mean{DType::F32, {4}};
    Operand invStd{DType::F32, {4}};
    invStd.fill = 0.6;
    expectSameAsCpu("LayerNormGrad",
                    {{t, {4, 5, 6}}, {t, {4, 5, 6}}, {t, {5, 1}}, mean, invStd},
                    {{t, {4, 5, 6}}, {t, {5, 1}}, {}}, tol,
                    intAttrs({{"axis", 1}}));
  }
}

/// Training mode runs through cuDNN (float32, both running statistics,
/// unbiased) unless it is off; inference mode and float64 run the own
/// kernels either way.
TEST(CudaKernelsTest, BatchNormMatchesCpu) {
  for (bool cudnn : {true, false})
    for (DType t : kFloat) {
      SCOPED_TRACE(cudnn ? "cuDNN" : "own kernels");
      Tolerance tol =
          t == DType::F32 ? Tolerance{16, 1e-4} : Tolerance{16, 1e-11};
      Operand var{t, {5}};
      var.fill = 0.8;
      for (int64_t training : {0, 1}) {
        AttrMap attrs =
            intAttrs({{"training_mode", training}, {"unbiased_var", training}});
        attrs.set("momentum", AttrValue::ofFloat(0.9));
        expectSameAsCpu("BatchNormalization",
                        {{t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}, {t, {5}}, var},
                        {{t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}}, tol, attrs,
                        &gpu(cudnn));
        expectSameAsCpu(
            "BatchNormGrad",
            {{t, {3, 5, 7, 9}}, {t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}, var},
            {{t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}}, tol, attrs, &gpu(cudnn));
        // A 2-D X (batch, channels), as after a Linear layer, and a 5-D one.
        expectSameAsCpu("BatchNormalization",
                        {{t, {16, 5}}, {t, {5}}, {t, {5}}, {t, {5}}, var},
                        {{t, {16, 5}}, {t, {5}}, {t, {5}}}, tol, attrs,
                        &gpu(cudnn));
        expectSameAsCpu("BatchNormGrad",
                        {{t, {2, 5, 3, 4, 3}},
                         {t, {2, 5, 3, 4, 3}},
                         {t, {5}},
                         {t, {5}},
                         var},
                        {{t, {2, 5, 3, 4, 3}}, {t, {5}}, {t, {5}}}, tol, attrs,
                        &gpu(cudnn));
      }
      // Training without running statistics, and ONNX's biased running
      // variance (the own kernel, even with cuDNN on).
      AttrMap noRunning = intAttrs({{"training_mode", 1}});
      expectSameAsCpu("BatchNormalization",
                      {{t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}, {t, {5}}, var},
                      {{t, {3, 5, 7, 9}}}, tol, noRunning, &gpu(cudnn));
      expectSameAsCpu("BatchNormalization",
                      {{t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}, {t, {5}}, var},
                      {{t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}}, tol, noRunning,
                      &gpu(cudnn));
      AttrMap training = intAttrs({{"training_mode", 1}, {"unbiased_var", 1}});
      expectReproducible(
          gpu(cudnn), "BatchNormGrad",
          {{t, {8, 5, 7, 9}}, {t, {8, 5, 7, 9}}, {t, {5}}, {t, {5}}, var},
          {{t, {8, 5, 7, 9}}, {t, {5}}, {t, {5}}}, training);
    }
}

/// SyncBatchNorm's moments kernels, and BatchNorm with global moments (the
/// own kernels: cuDNN does not take given statistics, even when on).
TEST(CudaKernelsTest, SyncBatchNormMatchesCpu) {
  for (DType t : kFloat) {
    Tolerance tol =
        t == DType::F32 ? Tolerance{16, 1e-4} : Tolerance{16, 1e-11};
    // Sums in f64 over 3 * 7 * 9 values per channel, in another order.
    Tolerance sums{64, 1e-12};
    const int64_t count = 2 * 3 * 7 * 9;
    Operand var{t, {5}};
    var.fill = 0.8;
    Operand moments{DType::F64, {10}};
    moments.fill = 0.5; // mean 0.5, mean of squares 0.5: variance 0.25
    expectSameAsCpu("BatchNormStats", {{t, {3, 5, 7, 9}}}, {{DType::F64, {10}}},
                    sums, intAttrs({{"count", count}}));
    expectSameAsCpu("BatchNormGradStats",
                    {{t, {3, 5, 7, 9}}, {t, {3, 5, 7, 9}}, moments},
                    {{DType::F64, {10}}}, sums, intAttrs({{"count", count}}));
    for (bool cudnn : {true, false}) {
      SCOPED_TRACE(cudnn ? "cuDNN on" : "cuDNN off");
      AttrMap attrs = intAttrs(
          {{"training_mode", 1}, {"unbiased_var", 1}, {"batch_count", count}});
      attrs.set("momentum", AttrValue::ofFloat(0.9));
      expectSameAsCpu(
          "BatchNormalization",
          {{t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}, {t, {5}}, var, moments},
          {{t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}}, tol, attrs, &gpu(cudnn));
      expectSameAsCpu("BatchNormGrad",
                      {{t, {3, 5, 7, 9}},
                       {t, {3, 5, 7, 9}},
                       {t, {5}},
                       {t, {5}},
                       var,
                       moments,
                       moments},
                      {{t, {3, 5, 7, 9}}, {t, {5}}, {t, {5}}}, tol, attrs,
                      &gpu(cudnn));
    }
  }
}

TEST(CudaKernelsTest, IndexingMatchesCpu) {
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::U8}) {
    // Trilu, both halves, with a diagonal offset.
    for (int64_t upper : {0, 1})
      expectSameAsCpu("Trilu", {{t, {3, 7, 5}}}, {{t, {3, 7, 5}}}, Tolerance{},
                      intAttrs({{"upper", upper}, {"k", upper ? 1 : -2}}));
  }
  for (DType t : kFloat) {
    for (DType it : {DType::I64, DType::I32}) {
      // An embedding lookup (axis 0) and a gather along a middle axis, with
      // repeated indices; and their gradients, which add the repeats.
      Operand rows{it, {4, 9}};
      rows.below = 11;
      expectSameAsCpu("Gather", {{t, {11, 6}}, rows}, {{t, {4, 9, 6}}});
      expectSameAsCpu("GatherGrad", {{t, {4, 9, 6}}, rows}, {{t, {11, 6}}},
                      Tolerance{}, intAttrs({{"axis", 0}}));
      Operand middle{it, {5}};
      middle.below = 3;
      expectSameAsCpu("Gather", {{t, {2, 3, 4}}, middle}, {{t, {2, 5, 4}}},
                      Tolerance{}, intAttrs({{"axis", 1}}));
      expectSameAsCpu("GatherGrad", {{t, {2, 5, 4}}, middle}, {{t, {2, 3, 4}}},
                      Tolerance{}, intAttrs({{"axis", 1}}));
      // GatherElements: indices of fewer rows than the data, many repeats
      // (its gradient adds them in the CPU kernel's order).
      Operand picks{it, {4, 9}};
      picks.below = 3;
      expectSameAsCpu("GatherElements", {{t, {6, 3}}, picks}, {{t, {4, 9}}},
                      Tolerance{}, intAttrs({{"axis", 1}}));
      expectSameAsCpu("GatherElementsGrad", {{t, {4, 9}}, picks}, {{t, {6, 3}}},
                      Tolerance{}, intAttrs({{"axis", 1}}));
      Operand rows3{it, {5, 2, 4}};
      rows3.below = 7;
      expectSameAsCpu("GatherElements", {{t, {7, 3, 4}}, rows3},
                      {{t, {5, 2, 4}}}, Tolerance{}, intAttrs({{"axis", 0}}));
      expectSameAsCpu("GatherElementsGrad", {{t, {5, 2, 4}}, rows3},
                      {{t, {7, 3, 4}}}, Tolerance{}, intAttrs({{"axis", 0}}));
      // TopKIndices along the last and a middle axis, largest and
      // smallest.
      for (int64_t largest : {0, 1}) {
        expectSameAsCpu(
            "TopKIndices", {{t, {4, 9}}}, {{DType::I64, {4, 3}}}, Tolerance{},
            intAttrs({{"axis", 1}, {"k", 3}, {"largest", largest}}));
        expectSameAsCpu(
            "TopKIndices", {{t, {2, 7, 3}}}, {{DType::I64, {2, 7, 3}}},
            Tolerance{},
            intAttrs({{"axis", 1}, {"k", 7}, {"largest", largest}}));
      }
      // ScatterElements: repeated indices, the last write kept.
      expectSameAsCpu("ScatterElements", {{t, {6, 3}}, picks, {t, {4, 9}}},
                      {{t, {6, 3}}}, Tolerance{}, intAttrs({{"axis", 1}}));
      expectSameAsCpu("ScatterElements",
                      {{t, {7, 3, 4}}, rows3, {t, {5, 2, 4}}}, {{t, {7, 3, 4}}},
                      Tolerance{}, intAttrs({{"axis", 0}}));
    }
    Operand start{t, {}}, limit{t, {}}, delta{t, {}};
    start.fill = -2.5;
    limit.fill = 7.0;
    delta.fill = 0.5;
    expectSameAsCpu("Range", {start, limit, delta}, {{t, {19}}});
  }
  expectSameAsCpu("ShardSlice", {{DType::F32, {12}}}, {{DType::F32, {12}}});
}

TEST(CudaKernelsTest, OutOfRangeIndexIsTheCpuError) {
  KernelBackend &dev = gpu();
  std::unique_ptr<Stream> stream = dev.createStream();
  std::vector<float> data(5 * 2, 1.0f), out(3 * 2);
  std::vector<int32_t> indices = {4, -6, 0};
  auto run = [&](bool onGpu) {
    void *pd = data.data(), *pi = indices.data(), *po = out.data();
    if (onGpu) {
      pd = llvm::cantFail(dev.allocate(data.size() * 4));
      pi = llvm::cantFail(dev.allocate(indices.size() * 4));
      po = llvm::cantFail(dev.allocate(out.size() * 4));
      EXPECT_FALSE(llvm::errorToBool(
          dev.copyToDevice(pd, data.data(), data.size() * 4, *stream)));
      EXPECT_FALSE(llvm::errorToBool(
          dev.copyToDevice(pi, indices.data(), indices.size() * 4, *stream)));
    }
    std::vector<TensorView> in, outs;
    in.emplace_back(DType::F32, std::vector<int64_t>{5, 2}, pd);
    in.emplace_back(DType::I32, std::vector<int64_t>{3}, pi);
    outs.emplace_back(DType::F32, std::vector<int64_t>{3, 2}, po);
    AttrMap attrs;
    KernelContext ctx{"Gather", "embed", attrs, in, outs};
    llvm::Error err = onGpu ? dev.launch(dev.lookup("Gather"), ctx, *stream)
                            : cpu::runKernel(ctx);
    std::string message = err ? llvm::toString(std::move(err)) : "";
    if (onGpu)
      for (void *p : {pd, pi, po})
        dev.deallocate(p);
    return message;
  };
  std::string cpuMessage = run(false);
  EXPECT_NE(cpuMessage.find("index -6 out of range [-5, 5) on axis 0"),
            std::string::npos)
      << cpuMessage;
  EXPECT_EQ(run(true), cpuMessage);
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
  // --tables-only: the checks of the kernel tables, which need no GPU (the
  // ctest cuda.tables runs them in every CUDA build).
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--tables-only") {
      ::testing::GTEST_FLAG(filter) = "CudaTableTest.*";
      return RUN_ALL_TESTS();
    }
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
