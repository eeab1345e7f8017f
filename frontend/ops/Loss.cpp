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

/// What both losses read from their node: operands (scores or input, labels
/// or target, optional weights), the loss type, the reduction (default
/// "mean") and the optional ignore_index.
struct LossNode {
  Type lossType;
  LossReductionAttr reduction;
  IntegerAttr ignoreIndex;
};

static FailureOr<LossNode> readLossNode(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 3)))
    return failure();
  auto lossType = ctx.outType(0);
  if (failed(lossType))
    return failure();
  std::string name = ctx.stringAttr("reduction", "mean");
  std::optional<LossReduction> reduction = symbolizeLossReduction(name);
  if (!reduction)
    return ctx.nodeError() << "reduction '" << name
                           << "' is not one of none, sum or mean";
  OpBuilder &b = ctx.builder();
  LossNode node{*lossType, LossReductionAttr::get(b.getContext(), *reduction),
                IntegerAttr()};
  if (const auto *ignore = ctx.attr("ignore_index", onnx::AttributeProto::INT))
    node.ignoreIndex = b.getI64IntegerAttr(ignore->i());
  return node;
}

static LogicalResult importSoftmaxCrossEntropy(ImportContext &ctx) {
  FailureOr<LossNode> loss = readLossNode(ctx);
  if (failed(loss))
    return failure();
  Type logProbType;
  if (ctx.node().output_size() > 1 && !ctx.node().output(1).empty())
    logProbType = ctx.operand(0).getType();
  return ctx.finish(ctx.builder().create<SoftmaxCrossEntropyLossOp>(
      ctx.loc(), loss->lossType, logProbType, ctx.operand(0), ctx.operand(1),
      ctx.operand(2), loss->reduction, loss->ignoreIndex));
}

static LogicalResult importNllLoss(ImportContext &ctx) {
  FailureOr<LossNode> loss = readLossNode(ctx);
  if (failed(loss))
    return failure();
  return ctx.finish(ctx.builder().create<NegativeLogLikelihoodLossOp>(
      ctx.loc(), loss->lossType, ctx.operand(0), ctx.operand(1), ctx.operand(2),
      loss->reduction, loss->ignoreIndex));
}

void registerLossImporters(OpImporterTable &table) {
  table.add("SoftmaxCrossEntropyLoss", importSoftmaxCrossEntropy);
  table.add("NegativeLogLikelihoodLoss", importNllLoss);
}

} // namespace shardc
