//===- DataMovement.cpp - Import of ONNX data-movement operators ----------===//
//
// Flatten, Reshape, Squeeze and Unsqueeze (all shardc.Reshape with the
// static result type), Transpose, Gather, Concat, Split, Slice and Expand.
// Their shape, axes, split and slice-bound operands are compile-time
// constants consumed at import; the attributes carry what the kernels need:
// non-negative axes, Transpose's default perm (reversed dims), and Slice's
// clamped start and step for every dimension. Tested by
// test/lit/import/data-movement.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

#include "mlir/IR/Matchers.h"

#include <algorithm>
#include <limits>

using namespace mlir;

namespace shardc {

static LogicalResult importReshapeLike(ImportContext &ctx) {
  // Reshape(data, shape), Squeeze/Unsqueeze(data, axes?), Flatten(data):
  // with static shapes the inferred result type is the whole story.
  if (failed(ctx.requireOperands(1, 2)))
    return failure();
  const onnx::NodeProto &node = ctx.node();
  OpBuilder &b = ctx.builder();
  auto in = cast<RankedTensorType>(ctx.operand(0).getType());
  DenseElementsAttr target;
  bool targetKnown = node.op_type() == "Reshape" && ctx.operand(1) &&
                     matchPattern(ctx.operand(1), m_Constant(&target));
  bool typeKnown = ctx.hasInferredShape(0);
  if (node.op_type() == "Reshape" && (targetKnown || !typeKnown)) {
    // ONNX's data propagation gives up on some shape chains; our folded
    // constants do not.
    auto shape = ctx.constInts(1, "shape");
    if (failed(shape))
      return failure();
    SmallVector<int64_t> dims(*shape);
    bool allowZero = ctx.intAttr("allowzero", 0);
    int64_t product = 1, inferred = -1;
    for (auto [i, d] : llvm::enumerate(dims)) {
      if (d == 0 && !allowZero) {
        if ((int64_t)i >= in.getRank())
          return ctx.nodeError()
                 << "shape entry 0 at " << i << " has no input dim to copy";
        d = in.getDimSize(i);
      }
      if (d == -1) {
        if (inferred >= 0)
          return ctx.nodeError() << "shape has more than one -1";
        inferred = i;
      } else if (d < 0) {
        return ctx.nodeError() << "shape entry " << d << " is invalid";
      } else {
        product *= d;
      }
    }
    if (inferred >= 0) {
      if (product == 0 || in.getNumElements() % product)
        return ctx.nodeError() << "cannot infer the -1 entry of the shape";
      dims[inferred] = in.getNumElements() / product;
    }
    auto type = RankedTensorType::get(dims, in.getElementType());
    if (type.getNumElements() != in.getNumElements())
      return ctx.nodeError() << "cannot reshape " << in << " to " << type;
    if (typeKnown) {
      auto declared = ctx.outType(0);
      if (failed(declared))
        return failure();
      if (*declared != type)
        return ctx.nodeError() << "the shape input gives " << type
                               << " but the model declares " << *declared;
    }
    return ctx.finish(b.create<ReshapeOp>(ctx.loc(), type, ctx.operand(0)));
  }
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  return ctx.finish(b.create<ReshapeOp>(ctx.loc(), *type, ctx.operand(0)));
}

static LogicalResult importTrilu(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 2)))
    return failure();
  int64_t k = 0;
  if (ctx.operand(1)) {
    auto ks = ctx.constInts(1, "k");
    if (failed(ks))
      return failure();
    if (ks->size() != 1)
      return ctx.nodeError() << "k must hold one value";
    k = (*ks)[0];
  }
  Value in = ctx.operand(0);
  if (cast<RankedTensorType>(in.getType()).getRank() < 2)
    return ctx.nodeError() << "input must have rank >= 2";
  return ctx.finish(ctx.builder().create<TriluOp>(
      ctx.loc(), in.getType(), in, k, ctx.intAttr("upper", 1) != 0));
}

static LogicalResult importTranspose(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  int64_t rank = cast<RankedTensorType>(ctx.operand(0).getType()).getRank();
  SmallVector<int64_t> perm = ctx.intsAttr("perm");
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  return ctx.finish(ctx.builder().create<TransposeOp>(ctx.loc(), *type,
                                                      ctx.operand(0), perm));
}

static LogicalResult importGather(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  auto rank = cast<RankedTensorType>(ctx.operand(0).getType()).getRank();
  auto axis = ctx.normAxis(ctx.intAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  return ctx.finish(ctx.builder().create<GatherOp>(
      ctx.loc(), *type, ctx.operand(0), ctx.operand(1), *axis));
}

static LogicalResult importConcat(ImportContext &ctx) {
  const onnx::NodeProto &node = ctx.node();
  if (failed(ctx.requireOperands(1, std::max(1, node.input_size()))))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  SmallVector<Value> inputs;
  for (int i = 0; i < node.input_size(); ++i)
    if (Value v = ctx.operand(i))
      inputs.push_back(v);
  auto axis = ctx.normAxis(ctx.intAttr("axis", 0), type->getRank());
  if (failed(axis))
    return failure();
  return ctx.finish(
      ctx.builder().create<ConcatOp>(ctx.loc(), *type, inputs, *axis));
}

static LogicalResult importSplit(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 2)))
    return failure();
  SmallVector<Type> types;
  for (int i = 0; i < ctx.node().output_size(); ++i) {
    auto t = ctx.outType(i);
    if (failed(t))
      return failure();
    types.push_back(*t);
  }
  auto rank = cast<RankedTensorType>(ctx.operand(0).getType()).getRank();
  auto axis = ctx.normAxis(ctx.intAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  return ctx.finish(
      ctx.builder().create<SplitOp>(ctx.loc(), types, ctx.operand(0), *axis));
}

static LogicalResult importSlice(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 5)))
    return failure();
  auto in = cast<RankedTensorType>(ctx.operand(0).getType());
  int64_t rank = in.getRank();
  auto starts = ctx.constInts(1, "starts");
  if (failed(starts))
    return failure();
  auto ends = ctx.constInts(2, "ends");
  if (failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (ctx.operand(3)) {
    auto a = ctx.constInts(3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (ctx.operand(4)) {
    auto s = ctx.constInts(4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return ctx.nodeError() << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> fullStart(rank, 0), fullStep(rank, 1);
  SmallVector<int64_t> shape(in.getShape());
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = ctx.normAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t dim = in.getDimSize(*axis), step = steps[i];
    if (step == 0)
      return ctx.nodeError() << "slice step is zero";
    int64_t start = (*starts)[i], end = (*ends)[i];
    if (start < 0)
      start += dim;
    if (end < 0 && end > std::numeric_limits<int64_t>::min() + dim)
      end += dim;
    else if (end < 0)
      end = -1;
    int64_t count;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    }
    fullStart[*axis] = count ? start : 0;
    fullStep[*axis] = step;
    shape[*axis] = count;
  }
  // The bounds are constants, so the result shape is known here even where
  // ONNX's shape inference gave up; where it did not, the two must agree.
  auto type = RankedTensorType::get(shape, in.getElementType());
  if (ctx.hasInferredShape(0)) {
    auto inferred = ctx.outType(0);
    if (failed(inferred))
      return failure();
    if (*inferred != type)
      return ctx.nodeError() << "inferred slice shape disagrees with ONNX "
                                "shape inference";
  }
  return ctx.finish(ctx.builder().create<SliceOp>(
      ctx.loc(), type, ctx.operand(0), fullStart, fullStep));
}

static LogicalResult importExpand(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  return ctx.finish(
      ctx.builder().create<ExpandOp>(ctx.loc(), *type, ctx.operand(0)));
}

void registerDataMovementImporters(OpImporterTable &table) {
  table.add("Trilu", importTrilu);
  table.add("Flatten", importReshapeLike);
  table.add("Reshape", importReshapeLike);
  table.add("Squeeze", importReshapeLike);
  table.add("Unsqueeze", importReshapeLike);
  table.add("Transpose", importTranspose);
  table.add("Gather", importGather);
  table.add("Concat", importConcat);
  table.add("Split", importSplit);
  table.add("Slice", importSlice);
  table.add("Expand", importExpand);
}

} // namespace shardc
