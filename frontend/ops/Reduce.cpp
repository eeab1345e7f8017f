//===- Reduce.cpp - Import of ONNX reductions -----------------------------===//
//
// ReduceMean and ReduceSum, with their axes from the attribute (ReduceMean
// before opset 18) or from a constant input (ReduceSum): axes are made
// non-negative, sorted and deduplicated, no axes means every axis, and
// noop_with_empty_axes turns the node into a copy; and ArgMax, with its axis
// made non-negative. Tested by test/lit/import/reduce.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

#include <algorithm>

using namespace mlir;

namespace shardc {

template <typename OpT> static LogicalResult importReduce(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  OpBuilder &b = ctx.builder();
  Value in = ctx.operand(0);
  int64_t rank = cast<RankedTensorType>(in.getType()).getRank();
  SmallVector<int64_t> axes;
  if (ctx.operand(1)) {
    auto a = ctx.constInts(1, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    axes = ctx.intsAttr("axes");
  }
  if (axes.empty() && ctx.intAttr("noop_with_empty_axes", 0)) {
    return ctx.finish(b.create<IdentityOp>(ctx.loc(), in.getType(), in));
  }
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
  return ctx.finish(b.create<OpT>(ctx.loc(), *type, in, axes,
                                  ctx.intAttr("keepdims", 1) != 0));
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
}

} // namespace shardc
