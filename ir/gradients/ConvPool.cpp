//===- ConvPool.cpp - Gradient rules of convolution and pooling -----------===//
#include "ir/GradientEmitter.h"
#include "ir/gradients/Gradients.h"

using namespace mlir;

namespace shardc {
namespace {

struct ConvGradient
    : DifferentiableOpInterface::ExternalModel<ConvGradient, ConvOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto conv = cast<ConvOp>(op);
    Value dy = e.grad(conv.getOutput());
    if (e.isActive(conv.getInput()))
      e.accumulate(conv.getInput(),
                   e.create<ConvGradInputOp>(
                       conv.getInput().getType(), dy, conv.getWeight(),
                       conv.getKernelShape(), conv.getStrides(),
                       conv.getDilations(), conv.getPads(), conv.getGroup()));
    if (e.isActive(conv.getWeight()))
      e.accumulate(conv.getWeight(),
                   e.create<ConvGradWeightOp>(
                       conv.getWeight().getType(), dy, conv.getInput(),
                       conv.getKernelShape(), conv.getStrides(),
                       conv.getDilations(), conv.getPads(), conv.getGroup()));
    if (Value bias = conv.getBias(); bias && e.isActive(bias)) {
      SmallVector<int64_t> axes{0};
      for (int64_t i = 2; i < tensorTy(dy).getRank(); ++i)
        axes.push_back(i);
      e.accumulate(bias, e.create<ReduceSumOp>(bias.getType(), dy, axes,
                                               /*keepdims=*/false));
    }
    return success();
  }
};

/// ConvGradInput is linear in each operand; it is a forward op too, as ONNX
/// ConvTranspose. With dX = A_W^T dY (A_W the convolution by W), the
/// gradient for dY is A_W g, a Conv of the result's gradient g, and the one
/// for W is the weight gradient of a convolution of g giving dY.
struct ConvGradInputGradient
    : DifferentiableOpInterface::ExternalModel<ConvGradInputGradient,
                                               ConvGradInputOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto cgi = cast<ConvGradInputOp>(op);
    Value g = e.grad(cgi.getInputGrad());
    Value dy = cgi.getGrad(), w = cgi.getWeight();
    if (e.isActive(dy))
      e.accumulate(dy, e.create<ConvOp>(dy.getType(), g, w, Value(),
                                        cgi.getKernelShape(), cgi.getStrides(),
                                        cgi.getDilations(), cgi.getPads(),
                                        cgi.getGroup()));
    if (e.isActive(w))
      e.accumulate(w, e.create<ConvGradWeightOp>(
                          w.getType(), dy, g, cgi.getKernelShape(),
                          cgi.getStrides(), cgi.getDilations(), cgi.getPads(),
                          cgi.getGroup()));
    return success();
  }
};

/// Routes the gradient to the argmax positions. The autodiff pass gives
/// every MaxPool its indices result before the backward sweep.
struct MaxPoolGradient
    : DifferentiableOpInterface::ExternalModel<MaxPoolGradient, MaxPoolOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto mp = cast<MaxPoolOp>(op);
    FailureOr<Value> dy = e.firstResultGrad(op);
    if (failed(dy))
      return failure();
    assert(mp.getIndices() && "autodiff adds MaxPool indices before the sweep");
    e.accumulate(mp.getInput(), e.create<MaxPoolGradOp>(mp.getInput().getType(),
                                                        *dy, mp.getIndices()));
    return success();
  }
};

struct AveragePoolGradient
    : DifferentiableOpInterface::ExternalModel<AveragePoolGradient,
                                               AveragePoolOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto ap = cast<AveragePoolOp>(op);
    Value dy = e.grad(ap.getOutput());
    e.accumulate(ap.getInput(),
                 e.create<AveragePoolGradOp>(
                     ap.getInput().getType(), dy, ap.getKernelShape(),
                     ap.getStrides(), ap.getPads(), ap.getCeilMode(),
                     ap.getCountIncludePad()));
    return success();
  }
};

struct GlobalAveragePoolGradient
    : DifferentiableOpInterface::ExternalModel<GlobalAveragePoolGradient,
                                               GlobalAveragePoolOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto gap = cast<GlobalAveragePoolOp>(op);
    Value dy = e.grad(gap.getOutput());
    auto xt = tensorTy(gap.getInput());
    int64_t n = 1;
    for (int64_t i = 2; i < xt.getRank(); ++i)
      n *= xt.getDimSize(i);
    Value scaled = e.scale(dy, 1.0 / n);
    e.accumulate(gap.getInput(), e.create<ExpandOp>(xt, scaled));
    return success();
  }
};

} // namespace

void registerConvPoolGradients(MLIRContext *ctx) {
  ConvOp::attachInterface<ConvGradient>(*ctx);
  ConvGradInputOp::attachInterface<ConvGradInputGradient>(*ctx);
  MaxPoolOp::attachInterface<MaxPoolGradient>(*ctx);
  AveragePoolOp::attachInterface<AveragePoolGradient>(*ctx);
  GlobalAveragePoolOp::attachInterface<GlobalAveragePoolGradient>(*ctx);
}

} // namespace shardc
