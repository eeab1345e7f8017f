//===- Zero.cpp - ZeRO stages 0-3 as a rewrite of the training step -------===//
//
// Runs on the training step after the optimizer pass, where every trainable
// parameter has one update op (SGDUpdate/AdamUpdate) consuming its gradient
// and its optimizer state. Collectives are expressed with the upstream mesh
// dialect on a 1-d mesh @world of world-size ranks:
//
//  stage 0  gradients are averaged with bucketed mesh.all_reduce (buckets of
//           at most bucket-cap-mb, filled in the order gradients are
//           produced; each bucket's all-reduce is issued as soon as its last
//           gradient exists). Updates stay per parameter.
//  stage 1  as stage 0, and each wrap unit's parameters, gradients and
//           optimizer state are flattened and padded to a multiple of the
//           world size; a rank updates only its shard (mesh.all_slice) with
//           shard-sized optimizer state, then mesh.all_gather rebuilds the
//           full parameters.
//  stage 2  gradients are not all-reduced: each unit's flattened gradient is
//           reduce-scattered (mesh.reduce_scatter) as soon as the unit's last
//           gradient is produced, so a rank keeps only its gradient shard.
//  stage 3  parameters too live only as shards: each unit becomes one
//           `shardc.param_shard` argument; before each use window (forward,
//           and again in backward when reshard-after-forward) the unit is
//           all-gathered and its parameters are views of the gathered
//           buffer, dead after the window's last use. The update runs on the
//           shard in place.
//
// Gradients are averaged over ranks (sum / world size), as DDP does.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_ZERO
#include "passes/Passes.h.inc"

namespace {

class ZeroRewriter {
public:
  ZeroRewriter(ModuleOp module, func::FuncOp func, int64_t worldSize,
               int64_t stage, int64_t bucketBytes, bool reshardAfterForward)
      : module(module), func(func), b(func.getContext()), n(worldSize),
        stage(stage), bucketBytes(bucketBytes),
        reshardAfterForward(reshardAfterForward) {}

  LogicalResult run();

private:
  using Unit = SmallVector<ParamUpdate, 4>;

  Operation *tag(Operation *op, StringRef category) {
    op->setAttr(kCategoryAttrName, b.getStringAttr(category));
    return op;
  }
  Value tagged(Value v, StringRef category) {
    tag(v.getDefiningOp(), category);
    return v;
  }
  Value flatten(Value v, StringRef category);
  Value sliceFlat(Value flat, int64_t offset, RankedTensorType type,
                  StringRef category);
  Value concatFlat(ArrayRef<Value> parts, int64_t pad, Type elem,
                   StringRef category);
  Value scaleByInverseWorld(Value v, StringRef category);
  unsigned position(Operation *op);
  Operation *latestDef(ArrayRef<Value> values);

  void allReduceGradients(ArrayRef<ParamUpdate> updates);
  LogicalResult shardUnit(int64_t index, Unit &unit);
  void gatherForUseWindows(BlockArgument shard, Unit &unit, int64_t total,
                           int64_t padded);

  ModuleOp module;
  func::FuncOp func;
  OpBuilder b;
  int64_t n, stage, bucketBytes;
  bool reshardAfterForward;
  StepResults results;
  DenseMap<Operation *, unsigned> positions;
  SmallVector<Operation *> deadOps;
  SmallVector<BlockArgument> deadArgs;
};

unsigned ZeroRewriter::position(Operation *op) {
  if (positions.empty()) {
    unsigned i = 0;
    for (Operation &o : func.getBody().front())
      positions[&o] = i++;
  }
  return positions.lookup(op);
}

Operation *ZeroRewriter::latestDef(ArrayRef<Value> values) {
  Operation *latest = nullptr;
  for (Value v : values) {
    Operation *def = v.getDefiningOp();
    if (def && (!latest || latest->isBeforeInBlock(def)))
      latest = def;
  }
  return latest;
}

Value ZeroRewriter::flatten(Value v, StringRef category) {
  auto t = cast<RankedTensorType>(v.getType());
  auto flat = RankedTensorType::get({t.getNumElements()}, t.getElementType());
  if (t == flat)
    return v;
  return tagged(b.create<ReshapeOp>(v.getLoc(), flat, v), category);
}

Value ZeroRewriter::sliceFlat(Value flat, int64_t offset, RankedTensorType type,
                              StringRef category) {
  auto slice = RankedTensorType::get({type.getNumElements()},
                                     type.getElementType());
  Value s = flat;
  if (slice != flat.getType())
    s = tagged(b.create<SliceOp>(flat.getLoc(), slice, flat,
                                 ArrayRef<int64_t>{offset},
                                 ArrayRef<int64_t>{1}),
               category);
  if (type == slice)
    return s;
  return tagged(b.create<ReshapeOp>(flat.getLoc(), type, s), category);
}

Value ZeroRewriter::concatFlat(ArrayRef<Value> parts, int64_t pad, Type elem,
                               StringRef category) {
  SmallVector<Value> all(parts);
  Location loc = parts.front().getLoc();
  if (pad > 0) {
    auto padType = RankedTensorType::get({pad}, elem);
    all.push_back(tagged(
        b.create<ConstantOp>(loc, padType,
                             cast<ElementsAttr>(DenseElementsAttr::get(
                                 padType, b.getFloatAttr(elem, 0.0)))),
        category));
  }
  if (all.size() == 1)
    return all[0];
  int64_t total = 0;
  for (Value v : all)
    total += cast<RankedTensorType>(v.getType()).getNumElements();
  return tagged(b.create<ConcatOp>(loc, RankedTensorType::get({total}, elem),
                                   all, 0),
                category);
}

Value ZeroRewriter::scaleByInverseWorld(Value v, StringRef category) {
  if (n == 1)
    return v;
  auto et = cast<RankedTensorType>(v.getType()).getElementType();
  auto st = RankedTensorType::get({}, et);
  Value c = b.create<ConstantOp>(
      v.getLoc(), st,
      cast<ElementsAttr>(DenseElementsAttr::get(
          st, b.getFloatAttr(et, 1.0 / static_cast<double>(n)))));
  return tagged(b.create<MulOp>(v.getLoc(), v.getType(), v, c), category);
}

void ZeroRewriter::allReduceGradients(ArrayRef<ParamUpdate> all) {
  // Buckets in the order gradients are produced.
  SmallVector<ParamUpdate> updates(all.begin(), all.end());
  auto defPos = [&](const ParamUpdate &u) {
    Operation *d = u.grad.getDefiningOp();
    return d ? position(d) : 0u;
  };
  llvm::stable_sort(updates, [&](const ParamUpdate &a, const ParamUpdate &c) {
    return defPos(a) < defPos(c);
  });
  SmallVector<SmallVector<ParamUpdate>> buckets;
  int64_t filled = 0;
  for (const ParamUpdate &u : updates) {
    auto t = cast<RankedTensorType>(u.grad.getType());
    int64_t bytes = t.getNumElements() *
                    std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
    if (buckets.empty() || filled + bytes > bucketBytes ||
        cast<RankedTensorType>(buckets.back().front().grad.getType())
                .getElementType() != t.getElementType()) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(u);
    filled += bytes;
  }
  for (auto &bucket : buckets) {
    SmallVector<Value> grads;
    for (auto &u : bucket)
      grads.push_back(u.grad);
    if (Operation *last = latestDef(grads))
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&func.getBody().front());
    SmallVector<Value> flats;
    for (Value g : grads)
      flats.push_back(flatten(g, "comm"));
    Type elem = cast<RankedTensorType>(grads[0].getType()).getElementType();
    Value flat = concatFlat(flats, 0, elem, "comm");
    // The bucket holds the summed gradients; each gradient is sliced out
    // and averaged right where its update needs it.
    Value reduced = tagged(
        b.create<mesh::AllReduceOp>(flat.getLoc(), flat.getType(), kMeshName,
                                    ArrayRef<int16_t>{0}, flat,
                                    mesh::ReductionKind::Sum),
        "grads");
    int64_t offset = 0;
    for (auto &u : bucket) {
      auto t = cast<RankedTensorType>(u.grad.getType());
      Value g = scaleByInverseWorld(sliceFlat(reduced, offset, t, "grads"),
                                    "grads");
      u.op->setOperand(1, g);
      offset += t.getNumElements();
    }
  }
}

LogicalResult ZeroRewriter::shardUnit(int64_t index, Unit &unit) {
  std::string unitName = "unit" + std::to_string(index);
  Operation *first = unit.front().op;
  for (auto &u : unit) {
    if (u.op->getName() != first->getName() ||
        u.op->getAttrDictionary() != first->getAttrDictionary() ||
        u.states.size() != unit.front().states.size())
      return u.op->emitOpError("zero: parameters of one wrap unit must share "
                               "the optimizer configuration");
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

  // This rank's gradient shard.
  SmallVector<Value> grads;
  for (auto &u : unit)
    grads.push_back(u.op->getOperand(1));
  // Stage 1 keeps full (all-reduced) gradients until the step, as ZeRO-1
  // does; stages 2 and 3 reduce-scatter a unit as soon as it is complete.
  Operation *last = latestDef(grads);
  if (stage == 1 || !last)
    b.setInsertionPoint(first);
  else
    b.setInsertionPointAfter(last);
  SmallVector<Value> gflats;
  for (Value g : grads)
    gflats.push_back(flatten(g, "comm"));
  Value gflat = concatFlat(gflats, padded - total, elem, "comm");
  Value gshard;
  if (stage == 1) {
    gshard = tagged(b.create<mesh::AllSliceOp>(loc, shardType, gflat,
                                               kMeshName, ArrayRef<int16_t>{0},
                                               int64_t(0)),
                    "grads");
  } else {
    Value rs = tagged(
        b.create<mesh::ReduceScatterOp>(
            loc, shardType, kMeshName, ArrayRef<int16_t>{0}, gflat,
            mesh::ReductionKind::Sum, APInt(64, 0)),
        "grads");
    gshard = scaleByInverseWorld(rs, "grads");
  }

  // This rank's parameter shard.
  Value pshard;
  BlockArgument shardArg;
  if (stage == 3) {
    unsigned idx = func.getNumArguments();
    func.insertArgument(
        idx, shardType,
        b.getDictionaryAttr(
            {b.getNamedAttr(kParamShardAttrName, b.getStringAttr(unitName)),
             b.getNamedAttr(kFlatParamsAttrName, b.getArrayAttr(names)),
             b.getNamedAttr(kFlatTypesAttrName, b.getArrayAttr(types))}),
        loc);
    shardArg = func.getArgument(idx);
    pshard = shardArg;
  } else {
    b.setInsertionPoint(first);
    SmallVector<Value> pflats;
    for (auto &u : unit)
      pflats.push_back(flatten(u.param, "params"));
    Value pflat = concatFlat(pflats, padded - total, elem, "params");
    pshard = tagged(b.create<mesh::AllSliceOp>(loc, shardType, pflat,
                                               kMeshName, ArrayRef<int16_t>{0},
                                               int64_t(0)),
                    "params");
  }

  // Shard-sized optimizer state replaces the per-parameter state.
  SmallVector<BlockArgument> states;
  for (auto [k, s] : llvm::enumerate(unit.front().states)) {
    StringRef full = func.getArgAttrOfType<StringAttr>(s.getArgNumber(),
                                                       kStateAttrName)
                         .getValue();
    StringRef suffix = full.substr(paramName(func, unit.front().param).size());
    unsigned idx = func.getNumArguments();
    func.insertArgument(idx, shardType,
                        b.getDictionaryAttr(b.getNamedAttr(
                            kStateAttrName,
                            b.getStringAttr(unitName + suffix.str()))),
                        loc);
    states.push_back(func.getArgument(idx));
  }

  // One update of the whole shard.
  b.setInsertionPoint(first);
  OperationState state(first->getLoc(), first->getName());
  state.addOperands(pshard);
  state.addOperands(gshard);
  for (BlockArgument s : states)
    state.addOperands(s);
  state.addOperands(unit.front().step);
  state.addTypes(SmallVector<Type>(1 + states.size(), shardType));
  state.addAttributes(first->getAttrs());
  Operation *update = b.create(state);
  update->setLoc(NameLoc::get(b.getStringAttr(unitName), loc));

  // Results: drop the per-parameter updates, add the shard's.
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

  if (stage == 3) {
    results.updates.push_back({update->getResult(0), shardArg});
    gatherForUseWindows(shardArg, unit, total, padded);
    for (auto &u : unit)
      deadArgs.push_back(u.param);
    return success();
  }
  // Stages 1 and 2: rebuild the full parameters from the updated shards.
  b.setInsertionPointAfter(update);
  Value full = tagged(b.create<mesh::AllGatherOp>(
                          loc, flatType, kMeshName, ArrayRef<int16_t>{0},
                          update->getResult(0), APInt(64, 0)),
                      "params");
  int64_t offset = 0;
  for (auto &u : unit) {
    auto t = cast<RankedTensorType>(u.param.getType());
    results.updates.push_back(
        {sliceFlat(full, offset, t, "params"), u.param});
    offset += t.getNumElements();
  }
  return success();
}

void ZeroRewriter::gatherForUseWindows(BlockArgument shard, Unit &unit,
                                       int64_t total, int64_t padded) {
  auto flatType = RankedTensorType::get(
      {padded}, cast<RankedTensorType>(shard.getType()).getElementType());
  // Windows: forward uses, then backward uses (or all uses in one window).
  SmallVector<SmallVector<OpOperand *>, 2> windows(reshardAfterForward ? 2 : 1);
  llvm::DenseSet<Operation *> dead(deadOps.begin(), deadOps.end());
  for (auto &u : unit)
    for (OpOperand &use : u.param.getUses()) {
      Operation *user = use.getOwner();
      if (dead.contains(user) || isa<func::ReturnOp>(user))
        continue;
      bool backward = user->hasAttr(kBackwardAttrName);
      windows[reshardAfterForward && backward ? 1 : 0].push_back(&use);
    }
  for (auto &window : windows) {
    if (window.empty())
      continue;
    Operation *firstUser = window.front()->getOwner();
    for (OpOperand *use : window)
      if (use->getOwner()->isBeforeInBlock(firstUser))
        firstUser = use->getOwner();
    b.setInsertionPoint(firstUser);
    Location loc = firstUser->getLoc();
    Value full = tagged(b.create<mesh::AllGatherOp>(loc, flatType, kMeshName,
                                                    ArrayRef<int16_t>{0}, shard,
                                                    APInt(64, 0)),
                        "params");
    DenseMap<Value, Value> views;
    int64_t offset = 0;
    for (auto &u : unit) {
      auto t = cast<RankedTensorType>(u.param.getType());
      bool used = llvm::any_of(
          window, [&](OpOperand *use) { return use->get() == u.param; });
      if (used)
        views[u.param] = sliceFlat(full, offset, t, "params");
      offset += t.getNumElements();
    }
    for (OpOperand *use : window)
      use->set(views.lookup(use->get()));
  }
  (void)total;
}

LogicalResult ZeroRewriter::run() {
  func->setAttr(kWorldSizeAttrName, b.getI64IntegerAttr(n));
  func->setAttr(kZeroStageAttrName, b.getI64IntegerAttr(stage));
  if (!module.lookupSymbol(kMeshName)) {
    b.setInsertionPointToStart(module.getBody());
    b.create<mesh::MeshOp>(module.getLoc(), kMeshName, ArrayRef<int64_t>{n});
  }
  SmallVector<ParamUpdate> updates = collectParamUpdates(func);
  if (updates.empty())
    return success();
  // Updates come after the backward pass (the optimizer pass puts them
  // there); gradient reductions are inserted between the two.
  Operation *firstUpdate = updates.front().op;
  for (ParamUpdate &u : updates)
    if (u.op->isBeforeInBlock(firstUpdate))
      firstUpdate = u.op;
  for (ParamUpdate &u : updates)
    if (Operation *def = u.grad.getDefiningOp())
      if (firstUpdate->isBeforeInBlock(def))
        return firstUpdate->emitOpError(
            "zero: optimizer updates must follow every gradient they use");
  results = readStepResults(func);
  // The parameter gradients autodiff produced count as gradients in the
  // memory plan (not as activations).
  for (ParamUpdate &u : updates)
    if (Operation *def = u.grad.getDefiningOp())
      if (!def->hasAttr(kCategoryAttrName))
        tag(def, "grads");

  if (stage <= 1)
    allReduceGradients(updates);
  if (stage == 0)
    return success();

  // Units, in order of first appearance.
  llvm::MapVector<int64_t, Unit> units;
  int64_t next = 1 << 30;
  for (ParamUpdate &u : updates) {
    auto unit =
        func.getArgAttrOfType<IntegerAttr>(u.param.getArgNumber(), kUnitAttrName);
    units[unit ? unit.getInt() : next++].push_back(u);
  }
  int64_t index = 0;
  for (auto &[id, unit] : units)
    if (failed(shardUnit(index++, unit)))
      return failure();

  writeStepResults(func, results);
  for (Operation *op : deadOps)
    op->erase();
  llvm::BitVector erase(func.getNumArguments());
  for (BlockArgument a : deadArgs)
    if (a.use_empty())
      erase.set(a.getArgNumber());
  func.eraseArguments(erase);
  writeStepResults(func, results);
  return success();
}

struct ZeroPass : impl::ZeroBase<ZeroPass> {
  using ZeroBase::ZeroBase;
  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!func) {
      getOperation().emitError("zero: the module has no func.func @main");
      return signalPassFailure();
    }
    if (worldSize < 1 || stage < 0 || stage > 3 || bucketCapMb <= 0) {
      func.emitError("zero: world size must be >= 1, the stage 0-3 and the "
                     "bucket cap positive");
      return signalPassFailure();
    }
    ZeroRewriter rewriter(getOperation(), func, worldSize, stage,
                          static_cast<int64_t>(bucketCapMb * (1 << 20)),
                          reshardAfterForward);
    if (failed(rewriter.run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace shardc
