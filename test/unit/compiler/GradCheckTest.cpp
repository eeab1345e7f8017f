//===- GradCheckTest.cpp - Autodiff rules against finite differences ------===//
//
// For each gradient rule: a small ONNX model whose differentiated operands
// are parameters and whose loss is sum(op(...) * R) for a fixed random R,
// compiled through import and autodiff, lowered to a plan whose outputs are
// the loss and the parameter gradients, and run on the CPU executor. Every
// gradient element is compared with a central finite difference of the loss,
// obtained by perturbing the parameter in the executor's own buffer and
// running the same plan again. float32 throughout: h = 1e-2 with a
// tolerance of 2e-2 relative (plus 2e-3 absolute) covers the truncation and
// rounding error of central differences on these O(1) inputs.
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "ir/ShardcDialect.h"
#include "passes/LowerToPlan/PlanEmitter.h"
#include "passes/Passes.h"
#include "plan/PlanIO.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace shardc;

namespace {

struct Case {
  const char *name;
  /// Graph inputs and initializers (ONNX text syntax) before "=> (float
  /// loss)", and the nodes computing `Y` from them.
  const char *signature;
  const char *nodes;
  /// Shape of Y, for the random weights R of the loss.
  std::vector<int64_t> yShape;
};

std::string floats(std::mt19937 &rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::string s = "{";
  for (int64_t i = 0; i < n; ++i)
    s += (i ? "," : "") + std::to_string(d(rng));
  return s + "}";
}

std::string dims(const std::vector<int64_t> &shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s;
}

/// Replaces every "@RAND(n)" in `text` by n uniform values in [-1, 1] and
/// "@POS(n)" by values in [0.5, 1.5].
std::string fillRandom(std::string text, std::mt19937 &rng) {
  for (const char *tag : {"@RAND(", "@POS("}) {
    size_t pos;
    while ((pos = text.find(tag)) != std::string::npos) {
      size_t open = pos + strlen(tag), close = text.find(')', open);
      int64_t n = std::stoll(text.substr(open, close - open));
      bool positive = std::string(tag) == "@POS(";
      text.replace(
          pos, close + 1 - pos,
          floats(rng, n, positive ? 0.5f : -1.0f, positive ? 1.5f : 1.0f));
    }
  }
  return text;
}

class GradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradCheck, MatchesCentralDifferences) {
  const Case &c = GetParam();
  std::mt19937 rng(1234);
  int64_t ySize = 1;
  for (int64_t d : c.yShape)
    ySize *= d;
  std::string model =
      std::string("<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\n"
                  "g (") +
      c.signature + ", float" +
      (c.yShape.empty() ? std::string(" R = ")
                        : "[" + dims(c.yShape) + "] R = ") +
      floats(rng, ySize, -1.0f, 1.0f) + ") => (float loss)\n{\n" + c.nodes +
      "\n  YR = Mul(Y, R)\n  loss = ReduceSum<keepdims=0>(YR)\n}\n";
  model = fillRandom(model, rng);

  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("shard-gradcheck", dir));
  std::string path = (dir + "/m.onnxtxt").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << model;
  }

  mlir::MLIRContext ctx;
  std::string diagnostics;
  ctx.getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  auto imported = importOnnxFile(ctx, path, {});
  ASSERT_TRUE(mlir::succeeded(imported)) << diagnostics << model;
  mlir::ModuleOp module = *imported->module;
  mlir::PassManager pm(&ctx);
  buildImportCleanupPipeline(pm);
  pm.addPass(createAutodiff());
  ASSERT_TRUE(mlir::succeeded(pm.run(module))) << diagnostics << model;

  // Expose the gradients as graph outputs named "grad:<param>".
  auto func = module.lookupSymbol<mlir::func::FuncOp>("main");
  auto names = llvm::to_vector(
      func->getAttrOfType<mlir::ArrayAttr>(kOutputNamesAttrName).getValue());
  std::vector<std::string> gradParams;
  for (unsigned i = names.size(); i < func.getNumResults(); ++i) {
    auto of = func.getResultAttrOfType<mlir::StringAttr>(i, kGradOfAttrName);
    ASSERT_TRUE(of);
    gradParams.push_back(of.str());
    names.push_back(mlir::StringAttr::get(&ctx, "grad:" + of.str()));
  }
  func->setAttr(kOutputNamesAttrName, mlir::ArrayAttr::get(&ctx, names));
  ASSERT_FALSE(gradParams.empty()) << "no gradients for " << c.name;

  plan::PlanWriter writer;
  const onnx::ModelProto &proto = imported->model;
  ParamReader reader =
      [&](llvm::StringRef name) -> llvm::Expected<std::vector<uint8_t>> {
    for (const auto &init : proto.graph().initializer())
      if (init.name() == name)
        return readTensorBytes(init, ".");
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "missing");
  };
  ASSERT_TRUE(mlir::succeeded(emitPlan(module, reader, writer))) << diagnostics;
  std::string planDir = (dir + "/plan").str();
  if (llvm::Error err = writer.write(planDir))
    FAIL() << llvm::toString(std::move(err));
  auto loaded = plan::loadPlan(planDir);
  ASSERT_TRUE(!!loaded) << llvm::toString(loaded.takeError());
  auto backend = rt::createCpuBackend();
  auto exec = rt::Executor::create(**loaded, *backend);
  ASSERT_TRUE(!!exec) << llvm::toString(exec.takeError());
  const plan::Plan &p = (*loaded)->plan;

  auto runLoss = [&]() {
    llvm::Error err = (*exec)->run();
    EXPECT_FALSE(!!err) << llvm::toString(std::move(err));
    return (double)*(*exec)->output(0).as<float>();
  };
  runLoss();
  // Copy the analytic gradients before perturbing anything.
  std::vector<std::vector<float>> analytic;
  for (size_t g = 0; g < gradParams.size(); ++g) {
    rt::TensorView v = (*exec)->output(1 + g);
    analytic.emplace_back(v.as<float>(), v.as<float>() + v.numel());
  }
  const double h = 1e-2;
  for (size_t g = 0; g < gradParams.size(); ++g) {
    int buffer = -1;
    for (int i = 0; i < p.buffers_size(); ++i)
      if (p.buffers(i).kind() == plan::PARAMETER &&
          p.buffers(i).name() == gradParams[g])
        buffer = i;
    ASSERT_GE(buffer, 0);
    rt::TensorView param = (*exec)->buffer(buffer);
    float *w = param.as<float>();
    for (int64_t k = 0; k < param.numel(); ++k) {
      float saved = w[k];
      w[k] = saved + (float)h;
      double up = runLoss();
      w[k] = saved - (float)h;
      double down = runLoss();
      w[k] = saved;
      double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(analytic[g][k], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
          << c.name << ": d loss / d " << gradParams[g] << "[" << k << "]";
    }
  }
  llvm::sys::fs::remove_directories(dir);
}

const Case kCases[] = {
    {"add_broadcast",
     "float[2,3] A = @RAND(6), float[3] B = @RAND(3)",
     "Y = Add(A, B)",
     {2, 3}},
    {"sub_broadcast",
     "float[2,3] A = @RAND(6), float[1,3] B = @RAND(3)",
     "Y = Sub(A, B)",
     {2, 3}},
    {"mul_broadcast",
     "float[2,3] A = @RAND(6), float[2,1] B = @RAND(2)",
     "Y = Mul(A, B)",
     {2, 3}},
    {"div",
     "float[2,3] A = @RAND(6), float[3] B = @POS(3)",
     "Y = Div(A, B)",
     {2, 3}},
    {"pow",
     "float[2,3] A = @POS(6), float[3] E = @RAND(3)",
     "Y = Pow(A, E)",
     {2, 3}},
    {"sqrt_exp_log",
     "float[2,3] A = @POS(6)",
     "S = Sqrt(A)\n  E = Exp(S)\n  Y = Log(E)",
     {2, 3}},
    {"neg_erf_tanh_sigmoid",
     "float[2,3] A = @RAND(6)",
     "N = Neg(A)\n  E = Erf(N)\n  T = Tanh(E)\n  Y = Sigmoid(T)",
     {2, 3}},
    {"relu", "float[2,3] A = @RAND(6)", "Y = Relu(A)", {2, 3}},
    {"softplus", "float[2,3] A = @RAND(6)", "Y = Softplus(A)", {2, 3}},
    // The exact 0 checks PyTorch's subgradient: sign(0) = 0, as the central
    // difference (|h| - |-h|) / 2h.
    {"abs",
     "float[2,3] A = {-0.8, -0.3, 0.0, 0.2, 0.5, 1.1}",
     "Y = Abs(A)",
     {2, 3}},
    // ArgMax (an accuracy metric) feeding the loss through a Cast: the
    // integer result takes no gradient, and autodiff goes on past it.
    {"argmax_in_loss_graph",
     "float[3,4] A = @RAND(12)",
     "I = ArgMax<axis=1, keepdims=1>(A)\n  F = Cast<to=1>(I)\n  Y = Mul(A, F)",
     {3, 4}},
    // Dropout with the executor's fixed seed and step is a fixed linear map;
    // its gradient must regenerate exactly the forward's mask (two sites,
    // a mask output, and a dropped value reused after a nonlinearity).
    {"dropout_mask",
     "float[4,6] A = @RAND(24), bool T = {1}",
     "r = Constant<value = float {0.4}>()\n  Y, M = Dropout(A, r, T)",
     {4, 6}},
    {"dropout_two_sites",
     "float[3,8] A = @RAND(24), float[8] B = @RAND(8), bool T = {1}",
     "r = Constant<value = float {0.5}>()\n  D = Dropout(A, r, T)\n"
     "  S = Tanh(D)\n  P = Mul(S, D)\n  Q = Add(P, B)\n"
     "  q = Constant<value = float {0.25}>()\n  Y = Dropout(Q, q, T)",
     {3, 8}},
    {"tril", "float[2,3,4] A = @RAND(24)", "Y = Trilu<upper=0>(A)", {2, 3, 4}},
    {"triu_k",
     "float[3,4] A = @RAND(12), int64 K = {1}",
     "Y = Trilu(A, K)",
     {3, 4}},
    // HardSwish imports as x * (relu(x + 3) - relu(x - 3)) / 6; the scale by
    // F puts inputs on all three pieces (below -3, between, above 3).
    {"hardswish",
     "float[2,3] A = @RAND(6), float F = {5.0}",
     "S = Mul(A, F)\n  Y = HardSwish(S)",
     {2, 3}},
    // Comparisons and logic only build masks: the gradient goes through
    // Where to whichever operand each element selects.
    {"compare_logic_where",
     "float[2,3] A = {-0.8, -0.3, 0.1, 0.2, 0.5, 1.1}, float[3] B = {0.4, "
     "-0.6, 0.3}",
     "G = Greater(A, B)\n  L = Less(A, B)\n  GE = GreaterOrEqual(A, B)\n"
     "  LE = LessOrEqual(A, B)\n  N = Not(L)\n  X = Xor(G, LE)\n"
     "  C = And(GE, X)\n  D = Or(C, N)\n  P = Mul(A, B)\n"
     "  Y = Where(D, A, P)",
     {2, 3}},
    // Clip with parameter bounds: x gets the gradient inside [min, max],
    // each bound where it is chosen (no element near a bound, where the
    // central difference would straddle the kink).
    {"clip",
     "float[2,4] A = {-0.9, -0.45, -0.2, 0.0, 0.3, 0.55, 0.7, 1.2}, float L "
     "= {-0.5}, float H = {0.6}",
     "Y = Clip(A, L, H)",
     {2, 4}},
    {"clip_max_only",
     "float[2,4] A = {-0.9, -0.45, -0.2, 0.0, 0.3, 0.55, 0.7, 1.2}",
     "H = Constant<value = float {0.6}>()\n  Y = Clip(A, , H)",
     {2, 4}},
    {"leakyrelu_elu",
     "float[2,3] A = {-0.8, -0.3, 0.1, 0.2, -0.5, 1.1}",
     "L = LeakyRelu<alpha=0.2>(A)\n  E = Elu<alpha=0.5>(A)\n  Y = Add(L, E)",
     {2, 3}},
    {"selu_celu",
     "float[2,3] A = {-0.8, -0.3, 0.1, 0.2, -0.5, 1.1}",
     "S = Selu(A)\n  C = Celu<alpha=2.0>(A)\n  Y = Mul(S, C)",
     {2, 3}},
    // PRelu's slope (one per channel) is a parameter and gets a gradient.
    {"prelu",
     "float[2,3,2] A = {-0.8, -0.3, 0.1, 0.2, -0.5, 1.1, 0.7, -0.9, 0.4, "
     "-0.2, 0.6, -0.7}, float[3,1] S = {0.25, -0.5, 0.1}",
     "Y = PRelu(A, S)",
     {2, 3, 2}},
    // 0.2 * x + 0.5 saturates below -2.5 and above 2.5.
    {"hardsigmoid",
     "float[2,3] A = {-3.0, -1.0, 0.2, 1.5, 2.4, 4.0}",
     "Y = HardSigmoid(A)",
     {2, 3}},
    {"reciprocal", "float[2,3] A = @POS(6)", "Y = Reciprocal(A)", {2, 3}},
    // Max and Min of three broadcast inputs (a chain of binary ops); the
    // exact tie of A[0][0] and B[0] checks the split of torch.maximum
    // (central differences give 1/2 there too).
    {"max_min",
     "float[2,3] A = {0.3, -0.3, 0.1, 0.9, -0.5, 0.2}, float[3] B = {0.3, "
     "0.4, -0.6}, float[2,1] C = {-0.1, 0.5}",
     "M = Max(A, B, C)\n  N = Min(A, B)\n  Y = Add(M, N)",
     {2, 3}},
    {"sin_cos",
     "float[2,3] A = @RAND(6)",
     "S = Sin(A)\n  C = Cos(A)\n  Y = Mul(S, C)",
     {2, 3}},
    // The inverse trigonometric and hyperbolic functions, Tan, Sinh and Cosh,
    // inside their domains (Acosh's input shifted above 1); products, so
    // that Asin + Acos (a constant) does not cancel.
    {"trig_hyperbolic",
     "float[2,3] A = {0.3, -0.5, 0.1, 0.7, -0.2, 0.45}",
     "S = Asin(A)\n  C = Acos(A)\n  P = Mul(S, C)\n  T = Atan(A)\n"
     "  H = Atanh(A)\n  Q = Mul(T, H)\n  N = Tan(A)\n  Sh = Sinh(A)\n"
     "  K = Mul(N, Sh)\n  Ch = Cosh(A)\n  Ah = Asinh(A)\n  U = Mul(Ch, Ah)\n"
     "  two = Constant<value = float {2.0}>()\n  B = Add(A, two)\n"
     "  V = Acosh(B)\n  M = Mean(P, Q)\n  Y = Sum(M, K, U, V)",
     {2, 3}},
    // Floor, Ceil and Sign have zero gradient: only the outer Mul's
    // operand A gets one (no element is within h of a step).
    {"floor_ceil_sign",
     "float[2,3] A = {-0.8, -0.3, 0.1, 0.2, -0.5, 1.1}, float F = {3.0}",
     "S = Mul(A, F)\n  Fl = Floor(S)\n  Ce = Ceil(S)\n  Sg = Sign(A)\n"
     "  T = Add(Fl, Ce)\n  U = Add(T, Sg)\n  Y = Mul(U, A)",
     {2, 3}},
    // ReduceMax/ReduceMin: two equal maxima in row 0 share its gradient
    // (torch.amax's rule; central differences give 1/2 each as well).
    {"reducemax_ties",
     "float[3,4] A = {0.7, -0.2, 0.7, 0.1, -0.5, 0.3, 0.9, -0.8, 0.2, 0.6, "
     "-0.1, 0.4}",
     "Y = ReduceMax<axes=[1], keepdims=0>(A)",
     {3}},
    {"reducemin_keepdims",
     "float[3,4] A = {0.7, -0.2, 0.7, 0.1, -0.5, 0.3, 0.9, -0.8, 0.2, 0.6, "
     "-0.1, 0.4}",
     "Y = ReduceMin<axes=[0], keepdims=1>(A)",
     {1, 4}},
    {"reducel2_logsumexp",
     "float[3,4] A = @RAND(12)",
     "N = ReduceL2<axes=[1], keepdims=1>(A)\n"
     "  L = ReduceLogSumExp<axes=[1], keepdims=1>(A)\n  D = Div(A, N)\n"
     "  Y = Add(D, L)",
     {3, 4}},
    // ReduceSumSquare, ReduceL1 and ReduceLogSum compose ReduceSum with Mul,
    // Abs and Log (values away from Abs's kink, which the central
    // difference's step would cross).
    {"reducesumsquare_l1_logsum",
     "float[3,4] A = {0.7, -0.2, 0.5, 0.1, -0.5, 0.3, 0.9, -0.8, 0.2, 0.6, "
     "-0.1, 0.4}",
     "S = ReduceSumSquare<axes=[1], keepdims=1>(A)\n"
     "  L = ReduceL1<axes=[0], keepdims=1>(A)\n  Q = Mul(A, A)\n"
     "  G = ReduceLogSum<axes=[1], keepdims=1>(Q)\n  M = Mul(A, L)\n"
     "  N = Add(M, S)\n  Y = Add(N, G)",
     {3, 4}},
    // CumSum is a MatMul with a triangle of ones along its axis.
    {"cumsum_exclusive_reverse",
     "float[3,4] A = @RAND(12)",
     "ax = Constant<value = int64 {0}>()\n  C = CumSum<exclusive=1, "
     "reverse=1>(A, ax)\n  ax1 = Constant<value = int64 {-1}>()\n"
     "  D = CumSum(A, ax1)\n  Y = Mul(C, D)",
     {3, 4}},
    // Einsum: labels summed out, batched MatMuls, broadcast Muls.
    {"einsum_batched_and_ellipsis",
     "float[2,3,4] A = @RAND(24), float[2,4,3] B = @RAND(24), float[2,3] V = "
     "@RAND(6)",
     "P = Einsum<equation=\"bij,bjk->bik\">(A, B)\n"
     "  Q = Einsum<equation=\"...i,...j->...ij\">(V, V)\n"
     "  W = Einsum<equation=\"bik,bkj,bj->bi\">(P, Q, V)\n"
     "  S = Einsum<equation=\"bij->j\">(A)\n"
     "  T = Einsum<equation=\"bi,j->bij\">(W, S)\n"
     "  Y = Einsum<equation=\"bij,bij->ji\">(T, T)",
     {4, 3}},
    // Tile's gradient sums the tiles; Pad's is the slice of the data (the
    // pad value, here a parameter-free constant, gets none).
    {"tile",
     "float[2,3] A = @RAND(6)",
     "r = Constant<value = int64[2] {2, 3}>()\n  Y = Tile(A, r)",
     {4, 9}},
    {"pad_constant",
     "float[2,3] A = @RAND(6)",
     "p = Constant<value = int64[4] {1, 0, 2, 1}>()\n"
     "  v = Constant<value = float {0.5}>()\n  P = Pad(A, p, v)\n"
     "  Y = Mul(P, P)",
     {5, 4}},
    // Reflect and edge padding gather copies of border elements: their
    // gradient is the sum over the copies.
    {"pad_reflect_edge",
     "float[3,4] A = @RAND(12)",
     "p = Constant<value = int64[4] {1, 2, 1, 1}>()\n"
     "  F = Pad<mode=\"reflect\">(A, p)\n  E = Pad<mode=\"edge\">(A, p)\n"
     "  Y = Mul(F, E)",
     {5, 7}},
    {"softmax", "float[2,4] A = @RAND(8)", "Y = Softmax<axis=1>(A)", {2, 4}},
    {"logsoftmax",
     "float[2,4] A = @RAND(8)",
     "Y = LogSoftmax<axis=0>(A)",
     {2, 4}},
    {"gemm_trans",
     "float[3,2] A = @RAND(6), float[4,3] B = @RAND(12), float[4] C = @RAND(4)",
     "Y = Gemm<transA=1, transB=1, alpha=0.5, beta=2.0>(A, B, C)",
     {2, 4}},
    {"gemm_plain",
     "float[2,3] A = @RAND(6), float[3,4] B = @RAND(12), float[2,4] C = "
     "@RAND(8)",
     "Y = Gemm(A, B, C)",
     {2, 4}},
    {"matmul_batched_broadcast",
     "float[2,3,4] A = @RAND(24), float[4,2] B = @RAND(8)",
     "Y = MatMul(A, B)",
     {2, 3, 2}},
    {"matmul_vector",
     "float[4] A = @RAND(4), float[2,4,3] B = @RAND(24)",
     "Y = MatMul(A, B)",
     {2, 3}},
    {"conv_stride_pad_group",
     "float[1,4,5,5] X = @RAND(100), float[4,2,3,3] W = @RAND(72), float[4] B "
     "= @RAND(4)",
     "Y = Conv<strides=[2,2], pads=[1,1,0,0], group=2>(X, W, B)",
     {1, 4, 2, 2}},
    {"conv_dilation",
     "float[1,2,6] X = @RAND(12), float[3,2,2] W = @RAND(12)",
     "Y = Conv<dilations=[2]>(X, W)",
     {1, 3, 4}},
    // ConvTranspose imports as ConvGradInput: gradients by Conv (input) and
    // ConvGradWeight (weight); strides, uneven pads, output_padding, groups.
    {"convtranspose_stride_pad_group",
     "float[1,2,3,3] X = @RAND(18), float[2,2,3,3] W = @RAND(36), float[4] B "
     "= @RAND(4)",
     "Y = ConvTranspose<strides=[2,2], pads=[1,0,0,1], output_padding=[1,0], "
     "group=2>(X, W, B)",
     {1, 4, 7, 6}},
    // 1-d with dilation; an output_shape longer than the full result gives
    // negative pads, i.e. zeros around it.
    {"convtranspose_1d_output_shape",
     "float[1,2,4] X = @RAND(8), float[2,3,2] W = @RAND(12)",
     "Y = ConvTranspose<dilations=[2], output_shape=[9]>(X, W)",
     {1, 3, 9}},
    {"maxpool",
     "float[1,2,4,4] X = @RAND(32)",
     "Y = MaxPool<kernel_shape=[2,2], strides=[2,2]>(X)",
     {1, 2, 2, 2}},
    {"averagepool_pad",
     "float[1,1,4,4] X = @RAND(16)",
     "Y = AveragePool<kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]>(X)",
     {1, 1, 2, 2}},
    {"globalaveragepool",
     "float[2,2,3,3] X = @RAND(36)",
     "Y = GlobalAveragePool(X)",
     {2, 2, 1, 1}},
    {"layernorm",
     "float[2,3,4] X = @RAND(24), float[4] S = @RAND(4), float[4] B = @RAND(4)",
     "Y = LayerNormalization<axis=-1>(X, S, B)",
     {2, 3, 4}},
    {"instancenorm",
     "float[2,3,2,2] X = @RAND(24), float[3] S = @RAND(3), float[3] B = "
     "@RAND(3)",
     "Y = InstanceNormalization<epsilon=1e-3>(X, S, B)",
     {2, 3, 2, 2}},
    // nn.GroupNorm(2, 4)'s export: Reshape, InstanceNormalization with
    // constant ones and zeros, Reshape, then the affine Mul and Add.
    {"groupnorm_export",
     "float[2,4,3] X = @RAND(24), float[4,1] G = @RAND(4), float[4,1] Bt = "
     "@RAND(4)",
     "s1 = Constant<value = int64[3] {2, 2, -1}>()\n  RX = Reshape(X, s1)\n"
     "  one = Constant<value = float[2] {1.0, 1.0}>()\n"
     "  zero = Constant<value = float[2] {0.0, 0.0}>()\n"
     "  N = InstanceNormalization(RX, one, zero)\n"
     "  s2 = Constant<value = int64[3] {2, 4, 3}>()\n  R2 = Reshape(N, s2)\n"
     "  M = Mul(R2, G)\n  Y = Add(M, Bt)",
     {2, 4, 3}},
    {"batchnorm_training",
     "float[3,2,2] X = @RAND(12), float[2] S = @RAND(2), float[2] B = "
     "@RAND(2), "
     "float[2] M = {0.0, 0.0}, float[2] V = {1.0, 1.0}",
     "Y, RM, RV = BatchNormalization<training_mode=1>(X, S, B, M, V)",
     {3, 2, 2}},
    {"reshape_transpose_expand",
     "float[2,3] A = @RAND(6), float[3,1] B = @RAND(3)",
     "shape = Constant<value = int64[2] {3, 2}>()\n  RS = Reshape(A, shape)\n"
     "  T = Transpose<perm=[1,0]>(RS)\n  eshape = Constant<value = int64[3] "
     "{2, 3, 4}>()\n"
     "  E = Expand(B, eshape)\n  axes = Constant<value = int64[1] {2}>()\n"
     "  U = Unsqueeze(T, axes)\n  Y = Add(U, E)\n",
     {2, 3, 4}},
    // Resize imports as Gathers with constant indices and weights per axis.
    {"resize_nearest_scales",
     "float[1,1,2,3] X = @RAND(6)",
     "S = Constant<value = float[4] {1.0, 1.0, 2.0, 1.5}>()\n"
     "  Y = Resize<mode=\"nearest\">(X, , S)",
     {1, 1, 4, 4}},
    {"resize_bilinear_sizes",
     "float[1,2,3,3] X = @RAND(18)",
     "Z = Constant<value = int64[4] {1, 2, 5, 4}>()\n"
     "  Y = Resize<mode=\"linear\", "
     "coordinate_transformation_mode=\"pytorch_half_pixel\">(X, , , Z)",
     {1, 2, 5, 4}},
    {"resize_bilinear_align_corners",
     "float[1,1,3,2] X = @RAND(6)",
     "S = Constant<value = float[4] {1.0, 1.0, 2.0, 2.0}>()\n"
     "  Y = Resize<mode=\"linear\", "
     "coordinate_transformation_mode=\"align_corners\">(X, , S)",
     {1, 1, 6, 4}},
    {"resize_cubic_exclude_outside",
     "float[1,1,4,4] X = @RAND(16)",
     "S = Constant<value = float[4] {1.0, 1.0, 1.5, 0.5}>()\n"
     "  Y = Resize<mode=\"cubic\", cubic_coeff_a=-0.5, "
     "exclude_outside=1>(X, , S)",
     {1, 1, 6, 2}},
    // RNN, LSTM and GRU unroll at import into Gemm/MatMul, Split, Sigmoid,
    // Tanh (RNN: or Relu), Mul and Add; every weight, bias, initial state and
    // peephole gets its gradient through them.
    {"rnn_bidirectional_relu_tanh_batch_first",
     "float[2,3,2] X = @RAND(12), float[2,3,2] W = @RAND(12), float[2,3,3] Rw "
     "= @RAND(18), float[2,6] B = @RAND(12), float[2,2,3] H0 = @RAND(12)",
     "Y, Yh = RNN<hidden_size=3, direction=\"bidirectional\", layout=1, "
     "activations=[\"Relu\", \"Tanh\"]>(X, W, Rw, B, , H0)",
     {2, 3, 2, 3}},
    {"lstm_reverse_peepholes",
     "float[3,2,2] X = @RAND(12), float[1,8,2] W = @RAND(16), float[1,8,2] Rw "
     "= @RAND(16), float[1,16] B = @RAND(16), float[1,2,2] H0 = @RAND(4), "
     "float[1,2,2] C0 = @RAND(4), float[1,6] P = @RAND(6)",
     "Y, Yh, Yc = LSTM<hidden_size=2, direction=\"reverse\">(X, W, Rw, B, , "
     "H0, C0, P)",
     {3, 1, 2, 2}},
    {"gru_bidirectional",
     "float[3,2,2] X = @RAND(12), float[2,6,2] W = @RAND(24), float[2,6,2] Rw "
     "= @RAND(24), float[2,12] B = @RAND(24), float[2,2,2] H0 = @RAND(8)",
     "Y, Yh = GRU<hidden_size=2, direction=\"bidirectional\">(X, W, Rw, B, , "
     "H0)",
     {3, 2, 2, 2}},
    {"gru_linear_before_reset_batch_first",
     "float[2,3,2] X = @RAND(12), float[1,9,2] W = @RAND(18), float[1,9,3] Rw "
     "= @RAND(27), float[1,18] B = @RAND(18)",
     "Y, Yh = GRU<hidden_size=3, linear_before_reset=1, layout=1>(X, W, Rw, "
     "B)",
     {2, 3, 1, 3}},
    {"gather",
     "float[4,3] D = @RAND(12), int64[3] I = {3, -1, 0}",
     "Y = Gather<axis=0>(D, I)",
     {3, 3}},
    // GatherElements (torch.gather) scatter-adds into its data; index 2 of
    // row 0 is picked twice.
    {"gather_elements",
     "float[3,4] D = @RAND(12), int64[2,3] I = {2, -2, 0, 3, 1, 1}",
     "Y = GatherElements<axis=1>(D, I)",
     {2, 3}},
    // GatherND with constant indices is a Gather of the flattened data;
    // element (1, 2) is read twice.
    {"gather_nd",
     "float[3,4] D = @RAND(12)",
     "I = Constant<value = int64[3, 2] {1, 2, -1, 0, 1, -2}>()\n"
     "  Y = GatherND(D, I)",
     {3}},
    // ScatterND into a computed tensor: rows 2 (as -1) and 0 are written,
    // row 1 keeps the data's.
    {"scatter_nd",
     "float[3,4] D = @RAND(12), float[2,4] U = @RAND(8)",
     "I = Constant<value = int64[2, 1] {-1, 0}>()\n"
     "  Y = ScatterND(D, I, U)",
     {3, 4}},
    // With reduction 'add' element (0, 1) gets two updates.
    {"scatter_nd_add",
     "float[2,3] D = @RAND(6), float[3] U = @RAND(3)",
     "I = Constant<value = int64[3, 2] {0, 1, 1, 2, 0, 1}>()\n"
     "  Y = ScatterND<reduction = \"add\">(D, I, U)",
     {2, 3}},
    // ScatterElements (Tensor.scatter_): each row writes two distinct
    // columns, one as a negative index.
    {"scatter_elements",
     "float[3,4] D = @RAND(12), float[3,2] U = @RAND(6), "
     "int64[3,2] I = {1, -1, 0, 2, 3, 1}",
     "Y = ScatterElements<axis=1>(D, I, U)",
     {3, 4}},
    // With reduction 'add' (scatter_add_), row 0 gets column 2 twice.
    {"scatter_elements_add",
     "float[3,4] D = @RAND(12), float[2,3] U = @RAND(6), "
     "int64[2,3] I = {2, -2, 0, 3, 1, 1}",
     "Y = ScatterElements<axis=1, reduction=\"add\">(D, I, U)",
     {3, 4}},
    // TopK's values are a GatherElements of the input at its indices: the
    // two largest of each row get the gradient, the others none (the values
    // are apart by more than the difference step, so no pick changes).
    {"topk",
     "float[3,4] A = {0.9, -0.3, 0.5, 0.1, -0.7, 0.2, 0.8, -0.1, 0.4, 0.6, "
     "-0.5, 0.0}",
     "K = Constant<value = int64[1] {2}>()\n"
     "  V, I = TopK<axis=1>(A, K)\n  Y = Mul(V, V)",
     {3, 2}},
    {"concat_split",
     "float[2,2] A = @RAND(4), float[2,2] B = @RAND(4)",
     "C = Concat<axis=1>(A, B)\n  split = Constant<value = int64[2] {2, 2}>()\n"
     "  P, Q = Split<axis=1>(C, split)\n  Y = Mul(P, Q)",
     {2, 2}},
    {"slice_negative_step",
     "float[4,5] A = @RAND(20)",
     "starts = Constant<value = int64[2] {3, 0}>()\n"
     "  ends = Constant<value = int64[2] {0, 5}>()\n"
     "  axes = Constant<value = int64[2] {0, 1}>()\n"
     "  steps = Constant<value = int64[2] {-1, 2}>()\n"
     "  Y = Slice(A, starts, ends, axes, steps)",
     {3, 3}},
    {"where_reduce",
     "float[2,3] A = @RAND(6), float[3] B = @RAND(3)",
     "C = Constant<value = bool[2,3] {1,0,1,0,1,1}>()\n  W = Where(C, A, B)\n"
     "  M = ReduceMean<axes=[1], keepdims=1>(W)\n  Y = Mul(M, W)",
     {2, 3}},
    {"cast_identity",
     "float[2,3] A = @RAND(6)",
     "C = Cast<to=11>(A)\n  D = Cast<to=1>(C)\n  Y = Identity(D)",
     {2, 3}},
    {"softmax_cross_entropy",
     "float[3,4] S = @RAND(12), int64[3] L = {1, 3, 0}, float[4] Wt = {1.0, "
     "2.0, 0.5, 1.5}",
     "Y = SoftmaxCrossEntropyLoss<reduction=\"mean\">(S, L, Wt)",
     {}},
    {"nll_ignore_index",
     "float[3,4,2] S = @RAND(24), int64[3,2] L = {1, 3, 0, 2, 2, 1}",
     "Y = NegativeLogLikelihoodLoss<reduction=\"sum\", ignore_index=2>(S, L)",
     {}},
};

INSTANTIATE_TEST_SUITE_P(Rules, GradCheck, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
