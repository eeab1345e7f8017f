//===- Loss.cpp - Import of ONNX loss operators ---------------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss: the reduction
// (default "mean") is always explicit, ignore_index is kept only when given,
// and the optional weights operand and log_prob result appear when the node
// has them. Tested by test/lit/import/loss.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

using namespace mlir;

namespace shardc {

/// The node's `reduction` attribute (default "mean"), or an error.
static FailureOr<LossReductionAttr> reductionAttr(ImportContext &ctx) {
  std::string name = ctx.stringAttr("reduction", "mean");
  std::optional<LossReduction> reduction = symbolizeLossReduction(name);
  if (!reduction)
    return ctx.nodeError() << "reduction '" << name
                           << "' is not one of none, sum or mean";
  return LossReductionAttr::get(ctx.builder().getContext(), *reduction);
}

static LogicalResult importSoftmaxCrossEntropy(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 3)))
    return failure();
  auto lossType = ctx.outType(0);
  auto reduction = reductionAttr(ctx);
  if (failed(lossType) || failed(reduction))
    return failure();
  const onnx::NodeProto &node = ctx.node();
  OpBuilder &b = ctx.builder();
  Type logProbType;
  if (node.output_size() > 1 && !node.output(1).empty())
    logProbType = ctx.operand(0).getType();
  const auto *ignore = ctx.attr("ignore_index");
  auto op = b.create<SoftmaxCrossEntropyLossOp>(
      ctx.loc(), *lossType, logProbType, ctx.operand(0), ctx.operand(1),
      ctx.operand(2), *reduction,
      ignore ? b.getI64IntegerAttr(ignore->i()) : IntegerAttr());
  return ctx.finish(op);
}

static LogicalResult importNllLoss(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 3)))
    return failure();
  auto lossType = ctx.outType(0);
  auto reduction = reductionAttr(ctx);
  if (failed(lossType) || failed(reduction))
    return failure();
  OpBuilder &b = ctx.builder();
  const auto *ignore = ctx.attr("ignore_index");
  auto op = b.create<NegativeLogLikelihoodLossOp>(
      ctx.loc(), *lossType, ctx.operand(0), ctx.operand(1), ctx.operand(2),
      *reduction, ignore ? b.getI64IntegerAttr(ignore->i()) : IntegerAttr());
  return ctx.finish(op);
}

void registerLossImporters(OpImporterTable &table) {
  table.add("SoftmaxCrossEntropyLoss", importSoftmaxCrossEntropy);
  table.add("NegativeLogLikelihoodLoss", importNllLoss);
}

} // namespace shardc
