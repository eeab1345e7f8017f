//===- Normalization.cpp - Import of ONNX normalizations ------------------===//
//
// Softmax and LogSoftmax (opset-13 semantics: one axis, default -1),
// LayerNormalization, which always gets its Mean and InvStdDev results (the
// input's leading dims, then 1s from `axis` on), and BatchNormalization with
// its defaults filled in, in inference and in training mode. Tested by
// test/lit/import/normalization.onnxtxt and batchnorm.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

using namespace mlir;

namespace shardc {

template <typename OpT>
static LogicalResult importSoftmaxLike(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  Value in = ctx.operand(0);
  auto axis = ctx.normAxis(ctx.intAttr("axis", -1),
                           cast<RankedTensorType>(in.getType()).getRank());
  if (failed(axis))
    return failure();
  return ctx.finish(
      ctx.builder().create<OpT>(ctx.loc(), in.getType(), in, *axis));
}

static LogicalResult importLayerNorm(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 3)))
    return failure();
  OpBuilder &b = ctx.builder();
  Value x = ctx.operand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  auto axis = ctx.normAxis(ctx.intAttr("axis", -1), xt.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> stat(xt.getShape().take_front(*axis));
  stat.append(xt.getRank() - *axis, 1);
  auto statType = RankedTensorType::get(stat, b.getF32Type());
  auto op = b.create<LayerNormalizationOp>(
      ctx.loc(), TypeRange{xt, statType, statType}, x, ctx.operand(1),
      ctx.operand(2), b.getI64IntegerAttr(*axis),
      b.getF32FloatAttr(ctx.floatAttr("epsilon", 1e-5f)));
  return ctx.finish(op);
}

static LogicalResult importBatchNorm(ImportContext &ctx) {
  if (failed(ctx.requireOperands(5, 5)))
    return failure();
  OpBuilder &b = ctx.builder();
  int64_t training = ctx.intAttr("training_mode", 0);
  if (ctx.opset() < 14 && ctx.node().output_size() > 1)
    return ctx.nodeError() << "training outputs (saved mean/variance) before "
                              "opset 14 are not supported; export with "
                              "opset_version >= 14";
  Value x = ctx.operand(0);
  Type statType = ctx.operand(3).getType();
  auto op = b.create<BatchNormalizationOp>(
      ctx.loc(), TypeRange{x.getType(), statType, statType}, x, ctx.operand(1),
      ctx.operand(2), ctx.operand(3), ctx.operand(4),
      b.getF32FloatAttr(ctx.floatAttr("epsilon", 1e-5f)),
      b.getF32FloatAttr(ctx.floatAttr("momentum", 0.9f)),
      b.getBoolAttr(training != 0), /*unbiased_var=*/b.getBoolAttr(false));
  return ctx.finish(op);
}

void registerNormalizationImporters(OpImporterTable &table) {
  table.add("Softmax", importSoftmaxLike<SoftmaxOp>);
  table.add("LogSoftmax", importSoftmaxLike<LogSoftmaxOp>);
  table.add("LayerNormalization", importLayerNorm);
  table.add("BatchNormalization", importBatchNorm);
}

} // namespace shardc
