//===- Elementwise.cpp - Import of elementwise ONNX operators -------------===//
//
// Add, Sub, Mul, Div, Pow, the comparisons and boolean logic (numpy
// broadcasting: the result type comes from shape inference), Max, Min and
// Sum (chains of the binary op) and Mean (their Sum divided by their
// count), Where, the unary operators (which keep their
// operand's type), Cast and CastLike (the result type is the target, or the
// second operand's element type) and Dropout, which in
// inference is a copy of its input with an all-true mask and in training a
// shardc.Dropout. Clip and the activations LeakyRelu, PRelu, Elu, Selu,
// Celu, HardSigmoid, HardSwish and Reciprocal are composed of ops with
// gradient rules (Where on a comparison, Exp, Mul...). Tested by
// test/lit/import/elementwise.onnxtxt, activations.onnxtxt and
// dropout.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/BatchAxis.h"
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

#include "mlir/IR/Matchers.h"

#include <type_traits>

using namespace mlir;

namespace shardc {

template <typename OpT> static LogicalResult importBinary(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  Value lhs = ctx.operand(0), rhs = ctx.operand(1);
  if (!std::is_same<OpT, PowOp>::value &&
      cast<RankedTensorType>(lhs.getType()).getElementType() !=
          cast<RankedTensorType>(rhs.getType()).getElementType())
    return ctx.nodeError() << "operands have different element types";
  return ctx.finish(ctx.builder().create<OpT>(ctx.loc(), *type, lhs, rhs));
}

template <typename OpT> static LogicalResult importUnary(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  Value in = ctx.operand(0);
  return ctx.finish(ctx.builder().create<OpT>(ctx.loc(), in.getType(), in));
}

/// A rank-0 constant `v` of float element type `elem`.
static Value scalarConstant(OpBuilder &b, Location loc, Type elem, double v) {
  auto t = RankedTensorType::get({}, elem);
  return b.create<ConstantOp>(
      loc, t,
      cast<ElementsAttr>(DenseElementsAttr::get(t, b.getFloatAttr(elem, v))));
}

/// The float input of a unary activation, or failure after an error.
static FailureOr<Value> floatInput(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  Value x = ctx.operand(0);
  auto type = cast<RankedTensorType>(x.getType());
  if (!isa<FloatType>(type.getElementType()))
    return ctx.nodeError() << "needs a float input, got " << type;
  return x;
}

/// HardSwish(x) = x * relu6(x + 3) / 6 (opset 14), composed of ops that have
/// gradient rules: relu6(y) = relu(y) - relu(y - 6), so the result is
/// x * (relu(x + 3) - relu(x - 3)) / 6. Its gradient is PyTorch's except at
/// x = -3 and x = 3 exactly.
static LogicalResult importHardSwish(ImportContext &ctx) {
  auto in = floatInput(ctx);
  if (failed(in))
    return failure();
  Value x = *in;
  auto type = cast<RankedTensorType>(x.getType());
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value three = scalarConstant(b, loc, type.getElementType(), 3.0);
  Value upper = b.create<ReluOp>(loc, type, b.create<AddOp>(loc, x, three));
  Value lower = b.create<ReluOp>(loc, type, b.create<SubOp>(loc, x, three));
  Value relu6 = b.create<SubOp>(loc, upper, lower);
  Value y = b.create<DivOp>(loc, b.create<MulOp>(loc, x, relu6),
                            scalarConstant(b, loc, type.getElementType(), 6.0));
  ctx.define(0, y);
  return success();
}

/// Clip(x, min, max) = where(t > max, max, t) with t = where(x < min, min,
/// x): the bounds are optional inputs (opset 11+) or float attributes
/// (before), any value of x's element type, and min > max gives max, as in
/// ONNX. The gradient reaches x where min <= x <= max (torch.clamp's rule;
/// nn.ReLU6 and nn.Hardtanh export to Clip too, and their own backward
/// leaves out the bounds themselves) and the bounds where they are chosen.
static LogicalResult importClip(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 3)))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value x = ctx.operand(0);
  auto type = cast<RankedTensorType>(x.getType());
  Value lo = ctx.operand(1), hi = ctx.operand(2);
  if (ctx.opset() < 11) {
    if (!isa<FloatType>(type.getElementType()))
      return ctx.nodeError() << "needs a float input, got " << type;
    if (ctx.hasAttr("min"))
      lo = scalarConstant(b, loc, type.getElementType(),
                          ctx.floatAttr("min", 0.0f));
    if (ctx.hasAttr("max"))
      hi = scalarConstant(b, loc, type.getElementType(),
                          ctx.floatAttr("max", 0.0f));
  }
  for (Value bound : {lo, hi})
    if (bound &&
        (cast<RankedTensorType>(bound.getType()).getElementType() !=
             type.getElementType() ||
         cast<RankedTensorType>(bound.getType()).getNumElements() != 1))
      return ctx.nodeError() << "min and max must be scalars of the input's "
                                "element type, got "
                             << bound.getType();
  auto scalarOf = [&](Value v) -> Value {
    auto t = RankedTensorType::get({}, type.getElementType());
    return v.getType() == t ? v : b.create<ReshapeOp>(loc, t, v).getResult();
  };
  Value y = x;
  if (lo) {
    lo = scalarOf(lo);
    y = b.create<WhereOp>(loc, type, b.create<LessOp>(loc, y, lo), lo, y);
  }
  if (hi) {
    hi = scalarOf(hi);
    y = b.create<WhereOp>(loc, type, b.create<GreaterOp>(loc, y, hi), hi, y);
  }
  if (y == x)
    y = b.create<IdentityOp>(loc, type, x);
  ctx.define(0, y);
  return success();
}

/// where(x > 0, x, negative) for the activations that differ below zero.
static Value positiveOr(OpBuilder &b, Location loc, Value x, Value negative) {
  auto type = cast<RankedTensorType>(x.getType());
  Value zero = scalarConstant(b, loc, type.getElementType(), 0.0);
  return b.create<WhereOp>(loc, type, b.create<GreaterOp>(loc, x, zero), x,
                           negative);
}

/// alpha * (exp(x / beta) - 1) for x <= 0, its exp taken of min(x, 0) so
/// that large positive x (where the branch is not selected) gives no inf,
/// whose zero gradient would turn into NaN.
static Value expBranch(OpBuilder &b, Location loc, Value x, double alpha,
                       double beta) {
  auto type = cast<RankedTensorType>(x.getType());
  Type elem = type.getElementType();
  Value zero = scalarConstant(b, loc, elem, 0.0);
  Value neg =
      b.create<WhereOp>(loc, type, b.create<GreaterOp>(loc, x, zero), zero, x);
  if (beta != 1.0)
    neg = b.create<DivOp>(loc, neg, scalarConstant(b, loc, elem, beta));
  Value em1 = b.create<SubOp>(loc, b.create<ExpOp>(loc, type, neg),
                              scalarConstant(b, loc, elem, 1.0));
  if (alpha == 1.0)
    return em1;
  return b.create<MulOp>(loc, em1, scalarConstant(b, loc, elem, alpha));
}

/// LeakyRelu(x) = where(x > 0, x, alpha * x): PyTorch's gradient, alpha at 0.
static LogicalResult importLeakyRelu(ImportContext &ctx) {
  auto x = floatInput(ctx);
  if (failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type elem = cast<RankedTensorType>(x->getType()).getElementType();
  Value scaled = b.create<MulOp>(
      loc, *x, scalarConstant(b, loc, elem, ctx.floatAttr("alpha", 0.01f)));
  ctx.define(0, positiveOr(b, loc, *x, scaled));
  return success();
}

/// PRelu(x, slope) = where(x > 0, x, slope * x), slope broadcasting to x;
/// the slope (usually a parameter) gets its gradient through the Mul.
static LogicalResult importPRelu(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  Value x = ctx.operand(0), slope = ctx.operand(1);
  auto type = cast<RankedTensorType>(x.getType());
  if (!isa<FloatType>(type.getElementType()) ||
      cast<RankedTensorType>(slope.getType()).getElementType() !=
          type.getElementType())
    return ctx.nodeError() << "needs float X and slope of one type, got "
                           << x.getType() << " and " << slope.getType();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  auto slopeType = cast<RankedTensorType>(slope.getType());
  // Old exports (opset < 7, before conversion) give a per-channel slope as
  // [C], meant for axis 1 of X: where it does not broadcast numpy-style, it
  // becomes [C, 1, ..., 1].
  if (slopeType.getRank() == 1 && type.getRank() > 2 &&
      slopeType.getDimSize(0) == type.getDimSize(1) &&
      slopeType.getDimSize(0) != type.getShape().back()) {
    SmallVector<int64_t> shape(type.getRank() - 1, 1);
    shape[0] = slopeType.getDimSize(0);
    slope = b.create<ReshapeOp>(
        loc, RankedTensorType::get(shape, type.getElementType()), slope);
  }
  std::optional<SmallVector<int64_t>> shape = broadcastShapes(
      {type.getShape(), cast<RankedTensorType>(slope.getType()).getShape()});
  if (!shape || ArrayRef<int64_t>(*shape) != type.getShape())
    return ctx.nodeError() << "slope " << slope.getType()
                           << " does not broadcast to X " << x.getType();
  Value scaled = b.create<MulOp>(loc, x, slope);
  ctx.define(0, positiveOr(b, loc, x, scaled));
  return success();
}

/// Elu (alpha), Selu (alpha, gamma) and Celu (alpha) as where(x > 0, ...,
/// alpha * (exp(x / beta) - 1)), scaled by gamma for Selu; their gradient at
/// 0 is the exponential branch's, as PyTorch's is.
static LogicalResult importElu(ImportContext &ctx) {
  auto x = floatInput(ctx);
  if (failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  StringRef op = ctx.node().op_type();
  double alpha =
      ctx.floatAttr("alpha", op == "Selu" ? 1.67326319217681884765625f : 1.0f);
  double beta = op == "Celu" ? alpha : 1.0;
  Value y = positiveOr(b, loc, *x, expBranch(b, loc, *x, alpha, beta));
  if (op == "Selu") {
    Type elem = cast<RankedTensorType>(x->getType()).getElementType();
    y = b.create<MulOp>(
        loc, y,
        scalarConstant(b, loc, elem,
                       ctx.floatAttr("gamma", 1.05070102214813232421875f)));
  }
  ctx.define(0, y);
  return success();
}

/// HardSigmoid(x) = clip(alpha * x + beta, 0, 1), its gradient alpha
/// strictly inside (PyTorch's rule): where(y <= 0, 0, where(y >= 1, 1, y)).
static LogicalResult importHardSigmoid(ImportContext &ctx) {
  auto x = floatInput(ctx);
  if (failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  auto type = cast<RankedTensorType>(x->getType());
  Type elem = type.getElementType();
  Value zero = scalarConstant(b, loc, elem, 0.0);
  Value one = scalarConstant(b, loc, elem, 1.0);
  Value y = b.create<AddOp>(
      loc,
      b.create<MulOp>(
          loc, *x, scalarConstant(b, loc, elem, ctx.floatAttr("alpha", 0.2f))),
      scalarConstant(b, loc, elem, ctx.floatAttr("beta", 0.5f)));
  y = b.create<WhereOp>(loc, type, b.create<GreaterOrEqualOp>(loc, y, one), one,
                        y);
  y = b.create<WhereOp>(loc, type, b.create<LessOrEqualOp>(loc, y, zero), zero,
                        y);
  ctx.define(0, y);
  return success();
}

/// Reciprocal(x) = 1 / x.
static LogicalResult importReciprocal(ImportContext &ctx) {
  auto x = floatInput(ctx);
  if (failed(x))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type elem = cast<RankedTensorType>(x->getType()).getElementType();
  ctx.define(0, b.create<DivOp>(loc, scalarConstant(b, loc, elem, 1.0), *x));
  return success();
}

/// The operands of a variadic operator (Max, Min, Sum, Mean; broadcasting)
/// combined by a left-to-right chain of the binary op, of the output's type
/// (one input: a copy).
template <typename OpT>
static FailureOr<Value> chainVariadic(ImportContext &ctx) {
  int n = ctx.node().input_size();
  if (n < 1)
    return ctx.nodeError() << "needs at least one input";
  if (failed(ctx.requireOperands(n, n)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  OpBuilder &b = ctx.builder();
  Value acc = ctx.operand(0);
  Type elem = cast<RankedTensorType>(acc.getType()).getElementType();
  for (int i = 1; i < n; ++i)
    if (cast<RankedTensorType>(ctx.operand(i).getType()).getElementType() !=
        elem)
      return ctx.nodeError() << "operands have different element types";
  if (n == 1)
    return Value(b.create<IdentityOp>(ctx.loc(), acc.getType(), acc));
  for (int i = 1; i < n - 1; ++i)
    acc = b.create<OpT>(ctx.loc(), acc, ctx.operand(i));
  return Value(b.create<OpT>(ctx.loc(), *type, acc, ctx.operand(n - 1)));
}

/// Max, Min and Sum: the chain of the binary op.
template <typename OpT>
static LogicalResult importVariadic(ImportContext &ctx) {
  FailureOr<Value> v = chainVariadic<OpT>(ctx);
  if (failed(v))
    return failure();
  ctx.define(0, *v);
  return success();
}

/// Mean: the Sum chain divided by the number of inputs (float operands).
static LogicalResult importMean(ImportContext &ctx) {
  FailureOr<Value> sum = chainVariadic<AddOp>(ctx);
  if (failed(sum))
    return failure();
  auto type = cast<RankedTensorType>(sum->getType());
  if (!isa<FloatType>(type.getElementType()))
    return ctx.nodeError() << "needs float operands, got " << type;
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  ctx.define(0,
             b.create<DivOp>(loc, type, *sum,
                             scalarConstant(b, loc, type.getElementType(),
                                            double(ctx.node().input_size()))));
  return success();
}

static LogicalResult importWhere(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 3)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  return ctx.finish(ctx.builder().create<WhereOp>(
      ctx.loc(), *type, ctx.operand(0), ctx.operand(1), ctx.operand(2)));
}

static LogicalResult importCast(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  return ctx.finish(
      ctx.builder().create<CastOp>(ctx.loc(), *type, ctx.operand(0)));
}

/// CastLike: a Cast to the element type of its second operand, whose value
/// is not used.
static LogicalResult importCastLike(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  return ctx.finish(
      ctx.builder().create<CastOp>(ctx.loc(), *type, ctx.operand(0)));
}

/// Dropout (ratio and training_mode are inputs since opset 12; both must be
/// constants). In inference, or with ratio 0, it is a copy of its
/// input and the mask is all true. In training mode it is a shardc.Dropout:
/// the site numbers the training-mode Dropout nodes in graph order, and the
/// batch axis and its outer factor come from inferBatchPosition. ONNX's `seed`
/// attribute is not used: every mask comes from shardrun's --seed.
static LogicalResult importDropout(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 3)))
    return failure();
  const onnx::NodeProto &node = ctx.node();
  OpBuilder &b = ctx.builder();
  bool training = false;
  if (ctx.operand(2)) {
    auto t = ctx.constInts(2, "training_mode");
    if (failed(t))
      return failure();
    training = !t->empty() && (*t)[0] != 0;
  }
  double ratio = 0.5;
  if (Value r = ctx.operand(1)) {
    DenseElementsAttr attr;
    if (!matchPattern(r, m_Constant(&attr)))
      return ctx.nodeError() << "ratio must be a compile-time constant";
    ratio = (*attr.value_begin<APFloat>()).convertToDouble();
  }
  bool wantMask = node.output_size() > 1 && !node.output(1).empty();
  Value x = ctx.operand(0);
  if (training && ratio != 0.0) {
    if (!(ratio > 0.0 && ratio < 1.0))
      return ctx.nodeError() << "ratio must be in [0, 1), got " << ratio;
    if (!isa<FloatType>(cast<RankedTensorType>(x.getType()).getElementType()))
      return ctx.nodeError() << "needs a float input, got " << x.getType();
    Type maskType;
    if (wantMask) {
      auto t = ctx.outType(1);
      if (failed(t))
        return failure();
      maskType = *t;
    }
    int64_t site = 0;
    for (Operation &op : *b.getInsertionBlock())
      site += isa<DropoutOp>(op);
    bool singleSample = false;
    std::optional<BatchPosition> batch = inferBatchPosition(x, &singleSample);
    if (!batch) {
      auto diag = ctx.nodeWarning();
      diag << "cannot tell which axis of the input runs over the batch; axis "
              "0 is assumed, and the dropout masks of this node will differ "
              "between world sizes if that is wrong";
      if (singleSample)
        diag << " (with a micro-batch of 1 a reshape cannot show which axis "
                "takes the samples; a model exported with a batch of 2 or "
                "more can)";
      batch = BatchPosition{0, 1};
    }
    return ctx.finish(b.create<DropoutOp>(
        ctx.loc(), x.getType(), maskType, x,
        b.getF32FloatAttr(static_cast<float>(ratio)), b.getI64IntegerAttr(site),
        b.getI64IntegerAttr(batch->axis), b.getI64IntegerAttr(batch->outer)));
  }
  auto id = b.create<IdentityOp>(ctx.loc(), x.getType(), x);
  if (failed(ctx.finish(id)))
    return failure();
  if (wantMask) {
    auto maskType = ctx.outType(1);
    if (failed(maskType))
      return failure();
    ctx.define(1, ctx.splat(*maskType, b.getBoolAttr(true)));
  }
  return success();
}

void registerElementwiseImporters(OpImporterTable &table) {
  table.add("Add", importBinary<AddOp>);
  table.add("Sub", importBinary<SubOp>);
  table.add("Mul", importBinary<MulOp>);
  table.add("Div", importBinary<DivOp>);
  table.add("Pow", importBinary<PowOp>);
  table.add("Where", importWhere);
  table.add("Sqrt", importUnary<SqrtOp>);
  table.add("Exp", importUnary<ExpOp>);
  table.add("Log", importUnary<LogOp>);
  table.add("Erf", importUnary<ErfOp>);
  table.add("Tanh", importUnary<TanhOp>);
  table.add("Sigmoid", importUnary<SigmoidOp>);
  table.add("Softplus", importUnary<SoftplusOp>);
  table.add("HardSwish", importHardSwish);
  table.add("Equal", importBinary<EqualOp>);
  table.add("Greater", importBinary<GreaterOp>);
  table.add("Less", importBinary<LessOp>);
  table.add("GreaterOrEqual", importBinary<GreaterOrEqualOp>);
  table.add("LessOrEqual", importBinary<LessOrEqualOp>);
  table.add("And", importBinary<AndOp>);
  table.add("Or", importBinary<OrOp>);
  table.add("Xor", importBinary<XorOp>);
  table.add("Not", importUnary<NotOp>);
  table.add("Max", importVariadic<MaxOp>);
  table.add("Min", importVariadic<MinOp>);
  table.add("Sum", importVariadic<AddOp>);
  table.add("Mean", importMean);
  table.add("Sign", importUnary<SignOp>);
  table.add("Floor", importUnary<FloorOp>);
  table.add("Ceil", importUnary<CeilOp>);
  table.add("Sin", importUnary<SinOp>);
  table.add("Cos", importUnary<CosOp>);
  table.add("Tan", importUnary<TanOp>);
  table.add("Asin", importUnary<AsinOp>);
  table.add("Acos", importUnary<AcosOp>);
  table.add("Atan", importUnary<AtanOp>);
  table.add("Sinh", importUnary<SinhOp>);
  table.add("Cosh", importUnary<CoshOp>);
  table.add("Asinh", importUnary<AsinhOp>);
  table.add("Acosh", importUnary<AcoshOp>);
  table.add("Atanh", importUnary<AtanhOp>);
  table.add("Clip", importClip);
  table.add("LeakyRelu", importLeakyRelu);
  table.add("PRelu", importPRelu);
  table.add("Elu", importElu);
  table.add("Selu", importElu);
  table.add("Celu", importElu);
  table.add("HardSigmoid", importHardSigmoid);
  table.add("Reciprocal", importReciprocal);
  table.add("Neg", importUnary<NegOp>);
  table.add("Abs", importUnary<AbsOp>);
  table.add("Relu", importUnary<ReluOp>);
  table.add("Identity", importUnary<IdentityOp>);
  table.add("Cast", importCast);
  table.add("CastLike", importCastLike);
  table.add("Dropout", importDropout);
}

} // namespace shardc
