//===- KernelsTest.cpp - CPU kernels: table, elementwise, data movement ---===//
//
// Expected values are hand-computed or come from independent plain loops.
//
//===----------------------------------------------------------------------===//
#include "test/unit/runtime/KernelTestUtil.h"

#include "runtime/comm/CollectiveOps.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

using namespace shardc::rt;
using namespace shardc::rt::test;

namespace {

//===----------------------------------------------------------------------===//
// Kernel table
//===----------------------------------------------------------------------===//

TEST(KernelTable, HasEveryOpOfTheContract) {
  // The op types of docs/ops.md.
  const char *ops[] = {"Add",
                       "Sub",
                       "Mul",
                       "Div",
                       "Pow",
                       "Where",
                       "Sqrt",
                       "Exp",
                       "Log",
                       "Erf",
                       "Tanh",
                       "Sigmoid",
                       "Neg",
                       "Relu",
                       "Identity",
                       "FusedElementwise",
                       "Reshape",
                       "Cast",
                       "Dropout",
                       "Softmax",
                       "LogSoftmax",
                       "Gemm",
                       "MatMul",
                       "LayerNormalization",
                       "BatchNormalization",
                       "Conv",
                       "MaxPool",
                       "AveragePool",
                       "GlobalAveragePool",
                       "Transpose",
                       "Gather",
                       "GatherElements",
                       "ScatterElements",
                       "TopKIndices",
                       "Concat",
                       "Split",
                       "Slice",
                       "Expand",
                       "ReduceMean",
                       "ReduceSum",
                       "SoftmaxCrossEntropyLoss",
                       "NegativeLogLikelihoodLoss"};
  llvm::StringSet<> registered;
  for (const auto &[type, fn] : cpu::kernelTable()) {
    EXPECT_NE(fn, nullptr) << type.str();
    EXPECT_TRUE(registered.insert(type).second) << "duplicate " << type.str();
  }
  for (const char *op : ops)
    EXPECT_TRUE(registered.contains(op)) << "no kernel for " << op;

  // The CPU backend registers the same table.
  std::unique_ptr<KernelBackend> backend = createCpuBackend();
  for (const char *op : ops)
    EXPECT_NE(backend->lookup(op), nullptr) << op;
}

TEST(KernelTable, DocsListExactlyTheRegisteredOpTypes) {
  // Every op type in the first column of docs/ops.md's tables, against the
  // kernels and the executor's collective ops.
  auto file = llvm::MemoryBuffer::getFile(SHARD_DOCS_OPS_MD);
  ASSERT_TRUE(bool(file)) << SHARD_DOCS_OPS_MD;
  std::set<std::string> documented;
  llvm::SmallVector<llvm::StringRef> lines;
  (*file)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines) {
    if (!line.consume_front("| "))
      continue;
    llvm::StringRef first = line.split('|').first.trim();
    if (first == "type")
      continue;
    llvm::SmallVector<llvm::StringRef> types;
    first.split(types, ' ', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef type : types)
      EXPECT_TRUE(documented.insert(type.str()).second)
          << type.str() << " is documented twice";
  }
  std::set<std::string> implemented;
  for (const auto &entry : cpu::kernelTable())
    implemented.insert(entry.first.str());
  for (llvm::StringRef type : collectiveOpTypes())
    implemented.insert(type.str());
  for (const std::string &type : documented)
    EXPECT_TRUE(implemented.count(type))
        << type << " is documented but has no kernel";
  for (const std::string &type : implemented)
    EXPECT_TRUE(documented.count(type))
        << type << " runs but is not documented";
}

TEST(KernelTable, UnknownOpIsAnError) {
  Buf y(DType::F32, {1});
  EXPECT_KERNEL_ERROR(run("NoSuchOp", attrs(), {}, {&y}), "NoSuchOp");
}

//===----------------------------------------------------------------------===//
// Binary arithmetic and broadcasting
//===----------------------------------------------------------------------===//

TEST(ElementwiseKernel, AddSameShape) {
  Buf a = f32({2, 2}, {1, 2, 3, 4});
  Buf b = f32({2, 2}, {10, 20, 30, 40});
  Buf c(DType::F32, {2, 2});
  ASSERT_KERNEL_OK(run("Add", attrs(), {&a, &b}, {&c}));
  expectClose(c.values<float>(), std::vector<float>{11, 22, 33, 44});
}

TEST(ElementwiseKernel, BroadcastBothOperands) {
  // (2,3,1) + (4) -> (2,3,4) and (1,3,1) * (2,1,4) -> (2,3,4).
  Buf a = randomF32({2, 3, 1}, 1);
  Buf b = randomF32({4}, 2);
  Buf c(DType::F32, {2, 3, 4});
  ASSERT_KERNEL_OK(run("Add", attrs(), {&a, &b}, {&c}));
  std::vector<float> av = a.values<float>(), bv = b.values<float>();
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        want.push_back(av[i * 3 + j] + bv[k]);
  expectClose(c.values<float>(), want);

  Buf p = randomF32({1, 3, 1}, 3);
  Buf q = randomF32({2, 1, 4}, 4);
  ASSERT_KERNEL_OK(run("Mul", attrs(), {&p, &q}, {&c}));
  std::vector<float> pv = p.values<float>(), qv = q.values<float>();
  want.clear();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        want.push_back(pv[j] * qv[i * 4 + k]);
  expectClose(c.values<float>(), want);
}

TEST(ElementwiseKernel, BroadcastScalarAndMiddleDim) {
  // Rank-0 B; then (2,1,3) - (2,4,3) exercises a broadcast middle dim.
  Buf a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf s = f32({}, {0.5f});
  Buf c(DType::F32, {2, 3});
  ASSERT_KERNEL_OK(run("Sub", attrs(), {&a, &s}, {&c}));
  expectClose(c.values<float>(),
              std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f});
  ASSERT_KERNEL_OK(run("Div", attrs(), {&s, &a}, {&c}));
  expectClose(c.values<float>(), std::vector<float>{0.5f, 0.25f, 0.5f / 3,
                                                    0.125f, 0.1f, 0.5f / 6});

  Buf x = randomF32({2, 1, 3}, 5);
  Buf y = randomF32({2, 4, 3}, 6);
  Buf z(DType::F32, {2, 4, 3});
  ASSERT_KERNEL_OK(run("Sub", attrs(), {&x, &y}, {&z}));
  std::vector<float> xv = x.values<float>(), yv = y.values<float>(), want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        want.push_back(xv[i * 3 + k] - yv[(i * 4 + j) * 3 + k]);
  expectClose(z.values<float>(), want);
}

TEST(ElementwiseKernel, IntegerDivTruncatesTowardZero) {
  Buf a = i64({5}, {7, -7, 7, -7, 6});
  Buf b = i64({5}, {2, 2, -2, -2, 3});
  Buf c(DType::I64, {5});
  ASSERT_KERNEL_OK(run("Div", attrs(), {&a, &b}, {&c}));
  EXPECT_EQ(c.values<int64_t>(), (std::vector<int64_t>{3, -3, -3, 3, 2}));

  Buf zero = i64({5}, {1, 1, 0, 1, 1});
  EXPECT_KERNEL_ERROR(run("Div", attrs(), {&a, &zero}, {&c}),
                      "division by zero");
}

TEST(ElementwiseKernel, F64AndI64Arithmetic) {
  Buf a = f64({3}, {1.5, 2.5, -1.0});
  Buf b = f64({1}, {2.0});
  Buf c(DType::F64, {3});
  ASSERT_KERNEL_OK(run("Mul", attrs(), {&a, &b}, {&c}));
  EXPECT_EQ(c.values<double>(), (std::vector<double>{3.0, 5.0, -2.0}));

  Buf x = i64({2, 1}, {10, 20});
  Buf y = i64({3}, {1, 2, 3});
  Buf z(DType::I64, {2, 3});
  ASSERT_KERNEL_OK(run("Sub", attrs(), {&x, &y}, {&z}));
  EXPECT_EQ(z.values<int64_t>(), (std::vector<int64_t>{9, 8, 7, 19, 18, 17}));
}

TEST(ElementwiseKernel, ShapeThatDoesNotBroadcastIsAnError) {
  Buf a = randomF32({2, 4}, 1);
  Buf b = randomF32({3}, 2);
  Buf c(DType::F32, {2, 4});
  EXPECT_KERNEL_ERROR(run("Add", attrs(), {&a, &b}, {&c}), "broadcast");
  // A larger than the output.
  Buf big = randomF32({3, 2, 4}, 3);
  EXPECT_KERNEL_ERROR(run("Add", attrs(), {&big, &a}, {&c}), "broadcast");
}

TEST(ElementwiseKernel, UnsupportedOrMismatchedTypeIsAnError) {
  Buf h(DType::Bool, {2});
  Buf c(DType::Bool, {2});
  std::string msg = run("Add", attrs(), {&h, &h}, {&c});
  EXPECT_KERNEL_ERROR(msg, "bool");
  EXPECT_KERNEL_ERROR(msg, "Add 'test'"); // Names op type and op name.

  Buf xi = i64({2}, {1, 4});
  Buf yi(DType::I64, {2});
  EXPECT_KERNEL_ERROR(run("Sqrt", attrs(), {&xi}, {&yi}), "int64");

  Buf a = f32({2}, {1, 2});
  Buf b = f64({2}, {1, 2});
  Buf o(DType::F32, {2});
  EXPECT_KERNEL_ERROR(run("Add", attrs(), {&a, &b}, {&o}), "float64");

  // Missing input.
  EXPECT_KERNEL_ERROR(run("Add", attrs(), {&a}, {&o}), "missing input");
}

TEST(ElementwiseKernel, Pow) {
  Buf x = f32({2, 2}, {1, 2, 3, 4});
  Buf e = f32({}, {2});
  Buf z(DType::F32, {2, 2});
  ASSERT_KERNEL_OK(run("Pow", attrs(), {&x, &e}, {&z}));
  expectClose(z.values<float>(), std::vector<float>{1, 4, 9, 16});

  Buf ef = f32({2}, {0.5f, -1.0f});
  ASSERT_KERNEL_OK(run("Pow", attrs(), {&x, &ef}, {&z}));
  expectClose(z.values<float>(),
              std::vector<float>{1, 0.5f, std::sqrt(3.0f), 0.25f});

  // int64 base with float exponent keeps the base's type.
  Buf xi = i64({3}, {1, 2, 3});
  Buf yf = f32({3}, {4, 5, 6});
  Buf zi(DType::I64, {3});
  ASSERT_KERNEL_OK(run("Pow", attrs(), {&xi, &yf}, {&zi}));
  EXPECT_EQ(zi.values<int64_t>(), (std::vector<int64_t>{1, 32, 729}));

  Buf yi = i64({3}, {3, 0, -1});
  ASSERT_KERNEL_OK(run("Pow", attrs(), {&xi, &yi}, {&zi}));
  EXPECT_EQ(zi.values<int64_t>(), (std::vector<int64_t>{1, 1, 0}));
}

TEST(ElementwiseKernel, WhereBroadcastsAllThree) {
  Buf cond = boolean({2, 1}, {1, 0});
  Buf x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf y = f32({}, {-1});
  Buf z(DType::F32, {2, 3});
  ASSERT_KERNEL_OK(run("Where", attrs(), {&cond, &x, &y}, {&z}));
  expectClose(z.values<float>(), std::vector<float>{1, 2, 3, -1, -1, -1});

  // Any element type: int64.
  Buf c2 = boolean({3}, {0, 1, 0});
  Buf xi = i64({3}, {1, 2, 3});
  Buf yi = i64({2, 1}, {10, 20});
  Buf zi(DType::I64, {2, 3});
  ASSERT_KERNEL_OK(run("Where", attrs(), {&c2, &xi, &yi}, {&zi}));
  EXPECT_EQ(zi.values<int64_t>(), (std::vector<int64_t>{10, 2, 10, 20, 2, 20}));

  Buf notBool = f32({3}, {0, 1, 0});
  EXPECT_KERNEL_ERROR(run("Where", attrs(), {&notBool, &xi, &yi}, {&zi}),
                      "condition");
}

//===----------------------------------------------------------------------===//
// Unary math
//===----------------------------------------------------------------------===//

TEST(ElementwiseKernel, UnaryMathMatchesLibm) {
  std::vector<float> in = {0.25f, 1.0f, 2.5f, 7.0f};
  std::vector<float> signedIn = {-3.0f, -0.5f, 0.0f, 0.75f, 4.0f};
  struct Case {
    const char *op;
    double (*fn)(double);
    bool positiveOnly;
  };
  Case cases[] = {
      {"Sqrt", [](double v) { return std::sqrt(v); }, true},
      {"Log", [](double v) { return std::log(v); }, true},
      {"Exp", [](double v) { return std::exp(v); }, false},
      {"Erf", [](double v) { return std::erf(v); }, false},
      {"Tanh", [](double v) { return std::tanh(v); }, false},
      {"Sigmoid", [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, false},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.op);
    const std::vector<float> &v = c.positiveOnly ? in : signedIn;
    Buf x = f32({static_cast<int64_t>(v.size())}, v);
    Buf y(DType::F32, x.shape);
    ASSERT_KERNEL_OK(run(c.op, attrs(), {&x}, {&y}));
    std::vector<double> want;
    for (float f : v)
      want.push_back(c.fn(f));
    expectClose(y.values<float>(), want, 1e-6, 1e-7);
  }
}

TEST(ElementwiseKernel, SigmoidIsStableForLargeInputs) {
  Buf x = f32({4}, {-100.0f, -30.0f, 30.0f, 100.0f});
  Buf y(DType::F32, {4});
  ASSERT_KERNEL_OK(run("Sigmoid", attrs(), {&x}, {&y}));
  std::vector<float> v = y.values<float>();
  EXPECT_EQ(v[0], std::exp(-100.0f) / (1.0f + std::exp(-100.0f)));
  EXPECT_GT(v[1], 0.0f);
  EXPECT_FLOAT_EQ(v[2], 1.0f);
  EXPECT_EQ(v[3], 1.0f);
  for (float f : v)
    EXPECT_FALSE(std::isnan(f));
}

TEST(ElementwiseKernel, NegAndRelu) {
  Buf x = f32({4}, {-2.0f, -0.0f, 0.5f, 3.0f});
  Buf y(DType::F32, {4});
  ASSERT_KERNEL_OK(run("Relu", attrs(), {&x}, {&y}));
  expectClose(y.values<float>(), std::vector<float>{0, 0, 0.5f, 3});
  ASSERT_KERNEL_OK(run("Neg", attrs(), {&x}, {&y}));
  expectClose(y.values<float>(), std::vector<float>{2, 0, -0.5f, -3});

  Buf xi = i64({3}, {-5, 0, 7});
  Buf yi(DType::I64, {3});
  ASSERT_KERNEL_OK(run("Neg", attrs(), {&xi}, {&yi}));
  EXPECT_EQ(yi.values<int64_t>(), (std::vector<int64_t>{5, 0, -7}));
  ASSERT_KERNEL_OK(run("Relu", attrs(), {&xi}, {&yi}));
  EXPECT_EQ(yi.values<int64_t>(), (std::vector<int64_t>{0, 0, 7}));
}

TEST(ElementwiseKernel, Abs) {
  Buf x = f32({4}, {-2.5f, -0.0f, 0.5f, 3.0f});
  Buf y(DType::F32, {4});
  ASSERT_KERNEL_OK(run("Abs", attrs(), {&x}, {&y}));
  expectClose(y.values<float>(), std::vector<float>{2.5f, 0, 0.5f, 3});

  Buf xi = i32({3}, {-5, 0, 7});
  Buf yi(DType::I32, {3});
  ASSERT_KERNEL_OK(run("Abs", attrs(), {&xi}, {&yi}));
  EXPECT_EQ(yi.values<int32_t>(), (std::vector<int32_t>{5, 0, 7}));

  Buf b = boolean({3}, {1, 0, 1});
  Buf yb(DType::Bool, {3});
  EXPECT_KERNEL_ERROR(run("Abs", attrs(), {&b}, {&yb}), "X");
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

// Softplus neither overflows for large x (exp(x) is inf in float) nor loses
// the tiny values of very negative x.
TEST(SoftplusKernel, StableAtBothEnds) {
  Buf x = f32({5}, {-100.0f, -1.0f, 0.0f, 1.0f, 100.0f});
  Buf y(DType::F32, {5});
  ASSERT_KERNEL_OK(run("Softplus", attrs({}), {&x}, {&y}));
  std::vector<float> v = y.values<float>();
  EXPECT_FLOAT_EQ(v[0], std::exp(-100.0f));
  EXPECT_FLOAT_EQ(v[1], std::log1p(std::exp(-1.0f)));
  EXPECT_FLOAT_EQ(v[2], std::log(2.0f));
  EXPECT_FLOAT_EQ(v[3], 1.0f + std::log1p(std::exp(-1.0f)));
  EXPECT_FLOAT_EQ(v[4], 100.0f);
}

// Trilu works on every matrix of the last two dims, with k shifting the
// diagonal either way.
TEST(TriluKernel, BatchedUpperAndLowerWithOffsets) {
  Buf x = i64({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Buf y(DType::I64, {2, 2, 3});
  ASSERT_KERNEL_OK(
      run("Trilu", attrs({{"k", intv(1)}, {"upper", intv(1)}}), {&x}, {&y}));
  EXPECT_EQ(y.values<int64_t>(),
            (std::vector<int64_t>{0, 2, 3, 0, 0, 6, 0, 8, 9, 0, 0, 12}));
  ASSERT_KERNEL_OK(
      run("Trilu", attrs({{"k", intv(-1)}, {"upper", intv(0)}}), {&x}, {&y}));
  EXPECT_EQ(y.values<int64_t>(),
            (std::vector<int64_t>{0, 0, 0, 4, 0, 0, 0, 0, 0, 10, 0, 0}));
  Buf v = f32({3}, {1, 2, 3});
  Buf w(DType::F32, {3});
  EXPECT_KERNEL_ERROR(run("Trilu", attrs({}), {&v}, {&w}), "rank >= 2");
}

TEST(EqualKernel, BroadcastsAndComparesBooleans) {
  Buf a = f32({2, 3}, {1, 2, 3, 4, 2, 6});
  Buf b = f32({3}, {1, 2, 6});
  Buf c(DType::Bool, {2, 3});
  ASSERT_KERNEL_OK(run("Equal", attrs({}), {&a, &b}, {&c}));
  EXPECT_EQ(c.values<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 0, 1, 1}));

  Buf p = boolean({3}, {1, 0, 1});
  Buf q = boolean({1}, {0});
  Buf r(DType::Bool, {3});
  ASSERT_KERNEL_OK(run("Equal", attrs({}), {&p, &q}, {&r}));
  EXPECT_EQ(r.values<uint8_t>(), (std::vector<uint8_t>{0, 1, 0}));

  Buf i = i64({2}, {7, 8});
  EXPECT_KERNEL_ERROR(run("Equal", attrs({}), {&a, &i}, {&c}), "B");
}

TEST(CompareKernel, OrderingsBroadcastAndNaNIsFalse) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Buf a = f32({2, 3}, {1, 2, 3, 4, nan, 6});
  Buf b = f32({3}, {2, 2, 2});
  Buf c(DType::Bool, {2, 3});
  ASSERT_KERNEL_OK(run("Greater", attrs({}), {&a, &b}, {&c}));
  EXPECT_EQ(c.values<uint8_t>(), (std::vector<uint8_t>{0, 0, 1, 1, 0, 1}));
  ASSERT_KERNEL_OK(run("Less", attrs({}), {&a, &b}, {&c}));
  EXPECT_EQ(c.values<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 0, 0, 0}));
  ASSERT_KERNEL_OK(run("GreaterOrEqual", attrs({}), {&a, &b}, {&c}));
  EXPECT_EQ(c.values<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 1, 0, 1}));
  ASSERT_KERNEL_OK(run("LessOrEqual", attrs({}), {&b, &a}, {&c}));
  EXPECT_EQ(c.values<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 1, 0, 1}));

  Buf i = i64({2}, {-3, 5});
  Buf j = i64({}, {0});
  Buf k(DType::Bool, {2});
  ASSERT_KERNEL_OK(run("Greater", attrs({}), {&i, &j}, {&k}));
  EXPECT_EQ(k.values<uint8_t>(), (std::vector<uint8_t>{0, 1}));
  EXPECT_KERNEL_ERROR(run("Less", attrs({}), {&a, &i}, {&c}), "B");
}

TEST(LogicKernel, AndOrXorNot) {
  Buf p = boolean({2, 2}, {1, 1, 0, 0});
  Buf q = boolean({2}, {1, 0});
  Buf r(DType::Bool, {2, 2});
  ASSERT_KERNEL_OK(run("And", attrs({}), {&p, &q}, {&r}));
  EXPECT_EQ(r.values<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 0}));
  ASSERT_KERNEL_OK(run("Or", attrs({}), {&p, &q}, {&r}));
  EXPECT_EQ(r.values<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 0}));
  ASSERT_KERNEL_OK(run("Xor", attrs({}), {&p, &q}, {&r}));
  EXPECT_EQ(r.values<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 0}));
  ASSERT_KERNEL_OK(run("Not", attrs({}), {&p}, {&r}));
  EXPECT_EQ(r.values<uint8_t>(), (std::vector<uint8_t>{0, 0, 1, 1}));

  Buf f = f32({2}, {1, 0});
  Buf g(DType::F32, {2});
  EXPECT_KERNEL_ERROR(run("Not", attrs({}), {&f}, {&g}), "X");
}

TEST(ElementwiseKernel, MaxMinBroadcastAndPropagateNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Buf a = f32({2, 2}, {1, 5, nan, -2});
  Buf b = f32({2}, {3, nan});
  Buf c(DType::F32, {2, 2});
  ASSERT_KERNEL_OK(run("Max", attrs({}), {&a, &b}, {&c}));
  std::vector<float> v = c.values<float>();
  EXPECT_EQ(v[0], 3.0f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_TRUE(std::isnan(v[2]));
  EXPECT_TRUE(std::isnan(v[3]));
  ASSERT_KERNEL_OK(run("Min", attrs({}), {&a, &b}, {&c}));
  v = c.values<float>();
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_TRUE(std::isnan(v[1]));

  Buf i = i64({3}, {4, -7, 0});
  Buf j = i64({3}, {2, 9, 0});
  Buf k(DType::I64, {3});
  ASSERT_KERNEL_OK(run("Min", attrs({}), {&i, &j}, {&k}));
  EXPECT_EQ(k.values<int64_t>(), (std::vector<int64_t>{2, -7, 0}));
}

TEST(ElementwiseKernel, SignFloorCeilSinCos) {
  Buf x = f32({5}, {-2.5f, -0.0f, 0.0f, 0.4f, 3.0f});
  Buf y(DType::F32, {5});
  ASSERT_KERNEL_OK(run("Sign", attrs({}), {&x}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{-1, 0, 0, 1, 1}));
  ASSERT_KERNEL_OK(run("Floor", attrs({}), {&x}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{-3, -0.0f, 0, 0, 3}));
  ASSERT_KERNEL_OK(run("Ceil", attrs({}), {&x}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{-2, -0.0f, 0, 1, 3}));
  ASSERT_KERNEL_OK(run("Sin", attrs({}), {&x}, {&y}));
  EXPECT_FLOAT_EQ(y.values<float>()[0], std::sin(-2.5f));
  ASSERT_KERNEL_OK(run("Cos", attrs({}), {&x}, {&y}));
  EXPECT_FLOAT_EQ(y.values<float>()[4], std::cos(3.0f));
  Buf u = f32({3}, {-0.75f, 0.0f, 0.5f});
  Buf v(DType::F32, {3});
  const std::pair<const char *, float (*)(float)> trig[] = {
      {"Tan", std::tan},     {"Asin", std::asin},  {"Acos", std::acos},
      {"Atan", std::atan},   {"Sinh", std::sinh},  {"Cosh", std::cosh},
      {"Asinh", std::asinh}, {"Atanh", std::atanh}};
  for (auto [op, fn] : trig) {
    ASSERT_KERNEL_OK(run(op, attrs({}), {&u}, {&v}));
    for (int k = 0; k < 3; ++k)
      EXPECT_FLOAT_EQ(v.values<float>()[k], fn(u.values<float>()[k])) << op;
  }
  Buf w = f32({2}, {1.0f, 2.5f});
  Buf z(DType::F32, {2});
  ASSERT_KERNEL_OK(run("Acosh", attrs({}), {&w}, {&z}));
  EXPECT_EQ(z.values<float>(), (std::vector<float>{0.0f, std::acosh(2.5f)}));

  Buf i = i32({3}, {-4, 0, 9});
  Buf j(DType::I32, {3});
  ASSERT_KERNEL_OK(run("Sign", attrs({}), {&i}, {&j}));
  EXPECT_EQ(j.values<int32_t>(), (std::vector<int32_t>{-1, 0, 1}));
}

TEST(CastKernel, FloatToIntegerTruncatesAndToBoolIsNonZero) {
  Buf x = f32({5}, {1.7f, -1.7f, 2.5f, -0.2f, 0.0f});
  Buf yi(DType::I64, {5});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&x}, {&yi}));
  EXPECT_EQ(yi.values<int64_t>(), (std::vector<int64_t>{1, -1, 2, 0, 0}));

  Buf y32(DType::I32, {5});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&x}, {&y32}));
  EXPECT_EQ(y32.values<int32_t>(), (std::vector<int32_t>{1, -1, 2, 0, 0}));

  Buf yb(DType::Bool, {5});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&x}, {&yb}));
  EXPECT_EQ(yb.values<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 1, 0}));

  Buf b = boolean({3}, {1, 0, 1});
  Buf bf(DType::F32, {3});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&b}, {&bf}));
  expectClose(bf.values<float>(), std::vector<float>{1, 0, 1});
}

TEST(CastKernel, IntegerAndFloatWidths) {
  Buf x = i64({3}, {-1, 300, 1LL << 40});
  Buf y8(DType::U8, {3});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&x}, {&y8}));
  // Integer narrowing wraps, as numpy's astype.
  EXPECT_EQ(y8.values<uint8_t>(), (std::vector<uint8_t>{255, 44, 0}));

  Buf yd(DType::F64, {3});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&x}, {&yd}));
  EXPECT_EQ(yd.values<double>(),
            (std::vector<double>{-1.0, 300.0, 1099511627776.0}));

  Buf d = f64({2}, {0.1, -2.75});
  Buf f(DType::F32, {2});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&d}, {&f}));
  EXPECT_EQ(f.values<float>(), (std::vector<float>{0.1f, -2.75f}));
}

TEST(CastKernel, HalfRoundTrip) {
  // 1 + 2^-11 is halfway between two halves: ties to even gives 1.0;
  // 1 + 3 * 2^-11 rounds up to 1 + 2^-9. 65520 overflows to inf.
  Buf x = f32({6}, {1.5f, -2.0f, 65504.0f, 1.0f + 1.0f / 2048,
                    1.0f + 3.0f / 2048, 65520.0f});
  Buf h(DType::F16, {6});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&x}, {&h}));
  EXPECT_EQ(
      h.values<uint16_t>(),
      (std::vector<uint16_t>{0x3e00, 0xc000, 0x7bff, 0x3c00, 0x3c02, 0x7c00}));
  Buf back(DType::F32, {6});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&h}, {&back}));
  std::vector<float> v = back.values<float>();
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], 65504.0f);
  EXPECT_EQ(v[3], 1.0f);
  EXPECT_EQ(v[4], 1.0f + 1.0f / 512);
  EXPECT_TRUE(std::isinf(v[5]));
}

TEST(CastKernel, Bfloat16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bfloat16 1 and 1 + 2^-7: ties to even gives
  // 1; 1 + 3 * 2^-8 rounds up to 1 + 2^-6. The largest float rounds to inf;
  // NaN stays a (quiet) NaN, with its sign.
  float nan = -std::numeric_limits<float>::quiet_NaN();
  Buf x = f32({7}, {1.5f, -2.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256,
                    std::numeric_limits<float>::max(), nan, 1e-40f});
  Buf h(DType::BF16, {7});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&x}, {&h}));
  std::vector<uint16_t> bits = h.values<uint16_t>();
  EXPECT_EQ(bits[0], 0x3fc0);
  EXPECT_EQ(bits[1], 0xc000);
  EXPECT_EQ(bits[2], 0x3f80);
  EXPECT_EQ(bits[3], 0x3f82);
  EXPECT_EQ(bits[4], 0x7f80);
  EXPECT_EQ(bits[5] & 0xffc0, 0xffc0);
  Buf back(DType::F32, {7});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&h}, {&back}));
  std::vector<float> v = back.values<float>();
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[3], 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isinf(v[4]));
  EXPECT_TRUE(std::isnan(v[5]));
  // bfloat16 keeps float's subnormals, with 7 bits: 1e-40 rounds to the
  // smallest one, 2^-133 (9.18e-41).
  EXPECT_EQ(v[6], std::ldexp(1.0f, -133));
  // float16 <-> bfloat16 goes through float.
  Buf half(DType::F16, {7});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&h}, {&half}));
  EXPECT_EQ(half.values<uint16_t>()[0], 0x3e00);
}

// Kernels other than Cast compute 16-bit floats in float32: the result is
// the float32 kernel's on the widened inputs, rounded to nearest even.
TEST(HalfPrecision, KernelsComputeInFloat32AndRound) {
  std::vector<float> a = {1.0f, 3.0f, -0.5f, 100.0f, 1e-3f, 7.0f};
  std::vector<float> b = {1.0f / 256, 1.0f, 0.25f, 0.5f, -1e-3f, 1e30f};
  for (DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(t).str());
    Buf fa = f32({2, 3}, a), fb = f32({2, 3}, b);
    Buf ha(t, {2, 3}), hb(t, {2, 3});
    ASSERT_KERNEL_OK(run("Cast", attrs({}), {&fa}, {&ha}));
    ASSERT_KERNEL_OK(run("Cast", attrs({}), {&fb}, {&hb}));
    // Widened back: the inputs the float32 kernel sees.
    Buf wa(DType::F32, {2, 3}), wb(DType::F32, {2, 3});
    ASSERT_KERNEL_OK(run("Cast", attrs({}), {&ha}, {&wa}));
    ASSERT_KERNEL_OK(run("Cast", attrs({}), {&hb}, {&wb}));
    struct Case {
      const char *op;
      AttrMap a;
      bool binary;
    };
    const Case cases[] = {{"Add", attrs({}), true},
                          {"Mul", attrs({}), true},
                          {"Softmax", attrs({{"axis", intv(1)}}), false},
                          {"Exp", attrs({}), false}};
    for (const Case &c : cases) {
      SCOPED_TRACE(c.op);
      std::vector<Buf *> hin = {&ha}, win = {&wa};
      if (c.binary) {
        hin.push_back(&hb);
        win.push_back(&wb);
      }
      Buf hy(t, {2, 3}), wy(DType::F32, {2, 3}), want(t, {2, 3});
      ASSERT_KERNEL_OK(run(c.op, c.a, hin, {&hy}));
      ASSERT_KERNEL_OK(run(c.op, c.a, win, {&wy}));
      ASSERT_KERNEL_OK(run("Cast", attrs({}), {&wy}, {&want}));
      EXPECT_EQ(hy.values<uint16_t>(), want.values<uint16_t>());
    }
    // Mixed: a 16-bit input with float32 statistics outputs
    // (LayerNormalization keeps Mean and InvStdDev in float32).
    Buf scale(t, {3}), ly(t, {2, 3}), mean(DType::F32, {2, 1}),
        inv(DType::F32, {2, 1});
    Buf ones = f32({3}, {1.0f, 1.0f, 1.0f});
    ASSERT_KERNEL_OK(run("Cast", attrs({}), {&ones}, {&scale}));
    ASSERT_KERNEL_OK(run("LayerNormalization",
                         attrs({{"axis", intv(1)}, {"epsilon", floatv(1e-5)}}),
                         {&ha, &scale}, {&ly, &mean, &inv}));
    EXPECT_FLOAT_EQ(mean.values<float>()[0], (1.0f + 3.0f - 0.5f) / 3);
  }
}

// The target type is the output's: a plan carries no `to` attribute.
TEST(CastKernel, OutputTypeIsTheTarget) {
  Buf x = f32({2}, {1.5f, 2.5f});
  Buf y(DType::I64, {2});
  ASSERT_KERNEL_OK(run("Cast", attrs({}), {&x}, {&y}));
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{1, 2}));
  Buf wrong(DType::I64, {3});
  EXPECT_KERNEL_ERROR(run("Cast", attrs({}), {&x}, {&wrong}), "output");
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(ShapeKernel, IdentityAndReshapeCopyBytes) {
  Buf x = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf y(DType::I64, {3, 2});
  ASSERT_KERNEL_OK(run("Reshape", attrs(), {&x}, {&y}));
  EXPECT_EQ(y.values<int64_t>(), x.values<int64_t>());
  Buf z(DType::I64, {2, 3});
  ASSERT_KERNEL_OK(run("Identity", attrs(), {&x}, {&z}));
  EXPECT_EQ(z.values<int64_t>(), x.values<int64_t>());
  Buf wrong(DType::I64, {5});
  EXPECT_KERNEL_ERROR(run("Reshape", attrs(), {&x}, {&wrong}), "elements");
}

TEST(ShapeKernel, Transpose) {
  Buf x = randomF32({2, 3, 4}, 7);
  Buf y(DType::F32, {3, 4, 2});
  ASSERT_KERNEL_OK(
      run("Transpose", attrs({{"perm", ints({1, 2, 0})}}), {&x}, {&y}));
  std::vector<float> xv = x.values<float>(), yv = y.values<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(yv[(j * 4 + k) * 2 + i], xv[(i * 3 + j) * 4 + k]);

  // An empty tensor: nothing is read or written. The tiled copy (the
  // innermost output axis strided in X) wrote its first tile, 15 elements,
  // past the empty output (here into a guard of poisoned bytes).
  Buf e(DType::F32, {0, 3, 5}), et(DType::F32, {0, 5, 3});
  e.bytes.assign(64, 0x11);
  et.bytes.assign(64, 0xA5);
  ASSERT_KERNEL_OK(
      run("Transpose", attrs({{"perm", ints({0, 2, 1})}}), {&e}, {&et}));
  EXPECT_EQ(et.bytes, std::vector<uint8_t>(64, 0xA5));

  // Default perm reverses the dimensions; any element type (int8 here).
  Buf b = makeBuf<int8_t>(DType::I8, {2, 3}, {1, 2, 3, 4, 5, 6});
  Buf bt(DType::I8, {3, 2});
  ASSERT_KERNEL_OK(run("Transpose", attrs(), {&b}, {&bt}));
  EXPECT_EQ(bt.values<int8_t>(), (std::vector<int8_t>{1, 4, 2, 5, 3, 6}));

  EXPECT_KERNEL_ERROR(
      run("Transpose", attrs({{"perm", ints({0, 0, 1})}}), {&x}, {&y}),
      "permutation");
}

TEST(ShapeKernel, TransposeLargerThanATile) {
  // Shapes above the 32x32 tile, with and without outer dimensions.
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  Case cases[] = {{{70, 45}, {1, 0}},
                  {{3, 40, 50}, {2, 0, 1}},
                  {{2, 33, 70}, {0, 2, 1}},
                  {{2, 5, 6, 37}, {0, 2, 3, 1}},
                  {{4, 1, 35, 3}, {3, 1, 2, 0}}};
  for (const Case &c : cases) {
    SCOPED_TRACE(shapeToString(c.shape) + " perm " + shapeToString(c.perm));
    int64_t n = numElements(c.shape);
    std::vector<int64_t> xs(n);
    for (int64_t i = 0; i < n; ++i)
      xs[i] = i;
    Buf x = i64(c.shape, xs);
    std::vector<int64_t> outShape;
    for (int64_t p : c.perm)
      outShape.push_back(c.shape[p]);
    Buf y(DType::I64, outShape);
    ASSERT_KERNEL_OK(
        run("Transpose", attrs({{"perm", ints(c.perm)}}), {&x}, {&y}));
    // Walk the output in order; element value = flat input index.
    size_t rank = c.shape.size();
    std::vector<int64_t> inStrides(rank, 1);
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d)
      inStrides[d] = inStrides[d + 1] * c.shape[d + 1];
    std::vector<int64_t> yv = y.values<int64_t>(), o(rank, 0);
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t want = 0;
      for (size_t d = 0; d < rank; ++d)
        want += o[d] * inStrides[c.perm[d]];
      mismatches += yv[i] != want;
      for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
        if (++o[d] < outShape[d])
          break;
        o[d] = 0;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(ShapeKernel, GatherNegativeIndicesAndOutOfRange) {
  // data (2,3), axis 1, indices (2,2) -> (2,2,2).
  Buf data = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf idx = i64({2, 2}, {0, -1, 2, -3});
  Buf y(DType::F32, {2, 2, 2});
  ASSERT_KERNEL_OK(
      run("Gather", attrs({{"axis", intv(1)}}), {&data, &idx}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{1, 3, 3, 1, 4, 6, 6, 4}));

  // axis 0 with int32 indices, scalar index -> rank drops.
  Buf one = i32({}, {-1});
  Buf row(DType::F32, {3});
  ASSERT_KERNEL_OK(
      run("Gather", attrs({{"axis", intv(0)}}), {&data, &one}, {&row}));
  EXPECT_EQ(row.values<float>(), (std::vector<float>{4, 5, 6}));

  Buf bad = i64({2, 2}, {0, 3, 1, 1});
  EXPECT_KERNEL_ERROR(
      run("Gather", attrs({{"axis", intv(1)}}), {&data, &bad}, {&y}),
      "out of range");
  Buf bad2 = i64({2, 2}, {0, -4, 1, 1});
  EXPECT_KERNEL_ERROR(
      run("Gather", attrs({{"axis", intv(1)}}), {&data, &bad2}, {&y}),
      "index -4");
}

TEST(ShapeKernel, GatherElementsAlongEitherAxis) {
  // torch.gather(data, 1, idx): out[i][j] = data[i][idx[i][j]], indices of
  // fewer rows than the data, a negative index counting from the end.
  Buf data = f32({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Buf idx = i64({2, 3}, {3, 0, -1, 1, 1, 2});
  Buf y(DType::F32, {2, 3});
  ASSERT_KERNEL_OK(
      run("GatherElements", attrs({{"axis", intv(1)}}), {&data, &idx}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{4, 1, 4, 6, 6, 7}));

  // Along axis 0 with int32 indices: out[i][j] = data[idx[i][j]][j].
  Buf col = i32({1, 4}, {2, 0, 1, -3});
  Buf y0(DType::F32, {1, 4});
  ASSERT_KERNEL_OK(
      run("GatherElements", attrs({{"axis", intv(0)}}), {&data, &col}, {&y0}));
  EXPECT_EQ(y0.values<float>(), (std::vector<float>{9, 2, 7, 4}));

  Buf bad = i64({2, 3}, {0, 4, 1, 1, 1, 1});
  EXPECT_KERNEL_ERROR(
      run("GatherElements", attrs({{"axis", intv(1)}}), {&data, &bad}, {&y}),
      "index 4 out of range [-4, 4) on axis 1");
  // Indices larger than the data off the axis.
  Buf wide = i64({2, 5}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  Buf yw(DType::F32, {2, 5});
  EXPECT_KERNEL_ERROR(
      run("GatherElements", attrs({{"axis", intv(0)}}), {&data, &wide}, {&yw}),
      "indices dimension 1 (5) exceeds the data's (4)");
}

TEST(ShapeKernel, ScatterElementsLastWriteWins) {
  // data.scatter_(1, idx, upd): out[i][idx[i][j]] = upd[i][j]; row 0 writes
  // column 3 twice (as 3, then -1: the later update stays), row 2 is not
  // reached by the indices' two rows.
  Buf data = f32({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Buf idx = i64({2, 2}, {3, -1, 0, 2});
  Buf upd = f32({2, 2}, {-1, -2, -3, -4});
  Buf y(DType::F32, {3, 4});
  ASSERT_KERNEL_OK(run("ScatterElements", attrs({{"axis", intv(1)}}),
                       {&data, &idx, &upd}, {&y}));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{1, 2, 3, -2, -3, 6, -4, 8, 9, 10, 11, 12}));

  // Along axis 0 with int32 indices, into int64 data.
  Buf ints = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf rows = i32({1, 3}, {1, 0, -1});
  Buf vals = i64({1, 3}, {70, 80, 90});
  Buf y0(DType::I64, {2, 3});
  ASSERT_KERNEL_OK(run("ScatterElements", attrs({{"axis", intv(0)}}),
                       {&ints, &rows, &vals}, {&y0}));
  EXPECT_EQ(y0.values<int64_t>(), (std::vector<int64_t>{1, 80, 3, 70, 5, 90}));

  Buf bad = i64({2, 2}, {0, 4, 1, 1});
  EXPECT_KERNEL_ERROR(run("ScatterElements", attrs({{"axis", intv(1)}}),
                          {&data, &bad, &upd}, {&y}),
                      "index 4 out of range [-4, 4) on axis 1");
  Buf wrong = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  EXPECT_KERNEL_ERROR(run("ScatterElements", attrs({{"axis", intv(1)}}),
                          {&data, &idx, &wrong}, {&y}),
                      "updates");
}

TEST(ShapeKernel, TopKIndicesOrdersTiesAndNaN) {
  // Along axis 1: ties go to the lower index, a NaN is larger than every
  // number (first when largest, last when smallest).
  float nan = std::numeric_limits<float>::quiet_NaN();
  Buf x = f32({2, 5}, {3, 1, 3, nan, 2, -1, 4, 4, 0, -2});
  Buf y(DType::I64, {2, 3});
  ASSERT_KERNEL_OK(
      run("TopKIndices",
          attrs({{"axis", intv(1)}, {"k", intv(3)}, {"largest", intv(1)}}),
          {&x}, {&y}));
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{3, 0, 2, 1, 2, 3}));
  ASSERT_KERNEL_OK(
      run("TopKIndices",
          attrs({{"axis", intv(1)}, {"k", intv(3)}, {"largest", intv(0)}}),
          {&x}, {&y}));
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{1, 4, 0, 4, 0, 3}));

  // Along axis 0 of int32 data, the whole axis (a sort).
  Buf xi = i32({3, 2}, {5, -1, 7, -1, 5, 9});
  Buf yi(DType::I64, {3, 2});
  ASSERT_KERNEL_OK(
      run("TopKIndices",
          attrs({{"axis", intv(0)}, {"k", intv(3)}, {"largest", intv(1)}}),
          {&xi}, {&yi}));
  EXPECT_EQ(yi.values<int64_t>(), (std::vector<int64_t>{1, 2, 0, 0, 2, 1}));

  EXPECT_KERNEL_ERROR(
      run("TopKIndices",
          attrs({{"axis", intv(1)}, {"k", intv(6)}, {"largest", intv(1)}}),
          {&x}, {&y}),
      "k 6 is out of range [0, 5]");
}

TEST(ShapeKernel, Concat) {
  Buf a = f32({2, 1, 2}, {1, 2, 3, 4});
  Buf b = f32({2, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12});
  Buf y(DType::F32, {2, 3, 2});
  ASSERT_KERNEL_OK(run("Concat", attrs({{"axis", intv(1)}}), {&a, &b}, {&y}));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}));

  Buf c = f32({2, 1, 3}, {0, 0, 0, 0, 0, 0});
  EXPECT_KERNEL_ERROR(run("Concat", attrs({{"axis", intv(1)}}), {&a, &c}, {&y}),
                      "shape");
}

TEST(ShapeKernel, Split) {
  Buf x = i64({3, 2}, {1, 2, 3, 4, 5, 6});
  Buf y0(DType::I64, {1, 2}), y1(DType::I64, {2, 2});
  ASSERT_KERNEL_OK(run("Split", attrs({{"axis", intv(0)}}), {&x}, {&y0, &y1}));
  EXPECT_EQ(y0.values<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(y1.values<int64_t>(), (std::vector<int64_t>{3, 4, 5, 6}));

  Buf c0(DType::I64, {3, 1}), c1(DType::I64, {3, 1});
  ASSERT_KERNEL_OK(run("Split", attrs({{"axis", intv(1)}}), {&x}, {&c0, &c1}));
  EXPECT_EQ(c0.values<int64_t>(), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(c1.values<int64_t>(), (std::vector<int64_t>{2, 4, 6}));

  Buf d0(DType::I64, {1, 2}), d1(DType::I64, {1, 2});
  EXPECT_KERNEL_ERROR(
      run("Split", attrs({{"axis", intv(0)}}), {&x}, {&d0, &d1}), "add up");
}

TEST(ShapeKernel, SliceWithNegativeStep) {
  // X (3,4) = 0..11. Rows 2,1,0; columns 3,1.
  std::vector<float> xs(12);
  for (int i = 0; i < 12; ++i)
    xs[i] = static_cast<float>(i);
  Buf x = f32({3, 4}, xs);
  Buf y(DType::F32, {3, 2});
  ASSERT_KERNEL_OK(
      run("Slice", attrs({{"starts", ints({2, 3})}, {"steps", ints({-1, -2})}}),
          {&x}, {&y}));
  EXPECT_EQ(y.values<float>(), (std::vector<float>{11, 9, 7, 5, 3, 1}));

  // Positive steps, middle block.
  Buf z(DType::F32, {1, 2});
  ASSERT_KERNEL_OK(
      run("Slice", attrs({{"starts", ints({1, 1})}, {"steps", ints({1, 2})}}),
          {&x}, {&z}));
  EXPECT_EQ(z.values<float>(), (std::vector<float>{5, 7}));

  // Running past the data is an error, not a crash.
  Buf w(DType::F32, {3, 3});
  EXPECT_KERNEL_ERROR(
      run("Slice", attrs({{"starts", ints({0, 2})}, {"steps", ints({1, 1})}}),
          {&x}, {&w}),
      "axis 1");
}

TEST(ShapeKernel, Expand) {
  Buf x = f32({3, 1}, {1, 2, 3});
  Buf y(DType::F32, {2, 3, 2});
  ASSERT_KERNEL_OK(run("Expand", attrs(), {&x}, {&y}));
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  Buf bad(DType::F32, {2, 2});
  EXPECT_KERNEL_ERROR(run("Expand", attrs(), {&x}, {&bad}), "broadcast");
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST(ReduceKernel, SumAndMeanOverAxes) {
  Buf x = randomF32({2, 3, 4}, 11);
  std::vector<float> xv = x.values<float>();
  auto at = [&](int i, int j, int k) { return xv[(i * 3 + j) * 4 + k]; };

  // Sum over {0, 2}, keepdims -> (1,3,1).
  Buf s(DType::F32, {1, 3, 1});
  ASSERT_KERNEL_OK(run("ReduceSum",
                       attrs({{"axes", ints({0, 2})}, {"keepdims", intv(1)}}),
                       {&x}, {&s}));
  std::vector<double> want(3, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        want[j] += at(i, j, k);
  expectClose(s.values<float>(), want);

  // Mean over {1}, no keepdims -> (2,4).
  Buf m(DType::F32, {2, 4});
  ASSERT_KERNEL_OK(run("ReduceMean",
                       attrs({{"axes", ints({1})}, {"keepdims", intv(0)}}),
                       {&x}, {&m}));
  want.assign(8, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < 3; ++j)
        want[i * 4 + k] += at(i, j, k);
      want[i * 4 + k] /= 3;
    }
  expectClose(m.values<float>(), want);

  // Mean over everything -> scalar.
  Buf all(DType::F32, {});
  ASSERT_KERNEL_OK(run(
      "ReduceMean", attrs({{"axes", ints({0, 1, 2})}, {"keepdims", intv(0)}}),
      {&x}, {&all}));
  double total = 0;
  for (float v : xv)
    total += v;
  expectClose(all.values<float>(), std::vector<double>{total / 24});

  // Wrong output shape.
  Buf bad(DType::F32, {3});
  EXPECT_KERNEL_ERROR(
      run("ReduceSum", attrs({{"axes", ints({0, 2})}, {"keepdims", intv(1)}}),
          {&x}, {&bad}),
      "shape");
}

// Ties go to the first index, or the last with select_last_index; the axis
// may be inner or outer, kept or dropped.
TEST(ArgMaxKernel, AxesTiesAndKeepdims) {
  Buf x = f32({2, 3}, {1, 5, 5, 7, 2, 7});
  Buf y(DType::I64, {2});
  ASSERT_KERNEL_OK(run(
      "ArgMax", attrs({{"axis", intv(1)}, {"keepdims", intv(0)}}), {&x}, {&y}));
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{1, 0}));
  ASSERT_KERNEL_OK(run("ArgMax",
                       attrs({{"axis", intv(1)},
                              {"keepdims", intv(0)},
                              {"select_last_index", intv(1)}}),
                       {&x}, {&y}));
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{2, 2}));

  Buf k(DType::I64, {1, 3});
  ASSERT_KERNEL_OK(run(
      "ArgMax", attrs({{"axis", intv(0)}, {"keepdims", intv(1)}}), {&x}, {&k}));
  EXPECT_EQ(k.values<int64_t>(), (std::vector<int64_t>{1, 0, 1}));

  Buf xi = i64({4}, {-3, -1, -2, -1});
  Buf s(DType::I64, {1});
  ASSERT_KERNEL_OK(run("ArgMax",
                       attrs({{"axis", intv(0)}, {"keepdims", intv(1)}}), {&xi},
                       {&s}));
  EXPECT_EQ(s.values<int64_t>(), (std::vector<int64_t>{1}));

  Buf bad(DType::I64, {3});
  EXPECT_KERNEL_ERROR(run("ArgMax",
                          attrs({{"axis", intv(1)}, {"keepdims", intv(0)}}),
                          {&x}, {&bad}),
                      "shape");
  Buf f(DType::F32, {2});
  EXPECT_KERNEL_ERROR(run("ArgMax",
                          attrs({{"axis", intv(1)}, {"keepdims", intv(0)}}),
                          {&x}, {&f}),
                      "reduced");
}

// Range's length is the output's; operands that give another are an error.
TEST(RangeKernel, FloatAndIntegerSequences) {
  Buf start = f32({}, {1.0f}), limit = f32({}, {2.0f}), delta = f32({}, {0.3f});
  Buf y(DType::F32, {4});
  ASSERT_KERNEL_OK(run("Range", attrs(), {&start, &limit, &delta}, {&y}));
  expectClose(y.values<float>(), std::vector<float>{1.0f, 1.3f, 1.6f, 1.9f});

  Buf a = i32({}, {10}), b = i32({}, {4}), d = i32({}, {-3});
  Buf yi(DType::I32, {2});
  ASSERT_KERNEL_OK(run("Range", attrs(), {&a, &b, &d}, {&yi}));
  EXPECT_EQ(yi.values<int32_t>(), (std::vector<int32_t>{10, 7}));

  Buf longer(DType::I32, {3});
  EXPECT_KERNEL_ERROR(run("Range", attrs(), {&a, &b, &d}, {&longer}),
                      "give 2 elements");
  Buf zero = i32({}, {0});
  EXPECT_KERNEL_ERROR(run("Range", attrs(), {&a, &b, &zero}, {&yi}),
                      "delta is zero");
}

TEST(ReduceKernel, MaxAndMinOverAxesWithNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Buf x = f32({2, 3}, {1, 7, -2, 4, nan, 0});
  Buf mx(DType::F32, {2});
  ASSERT_KERNEL_OK(run("ReduceMax",
                       attrs({{"axes", ints({1})}, {"keepdims", intv(0)}}),
                       {&x}, {&mx}));
  EXPECT_EQ(mx.values<float>()[0], 7.0f);
  EXPECT_TRUE(std::isnan(mx.values<float>()[1]));
  Buf mn(DType::F32, {1, 3});
  ASSERT_KERNEL_OK(run("ReduceMin",
                       attrs({{"axes", ints({0})}, {"keepdims", intv(1)}}),
                       {&x}, {&mn}));
  std::vector<float> v = mn.values<float>();
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], -2.0f);

  Buf i = i64({2, 2}, {5, -9, 3, 8});
  Buf all(DType::I64, {});
  ASSERT_KERNEL_OK(run("ReduceMin",
                       attrs({{"axes", ints({0, 1})}, {"keepdims", intv(0)}}),
                       {&i}, {&all}));
  EXPECT_EQ(all.values<int64_t>(), (std::vector<int64_t>{-9}));
}

TEST(ReduceKernel, IntegerSumAndNoOp) {
  Buf x = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf y(DType::I64, {2, 1});
  ASSERT_KERNEL_OK(run("ReduceSum",
                       attrs({{"axes", ints({1})}, {"keepdims", intv(1)}}),
                       {&x}, {&y}));
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{6, 15}));

  // Empty axes with an output of the input's shape: a copy.
  Buf same(DType::I64, {2, 3});
  ASSERT_KERNEL_OK(run("ReduceSum",
                       attrs({{"axes", ints({})}, {"keepdims", intv(1)}}), {&x},
                       {&same}));
  EXPECT_EQ(same.values<int64_t>(), x.values<int64_t>());
}

/// ShardSlice of several inputs: each rank's chunk of them laid end to end,
/// chunks that start, end and lie inside an input; the sizes must add up to
/// world_size chunks and every input must be 1-d.
TEST(ShardSliceKernel, TakesTheRanksChunkOfItsInputsEndToEnd) {
  Buf a = f32({3}, {0, 1, 2}), b = f32({5}, {3, 4, 5, 6, 7}),
      c = f32({4}, {8, 9, 10, 11});
  AttrMap none;
  for (int rank = 0; rank < 3; ++rank) {
    Buf out(DType::F32, {4});
    TensorView ins[] = {a.view(), b.view(), c.view()}, outs[] = {out.view()};
    KernelContext ctx{"ShardSlice", "s", none, ins, outs};
    ctx.rank = rank;
    ctx.worldSize = 3;
    ASSERT_FALSE(llvm::errorToBool(cpu::runKernel(ctx)));
    std::vector<float> want;
    for (int i = 0; i < 4; ++i)
      want.push_back(static_cast<float>(rank * 4 + i));
    EXPECT_EQ(out.values<float>(), want) << "rank " << rank;
  }
  Buf out(DType::F32, {4}), flat2d = f32({2, 2}, {0, 1, 2, 3});
  TensorView shortIns[] = {a.view(), b.view()}, outs[] = {out.view()};
  KernelContext shortCtx{"ShardSlice", "s", none, shortIns, outs};
  shortCtx.worldSize = 3;
  EXPECT_EQ(llvm::toString(cpu::runKernel(shortCtx)),
            "ShardSlice 's': inputs of 8 elements are not 3 shards of 4");
  TensorView twoD[] = {flat2d.view(), c.view(), c.view()};
  KernelContext twoDCtx{"ShardSlice", "s", none, twoD, outs};
  twoDCtx.worldSize = 3;
  EXPECT_EQ(
      llvm::toString(cpu::runKernel(twoDCtx)),
      "ShardSlice 's': expects 1-d inputs and one 1-d output of one type");
}

} // namespace
