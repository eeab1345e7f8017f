//===- Constants.cpp - Import of ONNX constant producers ------------------===//
//
// Constant (every value_* form Shard supports), ConstantOfShape (element
// type from `value`, default float 0) and Shape (with opset-15 start/end,
// normalized like Python slices). With static shapes all of them are
// constants at import. Range (torch.arange) is one too when its operands are
// constants, which is how models export it; otherwise its length comes from
// shape inference and its kernel runs. Tested by
// test/lit/import/constants.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

#include <algorithm>

using namespace mlir;

namespace shardc {

static LogicalResult importConstant(ImportContext &ctx) {
  const onnx::NodeProto &node = ctx.node();
  if (node.attribute_size() != 1)
    return ctx.nodeError() << "expects exactly one value attribute";
  OpBuilder &b = ctx.builder();
  const onnx::AttributeProto &a = node.attribute(0);
  DenseElementsAttr value;
  if (a.name() == "value") {
    value = ctx.tensorAttr(a.t());
    if (!value)
      return failure();
  } else if (a.name() == "value_float") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   a.f());
  } else if (a.name() == "value_floats") {
    SmallVector<float> v(a.floats().begin(), a.floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({(int64_t)v.size()}, b.getF32Type()),
        ArrayRef<float>(v));
  } else if (a.name() == "value_int") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   a.i());
  } else if (a.name() == "value_ints") {
    SmallVector<int64_t> v(a.ints().begin(), a.ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({(int64_t)v.size()}, b.getI64Type()),
        ArrayRef<int64_t>(v));
  } else {
    return ctx.nodeError() << "constant attribute '" << a.name()
                           << "' is not supported";
  }
  ctx.define(0, b.create<ConstantOp>(ctx.loc(), value.getType(), value));
  return success();
}

static LogicalResult importConstantOfShape(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  OpBuilder &b = ctx.builder();
  Attribute elem;
  if (const auto *a = ctx.attr("value")) {
    DenseElementsAttr v = ctx.tensorAttr(a->t());
    if (!v)
      return failure();
    if (v.getNumElements() != 1)
      return ctx.nodeError() << "value must hold one element";
    elem = *v.value_begin<Attribute>();
  } else {
    elem = b.getF32FloatAttr(0.0f);
  }
  auto splat = DenseElementsAttr::get(*type, elem);
  ctx.define(0, b.create<ConstantOp>(ctx.loc(), *type, splat));
  return success();
}

static LogicalResult importShape(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  OpBuilder &b = ctx.builder();
  int64_t rank = cast<RankedTensorType>(ctx.operand(0).getType()).getRank();
  int64_t start = ctx.intAttr("start", 0);
  int64_t end = ctx.intAttr("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  auto op =
      b.create<ShapeOp>(ctx.loc(), *type, ctx.operand(0),
                        b.getI64IntegerAttr(start), b.getI64IntegerAttr(end));
  return ctx.finish(op);
}

static LogicalResult importRange(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 3)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  return ctx.finish(ctx.builder().create<RangeOp>(
      ctx.loc(), *type, ctx.operand(0), ctx.operand(1), ctx.operand(2)));
}

void registerConstantsImporters(OpImporterTable &table) {
  table.add("Range", importRange);
  table.add("Constant", importConstant);
  table.add("ConstantOfShape", importConstantOfShape);
  table.add("Shape", importShape);
}

} // namespace shardc
