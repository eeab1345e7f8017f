//===- ClipGradients.cpp - Gradient clipping by the total norm ------------===//
//
// torch.nn.utils.clip_grad_norm_ over the gradients the optimizer updates
// read, wherever the ZeRO passes left them: full and averaged at stage 0
// (every rank holds the same values and computes the norm alone), this
// rank's shard at stages 1-3 (padding zeros add nothing; the ranks' parts
// are combined over the mesh). The parts accumulate in a chain of
// PartialNorm ops right after the last gradient exists; ClipCoefficient
// finishes the norm and the clamped coefficient, which every update takes
// as its grad_scale operand, and the norm becomes a graph output that the
// plan's training record names. With loss scaling the gradients are still
// scaled: the coefficient also unscales them.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_CLIPGRADIENTS
#include "passes/Passes.h.inc"

namespace {

struct ClipGradientsPass : impl::ClipGradientsBase<ClipGradientsPass> {
  using ClipGradientsBase::ClipGradientsBase;
  SHARDC_CHECK_OPTIONS_ClipGradients;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "clip-gradients");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    // clip-grad-norm's default (0, outside its range) means "no clipping".
    if (maxNorm == 0) {
      if (normType != NormType::L2) {
        func.emitError("clip-gradients: clip-norm-type needs clip-grad-norm");
        return signalPassFailure();
      }
      return;
    }
    if (std::optional<std::string> err = checkOptions()) {
      func.emitError("clip-gradients: ") << *err;
      return signalPassFailure();
    }

    FailureOr<SmallVector<OptimizerUpdate>> found =
        requireUpdates(func, "clip-gradients", "clip-grad-norm");
    if (failed(found))
      return signalPassFailure();
    SmallVector<OptimizerUpdate> updates = std::move(*found);
    SmallVector<Value> grads;
    for (OptimizerUpdate op : updates)
      grads.push_back(op.getGrad());
    // With loss scaling (shardc-unscale-gradients ran first) every update
    // already multiplies its gradient by the unscale factor: the norm is
    // the unscaled gradients', and the coefficient clips and unscales.
    Value unscale;
    for (OptimizerUpdate op : updates) {
      Value scale = op.getGradScale();
      if (scale && !scale.getDefiningOp<LossScaleOp>()) {
        op->emitOpError("clip-gradients: the update already scales its "
                        "gradient; the step is clipped twice");
        return signalPassFailure();
      }
      if (op != updates.front() && scale != unscale) {
        op->emitOpError("clip-gradients: the updates do not share one "
                        "unscale factor");
        return signalPassFailure();
      }
      unscale = scale;
    }

    OpBuilder b(func.getContext());
    Block &body = func.getBody().front();
    // Every update needs the coefficient, so it waits for the last
    // gradient (and the loss scale): updates placed earlier, and whatever
    // uses their results before that point, move after the coefficient.
    SmallVector<Value> needed(grads);
    if (unscale)
      needed.push_back(unscale);
    Operation *last = latestDef(needed);
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&body);
    FailureOr<SmallVector<Operation *>> later =
        opsAfterUpdates(body, last, "clip-gradients");
    if (failed(later))
      return signalPassFailure();

    Location loc = NameLoc::get(b.getStringAttr("clip_grad_norm"),
                                updates.front()->getLoc());
    FlatBuilder flat(b, 1);
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    Value total = totalNormOverRanks(flat, func, grads, normType, loc);
    auto clip = b.create<ClipCoefficientOp>(
        loc, scalar, scalar, total, unscale, b.getF64FloatAttr(maxNorm),
        NormTypeAttr::get(b.getContext(), normType));
    flat.tag(clip, MemoryCategory::Grads);
    moveOpsAfter(*later, clip);
    for (OptimizerUpdate op : updates)
      op.getGradScaleMutable().assign(clip.getCoefficient());

    // The norm is a graph output, named in shardc.output_names and by the
    // function's shardc.grad_norm.
    std::string name = addNamedOutput(func, clip.getNorm(), "grad_norm");
    func->setAttr(kGradNormAttrName, b.getStringAttr(name));
  }
};

} // namespace
} // namespace shardc
