//===- ShardingUtils.cpp - Helpers shared by the ZeRO/FSDP passes ---------===//
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace shardc {

SmallVector<ParamUpdate> collectParamUpdates(func::FuncOp func) {
  SmallVector<ParamUpdate> out;
  func.walk([&](Operation *op) {
    if (!isa<SGDUpdateOp, AdamUpdateOp>(op))
      return;
    ParamUpdate u;
    u.op = op;
    u.param = dyn_cast<BlockArgument>(op->getOperand(0));
    u.grad = op->getOperand(1);
    SmallVector<Value> states;
    if (auto sgd = dyn_cast<SGDUpdateOp>(op)) {
      states.push_back(sgd.getMomentumBuffer());
      u.step = sgd.getStep();
    } else {
      auto adam = cast<AdamUpdateOp>(op);
      states.append({adam.getExpAvg(), adam.getExpAvgSq()});
      u.step = adam.getStep();
    }
    for (Value v : states)
      if (auto s = dyn_cast<BlockArgument>(v))
        u.states.push_back(s);
    if (u.param)
      out.push_back(u);
  });
  return out;
}

std::string layerOf(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  std::string prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix += (i ? "." : "") + parts[i].str();
    unsigned n;
    if (!parts[i].getAsInteger(10, n))
      return prefix;
  }
  return name.rsplit('.').first.str();
}

StringRef paramName(func::FuncOp func, BlockArgument arg) {
  if (auto name =
          func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttrName))
    return name.getValue();
  return "";
}

StepResults readStepResults(func::FuncOp func) {
  StepResults r;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (auto target =
            func.getResultAttrOfType<IntegerAttr>(i, kUpdatesAttrName))
      r.updates.push_back({v, func.getArgument(target.getInt())});
    else
      r.outputs.push_back(v);
  }
  return r;
}

void writeStepResults(func::FuncOp func, const StepResults &results) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  OpBuilder b(ret);
  SmallVector<Value> values(results.outputs);
  SmallVector<DictionaryAttr> attrs(results.outputs.size(),
                                    b.getDictionaryAttr({}));
  for (auto &[v, arg] : results.updates) {
    values.push_back(v);
    attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        kUpdatesAttrName, b.getI64IntegerAttr(arg.getArgNumber()))));
  }
  b.create<func::ReturnOp>(ret.getLoc(), values);
  ret.erase();
  SmallVector<Type> types;
  for (Value v : values)
    types.push_back(v.getType());
  func.setFunctionType(
      b.getFunctionType(func.getFunctionType().getInputs(), types));
  func.setAllResultAttrs(attrs);
}

FailureOr<int64_t> configuredWorldSize(func::FuncOp func, StringRef pass) {
  auto ws = func->getAttrOfType<IntegerAttr>(kWorldSizeAttrName);
  if (!ws || ws.getInt() < 1)
    return func.emitError(pass) << ": the step has no world size; run "
                                   "shardc-zero-config first";
  return ws.getInt();
}

SmallVector<int64_t> RankGroups::meshShape() const {
  SmallVector<int64_t> shape;
  if (hybrid())
    shape.push_back(world / shards);
  if (splitsShards())
    shape.append({shards / reshard, reshard});
  else
    shape.push_back(shards);
  return shape;
}
SmallVector<int16_t> RankGroups::shardAxes() const {
  SmallVector<int16_t> axes;
  for (int64_t a = hybrid() ? 1 : 0, e = meshShape().size(); a < e; ++a)
    axes.push_back(a);
  return axes;
}
SmallVector<int16_t> RankGroups::replicaAxes() const {
  if (hybrid())
    return {0};
  return {};
}
SmallVector<int16_t> RankGroups::worldAxes() const {
  SmallVector<int16_t> axes;
  for (int64_t a = 0, e = meshShape().size(); a < e; ++a)
    axes.push_back(a);
  return axes;
}
SmallVector<int16_t> RankGroups::reshardAxes() const {
  if (splitsShards())
    return {static_cast<int16_t>(meshShape().size() - 1)};
  return shardAxes();
}

RankGroups rankGroupsOf(func::FuncOp func) {
  RankGroups ranks;
  if (auto ws = func->getAttrOfType<IntegerAttr>(kWorldSizeAttrName))
    ranks.world = ranks.shards = ws.getInt();
  if (auto g = func->getAttrOfType<IntegerAttr>(kShardGroupAttrName))
    ranks.shards = g.getInt();
  ranks.reshard = ranks.shards;
  if (auto r = func->getAttrOfType<IntegerAttr>(kReshardAttrName))
    ranks.reshard = r.getInt();
  return ranks;
}

FailureOr<RankGroups> configuredRanks(func::FuncOp func, StringRef pass) {
  if (failed(configuredWorldSize(func, pass)))
    return failure();
  RankGroups ranks = rankGroupsOf(func);
  if (ranks.shards < 1 || ranks.world % ranks.shards != 0)
    return func.emitError(pass)
           << ": shard groups of " << ranks.shards
           << " ranks do not divide the world size " << ranks.world;
  if (ranks.reshard < 1 || ranks.shards % ranks.reshard != 0)
    return func.emitError(pass)
           << ": groups of " << ranks.reshard
           << " ranks to reshard over after forward do not divide the shard "
              "group of "
           << ranks.shards;
  return ranks;
}

Value FlatBuilder::sumOverReplicas(Value v, const RankGroups &ranks,
                                   MemoryCategory category) {
  if (!ranks.hybrid() || ranks.world / ranks.shards == 1)
    return v;
  return tagged(b.create<mesh::AllReduceOp>(v.getLoc(), v.getType(), kMeshName,
                                            ranks.replicaAxes(), v,
                                            mesh::ReductionKind::Sum),
                category);
}

Operation *FlatBuilder::tag(Operation *op, MemoryCategory category) {
  op->setAttr(kCategoryAttrName,
              MemoryCategoryAttr::get(op->getContext(), category));
  return op;
}

Value FlatBuilder::tagged(Value v, MemoryCategory category) {
  tag(v.getDefiningOp(), category);
  return v;
}

Value FlatBuilder::flatten(Value v, MemoryCategory category) {
  auto t = cast<RankedTensorType>(v.getType());
  auto flat = RankedTensorType::get({t.getNumElements()}, t.getElementType());
  if (t == flat)
    return v;
  return tagged(b.create<ReshapeOp>(v.getLoc(), flat, v), category);
}

Value FlatBuilder::sliceFlat(Value flat, int64_t offset, RankedTensorType type,
                             MemoryCategory category) {
  auto slice =
      RankedTensorType::get({type.getNumElements()}, type.getElementType());
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

Value FlatBuilder::concatFlat(ArrayRef<Value> parts, int64_t pad, Type elem,
                              MemoryCategory category) {
  SmallVector<Value> all(parts);
  Location loc = parts.front().getLoc();
  if (pad > 0) {
    auto padType = RankedTensorType::get({pad}, elem);
    all.push_back(
        tagged(b.create<ConstantOp>(loc, padType,
                                    cast<ElementsAttr>(DenseElementsAttr::get(
                                        padType, b.getFloatAttr(elem, 0.0)))),
               category));
  }
  if (all.size() == 1)
    return all[0];
  int64_t total = 0;
  for (Value v : all)
    total += cast<RankedTensorType>(v.getType()).getNumElements();
  return tagged(
      b.create<ConcatOp>(loc, RankedTensorType::get({total}, elem), all, 0),
      category);
}

Value FlatBuilder::castTo(Value v, Type elem, MemoryCategory category) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType() == elem)
    return v;
  if (auto c = v.getDefiningOp<CastOp>()) {
    auto in = cast<RankedTensorType>(c.getInput().getType());
    auto from = dyn_cast<FloatType>(in.getElementType());
    auto to = dyn_cast<FloatType>(t.getElementType());
    if (in.getElementType() == elem && from && to &&
        from.getWidth() < to.getWidth())
      return c.getInput();
  }
  return tagged(b.create<CastOp>(v.getLoc(), t.clone(elem), v), category);
}

Value FlatBuilder::scaleByInverseWorld(Value v, MemoryCategory category) {
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

Type reduceElementType(func::FuncOp func) {
  auto attr = func->getAttrOfType<TypeAttr>(kReduceDTypeAttrName);
  return attr ? attr.getValue() : Type();
}

Operation *latestDef(ArrayRef<Value> values) {
  Operation *latest = nullptr;
  for (Value v : values) {
    Operation *def = v.getDefiningOp();
    if (def && (!latest || latest->isBeforeInBlock(def)))
      latest = def;
  }
  return latest;
}

llvm::MapVector<int64_t, SmallVector<ParamUpdate, 4>>
groupByUnit(func::FuncOp func, ArrayRef<ParamUpdate> updates) {
  llvm::MapVector<int64_t, SmallVector<ParamUpdate, 4>> units;
  int64_t next = 1 << 30;
  for (const ParamUpdate &u : updates) {
    auto unit = func.getArgAttrOfType<IntegerAttr>(u.param.getArgNumber(),
                                                   kUnitAttrName);
    units[unit ? unit.getInt() : next++].push_back(u);
  }
  return units;
}

void eraseDeadProducers(Operation *root) {
  // A set: an op reached twice (two operands from one producer) is erased
  // once. An erased op has no users, so nothing can queue it again.
  llvm::SetVector<Operation *> work;
  work.insert(root);
  while (!work.empty()) {
    Operation *cur = work.pop_back_val();
    if (!cur->use_empty() || !isPure(cur))
      continue;
    SmallVector<Operation *> producers;
    for (Value v : cur->getOperands())
      if (Operation *def = v.getDefiningOp())
        producers.push_back(def);
    cur->erase();
    for (Operation *def : producers)
      work.insert(def);
  }
}

void finishRewrite(func::FuncOp func, const StepResults &results,
                   ArrayRef<Operation *> deadOps,
                   ArrayRef<BlockArgument> deadArgs) {
  writeStepResults(func, results);
  for (Operation *op : deadOps)
    op->erase();
  llvm::BitVector erase(func.getNumArguments());
  for (BlockArgument a : deadArgs)
    if (a.use_empty())
      erase.set(a.getArgNumber());
  func.eraseArguments(erase);
  writeStepResults(func, results);
}

FailureOr<SmallVector<Operation *>>
opsAfterUpdates(Block &body, Operation *last, StringRef pass) {
  llvm::SetVector<Operation *> later;
  if (!last)
    return SmallVector<Operation *>();
  for (Operation &op : body) {
    bool dependent = isa<OptimizerUpdate>(op) ||
                     llvm::any_of(op.getOperands(), [&](Value v) {
                       return later.contains(v.getDefiningOp());
                     });
    if (dependent && &op == last)
      return op.emitOpError(pass) << ": a gradient depends on an optimizer "
                                     "update of this step";
    if (dependent)
      later.insert(&op);
    if (&op == last)
      break;
  }
  return SmallVector<Operation *>(later.begin(), later.end());
}

FailureOr<SmallVector<OptimizerUpdate>>
requireUpdates(func::FuncOp func, StringRef pass, StringRef feature) {
  SmallVector<OptimizerUpdate> updates;
  func.walk([&](OptimizerUpdate op) { updates.push_back(op); });
  if (updates.empty())
    return func.emitError(pass)
           << ": the step updates no parameter; " << feature
           << " needs an optimizer (shardc --optimizer) and a trained "
              "parameter";
  return updates;
}

void moveOpsAfter(ArrayRef<Operation *> ops, Operation *anchor) {
  for (Operation *op : ops) {
    op->moveAfter(anchor);
    anchor = op;
  }
}

Value totalNormOverRanks(FlatBuilder &flat, func::FuncOp func,
                         ArrayRef<Value> grads, NormType normType,
                         Location loc) {
  OpBuilder &b = flat.b;
  // The parts are f64: a sum of squares overflows f32 long before the norm
  // does.
  auto part64 = RankedTensorType::get({}, b.getF64Type());
  auto norm = NormTypeAttr::get(b.getContext(), normType);
  Value part;
  for (Value g : grads)
    part = flat.tagged(b.create<PartialNormOp>(loc, part64, g, part, norm),
                       MemoryCategory::Grads);
  RankGroups ranks = rankGroupsOf(func);
  int64_t stage = 0;
  if (auto st = func->getAttrOfType<IntegerAttr>(kZeroStageAttrName))
    stage = st.getInt();
  // Each shard group holds every gradient once (the shards of the updates).
  int64_t world = ranks.shards;
  if (world <= 1 || stage < 1)
    return part;
  Value one = flat.flatten(part, MemoryCategory::Grads);
  if (normType == NormType::L2) {
    Value sum =
        flat.tagged(b.create<mesh::AllReduceOp>(loc, one.getType(), kMeshName,
                                                ranks.shardAxes(), one,
                                                mesh::ReductionKind::Sum),
                    MemoryCategory::Grads);
    return flat.tagged(b.create<ReshapeOp>(loc, part64, sum),
                       MemoryCategory::Grads);
  }
  // Gathered and reduced by PartialNorm, which propagates a NaN that a max
  // reduction of the network might drop.
  auto allType = RankedTensorType::get({world}, b.getF64Type());
  Value all = flat.tagged(b.create<mesh::AllGatherOp>(loc, allType, kMeshName,
                                                      ranks.shardAxes(), one,
                                                      APInt(64, 0)),
                          MemoryCategory::Grads);
  return flat.tagged(b.create<PartialNormOp>(loc, part64, all, Value(), norm),
                     MemoryCategory::Grads);
}

std::string addNamedOutput(func::FuncOp func, Value value, StringRef name) {
  OpBuilder b(func.getContext());
  auto names = func->getAttrOfType<ArrayAttr>(kOutputNamesAttrName);
  SmallVector<Attribute> outNames(names ? names.getValue()
                                        : ArrayRef<Attribute>());
  std::string unique = name.str();
  for (int k = 1;
       llvm::any_of(outNames,
                    [&](Attribute a) {
                      return cast<StringAttr>(a).getValue() == unique;
                    });
       ++k)
    unique = name.str() + "_" + std::to_string(k);
  StepResults results = readStepResults(func);
  results.outputs.push_back(value);
  outNames.push_back(b.getStringAttr(unique));
  writeStepResults(func, results);
  func->setAttr(kOutputNamesAttrName, b.getArrayAttr(outNames));
  return unique;
}

} // namespace shardc
