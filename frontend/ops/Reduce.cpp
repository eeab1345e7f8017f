//===- Reduce.cpp - Import of ONNX reductions -----------------------------===//
//
// ReduceMean, ReduceSum, ReduceMax and ReduceMin, with their axes from the
// attribute (before opset 18; ReduceSum's since 13) or from a constant
// input: axes are made non-negative, sorted and deduplicated, no axes means
// every axis, and noop_with_empty_axes turns the node into a copy; ReduceL2,
// ReduceLogSumExp, ReduceSumSquare, ReduceL1 and ReduceLogSum composed of
// those and elementwise ops; ReduceProd computed at import from a constant
// operand (the exporters' element counts: Shape -> Gather -> ReduceProd in
// Tensor.var and Tensor.std); CumSum of floats as a MatMul with a triangle
// of ones along its axis; GlobalMaxPool as a ReduceMax over the spatial
// axes; and ArgMax, with its axis made non-negative, and ArgMin as the
// ArgMax of its input negated (floats) or subtracted from all ones (ints),
// and TopK as TopKIndices and a GatherElements of the values.
// Tested by test/lit/import/reduce.onnxtxt and reduce-composed.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"
#include "passes/FoldConstants.h"

#include "mlir/IR/Matchers.h"

#include <algorithm>

using namespace mlir;

namespace shardc {

/// The reduced axes of a reduction node: from the constant input 1 or the
/// `axes` attribute, made non-negative, sorted and unique; none meaning all.
/// Sets `noop` (and returns no axes) for an empty list under
/// noop_with_empty_axes.
static FailureOr<SmallVector<int64_t>> reduceAxes(ImportContext &ctx,
                                                  bool &noop) {
  int64_t rank = cast<RankedTensorType>(ctx.operand(0).getType()).getRank();
  SmallVector<int64_t> axes;
  if (ctx.operand(1)) {
    auto a = ctx.constInts(1, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    axes = ctx.intsAttr("axes");
  }
  noop = axes.empty() && ctx.intAttr("noop_with_empty_axes", 0);
  if (noop)
    return axes;
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  for (int64_t &a : axes) {
    auto n = ctx.normAxis(a, rank);
    if (failed(n))
      return failure();
    a = *n;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

template <typename OpT> static LogicalResult importReduce(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  OpBuilder &b = ctx.builder();
  Value in = ctx.operand(0);
  bool noop = false;
  auto axes = reduceAxes(ctx, noop);
  if (failed(axes))
    return failure();
  if (noop)
    return ctx.finish(b.create<IdentityOp>(ctx.loc(), in.getType(), in));
  return ctx.finish(b.create<OpT>(ctx.loc(), *type, in, *axes,
                                  ctx.intAttr("keepdims", 1) != 0));
}

/// ReduceL2 = sqrt(ReduceSum(x * x)), ReduceSumSquare = ReduceSum(x * x),
/// ReduceL1 = ReduceSum(|x|), ReduceLogSum = log(ReduceSum(x)) and
/// ReduceLogSumExp = log(ReduceSum(exp(x - m))) + m with m = ReduceMax(x)
/// (kept dims), so that large x does not overflow; all composed of ops with
/// gradient rules. noop_with_empty_axes leaves the elementwise part (|x| as
/// sqrt(x * x) for L2, x itself for LogSumExp) as ONNX's reference does.
static LogicalResult importComposedReduce(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value x = ctx.operand(0);
  auto xType = cast<RankedTensorType>(x.getType());
  if (!isa<FloatType>(xType.getElementType()))
    return ctx.nodeError() << "needs a float input, got " << xType;
  bool noop = false;
  auto axes = reduceAxes(ctx, noop);
  if (failed(axes))
    return failure();
  StringRef op = ctx.node().op_type();
  SmallVector<int64_t> kept(xType.getShape());
  for (int64_t a : *axes)
    kept[a] = 1;
  auto keptType = RankedTensorType::get(kept, xType.getElementType());
  auto sum = [&](Value v) -> Value {
    if (noop)
      return v;
    return b.create<ReduceSumOp>(loc, keptType, v, *axes, true);
  };
  Value y;
  if (op == "ReduceL2" || op == "ReduceSumSquare") {
    Value s = sum(b.create<MulOp>(loc, x, x));
    y = op == "ReduceL2" ? b.create<SqrtOp>(loc, s.getType(), s).getResult()
                         : s;
  } else if (op == "ReduceL1") {
    y = sum(b.create<AbsOp>(loc, xType, x));
  } else if (op == "ReduceLogSum") {
    Value s = sum(x);
    y = b.create<LogOp>(loc, s.getType(), s);
  } else if (noop) {
    y = b.create<IdentityOp>(loc, xType, x);
  } else {
    Value m = b.create<ReduceMaxOp>(loc, keptType, x, *axes, true);
    Value e =
        b.create<ExpOp>(loc, xType, b.create<SubOp>(loc, x, m).getResult());
    Value s = b.create<ReduceSumOp>(loc, keptType, e, *axes, true);
    y = b.create<AddOp>(loc, b.create<LogOp>(loc, keptType, s).getResult(), m);
  }
  if (y.getType() != *type)
    y = b.create<ReshapeOp>(loc, *type, y);
  ctx.define(0, y);
  return success();
}

/// ReduceProd of a constant, computed here (no kernel): the exporters
/// multiply a tensor's dims this way for an element count (Tensor.var,
/// Tensor.std, numel). The product of a computed tensor is an error.
static LogicalResult importReduceProd(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  DenseElementsAttr x;
  if (!matchPattern(ctx.operand(0), m_Constant(&x)))
    return ctx.nodeError()
           << "only a constant operand is supported (ReduceProd is computed "
              "at import, for element counts such as Tensor.var's)";
  bool noop = false;
  auto axes = reduceAxes(ctx, noop);
  if (failed(axes))
    return failure();
  Type elem = x.getElementType();
  if (!isa<FloatType, IntegerType>(elem))
    return ctx.nodeError() << "operands of type " << elem
                           << " are not supported";
  ArrayRef<int64_t> in = x.getType().getShape();
  std::optional<int64_t> bytes = tensorBytes(*type);
  if (!bytes || *bytes > ctx.foldLimit())
    return ctx.nodeError() << "the result " << *type
                           << " is larger than --fold-limit ("
                           << ctx.foldLimit() << " bytes)";
  // out[j] = product of the x[i] whose coordinates off the axes give j.
  int64_t n = type->getNumElements();
  auto outIndex = [&](int64_t flat) {
    int64_t index = 0, stride = 1;
    for (int64_t d = int64_t(in.size()) - 1; d >= 0; --d) {
      int64_t coord = flat % in[d];
      flat /= in[d];
      if (noop || !llvm::is_contained(*axes, d)) {
        index += coord * stride;
        stride *= in[d];
      }
    }
    return index;
  };
  SmallVector<Attribute> out;
  if (isa<FloatType>(elem)) {
    SmallVector<double> prod(n, 1.0);
    for (auto [i, v] : llvm::enumerate(x.getValues<APFloat>()))
      prod[outIndex(i)] *= v.convertToDouble();
    for (double p : prod)
      out.push_back(FloatAttr::get(elem, p));
  } else {
    SmallVector<APInt> prod(n, APInt(elem.getIntOrFloatBitWidth(), 1));
    for (auto [i, v] : llvm::enumerate(x.getValues<APInt>()))
      prod[outIndex(i)] *= v;
    for (const APInt &p : prod)
      out.push_back(IntegerAttr::get(elem, p));
  }
  auto value = DenseElementsAttr::get(*type, out);
  ctx.define(0, ctx.builder().create<ConstantOp>(ctx.loc(), *type, value));
  return success();
}

/// The largest axis CumSum composes: its L x L triangle of ones takes L^2
/// floats (64 MiB at 4096).
constexpr int64_t kMaxCumSumLength = 4096;

/// CumSum (torch.cumsum) of a float tensor: the axis moved last, a MatMul
/// with the L x L triangle T (T[i][j] = 1 where input i adds into output j:
/// i <= j, i < j when exclusive, i >= j / i > j when reversed), moved back.
/// Its gradient is the MatMul's. An integer tensor only when constant
/// (position ids from a constant range): then the sums are computed here.
static LogicalResult importCumSum(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  Value x = ctx.operand(0);
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  auto axisValues = ctx.constInts(1, "axis");
  if (failed(axisValues))
    return failure();
  if (axisValues->size() != 1)
    return ctx.nodeError() << "axis must be one value, got "
                           << axisValues->size();
  auto axis = ctx.normAxis((*axisValues)[0], rank);
  if (failed(axis))
    return failure();
  bool exclusive = ctx.intAttr("exclusive", 0) != 0;
  bool reverse = ctx.intAttr("reverse", 0) != 0;
  int64_t L = xType.getDimSize(*axis);
  auto adds = [&](int64_t i, int64_t j) {
    if (reverse)
      return exclusive ? i > j : i >= j;
    return exclusive ? i < j : i <= j;
  };
  Type elem = xType.getElementType();
  DenseElementsAttr constant;
  if (!isa<FloatType>(elem)) {
    if (!matchPattern(x, m_Constant(&constant)) || !isa<IntegerType>(elem))
      return ctx.nodeError()
             << "only float tensors, or constant integer ones, are "
                "supported; got a computed "
             << xType;
    // A running sum along each line of the axis (reversed: from its end),
    // stored before the element is added when exclusive.
    SmallVector<APInt> in(constant.getValues<APInt>());
    int64_t inner = 1;
    for (int64_t d = *axis + 1; d < rank; ++d)
      inner *= xType.getDimSize(d);
    unsigned width = elem.getIntOrFloatBitWidth();
    SmallVector<APInt> out(in.size(), APInt(width, 0));
    for (int64_t base = 0; base < int64_t(in.size()); base += L * inner)
      for (int64_t lane = 0; lane < inner; ++lane) {
        APInt sum(width, 0);
        for (int64_t step = 0; step < L; ++step) {
          int64_t at = base + lane + (reverse ? L - 1 - step : step) * inner;
          if (!exclusive)
            sum += in[at];
          out[at] = sum;
          if (exclusive)
            sum += in[at];
        }
      }
    auto value = DenseElementsAttr::get(*type, out);
    ctx.define(0, ctx.builder().create<ConstantOp>(ctx.loc(), *type, value));
    return success();
  }
  if (L > kMaxCumSumLength)
    return ctx.nodeError() << "the axis has " << L
                           << " elements; CumSum composes a MatMul with an L x "
                              "L triangle, supported up to L = "
                           << kMaxCumSumLength;
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  SmallVector<int64_t> moved;
  for (int64_t p : perm)
    moved.push_back(xType.getDimSize(p));
  bool last = *axis == rank - 1;
  Value v = last ? x
                 : b.create<TransposeOp>(
                        loc, RankedTensorType::get(moved, elem), x, perm)
                       .getResult();
  SmallVector<Attribute> tri;
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j)
      tri.push_back(FloatAttr::get(elem, adds(i, j) ? 1.0 : 0.0));
  auto triType = RankedTensorType::get({L, L}, elem);
  Value t =
      b.create<ConstantOp>(loc, triType, DenseElementsAttr::get(triType, tri));
  Value y = b.create<MatMulOp>(loc, v.getType(), v, t);
  if (!last) {
    SmallVector<int64_t> back(rank);
    for (int64_t d = 0; d < rank; ++d)
      back[perm[d]] = d;
    y = b.create<TransposeOp>(loc, xType, y, back);
  }
  ctx.define(0, y);
  return success();
}

/// GlobalMaxPool (nn.AdaptiveMaxPool2d(1)): ReduceMax over the spatial axes,
/// kept.
static LogicalResult importGlobalMaxPool(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  Value x = ctx.operand(0);
  auto t = cast<RankedTensorType>(x.getType());
  if (t.getRank() < 3)
    return ctx.nodeError() << "input must be (N, C, spatial...), got " << t;
  SmallVector<int64_t> axes, shape(t.getShape());
  for (int64_t d = 2; d < t.getRank(); ++d) {
    axes.push_back(d);
    shape[d] = 1;
  }
  return ctx.finish(ctx.builder().create<ReduceMaxOp>(
      ctx.loc(), RankedTensorType::get(shape, t.getElementType()), x, axes,
      true));
}

/// ArgMax, and ArgMin as the ArgMax of its input in reversed order: the
/// negation for floats (exact; a NaN stays the pick, the first one, as in
/// numpy's argmin) and all-ones minus x for integers (`~x`: exact, no
/// overflow at the type's minimum, ties kept).
static LogicalResult importArgMax(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  Value in = ctx.operand(0);
  auto inType = cast<RankedTensorType>(in.getType());
  if (ctx.node().op_type() == "ArgMin") {
    OpBuilder &b = ctx.builder();
    Type elem = inType.getElementType();
    auto intElem = dyn_cast<IntegerType>(elem);
    if (isa<FloatType>(elem)) {
      in = b.create<NegOp>(ctx.loc(), inType, in);
    } else if (intElem && intElem.getWidth() > 1) {
      auto scalar = RankedTensorType::get({}, elem);
      Value ones = b.create<ConstantOp>(
          ctx.loc(), scalar,
          DenseElementsAttr::get(scalar,
                                 APInt::getAllOnes(intElem.getWidth())));
      in = b.create<SubOp>(ctx.loc(), inType, ones, in);
    } else {
      return ctx.nodeError()
             << "input must be float or integer, got " << inType;
    }
  }
  int64_t rank = inType.getRank();
  if (rank == 0)
    return ctx.nodeError() << "input must have rank >= 1";
  auto axis = ctx.normAxis(ctx.intAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  return ctx.finish(ctx.builder().create<ArgMaxOp>(
      ctx.loc(), *type, in, *axis, ctx.intAttr("keepdims", 1) != 0,
      ctx.intAttr("select_last_index", 0) != 0));
}

/// TopK (`torch.topk`; `torch.sort` is TopK over the whole axis): its
/// Indices a TopKIndices (sorted best first whatever `sorted` says, ties to
/// the lower index), its Values a GatherElements of the input at them, which
/// carries the gradient. K is a constant (an input from opset 10, before it
/// the attribute `k`).
static LogicalResult importTopK(ImportContext &ctx) {
  int opset = ctx.opset();
  if (failed(ctx.requireOperands(opset >= 10 ? 2 : 1, opset >= 10 ? 2 : 1)))
    return failure();
  Value in = ctx.operand(0);
  auto inType = cast<RankedTensorType>(in.getType());
  int64_t rank = inType.getRank();
  if (rank == 0)
    return ctx.nodeError() << "input must have rank >= 1";
  auto axis = ctx.normAxis(ctx.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  int64_t k = ctx.intAttr("k", -1);
  if (opset >= 10) {
    auto ks = ctx.constInts(1, "K");
    if (failed(ks))
      return failure();
    if (ks->size() != 1)
      return ctx.nodeError() << "K must hold one value, got " << ks->size();
    k = (*ks)[0];
  }
  int64_t len = inType.getDimSize(*axis);
  if (k < 0 || k > len)
    return ctx.nodeError() << "K " << k << " is out of range [0, " << len
                           << "] for axis " << *axis << " of " << inType;
  Type elem = inType.getElementType();
  if (!elem.isF32() && !elem.isF64() && !elem.isSignlessInteger(64) &&
      !elem.isSignlessInteger(32))
    return ctx.nodeError() << "input must be f32, f64, i64 or i32, got "
                           << inType;
  SmallVector<int64_t> shape(inType.getShape());
  shape[*axis] = k;
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  auto idxType = RankedTensorType::get(shape, b.getI64Type());
  Value idx = b.create<TopKIndicesOp>(loc, idxType, in, *axis, k,
                                      ctx.intAttr("largest", 1) != 0);
  Value values = b.create<GatherElementsOp>(
      loc, RankedTensorType::get(shape, elem), in, idx, *axis);
  ctx.define(0, values);
  ctx.define(1, idx);
  return success();
}

void registerReduceImporters(OpImporterTable &table) {
  table.add("ArgMax", importArgMax);
  table.add("ArgMin", importArgMax);
  table.add("TopK", importTopK);
  table.add("ReduceMean", importReduce<ReduceMeanOp>);
  table.add("ReduceSum", importReduce<ReduceSumOp>);
  table.add("ReduceMax", importReduce<ReduceMaxOp>);
  table.add("ReduceMin", importReduce<ReduceMinOp>);
  table.add("ReduceL2", importComposedReduce);
  table.add("ReduceLogSumExp", importComposedReduce);
  table.add("ReduceSumSquare", importComposedReduce);
  table.add("ReduceL1", importComposedReduce);
  table.add("ReduceLogSum", importComposedReduce);
  table.add("ReduceProd", importReduceProd);
  table.add("CumSum", importCumSum);
  table.add("GlobalMaxPool", importGlobalMaxPool);
}

} // namespace shardc
