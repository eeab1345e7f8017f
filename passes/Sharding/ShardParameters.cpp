//===- ShardParameters.cpp - Parameters as shards, gathered per use -------===//
//
// ZeRO stages 1-3 (FSDP's FULL_SHARD and SHARD_GRAD_OP): between steps a
// wrap unit's parameters live only as this rank's shard of their flat,
// padded buffer, a `shardc.param_shard` argument carrying the layout
// (`shardc.flat_params`, `shardc.flat_types`). The update of
// partition-optimizer applies to the shard in place; the full parameters
// are no longer rebuilt after the step. Instead the unit is all-gathered
// before each use window, and its parameters are views of the gathered
// buffer, dead after the window's last use: one window for forward and one
// for backward with reshard-after-forward (stage 3's default), one window
// for the whole step without it (stages 1 and 2: the gather that rebuilt
// the updated parameters at the end of a step moves to where the next
// step's forward first reads them, so it overlaps that forward). With a reshard
// group of R ranks (FSDP2's integer reshard_after_forward), the forward window
// ends by slicing the gathered unit along the mesh's last axis: that slice, 1/R
// of the unit, is kept, and backward gathers it along that axis, within R
// ranks. A parameter used several times (tied weights) is gathered once per
// window. Frozen parameters (wrap-units gives them units of their own) are
// sharded and gathered the same way; nothing updates them.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

#include "llvm/ADT/SetVector.h"

#include <map>

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_SHARDPARAMETERS
#include "passes/Passes.h.inc"

namespace {

struct ShardParametersPass : impl::ShardParametersBase<ShardParametersPass> {
  using ShardParametersBase::ShardParametersBase;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "shard-parameters");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    FailureOr<RankGroups> ranks = configuredRanks(func, "shard-parameters");
    if (failed(ranks))
      return signalPassFailure();
    // Shards spread over the shard group (every rank, unless hybrid).
    const int64_t shards = ranks->shards;
    axes = ranks->shardAxes();
    auto reshard = func->getAttrOfType<IntegerAttr>(kReshardAttrName);
    keepWhole = reshard && reshard.getInt() == 1;
    // Stages 1 and 2 gather a unit once per step, whatever the micro-batches.
    auto stage = func->getAttrOfType<IntegerAttr>(kZeroStageAttrName);
    oneWindow = keepWhole && stage && stage.getInt() < 3;
    if (ranks->splitsShards()) {
      reshardAxes = ranks->reshardAxes();
      reshardGroup = ranks->reshard;
    }
    SmallVector<Operation *> updates;
    func.walk([&](Operation *op) {
      if (op->hasAttr(kUnitNameAttrName))
        updates.push_back(op);
    });
    llvm::StringMap<BlockArgument> params;
    for (BlockArgument arg : func.getArguments())
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        kParamAttrName))
        params[name.getValue()] = arg;
    StepResults results = readStepResults(func);
    SmallVector<BlockArgument> deadArgs;
    OpBuilder b(func.getContext());
    for (Operation *update : updates) {
      auto slice = update->getOperand(0).getDefiningOp<mesh::AllSliceOp>();
      auto names = update->getAttrOfType<ArrayAttr>(kFlatParamsAttrName);
      auto types = update->getAttrOfType<ArrayAttr>(kFlatTypesAttrName);
      if (!slice || !slice->hasAttr(kParamShardOfAttrName) || !names ||
          !types) {
        update->emitOpError("shard-parameters: the update's parameter is not "
                            "a partition-optimizer shard");
        return signalPassFailure();
      }
      auto unitName = update->getAttrOfType<StringAttr>(kUnitNameAttrName);
      SmallVector<BlockArgument> unitParams;
      for (Attribute name : names) {
        BlockArgument p = params.lookup(cast<StringAttr>(name).getValue());
        if (!p) {
          update->emitOpError("shard-parameters: unknown parameter ") << name;
          return signalPassFailure();
        }
        unitParams.push_back(p);
      }
      // The shard argument replaces this rank's slice of the parameters.
      unsigned idx = func.getNumArguments();
      func.insertArgument(
          idx, slice.getType(),
          b.getDictionaryAttr({b.getNamedAttr(kParamShardAttrName, unitName),
                               b.getNamedAttr(kFlatParamsAttrName, names),
                               b.getNamedAttr(kFlatTypesAttrName, types)}),
          update->getLoc());
      BlockArgument shard = func.getArgument(idx);
      update->setOperand(0, shard);
      eraseDeadProducers(slice);
      // The update writes the shard in place; the full parameters are not
      // rebuilt after the step.
      llvm::DenseSet<Value> unitSet(unitParams.begin(), unitParams.end());
      llvm::erase_if(results.updates, [&](auto &entry) {
        return unitSet.contains(entry.second);
      });
      results.updates.push_back({update->getResult(0), shard});
      writeStepResults(func, results);
      for (Operation *user :
           llvm::make_early_inc_range(update->getResult(0).getUsers()))
        if (isa<mesh::AllGatherOp>(user))
          eraseUnusedGather(user);
      gatherForUseWindows(b, shard, unitParams, shards);
      deadArgs.append(unitParams.begin(), unitParams.end());
    }
    // Frozen units: sharded and gathered like the others, never updated.
    std::map<int64_t, SmallVector<BlockArgument>> frozenUnits; // by unit
    for (BlockArgument arg : func.getArguments()) {
      auto role = func.getArgAttrOfType<ParamRoleAttr>(arg.getArgNumber(),
                                                       kRoleAttrName);
      auto unit =
          func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kUnitAttrName);
      if (role && role.getValue() == ParamRole::Frozen && unit)
        frozenUnits[unit.getInt()].push_back(arg);
    }
    for (auto [index, entry] : llvm::enumerate(frozenUnits)) {
      SmallVector<BlockArgument> &unitParams = entry.second;
      if (llvm::any_of(unitParams, [&](BlockArgument p) {
            return llvm::any_of(results.updates,
                                [&](auto &u) { return u.second == p; });
          })) {
        func.emitError("shard-parameters: frozen parameter of unit ")
            << entry.first << " is updated by the step";
        return signalPassFailure();
      }
      shardFrozenUnit(func, b, "frozen" + std::to_string(index), unitParams,
                      shards);
      deadArgs.append(unitParams.begin(), unitParams.end());
    }
    if (updates.empty() && frozenUnits.empty())
      return;
    finishRewrite(func, results, {}, deadArgs);
  }

  /// A unit of frozen parameters becomes one shard argument, gathered before
  /// each use window like a trained unit.
  void shardFrozenUnit(func::FuncOp func, OpBuilder &b, StringRef name,
                       ArrayRef<BlockArgument> unitParams, int64_t n) {
    Type elem =
        cast<RankedTensorType>(unitParams.front().getType()).getElementType();
    int64_t total = 0;
    SmallVector<Attribute> names, types;
    for (BlockArgument p : unitParams) {
      auto t = cast<RankedTensorType>(p.getType());
      total += t.getNumElements();
      names.push_back(b.getStringAttr(paramName(func, p)));
      types.push_back(TypeAttr::get(t));
    }
    int64_t shard = std::max<int64_t>((total + n - 1) / n, 1);
    unsigned idx = func.getNumArguments();
    func.insertArgument(
        idx, RankedTensorType::get({shard}, elem),
        b.getDictionaryAttr(
            {b.getNamedAttr(kParamShardAttrName, b.getStringAttr(name)),
             b.getNamedAttr(kFlatParamsAttrName, b.getArrayAttr(names)),
             b.getNamedAttr(kFlatTypesAttrName, b.getArrayAttr(types)),
             b.getNamedAttr(
                 kRoleAttrName,
                 ParamRoleAttr::get(func.getContext(), ParamRole::Frozen))}),
        unitParams.front().getLoc());
    gatherForUseWindows(b, func.getArgument(idx), unitParams, n);
  }

  /// Erases the rebuild of the full parameters (now without uses): the
  /// gather and the views of it, users first.
  void eraseUnusedGather(Operation *gather) {
    llvm::SetVector<Operation *> chain;
    chain.insert(gather);
    for (size_t i = 0; i < chain.size(); ++i)
      for (Operation *user : chain[i]->getUsers())
        if (isa<SliceOp, ReshapeOp>(user))
          chain.insert(user);
    for (Operation *op : llvm::reverse(chain))
      if (op->use_empty())
        op->erase();
  }

  void gatherForUseWindows(OpBuilder &b, BlockArgument shard,
                           ArrayRef<BlockArgument> unitParams, int64_t n) {
    auto shardType = cast<RankedTensorType>(shard.getType());
    // Under mixed precision every use of the unit's parameters is a cast to
    // the compute dtype: the shard is cast before the gather instead (half
    // the bytes), and the casts' users take views of the gathered buffer.
    SmallVector<CastOp> computeCasts;
    Type castElem;
    bool viaCasts = true;
    for (BlockArgument p : unitParams)
      for (Operation *user : p.getUsers()) {
        if (isa<func::ReturnOp>(user))
          continue;
        auto c = dyn_cast<CastOp>(user);
        auto to = c ? dyn_cast<FloatType>(
                          cast<RankedTensorType>(c.getType()).getElementType())
                    : FloatType();
        auto from = dyn_cast<FloatType>(shardType.getElementType());
        if (!to || !from || to.getWidth() >= from.getWidth() ||
            (castElem && castElem != to)) {
          viaCasts = false;
          continue;
        }
        castElem = to;
        computeCasts.push_back(c);
      }
    viaCasts &= !computeCasts.empty();
    Type elem = viaCasts ? castElem : shardType.getElementType();
    auto flatType =
        RankedTensorType::get({shardType.getNumElements() * n}, elem);
    FlatBuilder flat(b, n);
    // Use windows by (micro-batch, backward): with gradient accumulation
    // every micro-batch's forward and backward gather again at stage 3, as
    // FSDP does; at stages 1 and 2 one window spans the step.
    // Each use is kept with the parameter it takes a view of.
    llvm::MapVector<std::pair<int64_t, int64_t>,
                    SmallVector<std::pair<OpOperand *, BlockArgument>>>
        windows;
    auto addUses = [&](Value v, BlockArgument p) {
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (isa<func::ReturnOp>(user))
          continue;
        auto micro = user->getAttrOfType<IntegerAttr>(kMicroBatchAttrName);
        bool backward = user->hasAttr(kBackwardAttrName);
        windows[{micro && !oneWindow ? micro.getInt() : 0,
                 !keepWhole && backward ? 1 : 0}]
            .push_back({&use, p});
      }
    };
    if (viaCasts)
      for (CastOp c : computeCasts)
        addUses(c.getResult(), cast<BlockArgument>(c.getInput()));
    else
      for (BlockArgument p : unitParams)
        addUses(p, p);
    // With a reshard group, the slice of each micro-batch's forward gather
    // that its backward gathers from.
    DenseMap<int64_t, Value> kept;
    SmallVector<std::pair<int64_t, int64_t>> keys;
    for (auto &entry : windows)
      keys.push_back(entry.first);
    llvm::sort(keys); // each forward window before its backward window
    for (auto key : keys) {
      auto &window = windows[key];
      auto [micro, backwardWindow] = key;
      Operation *firstUser = window.front().first->getOwner();
      Operation *lastUser = firstUser;
      for (auto &[use, p] : window) {
        if (use->getOwner()->isBeforeInBlock(firstUser))
          firstUser = use->getOwner();
        if (lastUser->isBeforeInBlock(use->getOwner()))
          lastUser = use->getOwner();
      }
      b.setInsertionPoint(firstUser);
      Value full;
      Value slice = backwardWindow ? kept.lookup(micro) : Value();
      // The slice is taken after the forward window's last use: a backward
      // use before it (which autodiff does not make) gathers from the shard.
      if (slice && !slice.getDefiningOp()->isBeforeInBlock(firstUser))
        slice = Value();
      if (slice) {
        full = flat.tagged(b.create<mesh::AllGatherOp>(
                               firstUser->getLoc(), flatType, kMeshName,
                               reshardAxes, slice, APInt(64, 0)),
                           MemoryCategory::Params);
      } else {
        Value source = shard;
        if (viaCasts)
          source = flat.tagged(b.create<CastOp>(firstUser->getLoc(),
                                                shardType.clone(elem), shard),
                               MemoryCategory::Params);
        full = flat.tagged(
            b.create<mesh::AllGatherOp>(firstUser->getLoc(), flatType,
                                        kMeshName, axes, source, APInt(64, 0)),
            MemoryCategory::Params);
      }
      // Forward, with a reshard group: the slice of the gathered unit that
      // backward gathers within the group, taken after the last forward use
      // (the whole unit is alive until then anyway).
      if (!backwardWindow && !reshardAxes.empty() &&
          windows.contains({micro, 1})) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointAfter(lastUser);
        auto keptType = RankedTensorType::get(
            {flatType.getNumElements() / reshardGroup}, elem);
        kept[micro] = flat.tagged(
            b.create<mesh::AllSliceOp>(lastUser->getLoc(), keptType, full,
                                       kMeshName, reshardAxes, int64_t(0)),
            MemoryCategory::Params);
      }
      // The backward window's gather is marked as backward, and a later
      // micro-batch's with its number: besides saying where it belongs,
      // this keeps a CSE on this (pure, value-semantic) IR from merging it
      // with another window's gather of the same shard, which would undo
      // resharding.
      if (backwardWindow)
        full.getDefiningOp()->setAttr(kBackwardAttrName, b.getUnitAttr());
      if (micro > 0)
        full.getDefiningOp()->setAttr(kMicroBatchAttrName,
                                      b.getI64IntegerAttr(micro));
      DenseMap<Value, Value> views;
      int64_t offset = 0;
      for (BlockArgument p : unitParams) {
        auto t = cast<RankedTensorType>(p.getType());
        if (llvm::any_of(window,
                         [&](auto &entry) { return entry.second == p; }))
          views[p] = flat.sliceFlat(full, offset, t.clone(elem),
                                    MemoryCategory::Params);
        offset += t.getNumElements();
      }
      for (auto &[use, p] : window)
        use->set(views.lookup(p));
    }
    for (CastOp c : computeCasts)
      if (viaCasts && c->use_empty())
        c->erase();
  }

  /// The mesh axes the gathers span (the shard group's).
  SmallVector<int16_t> axes;
  /// With a reshard group (RankGroups::splitsShards()), its axes and size:
  /// backward gathers within it; else empty and 0.
  SmallVector<int16_t> reshardAxes;
  int64_t reshardGroup = 0;
  /// reshard-after-forward=false: one use window per micro-batch.
  bool keepWhole = false;
  /// Stages 1 and 2: one use window for the whole step.
  bool oneWindow = false;
};

} // namespace
} // namespace shardc
