//===- Elementwise.cpp - Import of elementwise ONNX operators -------------===//
//
// Add, Sub, Mul, Div and Pow (numpy broadcasting: the result type comes from
// shape inference), Where, the unary operators (which keep their operand's
// type), Cast and CastLike (the result type is the target, or the second
// operand's element type) and Dropout, which in inference
// is a copy of its input with an all-true mask and in training a
// shardc.Dropout. Tested by test/lit/import/elementwise.onnxtxt and
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

/// HardSwish(x) = x * relu6(x + 3) / 6 (opset 14), composed of ops that have
/// gradient rules: relu6(y) = relu(y) - relu(y - 6), so the result is
/// x * (relu(x + 3) - relu(x - 3)) / 6. Its gradient is PyTorch's except at
/// x = -3 and x = 3 exactly.
static LogicalResult importHardSwish(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  Value x = ctx.operand(0);
  auto type = cast<RankedTensorType>(x.getType());
  if (!isa<FloatType>(type.getElementType()))
    return ctx.nodeError() << "needs a float input, got " << type;
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  auto scalar = [&](double v) -> Value {
    auto t = RankedTensorType::get({}, type.getElementType());
    return b.create<ConstantOp>(
        loc, t,
        cast<ElementsAttr>(DenseElementsAttr::get(
            t, b.getFloatAttr(type.getElementType(), v))));
  };
  Value three = scalar(3.0);
  Value upper = b.create<ReluOp>(loc, type, b.create<AddOp>(loc, x, three));
  Value lower = b.create<ReluOp>(loc, type, b.create<SubOp>(loc, x, three));
  Value relu6 = b.create<SubOp>(loc, upper, lower);
  Value y = b.create<DivOp>(loc, b.create<MulOp>(loc, x, relu6), scalar(6.0));
  ctx.define(0, y);
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
    auto ones = DenseElementsAttr::get(*maskType, true);
    ctx.define(1, b.create<ConstantOp>(ctx.loc(), *maskType, ones));
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
  table.add("Neg", importUnary<NegOp>);
  table.add("Abs", importUnary<AbsOp>);
  table.add("Relu", importUnary<ReluOp>);
  table.add("Identity", importUnary<IdentityOp>);
  table.add("Cast", importCast);
  table.add("CastLike", importCastLike);
  table.add("Dropout", importDropout);
}

} // namespace shardc
