//===- ZeroConfig.cpp - Configure a training step for data parallelism ----===//
//
// The first pass of every ZeRO stage: records the world size and stage on
// @main, creates the mesh @world that every collective runs on (1-d, or
// 2-d with hybrid sharding: groups x ranks per group, and with the shard
// group's axis split in two when ZeRO-3 reshards over a smaller group after
// forward), checks
// that the optimizer updates follow the backward pass (collectives are
// inserted between the two) and marks the parameter gradients as gradients
// for memory planning. The `shardc-zero` pipeline runs it, then per stage:
//
//   stage 0    shardc-bucket-gradients
//   stage 1-3  shardc-partition-optimizer, shardc-reduce-scatter-gradients
//              (stage 1: accumulate-unsharded), shardc-shard-parameters
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_ZEROCONFIG
#include "passes/Passes.h.inc"

namespace {

struct ZeroConfigPass : impl::ZeroConfigBase<ZeroConfigPass> {
  using ZeroConfigBase::ZeroConfigBase;
  SHARDC_CHECK_OPTIONS_ZeroConfig;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> step = getStepFunction(module, "zero-config");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    if (std::optional<std::string> err = checkOptions()) {
      func.emitError("zero-config: ") << *err;
      return signalPassFailure();
    }
    const int64_t world = worldSize, group = hybridShard;
    bool hybrid = group > 0 && group != world;
    if (hybrid && world % group != 0) {
      func.emitError("zero-config: --hybrid-shard ")
          << group << " does not divide the world size " << world
          << ": shard groups must be equal; pick a divisor of " << world
          << " (e.g. the ranks per node)";
      return signalPassFailure();
    }
    if (hybrid && stage == 0) {
      func.emitError("zero-config: --hybrid-shard needs --zero-stage 1, 2 or "
                     "3: stage 0 shards nothing");
      return signalPassFailure();
    }
    RankGroups ranks;
    ranks.world = world;
    ranks.shards = hybrid ? group : world;
    ranks.reshard = ranks.shards;
    const ReshardSpec reshard = reshardAfterForward;
    if (reshard.kind == ReshardSpec::Group) {
      if (stage != 3) {
        func.emitError("zero-config: --reshard-after-forward ")
            << reshard.group
            << " keeps parameters sharded over a group between forward and "
               "backward, which only --zero-stage 3 gathers; use --zero-stage "
               "3";
        return signalPassFailure();
      }
      if (ranks.shards % reshard.group != 0) {
        func.emitError("zero-config: --reshard-after-forward ")
            << reshard.group << " does not divide the shard group of "
            << ranks.shards << " ranks"
            << (hybrid ? " (--hybrid-shard)" : " (--world-size)")
            << "; pick a divisor of " << ranks.shards
            << " (e.g. the ranks per node)";
        return signalPassFailure();
      }
      ranks.reshard = reshard.group;
    } else if (reshard.kind == ReshardSpec::Keep) {
      ranks.reshard = 1;
    }
    OpBuilder b(func.getContext());
    func->setAttr(kWorldSizeAttrName, b.getI64IntegerAttr(worldSize));
    func->setAttr(kZeroStageAttrName, b.getI64IntegerAttr(stage));
    if (hybrid)
      func->setAttr(kShardGroupAttrName, b.getI64IntegerAttr(group));
    // Stages 1 and 2 keep a unit whole from its gather in forward through
    // its last use in backward (FSDP's SHARD_GRAD_OP): shard-parameters
    // reads this as reshard-after-forward false.
    if (stage == 1 || stage == 2)
      func->setAttr(kReshardAttrName, b.getI64IntegerAttr(1));
    else if (stage == 3 && (reshard.kind == ReshardSpec::Keep ||
                            ranks.reshard != ranks.shards))
      func->setAttr(kReshardAttrName, b.getI64IntegerAttr(ranks.reshard));
    if (stage != 3)
      ranks.reshard = ranks.shards;
    if (auto mesh = module.lookupSymbol<mesh::MeshOp>(kMeshName)) {
      // Configured before (or written by hand): it must be this mesh.
      if (mesh.getShape() != ArrayRef<int64_t>(ranks.meshShape())) {
        mesh.emitError("zero-config: @")
            << kMeshName << " has another shape than --world-size, "
            << "--hybrid-shard and --reshard-after-forward make; configure "
               "the step once";
        return signalPassFailure();
      }
    } else {
      b.setInsertionPointToStart(module.getBody());
      b.create<mesh::MeshOp>(module.getLoc(), kMeshName, ranks.meshShape());
    }
    SmallVector<ParamUpdate> updates = collectParamUpdates(func);
    if (updates.empty())
      return;
    Operation *firstUpdate = updates.front().op;
    for (ParamUpdate &u : updates)
      if (u.op->isBeforeInBlock(firstUpdate))
        firstUpdate = u.op;
    for (ParamUpdate &u : updates)
      if (Operation *def = u.grad.getDefiningOp())
        if (firstUpdate->isBeforeInBlock(def)) {
          firstUpdate->emitOpError(
              "zero: optimizer updates must follow every gradient they use");
          return signalPassFailure();
        }
    // Parameter gradients are `grads` in the memory plan; a gradient op
    // that also yields activation gradients names its gradient results.
    FlatBuilder flat(b, worldSize);
    for (ParamUpdate &u : updates) {
      Operation *def = u.grad.getDefiningOp();
      if (!def || def->hasAttr(kCategoryAttrName))
        continue;
      if (def->getNumResults() == 1) {
        flat.tag(def, MemoryCategory::Grads);
        continue;
      }
      SmallVector<int64_t> results;
      if (auto old =
              def->getAttrOfType<DenseI64ArrayAttr>(kGradResultsAttrName))
        results.assign(old.asArrayRef().begin(), old.asArrayRef().end());
      int64_t index = cast<OpResult>(u.grad).getResultNumber();
      if (!llvm::is_contained(results, index))
        results.push_back(index);
      llvm::sort(results);
      def->setAttr(kGradResultsAttrName, b.getDenseI64ArrayAttr(results));
    }
  }
};

} // namespace
} // namespace shardc
