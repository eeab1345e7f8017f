//===- SyncBatchNorm.cpp - BatchNorm statistics over the global batch -----===//
//
// torch.nn.SyncBatchNorm as a rewrite of the step: every training-mode
// BatchNormalization normalizes with the moments of the global batch, and
// its gradient with the global means of the output gradient terms. The
// ranks' inputs have one static shape, so the global count is this rank's
// times the world size and each rank divides its sums by it before the
// all-reduce: the reduced values are the global moments themselves.
//
// A BatchNormGrad is paired with the forward op on the same input (the
// autodiff rule differentiates with the forward op's input; copies made by
// gradient accumulation each have their own slice): it reads the moments
// the forward all-reduce produced. The new ops inherit the op's
// `shardc.backward` and `shardc.micro_batch` annotations, so the scheduler
// and the ZeRO-3 windows see them in the right phase.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_SYNCBATCHNORM
#include "passes/Passes.h.inc"

namespace {

/// Values per channel of an (N, C, ...) tensor.
int64_t perChannel(Value x) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(x.getType()).getShape();
  int64_t n = shape[0];
  for (int64_t d : shape.drop_front(2))
    n *= d;
  return n;
}

struct SyncBatchNormPass : impl::SyncBatchNormBase<SyncBatchNormPass> {
  using SyncBatchNormBase::SyncBatchNormBase;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "sync-batchnorm");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    if (!syncBatchnorm)
      return;
    FailureOr<RankGroups> ranks = configuredRanks(func, "sync-batchnorm");
    if (failed(ranks))
      return signalPassFailure();
    const int64_t world = ranks->world;

    SmallVector<BatchNormalizationOp> forward;
    SmallVector<BatchNormGradOp> backward;
    func.walk([&](Operation *op) {
      if (auto bn = dyn_cast<BatchNormalizationOp>(op);
          bn && bn.getTrainingMode() && !bn.getMoments())
        forward.push_back(bn);
      if (auto g = dyn_cast<BatchNormGradOp>(op);
          g && g.getTrainingMode() && !g.getMoments())
        backward.push_back(g);
    });
    if (forward.empty() && backward.empty()) {
      func.emitWarning("sync-batchnorm: the step has no training-mode "
                       "BatchNormalization; nothing to synchronize");
      return;
    }
    if (world == 1)
      return;

    OpBuilder b(func.getContext());
    auto annotate = [](Operation *from, Operation *to) {
      for (StringRef name : {kBackwardAttrName, kMicroBatchAttrName})
        if (Attribute a = from->getAttr(name))
          to->setAttr(name, a);
      return to->getResult(0);
    };
    // This rank's moments of `x` divided by the global count, summed over
    // the ranks, before `at`.
    auto globalMoments = [&](Operation *at, Value x, int64_t count,
                             Value grad = {}, Value moments = {}) {
      b.setInsertionPoint(at);
      int64_t channels = cast<RankedTensorType>(x.getType()).getDimSize(1);
      auto type = RankedTensorType::get({2 * channels}, b.getF64Type());
      Location loc = at->getLoc();
      IntegerAttr countAttr = b.getI64IntegerAttr(count);
      Operation *part =
          grad ? b.create<BatchNormGradStatsOp>(loc, type, grad, x, moments,
                                                countAttr)
               : b.create<BatchNormStatsOp>(loc, type, x, countAttr);
      Value local = annotate(at, part);
      return annotate(at, b.create<mesh::AllReduceOp>(
                              loc, type, kMeshName, ranks->worldAxes(), local,
                              mesh::ReductionKind::Sum));
    };

    DenseMap<Value, Value> momentsOf;
    for (BatchNormalizationOp bn : forward) {
      int64_t count = perChannel(bn.getInput()) * world;
      Value moments = globalMoments(bn, bn.getInput(), count);
      bn.getMomentsMutable().assign(moments);
      bn.setBatchCountAttr(b.getI64IntegerAttr(count));
      momentsOf.try_emplace(bn.getInput(), moments);
    }
    for (BatchNormGradOp g : backward) {
      Value x = g.getInput();
      int64_t count = perChannel(x) * world;
      Value moments = momentsOf.lookup(x);
      if (!moments || !moments.getParentBlock() ||
          !moments.getDefiningOp()->isBeforeInBlock(g)) {
        // A gradient without its forward op (not one autodiff emits):
        // its own moments.
        moments = globalMoments(g, x, count);
      }
      Value gradMoments = globalMoments(g, x, count, g.getGrad(), moments);
      g.getMomentsMutable().assign(moments);
      g.getGradMomentsMutable().assign(gradMoments);
    }
  }
};

} // namespace
} // namespace shardc
