//===- Reduce.cpp - Gradient rules of the reductions and ArgMax -----------===//
#include "ir/GradientEmitter.h"
#include "ir/gradients/Gradients.h"

#include <type_traits>

using namespace mlir;

namespace shardc {
namespace {

/// Expands the gradient back over the reduced axes (divided by their size
/// for the mean).
template <typename OpTy>
struct ReduceGradient
    : DifferentiableOpInterface::ExternalModel<ReduceGradient<OpTy>, OpTy> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto red = cast<OpTy>(op);
    Value dy = e.grad(red.getOutput());
    Value in = red.getInput();
    auto it = tensorTy(in);
    SmallVector<int64_t> kept(it.getShape());
    int64_t n = 1;
    for (int64_t a : red.getAxes()) {
      n *= kept[a];
      kept[a] = 1;
    }
    Value g = e.reshape(dy, RankedTensorType::get(kept, it.getElementType()));
    if constexpr (std::is_same_v<OpTy, ReduceMeanOp>)
      g = e.scale(g, 1.0 / n);
    e.accumulate(in, e.create<ExpandOp>(it, g));
    return success();
  }
};

/// ReduceMax and ReduceMin: the gradient goes to the elements equal to the
/// result, split evenly among ties (torch.amax/amin's rule).
template <typename OpTy>
struct ExtremeReduceGradient
    : DifferentiableOpInterface::ExternalModel<ExtremeReduceGradient<OpTy>,
                                               OpTy> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto red = cast<OpTy>(op);
    Value dy = e.grad(red.getOutput());
    Value in = red.getInput();
    auto it = tensorTy(in);
    SmallVector<int64_t> kept(it.getShape());
    for (int64_t a : red.getAxes())
      kept[a] = 1;
    auto keptType = RankedTensorType::get(kept, it.getElementType());
    Value y = e.reshape(red.getOutput(), keptType);
    auto maskType =
        RankedTensorType::get(it.getShape(), e.getBuilder().getI1Type());
    Value mask = e.create<EqualOp>(maskType, in, y);
    Value count = e.create<ReduceSumOp>(keptType, e.create<CastOp>(it, mask),
                                        red.getAxes(), true);
    Value share = e.div(e.reshape(dy, keptType), count);
    Value zero = e.constant(it.getElementType(), 0.0);
    e.accumulate(in, e.create<WhereOp>(it, mask, share, zero));
    return success();
  }
};

/// ArgMax and TopKIndices are not differentiable: their i64 results never
/// carry a gradient, so the rule has nothing to do. Having one states that
/// on purpose, so that an accuracy output beside the loss (or a router's
/// picks, whose values TopK's GatherElements differentiates) never stops
/// autodiff.
template <typename OpTy>
struct IndexResultGradient
    : DifferentiableOpInterface::ExternalModel<IndexResultGradient<OpTy>,
                                               OpTy> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    return success();
  }
};

} // namespace

void registerReductionGradients(MLIRContext *ctx) {
  ReduceSumOp::attachInterface<ReduceGradient<ReduceSumOp>>(*ctx);
  ReduceMeanOp::attachInterface<ReduceGradient<ReduceMeanOp>>(*ctx);
  ReduceMaxOp::attachInterface<ExtremeReduceGradient<ReduceMaxOp>>(*ctx);
  ReduceMinOp::attachInterface<ExtremeReduceGradient<ReduceMinOp>>(*ctx);
  ArgMaxOp::attachInterface<IndexResultGradient<ArgMaxOp>>(*ctx);
  TopKIndicesOp::attachInterface<IndexResultGradient<TopKIndicesOp>>(*ctx);
}

} // namespace shardc
