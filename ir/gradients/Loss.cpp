//===- Loss.cpp - Gradient rules of the loss ops --------------------------===//
#include "ir/GradientEmitter.h"
#include "ir/gradients/Gradients.h"

using namespace mlir;

namespace shardc {
namespace {

/// The scores get the gradient through the loss and, when the optional
/// log_prob result is used, through it as a LogSoftmax over axis 1.
struct SoftmaxCrossEntropyLossGradient
    : DifferentiableOpInterface::ExternalModel<SoftmaxCrossEntropyLossGradient,
                                               SoftmaxCrossEntropyLossOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto sce = cast<SoftmaxCrossEntropyLossOp>(op);
    Value dy = e.grad(sce.getLoss());
    Value total;
    if (dy)
      total = e.create<SoftmaxCrossEntropyLossGradOp>(
          sce.getScores().getType(), dy, sce.getScores(), sce.getLabels(),
          sce.getWeights(), sce.getReductionAttr(), sce.getIgnoreIndexAttr());
    if (Value logProb = sce.getLogProb()) {
      if (Value dLogProb = e.grad(logProb)) {
        Value g = e.create<LogSoftmaxGradOp>(sce.getScores().getType(),
                                             dLogProb, logProb, 1);
        total = total ? e.create<AddOp>(g.getType(), total, g) : g;
      }
    }
    e.accumulate(sce.getScores(), total);
    return success();
  }
};

struct NegativeLogLikelihoodLossGradient
    : DifferentiableOpInterface::ExternalModel<
          NegativeLogLikelihoodLossGradient, NegativeLogLikelihoodLossOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto nll = cast<NegativeLogLikelihoodLossOp>(op);
    Value dy = e.grad(nll.getLoss());
    e.accumulate(nll.getInput(),
                 e.create<NegativeLogLikelihoodLossGradOp>(
                     nll.getInput().getType(), dy, nll.getInput(),
                     nll.getTarget(), nll.getWeight(), nll.getReductionAttr(),
                     nll.getIgnoreIndexAttr()));
    return success();
  }
};

} // namespace

void registerLossGradients(MLIRContext *ctx) {
  SoftmaxCrossEntropyLossOp::attachInterface<SoftmaxCrossEntropyLossGradient>(
      *ctx);
  NegativeLogLikelihoodLossOp::attachInterface<
      NegativeLogLikelihoodLossGradient>(*ctx);
}

} // namespace shardc
