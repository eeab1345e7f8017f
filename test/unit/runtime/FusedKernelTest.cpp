//===- FusedKernelTest.cpp - FusedElementwise against its ops one by one --===//
//
// A fused program must compute the bits its ops compute as single kernels,
// for every opcode and broadcast pattern, across block boundaries; and a
// corrupt program must be refused with a message, never run.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include "runtime/kernels/FusedOps.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace shardc::rt::test {
namespace {

using ops::FusedOpcode;

/// One program instruction: opcode and the values it reads.
std::vector<int64_t> instr(FusedOpcode op, int64_t a, int64_t b = -1,
                           int64_t c = -1) {
  return {static_cast<int64_t>(op), a, b, c};
}
AttrMap program(std::vector<std::vector<int64_t>> instrs,
                std::vector<int64_t> results) {
  std::vector<int64_t> flat;
  for (const auto &i : instrs)
    flat.insert(flat.end(), i.begin(), i.end());
  return attrs({{"program", ints(flat)}, {"results", ints(results)}});
}

void expectSameBits(const Buf &got, const Buf &want) {
  ASSERT_EQ(got.bytes.size(), want.bytes.size());
  std::vector<float> g = got.values<float>(), w = want.values<float>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_EQ(std::memcmp(&g[i], &w[i], sizeof(float)), 0)
        << "element " << i << ": fused " << g[i] << ", single ops " << w[i];
}

// GELU as PyTorch exports it, x * 0.5 * (1 + erf(x / sqrt 2)) after a bias
// add, over 3 blocks and a part: the bias is a trailing vector, the
// constants scalars; two intermediate values are results too.
TEST(FusedKernel, GeluChainEqualsItsOpsBitForBit) {
  std::vector<int64_t> shape = {3, 7, 97};
  Buf bias = randomF32({97}, 1);
  Buf x = randomF32(shape, 2, -4.0f, 4.0f);
  Buf sqrt2 = f32({}, {1.41421354f});
  Buf one = f32({}, {1.0f});
  Buf half = f32({}, {0.5f});
  // Values: 0 bias, 1 x, 2 sqrt2, 3 one, 4 half; then 5.. the instructions.
  AttrMap p =
      program({instr(FusedOpcode::Add, 0, 1), instr(FusedOpcode::Div, 5, 2),
               instr(FusedOpcode::Erf, 6), instr(FusedOpcode::Add, 7, 3),
               instr(FusedOpcode::Mul, 5, 8), instr(FusedOpcode::Mul, 9, 4)},
              {5, 8, 10});
  Buf h(DType::F32, shape), e1(DType::F32, shape), y(DType::F32, shape);
  ASSERT_KERNEL_OK(run("FusedElementwise", p, {&bias, &x, &sqrt2, &one, &half},
                       {&h, &e1, &y}));

  Buf wh(DType::F32, shape), wd(DType::F32, shape), we(DType::F32, shape),
      we1(DType::F32, shape), wm(DType::F32, shape), wy(DType::F32, shape);
  ASSERT_KERNEL_OK(run("Add", attrs(), {&bias, &x}, {&wh}));
  ASSERT_KERNEL_OK(run("Div", attrs(), {&wh, &sqrt2}, {&wd}));
  ASSERT_KERNEL_OK(run("Erf", attrs(), {&wd}, {&we}));
  ASSERT_KERNEL_OK(run("Add", attrs(), {&we, &one}, {&we1}));
  ASSERT_KERNEL_OK(run("Mul", attrs(), {&wh, &we1}, {&wm}));
  ASSERT_KERNEL_OK(run("Mul", attrs(), {&wm, &half}, {&wy}));
  expectSameBits(h, wh);
  expectSameBits(e1, we1);
  expectSameBits(y, wy);
}

// A division by a scalar input, which the kernel may do by the divisor's
// reciprocal, is the Div kernel's to the bit over every kind of float:
// zeros, infinities, NaN, subnormals, the extremes, random magnitudes.
TEST(FusedKernel, DivisionByAScalarIsTheDivisionKernels) {
  std::vector<float> values = {0.0f,    -0.0f,    1e-45f,  -1e-40f,
                               3.4e38f, -3.4e38f, 0x1p60f, 0x1p-61f,
                               1.0f,    -2.5f,    1e30f,   -7e-30f};
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> anyBits;
  while (values.size() < 3000) {
    uint32_t b = anyBits(rng);
    float f;
    std::memcpy(&f, &b, sizeof f);
    if (!std::isnan(f))
      values.push_back(f);
  }
  int64_t n = static_cast<int64_t>(values.size());
  Buf x = f32({n}, values);
  for (float c : {1.41421354f, -3.0f, 0.7f, 0x1p40f}) {
    Buf divisor = f32({}, {c});
    Buf y(DType::F32, {n}), want(DType::F32, {n});
    ASSERT_KERNEL_OK(run("FusedElementwise",
                         program({instr(FusedOpcode::Div, 0, 1)}, {2}),
                         {&x, &divisor}, {&y}));
    ASSERT_KERNEL_OK(run("Div", attrs(), {&x, &divisor}, {&want}));
    expectSameBits(y, want);
  }
}

// GELU's gradient as shardc-fuse-elementwise emits it: erf(u) and, later,
// exp(-(u * u)), which the kernel computes from one exponential. Twice:
// with the square and its negation read by nothing else (both skipped),
// and with the square also a result and the exponential one too.
TEST(FusedKernel, GeluGradientSharesErfsExponentialBitForBit) {
  std::vector<int64_t> shape = {5, 3, 211};
  Buf dy = randomF32(shape, 11, -2.0f, 2.0f);
  Buf x = randomF32(shape, 12, -5.0f, 5.0f);
  Buf sqrt2 = f32({}, {1.41421354f});
  Buf one = f32({}, {1.0f});
  Buf half = f32({}, {0.5f});
  Buf c = f32({}, {0.398942292f});
  // Values: 0 dy, 1 x, 2 sqrt2, 3 one, 4 half, 5 c; then 6.. the program.
  std::vector<std::vector<int64_t>> instrs = {
      instr(FusedOpcode::Mul, 0, 4),   // 6: dy / 2
      instr(FusedOpcode::Div, 1, 2),   // 7: u = x / sqrt 2
      instr(FusedOpcode::Erf, 7),      // 8
      instr(FusedOpcode::Add, 8, 3),   // 9: 1 + erf(u)
      instr(FusedOpcode::Mul, 6, 9),   // 10
      instr(FusedOpcode::Mul, 6, 1),   // 11
      instr(FusedOpcode::Mul, 7, 7),   // 12: u * u
      instr(FusedOpcode::Neg, 12),     // 13
      instr(FusedOpcode::Exp, 13),     // 14: exp(-(u * u))
      instr(FusedOpcode::Mul, 14, 5),  // 15
      instr(FusedOpcode::Mul, 11, 15), // 16
      instr(FusedOpcode::Div, 16, 2),  // 17
      instr(FusedOpcode::Add, 10, 17), // 18: dx
  };
  std::vector<Buf *> ins = {&dy, &x, &sqrt2, &one, &half, &c};
  // The ops one by one.
  std::vector<Buf> w;
  w.reserve(instrs.size());
  auto value = [&](int64_t v) { return v < 6 ? ins[v] : &w[v - 6]; };
  const char *types[] = {"Add", "Sub", "Mul", "Div",  "Max", "Min",
                         "Pow", "Neg", "Abs", "Sqrt", "Exp", "Erf"};
  for (const auto &in : instrs) {
    w.emplace_back(DType::F32, shape);
    std::vector<Buf *> args;
    for (int a = 1; a < 4; ++a)
      if (in[a] >= 0)
        args.push_back(value(in[a]));
    ASSERT_KERNEL_OK(run(types[in[0]], attrs(), args, {&w.back()}));
  }
  Buf dx(DType::F32, shape);
  ASSERT_KERNEL_OK(run("FusedElementwise", program(instrs, {18}), ins, {&dx}));
  expectSameBits(dx, w[12]);
  Buf dx2(DType::F32, shape), square(DType::F32, shape),
      gauss(DType::F32, shape);
  ASSERT_KERNEL_OK(run("FusedElementwise", program(instrs, {18, 12, 14}), ins,
                       {&dx2, &square, &gauss}));
  expectSameBits(dx2, w[12]);
  expectSameBits(square, w[6]);
  expectSameBits(gauss, w[8]);
}

// Every opcode once, each against its single-op kernel: a per-row input
// (4x1 against 4x300), a masked Where, Pow by a scalar exponent (products,
// as Pow's kernel takes them for a base of the output's shape; pow for a
// broadcast base) and by a tensor (pow).
TEST(FusedKernel, EveryOpcodeEqualsItsKernel) {
  std::vector<int64_t> shape = {4, 300};
  Buf a = randomF32(shape, 3, -3.0f, 3.0f);
  Buf b = randomF32(shape, 4, 0.5f, 2.0f);
  Buf row = randomF32({4, 1}, 5, 0.5f, 2.0f);
  std::vector<uint8_t> maskBits(300);
  for (size_t i = 0; i < maskBits.size(); ++i)
    maskBits[i] = (i * 7) % 3 == 0;
  Buf mask = boolean({300}, maskBits);
  Buf three = f32({}, {3.0f});
  // Values: 0 a, 1 b, 2 row, 3 mask, 4 three.
  struct Case {
    const char *type;
    FusedOpcode op;
    std::vector<int64_t> args;
  };
  const Case cases[] = {
      {"Add", FusedOpcode::Add, {0, 2}},
      {"Sub", FusedOpcode::Sub, {0, 1}},
      {"Mul", FusedOpcode::Mul, {0, 2}},
      {"Div", FusedOpcode::Div, {0, 1}},
      {"Max", FusedOpcode::Max, {0, 1}},
      {"Min", FusedOpcode::Min, {0, 2}},
      {"Pow", FusedOpcode::Pow, {0, 4}},
      {"Pow", FusedOpcode::Pow, {1, 0}},
      {"Pow", FusedOpcode::Pow, {2, 4}},
      {"Neg", FusedOpcode::Neg, {0}},
      {"Abs", FusedOpcode::Abs, {0}},
      {"Sqrt", FusedOpcode::Sqrt, {1}},
      {"Exp", FusedOpcode::Exp, {0}},
      {"Erf", FusedOpcode::Erf, {0}},
      {"Tanh", FusedOpcode::Tanh, {0}},
      {"Sigmoid", FusedOpcode::Sigmoid, {0}},
      {"Relu", FusedOpcode::Relu, {0}},
      {"Where", FusedOpcode::Where, {3, 0, 1}},
      {"ReluGrad", FusedOpcode::ReluGrad, {1, 0}},
      {"SigmoidGrad", FusedOpcode::SigmoidGrad, {0, 1}},
      {"TanhGrad", FusedOpcode::TanhGrad, {0, 1}},
      {"Log", FusedOpcode::Log, {1}},
  };
  std::vector<Buf *> values = {&a, &b, &row, &mask, &three};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.type);
    std::vector<int64_t> args = c.args;
    args.resize(3, -1);
    // The op, then Neg of it, so that the value is read from scratch too.
    AttrMap p = program(
        {instr(c.op, args[0], args[1], args[2]), instr(FusedOpcode::Neg, 5)},
        {5, 6});
    Buf got(DType::F32, shape), gotNeg(DType::F32, shape);
    ASSERT_KERNEL_OK(run("FusedElementwise", p, values, {&got, &gotNeg}));
    std::vector<Buf *> ins;
    for (int64_t v : c.args)
      ins.push_back(values[v]);
    Buf want(DType::F32, shape), wantNeg(DType::F32, shape);
    ASSERT_KERNEL_OK(run(c.type, attrs(), ins, {&want}));
    ASSERT_KERNEL_OK(run("Neg", attrs(), {&want}, {&wantNeg}));
    expectSameBits(got, want);
    expectSameBits(gotNeg, wantNeg);
  }
}

// Shapes with 1s in them: an input of the output's very shape reads in
// place, and a 1 between two spanned dimensions does not split the run.
TEST(FusedKernel, OnesInShapesKeepOneRun) {
  Buf x = randomF32({3, 1, 40}, 9);
  Buf b = randomF32({3, 1, 1}, 10);
  AttrMap p = program({instr(FusedOpcode::Mul, 0, 1)}, {2});
  Buf got(DType::F32, {3, 1, 40}), want(DType::F32, {3, 1, 40});
  ASSERT_KERNEL_OK(run("FusedElementwise", p, {&x, &b}, {&got}));
  ASSERT_KERNEL_OK(run("Mul", attrs(), {&x, &b}, {&want}));
  expectSameBits(got, want);
}

// An output over its own input (an update in place) reads the input's
// elements before any are written.
TEST(FusedKernel, OutputMayOverwriteAnInput) {
  std::vector<int64_t> shape = {1500};
  Buf x = randomF32(shape, 6);
  Buf s = f32({}, {0.25f});
  Buf want(DType::F32, shape), tmp(DType::F32, shape);
  ASSERT_KERNEL_OK(run("Mul", attrs(), {&x, &s}, {&tmp}));
  ASSERT_KERNEL_OK(run("Add", attrs(), {&tmp, &x}, {&want}));
  AttrMap p = program(
      {instr(FusedOpcode::Mul, 0, 1), instr(FusedOpcode::Add, 2, 0)}, {3});
  std::vector<TensorView> ins = {x.view(), s.view()};
  std::vector<TensorView> outs = {x.view()};
  KernelContext ctx{"FusedElementwise", "test", p, ins, outs};
  ASSERT_FALSE(bool(cpu::runKernel(ctx)));
  expectSameBits(x, want);
}

TEST(FusedKernel, RefusesCorruptPrograms) {
  Buf x = randomF32({8}, 7);
  Buf m = boolean({8}, {1, 0, 1, 0, 1, 0, 1, 0});
  Buf wide = randomF32({3, 8}, 8);
  Buf y(DType::F32, {8});
  auto fused = [&](AttrMap p, std::vector<Buf *> ins) {
    return run("FusedElementwise", p, ins, {&y});
  };
  EXPECT_KERNEL_ERROR(
      fused(attrs({{"program", ints({2, 0, 0})}, {"results", ints({1})}}),
            {&x}),
      "4 ints per instruction");
  EXPECT_KERNEL_ERROR(
      fused(program({instr(FusedOpcode::Neg, 0)}, {1, 1}), {&x}),
      "names 2 values for 1 outputs");
  EXPECT_KERNEL_ERROR(
      fused(attrs({{"program", ints({99, 0, -1, -1})}, {"results", ints({1})}}),
            {&x}),
      "opcode 99");
  EXPECT_KERNEL_ERROR(
      fused(program({instr(FusedOpcode::Mul, 0, 1)}, {1}), {&x}),
      "reads value 1; only values 0 to 0 exist");
  EXPECT_KERNEL_ERROR(
      fused(program({instr(FusedOpcode::Neg, 0, 0)}, {1}), {&x}),
      "reads 2 values; it takes 1");
  EXPECT_KERNEL_ERROR(fused(program({instr(FusedOpcode::Neg, 0)}, {5}), {&x}),
                      "names value 5");
  EXPECT_KERNEL_ERROR(
      fused(program({instr(FusedOpcode::Where, 0, 0, 0)}, {1}), {&x}),
      "not a bool input, as a Where's condition");
  EXPECT_KERNEL_ERROR(
      fused(program({instr(FusedOpcode::Add, 0, 1)}, {2}), {&x, &m}),
      "a bool input, as a float");
  EXPECT_KERNEL_ERROR(
      fused(program({instr(FusedOpcode::Neg, 0)}, {1}), {&wide}),
      "does not broadcast to the output shape");
}

} // namespace
} // namespace shardc::rt::test
