//===- ConvPool.cpp - Import of ONNX convolution and pooling --------------===//
//
// Conv, MaxPool, AveragePool and GlobalAveragePool. Every window attribute
// is explicit after import: kernel_shape (from Conv's weight when absent),
// strides and dilations (default 1s), and pads (default 0s, begins then
// ends), with auto_pad resolved into pads. Tested by
// test/lit/import/conv-pool.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

#include <algorithm>

using namespace mlir;

namespace shardc {

namespace {
/// Window attributes shared by Conv and the pools, with auto_pad resolved.
struct Window {
  SmallVector<int64_t> kernel, strides, dilations, pads;
};
} // namespace

static FailureOr<Window> readWindow(ImportContext &ctx, RankedTensorType in,
                                    ArrayRef<int64_t> kernel, bool hasDilations,
                                    bool ceil) {
  Window w;
  size_t n = kernel.size();
  if (in.getRank() != (int64_t)n + 2)
    return ctx.nodeError() << "input of rank " << in.getRank() << " needs a "
                           << in.getRank() - 2 << "-d kernel_shape";
  w.kernel.assign(kernel.begin(), kernel.end());
  w.strides = ctx.intsAttr("strides");
  if (w.strides.empty())
    w.strides.assign(n, 1);
  w.dilations =
      hasDilations ? ctx.intsAttr("dilations") : SmallVector<int64_t>();
  if (w.dilations.empty())
    w.dilations.assign(n, 1);
  w.pads = ctx.intsAttr("pads");
  if (w.pads.empty())
    w.pads.assign(2 * n, 0);
  if (w.strides.size() != n || w.dilations.size() != n ||
      w.pads.size() != 2 * n)
    return ctx.nodeError() << "strides, dilations and pads do not match the "
                           << n << "-d kernel";
  std::string autoPad = ctx.stringAttr("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    w.pads.assign(2 * n, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t size = in.getDimSize(i + 2);
      int64_t out = (size + w.strides[i] - 1) / w.strides[i];
      int64_t eff = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total =
          std::max<int64_t>(0, (out - 1) * w.strides[i] + eff - size);
      int64_t small = total / 2, large = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : large;
      w.pads[i + n] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad != "NOTSET") {
    return ctx.nodeError() << "unknown auto_pad '" << autoPad << "'";
  }
  (void)ceil;
  return w;
}

static LogicalResult importConv(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 3)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  auto in = cast<RankedTensorType>(ctx.operand(0).getType());
  auto wt = cast<RankedTensorType>(ctx.operand(1).getType());
  SmallVector<int64_t> kernel = ctx.intsAttr("kernel_shape");
  if (kernel.empty())
    kernel.assign(wt.getShape().begin() + std::min<int64_t>(2, wt.getRank()),
                  wt.getShape().end());
  auto w = readWindow(ctx, in, kernel, true, false);
  if (failed(w))
    return failure();
  return ctx.finish(ctx.builder().create<ConvOp>(
      ctx.loc(), *type, ctx.operand(0), ctx.operand(1), ctx.operand(2),
      w->kernel, w->strides, w->dilations, w->pads, ctx.intAttr("group", 1)));
}

static LogicalResult importMaxPool(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  const onnx::NodeProto &node = ctx.node();
  auto in = cast<RankedTensorType>(ctx.operand(0).getType());
  int64_t ceil = ctx.intAttr("ceil_mode", 0);
  auto w = readWindow(ctx, in, ctx.intsAttr("kernel_shape"), true, ceil);
  if (failed(w))
    return failure();
  Type indicesType;
  if (node.output_size() > 1 && !node.output(1).empty()) {
    auto it = ctx.outType(1);
    if (failed(it))
      return failure();
    indicesType = *it;
  }
  auto op = ctx.builder().create<MaxPoolOp>(
      ctx.loc(), *type, indicesType, ctx.operand(0), w->kernel, w->strides,
      w->dilations, w->pads, ceil != 0, ctx.intAttr("storage_order", 0));
  return ctx.finish(op);
}

static LogicalResult importAveragePool(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  auto in = cast<RankedTensorType>(ctx.operand(0).getType());
  int64_t ceil = ctx.intAttr("ceil_mode", 0);
  auto w = readWindow(ctx, in, ctx.intsAttr("kernel_shape"), false, ceil);
  if (failed(w))
    return failure();
  return ctx.finish(ctx.builder().create<AveragePoolOp>(
      ctx.loc(), *type, ctx.operand(0), w->kernel, w->strides, w->pads,
      ceil != 0, ctx.intAttr("count_include_pad", 0) != 0));
}

static LogicalResult importGlobalAveragePool(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  return ctx.finish(ctx.builder().create<GlobalAveragePoolOp>(ctx.loc(), *type,
                                                              ctx.operand(0)));
}

void registerConvPoolImporters(OpImporterTable &table) {
  table.add("Conv", importConv);
  table.add("MaxPool", importMaxPool);
  table.add("AveragePool", importAveragePool);
  table.add("GlobalAveragePool", importGlobalAveragePool);
}

} // namespace shardc
