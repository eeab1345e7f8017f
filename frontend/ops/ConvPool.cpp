//===- ConvPool.cpp - Import of ONNX convolution and pooling --------------===//
//
// Conv, ConvTranspose, MaxPool, AveragePool and GlobalAveragePool. Every
// window attribute is explicit after import: kernel_shape (from Conv's weight
// when absent), strides and dilations (default 1s), and pads (default 0s,
// begins then ends), with auto_pad resolved into pads. ConvTranspose is the
// transposed convolution that Conv's input gradient computes, so it imports
// as shardc.ConvGradInput (plus its bias). Tested by
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

/// ConvTranspose(X, W, B?) with X (N, C, d...) and W (C, M/group, k...): the
/// gradient of a Conv with weight W with respect to its (N, M, o...) input,
/// i.e. shardc.ConvGradInput with X in the gradient's place, plus the bias.
/// Its pads crop the full transposed convolution (output_padding and
/// output_shape lengthen it); output_shape and SAME auto_pad give pads as
/// ONNX's reference does. Negative pads (an output_shape longer than the full
/// result) append zeros, which a Concat adds.
static LogicalResult importConvTranspose(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 3)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value x = ctx.operand(0), w = ctx.operand(1), bias = ctx.operand(2);
  auto xt = cast<RankedTensorType>(x.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  int64_t rank = xt.getRank();
  if (rank < 3 || wt.getRank() != rank)
    return ctx.nodeError() << "input and weight must have one rank >= 3, got "
                           << xt << " and " << wt;
  size_t n = rank - 2;
  int64_t group = ctx.intAttr("group", 1);
  if (group < 1 || xt.getDimSize(1) != wt.getDimSize(0) ||
      xt.getDimSize(1) % group != 0)
    return ctx.nodeError() << "weight " << wt << " does not fit input " << xt
                           << " with group " << group;
  SmallVector<int64_t> kernel(wt.getShape().drop_front(2));
  SmallVector<int64_t> strides = ctx.intsAttr("strides");
  SmallVector<int64_t> dilations = ctx.intsAttr("dilations");
  SmallVector<int64_t> pads = ctx.intsAttr("pads");
  SmallVector<int64_t> outputPadding = ctx.intsAttr("output_padding");
  if (strides.empty())
    strides.assign(n, 1);
  if (dilations.empty())
    dilations.assign(n, 1);
  if (pads.empty())
    pads.assign(2 * n, 0);
  if (outputPadding.empty())
    outputPadding.assign(n, 0);
  SmallVector<int64_t> kernelAttr = ctx.intsAttr("kernel_shape");
  if ((!kernelAttr.empty() && kernelAttr != kernel) || strides.size() != n ||
      dilations.size() != n || pads.size() != 2 * n ||
      outputPadding.size() != n)
    return ctx.nodeError() << "kernel_shape, strides, dilations, pads and "
                              "output_padding do not match the "
                           << n << "-d weight";
  std::string autoPad = ctx.stringAttr("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return ctx.nodeError() << "unknown auto_pad '" << autoPad << "'";
  bool fromOutput = ctx.hasAttr("output_shape") || autoPad == "SAME_UPPER" ||
                    autoPad == "SAME_LOWER";
  // The full result along axis i has (in - 1) * stride + span elements; the
  // output takes `out` of them from pads[i] on.
  SmallVector<int64_t> inner(type->getShape());
  SmallVector<int64_t> convPads(2 * n), zerosBegin(n), zerosEnd(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t in = xt.getDimSize(i + 2), out = type->getDimSize(i + 2);
    int64_t full = (in - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1;
    int64_t begin = pads[i], end = pads[i + n];
    if (autoPad == "VALID") {
      begin = end = 0;
    } else if (fromOutput) {
      int64_t total = full + outputPadding[i] - out;
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); // floor
      begin = autoPad == "SAME_UPPER" ? half : total - half;
      end = total - begin;
    }
    if (full + outputPadding[i] - begin - end != out)
      return ctx.nodeError() << "pads, output_padding and output_shape give "
                             << full + outputPadding[i] - begin - end
                             << " elements on spatial axis " << i
                             << ", but shape inference says " << out;
    zerosBegin[i] = std::max<int64_t>(0, -begin);
    zerosEnd[i] = std::max<int64_t>(0, -end);
    convPads[i] = std::max<int64_t>(0, begin);
    convPads[i + n] = std::max<int64_t>(0, end);
    inner[i + 2] = out - zerosBegin[i] - zerosEnd[i];
    // Conv's output size of the inner result must give back `in`: output
    // padding beyond the stride would need rows no input reaches.
    int64_t span = (kernel[i] - 1) * dilations[i] + 1;
    if (outputPadding[i] < 0 ||
        (inner[i + 2] + convPads[i] + convPads[i + n] - span) / strides[i] +
                1 !=
            in)
      return ctx.nodeError()
             << "output_padding " << outputPadding[i] << " on spatial axis "
             << i << " must be smaller than the stride " << strides[i];
  }
  Type elem = xt.getElementType();
  Value y =
      b.create<ConvGradInputOp>(loc, RankedTensorType::get(inner, elem), x, w,
                                kernel, strides, dilations, convPads, group);
  for (size_t i = 0; i < n; ++i) {
    if (!zerosBegin[i] && !zerosEnd[i])
      continue;
    auto cur = cast<RankedTensorType>(y.getType());
    SmallVector<Value> parts;
    auto zeros = [&](int64_t count) -> Value {
      SmallVector<int64_t> shape(cur.getShape());
      shape[i + 2] = count;
      return ctx.splat(RankedTensorType::get(shape, elem),
                       b.getFloatAttr(elem, 0.0));
    };
    if (zerosBegin[i])
      parts.push_back(zeros(zerosBegin[i]));
    parts.push_back(y);
    if (zerosEnd[i])
      parts.push_back(zeros(zerosEnd[i]));
    SmallVector<int64_t> shape(cur.getShape());
    shape[i + 2] += zerosBegin[i] + zerosEnd[i];
    y = b.create<ConcatOp>(loc, RankedTensorType::get(shape, elem), parts,
                           i + 2);
  }
  if (bias) {
    int64_t m = type->getDimSize(1);
    auto bt = cast<RankedTensorType>(bias.getType());
    if (bt.getShape() != ArrayRef<int64_t>{m} || bt.getElementType() != elem)
      return ctx.nodeError()
             << "bias must be " << elem << "[" << m << "], got " << bt;
    SmallVector<int64_t> perChannel{m};
    perChannel.append(n, 1);
    y = b.create<AddOp>(
        loc, y,
        b.create<ReshapeOp>(loc, RankedTensorType::get(perChannel, elem),
                            bias));
  }
  if (y.getType() != *type)
    return ctx.nodeError() << "computed " << y.getType()
                           << " but shape inference says " << *type;
  ctx.define(0, y);
  return success();
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
  table.add("ConvTranspose", importConvTranspose);
  table.add("MaxPool", importMaxPool);
  table.add("AveragePool", importAveragePool);
  table.add("GlobalAveragePool", importGlobalAveragePool);
}

} // namespace shardc
