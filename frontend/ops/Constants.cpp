//===- Constants.cpp - Import of ONNX constant producers ------------------===//
//
// Constant (every value_* form Shard supports), ConstantOfShape (element
// type from `value`, default float 0), Shape (with opset-15 start/end,
// normalized like Python slices) and Size. With static shapes all of them are
// constants at import. Range (torch.arange) is one too when its operands are
// constants, which is how models export it; otherwise its length comes from
// shape inference and its kernel runs. Mod (what torch.onnx's TorchScript
// exporter emits in the shape arithmetic of nn.MultiheadAttention) and
// ScatterND (its slice assignments, `mask[a:b, c:d] = v`, on tensors built
// from shapes: Swin Transformer's attention mask) are computed at import when
// their operands are constants; ScatterND with constant indices into computed
// tensors (`x[:, 0] = v` in a forward) is composed of Concat and Gather (or
// GatherGrad and Add). Tested by test/lit/import/constants.onnxtxt,
// mod.onnxtxt, scatternd.onnxtxt and scatternd-computed.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"
#include "passes/FoldConstants.h"

#include "mlir/IR/Matchers.h"

#include <algorithm>
#include <array>
#include <cmath>

using namespace mlir;

namespace shardc {

static LogicalResult importConstant(ImportContext &ctx) {
  const onnx::NodeProto &node = ctx.node();
  if (node.attribute_size() != 1)
    return ctx.nodeError() << "expects exactly one value attribute";
  OpBuilder &b = ctx.builder();
  const std::string &name = node.attribute(0).name();
  DenseElementsAttr value;
  if (name == "value") {
    const auto *a = ctx.attr(name, onnx::AttributeProto::TENSOR);
    if (!a || !(value = ctx.tensorAttr(a->t())))
      return failure();
  } else if (name == "value_float") {
    const auto *a = ctx.attr(name, onnx::AttributeProto::FLOAT);
    if (!a)
      return failure();
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   a->f());
  } else if (name == "value_floats") {
    const auto *a = ctx.attr(name, onnx::AttributeProto::FLOATS);
    if (!a)
      return failure();
    SmallVector<float> v(a->floats().begin(), a->floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({(int64_t)v.size()}, b.getF32Type()),
        ArrayRef<float>(v));
  } else if (name == "value_int") {
    const auto *a = ctx.attr(name, onnx::AttributeProto::INT);
    if (!a)
      return failure();
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   a->i());
  } else if (name == "value_ints") {
    const auto *a = ctx.attr(name, onnx::AttributeProto::INTS);
    if (!a)
      return failure();
    SmallVector<int64_t> v(a->ints().begin(), a->ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({(int64_t)v.size()}, b.getI64Type()),
        ArrayRef<int64_t>(v));
  } else {
    return ctx.nodeError() << "constant attribute '" << name
                           << "' is not supported";
  }
  ctx.define(0, b.create<ConstantOp>(ctx.loc(), value.getType(), value));
  return success();
}

/// ConstantOfShape: the shape operand is a constant here (folded shape
/// arithmetic), so the result type comes from it, also where ONNX's
/// inference left it symbolic (a shape computed through Neg).
static LogicalResult importConstantOfShape(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  OpBuilder &b = ctx.builder();
  Attribute elem;
  if (const auto *a = ctx.attr("value", onnx::AttributeProto::TENSOR)) {
    DenseElementsAttr v = ctx.tensorAttr(a->t());
    if (!v)
      return failure();
    if (v.getNumElements() != 1)
      return ctx.nodeError() << "value must hold one element";
    elem = *v.value_begin<Attribute>();
  } else {
    elem = b.getF32FloatAttr(0.0f);
  }
  if (ctx.hasStaticInferredShape(0)) {
    auto type = ctx.outType(0);
    if (failed(type))
      return failure();
    ctx.define(0, ctx.splat(*type, elem));
    return success();
  }
  auto dims = ctx.constInts(0, "input");
  if (failed(dims))
    return failure();
  auto type = ctx.checkedType(*dims, cast<TypedAttr>(elem).getType());
  if (failed(type))
    return failure();
  ctx.define(0, ctx.splat(*type, elem));
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

/// Size: the element count of the static input, an int64 scalar constant.
static LogicalResult importSize(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  OpBuilder &b = ctx.builder();
  auto type = RankedTensorType::get({}, b.getI64Type());
  int64_t n = cast<RankedTensorType>(ctx.operand(0).getType()).getNumElements();
  auto value = DenseElementsAttr::get(type, b.getI64IntegerAttr(n));
  ctx.define(0, b.create<ConstantOp>(ctx.loc(), type, value));
  return success();
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

/// Mod of two constants, with numpy broadcasting: for integers the
/// remainder takes the divisor's sign (fmod = 0, Python's %) or the
/// dividend's (fmod = 1, C's fmod); floats need fmod = 1.
static LogicalResult importMod(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  DenseElementsAttr a, b;
  if (!matchPattern(ctx.operand(0), m_Constant(&a)) ||
      !matchPattern(ctx.operand(1), m_Constant(&b)))
    return ctx.nodeError() << "only constant operands are supported (Mod is "
                              "computed at import, for shape arithmetic)";
  bool fmod = ctx.intAttr("fmod", 0) != 0;
  Type elem = type->getElementType();
  bool isFloat = isa<FloatType>(elem);
  if (isFloat && !fmod)
    return ctx.nodeError() << "fmod must be 1 for floating-point operands";
  if (!isFloat && !isa<IntegerType>(elem))
    return ctx.nodeError() << "operands of type " << elem
                           << " are not supported";
  // The element of `attr` that output element `flat` broadcasts from.
  ArrayRef<int64_t> outShape = type->getShape();
  auto sourceIndex = [&](DenseElementsAttr attr, int64_t flat) {
    if (attr.isSplat())
      return int64_t(0);
    ArrayRef<int64_t> shape = attr.getType().getShape();
    int64_t index = 0, stride = 1;
    size_t lead = outShape.size() - shape.size();
    for (int64_t d = outShape.size() - 1; d >= (int64_t)lead; --d) {
      int64_t coord = flat % outShape[d];
      flat /= outShape[d];
      int64_t size = shape[d - lead];
      index += (size == 1 ? 0 : coord) * stride;
      stride *= size;
    }
    return index;
  };
  // Mod has no kernel: its result is computed here, within the fold budget.
  std::optional<int64_t> bytes = tensorBytes(*type);
  if (!bytes || *bytes > ctx.foldLimit())
    return ctx.nodeError() << "the result " << *type
                           << " is larger than --fold-limit ("
                           << ctx.foldLimit()
                           << " bytes); Mod is computed at import, for shape "
                              "arithmetic";
  int64_t n = type->getNumElements();
  if (isFloat) {
    SmallVector<double> x, y;
    for (const APFloat &v : a.getValues<APFloat>())
      x.push_back(v.convertToDouble());
    for (const APFloat &v : b.getValues<APFloat>())
      y.push_back(v.convertToDouble());
    SmallVector<Attribute> out;
    for (int64_t i = 0; i < n; ++i)
      out.push_back(FloatAttr::get(
          elem, std::fmod(x[sourceIndex(a, i)], y[sourceIndex(b, i)])));
    auto value = DenseElementsAttr::get(*type, out);
    ctx.define(0, ctx.builder().create<ConstantOp>(ctx.loc(), *type, value));
    return success();
  }
  // Unsigned elements (uint8) are zero-extended: their remainders are the
  // same under both conventions.
  bool isUnsigned = cast<IntegerType>(elem).isUnsigned();
  auto ints = [&](DenseElementsAttr attr) {
    SmallVector<int64_t> v;
    for (const APInt &x : attr.getValues<APInt>())
      v.push_back(isUnsigned ? (int64_t)x.getZExtValue() : x.getSExtValue());
    return v;
  };
  SmallVector<int64_t> x = ints(a), y = ints(b);
  SmallVector<APInt> out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = x[sourceIndex(a, i)], q = y[sourceIndex(b, i)];
    if (q == 0)
      return ctx.nodeError() << "division by zero";
    // INT64_MIN % -1 overflows (and traps): the remainder is 0.
    int64_t r = q == -1 ? 0 : p % q;
    if (!fmod && r != 0 && ((r < 0) != (q < 0)))
      r += q;
    out.push_back(
        APInt(elem.getIntOrFloatBitWidth(), r, /*isSigned=*/!isUnsigned));
  }
  auto value = DenseElementsAttr::get(*type, out);
  ctx.define(0, ctx.builder().create<ConstantOp>(ctx.loc(), *type, value));
  return success();
}

/// ScatterND with constant indices into a computed tensor or with computed
/// updates (slice and index assignment, `x[:, 0] = v`, `index_put_`),
/// composed of ops that have gradients: `data` flattened over the indexed
/// axes to rows [R, rest...] and the updates to [U, rest...]; reduction none
/// is a Gather from their Concat that takes, per row, its update or else the
/// row of data (a written element passes no gradient to data; computed
/// updates must write each row once, constant ones may repeat, the last
/// winning); add adds the updates' scatter-add (GatherGrad) to the data.
static LogicalResult composeScatterND(ImportContext &ctx,
                                      DenseElementsAttr indices,
                                      StringRef reduction) {
  Value data = ctx.operand(0), updates = ctx.operand(2);
  auto type = cast<RankedTensorType>(data.getType());
  auto updType = cast<RankedTensorType>(updates.getType());
  Type elem = type.getElementType();
  if (reduction != "none" && reduction != "add")
    return ctx.nodeError() << "reduction '" << reduction
                           << "' needs constant data and updates (it is "
                              "computed at import); 'none' and 'add' take "
                              "computed ones";
  if (reduction == "add" && !isa<FloatType>(elem))
    return ctx.nodeError() << "reduction 'add' into a computed " << type
                           << " needs a float tensor";
  ArrayRef<int64_t> shape = type.getShape();
  auto rows = linearNdIndices(ctx, indices, shape);
  if (failed(rows))
    return failure();
  ArrayRef<int64_t> idxShape = indices.getType().getShape();
  int64_t k = idxShape.back(), numRows = 1;
  for (int64_t d = 0; d < k; ++d)
    numRows *= shape[d];
  SmallVector<int64_t> expected(idxShape.drop_back());
  expected.append(shape.begin() + k, shape.end());
  if (updType.getShape() != ArrayRef<int64_t>(expected) ||
      updType.getElementType() != elem)
    return ctx.nodeError() << "updates " << updType << " must be "
                           << RankedTensorType::get(expected, elem)
                           << " for data " << type;
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  auto rowsOf = [&](int64_t n) {
    SmallVector<int64_t> s = {n};
    s.append(shape.begin() + k, shape.end());
    return RankedTensorType::get(s, elem);
  };
  auto reshape = [&](Value v, RankedTensorType to) -> Value {
    if (cast<RankedTensorType>(v.getType()) == to)
      return v;
    return b.create<ReshapeOp>(loc, to, v);
  };
  auto indexConstant = [&](ArrayRef<int64_t> values) -> Value {
    auto t = RankedTensorType::get({int64_t(values.size())}, b.getI64Type());
    return b.create<ConstantOp>(loc, t, DenseElementsAttr::get(t, values));
  };
  // Without a reduction, a constant picks each of the data's rows.
  if (reduction == "none" &&
      failed(ctx.checkIndexTable(numRows, "picking the data's rows")))
    return failure();
  int64_t numUpdates = rows->size();
  Value flatData = reshape(data, rowsOf(numRows));
  Value flatUpdates = reshape(updates, rowsOf(numUpdates));
  Value out;
  if (reduction == "none") {
    SmallVector<int64_t> pick(numRows);
    for (int64_t r = 0; r < numRows; ++r)
      pick[r] = r;
    bool constantUpdates = matchPattern(updates, m_Constant());
    for (auto [t, row] : llvm::enumerate(*rows)) {
      if (pick[row] >= numRows && !constantUpdates)
        return ctx.nodeError()
               << "updates " << pick[row] - numRows << " and " << t
               << " write the same index (row " << row
               << " of the flattened data): ONNX leaves the order of "
                  "repeated writes undefined, and PyTorch gives each "
                  "repeated update the gradient of the element, which no "
                  "single write order has; write each element once";
      pick[row] = numRows + int64_t(t);
    }
    Value both = b.create<ConcatOp>(loc, rowsOf(numRows + numUpdates),
                                    ValueRange{flatData, flatUpdates}, 0);
    out =
        b.create<GatherOp>(loc, rowsOf(numRows), both, indexConstant(pick), 0);
  } else {
    Value added = b.create<GatherGradOp>(loc, rowsOf(numRows), flatUpdates,
                                         indexConstant(*rows), 0);
    out = b.create<AddOp>(loc, rowsOf(numRows), flatData, added);
  }
  ctx.define(0, reshape(out, type));
  return success();
}

/// ScatterND of constants, computed here: a copy of `data` with each slice
/// `data[indices[t]]` replaced by `updates[t]` (negative indices count from
/// the end; a repeated index keeps the last update), or combined with it by
/// `reduction` (add, mul, max, min). With constant indices and computed data
/// or updates, composeScatterND.
static LogicalResult importScatterND(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 3)))
    return failure();
  std::string reduction = ctx.stringAttr("reduction", "none");
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    return ctx.nodeError() << "unknown reduction '" << reduction << "'";
  DenseElementsAttr operands[3];
  if (!matchPattern(ctx.operand(1), m_Constant(&operands[1]))) {
    auto diag = ctx.nodeError()
                << "only constant indices are supported; indices ('"
                << ctx.node().input(1) << "') are computed";
    if (Operation *def = ctx.operand(1).getDefiningOp())
      diag << " by " << def->getName();
    else
      diag << " from a graph input";
    return diag;
  }
  for (int i : {0, 2})
    if (!matchPattern(ctx.operand(i), m_Constant(&operands[i])))
      return composeScatterND(ctx, operands[1], reduction);
  DenseElementsAttr data = operands[0], indices = operands[1],
                    updates = operands[2];
  auto type = cast<RankedTensorType>(data.getType());
  ArrayRef<int64_t> shape = type.getShape();
  auto rows = linearNdIndices(ctx, indices, shape);
  if (failed(rows))
    return failure();
  ArrayRef<int64_t> idxShape = indices.getType().getShape();
  int64_t k = idxShape.back();
  SmallVector<int64_t> expected(idxShape.drop_back());
  expected.append(shape.begin() + k, shape.end());
  if (updates.getType().getShape() != ArrayRef<int64_t>(expected))
    return ctx.nodeError() << "updates " << updates.getType()
                           << " must have shape [" << expected << "]";
  std::optional<int64_t> bytes = tensorBytes(type);
  if (!bytes || *bytes > ctx.foldLimit())
    return ctx.nodeError() << "the result " << type
                           << " is larger than --fold-limit ("
                           << ctx.foldLimit() << " bytes)";
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  int64_t slice = k < int64_t(shape.size()) ? strides[k - 1] : 1;
  // An update replaces the element, or is added, multiplied or compared
  // into it (reduction), in the indices' order.
  auto combine = [&](Attribute old, Attribute u) -> Attribute {
    if (reduction == "none")
      return u;
    if (auto f = dyn_cast<FloatAttr>(old)) {
      APFloat a = f.getValue(), b = cast<FloatAttr>(u).getValue();
      if (reduction == "add")
        a.add(b, APFloat::rmNearestTiesToEven);
      else if (reduction == "mul")
        a.multiply(b, APFloat::rmNearestTiesToEven);
      else
        a = reduction == "max" ? llvm::maximum(a, b) : llvm::minimum(a, b);
      return FloatAttr::get(f.getType(), a);
    }
    auto i = cast<IntegerAttr>(old);
    APInt a = i.getValue(), b = cast<IntegerAttr>(u).getValue();
    bool isUnsigned = i.getType().isUnsignedInteger();
    if (reduction == "add")
      a += b;
    else if (reduction == "mul")
      a *= b;
    else if (reduction == "max")
      a = (isUnsigned ? a.ult(b) : a.slt(b)) ? b : a;
    else
      a = (isUnsigned ? b.ult(a) : b.slt(a)) ? b : a;
    return IntegerAttr::get(i.getType(), a);
  };
  SmallVector<Attribute> out(data.getValues<Attribute>());
  SmallVector<Attribute> upd(updates.getValues<Attribute>());
  for (auto [t, row] : llvm::enumerate(*rows))
    for (int64_t j = 0; j < slice; ++j)
      out[row * slice + j] = combine(out[row * slice + j], upd[t * slice + j]);
  auto value = DenseElementsAttr::get(type, out);
  ctx.define(0, ctx.builder().create<ConstantOp>(ctx.loc(), type, value));
  return success();
}

void registerConstantsImporters(OpImporterTable &table) {
  table.add("Mod", importMod);
  table.add("ScatterND", importScatterND);
  table.add("Range", importRange);
  table.add("Constant", importConstant);
  table.add("ConstantOfShape", importConstantOfShape);
  table.add("Shape", importShape);
  table.add("Size", importSize);
}

} // namespace shardc
