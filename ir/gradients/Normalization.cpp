//===- Normalization.cpp - Gradient rules of the normalizing ops ----------===//
//
// Softmax and LogSoftmax (normalized along one axis), LayerNormalization and
// BatchNormalization: each has a dedicated gradient op.
//
//===----------------------------------------------------------------------===//
#include "ir/GradientEmitter.h"
#include "ir/gradients/Gradients.h"

using namespace mlir;

namespace shardc {
namespace {

/// Softmax and LogSoftmax: their gradient ops take the forward output.
template <typename OpTy, typename GradOpTy>
struct AxisSoftmaxGradient : DifferentiableOpInterface::ExternalModel<
                                 AxisSoftmaxGradient<OpTy, GradOpTy>, OpTy> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto sm = cast<OpTy>(op);
    Value dy = e.grad(sm.getOutput());
    e.accumulate(
        sm.getInput(),
        e.create<GradOpTy>(dy.getType(), dy, sm.getOutput(), sm.getAxis()));
    return success();
  }
};

/// Differentiates through the normalized output only (not mean and
/// inv_std_dev); scale and bias must have the normalized shape.
struct LayerNormalizationGradient
    : DifferentiableOpInterface::ExternalModel<LayerNormalizationGradient,
                                               LayerNormalizationOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto ln = cast<LayerNormalizationOp>(op);
    FailureOr<Value> dy = e.firstResultGrad(op);
    if (failed(dy))
      return failure();
    auto xt = tensorTy(ln.getInput());
    if (tensorTy(ln.getScale()).getShape() !=
        xt.getShape().drop_front(ln.getAxis()))
      return ln.emitOpError("autodiff: the scale must have the normalized "
                            "shape exactly");
    auto st = tensorTy(ln.getScale());
    auto g = e.create<LayerNormGradOp>(
        TypeRange{xt, st, st}, *dy, ln.getInput(), ln.getScale(), ln.getMean(),
        ln.getInvStdDev(), ln.getAxis());
    e.accumulate(ln.getInput(), g.getInputGrad());
    e.accumulate(ln.getScale(), g.getScaleGrad());
    if (Value bias = ln.getBias()) {
      if (tensorTy(bias).getShape() != st.getShape())
        return ln.emitOpError("autodiff: the bias must have the scale's shape");
      e.accumulate(bias, g.getBiasGrad());
    }
    return success();
  }
};

/// The running statistics (results 1 and 2) have no gradient, and the
/// autodiff pass does not train the mean and var operands.
struct BatchNormalizationGradient
    : DifferentiableOpInterface::ExternalModel<BatchNormalizationGradient,
                                               BatchNormalizationOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto bn = cast<BatchNormalizationOp>(op);
    if (bn.getMoments())
      return bn.emitOpError("has global moments (shardc-sync-batchnorm), "
                            "which autodiff does not differentiate; "
                            "synchronize after autodiff");
    Value dy = e.grad(bn.getOutput());
    if (!dy)
      return success(); // only the running statistics are used
    auto ct = tensorTy(bn.getScale());
    auto g = e.create<BatchNormGradOp>(
        TypeRange{bn.getInput().getType(), ct, ct}, dy, bn.getInput(),
        bn.getScale(), bn.getMean(), bn.getVar(), bn.getEpsilonAttr(),
        bn.getTrainingModeAttr(), /*moments=*/Value(),
        /*grad_moments=*/Value());
    e.accumulate(bn.getInput(), g.getInputGrad());
    e.accumulate(bn.getScale(), g.getScaleGrad());
    e.accumulate(bn.getBias(), g.getBiasGrad());
    return success();
  }
};

} // namespace

void registerNormalizationGradients(MLIRContext *ctx) {
  SoftmaxOp::attachInterface<AxisSoftmaxGradient<SoftmaxOp, SoftmaxGradOp>>(
      *ctx);
  LogSoftmaxOp::attachInterface<
      AxisSoftmaxGradient<LogSoftmaxOp, LogSoftmaxGradOp>>(*ctx);
  LayerNormalizationOp::attachInterface<LayerNormalizationGradient>(*ctx);
  BatchNormalizationOp::attachInterface<BatchNormalizationGradient>(*ctx);
}

} // namespace shardc
