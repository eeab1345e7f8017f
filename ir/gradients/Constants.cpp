//===- Constants.cpp - Constant and Shape have no gradient ----------------===//
//
// Neither op has a float operand a gradient could flow to: their rules do
// nothing, so that autodiff treats them as differentiable (with a zero
// gradient) rather than reporting a missing rule.
//
//===----------------------------------------------------------------------===//
#include "ir/GradientEmitter.h"
#include "ir/gradients/Gradients.h"

using namespace mlir;

namespace shardc {
namespace {

template <typename OpTy>
struct NoGradient
    : DifferentiableOpInterface::ExternalModel<NoGradient<OpTy>, OpTy> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    return success();
  }
};

} // namespace

void registerConstantGradients(MLIRContext *ctx) {
  ConstantOp::attachInterface<NoGradient<ConstantOp>>(*ctx);
  ShapeOp::attachInterface<NoGradient<ShapeOp>>(*ctx);
}

} // namespace shardc
