//===- NormLossKernelTest.cpp - CPU kernels: softmax, norms, losses -------===//
//
// Expected values come from plain double-precision loops over the ONNX
// reference formulas (onnx/backend/test/case/node/*.py).
//
//===----------------------------------------------------------------------===//
#include "test/unit/runtime/KernelTestUtil.h"

using namespace shardc::rt;
using namespace shardc::rt::test;

namespace {

//===----------------------------------------------------------------------===//
// Softmax and LogSoftmax
//===----------------------------------------------------------------------===//

/// Softmax of x (outer, n, inner) along the middle dimension.
std::vector<double> naiveSoftmax(const std::vector<float> &x, int64_t outer,
                                 int64_t n, int64_t inner, bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(double(x[(o * n + j) * inner + i]));
      for (int64_t j = 0; j < n; ++j) {
        double e = std::exp(double(x[(o * n + j) * inner + i]));
        y[(o * n + j) * inner + i] = log ? std::log(e / sum) : e / sum;
      }
    }
  return y;
}

TEST(SoftmaxKernel, AlongEachAxis) {
  Buf x = randomF32({2, 3, 4}, 5, -3.0f, 3.0f);
  Buf y(DType::F32, {2, 3, 4});
  int64_t shape[] = {2, 3, 4};
  for (int64_t axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis=" + std::to_string(axis));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= shape[d];
    for (int64_t d = axis + 1; d < 3; ++d)
      inner *= shape[d];
    ASSERT_KERNEL_OK(run("Softmax", attrs({{"axis", intv(axis)}}), {&x}, {&y}));
    expectClose(y.values<float>(), naiveSoftmax(x.values<float>(), outer,
                                                shape[axis], inner, false));
    ASSERT_KERNEL_OK(
        run("LogSoftmax", attrs({{"axis", intv(axis)}}), {&x}, {&y}));
    expectClose(y.values<float>(), naiveSoftmax(x.values<float>(), outer,
                                                shape[axis], inner, true));
  }
}

TEST(SoftmaxKernel, LargeInputsAreStable) {
  Buf x = f32({1, 3}, {1000.0f, 1001.0f, 1002.0f});
  Buf y(DType::F32, {1, 3});
  ASSERT_KERNEL_OK(run("Softmax", attrs({{"axis", intv(1)}}), {&x}, {&y}));
  // Same as softmax([0, 1, 2]).
  double s = 1 + std::exp(1.0) + std::exp(2.0);
  expectClose(y.values<float>(),
              std::vector<double>{1 / s, std::exp(1.0) / s, std::exp(2.0) / s});
  ASSERT_KERNEL_OK(run("LogSoftmax", attrs({{"axis", intv(1)}}), {&x}, {&y}));
  expectClose(
      y.values<float>(),
      std::vector<double>{-std::log(s), 1 - std::log(s), 2 - std::log(s)});
}

//===----------------------------------------------------------------------===//
// LayerNormalization
//===----------------------------------------------------------------------===//

TEST(LayerNormKernel, NormalizesTrailingDimsWithStatistics) {
  // X (2,3,4), axis 1: rows of 12 elements; Scale and B are (3,4).
  Buf x = randomF32({2, 3, 4}, 21, -2.0f, 2.0f);
  Buf scale = randomF32({3, 4}, 22);
  Buf bias = randomF32({3, 4}, 23);
  Buf y(DType::F32, {2, 3, 4});
  Buf mean(DType::F32, {2, 1, 1});
  Buf inv(DType::F32, {2, 1, 1});
  double eps = 1e-3;
  ASSERT_KERNEL_OK(run("LayerNormalization",
                       attrs({{"axis", intv(1)}, {"epsilon", floatv(eps)}}),
                       {&x, &scale, &bias}, {&y, &mean, &inv}));
  std::vector<float> xv = x.values<float>(), wv = scale.values<float>(),
                     bv = bias.values<float>();
  std::vector<double> wantY, wantMean, wantInv;
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < 12; ++c)
      m += xv[r * 12 + c];
    m /= 12;
    for (int c = 0; c < 12; ++c)
      v += (xv[r * 12 + c] - m) * (xv[r * 12 + c] - m);
    v /= 12;
    double is = 1 / std::sqrt(v + eps);
    for (int c = 0; c < 12; ++c)
      wantY.push_back((xv[r * 12 + c] - m) * is * wv[c] + bv[c]);
    wantMean.push_back(m);
    wantInv.push_back(is);
  }
  expectClose(y.values<float>(), wantY);
  expectClose(mean.values<float>(), wantMean);
  expectClose(inv.values<float>(), wantInv);
}

TEST(LayerNormKernel, LastAxisWithoutBias) {
  Buf x = f32({2, 2}, {1, 3, 2, 2});
  Buf scale = f32({2}, {2, 1});
  Buf y(DType::F32, {2, 2});
  ASSERT_KERNEL_OK(run("LayerNormalization",
                       attrs({{"axis", intv(1)}, {"epsilon", floatv(0.0)}}),
                       {&x, &scale, nullptr}, {&y, nullptr, nullptr}));
  // Row 0: mean 2, std 1 -> [-1, 1] * [2, 1]. Row 1: variance 0 -> 0/0.
  std::vector<float> v = y.values<float>();
  EXPECT_FLOAT_EQ(v[0], -2.0f);
  EXPECT_FLOAT_EQ(v[1], 1.0f);

  Buf badScale = f32({3}, {1, 1, 1});
  EXPECT_KERNEL_ERROR(run("LayerNormalization",
                          attrs({{"axis", intv(1)}, {"epsilon", floatv(1e-5)}}),
                          {&x, &badScale}, {&y}),
                      "Scale");
}

//===----------------------------------------------------------------------===//
// BatchNormalization
//===----------------------------------------------------------------------===//

TEST(BatchNormKernel, Inference) {
  Buf x = randomF32({2, 3, 2, 2}, 31);
  Buf scale = f32({3}, {1.0f, 2.0f, -0.5f});
  Buf b = f32({3}, {0.0f, 0.5f, 1.0f});
  Buf mean = f32({3}, {0.1f, -0.2f, 0.3f});
  Buf var = f32({3}, {1.0f, 0.25f, 4.0f});
  Buf y(DType::F32, {2, 3, 2, 2});
  double eps = 1e-2;
  ASSERT_KERNEL_OK(run("BatchNormalization",
                       attrs({{"epsilon", floatv(eps)},
                              {"momentum", floatv(0.9)},
                              {"training_mode", intv(0)}}),
                       {&x, &scale, &b, &mean, &var}, {&y}));
  std::vector<float> xv = x.values<float>(), sv = scale.values<float>(),
                     bv = b.values<float>(), mv = mean.values<float>(),
                     vv = var.values<float>();
  std::vector<double> want;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 4; ++i)
        want.push_back(sv[c] * (xv[(n * 3 + c) * 4 + i] - mv[c]) /
                           std::sqrt(vv[c] + eps) +
                       bv[c]);
  expectClose(y.values<float>(), want);
}

TEST(BatchNormKernel, TrainingUsesBatchStatisticsAndUpdatesRunningOnes) {
  Buf x = randomF32({3, 2, 5}, 32, -2.0f, 3.0f);
  Buf scale = f32({2}, {1.5f, 0.5f});
  Buf b = f32({2}, {0.25f, -1.0f});
  Buf mean = f32({2}, {0.5f, -0.5f});
  Buf var = f32({2}, {2.0f, 0.5f});
  Buf y(DType::F32, {3, 2, 5});
  Buf runMean(DType::F32, {2});
  Buf runVar(DType::F32, {2});
  double eps = 1e-5, momentum = 0.8;
  ASSERT_KERNEL_OK(run("BatchNormalization",
                       attrs({{"epsilon", floatv(eps)},
                              {"momentum", floatv(momentum)},
                              {"training_mode", intv(1)}}),
                       {&x, &scale, &b, &mean, &var}, {&y, &runMean, &runVar}));
  std::vector<float> xv = x.values<float>();
  std::vector<double> wantY(xv.size()), wantMean, wantVar;
  for (int c = 0; c < 2; ++c) {
    double m = 0, v = 0;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 5; ++i)
        m += xv[(n * 2 + c) * 5 + i];
    m /= 15;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 5; ++i)
        v += std::pow(xv[(n * 2 + c) * 5 + i] - m, 2);
    v /= 15; // Population variance, as ONNX's reference.
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 5; ++i) {
        int64_t k = (n * 2 + c) * 5 + i;
        wantY[k] = scale.values<float>()[c] * (xv[k] - m) / std::sqrt(v + eps) +
                   b.values<float>()[c];
      }
    wantMean.push_back(mean.values<float>()[c] * momentum + m * (1 - momentum));
    wantVar.push_back(var.values<float>()[c] * momentum + v * (1 - momentum));
  }
  expectClose(y.values<float>(), wantY);
  expectClose(runMean.values<float>(), wantMean);
  expectClose(runVar.values<float>(), wantVar);
}

TEST(BatchNormKernel, UnbiasedRunningVariance) {
  // One channel, values 1..4: mean 2.5, population variance 1.25, unbiased
  // 5/3. Normalization keeps the population variance.
  Buf x = f32({2, 1, 2}, {1, 2, 3, 4});
  Buf one = f32({1}, {1.0f});
  Buf zero = f32({1}, {0.0f});
  Buf y(DType::F32, {2, 1, 2});
  Buf runMean(DType::F32, {1});
  Buf runVar(DType::F32, {1});
  ASSERT_KERNEL_OK(run("BatchNormalization",
                       attrs({{"epsilon", floatv(0.0)},
                              {"momentum", floatv(0.5)},
                              {"training_mode", intv(1)},
                              {"unbiased_var", intv(1)}}),
                       {&x, &one, &zero, &zero, &one},
                       {&y, &runMean, &runVar}));
  expectClose(runMean.values<float>(), std::vector<double>{1.25});
  expectClose(runVar.values<float>(), std::vector<double>{0.5 + 0.5 * 5 / 3.0});
  double s = std::sqrt(1.25);
  expectClose(y.values<float>(),
              std::vector<double>{-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s});
}

TEST(BatchNormKernel, WrongParameterShapeIsAnError) {
  Buf x = randomF32({2, 3, 2}, 1);
  Buf p3 = f32({3}, {1, 1, 1});
  Buf p2 = f32({2}, {1, 1});
  Buf y(DType::F32, {2, 3, 2});
  EXPECT_KERNEL_ERROR(
      run("BatchNormalization", attrs(), {&x, &p3, &p3, &p2, &p3}, {&y}),
      "input_mean");
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// log_softmax over axis 1 of (N, C, D).
std::vector<double> logSoftmaxNCD(const std::vector<float> &x, int64_t n,
                                  int64_t c, int64_t d) {
  return naiveSoftmax(x, n, c, d, /*log=*/true);
}

/// ONNX's negativeloglikelihoodloss reference on (N, C, D) log-probs.
double referenceLoss(const std::vector<double> &logp,
                     const std::vector<int64_t> &target, int64_t n, int64_t c,
                     int64_t d, const std::vector<float> *weights,
                     const std::string &reduction, bool hasIgnore,
                     int64_t ignore, std::vector<double> *perElement) {
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      int64_t t = target[i * d + j];
      double w = 0, l = 0;
      if (!hasIgnore || t != ignore) {
        w = weights ? (*weights)[t] : 1.0;
        l = -logp[(i * c + t) * d + j] * w;
      }
      if (perElement)
        perElement->push_back(l);
      sum += l;
      wsum += w;
    }
  if (reduction == "sum")
    return sum;
  return sum / wsum;
}

TEST(LossKernel, SoftmaxCrossEntropyReductions) {
  // (N=3, C=5) scores, like ONNX's test_sce_* cases.
  Buf x = randomF32({3, 5}, 51, -2.0f, 2.0f);
  Buf labels = i64({3}, {0, 3, 4});
  std::vector<double> logp = logSoftmaxNCD(x.values<float>(), 3, 5, 1);
  std::vector<int64_t> t = labels.values<int64_t>();

  Buf none(DType::F32, {3});
  Buf logProb(DType::F32, {3, 5});
  ASSERT_KERNEL_OK(run("SoftmaxCrossEntropyLoss",
                       attrs({{"reduction", str("none")}}), {&x, &labels},
                       {&none, &logProb}));
  std::vector<double> per;
  referenceLoss(logp, t, 3, 5, 1, nullptr, "none", false, 0, &per);
  expectClose(none.values<float>(), per);
  expectClose(logProb.values<float>(), logp);

  Buf scalar(DType::F32, {});
  ASSERT_KERNEL_OK(run("SoftmaxCrossEntropyLoss",
                       attrs({{"reduction", str("sum")}}), {&x, &labels},
                       {&scalar}));
  expectClose(scalar.values<float>(),
              std::vector<double>{referenceLoss(logp, t, 3, 5, 1, nullptr,
                                                "sum", false, 0, nullptr)});
  ASSERT_KERNEL_OK(run("SoftmaxCrossEntropyLoss",
                       attrs({{"reduction", str("mean")}}), {&x, &labels},
                       {&scalar}));
  expectClose(scalar.values<float>(),
              std::vector<double>{referenceLoss(logp, t, 3, 5, 1, nullptr,
                                                "mean", false, 0, nullptr)});
}

TEST(LossKernel, SoftmaxCrossEntropyWeightsAndIgnoreIndex) {
  // (N=2, C=3, d1=4) with weights; label 1 at two positions is ignored.
  Buf x = randomF32({2, 3, 4}, 52, -2.0f, 2.0f);
  Buf labels = i64({2, 4}, {0, 1, 2, 2, 1, 0, 2, 0});
  std::vector<float> w = {0.5f, 2.0f, 1.5f};
  Buf weights = f32({3}, w);
  std::vector<double> logp = logSoftmaxNCD(x.values<float>(), 2, 3, 4);
  std::vector<int64_t> t = labels.values<int64_t>();

  Buf scalar(DType::F32, {});
  ASSERT_KERNEL_OK(
      run("SoftmaxCrossEntropyLoss",
          attrs({{"reduction", str("mean")}, {"ignore_index", intv(1)}}),
          {&x, &labels, &weights}, {&scalar}));
  double want = referenceLoss(logp, t, 2, 3, 4, &w, "mean", true, 1, nullptr);
  expectClose(scalar.values<float>(), std::vector<double>{want});
  // Hand check of the denominator: weights of labels 0,2,2,0,2,0 = 6.
  double num = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      if (t[i * 4 + j] != 1)
        num -= w[t[i * 4 + j]] * logp[(i * 3 + t[i * 4 + j]) * 4 + j];
  EXPECT_NEAR(scalar.values<float>()[0], num / 6.0, 1e-5);

  Buf none(DType::F32, {2, 4});
  ASSERT_KERNEL_OK(
      run("SoftmaxCrossEntropyLoss",
          attrs({{"reduction", str("none")}, {"ignore_index", intv(1)}}),
          {&x, &labels, &weights}, {&none}));
  std::vector<double> per;
  referenceLoss(logp, t, 2, 3, 4, &w, "none", true, 1, &per);
  expectClose(none.values<float>(), per);
  EXPECT_EQ(none.values<float>()[1], 0.0f);

  // Without weights, mean divides by the number of non-ignored targets.
  ASSERT_KERNEL_OK(
      run("SoftmaxCrossEntropyLoss",
          attrs({{"reduction", str("mean")}, {"ignore_index", intv(1)}}),
          {&x, &labels}, {&scalar}));
  expectClose(scalar.values<float>(),
              std::vector<double>{referenceLoss(logp, t, 2, 3, 4, nullptr,
                                                "mean", true, 1, nullptr)});
}

TEST(LossKernel, NegativeLogLikelihoodWithWeightsAndNegativeIgnoreIndex) {
  // Input is already log-probabilities; (N=2, C=3, d1=2, d2=2).
  Buf x = randomF32({2, 3, 2, 2}, 61, -3.0f, 0.0f);
  Buf target = i64({2, 2, 2}, {0, -5, 2, 1, 2, 2, -5, 0});
  std::vector<float> w = {1.0f, 0.2f, 3.0f};
  Buf weights = f32({3}, w);
  std::vector<float> xv = x.values<float>();
  std::vector<double> logp(xv.begin(), xv.end());
  std::vector<int64_t> t = target.values<int64_t>();

  for (const char *red : {"mean", "sum"}) {
    SCOPED_TRACE(red);
    Buf scalar(DType::F32, {});
    ASSERT_KERNEL_OK(
        run("NegativeLogLikelihoodLoss",
            attrs({{"reduction", str(red)}, {"ignore_index", intv(-5)}}),
            {&x, &target, &weights}, {&scalar}));
    expectClose(scalar.values<float>(),
                std::vector<double>{referenceLoss(logp, t, 2, 3, 4, &w, red,
                                                  true, -5, nullptr)});
  }
  Buf none(DType::F32, {2, 2, 2});
  ASSERT_KERNEL_OK(
      run("NegativeLogLikelihoodLoss",
          attrs({{"reduction", str("none")}, {"ignore_index", intv(-5)}}),
          {&x, &target, &weights}, {&none}));
  std::vector<double> per;
  referenceLoss(logp, t, 2, 3, 4, &w, "none", true, -5, &per);
  expectClose(none.values<float>(), per);
  // Element 0: target 0, weight 1 -> -x[0, 0, 0, 0].
  EXPECT_FLOAT_EQ(none.values<float>()[0], -xv[0]);
}

TEST(LossKernel, TargetOutOfRangeAndBadTypesAreErrors) {
  Buf x = randomF32({2, 3}, 71);
  Buf target = i64({2}, {0, 3});
  Buf scalar(DType::F32, {});
  EXPECT_KERNEL_ERROR(run("NegativeLogLikelihoodLoss",
                          attrs({{"reduction", str("mean")}}), {&x, &target},
                          {&scalar}),
                      "outside [0, 3)");
  // The out-of-range target is fine when it is the ignored one.
  EXPECT_KERNEL_OK(
      run("NegativeLogLikelihoodLoss",
          attrs({{"reduction", str("mean")}, {"ignore_index", intv(3)}}),
          {&x, &target}, {&scalar}));
  Buf floatTarget = f32({2}, {0, 1});
  EXPECT_KERNEL_ERROR(run("SoftmaxCrossEntropyLoss",
                          attrs({{"reduction", str("mean")}}),
                          {&x, &floatTarget}, {&scalar}),
                      "float32");
  EXPECT_KERNEL_ERROR(run("SoftmaxCrossEntropyLoss",
                          attrs({{"reduction", str("avg")}}), {&x, &target},
                          {&scalar}),
                      "reduction");
}

} // namespace
