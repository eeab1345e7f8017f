//===- PartitionOptimizer.cpp - Shard optimizer state by wrap unit --------===//
//
// The sharded optimizer (FairScale OSS) of every stage >= 1: each wrap
// unit's parameters, gradients and optimizer state are flattened and padded
// to a multiple of the world size, and a rank updates only its shard
// (mesh.all_slice), with shard-sized optimizer state (`shardc.state =
// "unitK.exp_avg"`, ..., with the unit's layout: `shardc.state_shard_of`,
// `shardc.state_suffix`, `shardc.flat_params`, `shardc.flat_types`). One
// update per unit replaces the per-parameter ones, and mesh.all_gather
// rebuilds the full parameters from the updated shards.
//
// The gradient shard is sliced from the full gradients (averaged first by
// bucket-gradients where a pipeline runs it before this pass);
// shardc-reduce-scatter-gradients turns that slice into a reduce-scatter, and
// shardc-shard-parameters replaces the parameter slice and rebuild by a
// sharded parameter (both at every stage >= 1 in the shardc-zero pipeline).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_PARTITIONOPTIMIZER
#include "passes/Passes.h.inc"

namespace {

struct PartitionOptimizerPass
    : impl::PartitionOptimizerBase<PartitionOptimizerPass> {
  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "partition-optimizer");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    FailureOr<RankGroups> ranks = configuredRanks(func, "partition-optimizer");
    if (failed(ranks))
      return signalPassFailure();
    // Shards spread over the shard group (every rank, unless hybrid).
    n = ranks->shards;
    axes = ranks->shardAxes();
    SmallVector<ParamUpdate> updates = collectParamUpdates(func);
    if (updates.empty())
      return;
    results = readStepResults(func);
    int64_t index = 0;
    for (auto &[id, unit] : groupByUnit(func, updates))
      if (failed(partition(func, index++, unit)))
        return signalPassFailure();
    finishRewrite(func, results, deadOps, deadArgs);
  }

  LogicalResult partition(func::FuncOp func, int64_t index,
                          SmallVector<ParamUpdate, 4> &unit) {
    OpBuilder b(func.getContext());
    FlatBuilder flat(b, n);
    std::string unitName = "unit" + std::to_string(index);
    Operation *first = unit.front().op;
    for (auto &u : unit) {
      if (u.op->getName() != first->getName() ||
          u.op->getAttrDictionary() != first->getAttrDictionary() ||
          u.states.size() != unit.front().states.size())
        return u.op->emitOpError("zero: parameters of one wrap unit must "
                                 "share the optimizer configuration");
      if (u.op->isBeforeInBlock(first))
        first = u.op;
    }
    Type elem =
        cast<RankedTensorType>(unit.front().param.getType()).getElementType();
    int64_t total = 0;
    SmallVector<Attribute> names, types;
    for (auto &u : unit) {
      auto t = cast<RankedTensorType>(u.param.getType());
      if (t.getElementType() != elem)
        return u.op->emitOpError("zero: a wrap unit mixes element types");
      total += t.getNumElements();
      names.push_back(b.getStringAttr(paramName(func, u.param)));
      types.push_back(TypeAttr::get(t));
    }
    int64_t padded = (total + n - 1) / n * n, shard = padded / n;
    auto flatType = RankedTensorType::get({padded}, elem);
    auto shardType = RankedTensorType::get({shard}, elem);
    Location loc = first->getLoc();
    StringAttr unitAttr = b.getStringAttr(unitName);

    // This rank's gradient shard, sliced from the full gradients right
    // before the update (ZeRO-1 keeps full gradients until the step).
    b.setInsertionPoint(first);
    SmallVector<Value> gflats;
    for (auto &u : unit)
      gflats.push_back(flat.flatten(u.op->getOperand(1), MemoryCategory::Comm));
    Value gflat =
        flat.concatFlat(gflats, padded - total, elem, MemoryCategory::Comm);
    Operation *gslice =
        flat.tag(b.create<mesh::AllSliceOp>(loc, shardType, gflat, kMeshName,
                                            axes, int64_t(0)),
                 MemoryCategory::Grads);
    gslice->setAttr(kGradShardOfAttrName, unitAttr);

    // This rank's parameter shard.
    SmallVector<Value> pflats;
    for (auto &u : unit)
      pflats.push_back(flat.flatten(u.param, MemoryCategory::Params));
    Value pflat =
        flat.concatFlat(pflats, padded - total, elem, MemoryCategory::Params);
    Operation *pslice =
        flat.tag(b.create<mesh::AllSliceOp>(loc, shardType, pflat, kMeshName,
                                            axes, int64_t(0)),
                 MemoryCategory::Params);
    pslice->setAttr(kParamShardOfAttrName, unitAttr);

    // Shard-sized optimizer state replaces the per-parameter state.
    SmallVector<BlockArgument> states;
    for (BlockArgument s : unit.front().states) {
      StringRef full =
          func.getArgAttrOfType<StringAttr>(s.getArgNumber(), kStateAttrName)
              .getValue();
      StringRef suffix =
          full.substr(paramName(func, unit.front().param).size());
      unsigned idx = func.getNumArguments();
      func.insertArgument(
          idx, shardType,
          b.getDictionaryAttr(
              {b.getNamedAttr(kStateAttrName,
                              b.getStringAttr(unitName + suffix.str())),
               b.getNamedAttr(kStateShardOfAttrName, unitAttr),
               b.getNamedAttr(kStateSuffixAttrName, b.getStringAttr(suffix)),
               b.getNamedAttr(kFlatParamsAttrName, b.getArrayAttr(names)),
               b.getNamedAttr(kFlatTypesAttrName, b.getArrayAttr(types))}),
          loc);
      states.push_back(func.getArgument(idx));
    }

    // One update of the whole shard.
    b.setInsertionPoint(first);
    OperationState state(first->getLoc(), first->getName());
    state.addOperands(pslice->getResult(0));
    state.addOperands(gslice->getResult(0));
    for (BlockArgument s : states)
      state.addOperands(s);
    state.addOperands(unit.front().step);
    state.addTypes(SmallVector<Type>(1 + states.size(), shardType));
    state.addAttributes(first->getAttrs());
    Operation *update = b.create(state);
    update->setLoc(NameLoc::get(unitAttr, loc));
    update->setAttr(kUnitNameAttrName, unitAttr);
    update->setAttr(kFlatParamsAttrName, b.getArrayAttr(names));
    update->setAttr(kFlatTypesAttrName, b.getArrayAttr(types));

    // Results: the shard's update replaces the per-parameter ones.
    llvm::DenseSet<Value> old;
    for (auto &u : unit) {
      for (Value r : u.op->getResults())
        old.insert(r);
      deadOps.push_back(u.op);
      for (BlockArgument s : u.states)
        deadArgs.push_back(s);
    }
    llvm::erase_if(results.updates,
                   [&](auto &entry) { return old.contains(entry.first); });
    for (auto [k, s] : llvm::enumerate(states))
      results.updates.push_back({update->getResult(1 + k), s});

    // The full parameters, rebuilt from every rank's updated shard.
    b.setInsertionPointAfter(update);
    Value full = flat.tagged(
        b.create<mesh::AllGatherOp>(loc, flatType, kMeshName, axes,
                                    update->getResult(0), APInt(64, 0)),
        MemoryCategory::Params);
    int64_t offset = 0;
    for (auto &u : unit) {
      auto t = cast<RankedTensorType>(u.param.getType());
      results.updates.push_back(
          {flat.sliceFlat(full, offset, t, MemoryCategory::Params), u.param});
      offset += t.getNumElements();
    }
    return success();
  }

  int64_t n = 1;
  SmallVector<int16_t> axes;
  StepResults results;
  SmallVector<Operation *> deadOps;
  SmallVector<BlockArgument> deadArgs;
};

} // namespace
} // namespace shardc
