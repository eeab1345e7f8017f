//===- RaiseLayerNorm.cpp - Layer norm written out, as one op -------------===//
//
// shardc-raise-layer-norm (Passes.td): PyTorch exports nn.LayerNorm below
// opset 17 as its formula,
//
//   d = x - ReduceMean(x)              y = d / Sqrt(ReduceMean(Pow(d, 2)) +
//   eps) out = y * scale + bias             (the affine part when the module
//   has it)
//
// over the trailing axes; this pass turns each such chain into one
// shardc.LayerNormalization, whose kernels read x once per pass and whose
// gradient is one LayerNormGrad instead of a dozen elementwise ops and
// reductions. The chain's intermediate values must have no other users;
// `d * d` is accepted for the square.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_RAISELAYERNORM
#include "passes/Passes.h.inc"

namespace {

/// The single float value of a one-element constant.
std::optional<double> scalarConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  return (*dense.value_begin<APFloat>()).convertToDouble();
}

/// The first normalized axis when `mean` is a keepdims ReduceMean of `x`
/// over its trailing axes, each once.
std::optional<int64_t> trailingMeanAxis(ReduceMeanOp mean, Value x) {
  if (!mean || mean.getInput() != x || !mean.getKeepdims())
    return std::nullopt;
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  ArrayRef<int64_t> axes = mean.getAxes();
  if (axes.empty())
    return std::nullopt;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size() - i))
      return std::nullopt;
  return axes.front();
}

/// Whether `v` is the square of `d`: Pow(d, 2) or d * d.
bool isSquareOf(Value v, Value d) {
  if (auto pow = v.getDefiningOp<PowOp>())
    return pow.getLhs() == d && scalarConstant(pow.getRhs()) == 2.0;
  if (auto mul = v.getDefiningOp<MulOp>())
    return mul.getLhs() == d && mul.getRhs() == d;
  return false;
}

/// The other operand of a binary op whose one operand is `v`.
template <typename OpT> Value otherOperand(OpT op, Value v) {
  return op.getLhs() == v ? op.getRhs() : op.getLhs();
}

/// Whether `p`, after dropping leading 1s, has exactly the normalized shape.
bool isAffineParam(Value p, ArrayRef<int64_t> normShape, Type elem) {
  auto t = dyn_cast<RankedTensorType>(p.getType());
  if (!t || t.getElementType() != elem)
    return false;
  ArrayRef<int64_t> shape = t.getShape();
  while (shape.size() > normShape.size() && shape.front() == 1)
    shape = shape.drop_front();
  return shape == normShape;
}

struct RaiseLayerNormPattern : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DivOp div,
                                PatternRewriter &rewriter) const override {
    // d / Sqrt(ReduceMean(d^2) + eps), d = x - ReduceMean(x).
    auto sub = div.getLhs().getDefiningOp<SubOp>();
    auto sqrt = div.getRhs().getDefiningOp<SqrtOp>();
    if (!sub || !sqrt)
      return failure();
    Value x = sub.getLhs();
    auto xt = dyn_cast<RankedTensorType>(x.getType());
    if (!xt || !isa<FloatType>(xt.getElementType()) ||
        div.getType() != x.getType() || sub.getType() != x.getType())
      return failure();
    auto mean = sub.getRhs().getDefiningOp<ReduceMeanOp>();
    std::optional<int64_t> axis = trailingMeanAxis(mean, x);
    auto addEps = sqrt.getInput().getDefiningOp<AddOp>();
    if (!axis || !addEps)
      return failure();
    auto var = addEps.getLhs().getDefiningOp<ReduceMeanOp>();
    Value epsValue = addEps.getRhs();
    if (!var) {
      var = addEps.getRhs().getDefiningOp<ReduceMeanOp>();
      epsValue = addEps.getLhs();
    }
    std::optional<double> eps = scalarConstant(epsValue);
    if (!var || !eps || *eps < 0 ||
        trailingMeanAxis(var, var.getInput()) != axis ||
        !isSquareOf(var.getInput(), sub.getResult()))
      return failure();
    // Nothing else may read the chain's intermediate values.
    Operation *square = var.getInput().getDefiningOp();
    if (!mean->hasOneUse() || !square->hasOneUse() || !var->hasOneUse() ||
        !addEps->hasOneUse() || !sqrt->hasOneUse())
      return failure();
    for (Operation *user : sub->getUsers())
      if (user != div.getOperation() && user != square)
        return failure();

    // The affine part: y * scale, then + bias, each with the normalized
    // shape (a ones scale when there is none).
    Type elem = xt.getElementType();
    ArrayRef<int64_t> normShape = xt.getShape().drop_front(*axis);
    Operation *last = div;
    Value scale, bias;
    if (div->hasOneUse())
      if (auto mul = dyn_cast<MulOp>(*div->user_begin())) {
        Value s = otherOperand(mul, div.getResult());
        if (mul.getType() == x.getType() && isAffineParam(s, normShape, elem)) {
          scale = s;
          last = mul;
          if (mul->hasOneUse())
            if (auto add = dyn_cast<AddOp>(*mul->user_begin())) {
              Value b = otherOperand(add, mul.getResult());
              if (add.getType() == x.getType() &&
                  isAffineParam(b, normShape, elem)) {
                bias = b;
                last = add;
              }
            }
        }
      }
    rewriter.setInsertionPoint(last);
    if (!scale) {
      auto t = RankedTensorType::get(normShape, elem);
      scale = rewriter.create<ConstantOp>(
          div.getLoc(), t,
          DenseElementsAttr::get(t, rewriter.getFloatAttr(elem, 1.0)));
    }
    SmallVector<int64_t> stat(xt.getShape().take_front(*axis));
    stat.append(xt.getRank() - *axis, 1);
    auto statType = RankedTensorType::get(stat, rewriter.getF32Type());
    auto ln = rewriter.create<LayerNormalizationOp>(
        last->getLoc(), TypeRange{xt, statType, statType}, x, scale, bias,
        rewriter.getI64IntegerAttr(*axis),
        rewriter.getF32FloatAttr(static_cast<float>(*eps)));
    rewriter.replaceOp(last, ln.getOutput());
    return success();
  }
};

struct RaiseLayerNormPass : impl::RaiseLayerNormBase<RaiseLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseLayerNormPattern>(&getContext());
    GreedyRewriteConfig config;
    config.strictMode = GreedyRewriteStrictness::ExistingOps;
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns),
                                            config)))
      return signalPassFailure();
  }
};

} // namespace
} // namespace shardc
