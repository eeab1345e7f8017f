//===- TrainingKernelTest.cpp - CPU kernels: gradients and optimizers -----===//
//
// Every gradient kernel is checked against central finite differences of the
// forward kernel it differentiates: with L(x) = sum(forward(x) * R) for a
// fixed random R, the gradient kernel given dY = R must return dL/dx. All
// forward kernels involved support f64, where h = 1e-6 leaves errors far
// below the tolerances; the f32 paths are checked with h = 1e-2 and loose
// tolerances. Optimizer kernels are checked against double-precision
// re-implementations of PyTorch 1.13's torch.optim.SGD / Adam / AdamW.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/OptimizerOps.h"
#include "test/unit/runtime/KernelTestUtil.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

using namespace shardc::rt;
using namespace shardc::rt::test;

namespace {

//===----------------------------------------------------------------------===//
// Finite-difference harness
//===----------------------------------------------------------------------===//

/// A precision to run a gradient check in.
struct Precision {
  DType dtype;
  double h, rtol, atol;
  const char *name;
};
const Precision kF64 = {DType::F64, 1e-6, 1e-5, 1e-6, "f64"};
const Precision kF32 = {DType::F32, 1e-2, 1e-2, 2e-3, "f32"};
const Precision kPrecisions[] = {kF64, kF32};

/// A tensor of `dtype` (f32 or f64) holding `v`.
Buf fromDoubles(DType dtype, std::vector<int64_t> shape,
                const std::vector<double> &v) {
  if (dtype == DType::F64)
    return f64(std::move(shape), v);
  return f32(std::move(shape), std::vector<float>(v.begin(), v.end()));
}

std::vector<double> toDoubles(const Buf &b) {
  if (b.dtype == DType::F64)
    return b.values<double>();
  std::vector<float> v = b.values<float>();
  return std::vector<double>(v.begin(), v.end());
}

/// Uniform values in [lo, hi), exactly representable in f32 so that the f32
/// and f64 runs see the same inputs.
std::vector<double> randomValues(size_t n, unsigned seed, double lo = -1.0,
                                 double hi = 1.0) {
  std::vector<float> f =
      randomFloats(n, seed, static_cast<float>(lo), static_cast<float>(hi));
  return std::vector<double>(f.begin(), f.end());
}

size_t count(const std::vector<int64_t> &shape) {
  return static_cast<size_t>(numElements(shape));
}

/// Runs `op` and returns output 0 as doubles (empty after a failure).
std::vector<double> runOut(llvm::StringRef op, const AttrMap &a,
                           std::vector<Buf *> ins, std::vector<Buf *> outs) {
  std::string msg = run(op, a, std::move(ins), outs);
  EXPECT_EQ(msg, "") << "running " << op.str();
  if (!msg.empty())
    return {};
  return toDoubles(*outs[0]);
}

using Forward = std::function<std::vector<double>(const std::vector<double> &)>;

double weightedSum(const std::vector<double> &y, const std::vector<double> &r) {
  if (y.size() != r.size())
    return std::nan("");
  double s = 0.0;
  for (size_t i = 0; i < y.size(); ++i)
    s += y[i] * r[i];
  return s;
}

/// Expects `analytic` to equal dL/dx at `x` for L(x) = sum(forward(x) * r),
/// element by element, using central differences.
void expectGradient(const Forward &forward, const std::vector<double> &x,
                    const std::vector<double> &r,
                    const std::vector<double> &analytic, const Precision &p,
                    const std::string &what) {
  SCOPED_TRACE(what + " (" + p.name + ")");
  ASSERT_EQ(analytic.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> xp = x, xm = x;
    xp[i] += p.h;
    xm[i] -= p.h;
    double numeric =
        (weightedSum(forward(xp), r) - weightedSum(forward(xm), r)) / (2 * p.h);
    ASSERT_FALSE(std::isnan(numeric)) << "forward failed at element " << i;
    EXPECT_NEAR(analytic[i], numeric, p.atol + p.rtol * std::fabs(numeric))
        << "element " << i;
  }
}

//===----------------------------------------------------------------------===//
// Kernel table
//===----------------------------------------------------------------------===//

TEST(TrainingKernelTable, HasEveryTrainingOp) {
  const char *ops[] = {"ReluGrad",
                       "SigmoidGrad",
                       "TanhGrad",
                       "SoftmaxGrad",
                       "LogSoftmaxGrad",
                       "ConvGradInput",
                       "ConvGradWeight",
                       "MaxPoolGrad",
                       "AveragePoolGrad",
                       "LayerNormGrad",
                       "BatchNormGrad",
                       "BatchNormStats",
                       "BatchNormGradStats",
                       "SoftmaxCrossEntropyLossGrad",
                       "SoftmaxCrossEntropyLossWithGrad",
                       "NegativeLogLikelihoodLossGrad",
                       "GatherGrad",
                       "GatherElementsGrad",
                       "SliceGrad",
                       "SGDUpdate",
                       "AdamUpdate",
                       "Increment",
                       "PartialNorm",
                       "ClipCoefficient",
                       "LossScale"};
  for (const char *op : ops) {
    bool found = false;
    for (const auto &entry : cpu::kernelTable())
      found |= entry.first == op;
    EXPECT_TRUE(found) << op;
  }
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

TEST(ActivationGradKernel, ReluMatchesFiniteDifferences) {
  std::vector<int64_t> shape = {3, 5};
  std::vector<double> x = randomValues(count(shape), 1);
  for (double &v : x) // Keep away from the kink at 0.
    if (std::fabs(v) < 0.1)
      v += v < 0 ? -0.2 : 0.2;
  std::vector<double> r = randomValues(count(shape), 2);
  for (const Precision &p : kPrecisions) {
    Buf xb = fromDoubles(p.dtype, shape, x),
        rb = fromDoubles(p.dtype, shape, r);
    Buf dx(p.dtype, shape);
    ASSERT_KERNEL_OK(run("ReluGrad", attrs(), {&rb, &xb}, {&dx}));
    Forward f = [&](const std::vector<double> &v) {
      Buf in = fromDoubles(p.dtype, shape, v);
      Buf y(p.dtype, shape);
      return runOut("Relu", attrs(), {&in}, {&y});
    };
    expectGradient(f, x, r, toDoubles(dx), p, "dX");
  }
}

TEST(ActivationGradKernel, SigmoidAndTanhFromTheirOutputs) {
  std::vector<int64_t> shape = {2, 3, 2};
  std::vector<double> x = randomValues(count(shape), 3, -3.0, 3.0);
  std::vector<double> r = randomValues(count(shape), 4);
  for (const char *op : {"Sigmoid", "Tanh"}) {
    for (const Precision &p : kPrecisions) {
      Buf xb = fromDoubles(p.dtype, shape, x),
          rb = fromDoubles(p.dtype, shape, r);
      Buf y(p.dtype, shape), dx(p.dtype, shape);
      ASSERT_KERNEL_OK(run(op, attrs(), {&xb}, {&y}));
      ASSERT_KERNEL_OK(
          run(std::string(op) + "Grad", attrs(), {&rb, &y}, {&dx}));
      Forward f = [&](const std::vector<double> &v) {
        Buf in = fromDoubles(p.dtype, shape, v);
        Buf out(p.dtype, shape);
        return runOut(op, attrs(), {&in}, {&out});
      };
      expectGradient(f, x, r, toDoubles(dx), p, std::string(op));
    }
  }
}

TEST(ActivationGradKernel, RejectsIntegerAndMismatchedOperands) {
  Buf dy = i64({2}, {1, 2}), x = i64({2}, {1, -1}), dx(DType::I64, {2});
  EXPECT_KERNEL_ERROR(run("ReluGrad", attrs(), {&dy, &x}, {&dx}), "int64");
  Buf dyf = f32({2}, {1, 2}), xf = f32({3}, {1, 2, 3}), dxf(DType::F32, {2});
  EXPECT_KERNEL_ERROR(run("TanhGrad", attrs(), {&dyf, &xf}, {&dxf}), "shape");
  Buf xd = f64({2}, {1, 2});
  EXPECT_KERNEL_ERROR(run("SigmoidGrad", attrs(), {&dyf, &xd}, {&dxf}),
                      "float64");
}

//===----------------------------------------------------------------------===//
// Softmax and LogSoftmax
//===----------------------------------------------------------------------===//

TEST(SoftmaxGradKernel, AlongEachAxis) {
  std::vector<int64_t> shape = {2, 3, 4};
  std::vector<double> x = randomValues(count(shape), 5, -2.0, 2.0);
  std::vector<double> r = randomValues(count(shape), 6);
  for (const char *op : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis = 0; axis < 3; ++axis) {
      for (const Precision &p : kPrecisions) {
        AttrMap a = attrs({{"axis", intv(axis)}});
        Buf xb = fromDoubles(p.dtype, shape, x),
            rb = fromDoubles(p.dtype, shape, r);
        Buf y(p.dtype, shape), dx(p.dtype, shape);
        ASSERT_KERNEL_OK(run(op, a, {&xb}, {&y}));
        ASSERT_KERNEL_OK(run(std::string(op) + "Grad", a, {&rb, &y}, {&dx}));
        Forward f = [&](const std::vector<double> &v) {
          Buf in = fromDoubles(p.dtype, shape, v);
          Buf out(p.dtype, shape);
          return runOut(op, a, {&in}, {&out});
        };
        expectGradient(f, x, r, toDoubles(dx), p,
                       std::string(op) + " axis " + std::to_string(axis));
      }
    }
  }
}

TEST(SoftmaxGradKernel, RejectsBadAxis) {
  Buf dy = f32({2, 2}, {1, 2, 3, 4}), y = f32({2, 2}, {1, 2, 3, 4});
  Buf dx(DType::F32, {2, 2});
  EXPECT_KERNEL_ERROR(
      run("SoftmaxGrad", attrs({{"axis", intv(2)}}), {&dy, &y}, {&dx}),
      "out of range");
}

//===----------------------------------------------------------------------===//
// Conv
//===----------------------------------------------------------------------===//

struct ConvCase {
  std::string name;
  std::vector<int64_t> x, w;
  std::vector<int64_t> strides, dilations, pads;
  int64_t group;
};

std::vector<int64_t> convOutShape(const ConvCase &c) {
  size_t ns = c.x.size() - 2;
  std::vector<int64_t> y = {c.x[0], c.w[0]};
  for (size_t d = 0; d < ns; ++d) {
    int64_t span = c.dilations[d] * (c.w[d + 2] - 1) + 1;
    int64_t padded = c.x[d + 2] + c.pads[d] + c.pads[d + ns];
    y.push_back((padded - span) / c.strides[d] + 1);
  }
  return y;
}

AttrMap convAttrs(const ConvCase &c) {
  return attrs({{"kernel_shape", ints({c.w.begin() + 2, c.w.end()})},
                {"strides", ints(c.strides)},
                {"dilations", ints(c.dilations)},
                {"pads", ints(c.pads)},
                {"group", intv(c.group)}});
}

TEST(ConvGradKernel, InputAndWeightMatchFiniteDifferences) {
  const ConvCase cases[] = {
      // Stride 3 with a remainder, dilation 2 (input element 7 feeds no
      // output) and asymmetric padding.
      {"1d", {2, 3, 9}, {4, 3, 3}, {3}, {2}, {2, 1}, 1},
      // Groups, per-axis strides and dilations, padding on one side each.
      {"2d-groups",
       {2, 4, 5, 6},
       {6, 2, 3, 2},
       {2, 1},
       {1, 2},
       {1, 0, 0, 1},
       2},
      {"3d",
       {1, 2, 4, 3, 5},
       {2, 1, 2, 2, 3},
       {1, 2, 2},
       {1, 1, 1},
       {0, 1, 1, 1, 0, 1},
       2},
      // 1x1 without stride or padding multiplies directly (no im2col).
      {"1x1-direct",
       {2, 3, 4, 3},
       {5, 3, 1, 1},
       {1, 1},
       {1, 1},
       {0, 0, 0, 0},
       1},
      {"1x1-strided",
       {1, 3, 5, 5},
       {2, 3, 1, 1},
       {2, 2},
       {1, 1},
       {0, 0, 0, 0},
       1},
      // Depthwise with padding wider than a stride of 3 covers.
      {"depthwise",
       {1, 3, 4, 4},
       {3, 1, 3, 3},
       {3, 3},
       {1, 1},
       {2, 2, 2, 2},
       3},
  };
  unsigned seed = 100;
  for (const ConvCase &c : cases) {
    std::vector<int64_t> yShape = convOutShape(c);
    std::vector<double> x = randomValues(count(c.x), ++seed);
    std::vector<double> w = randomValues(count(c.w), ++seed);
    std::vector<double> r = randomValues(count(yShape), ++seed);
    AttrMap a = convAttrs(c);
    for (const Precision &p : kPrecisions) {
      SCOPED_TRACE(c.name);
      Buf xb = fromDoubles(p.dtype, c.x, x), wb = fromDoubles(p.dtype, c.w, w),
          rb = fromDoubles(p.dtype, yShape, r);
      Buf dx(p.dtype, c.x), dw(p.dtype, c.w);
      ASSERT_KERNEL_OK(run("ConvGradInput", a, {&rb, &wb}, {&dx}));
      ASSERT_KERNEL_OK(run("ConvGradWeight", a, {&rb, &xb}, {&dw}));
      Forward fx = [&](const std::vector<double> &v) {
        Buf in = fromDoubles(p.dtype, c.x, v);
        Buf y(p.dtype, yShape);
        return runOut("Conv", a, {&in, &wb}, {&y});
      };
      expectGradient(fx, x, r, toDoubles(dx), p, "dX");
      Forward fw = [&](const std::vector<double> &v) {
        Buf wv = fromDoubles(p.dtype, c.w, v);
        Buf y(p.dtype, yShape);
        return runOut("Conv", a, {&xb, &wv}, {&y});
      };
      expectGradient(fw, w, r, toDoubles(dw), p, "dW");
    }
  }
}

TEST(ConvGradKernel, RejectsMismatchedShapesAndTypes) {
  ConvCase c = {"", {1, 2, 5}, {3, 2, 3}, {1}, {1}, {0, 0}, 1};
  AttrMap a = convAttrs(c);
  Buf w = randomF32(c.w, 1);
  Buf dyBad = randomF32({1, 3, 4}, 2); // Should be (1, 3, 3).
  Buf dx(DType::F32, c.x);
  EXPECT_KERNEL_ERROR(run("ConvGradInput", a, {&dyBad, &w}, {&dx}),
                      "expected [1, 3, 3]");
  Buf dy = randomF32({1, 3, 3}, 3);
  Buf dxI(DType::I64, c.x);
  EXPECT_KERNEL_ERROR(run("ConvGradInput", a, {&dy, &w}, {&dxI}), "int64");
  Buf x = randomF32(c.x, 4);
  Buf dwBad(DType::F32, {3, 1, 3}); // Group 1 needs 2 input channels.
  EXPECT_KERNEL_ERROR(run("ConvGradWeight", a, {&dy, &x}, {&dwBad}), "group");
}

//===----------------------------------------------------------------------===//
// Pools
//===----------------------------------------------------------------------===//

struct PoolCase {
  std::string name;
  std::vector<int64_t> x, kernel, strides, pads, dilations;
  bool ceil = false;
  bool includePad = false;
};

/// Output size per ONNX/PyTorch, including ceil_mode's rule that the last
/// window must start inside the input or the begin padding.
std::vector<int64_t> poolOutShape(const PoolCase &c) {
  size_t ns = c.kernel.size();
  std::vector<int64_t> y = {c.x[0], c.x[1]};
  for (size_t d = 0; d < ns; ++d) {
    int64_t dil = c.dilations.empty() ? 1 : c.dilations[d];
    int64_t span = dil * (c.kernel[d] - 1) + 1;
    int64_t padded = c.x[d + 2] + c.pads[d] + c.pads[d + ns];
    int64_t num = padded - span;
    int64_t o = (c.ceil ? (num + c.strides[d] - 1) / c.strides[d]
                        : num / c.strides[d]) +
                1;
    if (c.ceil && (o - 1) * c.strides[d] >= c.x[d + 2] + c.pads[d])
      --o;
    y.push_back(o);
  }
  return y;
}

AttrMap poolAttrs(const PoolCase &c) {
  AttrMap a = attrs({{"kernel_shape", ints(c.kernel)},
                     {"strides", ints(c.strides)},
                     {"pads", ints(c.pads)},
                     {"ceil_mode", intv(c.ceil)},
                     {"count_include_pad", intv(c.includePad)},
                     {"storage_order", intv(0)}});
  if (!c.dilations.empty())
    a.set("dilations", ints(c.dilations));
  return a;
}

/// Distinct values 0.1 apart in random order, so that no perturbation of
/// the finite differences changes which element is a window's maximum.
std::vector<double> distinctValues(size_t n, unsigned seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = 0.1 * static_cast<double>(i) - 0.05 * static_cast<double>(n);
  std::mt19937 gen(seed);
  std::shuffle(v.begin(), v.end(), gen);
  return v;
}

TEST(PoolGradKernel, MaxPoolMatchesFiniteDifferences) {
  const PoolCase cases[] = {
      // Overlapping windows (one input feeds several outputs) and padding.
      {"2d-overlap", {2, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}},
      {"2d-ceil", {1, 2, 6, 5}, {2, 3}, {2, 2}, {0, 1, 0, 0}, {}, true},
      {"2d-dilated", {1, 1, 6, 6}, {2, 2}, {1, 2}, {1, 0, 0, 1}, {2, 2}},
      {"1d", {2, 3, 9}, {3}, {2}, {1, 1}, {}},
      {"3d", {1, 2, 3, 4, 4}, {2, 2, 2}, {1, 2, 2}, {0, 0, 1, 1, 1, 0}, {}},
  };
  unsigned seed = 200;
  for (const PoolCase &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<int64_t> yShape = poolOutShape(c);
    std::vector<double> x = distinctValues(count(c.x), ++seed);
    std::vector<double> r = randomValues(count(yShape), ++seed);
    AttrMap a = poolAttrs(c);
    for (const Precision &p : kPrecisions) {
      Buf xb = fromDoubles(p.dtype, c.x, x),
          rb = fromDoubles(p.dtype, yShape, r);
      Buf y(p.dtype, yShape), idx(DType::I64, yShape), dx(p.dtype, c.x);
      ASSERT_KERNEL_OK(run("MaxPool", a, {&xb}, {&y, &idx}));
      ASSERT_KERNEL_OK(run("MaxPoolGrad", attrs(), {&rb, &idx}, {&dx}));
      Forward f = [&](const std::vector<double> &v) {
        Buf in = fromDoubles(p.dtype, c.x, v);
        Buf out(p.dtype, yShape);
        return runOut("MaxPool", a, {&in}, {&out});
      };
      expectGradient(f, x, r, toDoubles(dx), p, "dX");
    }
  }
}

TEST(PoolGradKernel, MaxPoolSkipsEmptyWindowsAndChecksIndices) {
  // Kernel 1, stride 3 and one end pad: the second window covers only
  // padding, so MaxPool writes index -1 there.
  PoolCase c = {"", {1, 1, 3}, {1}, {3}, {0, 1}, {}, true};
  Buf x = f32({1, 1, 3}, {5, 6, 7});
  Buf y(DType::F32, {1, 1, 2}), idx(DType::I64, {1, 1, 2});
  ASSERT_KERNEL_OK(run("MaxPool", poolAttrs(c), {&x}, {&y, &idx}));
  ASSERT_EQ(idx.values<int64_t>(), (std::vector<int64_t>{0, -1}));
  Buf dy = f32({1, 1, 2}, {2, 3});
  Buf dx(DType::F32, {1, 1, 3});
  ASSERT_KERNEL_OK(run("MaxPoolGrad", attrs(), {&dy, &idx}, {&dx}));
  expectClose(dx.values<float>(), std::vector<float>{2, 0, 0});

  Buf bad = i64({1, 1, 2}, {0, 3});
  EXPECT_KERNEL_ERROR(run("MaxPoolGrad", attrs(), {&dy, &bad}, {&dx}),
                      "index 3");
  Buf neg = i64({1, 1, 2}, {0, -2});
  EXPECT_KERNEL_ERROR(run("MaxPoolGrad", attrs(), {&dy, &neg}, {&dx}),
                      "index -2");
  Buf idx32 = i32({1, 1, 2}, {0, 1});
  EXPECT_KERNEL_ERROR(run("MaxPoolGrad", attrs(), {&dy, &idx32}, {&dx}),
                      "int32");
}

TEST(PoolGradKernel, AveragePoolMatchesFiniteDifferences) {
  std::vector<PoolCase> cases = {
      {"2d-pad", {2, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}},
      {"2d-pad-include",
       {2, 2, 5, 5},
       {3, 3},
       {2, 2},
       {1, 1, 1, 1},
       {},
       false,
       true},
      // ceil_mode: the last window runs past the padded edge.
      {"2d-ceil", {1, 2, 6, 5}, {3, 2}, {2, 2}, {1, 0, 0, 0}, {}, true},
      {"2d-ceil-include",
       {1, 2, 6, 5},
       {3, 2},
       {2, 2},
       {1, 0, 0, 0},
       {},
       true,
       true},
      {"1d-ceil-include", {2, 1, 7}, {3}, {3}, {1, 0}, {}, true, true},
      {"3d",
       {1, 1, 4, 3, 4},
       {2, 2, 2},
       {2, 1, 2},
       {1, 0, 0, 0, 1, 1},
       {},
       false,
       true},
  };
  unsigned seed = 300;
  for (const PoolCase &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<int64_t> yShape = poolOutShape(c);
    std::vector<double> x = randomValues(count(c.x), ++seed);
    std::vector<double> r = randomValues(count(yShape), ++seed);
    AttrMap a = poolAttrs(c);
    for (const Precision &p : kPrecisions) {
      Buf rb = fromDoubles(p.dtype, yShape, r);
      Buf dx(p.dtype, c.x);
      ASSERT_KERNEL_OK(run("AveragePoolGrad", a, {&rb}, {&dx}));
      Forward f = [&](const std::vector<double> &v) {
        Buf in = fromDoubles(p.dtype, c.x, v);
        Buf out(p.dtype, yShape);
        return runOut("AveragePool", a, {&in}, {&out});
      };
      expectGradient(f, x, r, toDoubles(dx), p, "dX");
    }
  }
}

TEST(PoolGradKernel, AveragePoolRejectsMismatchedChannels) {
  PoolCase c = {"", {1, 2, 4}, {2}, {2}, {0, 0}, {}};
  Buf dy = randomF32({1, 3, 2}, 1);
  Buf dx(DType::F32, c.x);
  EXPECT_KERNEL_ERROR(run("AveragePoolGrad", poolAttrs(c), {&dy}, {&dx}),
                      "does not match");
}

//===----------------------------------------------------------------------===//
// LayerNormalization and BatchNormalization
//===----------------------------------------------------------------------===//

TEST(NormGradKernel, LayerNormMatchesFiniteDifferences) {
  struct Case {
    std::string name;
    std::vector<int64_t> x;
    int64_t axis;
    std::vector<int64_t> scale;
  };
  const Case cases[] = {
      {"axis1", {2, 3, 4}, 1, {3, 4}},
      {"axis2", {2, 3, 4}, 2, {4}},
      // Scale and B broadcast over the first normalized dimension; their
      // gradients are summed over it.
      {"broadcast-scale", {2, 3, 4}, 1, {1, 4}},
  };
  unsigned seed = 400;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<int64_t> statShape(c.x.begin(), c.x.begin() + c.axis);
    statShape.resize(c.x.size(), 1);
    std::vector<double> x = randomValues(count(c.x), ++seed, -2.0, 2.0);
    std::vector<double> s = randomValues(count(c.scale), ++seed, 0.5, 1.5);
    std::vector<double> b = randomValues(count(c.scale), ++seed);
    std::vector<double> r = randomValues(count(c.x), ++seed);
    AttrMap a = attrs({{"axis", intv(c.axis)}, {"epsilon", floatv(1e-5)}});
    for (const Precision &p : kPrecisions) {
      Buf xb = fromDoubles(p.dtype, c.x, x),
          sb = fromDoubles(p.dtype, c.scale, s),
          bb = fromDoubles(p.dtype, c.scale, b),
          rb = fromDoubles(p.dtype, c.x, r);
      Buf y(p.dtype, c.x), mean(p.dtype, statShape), inv(p.dtype, statShape);
      ASSERT_KERNEL_OK(
          run("LayerNormalization", a, {&xb, &sb, &bb}, {&y, &mean, &inv}));
      Buf dx(p.dtype, c.x), ds(p.dtype, c.scale), db(p.dtype, c.scale);
      ASSERT_KERNEL_OK(run("LayerNormGrad", attrs({{"axis", intv(c.axis)}}),
                           {&rb, &xb, &sb, &mean, &inv}, {&dx, &ds, &db}));
      auto forward = [&](Buf &xv, Buf &sv, Buf &bv) {
        Buf out(p.dtype, c.x);
        return runOut("LayerNormalization", a, {&xv, &sv, &bv}, {&out});
      };
      Forward fx = [&](const std::vector<double> &v) {
        Buf in = fromDoubles(p.dtype, c.x, v);
        return forward(in, sb, bb);
      };
      expectGradient(fx, x, r, toDoubles(dx), p, "dX");
      Forward fs = [&](const std::vector<double> &v) {
        Buf in = fromDoubles(p.dtype, c.scale, v);
        return forward(xb, in, bb);
      };
      expectGradient(fs, s, r, toDoubles(ds), p, "dScale");
      Forward fb = [&](const std::vector<double> &v) {
        Buf in = fromDoubles(p.dtype, c.scale, v);
        return forward(xb, sb, in);
      };
      expectGradient(fb, b, r, toDoubles(db), p, "dB");
    }
  }
}

TEST(NormGradKernel, LayerNormAcceptsF64StatisticsAndAbsentOutputs) {
  // f32 data with f64 statistics; only dX requested.
  std::vector<int64_t> shape = {3, 4};
  Buf x = randomF32(shape, 1), s = randomF32({4}, 2, 0.5f, 1.5f),
      dy = randomF32(shape, 3);
  Buf y(DType::F32, shape), mean(DType::F64, {3, 1}), inv(DType::F64, {3, 1});
  AttrMap a = attrs({{"axis", intv(1)}});
  ASSERT_KERNEL_OK(run("LayerNormalization", a, {&x, &s}, {&y, &mean, &inv}));
  Buf dx(DType::F32, shape), dxRef(DType::F32, shape);
  Buf ds(DType::F32, {4}), db(DType::F32, {4});
  ASSERT_KERNEL_OK(run("LayerNormGrad", a, {&dy, &x, &s, &mean, &inv},
                       {&dx, nullptr, nullptr}));
  ASSERT_KERNEL_OK(
      run("LayerNormGrad", a, {&dy, &x, &s, &mean, &inv}, {&dxRef, &ds, &db}));
  expectClose(dx.values<float>(), dxRef.values<float>(), 0, 0);

  Buf badMean(DType::F32, {2, 1});
  EXPECT_KERNEL_ERROR(
      run("LayerNormGrad", a, {&dy, &x, &s, &badMean, &inv}, {&dx, &ds, &db}),
      "Mean");
}

TEST(NormGradKernel, BatchNormMatchesFiniteDifferences) {
  struct Case {
    std::string name;
    std::vector<int64_t> x;
    int64_t training;
  };
  const Case cases[] = {
      {"training-4d", {3, 2, 2, 2}, 1},
      {"training-2d", {5, 3}, 1},
      {"inference-3d", {2, 3, 4}, 0},
  };
  unsigned seed = 500;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<int64_t> ch = {c.x[1]};
    std::vector<double> x = randomValues(count(c.x), ++seed, -2.0, 2.0);
    std::vector<double> s = randomValues(count(ch), ++seed, 0.5, 1.5);
    std::vector<double> b = randomValues(count(ch), ++seed);
    std::vector<double> m = randomValues(count(ch), ++seed);
    std::vector<double> v = randomValues(count(ch), ++seed, 0.5, 2.0);
    std::vector<double> r = randomValues(count(c.x), ++seed);
    AttrMap fwd = attrs({{"epsilon", floatv(1e-5)},
                         {"momentum", floatv(0.9)},
                         {"training_mode", intv(c.training)}});
    AttrMap bwd =
        attrs({{"epsilon", floatv(1e-5)}, {"training_mode", intv(c.training)}});
    for (const Precision &p : kPrecisions) {
      Buf xb = fromDoubles(p.dtype, c.x, x), sb = fromDoubles(p.dtype, ch, s),
          bb = fromDoubles(p.dtype, ch, b), mb = fromDoubles(p.dtype, ch, m),
          vb = fromDoubles(p.dtype, ch, v), rb = fromDoubles(p.dtype, c.x, r);
      Buf dx(p.dtype, c.x), ds(p.dtype, ch), db(p.dtype, ch);
      ASSERT_KERNEL_OK(run("BatchNormGrad", bwd, {&rb, &xb, &sb, &mb, &vb},
                           {&dx, &ds, &db}));
      auto forward = [&](Buf &xv, Buf &sv, Buf &bv) {
        Buf out(p.dtype, c.x);
        return runOut("BatchNormalization", fwd, {&xv, &sv, &bv, &mb, &vb},
                      {&out});
      };
      Forward fx = [&](const std::vector<double> &val) {
        Buf in = fromDoubles(p.dtype, c.x, val);
        return forward(in, sb, bb);
      };
      expectGradient(fx, x, r, toDoubles(dx), p, "dX");
      Forward fs = [&](const std::vector<double> &val) {
        Buf in = fromDoubles(p.dtype, ch, val);
        return forward(xb, in, bb);
      };
      expectGradient(fs, s, r, toDoubles(ds), p, "dScale");
      Forward fb = [&](const std::vector<double> &val) {
        Buf in = fromDoubles(p.dtype, ch, val);
        return forward(xb, sb, in);
      };
      expectGradient(fb, b, r, toDoubles(db), p, "dB");
    }
  }
}

TEST(NormGradKernel, BatchNormRejectsBadChannelShapes) {
  Buf dy = randomF32({2, 3}, 1), x = randomF32({2, 3}, 2);
  Buf s = randomF32({3}, 3), m = randomF32({3}, 4), v = randomF32({2}, 5);
  Buf dx(DType::F32, {2, 3}), ds(DType::F32, {3}), db(DType::F32, {3});
  EXPECT_KERNEL_ERROR(run("BatchNormGrad", attrs({{"training_mode", intv(1)}}),
                          {&dy, &x, &s, &m, &v}, {&dx, &ds, &db}),
                      "'var' has shape [2]");
}

/// Rows [first, first + rows) of an (N, ...) tensor.
static Buf rowsOf(const Buf &t, int64_t first, int64_t rows) {
  std::vector<int64_t> shape = t.shape;
  shape[0] = rows;
  Buf out(t.dtype, shape);
  size_t row = t.bytes.size() / static_cast<size_t>(t.shape[0]);
  std::memcpy(out.bytes.data(), t.bytes.data() + first * row, rows * row);
  return out;
}

// shardc-sync-batchnorm's kernels: N ranks, each with a slice of the global
// batch, sum their BatchNormStats (the all-reduce) and normalize with the
// result; their outputs, running statistics and input gradients equal one
// BatchNorm over the whole batch, and their scale/bias gradients sum to its
// (the ranks' gradients are then averaged with the loss's 1/N).
TEST(SyncBatchNormKernel, RanksTogetherEqualTheGlobalBatch) {
  for (int64_t ranks : {2, 3}) {
    for (DType dtype : {DType::F64, DType::F32}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, " +
                   (dtype == DType::F64 ? "f64" : "f32"));
      const int64_t local = 2, channels = 3, spatial = 4;
      std::vector<int64_t> shape = {ranks * local, channels, spatial};
      std::vector<int64_t> ch = {channels};
      unsigned seed = 700 + static_cast<unsigned>(ranks);
      Buf x = fromDoubles(dtype, shape,
                          randomValues(count(shape), ++seed, -2.0, 3.0));
      Buf dy = fromDoubles(dtype, shape, randomValues(count(shape), ++seed));
      Buf sc = fromDoubles(dtype, ch, randomValues(3, ++seed, 0.5, 1.5));
      Buf bi = fromDoubles(dtype, ch, randomValues(3, ++seed));
      Buf mean = fromDoubles(dtype, ch, randomValues(3, ++seed));
      Buf var = fromDoubles(dtype, ch, randomValues(3, ++seed, 0.5, 2.0));
      AttrMap fwd = attrs({{"epsilon", floatv(1e-5)},
                           {"momentum", floatv(0.9)},
                           {"training_mode", intv(1)},
                           {"unbiased_var", intv(1)}});
      AttrMap bwd =
          attrs({{"epsilon", floatv(1e-5)}, {"training_mode", intv(1)}});
      Buf y(dtype, shape), rm(dtype, ch), rv(dtype, ch);
      ASSERT_KERNEL_OK(run("BatchNormalization", fwd,
                           {&x, &sc, &bi, &mean, &var}, {&y, &rm, &rv}));
      Buf dx(dtype, shape), ds(dtype, ch), db(dtype, ch);
      ASSERT_KERNEL_OK(run("BatchNormGrad", bwd, {&dy, &x, &sc, &mean, &var},
                           {&dx, &ds, &db}));

      int64_t global = ranks * local * spatial;
      AttrMap countAttr = attrs({{"count", intv(global)}});
      std::vector<Buf> xs, dys;
      std::vector<double> moments(2 * channels, 0.0);
      for (int64_t r = 0; r < ranks; ++r) {
        xs.push_back(rowsOf(x, r * local, local));
        dys.push_back(rowsOf(dy, r * local, local));
        Buf part(DType::F64, {2 * channels});
        ASSERT_KERNEL_OK(
            run("BatchNormStats", countAttr, {&xs.back()}, {&part}));
        for (int64_t i = 0; i < 2 * channels; ++i)
          moments[i] += part.values<double>()[i];
      }
      Buf mb = f64({2 * channels}, moments);
      std::vector<double> gradMoments(2 * channels, 0.0);
      for (int64_t r = 0; r < ranks; ++r) {
        Buf part(DType::F64, {2 * channels});
        ASSERT_KERNEL_OK(run("BatchNormGradStats", countAttr,
                             {&dys[r], &xs[r], &mb}, {&part}));
        for (int64_t i = 0; i < 2 * channels; ++i)
          gradMoments[i] += part.values<double>()[i];
      }
      Buf gb = f64({2 * channels}, gradMoments);

      double tol = dtype == DType::F64 ? 1e-12 : 2e-6;
      AttrMap syncFwd = fwd;
      syncFwd.set("batch_count", intv(global));
      std::vector<double> dsSum(channels, 0.0), dbSum(channels, 0.0);
      for (int64_t r = 0; r < ranks; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        Buf yr(dtype, xs[r].shape), rmr(dtype, ch), rvr(dtype, ch);
        ASSERT_KERNEL_OK(run("BatchNormalization", syncFwd,
                             {&xs[r], &sc, &bi, &mean, &var, &mb},
                             {&yr, &rmr, &rvr}));
        expectClose(toDoubles(yr), toDoubles(rowsOf(y, r * local, local)), tol,
                    tol);
        expectClose(toDoubles(rmr), toDoubles(rm), tol, tol);
        expectClose(toDoubles(rvr), toDoubles(rv), tol, tol);
        Buf dxr(dtype, xs[r].shape), dsr(dtype, ch), dbr(dtype, ch);
        ASSERT_KERNEL_OK(run("BatchNormGrad", bwd,
                             {&dys[r], &xs[r], &sc, &mean, &var, &mb, &gb},
                             {&dxr, &dsr, &dbr}));
        expectClose(toDoubles(dxr), toDoubles(rowsOf(dx, r * local, local)),
                    tol, tol);
        for (int64_t c = 0; c < channels; ++c) {
          dsSum[c] += toDoubles(dsr)[c];
          dbSum[c] += toDoubles(dbr)[c];
        }
      }
      expectClose(dsSum, toDoubles(ds), tol, tol);
      expectClose(dbSum, toDoubles(db), tol, tol);
    }
  }
}

TEST(SyncBatchNormKernel, RejectsBadMoments) {
  Buf x = randomF32({2, 3}, 1), dy = randomF32({2, 3}, 2);
  Buf c = randomF32({3}, 3);
  Buf y(DType::F32, {2, 3}), out(DType::F64, {6});
  Buf short64(DType::F64, {3}), moments32(DType::F32, {6});
  Buf ok = f64({6}, {0, 0, 0, 1, 1, 1});
  AttrMap train = attrs({{"epsilon", floatv(1e-5)},
                         {"momentum", floatv(0.9)},
                         {"training_mode", intv(1)},
                         {"batch_count", intv(4)}});
  EXPECT_KERNEL_ERROR(
      run("BatchNormalization", train, {&x, &c, &c, &c, &c, &short64}, {&y}),
      "'moments' has shape [3]");
  EXPECT_KERNEL_ERROR(
      run("BatchNormalization", train, {&x, &c, &c, &c, &c, &moments32}, {&y}),
      "moments");
  AttrMap badCount = train;
  badCount.set("batch_count", intv(3));
  EXPECT_KERNEL_ERROR(
      run("BatchNormalization", badCount, {&x, &c, &c, &c, &c, &ok}, {&y}),
      "batch_count 3 must be a positive multiple of the input's 2");
  AttrMap infer = train;
  infer.set("training_mode", intv(0));
  EXPECT_KERNEL_ERROR(
      run("BatchNormalization", infer, {&x, &c, &c, &c, &c, &ok}, {&y}),
      "needs training_mode");
  Buf dx(DType::F32, {2, 3});
  EXPECT_KERNEL_ERROR(
      run("BatchNormGrad", train, {&dy, &x, &c, &c, &c, &ok, nullptr}, {&dx}),
      "takes 'moments' and 'grad_moments' together");
  EXPECT_KERNEL_ERROR(
      run("BatchNormStats", attrs({{"count", intv(5)}}), {&x}, {&out}),
      "count 5 must be a positive multiple");
  Buf out3(DType::F64, {3});
  EXPECT_KERNEL_ERROR(
      run("BatchNormStats", attrs({{"count", intv(4)}}), {&x}, {&out3}),
      "'result' has shape [3]");
  EXPECT_KERNEL_ERROR(run("BatchNormGradStats", attrs({{"count", intv(4)}}),
                          {&dy, &x, nullptr}, {&out}),
                      "moments");
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST(LossGradKernel, MatchesFiniteDifferences) {
  struct Case {
    std::string name;
    std::vector<int64_t> x;
    std::vector<int64_t> labels;
    bool weights;
    bool ignore;
  };
  // With `ignore`, ignore_index is 2, a class that occurs among the labels.
  const Case cases[] = {
      {"plain", {4, 3}, {0, 2, 1, 2}, false, false},
      {"weights", {4, 3}, {0, 2, 1, 2}, true, false},
      {"ignore", {4, 3}, {0, 2, 1, 2}, true, true},
      {"spatial", {2, 3, 2, 2}, {0, 1, 2, 2, 1, 0, 2, 1}, true, true},
  };
  unsigned seed = 600;
  for (const char *op :
       {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
    for (const Case &c : cases) {
      for (const char *red : {"none", "sum", "mean"}) {
        SCOPED_TRACE(std::string(op) + " " + c.name + " " + red);
        std::vector<int64_t> tShape = {c.x[0]};
        tShape.insert(tShape.end(), c.x.begin() + 2, c.x.end());
        std::vector<int64_t> lossShape =
            std::string(red) == "none" ? tShape : std::vector<int64_t>{};
        std::vector<double> x = randomValues(count(c.x), ++seed, -2.0, 2.0);
        std::vector<double> w = randomValues(c.x[1], ++seed, 0.5, 2.0);
        std::vector<double> r = randomValues(count(lossShape), ++seed);
        AttrMap a = attrs({{"reduction", str(red)}});
        if (c.ignore)
          a.set("ignore_index", intv(2));
        for (const Precision &p : kPrecisions) {
          Buf xb = fromDoubles(p.dtype, c.x, x),
              wb = fromDoubles(p.dtype, {c.x[1]}, w),
              rb = fromDoubles(p.dtype, lossShape, r);
          Buf lb = i64(tShape, c.labels);
          Buf *wp = c.weights ? &wb : nullptr;
          Buf dx(p.dtype, c.x);
          ASSERT_KERNEL_OK(
              run(std::string(op) + "Grad", a, {&rb, &xb, &lb, wp}, {&dx}));
          Forward f = [&](const std::vector<double> &v) {
            Buf in = fromDoubles(p.dtype, c.x, v);
            Buf loss(p.dtype, lossShape);
            return runOut(op, a, {&in, &lb, wp}, {&loss});
          };
          expectGradient(f, x, r, toDoubles(dx), p, "dX");
        }
      }
    }
  }
}

// SoftmaxCrossEntropyLossWithGrad gives SoftmaxCrossEntropyLoss's loss and
// SoftmaxCrossEntropyLossGrad's gradient for dLoss = 1, bit for bit: on a
// float line (the vectorized pass over long class lines, and short ones),
// with spatial positions (the per-position functions), in f64, with
// weights and ignored targets.
TEST(LossGradKernel, WithGradEqualsLossThenGradient) {
  struct Case {
    std::string name;
    std::vector<int64_t> x;
    std::vector<int64_t> labels;
    bool weights;
    bool ignore;
  };
  const Case cases[] = {
      {"plain", {4, 3}, {0, 2, 1, 2}, false, false},
      {"weights", {4, 3}, {0, 2, 1, 2}, true, false},
      {"ignore", {4, 3}, {0, 2, 1, 2}, true, true},
      {"long lines", {3, 1000}, {999, 2, 517}, false, true},
      {"spatial", {2, 3, 2, 2}, {0, 1, 2, 2, 1, 0, 2, 1}, true, true},
  };
  unsigned seed = 650;
  for (const Case &c : cases)
    for (const char *red : {"sum", "mean"})
      for (DType dtype : {DType::F32, DType::F64}) {
        SCOPED_TRACE(c.name + " " + red + " " + dtypeName(dtype).str());
        std::vector<int64_t> tShape = {c.x[0]};
        tShape.insert(tShape.end(), c.x.begin() + 2, c.x.end());
        Buf xb = fromDoubles(dtype, c.x,
                             randomValues(count(c.x), ++seed, -4.0, 4.0));
        Buf wb = fromDoubles(dtype, {c.x[1]},
                             randomValues(c.x[1], ++seed, 0.5, 2.0));
        Buf lb = i64(tShape, c.labels);
        Buf *wp = c.weights ? &wb : nullptr;
        AttrMap a = attrs({{"reduction", str(red)}});
        if (c.ignore)
          a.set("ignore_index", intv(2));
        Buf one = fromDoubles(dtype, {}, {1.0});
        Buf loss(dtype, {}), dx(dtype, c.x), fusedLoss(dtype, {}),
            fusedDx(dtype, c.x);
        ASSERT_KERNEL_OK(
            run("SoftmaxCrossEntropyLoss", a, {&xb, &lb, wp}, {&loss}));
        ASSERT_KERNEL_OK(
            run("SoftmaxCrossEntropyLossGrad", a, {&one, &xb, &lb, wp}, {&dx}));
        ASSERT_KERNEL_OK(run("SoftmaxCrossEntropyLossWithGrad", a,
                             {&xb, &lb, wp}, {&fusedLoss, &fusedDx}));
        EXPECT_EQ(fusedLoss.bytes, loss.bytes);
        EXPECT_EQ(fusedDx.bytes, dx.bytes);
      }
}

TEST(LossGradKernel, WithGradRejectsUnreducedLossAndBadTargets) {
  Buf x = randomF32({2, 4}, 1);
  Buf loss(DType::F32, {}), dx(DType::F32, {2, 4});
  Buf labels = i64({2}, {1, 3});
  Buf lossNone(DType::F32, {2});
  EXPECT_KERNEL_ERROR(run("SoftmaxCrossEntropyLossWithGrad",
                          attrs({{"reduction", str("none")}}), {&x, &labels},
                          {&lossNone, &dx}),
                      "sum or mean");
  Buf bad = i64({2}, {1, 4});
  EXPECT_KERNEL_ERROR(run("SoftmaxCrossEntropyLossWithGrad",
                          attrs({{"reduction", str("mean")}}), {&x, &bad},
                          {&loss, &dx}),
                      "target 4 at position 1 is outside [0, 4)");
  Buf small(DType::F32, {2, 3});
  EXPECT_KERNEL_ERROR(run("SoftmaxCrossEntropyLossWithGrad",
                          attrs({{"reduction", str("mean")}}), {&x, &labels},
                          {&loss, &small}),
                      "scores_grad");
}

TEST(LossGradKernel, IgnoredTargetsGetZeroGradient) {
  // Every target ignored: the mean divides by zero in the forward pass, the
  // gradient is zero everywhere (as in PyTorch).
  Buf dl = f32({}, {1.0f});
  Buf x = randomF32({2, 3}, 1);
  Buf labels = i64({2}, {-100, -100});
  Buf dx(DType::F32, {2, 3});
  AttrMap a = attrs({{"reduction", str("mean")}, {"ignore_index", intv(-100)}});
  ASSERT_KERNEL_OK(
      run("SoftmaxCrossEntropyLossGrad", a, {&dl, &x, &labels}, {&dx}));
  expectClose(dx.values<float>(), std::vector<float>(6, 0.0f), 0, 0);
}

TEST(LossGradKernel, RejectsBadTargetsAndShapes) {
  Buf dl = f32({}, {1.0f});
  Buf x = randomF32({2, 4}, 1);
  Buf dx(DType::F32, {2, 4});
  Buf labels = i64({2}, {1, 4});
  AttrMap a = attrs({{"reduction", str("mean")}});
  EXPECT_KERNEL_ERROR(
      run("SoftmaxCrossEntropyLossGrad", a, {&dl, &x, &labels}, {&dx}),
      "outside [0, 4)");
  Buf neg = i32({2}, {-1, 0});
  EXPECT_KERNEL_ERROR(
      run("NegativeLogLikelihoodLossGrad", a, {&dl, &x, &neg}, {&dx}),
      "target -1");
  Buf ok = i64({2}, {1, 3});
  Buf dlNone = f32({3}, {1, 2, 3});
  EXPECT_KERNEL_ERROR(run("SoftmaxCrossEntropyLossGrad",
                          attrs({{"reduction", str("none")}}),
                          {&dlNone, &x, &ok}, {&dx}),
                      "dLoss");
  Buf fl = f32({2}, {1, 3});
  EXPECT_KERNEL_ERROR(
      run("SoftmaxCrossEntropyLossGrad", a, {&dl, &x, &fl}, {&dx}), "float32");
  EXPECT_KERNEL_ERROR(run("SoftmaxCrossEntropyLossGrad",
                          attrs({{"reduction", str("avg")}}), {&dl, &x, &ok},
                          {&dx}),
                      "unknown reduction");
}

//===----------------------------------------------------------------------===//
// Gather and Slice
//===----------------------------------------------------------------------===//

TEST(ShapeGradKernel, GatherAccumulatesRepeatedAndNegativeIndices) {
  struct Case {
    std::vector<int64_t> data;
    int64_t axis;
    std::vector<int64_t> idxShape;
    std::vector<int64_t> idx;
    bool i32;
  };
  const Case cases[] = {
      // -1 and 3 name the same row; 0 appears twice.
      {{3, 4, 2}, 1, {2, 3}, {0, -1, 3, 3, 1, 0}, false},
      {{4, 3}, 0, {5}, {2, -4, 0, 2, 2}, true},
      {{2, 3}, 1, {}, {-2}, false},
  };
  unsigned seed = 700;
  for (const Case &c : cases) {
    std::vector<int64_t> yShape(c.data.begin(), c.data.begin() + c.axis);
    yShape.insert(yShape.end(), c.idxShape.begin(), c.idxShape.end());
    yShape.insert(yShape.end(), c.data.begin() + c.axis + 1, c.data.end());
    std::vector<double> x = randomValues(count(c.data), ++seed);
    std::vector<double> r = randomValues(count(yShape), ++seed);
    AttrMap a = attrs({{"axis", intv(c.axis)}});
    Buf ib = c.i32 ? i32(c.idxShape,
                         std::vector<int32_t>(c.idx.begin(), c.idx.end()))
                   : i64(c.idxShape, c.idx);
    for (const Precision &p : kPrecisions) {
      Buf rb = fromDoubles(p.dtype, yShape, r);
      Buf dd(p.dtype, c.data);
      ASSERT_KERNEL_OK(run("GatherGrad", a, {&rb, &ib}, {&dd}));
      Forward f = [&](const std::vector<double> &v) {
        Buf in = fromDoubles(p.dtype, c.data, v);
        Buf out(p.dtype, yShape);
        return runOut("Gather", a, {&in, &ib}, {&out});
      };
      expectGradient(f, x, r, toDoubles(dd), p, "dData");
    }
  }
}

TEST(ShapeGradKernel, GatherRejectsOutOfRangeIndices) {
  Buf dy = randomF32({2, 2}, 1);
  Buf dd(DType::F32, {3, 2});
  Buf high = i64({2}, {0, 3});
  EXPECT_KERNEL_ERROR(
      run("GatherGrad", attrs({{"axis", intv(0)}}), {&dy, &high}, {&dd}),
      "index 3 out of range [-3, 3)");
  Buf low = i64({2}, {-4, 0});
  EXPECT_KERNEL_ERROR(
      run("GatherGrad", attrs({{"axis", intv(0)}}), {&dy, &low}, {&dd}),
      "index -4");
  Buf fidx = f32({2}, {0, 1});
  EXPECT_KERNEL_ERROR(
      run("GatherGrad", attrs({{"axis", intv(0)}}), {&dy, &fidx}, {&dd}),
      "float32");
  Buf ok = i64({2}, {0, 1});
  Buf dyI = i64({2, 2}, {1, 2, 3, 4});
  Buf ddI(DType::I64, {3, 2});
  EXPECT_KERNEL_ERROR(
      run("GatherGrad", attrs({{"axis", intv(0)}}), {&dyI, &ok}, {&ddI}),
      "int64");
}

TEST(ShapeGradKernel, GatherElementsAccumulatesRepeatedAndNegativeIndices) {
  struct Case {
    std::vector<int64_t> data;
    int64_t axis;
    std::vector<int64_t> idxShape;
    std::vector<int64_t> idx;
    bool i32;
  };
  const Case cases[] = {
      // Row 0 picks column 2 twice (as -2 and 2); two rows of three.
      {{3, 4}, 1, {2, 3}, {2, -2, 0, 3, 1, 1}, false},
      // Along axis 0 of a 3-d tensor, indices smaller on the other axes.
      {{3, 2, 4}, 0, {4, 1, 3}, {0, 2, 2, -1, 1, 0, 2, 2, 0, 1, 1, 1}, true},
  };
  unsigned seed = 720;
  for (const Case &c : cases) {
    std::vector<double> x = randomValues(count(c.data), ++seed);
    std::vector<double> r = randomValues(count(c.idxShape), ++seed);
    AttrMap a = attrs({{"axis", intv(c.axis)}});
    Buf ib = c.i32 ? i32(c.idxShape,
                         std::vector<int32_t>(c.idx.begin(), c.idx.end()))
                   : i64(c.idxShape, c.idx);
    for (const Precision &p : kPrecisions) {
      Buf rb = fromDoubles(p.dtype, c.idxShape, r);
      Buf dd(p.dtype, c.data);
      ASSERT_KERNEL_OK(run("GatherElementsGrad", a, {&rb, &ib}, {&dd}));
      Forward f = [&](const std::vector<double> &v) {
        Buf in = fromDoubles(p.dtype, c.data, v);
        Buf out(p.dtype, c.idxShape);
        return runOut("GatherElements", a, {&in, &ib}, {&out});
      };
      expectGradient(f, x, r, toDoubles(dd), p, "dData");
    }
  }
  Buf dy = randomF32({2, 1}, 1);
  Buf dd(DType::F32, {2, 3});
  Buf high = i64({2, 1}, {0, 3});
  EXPECT_KERNEL_ERROR(run("GatherElementsGrad", attrs({{"axis", intv(1)}}),
                          {&dy, &high}, {&dd}),
                      "index 3 out of range [-3, 3) on axis 1");
}

TEST(ShapeGradKernel, SliceMatchesFiniteDifferences) {
  std::vector<int64_t> xShape = {4, 5, 3};
  // Rows 3, 1; columns 0, 2, 4; the last axis reversed.
  std::vector<int64_t> starts = {3, 0, 2}, steps = {-2, 2, -1};
  std::vector<int64_t> yShape = {2, 3, 3};
  AttrMap a = attrs({{"starts", ints(starts)}, {"steps", ints(steps)}});
  std::vector<double> x = randomValues(count(xShape), 800);
  std::vector<double> r = randomValues(count(yShape), 801);
  for (const Precision &p : kPrecisions) {
    Buf rb = fromDoubles(p.dtype, yShape, r);
    Buf dx(p.dtype, xShape);
    ASSERT_KERNEL_OK(run("SliceGrad", a, {&rb}, {&dx}));
    Forward f = [&](const std::vector<double> &v) {
      Buf in = fromDoubles(p.dtype, xShape, v);
      Buf out(p.dtype, yShape);
      return runOut("Slice", a, {&in}, {&out});
    };
    expectGradient(f, x, r, toDoubles(dx), p, "dX");
  }
}

TEST(ShapeGradKernel, SlicePlacesAnyTypeAndChecksBounds) {
  Buf dy = i64({2}, {7, 9});
  Buf dx(DType::I64, {5});
  AttrMap a = attrs({{"starts", ints({4})}, {"steps", ints({-3})}});
  ASSERT_KERNEL_OK(run("SliceGrad", a, {&dy}, {&dx}));
  EXPECT_EQ(dx.values<int64_t>(), (std::vector<int64_t>{0, 9, 0, 0, 7}));
  Buf dyLong = i64({3}, {1, 2, 3});
  EXPECT_KERNEL_ERROR(run("SliceGrad", a, {&dyLong}, {&dx}), "leaves axis 0");
  EXPECT_KERNEL_ERROR(run("SliceGrad",
                          attrs({{"starts", ints({0})}, {"steps", ints({0})}}),
                          {&dy}, {&dx}),
                      "step on axis 0 is 0");
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

/// Gradients for three steps over a parameter of `n` elements.
std::vector<std::vector<double>> stepGrads(size_t n, unsigned seed) {
  std::vector<std::vector<double>> g;
  for (unsigned s = 0; s < 3; ++s)
    g.push_back(randomValues(n, seed + s, -2.0, 2.0));
  return g;
}

struct SgdConfig {
  double lr, momentum, dampening, weightDecay;
  bool nesterov;
};

/// torch.optim.SGD's _single_tensor_sgd, in double.
void referenceSgd(const SgdConfig &c, std::vector<double> &param,
                  std::vector<double> &buf, const std::vector<double> &grad,
                  bool first) {
  for (size_t i = 0; i < param.size(); ++i) {
    double d = grad[i];
    if (c.weightDecay != 0)
      d += c.weightDecay * param[i];
    if (c.momentum != 0) {
      buf[i] = first ? d : c.momentum * buf[i] + (1 - c.dampening) * d;
      d = c.nesterov ? d + c.momentum * buf[i] : buf[i];
    }
    param[i] -= c.lr * d;
  }
}

TEST(OptimizerKernel, SgdThreeStepsInPlace) {
  const SgdConfig configs[] = {
      {0.1, 0.0, 0.0, 0.0, false},   {0.1, 0.9, 0.0, 0.0, false},
      {0.05, 0.9, 0.1, 1e-2, false}, {0.1, 0.9, 0.0, 1e-2, true},
      {0.2, 0.5, 0.5, 0.0, false},
  };
  std::vector<int64_t> shape = {2, 3};
  size_t n = count(shape);
  for (const SgdConfig &c : configs) {
    SCOPED_TRACE("momentum=" + std::to_string(c.momentum) +
                 " dampening=" + std::to_string(c.dampening) +
                 " wd=" + std::to_string(c.weightDecay) +
                 " nesterov=" + std::to_string(c.nesterov));
    AttrMap a = attrs({{"lr", floatv(c.lr)},
                       {"momentum", floatv(c.momentum)},
                       {"dampening", floatv(c.dampening)},
                       {"weight_decay", floatv(c.weightDecay)},
                       {"nesterov", intv(c.nesterov)}});
    std::vector<double> wantP = randomValues(n, 900), wantB(n, 0.0);
    Buf param = fromDoubles(DType::F32, shape, wantP);
    Buf buf = f32(shape, std::vector<float>(n, 0.0f));
    Buf step = f32({}, {0.0f});
    auto grads = stepGrads(n, 910);
    for (size_t s = 0; s < grads.size(); ++s) {
      SCOPED_TRACE("step " + std::to_string(s + 1));
      // The optimizer pass's order: step = Increment(step), then update, all
      // in place.
      ASSERT_KERNEL_OK(run("Increment", attrs(), {&step}, {&step}));
      Buf grad = fromDoubles(DType::F32, shape, grads[s]);
      std::vector<float> gradBefore = grad.values<float>();
      ASSERT_KERNEL_OK(
          run("SGDUpdate", a, {&param, &grad, &buf, &step}, {&param, &buf}));
      referenceSgd(c, wantP, wantB, grads[s], s == 0);
      expectClose(param.values<float>(), wantP, 1e-5, 1e-6);
      if (c.momentum != 0)
        expectClose(buf.values<float>(), wantB, 1e-5, 1e-6);
      else // Untouched.
        expectClose(buf.values<float>(), std::vector<double>(n, 0.0), 0, 0);
      EXPECT_EQ(grad.values<float>(), gradBefore) << "grad was modified";
    }
    EXPECT_EQ(step.values<float>(), std::vector<float>{3.0f});
  }
}

TEST(OptimizerKernel, SgdWithoutAliasingMatchesInPlace) {
  std::vector<int64_t> shape = {5};
  AttrMap a = attrs({{"lr", floatv(0.1)},
                     {"momentum", floatv(0.9)},
                     {"dampening", floatv(0.25)},
                     {"weight_decay", floatv(0.01)},
                     {"nesterov", intv(0)}});
  Buf param = randomF32(shape, 1), grad = randomF32(shape, 2),
      buf = randomF32(shape, 3);
  Buf step = f32({}, {2.0f}); // Not the first step: the buffer is used.
  Buf newParam(DType::F32, shape), newBuf(DType::F32, shape);
  std::vector<float> p0 = param.values<float>(), b0 = buf.values<float>();
  ASSERT_KERNEL_OK(
      run("SGDUpdate", a, {&param, &grad, &buf, &step}, {&newParam, &newBuf}));
  EXPECT_EQ(param.values<float>(), p0);
  EXPECT_EQ(buf.values<float>(), b0);
  ASSERT_KERNEL_OK(
      run("SGDUpdate", a, {&param, &grad, &buf, &step}, {&param, &buf}));
  EXPECT_EQ(param.values<float>(), newParam.values<float>());
  EXPECT_EQ(buf.values<float>(), newBuf.values<float>());
}

struct AdamConfig {
  double lr, beta1, beta2, eps, weightDecay;
  bool decoupled;
};

/// torch.optim.Adam / AdamW's _single_tensor_adam(w), in double.
void referenceAdam(const AdamConfig &c, std::vector<double> &param,
                   std::vector<double> &m, std::vector<double> &v,
                   const std::vector<double> &gradIn, double step) {
  double bc1 = 1 - std::pow(c.beta1, step);
  double bc2 = 1 - std::pow(c.beta2, step);
  double stepSize = c.lr / bc1;
  double bc2Sqrt = std::sqrt(bc2);
  for (size_t i = 0; i < param.size(); ++i) {
    double g = gradIn[i];
    if (c.decoupled)
      param[i] *= 1 - c.lr * c.weightDecay;
    else if (c.weightDecay != 0)
      g += c.weightDecay * param[i];
    m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
    v[i] = c.beta2 * v[i] + (1 - c.beta2) * g * g;
    double denom = std::sqrt(v[i]) / bc2Sqrt + c.eps;
    param[i] -= stepSize * m[i] / denom;
  }
}

TEST(OptimizerKernel, AdamAndAdamWThreeStepsInPlace) {
  const AdamConfig configs[] = {
      {1e-2, 0.9, 0.999, 1e-8, 0.0, false},
      {1e-2, 0.9, 0.999, 1e-8, 0.1, false},
      {1e-2, 0.8, 0.99, 1e-6, 0.1, true},
      {3e-2, 0.9, 0.999, 1e-8, 0.0, true},
  };
  std::vector<int64_t> shape = {3, 2};
  size_t n = count(shape);
  for (const AdamConfig &c : configs) {
    SCOPED_TRACE("wd=" + std::to_string(c.weightDecay) +
                 " decoupled=" + std::to_string(c.decoupled));
    AttrMap a = attrs({{"lr", floatv(c.lr)},
                       {"beta1", floatv(c.beta1)},
                       {"beta2", floatv(c.beta2)},
                       {"eps", floatv(c.eps)},
                       {"weight_decay", floatv(c.weightDecay)},
                       {"decoupled", intv(c.decoupled)}});
    std::vector<double> wantP = randomValues(n, 950), wantM(n, 0.0),
                        wantV(n, 0.0);
    Buf param = fromDoubles(DType::F32, shape, wantP);
    Buf m = f32(shape, std::vector<float>(n, 0.0f));
    Buf v = f32(shape, std::vector<float>(n, 0.0f));
    Buf step = f32({}, {0.0f});
    auto grads = stepGrads(n, 960);
    for (size_t s = 0; s < grads.size(); ++s) {
      SCOPED_TRACE("step " + std::to_string(s + 1));
      ASSERT_KERNEL_OK(run("Increment", attrs(), {&step}, {&step}));
      Buf grad = fromDoubles(DType::F32, shape, grads[s]);
      std::vector<float> gradBefore = grad.values<float>();
      ASSERT_KERNEL_OK(run("AdamUpdate", a, {&param, &grad, &m, &v, &step},
                           {&param, &m, &v}));
      referenceAdam(c, wantP, wantM, wantV, grads[s],
                    static_cast<double>(s + 1));
      expectClose(param.values<float>(), wantP, 1e-5, 1e-6);
      expectClose(m.values<float>(), wantM, 1e-5, 1e-7);
      expectClose(v.values<float>(), wantV, 1e-5, 1e-9);
      EXPECT_EQ(grad.values<float>(), gradBefore) << "grad was modified";
    }
  }
}

TEST(OptimizerKernel, AdamWithoutAliasingMatchesInPlace) {
  std::vector<int64_t> shape = {4};
  AttrMap a = attrs({{"lr", floatv(1e-3)},
                     {"beta1", floatv(0.9)},
                     {"beta2", floatv(0.999)},
                     {"eps", floatv(1e-8)},
                     {"weight_decay", floatv(0.01)},
                     {"decoupled", intv(1)}});
  Buf param = randomF32(shape, 1), grad = randomF32(shape, 2),
      m = randomF32(shape, 3), v = randomF32(shape, 4, 0.0f, 1.0f);
  Buf step = f32({}, {5.0f});
  Buf p2(DType::F32, shape), m2(DType::F32, shape), v2(DType::F32, shape);
  ASSERT_KERNEL_OK(
      run("AdamUpdate", a, {&param, &grad, &m, &v, &step}, {&p2, &m2, &v2}));
  ASSERT_KERNEL_OK(
      run("AdamUpdate", a, {&param, &grad, &m, &v, &step}, {&param, &m, &v}));
  EXPECT_EQ(param.values<float>(), p2.values<float>());
  EXPECT_EQ(m.values<float>(), m2.values<float>());
  EXPECT_EQ(v.values<float>(), v2.values<float>());
}

/// The schedule's factor, written out for each case independently of
/// ops::LrSchedule (W = 4, T = 10, R = 0.1).
TEST(LrSchedule, FactorsOfEachSchedule) {
  ops::LrSchedule s;
  s.warmup = 4;
  s.decay = 10;
  s.minRatio = 0.1;
  const double pi = std::acos(-1.0);
  for (int64_t step = 0; step < 14; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    double warm = (step + 1) / 4.0;
    s.kind = ops::LrSchedule::Constant;
    EXPECT_EQ(s.factor(step), step < 4 ? warm : 1.0);
    s.kind = ops::LrSchedule::Linear;
    double linear = step < 4     ? warm
                    : step >= 10 ? 0.1
                                 : std::max(0.1, (10.0 - step) / 6.0);
    EXPECT_DOUBLE_EQ(s.factor(step), linear);
    s.kind = ops::LrSchedule::Cosine;
    double cosine = step < 4 ? warm
                    : step >= 10
                        ? 0.1
                        : 0.1 + 0.9 * (1 + std::cos(pi * (step - 4) / 6.0)) / 2;
    EXPECT_DOUBLE_EQ(s.factor(step), cosine);
  }
  // The end points: the peak right after warmup, R from T on, and a linear
  // decay clamped at R before T.
  s.kind = ops::LrSchedule::Cosine;
  EXPECT_EQ(s.factor(4), 1.0);
  s.kind = ops::LrSchedule::Linear;
  s.minRatio = 0.5;
  EXPECT_EQ(s.factor(9), 0.5);
  // No warmup and a constant schedule: lr itself, the counter ignored.
  ops::LrSchedule flat;
  EXPECT_EQ(flat.lrAt(0.05, 1), 0.05);
  EXPECT_EQ(flat.lrAt(0.05, 1000), 0.05);
  // The counter is 1 at the first step, which is step 0.
  s.kind = ops::LrSchedule::Cosine;
  s.minRatio = 0.1;
  EXPECT_EQ(s.lrAt(2.0, 1), 2.0 * s.factor(0));
}

/// SGD with a linear schedule: each step moves by lr * factor(s).
TEST(OptimizerKernel, SgdFollowsItsLrSchedule) {
  std::vector<int64_t> shape = {4};
  AttrMap a = attrs({{"lr", floatv(0.5)},
                     {"momentum", floatv(0.0)},
                     {"dampening", floatv(0.0)},
                     {"weight_decay", floatv(0.0)},
                     {"nesterov", intv(0)},
                     {"lr_schedule", str("linear")},
                     {"warmup_steps", intv(2)},
                     {"decay_steps", intv(4)},
                     {"min_lr_ratio", floatv(0.25)}});
  // Factors of steps 0..4: 1/2, 1, 1, 1/2, 1/4 (then R).
  const double factors[] = {0.5, 1.0, 1.0, 0.5, 0.25};
  Buf param = f64(shape, {1, 2, 3, 4}), grad = f64(shape, {1, -1, 2, 0.5});
  Buf buf = f64(shape, {0, 0, 0, 0});
  Buf step = f32({}, {0.0f});
  std::vector<double> want = {1, 2, 3, 4};
  for (double f : factors) {
    ASSERT_KERNEL_OK(run("Increment", attrs(), {&step}, {&step}));
    ASSERT_KERNEL_OK(
        run("SGDUpdate", a, {&param, &grad, &buf, &step}, {&param, &buf}));
    std::vector<double> g = grad.values<double>();
    for (size_t i = 0; i < want.size(); ++i)
      want[i] -= 0.5 * f * g[i];
    EXPECT_EQ(param.values<double>(), want);
  }
}

TEST(OptimizerKernel, RejectsBadLrSchedules) {
  std::vector<int64_t> shape = {2};
  Buf param = f32(shape, {1, 2}), grad = f32(shape, {1, 1}),
      m = f32(shape, {0, 0}), v = f32(shape, {0, 0}), step = f32({}, {1});
  auto adam = [&](std::vector<std::pair<std::string, AttrValue>> extra) {
    AttrMap a = attrs({{"lr", floatv(1e-3)},
                       {"beta1", floatv(0.9)},
                       {"beta2", floatv(0.999)},
                       {"eps", floatv(1e-8)},
                       {"weight_decay", floatv(0.0)},
                       {"decoupled", intv(0)}});
    for (auto &[name, value] : extra)
      a.set(name, value);
    return run("AdamUpdate", a, {&param, &grad, &m, &v, &step},
               {&param, &m, &v});
  };
  EXPECT_KERNEL_ERROR(adam({{"lr_schedule", str("step")}}),
                      "unknown lr_schedule 'step' (constant, linear or "
                      "cosine)");
  EXPECT_KERNEL_ERROR(adam({{"lr_schedule", str("cosine")},
                            {"warmup_steps", intv(5)},
                            {"decay_steps", intv(5)}}),
                      "a cosine lr_schedule needs decay_steps greater than "
                      "warmup_steps (5), got 5");
  EXPECT_KERNEL_ERROR(adam({{"warmup_steps", intv(-1)}}),
                      "warmup_steps must be >= 0, got -1");
  EXPECT_KERNEL_ERROR(adam({{"lr_schedule", str("linear")},
                            {"decay_steps", intv(5)},
                            {"min_lr_ratio", floatv(2.0)}}),
                      "min_lr_ratio must be in [0, 1], got 2");
}

TEST(OptimizerKernel, IncrementInPlaceAndOtherTypes) {
  Buf s = f32({}, {41.0f});
  ASSERT_KERNEL_OK(run("Increment", attrs(), {&s}, {&s}));
  EXPECT_EQ(s.values<float>(), std::vector<float>{42.0f});
  Buf d = f64({2}, {1.5, -1.0}), d2(DType::F64, {2});
  ASSERT_KERNEL_OK(run("Increment", attrs(), {&d}, {&d2}));
  EXPECT_EQ(d2.values<double>(), (std::vector<double>{2.5, 0.0}));
  Buf b = boolean({1}, {1});
  EXPECT_KERNEL_ERROR(run("Increment", attrs(), {&b}, {&b}), "bool");
}

//===----------------------------------------------------------------------===//
// Gradient clipping
//===----------------------------------------------------------------------===//

TEST(ClipKernel, PartialNormSumsSquaresOrTakesTheLargestMagnitude) {
  AttrMap l2 = attrs({{"norm_type", str("l2")}});
  AttrMap inf = attrs({{"norm_type", str("inf")}});
  Buf g = f32({2, 2}, {3, -4, 1, -2}), h = f64({2}, {0.5, -1.5});
  Buf out = f64({}, {0}), init = f64({}, {6});
  ASSERT_KERNEL_OK(run("PartialNorm", l2, {&g}, {&out}));
  EXPECT_EQ(out.values<double>()[0], 30.0);
  ASSERT_KERNEL_OK(run("PartialNorm", l2, {&h, &init}, {&out}));
  EXPECT_EQ(out.values<double>()[0], 8.5);
  ASSERT_KERNEL_OK(run("PartialNorm", inf, {&g}, {&out}));
  EXPECT_EQ(out.values<double>()[0], 4.0);
  ASSERT_KERNEL_OK(run("PartialNorm", inf, {&g, &init}, {&out}));
  EXPECT_EQ(out.values<double>()[0], 6.0);
  ASSERT_KERNEL_OK(run("PartialNorm", inf, {&h}, {&out}));
  EXPECT_EQ(out.values<double>()[0], 1.5);
  // Nothing to add: the running value passes through.
  Buf empty = f32({0}, {});
  ASSERT_KERNEL_OK(run("PartialNorm", inf, {&empty, &init}, {&out}));
  EXPECT_EQ(out.values<double>()[0], 6.0);
  // A NaN anywhere, in the tensor or the running value, gives NaN, wherever
  // it sits among larger values.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buf withNan = f32({3}, {1, nan, 100}), nanInit = f64({}, {nan});
  for (const AttrMap *a : {&l2, &inf}) {
    ASSERT_KERNEL_OK(run("PartialNorm", *a, {&withNan}, {&out}));
    EXPECT_TRUE(std::isnan(out.values<double>()[0]));
    ASSERT_KERNEL_OK(run("PartialNorm", *a, {&g, &nanInit}, {&out}));
    EXPECT_TRUE(std::isnan(out.values<double>()[0]));
  }
  Buf i = i64({1}, {1});
  EXPECT_KERNEL_ERROR(run("PartialNorm", l2, {&i}, {&out}), "int64");
  Buf f32Init = f32({}, {1});
  EXPECT_KERNEL_ERROR(run("PartialNorm", l2, {&g, &f32Init}, {&out}), "init");
  EXPECT_KERNEL_ERROR(
      run("PartialNorm", attrs({{"norm_type", str("l1")}}), {&g}, {&out}),
      "norm_type must be l2 or inf, got 'l1'");
}

TEST(ClipKernel, ClipCoefficientIsTorchsClampedCoefficient) {
  auto clip = [](double total, const char *type, double maxNorm) {
    Buf t = f64({}, {total}), norm = f32({}, {0}), coef = f32({}, {0});
    EXPECT_KERNEL_OK(
        run("ClipCoefficient",
            attrs({{"norm_type", str(type)}, {"max_norm", floatv(maxNorm)}}),
            {&t}, {&norm, &coef}));
    return std::make_pair(norm.values<float>()[0], coef.values<float>()[0]);
  };
  // torch: clip_coef = max_norm / (total_norm + 1e-6), a Python float over
  // a float32 tensor (its reciprocal times max_norm), clamped at 1.
  auto [n1, c1] = clip(25.0f, "l2", 0.5);
  EXPECT_EQ(n1, 5.0f);
  EXPECT_EQ(c1, (1.0f / (5.0f + 1e-6f)) * 0.5f);
  auto [n2, c2] = clip(0.25f, "l2", 1.0);
  EXPECT_EQ(n2, 0.5f);
  EXPECT_EQ(c2, 1.0f);
  auto [n3, c3] = clip(4.0f, "inf", 2.0);
  EXPECT_EQ(n3, 4.0f);
  EXPECT_EQ(c3, (1.0f / (4.0f + 1e-6f)) * 2.0f);
  // A non-finite norm: NaN stays NaN; an infinite one clips to zero.
  auto [n4, c4] = clip(std::numeric_limits<double>::quiet_NaN(), "l2", 1.0);
  EXPECT_TRUE(std::isnan(n4) && std::isnan(c4));
  // A sum of squares past FLT_MAX still gives its finite norm.
  auto [n6, c6] = clip(1e40, "l2", 1.0);
  EXPECT_EQ(n6, 1e20f);
  EXPECT_GT(c6, 0.0f);
  auto [n5, c5] = clip(std::numeric_limits<double>::infinity(), "inf", 1.0);
  EXPECT_TRUE(std::isinf(n5));
  EXPECT_EQ(c5, 0.0f);

  Buf t = f64({}, {1}), norm = f32({}, {0}), coef = f32({}, {0});
  EXPECT_KERNEL_ERROR(
      run("ClipCoefficient",
          attrs({{"norm_type", str("l2")}, {"max_norm", floatv(0.0)}}), {&t},
          {&norm, &coef}),
      "max_norm must be finite and positive, got 0");
  Buf t1 = f64({2}, {1, 2});
  EXPECT_KERNEL_ERROR(
      run("ClipCoefficient",
          attrs({{"norm_type", str("l2")}, {"max_norm", floatv(1.0)}}), {&t1},
          {&norm, &coef}),
      "'total' has shape [2]");
}

TEST(OptimizerKernel, GradScaleMultipliesTheGradientFirst) {
  // An update with grad_scale c equals, bit for bit, the update of the
  // gradient scaled beforehand in its own type (clip_grad_norm_'s mul_).
  std::vector<int64_t> shape = {5};
  std::vector<double> p0 = randomValues(5, 1), g0 = randomValues(5, 2);
  const float c = 0.3712f;
  AttrMap sgd = attrs({{"lr", floatv(0.1)},
                       {"momentum", floatv(0.9)},
                       {"dampening", floatv(0.0)},
                       {"weight_decay", floatv(1e-2)},
                       {"nesterov", intv(1)}});
  AttrMap adam = attrs({{"lr", floatv(1e-2)},
                        {"beta1", floatv(0.9)},
                        {"beta2", floatv(0.999)},
                        {"eps", floatv(1e-8)},
                        {"weight_decay", floatv(1e-2)},
                        {"decoupled", intv(1)}});
  for (DType dt : {DType::F32, DType::F64}) {
    std::vector<double> scaled(g0);
    for (double &g : scaled)
      g = dt == DType::F32 ? double(float(g) * c) : g * double(c);
    Buf scale = f32({}, {c}), step = f32({}, {2});
    Buf pa = fromDoubles(dt, shape, p0), pb = fromDoubles(dt, shape, p0);
    Buf ga = fromDoubles(dt, shape, g0), gb = fromDoubles(dt, shape, scaled);
    Buf ba = fromDoubles(dt, shape, g0), bb = fromDoubles(dt, shape, g0);
    ASSERT_KERNEL_OK(
        run("SGDUpdate", sgd, {&pa, &ga, &ba, &step, &scale}, {&pa, &ba}));
    ASSERT_KERNEL_OK(run("SGDUpdate", sgd, {&pb, &gb, &bb, &step}, {&pb, &bb}));
    EXPECT_EQ(toDoubles(pa), toDoubles(pb));
    EXPECT_EQ(toDoubles(ba), toDoubles(bb));
    Buf ma = fromDoubles(dt, shape, g0), mb = fromDoubles(dt, shape, g0);
    std::vector<double> sq(p0);
    for (double &v : sq)
      v = v * v;
    Buf va = fromDoubles(dt, shape, sq), vb = fromDoubles(dt, shape, sq);
    ASSERT_KERNEL_OK(run("AdamUpdate", adam,
                         {&pa, &ga, &ma, &va, &step, &scale}, {&pa, &ma, &va}));
    ASSERT_KERNEL_OK(
        run("AdamUpdate", adam, {&pb, &gb, &mb, &vb, &step}, {&pb, &mb, &vb}));
    EXPECT_EQ(toDoubles(pa), toDoubles(pb));
    EXPECT_EQ(toDoubles(ma), toDoubles(mb));
    EXPECT_EQ(toDoubles(va), toDoubles(vb));
  }
  Buf p = f32({2}, {1, 2}), g = f32({2}, {1, 1}), b = f32({2}, {0, 0});
  Buf step = f32({}, {1}), wide = f64({}, {0.5});
  EXPECT_KERNEL_ERROR(
      run("SGDUpdate", sgd, {&p, &g, &b, &step, &wide}, {&p, &b}),
      "grad_scale");
}

//===----------------------------------------------------------------------===//
// Loss scaling
//===----------------------------------------------------------------------===//

namespace {
struct LossScaleResult {
  bool skip;
  float unscale, used, scale, tracker;
};
LossScaleResult lossScale(double total, float scale, float tracker,
                          double growth = 2.0, double backoff = 0.5,
                          int64_t interval = 3) {
  Buf t = f64({}, {total}), s = f32({}, {scale}), k = f32({}, {tracker});
  Buf skip = boolean({}, {0}), u = f32({}, {0}), used = f32({}, {0});
  AttrMap a = attrs({{"growth_factor", floatv(growth)},
                     {"backoff_factor", floatv(backoff)},
                     {"growth_interval", intv(interval)}});
  // The state outputs in place, as the executor runs them.
  EXPECT_KERNEL_OK(
      run("LossScale", a, {&t, &s, &k}, {&skip, &u, &used, &s, &k}));
  return {skip.values<uint8_t>()[0] != 0, u.values<float>()[0],
          used.values<float>()[0], s.values<float>()[0], k.values<float>()[0]};
}
} // namespace

TEST(LossScaleKernel, GradScalersSkipUnscaleAndUpdate) {
  // A finite step: unscale = 1 / scale, the tracker counts, and the scale
  // grows when it reaches the interval.
  LossScaleResult r = lossScale(12.5, 65536.0f, 0.0f);
  EXPECT_FALSE(r.skip);
  EXPECT_EQ(r.unscale, 1.0f / 65536.0f);
  EXPECT_EQ(r.used, 65536.0f);
  EXPECT_EQ(r.scale, 65536.0f);
  EXPECT_EQ(r.tracker, 1.0f);
  r = lossScale(12.5, 65536.0f, 2.0f);
  EXPECT_EQ(r.scale, 131072.0f);
  EXPECT_EQ(r.tracker, 0.0f);
  // An inf or NaN anywhere in the sum: skip, back off, reset the tracker.
  for (double bad : {std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    r = lossScale(bad, 65536.0f, 2.0f);
    EXPECT_TRUE(r.skip);
    EXPECT_EQ(r.used, 65536.0f);
    EXPECT_EQ(r.scale, 32768.0f);
    EXPECT_EQ(r.tracker, 0.0f);
  }
  // Growth past float32's range keeps the scale (_amp_update_scale_).
  r = lossScale(1.0, 3e38f, 0.0f, 2.0, 0.5, 1);
  EXPECT_EQ(r.scale, 3e38f);
  EXPECT_EQ(r.tracker, 0.0f);
  // A static scale: both factors 1.
  r = lossScale(std::numeric_limits<double>::infinity(), 1000.0f, 0.0f, 1.0,
                1.0, 1);
  EXPECT_TRUE(r.skip);
  EXPECT_EQ(r.scale, 1000.0f);
  EXPECT_EQ(r.unscale, float(1.0 / 1000.0));

  Buf t = f64({}, {1}), s = f32({}, {1}), k = f32({}, {0});
  Buf skip = boolean({}, {0}), u = f32({}, {0}), used = f32({}, {0});
  EXPECT_KERNEL_ERROR(run("LossScale",
                          attrs({{"growth_factor", floatv(0.5)},
                                 {"backoff_factor", floatv(0.5)},
                                 {"growth_interval", intv(10)}}),
                          {&t, &s, &k}, {&skip, &u, &used, &s, &k}),
                      "growth_factor >= 1");
  Buf wrong = f32({}, {0});
  EXPECT_KERNEL_ERROR(
      run("LossScale", attrs({}), {&t, &s, &k}, {&wrong, &u, &used, &s, &k}),
      "'skip'");
  // No attribute falls back to a default.
  EXPECT_KERNEL_ERROR(run("LossScale",
                          attrs({{"growth_factor", floatv(2.0)},
                                 {"backoff_factor", floatv(0.5)}}),
                          {&t, &s, &k}, {&skip, &u, &used, &s, &k}),
                      "attribute 'growth_interval' is missing");
}

TEST(OptimizerKernel, SkipLeavesParametersStateAndCounter) {
  std::vector<int64_t> shape = {4};
  std::vector<double> p0 = randomValues(4, 3), g0 = randomValues(4, 4);
  AttrMap sgd = attrs({{"lr", floatv(0.1)}, {"momentum", floatv(0.9)}});
  AttrMap adam = attrs({{"lr", floatv(1e-2)},
                        {"beta1", floatv(0.9)},
                        {"beta2", floatv(0.999)},
                        {"eps", floatv(1e-8)},
                        {"decoupled", intv(1)},
                        {"weight_decay", floatv(1e-2)}});
  Buf yes = boolean({}, {1}), no = boolean({}, {0});
  Buf scale = f32({}, {0.5f}), step = f32({}, {0});
  // A skipped first step (the counter stayed 0), in place and not.
  Buf p = fromDoubles(DType::F32, shape, p0),
      g = fromDoubles(DType::F32, shape, g0);
  Buf b = fromDoubles(DType::F32, shape, g0),
      m = fromDoubles(DType::F32, shape, g0);
  Buf v = fromDoubles(DType::F32, shape, p0);
  ASSERT_KERNEL_OK(
      run("SGDUpdate", sgd, {&p, &g, &b, &step, &scale, &yes}, {&p, &b}));
  EXPECT_EQ(toDoubles(p), toDoubles(fromDoubles(DType::F32, shape, p0)));
  EXPECT_EQ(toDoubles(b), toDoubles(fromDoubles(DType::F32, shape, g0)));
  Buf pOut = f32({4}, {0, 0, 0, 0}), mOut = f32({4}, {0, 0, 0, 0}),
      vOut = f32({4}, {0, 0, 0, 0});
  ASSERT_KERNEL_OK(run("AdamUpdate", adam,
                       {&p, &g, &m, &v, &step, &scale, &yes},
                       {&pOut, &mOut, &vOut}));
  EXPECT_EQ(toDoubles(pOut), toDoubles(p));
  EXPECT_EQ(toDoubles(mOut), toDoubles(m));
  EXPECT_EQ(toDoubles(vOut), toDoubles(v));
  Buf counter = f32({}, {3});
  ASSERT_KERNEL_OK(run("Increment", attrs({}), {&counter, &yes}, {&counter}));
  EXPECT_EQ(counter.values<float>()[0], 3.0f);
  ASSERT_KERNEL_OK(run("Increment", attrs({}), {&counter, &no}, {&counter}));
  EXPECT_EQ(counter.values<float>()[0], 4.0f);
  // skip = false is the plain update.
  Buf step1 = f32({}, {1});
  Buf pa = fromDoubles(DType::F32, shape, p0),
      pb = fromDoubles(DType::F32, shape, p0);
  Buf ba = f32({4}, {0, 0, 0, 0}), bb = f32({4}, {0, 0, 0, 0});
  ASSERT_KERNEL_OK(
      run("SGDUpdate", sgd, {&pa, &g, &ba, &step1, &scale, &no}, {&pa, &ba}));
  ASSERT_KERNEL_OK(
      run("SGDUpdate", sgd, {&pb, &g, &bb, &step1, &scale}, {&pb, &bb}));
  EXPECT_EQ(toDoubles(pa), toDoubles(pb));
  // The skip flag must be a bool scalar.
  EXPECT_KERNEL_ERROR(
      run("SGDUpdate", sgd, {&pa, &g, &ba, &step1, &scale, &scale}, {&pa, &ba}),
      "'skip'");
}

TEST(OptimizerKernel, LrStepDrivesTheScheduleNotTheStep) {
  // Loss scaling: `step` counts the steps taken (Adam's bias correction),
  // `lr_step` every step (the schedule). An update at step 1 with lr_step
  // 3 equals, bit for bit, one whose schedule is shifted by two steps.
  std::vector<int64_t> shape = {3};
  std::vector<double> p0 = randomValues(3, 5), g0 = randomValues(3, 6);
  AttrMap adam = attrs({{"lr", floatv(1e-2)},
                        {"beta1", floatv(0.9)},
                        {"beta2", floatv(0.999)},
                        {"eps", floatv(1e-8)},
                        {"decoupled", intv(0)},
                        {"weight_decay", floatv(0.0)},
                        {"warmup_steps", intv(4)}});
  Buf step = f32({}, {1}), lrStep = f32({}, {3});
  Buf pa = fromDoubles(DType::F32, shape, p0),
      g = fromDoubles(DType::F32, shape, g0);
  Buf ma = f32({3}, {0, 0, 0}), va = f32({3}, {0, 0, 0});
  ASSERT_KERNEL_OK(run("AdamUpdate", adam,
                       {&pa, &g, &ma, &va, &step, nullptr, nullptr, &lrStep},
                       {&pa, &ma, &va}));
  // Warmup 4: step 3's factor is 3/4; a constant lr of 0.75e-2 at step 1.
  AttrMap flat = attrs({{"lr", floatv(1e-2 * (3.0 / 4.0))},
                        {"beta1", floatv(0.9)},
                        {"beta2", floatv(0.999)},
                        {"eps", floatv(1e-8)},
                        {"decoupled", intv(0)},
                        {"weight_decay", floatv(0.0)}});
  Buf pb = fromDoubles(DType::F32, shape, p0);
  Buf mb = f32({3}, {0, 0, 0}), vb = f32({3}, {0, 0, 0});
  ASSERT_KERNEL_OK(
      run("AdamUpdate", flat, {&pb, &g, &mb, &vb, &step}, {&pb, &mb, &vb}));
  EXPECT_EQ(toDoubles(pa), toDoubles(pb));
}

TEST(ClipKernel, ClipCoefficientUnscales) {
  // The gradients are still scaled by 1024: the norm is the unscaled one,
  // and the coefficient clips and unscales at once.
  Buf t = f64({}, {1024.0 * 1024.0 * 4.0}), unscale = f32({}, {1.0f / 1024});
  Buf norm = f32({}, {0}), coef = f32({}, {0});
  ASSERT_KERNEL_OK(
      run("ClipCoefficient",
          attrs({{"norm_type", str("l2")}, {"max_norm", floatv(0.5)}}),
          {&t, &unscale}, {&norm, &coef}));
  EXPECT_EQ(norm.values<float>()[0], 2.0f);
  EXPECT_EQ(coef.values<float>()[0],
            (1.0f / (2.0f + 1e-6f)) * 0.5f * (1.0f / 1024));
}

TEST(OptimizerKernel, RejectsBadTypesShapesAndSteps) {
  AttrMap sgd = attrs({{"lr", floatv(0.1)}, {"momentum", floatv(0.9)}});
  Buf p = i32({2}, {1, 2}), g = i32({2}, {1, 2}), buf = i32({2}, {0, 0});
  Buf step = f32({}, {1.0f});
  EXPECT_KERNEL_ERROR(run("SGDUpdate", sgd, {&p, &g, &buf, &step}, {&p, &buf}),
                      "int32");
  Buf pf = f32({2}, {1, 2}), gf = f32({3}, {1, 2, 3}), bf = f32({2}, {0, 0});
  EXPECT_KERNEL_ERROR(run("SGDUpdate", sgd, {&pf, &gf, &bf, &step}, {&pf, &bf}),
                      "'grad'");
  Buf gOk = f32({2}, {1, 2});
  EXPECT_KERNEL_ERROR(
      run("SGDUpdate", sgd, {&pf, &gOk, nullptr, &step}, {&pf, nullptr}),
      "momentum_buffer");
  Buf stepI = i64({}, {1});
  EXPECT_KERNEL_ERROR(
      run("SGDUpdate", sgd, {&pf, &gOk, &bf, &stepI}, {&pf, &bf}), "'step'");

  AttrMap adam = attrs({{"lr", floatv(1e-3)}});
  Buf m = f32({2}, {0, 0}), v = f32({2}, {0, 0});
  Buf step0 = f32({}, {0.0f});
  EXPECT_KERNEL_ERROR(
      run("AdamUpdate", adam, {&pf, &gOk, &m, &v, &step0}, {&pf, &m, &v}),
      "at least 1");
  Buf vBad = f32({3}, {0, 0, 0});
  EXPECT_KERNEL_ERROR(
      run("AdamUpdate", adam, {&pf, &gOk, &m, &vBad, &step}, {&pf, &m, &vBad}),
      "exp_avg_sq");
  Buf pd = f64({2}, {1, 2});
  EXPECT_KERNEL_ERROR(
      run("AdamUpdate", adam, {&pd, &gOk, &m, &v, &step}, {&pd, &m, &v}),
      "'grad' has element type float32, expected float64");
}

TEST(OptimizerKernel, SgdWithoutMomentumNeedsNoBuffer) {
  AttrMap a = attrs({{"lr", floatv(0.5)}, {"weight_decay", floatv(0.5)}});
  Buf p = f32({2}, {1, -2}), g = f32({2}, {0.5f, 1});
  Buf step = f32({}, {1.0f});
  ASSERT_KERNEL_OK(run("SGDUpdate", a, {&p, &g, nullptr, &step}, {&p}));
  // p - 0.5 * (g + 0.5 * p)
  expectClose(p.values<float>(), std::vector<double>{0.5, -2.0});
}

} // namespace
