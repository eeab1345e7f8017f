//===- DataMovement.cpp - Gradient rules of the data movement ops ---------===//
#include "ir/GradientEmitter.h"
#include "ir/gradients/Gradients.h"

using namespace mlir;

namespace shardc {
namespace {

struct ReshapeGradient
    : DifferentiableOpInterface::ExternalModel<ReshapeGradient, ReshapeOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto r = cast<ReshapeOp>(op);
    e.accumulate(r.getInput(),
                 e.reshape(e.grad(r.getOutput()), tensorTy(r.getInput())));
    return success();
  }
};

struct TriluGradient
    : DifferentiableOpInterface::ExternalModel<TriluGradient, TriluOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    // The kept elements pass their gradient through; the others get none.
    auto t = cast<TriluOp>(op);
    e.accumulate(t.getInput(),
                 e.create<TriluOp>(t.getInput().getType(),
                                   e.grad(t.getOutput()), t.getKAttr(),
                                   t.getUpperAttr()));
    return success();
  }
};

struct TransposeGradient
    : DifferentiableOpInterface::ExternalModel<TransposeGradient, TransposeOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto t = cast<TransposeOp>(op);
    Value dy = e.grad(t.getOutput());
    ArrayRef<int64_t> perm = t.getPerm();
    SmallVector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      inv[perm[i]] = i;
    e.accumulate(t.getInput(),
                 e.create<TransposeOp>(t.getInput().getType(), dy, inv));
    return success();
  }
};

struct ExpandGradient
    : DifferentiableOpInterface::ExternalModel<ExpandGradient, ExpandOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto ex = cast<ExpandOp>(op);
    e.accumulate(ex.getInput(),
                 e.sumTo(e.grad(ex.getOutput()), tensorTy(ex.getInput())));
    return success();
  }
};

/// Scatter-adds into the float data; the indices have no gradient.
struct GatherGradient
    : DifferentiableOpInterface::ExternalModel<GatherGradient, GatherOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto g = cast<GatherOp>(op);
    Value dy = e.grad(g.getOutput());
    if (isa<FloatType>(tensorTy(g.getData()).getElementType()))
      e.accumulate(g.getData(),
                   e.create<GatherGradOp>(g.getData().getType(), dy,
                                          g.getIndices(), g.getAxis()));
    return success();
  }
};

/// GatherGrad in a forward (ScatterND with reduction 'add' into a computed
/// tensor): each slice of `grad` gets the slice of the output gradient it
/// was added to, a Gather at the same indices.
struct GatherGradGradient
    : DifferentiableOpInterface::ExternalModel<GatherGradGradient,
                                               GatherGradOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto g = cast<GatherGradOp>(op);
    Value dy = e.grad(g.getDataGrad());
    e.accumulate(g.getGrad(), e.create<GatherOp>(g.getGrad().getType(), dy,
                                                 g.getIndices(), g.getAxis()));
    return success();
  }
};

/// GatherElementsGrad in a forward (ScatterElements with reduction 'add'
/// into a computed tensor): each element of `grad` gets the output gradient
/// where it was added.
struct GatherElementsGradGradient
    : DifferentiableOpInterface::ExternalModel<GatherElementsGradGradient,
                                               GatherElementsGradOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto g = cast<GatherElementsGradOp>(op);
    Value dy = e.grad(g.getDataGrad());
    e.accumulate(g.getGrad(),
                 e.create<GatherElementsOp>(g.getGrad().getType(), dy,
                                            g.getIndices(), g.getAxis()));
    return success();
  }
};

/// ScatterElements: the data gets the output gradient with the written
/// elements zeroed (a ScatterElements of zeros), and every update the
/// gradient of the element it was written to (a GatherElements; repeated
/// indices each get it, as PyTorch's scatter does). Float operands only; the
/// indices have no gradient.
struct ScatterElementsGradient
    : DifferentiableOpInterface::ExternalModel<ScatterElementsGradient,
                                               ScatterElementsOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto s = cast<ScatterElementsOp>(op);
    if (!isa<FloatType>(tensorTy(s.getData()).getElementType()))
      return success();
    Value dy = e.grad(s.getOutput());
    if (e.isActive(s.getData()))
      e.accumulate(s.getData(),
                   e.create<ScatterElementsOp>(
                       s.getData().getType(), dy, s.getIndices(),
                       e.zerosLike(tensorTy(s.getUpdates())), s.getAxis()));
    if (e.isActive(s.getUpdates()))
      e.accumulate(s.getUpdates(),
                   e.create<GatherElementsOp>(s.getUpdates().getType(), dy,
                                              s.getIndices(), s.getAxis()));
    return success();
  }
};

/// Scatter-adds into the float data; the indices have no gradient.
struct GatherElementsGradient
    : DifferentiableOpInterface::ExternalModel<GatherElementsGradient,
                                               GatherElementsOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto g = cast<GatherElementsOp>(op);
    Value dy = e.grad(g.getOutput());
    if (isa<FloatType>(tensorTy(g.getData()).getElementType()))
      e.accumulate(g.getData(),
                   e.create<GatherElementsGradOp>(g.getData().getType(), dy,
                                                  g.getIndices(), g.getAxis()));
    return success();
  }
};

/// Each active input gets its slice of the gradient.
struct ConcatGradient
    : DifferentiableOpInterface::ExternalModel<ConcatGradient, ConcatOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto c = cast<ConcatOp>(op);
    Value dy = e.grad(c.getOutput());
    int64_t axis = c.getAxis(), offset = 0;
    auto yt = tensorTy(dy);
    for (Value in : c.getInputs()) {
      auto it = tensorTy(in);
      if (e.isActive(in)) {
        SmallVector<int64_t> starts(yt.getRank(), 0), steps(yt.getRank(), 1);
        starts[axis] = offset;
        e.accumulate(in, e.create<SliceOp>(it, dy, starts, steps));
      }
      offset += it.getDimSize(axis);
    }
    return success();
  }
};

/// Concatenates the gradients of the pieces, zeros for pieces without one.
struct SplitGradient
    : DifferentiableOpInterface::ExternalModel<SplitGradient, SplitOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto s = cast<SplitOp>(op);
    SmallVector<Value> parts;
    for (Value r : s.getOutputs()) {
      Value g = e.grad(r);
      parts.push_back(g ? g : e.zerosLike(tensorTy(r)));
    }
    e.accumulate(s.getInput(), e.create<ConcatOp>(s.getInput().getType(), parts,
                                                  s.getAxis()));
    return success();
  }
};

struct SliceGradient
    : DifferentiableOpInterface::ExternalModel<SliceGradient, SliceOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto sl = cast<SliceOp>(op);
    Value dy = e.grad(sl.getOutput());
    e.accumulate(sl.getInput(),
                 e.create<SliceGradOp>(sl.getInput().getType(), dy,
                                       sl.getStarts(), sl.getSteps()));
    return success();
  }
};

} // namespace

void registerDataMovementGradients(MLIRContext *ctx) {
  ReshapeOp::attachInterface<ReshapeGradient>(*ctx);
  TransposeOp::attachInterface<TransposeGradient>(*ctx);
  TriluOp::attachInterface<TriluGradient>(*ctx);
  GatherOp::attachInterface<GatherGradient>(*ctx);
  GatherGradOp::attachInterface<GatherGradGradient>(*ctx);
  GatherElementsOp::attachInterface<GatherElementsGradient>(*ctx);
  GatherElementsGradOp::attachInterface<GatherElementsGradGradient>(*ctx);
  ScatterElementsOp::attachInterface<ScatterElementsGradient>(*ctx);
  ConcatOp::attachInterface<ConcatGradient>(*ctx);
  SplitOp::attachInterface<SplitGradient>(*ctx);
  SliceOp::attachInterface<SliceGradient>(*ctx);
  ExpandOp::attachInterface<ExpandGradient>(*ctx);
}

} // namespace shardc
