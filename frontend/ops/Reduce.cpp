//===- Reduce.cpp - Import of ONNX reductions -----------------------------===//
//
// ReduceMean, ReduceSum, ReduceMax and ReduceMin, with their axes from the
// attribute (before opset 18; ReduceSum's since 13) or from a constant
// input: axes are made non-negative, sorted and deduplicated, no axes means
// every axis, and noop_with_empty_axes turns the node into a copy; ReduceL2
// and ReduceLogSumExp composed of those and elementwise ops; and ArgMax,
// with its axis made non-negative. Tested by test/lit/import/reduce.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

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

/// ReduceL2 = sqrt(ReduceSum(x * x)) and ReduceLogSumExp =
/// log(ReduceSum(exp(x - m))) + m with m = ReduceMax(x) (kept dims), so that
/// large x does not overflow; both composed of ops with gradient rules.
/// noop_with_empty_axes leaves the elementwise part (|x| as sqrt(x * x), and
/// x itself for LogSumExp) as ONNX's reference does.
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
  bool l2 = ctx.node().op_type() == "ReduceL2";
  SmallVector<int64_t> kept(xType.getShape());
  for (int64_t a : *axes)
    kept[a] = 1;
  auto keptType = RankedTensorType::get(kept, xType.getElementType());
  Value y;
  if (l2) {
    Value sq = b.create<MulOp>(loc, x, x);
    Value sum =
        noop
            ? sq
            : b.create<ReduceSumOp>(loc, keptType, sq, *axes, true).getResult();
    y = b.create<SqrtOp>(loc, sum.getType(), sum);
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

static LogicalResult importArgMax(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  Value in = ctx.operand(0);
  int64_t rank = cast<RankedTensorType>(in.getType()).getRank();
  if (rank == 0)
    return ctx.nodeError() << "input must have rank >= 1";
  auto axis = ctx.normAxis(ctx.intAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  return ctx.finish(ctx.builder().create<ArgMaxOp>(
      ctx.loc(), *type, in, *axis, ctx.intAttr("keepdims", 1) != 0,
      ctx.intAttr("select_last_index", 0) != 0));
}

void registerReduceImporters(OpImporterTable &table) {
  table.add("ArgMax", importArgMax);
  table.add("ReduceMean", importReduce<ReduceMeanOp>);
  table.add("ReduceSum", importReduce<ReduceSumOp>);
  table.add("ReduceMax", importReduce<ReduceMaxOp>);
  table.add("ReduceMin", importReduce<ReduceMinOp>);
  table.add("ReduceL2", importComposedReduce);
  table.add("ReduceLogSumExp", importComposedReduce);
}

} // namespace shardc
