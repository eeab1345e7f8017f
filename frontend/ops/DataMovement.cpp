//===- DataMovement.cpp - Import of ONNX data-movement operators ----------===//
//
// Flatten, Reshape, Squeeze and Unsqueeze (all shardc.Reshape with the
// static result type), Transpose, Gather, GatherElements, ScatterElements
// (and Scatter; with reduction add a GatherElementsGrad added to the data),
// Concat, Split, Slice and Expand; Tile (Reshape, Expand, Reshape) and Pad
// (Concat with constant blocks, or a Gather for edge and reflect) composed of
// them, OneHot (F.one_hot) as Where on Equal against a constant range, and
// GatherND with constant indices as a Gather along the indexed axes
// flattened, and DepthToSpace/SpaceToDepth as Reshape, Transpose, Reshape.
// Their shape, axes, split and slice-bound operands are compile-time
// constants consumed at import; the attributes carry what the kernels need:
// non-negative axes, Transpose's default perm (reversed dims), and Slice's
// clamped start and step for every dimension. Tested by
// test/lit/import/data-movement.onnxtxt.
//
// Resize (nn.Upsample, F.interpolate) becomes, per resized axis, a weighted
// sum of Gathers along that axis with constant indices and weights: nearest
// is one Gather, linear two, cubic four. Every resize mode is separable, so
// the N-d interpolation is the 1-d one applied axis after axis, and its
// gradient is that of Gather, Mul and Add. Tested by
// test/lit/import/resize.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/ModelValidator.h"
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

#include "mlir/IR/Matchers.h"

#include <algorithm>
#include <cmath>
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
      } else if (d > kMaxTensorElements) {
        return ctx.nodeError() << "shape entry " << d << " exceeds 2^46";
      } else if (d && llvm::MulOverflow(product, d, product)) {
        return ctx.nodeError() << "the shape's entries multiply past 2^63";
      } else if (!d) {
        product = 0;
      }
    }
    if (inferred >= 0) {
      if (product == 0 || in.getNumElements() % product)
        return ctx.nodeError() << "cannot infer the -1 entry of the shape";
      dims[inferred] = in.getNumElements() / product;
    }
    auto checked = ctx.checkedType(dims, in.getElementType());
    if (failed(checked))
      return failure();
    RankedTensorType type = *checked;
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

/// The axis of GatherElements and ScatterElements (`what`: gather, scatter),
/// normalized, after checking that data and indices have one rank (1 to 8)
/// and the indices are no larger than the data off the axis.
static FailureOr<int64_t> elementsAxis(ImportContext &ctx,
                                       RankedTensorType data,
                                       RankedTensorType idx, StringRef what) {
  if (data.getRank() < 1 || data.getRank() > 8 ||
      idx.getRank() != data.getRank())
    return ctx.nodeError() << "data (" << data << ") must have rank 1 to 8 "
                           << "and indices (" << idx << ") the same rank";
  auto axis = ctx.normAxis(ctx.intAttr("axis", 0), data.getRank());
  if (failed(axis))
    return failure();
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != *axis && idx.getDimSize(d) > data.getDimSize(d))
      return ctx.nodeError() << "indices " << idx << " are larger than data "
                             << data << " on axis " << d << " (only the "
                             << what << " axis may differ)";
  return *axis;
}

static LogicalResult importGatherElements(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto data = cast<RankedTensorType>(ctx.operand(0).getType());
  auto idx = cast<RankedTensorType>(ctx.operand(1).getType());
  auto axis = elementsAxis(ctx, data, idx, "gather");
  if (failed(axis))
    return failure();
  auto type = RankedTensorType::get(idx.getShape(), data.getElementType());
  return ctx.finish(ctx.builder().create<GatherElementsOp>(
      ctx.loc(), type, ctx.operand(0), ctx.operand(1), *axis));
}

/// ScatterElements (Scatter before opset 11; `Tensor.scatter_`,
/// `scatter_add_`): without a reduction the ScatterElements op (of repeated
/// indices the last update wins); with `add` the updates' scatter-add
/// (GatherElementsGrad, into zeros) added to the data. The indices may be
/// computed (a batch's labels).
static LogicalResult importScatterElements(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 3)))
    return failure();
  Value data = ctx.operand(0), updates = ctx.operand(2);
  auto dataType = cast<RankedTensorType>(data.getType());
  auto idx = cast<RankedTensorType>(ctx.operand(1).getType());
  auto updType = cast<RankedTensorType>(updates.getType());
  auto axis = elementsAxis(ctx, dataType, idx, "scatter");
  if (failed(axis))
    return failure();
  if (updType.getShape() != idx.getShape() ||
      updType.getElementType() != dataType.getElementType())
    return ctx.nodeError() << "updates (" << updType
                           << ") must have the indices' shape and the data's "
                              "element type (data "
                           << dataType << ", indices " << idx << ")";
  std::string reduction = ctx.stringAttr("reduction", "none");
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (reduction == "none")
    return ctx.finish(b.create<ScatterElementsOp>(
        loc, dataType, data, ctx.operand(1), updates, *axis));
  if (reduction != "add")
    return ctx.nodeError() << "reduction '" << reduction
                           << "' is not supported (none and add are)";
  if (!isa<FloatType>(dataType.getElementType()))
    return ctx.nodeError() << "reduction 'add' needs float data, got "
                           << dataType;
  Value added = b.create<GatherElementsGradOp>(loc, dataType, updates,
                                               ctx.operand(1), *axis);
  return ctx.finish(b.create<AddOp>(loc, dataType, data, added));
}

/// OneHot(indices, depth, values): Where(Equal(indices moved onto `axis`,
/// range(depth)), on, off), negative indices counting from the end; an index
/// outside [-depth, depth) gives an all-off row, as ONNX says.
static LogicalResult importOneHot(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 3)))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value idx = ctx.operand(0);
  auto idxType = cast<RankedTensorType>(idx.getType());
  if (isa<FloatType>(idxType.getElementType())) {
    // Float indices truncate toward zero, as ONNX's reference casts them.
    idxType = RankedTensorType::get(idxType.getShape(), b.getI64Type());
    idx = b.create<CastOp>(loc, idxType, idx);
  }
  auto idxElem = dyn_cast<IntegerType>(idxType.getElementType());
  if (!idxElem || idxElem.getWidth() == 1)
    return ctx.nodeError() << "indices must be numbers, got " << idxType;
  auto depth = ctx.constInts(1, "depth");
  if (failed(depth))
    return failure();
  if (depth->size() != 1 || (*depth)[0] < 1)
    return ctx.nodeError() << "depth must be one positive value";
  int64_t n = (*depth)[0];
  // The range it is compared with is a constant of `depth` indices.
  if (n > ctx.foldLimit() / 8)
    return ctx.nodeError() << "depth " << n << " needs a range constant larger "
                           << "than --fold-limit (" << ctx.foldLimit()
                           << " bytes)";
  auto axis = ctx.normAxis(ctx.intAttr("axis", -1), idxType.getRank() + 1);
  if (failed(axis))
    return failure();
  // The result shape follows from the constant depth even where ONNX's
  // inference left it symbolic; where it did not, the two agree.
  SmallVector<int64_t> outShape(idxType.getShape());
  outShape.insert(outShape.begin() + *axis, n);
  auto valsElem =
      cast<RankedTensorType>(ctx.operand(2).getType()).getElementType();
  auto type = ctx.checkedType(outShape, valsElem);
  if (failed(type))
    return failure();
  if (ctx.hasStaticInferredShape(0)) {
    auto inferred = ctx.outType(0);
    if (failed(inferred))
      return failure();
    if (*inferred != *type)
      return ctx.nodeError() << "shape inference gave " << *inferred
                             << ", depth and axis " << *type;
  }
  // indices with a 1 inserted at `axis`, against range(depth) laid along it.
  SmallVector<int64_t> moved(idxType.getShape()), line(type->getRank(), 1);
  moved.insert(moved.begin() + *axis, 1);
  line[*axis] = n;
  auto intType = [&](ArrayRef<int64_t> s) {
    return RankedTensorType::get(s, idxElem);
  };
  auto scalar = [&](int64_t v) -> Value {
    auto t = intType({});
    return b.create<ConstantOp>(
        loc, t, DenseElementsAttr::get(t, b.getIntegerAttr(idxElem, v)));
  };
  Value neg = b.create<LessOp>(loc, idx, scalar(0));
  Value wrapped = b.create<AddOp>(loc, idx, scalar(n));
  Value norm = b.create<WhereOp>(loc, idxType, neg, wrapped, idx);
  Value col = b.create<ReshapeOp>(loc, intType(moved), norm);
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < n; ++i)
    values.push_back(b.getIntegerAttr(idxElem, i));
  auto lineType = intType(line);
  Value range = b.create<ConstantOp>(loc, lineType,
                                     DenseElementsAttr::get(lineType, values));
  Value hit = b.create<EqualOp>(
      loc, RankedTensorType::get(type->getShape(), b.getI1Type()), col, range);
  // values = [off, on], of the output's element type.
  Value vals = ctx.operand(2);
  auto valsType = cast<RankedTensorType>(vals.getType());
  if (valsType.getNumElements() != 2 ||
      valsType.getElementType() != type->getElementType())
    return ctx.nodeError() << "values must be [off, on] of the output's type "
                           << type->getElementType() << ", got " << valsType;
  auto one = RankedTensorType::get({1}, valsType.getElementType());
  Value flat = b.create<ReshapeOp>(
      loc, RankedTensorType::get({2}, valsType.getElementType()), vals);
  Value off = b.create<SliceOp>(loc, one, flat, SmallVector<int64_t>{0},
                                SmallVector<int64_t>{1});
  Value on = b.create<SliceOp>(loc, one, flat, SmallVector<int64_t>{1},
                               SmallVector<int64_t>{1});
  return ctx.finish(b.create<WhereOp>(loc, *type, hit, on, off));
}

/// GatherND with constant indices (an index buffer, as Swin Transformer's
/// relative position bias reads its table): the indexed leading axes of
/// `data` flattened into one, and a Gather along it at the linear indices,
/// computed and checked here. batch_dims 0 only.
static LogicalResult importGatherND(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  if (ctx.intAttr("batch_dims", 0) != 0)
    return ctx.nodeError() << "batch_dims other than 0 is not supported";
  Value data = ctx.operand(0);
  auto dataType = cast<RankedTensorType>(data.getType());
  DenseElementsAttr indices;
  if (!matchPattern(ctx.operand(1), m_Constant(&indices)))
    return ctx.nodeError() << "only constant indices are supported";
  ArrayRef<int64_t> shape = dataType.getShape();
  auto linear = linearNdIndices(ctx, indices, shape);
  if (failed(linear))
    return failure();
  ArrayRef<int64_t> idxShape = indices.getType().getShape();
  int64_t k = idxShape.back(), rows = 1;
  for (int64_t d = 0; d < k; ++d)
    rows *= shape[d];
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  SmallVector<int64_t> flatShape = {rows};
  flatShape.append(shape.begin() + k, shape.end());
  Value flat = data;
  if (k != 1)
    flat = b.create<ReshapeOp>(
        loc, RankedTensorType::get(flatShape, dataType.getElementType()), data);
  SmallVector<int64_t> linShape(idxShape.drop_back());
  auto linType = RankedTensorType::get(linShape, b.getI64Type());
  Value lin = b.create<ConstantOp>(
      loc, linType,
      DenseElementsAttr::get(linType, ArrayRef<int64_t>(*linear)));
  SmallVector<int64_t> outShape(linShape);
  outShape.append(shape.begin() + k, shape.end());
  return ctx.finish(b.create<GatherOp>(
      loc, RankedTensorType::get(outShape, dataType.getElementType()), flat,
      lin, 0));
}

/// DepthToSpace (nn.PixelShuffle: mode CRD) and SpaceToDepth
/// (nn.PixelUnshuffle exports it as Reshape and Transpose already): a
/// Reshape into blocks, a Transpose, a Reshape back.
static LogicalResult importDepthSpace(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  Value x = ctx.operand(0);
  auto t = cast<RankedTensorType>(x.getType());
  int64_t b = ctx.intAttr("blocksize", 0);
  if (t.getRank() != 4)
    return ctx.nodeError() << "input must be 4-d (N, C, H, W), got " << t;
  int64_t N = t.getDimSize(0), C = t.getDimSize(1), H = t.getDimSize(2),
          W = t.getDimSize(3);
  bool toSpace = ctx.node().op_type() == "DepthToSpace";
  if (b < 1 || (toSpace && C % (b * b) != 0) ||
      (!toSpace && (H % b != 0 || W % b != 0)))
    return ctx.nodeError() << "blocksize " << b << " does not divide " << t;
  std::string mode = ctx.stringAttr("mode", "DCR");
  if (toSpace && mode != "DCR" && mode != "CRD")
    return ctx.nodeError() << "unknown mode '" << mode << "'";
  SmallVector<int64_t> blocks, perm, out;
  if (!toSpace) {
    blocks = {N, C, H / b, b, W / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    out = {N, C * b * b, H / b, W / b};
  } else if (mode == "DCR") {
    blocks = {N, b, b, C / (b * b), H, W};
    perm = {0, 3, 4, 1, 5, 2};
    out = {N, C / (b * b), H * b, W * b};
  } else {
    blocks = {N, C / (b * b), b, b, H, W};
    perm = {0, 1, 4, 2, 5, 3};
    out = {N, C / (b * b), H * b, W * b};
  }
  OpBuilder &bld = ctx.builder();
  Location loc = ctx.loc();
  Type elem = t.getElementType();
  Value v = bld.create<ReshapeOp>(loc, RankedTensorType::get(blocks, elem), x);
  SmallVector<int64_t> moved;
  for (int64_t p : perm)
    moved.push_back(blocks[p]);
  v = bld.create<TransposeOp>(loc, RankedTensorType::get(moved, elem), v, perm);
  ctx.define(0,
             bld.create<ReshapeOp>(loc, RankedTensorType::get(out, elem), v));
  return success();
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

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

namespace {
/// One term of a 1-d interpolation along an axis: output element o reads
/// input element index[o] with weight weight[o].
struct Tap {
  SmallVector<int64_t> index;
  SmallVector<double> weight;
};

/// Resize's attributes, and how one axis is resized.
struct ResizeAxis {
  std::string mode, coordMode, nearestMode;
  double cubicA = -0.75;
  bool excludeOutside = false;
  int64_t in = 0, out = 0;
  /// The scale, and the output length the coordinate transformation uses:
  /// scale * in, as ONNX's reference (fractional when scales are given).
  double scale = 1, outWidth = 1;
  double roiStart = 0, roiEnd = 1;
};
} // namespace

/// The input coordinate that output element `o` samples (ONNX's
/// coordinate_transformation_mode); `outside` is set where
/// tf_crop_and_resize samples outside the input.
static double sourceCoordinate(const ResizeAxis &a, int64_t o, bool &outside) {
  outside = false;
  const std::string &m = a.coordMode;
  if (m == "align_corners")
    return a.outWidth == 1 ? 0.0 : o * (a.in - 1) / (a.outWidth - 1);
  if (m == "asymmetric")
    return o / a.scale;
  if (m == "pytorch_half_pixel")
    return a.outWidth == 1 ? -0.5 : (o + 0.5) / a.scale - 0.5;
  if (m == "tf_half_pixel_for_nn")
    return (o + 0.5) / a.scale;
  if (m == "tf_crop_and_resize") {
    double span = (a.roiEnd - a.roiStart) * (a.in - 1);
    double x = a.outWidth == 1 ? span / 2 : o * span / (a.outWidth - 1);
    x += a.roiStart * (a.in - 1);
    outside = x < 0 || x > a.in - 1;
    return x;
  }
  return (o + 0.5) / a.scale - 0.5; // half_pixel
}

/// The taps of one resized axis; `outside` marks the output elements that
/// tf_crop_and_resize fills with extrapolation_value (their taps weigh 0).
static SmallVector<Tap> resizeTaps(const ResizeAxis &a,
                                   SmallVector<bool> &outside) {
  int64_t k = a.mode == "nearest" ? 1 : a.mode == "linear" ? 2 : 4;
  SmallVector<Tap> taps(k);
  for (Tap &t : taps) {
    t.index.resize(a.out);
    t.weight.resize(a.out);
  }
  outside.assign(a.out, false);
  auto clampIndex = [&](int64_t i) {
    return std::clamp<int64_t>(i, 0, a.in - 1);
  };
  for (int64_t o = 0; o < a.out; ++o) {
    bool out = false;
    double x = sourceCoordinate(a, o, out);
    outside[o] = out;
    double fl = std::floor(x);
    double r = x - fl;
    int64_t i0 = static_cast<int64_t>(fl);
    if (a.mode == "nearest") {
      bool up = false;
      if (r != 0) {
        const std::string &n = a.nearestMode;
        up = n == "round_prefer_ceil" ? r >= 0.5
             : n == "floor"           ? false
             : n == "ceil"            ? true
                                      : r > 0.5; // round_prefer_floor
      }
      taps[0].index[o] = clampIndex(i0 + up);
      taps[0].weight[o] = 1;
    } else if (a.mode == "linear") {
      taps[0].index[o] = clampIndex(i0);
      taps[0].weight[o] = 1 - r;
      taps[1].index[o] = clampIndex(i0 + 1);
      taps[1].weight[o] = r;
    } else {
      // Cubic convolution (Keys) with coefficient A over i0-1 .. i0+2.
      double A = a.cubicA, s = r + 1, t = 1 - r, u = 2 - r;
      double c[4] = {((A * s - 5 * A) * s + 8 * A) * s - 4 * A,
                     ((A + 2) * r - (A + 3)) * r * r + 1,
                     ((A + 2) * t - (A + 3)) * t * t + 1,
                     ((A * u - 5 * A) * u + 8 * A) * u - 4 * A};
      if (a.excludeOutside) {
        double sum = 0;
        for (int j = 0; j < 4; ++j) {
          int64_t i = i0 - 1 + j;
          if (i < 0 || i >= a.in)
            c[j] = 0;
          sum += c[j];
        }
        for (double &cj : c)
          cj /= sum;
      }
      for (int j = 0; j < 4; ++j) {
        taps[j].index[o] = clampIndex(i0 - 1 + j);
        taps[j].weight[o] = c[j];
      }
    }
    if (out)
      for (Tap &t : taps)
        t.weight[o] = 0;
  }
  // Taps that weigh nothing anywhere (e.g. integer coordinates) go.
  llvm::erase_if(taps, [](const Tap &t) {
    return llvm::all_of(t.weight, [](double w) { return w == 0; });
  });
  return taps;
}

/// Whether the taps copy the input unchanged.
static bool isIdentity(const ResizeAxis &a, ArrayRef<Tap> taps,
                       ArrayRef<bool> outside) {
  if (a.in != a.out || llvm::is_contained(outside, true))
    return false;
  for (int64_t o = 0; o < a.out; ++o) {
    double self = 0;
    for (const Tap &t : taps) {
      if (t.weight[o] != 0 && t.index[o] != o)
        return false;
      self += t.weight[o];
    }
    if (self != 1)
      return false;
  }
  return true;
}

/// The values of float constant input `i`.
static FailureOr<SmallVector<double>> constFloats(ImportContext &ctx, int i,
                                                  StringRef what) {
  Value v = ctx.operand(i);
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) ||
      !isa<FloatType>(attr.getElementType()))
    return ctx.nodeError() << what << " (input '" << ctx.node().input(i)
                           << "') must be a compile-time float constant";
  SmallVector<double> out;
  for (APFloat f : attr.getValues<APFloat>())
    out.push_back(f.convertToDouble());
  return out;
}

/// Tile(x, repeats) with constant repeats: x reshaped to [1, d0, 1, d1, ...],
/// expanded to [r0, d0, r1, d1, ...] and reshaped to [r0 * d0, ...]. The
/// gradient (Expand's sum, then Reshape) is the sum of the tiles.
static LogicalResult importTile(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  auto repeats = ctx.constInts(1, "repeats");
  if (failed(repeats))
    return failure();
  Value x = ctx.operand(0);
  auto xType = cast<RankedTensorType>(x.getType());
  if (repeats->size() != static_cast<size_t>(xType.getRank()))
    return ctx.nodeError() << "repeats has " << repeats->size()
                           << " entries for an input of rank "
                           << xType.getRank();
  SmallVector<int64_t> ones, expanded;
  for (auto [r, d] : llvm::zip(*repeats, xType.getShape())) {
    if (r < 0)
      return ctx.nodeError() << "repeats must not be negative, got " << r;
    ones.append({1, d});
    expanded.append({r, d});
  }
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (llvm::all_of(*repeats, [](int64_t r) { return r == 1; }))
    return ctx.finish(b.create<IdentityOp>(loc, xType, x));
  Type elem = xType.getElementType();
  Value v = b.create<ReshapeOp>(loc, RankedTensorType::get(ones, elem), x);
  v = b.create<ExpandOp>(loc, RankedTensorType::get(expanded, elem), v);
  return ctx.finish(b.create<ReshapeOp>(loc, *type, v));
}

/// Pad (pads from the attribute before opset 11, else a constant input;
/// opset 18's axes input), per padded axis: in constant mode a Concat of
/// constant blocks of the pad value around the data, so that the gradient
/// (Concat's) is the slice of the data; in edge and reflect mode a Gather
/// with constant indices (its gradient scatters back, summing the copies).
/// Negative pads and wrap mode are refused.
static LogicalResult importPad(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 4)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  std::string mode = ctx.stringAttr("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return ctx.nodeError() << "mode '" << mode
                           << "' is not supported (constant, reflect, edge)";
  Value x = ctx.operand(0);
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  SmallVector<int64_t> pads;
  if (ctx.opset() < 11) {
    pads = ctx.intsAttr("pads");
  } else {
    auto p = ctx.constInts(1, "pads");
    if (failed(p))
      return failure();
    pads = *p;
  }
  SmallVector<int64_t> axes;
  if (ctx.operand(3)) {
    auto a = ctx.constInts(3, "axes");
    if (failed(a))
      return failure();
    for (int64_t ax : *a) {
      auto n = ctx.normAxis(ax, rank);
      if (failed(n))
        return failure();
      axes.push_back(*n);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size())
    return ctx.nodeError() << "pads has " << pads.size() << " entries for "
                           << axes.size() << " axes";
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type elem = xType.getElementType();
  Attribute fill = b.getZeroAttr(elem);
  if (ctx.opset() < 11) {
    if (!isa<FloatType>(elem))
      return ctx.nodeError() << "needs a float input, got " << xType;
    fill = b.getFloatAttr(elem, ctx.floatAttr("value", 0.0f));
  } else if (Value c = ctx.operand(2)) {
    DenseElementsAttr attr;
    if (!matchPattern(c, m_Constant(&attr)) || attr.getNumElements() != 1 ||
        attr.getElementType() != elem)
      return ctx.nodeError() << "constant_value must be a compile-time scalar "
                                "of the input's element type";
    fill = *attr.value_begin<Attribute>();
  }
  Value v = x;
  for (auto [k, axisRef] : llvm::enumerate(axes)) {
    // A plain copy: lambdas below capture it (C++17 cannot capture a
    // structured binding).
    int64_t axis = axisRef;
    int64_t before = pads[k], after = pads[k + axes.size()];
    if (before < 0 || after < 0)
      return ctx.nodeError() << "negative pads (cropping) are not supported";
    if (before > kMaxTensorElements || after > kMaxTensorElements)
      return ctx.nodeError() << "pads " << before << " and " << after
                             << " exceed 2^46 elements";
    if (before == 0 && after == 0)
      continue;
    auto cur = cast<RankedTensorType>(v.getType());
    if (mode != "constant") {
      // One Gather along the axis with constant source indices: edge
      // repeats the border element, reflect mirrors without repeating it.
      int64_t n = cur.getDimSize(axis);
      if (n == 0 || (mode == "reflect" && (n < 2 || before >= n || after >= n)))
        return ctx.nodeError() << "cannot " << mode << "-pad an axis of size "
                               << n << " by " << before << " and " << after;
      if (failed(ctx.checkIndexTable(n + before + after,
                                     mode + "-padding axis " +
                                         std::to_string(axis))))
        return failure();
      SmallVector<int64_t> index;
      for (int64_t i = -before; i < n + after; ++i) {
        int64_t j = i;
        if (mode == "edge")
          j = std::clamp<int64_t>(i, 0, n - 1);
        else if (i < 0)
          j = -i;
        else if (i >= n)
          j = 2 * (n - 1) - i;
        index.push_back(j);
      }
      auto indexType =
          RankedTensorType::get({(int64_t)index.size()}, b.getI64Type());
      Value idx =
          b.create<ConstantOp>(loc, indexType,
                               cast<ElementsAttr>(DenseElementsAttr::get(
                                   indexType, ArrayRef<int64_t>(index))));
      SmallVector<int64_t> shape(cur.getShape());
      shape[axis] = index.size();
      v = b.create<GatherOp>(loc, RankedTensorType::get(shape, elem), v, idx,
                             axis);
      continue;
    }
    auto block = [&](int64_t n) -> Value {
      SmallVector<int64_t> shape(cur.getShape());
      shape[axis] = n;
      return ctx.splat(RankedTensorType::get(shape, elem), fill);
    };
    SmallVector<Value> parts;
    if (before)
      parts.push_back(block(before));
    parts.push_back(v);
    if (after)
      parts.push_back(block(after));
    SmallVector<int64_t> shape(cur.getShape());
    shape[axis] += before + after;
    v = b.create<ConcatOp>(loc, RankedTensorType::get(shape, elem), parts,
                           axis);
  }
  if (v == x)
    v = b.create<IdentityOp>(loc, xType, x);
  if (v.getType() != *type)
    return ctx.nodeError() << "padded type " << v.getType()
                           << " differs from the inferred " << *type;
  ctx.define(0, v);
  return success();
}

static LogicalResult importResize(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 4)))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value x = ctx.operand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t rank = xt.getRank();
  Type elem = xt.getElementType();

  ResizeAxis attrs;
  attrs.mode = ctx.stringAttr("mode", "nearest");
  attrs.coordMode =
      ctx.stringAttr("coordinate_transformation_mode", "half_pixel");
  attrs.nearestMode = ctx.stringAttr("nearest_mode", "round_prefer_floor");
  attrs.cubicA = ctx.floatAttr("cubic_coeff_a", -0.75f);
  attrs.excludeOutside = ctx.intAttr("exclude_outside", 0) != 0;
  double extrapolation = ctx.floatAttr("extrapolation_value", 0.0f);
  if (attrs.mode != "nearest" && attrs.mode != "linear" &&
      attrs.mode != "cubic")
    return ctx.nodeError() << "unknown mode '" << attrs.mode << "'";
  static const char *coordModes[] = {
      "half_pixel", "pytorch_half_pixel",   "align_corners",
      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (!llvm::is_contained(coordModes, attrs.coordMode))
    return ctx.nodeError() << "unknown coordinate_transformation_mode '"
                           << attrs.coordMode << "'";
  static const char *nearestModes[] = {"round_prefer_floor",
                                       "round_prefer_ceil", "floor", "ceil"};
  if (attrs.mode == "nearest" &&
      !llvm::is_contained(nearestModes, attrs.nearestMode))
    return ctx.nodeError() << "unknown nearest_mode '" << attrs.nearestMode
                           << "'";
  if ((attrs.mode != "nearest" || attrs.coordMode == "tf_crop_and_resize") &&
      !isa<FloatType>(elem))
    return ctx.nodeError() << attrs.mode << " mode with " << attrs.coordMode
                           << " needs a float input, got " << xt;

  // Scales (input 2) or sizes (input 3), one of them non-empty.
  auto numElements = [&](int i) -> int64_t {
    Value v = ctx.operand(i);
    return v ? cast<RankedTensorType>(v.getType()).getNumElements() : 0;
  };
  bool haveScales = numElements(2) > 0, haveSizes = numElements(3) > 0;
  if (haveScales == haveSizes)
    return ctx.nodeError() << "expects exactly one of scales and sizes";
  // The output shape follows from them (ONNX's shape inference stops at
  // scales computed in the graph, as PyTorch exports them; our folded
  // constants do not): sizes, or floor(in * scale) as ONNX computes it.
  SmallVector<double> scales;
  SmallVector<int64_t> outShape;
  if (haveScales) {
    auto s = constFloats(ctx, 2, "scales");
    if (failed(s))
      return failure();
    scales = *s;
    for (auto [d, sc] : llvm::enumerate(scales)) {
      if (d >= (size_t)rank)
        break;
      double n = std::floor(static_cast<float>(xt.getDimSize(d)) *
                            static_cast<float>(sc));
      if (!(n >= 0 && n <= double(kMaxTensorElements)))
        return ctx.nodeError() << "scale " << sc << " of axis " << d
                               << " gives " << n << " elements";
      outShape.push_back(static_cast<int64_t>(n));
    }
  } else {
    auto s = ctx.constInts(3, "sizes");
    if (failed(s))
      return failure();
    outShape = *s;
    for (auto [d, n] : llvm::enumerate(*s))
      scales.push_back(d < (size_t)rank ? (double)n / xt.getDimSize(d) : 0);
  }
  if ((int64_t)scales.size() != rank)
    return ctx.nodeError() << (haveScales ? "scales" : "sizes") << " must have "
                           << rank << " entries";
  auto checked = ctx.checkedType(outShape, elem);
  if (failed(checked))
    return failure();
  RankedTensorType type = *checked;
  SmallVector<double> roi;
  if (attrs.coordMode == "tf_crop_and_resize") {
    auto r = ctx.operand(1) ? constFloats(ctx, 1, "roi")
                            : FailureOr<SmallVector<double>>(failure());
    if (failed(r) || (int64_t)r->size() != 2 * rank)
      return ctx.nodeError() << "tf_crop_and_resize needs a constant roi of "
                             << 2 * rank << " values";
    roi = *r;
  }

  // Innermost axis first: with tf_crop_and_resize an outer axis's
  // extrapolation overrides what the inner axes computed, as in ONNX.
  Value cur = x;
  for (int64_t d = rank - 1; d >= 0; --d) {
    ResizeAxis a = attrs;
    a.in = xt.getDimSize(d);
    a.out = type.getDimSize(d);
    a.scale = scales[d];
    a.outWidth = haveSizes ? (double)a.out : a.scale * a.in;
    if (!roi.empty()) {
      a.roiStart = roi[d];
      a.roiEnd = roi[rank + d];
    }
    if (a.out == 0 || a.in == 0 || a.scale <= 0)
      return ctx.nodeError() << "cannot resize axis " << d << " from " << a.in
                             << " to " << a.out << " elements";
    if (failed(ctx.checkIndexTable(a.out, "resizing axis " + std::to_string(d) +
                                              " to " + std::to_string(a.out))))
      return failure();
    SmallVector<bool> outside;
    SmallVector<Tap> taps = resizeTaps(a, outside);
    if (isIdentity(a, taps, outside))
      continue;
    auto curType = cast<RankedTensorType>(cur.getType());
    SmallVector<int64_t> shape(curType.getShape());
    shape[d] = a.out;
    auto outType = RankedTensorType::get(shape, elem);
    // Weights and extrapolation broadcast from (out, 1, ..., 1).
    SmallVector<int64_t> wShape{a.out};
    wShape.append(rank - d - 1, 1);
    auto wType = RankedTensorType::get(wShape, elem);
    auto floatConst = [&](ArrayRef<double> v) -> Value {
      SmallVector<Attribute> attrsList;
      for (double w : v)
        attrsList.push_back(b.getFloatAttr(elem, w));
      return b.create<ConstantOp>(
          loc, wType,
          cast<ElementsAttr>(DenseElementsAttr::get(wType, attrsList)));
    };
    auto indexType = RankedTensorType::get({a.out}, b.getI64Type());
    Value acc;
    for (const Tap &t : taps) {
      Value idx =
          b.create<ConstantOp>(loc, indexType,
                               cast<ElementsAttr>(DenseElementsAttr::get(
                                   indexType, ArrayRef<int64_t>(t.index))));
      Value g = b.create<GatherOp>(loc, outType, cur, idx, d);
      if (llvm::any_of(t.weight, [](double w) { return w != 1; }))
        g = b.create<MulOp>(loc, g, floatConst(t.weight));
      acc = acc ? Value(b.create<AddOp>(loc, acc, g)) : g;
    }
    if (extrapolation != 0 && llvm::is_contained(outside, true)) {
      SmallVector<double> fill;
      for (bool o : outside)
        fill.push_back(o ? extrapolation : 0.0);
      Value e = b.create<ExpandOp>(loc, outType, floatConst(fill));
      acc = acc ? Value(b.create<AddOp>(loc, acc, e)) : e;
    }
    if (!acc) // every element is outside and the extrapolation is 0
      acc = ctx.splat(outType, b.getFloatAttr(elem, 0.0));
    cur = acc;
  }
  if (cur == x)
    cur = b.create<IdentityOp>(loc, xt, x);
  ctx.define(0, cur);
  return success();
}

void registerDataMovementImporters(OpImporterTable &table) {
  table.add("Resize", importResize);
  table.add("Trilu", importTrilu);
  table.add("Flatten", importReshapeLike);
  table.add("Reshape", importReshapeLike);
  table.add("Squeeze", importReshapeLike);
  table.add("Unsqueeze", importReshapeLike);
  table.add("Transpose", importTranspose);
  table.add("Gather", importGather);
  table.add("GatherElements", importGatherElements);
  table.add("ScatterElements", importScatterElements);
  table.add("Scatter", importScatterElements);
  table.add("GatherND", importGatherND);
  table.add("DepthToSpace", importDepthSpace);
  table.add("SpaceToDepth", importDepthSpace);
  table.add("OneHot", importOneHot);
  table.add("Concat", importConcat);
  table.add("Split", importSplit);
  table.add("Slice", importSlice);
  table.add("Expand", importExpand);
  table.add("Tile", importTile);
  table.add("Pad", importPad);
}

} // namespace shardc
