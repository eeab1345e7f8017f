//===- UnscaleGradients.cpp - Loss scaling's skip, unscale and update -----===//
//
// torch.cuda.amp.GradScaler's unscale_/step/update over the gradients the
// optimizer updates read, wherever the ZeRO passes left them (FairScale's
// ShardedGradScaler): a PartialNorm chain sums this rank's gradients right
// after the last one exists (finite exactly when every element is), the
// ranks' sums are added at stages 1-3, and LossScale turns the total into
// the skip flag, the unscale factor and the scale's next value. Every update
// unscales its gradient and skips on a non-finite step; the optimizer's
// step counter skips with it, and a learning-rate schedule gets a counter
// of every step.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_UNSCALEGRADIENTS
#include "passes/Passes.h.inc"

namespace {

struct UnscaleGradientsPass : impl::UnscaleGradientsBase<UnscaleGradientsPass> {
  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "unscale-gradients");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;

    BlockArgument scale, tracker;
    LossScalingAttr scaling;
    for (BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      if (auto attr = func.getArgAttr(i, kLossScaleAttrName)) {
        scaling = dyn_cast<LossScalingAttr>(attr);
        scale = arg;
      }
      if (func.getArgAttr(i, kLossScaleTrackerAttrName))
        tracker = arg;
    }
    if (!scale)
      return;
    auto scalar = RankedTensorType::get({}, Float32Type::get(&getContext()));
    if (!scaling || !tracker || scale.getType() != scalar ||
        tracker.getType() != scalar) {
      func.emitError("unscale-gradients: the loss scale needs a "
                     "#shardc.loss_scaling attribute and a growth tracker, "
                     "both f32 scalars (shardc-loss-scale adds them)");
      return signalPassFailure();
    }

    FailureOr<SmallVector<OptimizerUpdate>> found =
        requireUpdates(func, "unscale-gradients", "loss scaling");
    if (failed(found))
      return signalPassFailure();
    SmallVector<OptimizerUpdate> updates = std::move(*found);
    SmallVector<Value> grads;
    for (OptimizerUpdate op : updates)
      grads.push_back(op.getGrad());
    // The step counters the updates read, incremented by the optimizer.
    llvm::SetVector<Operation *> increments;
    for (OptimizerUpdate op : updates) {
      if (op.getGradScale()) {
        op->emitOpError("unscale-gradients: the update already scales its "
                        "gradient (run shardc-unscale-gradients before "
                        "shardc-clip-gradients)");
        return signalPassFailure();
      }
      auto inc = op.getStep().getDefiningOp<IncrementOp>();
      if (!inc) {
        op->emitOpError("unscale-gradients: the update's step counter is "
                        "not a shardc.Increment");
        return signalPassFailure();
      }
      if (inc.getSkip()) {
        op->emitOpError("unscale-gradients: the step counter already skips "
                        "(the pass ran twice)");
        return signalPassFailure();
      }
      increments.insert(inc);
    }

    OpBuilder b(func.getContext());
    Block &body = func.getBody().front();
    Operation *last = latestDef(grads);
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&body);
    FailureOr<SmallVector<Operation *>> later =
        opsAfterUpdates(body, last, "unscale-gradients");
    if (failed(later))
      return signalPassFailure();

    Location loc =
        NameLoc::get(b.getStringAttr("loss_scale"), updates.front()->getLoc());
    FlatBuilder flat(b, 1);
    Value total = totalNormOverRanks(flat, func, grads, NormType::L2, loc);
    auto flag = RankedTensorType::get({}, b.getI1Type());
    auto ls = b.create<LossScaleOp>(
        loc, TypeRange{flag, scalar, scalar, scalar, scalar}, total, scale,
        tracker, scaling);
    flat.tag(ls, MemoryCategory::Grads);
    Operation *anchor = ls;

    // The counters, skipped with the step, come first; a schedule counts
    // every step on a counter of its own.
    for (Operation *inc : increments) {
      inc->moveAfter(anchor);
      anchor = inc;
      cast<IncrementOp>(inc).getSkipMutable().assign(ls.getSkip());
    }
    bool scheduled = llvm::any_of(updates, [](OptimizerUpdate op) {
      return op->hasAttr("lr_schedule") || op->hasAttr("warmup_steps");
    });
    StepResults results = readStepResults(func);
    if (scheduled) {
      unsigned idx = func.getNumArguments();
      func.insertArgument(
          idx, scalar,
          b.getDictionaryAttr(b.getNamedAttr(
              kStateAttrName, b.getStringAttr("lr_scheduler.step"))),
          loc);
      BlockArgument counter = func.getArgument(idx);
      b.setInsertionPointAfter(anchor);
      auto inc = b.create<IncrementOp>(loc, scalar, counter, Value());
      flat.tag(inc, MemoryCategory::OptState);
      anchor = inc;
      results.updates.push_back({inc.getOutput(), counter});
      for (OptimizerUpdate op : updates)
        op.getLrStepMutable().assign(inc.getOutput());
    }
    moveOpsAfter(*later, anchor);
    for (OptimizerUpdate op : updates) {
      op.getGradScaleMutable().assign(ls.getUnscale());
      op.getSkipMutable().assign(ls.getSkip());
    }

    results.updates.push_back({ls.getNewScale(), scale});
    results.updates.push_back({ls.getNewTracker(), tracker});
    writeStepResults(func, results);
    std::string used = addNamedOutput(func, ls.getUsed(), "loss_scale");
    std::string skipped = addNamedOutput(func, ls.getSkip(), "skipped");
    func->setAttr(kLossScaleOutputAttrName, b.getStringAttr(used));
    func->setAttr(kSkippedOutputAttrName, b.getStringAttr(skipped));
  }
};

} // namespace
} // namespace shardc
