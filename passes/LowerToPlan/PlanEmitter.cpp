//===- PlanEmitter.cpp - Lowering the final IR to a plan ------------------===//
#include "passes/LowerToPlan/PlanEmitter.h"
#include "passes/Passes.h"

#include "ir/ShardcDialect.h"
#include "passes/LowerToPlan/OpDesc.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace shardc {

/// A name for the values an op defines: its ONNX node name when it has one.
static std::string locName(Location loc, llvm::StringRef fallback) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  return fallback.str();
}

static plan::Attribute toPlanAttr(const std::string &name,
                                  const rt::AttrValue &v) {
  plan::Attribute a;
  a.set_name(name);
  switch (v.kind) {
  case rt::AttrValue::Kind::Int:
    a.set_i(v.i);
    break;
  case rt::AttrValue::Kind::Float:
    a.set_f(v.f);
    break;
  case rt::AttrValue::Kind::String:
    a.set_s(v.s);
    break;
  case rt::AttrValue::Kind::Ints: {
    plan::Ints *ints = a.mutable_ints(); // set even when empty
    for (int64_t x : v.ints)
      ints->add_values(x);
    break;
  }
  case rt::AttrValue::Kind::Floats: {
    plan::Floats *floats = a.mutable_floats();
    for (double x : v.floats)
      floats->add_values(x);
    break;
  }
  }
  return a;
}

/// The plan's category for a MemoryCategory.
static plan::Category toPlanCategory(MemoryCategory category) {
  switch (category) {
  case MemoryCategory::Params:
    return plan::PARAMS;
  case MemoryCategory::Grads:
    return plan::GRADS;
  case MemoryCategory::OptState:
    return plan::OPT_STATE;
  case MemoryCategory::Activations:
    return plan::ACTIVATIONS;
  case MemoryCategory::Comm:
    return plan::COMM;
  }
  llvm_unreachable("unknown memory category");
}

/// The plan's role of a parameter.
static plan::ParamRole planRole(ParamRole role) {
  switch (role) {
  case ParamRole::Trained:
    return plan::TRAINED;
  case ParamRole::Frozen:
    return plan::FROZEN;
  case ParamRole::NoGradient:
    return plan::NO_GRADIENT;
  case ParamRole::Statistic:
    return plan::RUNNING_STATISTIC;
  }
  llvm_unreachable("unknown parameter role");
}

/// The memory category of an op result.
static plan::Category categoryOf(OpResult r) {
  if (auto grads =
          r.getOwner()->getAttrOfType<DenseI64ArrayAttr>(kGradResultsAttrName))
    return llvm::is_contained(grads.asArrayRef(), r.getResultNumber())
               ? plan::GRADS
               : plan::ACTIVATIONS;
  if (auto cat =
          r.getOwner()->getAttrOfType<MemoryCategoryAttr>(kCategoryAttrName))
    return toPlanCategory(cat.getValue());
  for (OpOperand &use : r.getUses())
    if (isa<SGDUpdateOp, AdamUpdateOp>(use.getOwner()) &&
        use.getOperandNumber() == 1)
      return plan::GRADS;
  return plan::ACTIVATIONS;
}

/// Ranks one copy of the sharded state is spread over: the world, or with
/// hybrid sharding the shard group.
static int64_t shardCount(func::FuncOp func) {
  return rankGroupsOf(func).shards;
}

/// FNV-1a over the collectives every rank issues, in order.
static uint64_t collectiveFingerprint(const plan::Plan &p) {
  std::string key = "world=" + std::to_string(p.world_size()) +
                    ";stage=" + std::to_string(p.zero_stage()) + ";";
  for (const plan::Op &op : p.ops()) {
    StringRef type = op.type();
    if (!type.ends_with("Start") && type != "CollectiveWait")
      continue;
    key += op.type();
    for (const plan::Attribute &a : op.attributes())
      if (a.name() == "mesh_axes")
        for (int64_t axis : a.ints().values())
          key += "@" + std::to_string(axis);
    for (int32_t id : op.inputs()) {
      const plan::Buffer &b = p.buffers(id);
      int64_t n = 1;
      for (int64_t d : b.shape())
        n *= d;
      key += ":" + std::to_string(b.dtype()) + "x" + std::to_string(n);
    }
    key += ";";
  }
  return plan::fnv1a64(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(key.data()), key.size()));
}

LogicalResult emitPlan(ModuleOp module, const ParamReader &params,
                       plan::PlanWriter &writer) {
  assert((params || writer.shapesOnly()) &&
         "only a shapes-only plan is emitted without its parameters");
  FailureOr<func::FuncOp> step = getStepFunction(module, "plan lowering");
  if (failed(step))
    return failure();
  func::FuncOp func = *step;
  plan::Plan &p = writer.plan();
  if (auto name = module->getAttrOfType<StringAttr>("shardc.model_name"))
    p.set_model_name(name.str());

  DenseMap<Value, int32_t> buffers;
  // Optimizer-state shards of wrap units, with their unit's name.
  SmallVector<std::pair<BlockArgument, StringAttr>> stateShards;
  // Whole units (FlatUnit.whole): a shard view's buffer -> the unit's
  // buffer, which the shard's one all-gather fills in place.
  DenseMap<int32_t, int32_t> wholeUnitOf;
  // A ZeRO stage 1-2 unit's shard, gathered once per step straight from the
  // argument in its own element type (no cast, not offloaded), lies inside
  // the unit's whole buffer: the gather fills the buffer around it in place.
  auto gathersWhole = [&](BlockArgument arg) {
    auto stage = func->getAttrOfType<IntegerAttr>(kZeroStageAttrName);
    if (!stage || stage.getInt() < 1 || stage.getInt() > 2 ||
        func.getArgAttr(arg.getArgNumber(), kOffloadAttrName))
      return false;
    auto type = cast<RankedTensorType>(arg.getType());
    unsigned gathers = 0;
    for (Operation *user : arg.getUsers())
      if (auto g = dyn_cast<AllGatherStartOp>(user))
        gathers += g.getInput() == arg &&
                   cast<PendingType>(g.getPending().getType())
                           .getTensorType()
                           .getElementType() == type.getElementType();
    return type.getRank() == 1 && gathers == 1;
  };
  // A pending collective's buffer is the tensor it will hold.
  auto bufferType = [](Value v) {
    auto t = isa<PendingType>(v.getType())
                 ? cast<PendingType>(v.getType()).getTensorType()
                 : cast<RankedTensorType>(v.getType());
    return std::make_pair(toRuntimeType(t.getElementType()), t.getShape());
  };

  // The runtime finishes every collective it starts exactly once.
  WalkResult handles = func.walk([&](Operation *op) {
    if (!isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp,
             OffloadReadStartOp, OffloadWriteStartOp>(op))
      return WalkResult::advance();
    Value pending = op->getResult(0);
    bool oneWait = pending.hasOneUse() &&
                   isa<CollectiveWaitOp>(*pending.getUsers().begin());
    if (oneWait)
      return WalkResult::advance();
    op->emitOpError("is not finished by exactly one shardc.CollectiveWait: ")
        << "every started collective must be waited for once before the "
           "step ends";
    return WalkResult::interrupt();
  });
  if (handles.wasInterrupted())
    return failure();

  for (BlockArgument arg : func.getArguments()) {
    auto [dtype, shape] = bufferType(arg);
    if (dtype == rt::DType::Undefined)
      return func.emitError("argument ")
             << arg.getArgNumber() << " has an element type plans cannot hold";
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      kStateAttrName)) {
      buffers[arg] =
          writer.addBuffer(name.getValue(), dtype, shape, plan::STATE);
      p.mutable_buffers(buffers[arg])->set_category(plan::OPT_STATE);
      if (auto init = func.getArgAttrOfType<FloatAttr>(arg.getArgNumber(),
                                                       kStateInitAttrName))
        p.mutable_buffers(buffers[arg])
            ->set_initial_value(init.getValueAsDouble());
      if (auto unit = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        kStateShardOfAttrName))
        stateShards.push_back({arg, unit});
      continue;
    }
    if (auto unit = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      kParamShardAttrName)) {
      // A ZeRO-3 flat parameter: the data file holds every rank's shard.
      auto names = func.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(),
                                                    kFlatParamsAttrName);
      auto types = func.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(),
                                                    kFlatTypesAttrName);
      int64_t worldSize = shardCount(func);
      if (!names || !types || names.size() != types.size())
        return func.emitError("flat parameter ") << unit << " has no layout";
      std::vector<uint8_t> data;
      plan::FlatUnit *fu = p.add_units();
      fu->set_name(unit.str());
      int64_t offset = 0;
      for (auto [nameAttr, typeAttr] : llvm::zip(names, types)) {
        StringRef pname = cast<StringAttr>(nameAttr).getValue();
        auto ptype =
            cast<RankedTensorType>(cast<TypeAttr>(typeAttr).getValue());
        if (params) {
          auto bytes = params(pname);
          if (!bytes)
            return func.emitError("parameter '")
                   << pname << "': " << llvm::toString(bytes.takeError());
          data.insert(data.end(), bytes->begin(), bytes->end());
        }
        plan::FlatParam *fp = fu->add_params();
        fp->set_name(pname.str());
        fp->set_offset(offset);
        for (int64_t d : ptype.getShape())
          fp->add_shape(d);
        offset += ptype.getNumElements();
      }
      int64_t padded = shape[0] * worldSize;
      if (params)
        data.resize(padded * rt::dtypeSize(dtype), 0);
      fu->set_padded_elements(padded);
      bool whole = gathersWhole(arg);
      auto id = whole ? writer.addDataBuffer(unit.getValue(), dtype, {padded},
                                             plan::PARAMETER, data)
                      : writer.addDataBuffer(unit.getValue(), dtype, shape,
                                             plan::PARAMETER, data, worldSize);
      if (!id)
        return func.emitError("flat parameter ")
               << unit << ": " << llvm::toString(id.takeError());
      buffers[arg] = *id;
      fu->set_buffer(*id);
      if (whole) {
        // The argument is this rank's shard: a view of the whole buffer.
        int32_t shard = writer.addBuffer((unit.getValue() + ":shard").str(),
                                         dtype, shape, plan::TEMP);
        plan::Buffer *vb = p.mutable_buffers(shard);
        vb->set_is_alias(true);
        vb->set_alias_of(*id);
        vb->set_alias_shard_stride(shape[0] * rt::dtypeSize(dtype));
        vb->set_category(plan::PARAMS);
        buffers[arg] = shard;
        wholeUnitOf[shard] = *id;
        fu->set_whole(true);
      }
      p.mutable_buffers(*id)->set_category(plan::PARAMS);
      auto role = func.getArgAttrOfType<ParamRoleAttr>(arg.getArgNumber(),
                                                       kRoleAttrName);
      p.mutable_buffers(*id)->set_role(
          planRole(role ? role.getValue() : ParamRole::Trained));
      continue;
    }
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      kInputAttrName)) {
      int32_t id = writer.addBuffer(name.getValue(), dtype, shape, plan::INPUT);
      p.add_inputs(id);
      buffers[arg] = id;
      continue;
    }
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttrName);
    if (!name)
      return func.emitError("argument ")
             << arg.getArgNumber() << " is neither an input nor a parameter";
    llvm::Expected<std::vector<uint8_t>> bytes = std::vector<uint8_t>();
    if (params)
      bytes = params(name.getValue());
    if (!bytes)
      return func.emitError("parameter '")
             << name.getValue() << "': " << llvm::toString(bytes.takeError());
    auto id = writer.addDataBuffer(name.getValue(), dtype, shape,
                                   plan::PARAMETER, *bytes);
    if (!id)
      return func.emitError("parameter '")
             << name.getValue() << "': " << llvm::toString(id.takeError());
    buffers[arg] = *id;
    p.mutable_buffers(*id)->set_category(plan::PARAMS);
    if (auto role = func.getArgAttrOfType<ParamRoleAttr>(arg.getArgNumber(),
                                                         kRoleAttrName))
      p.mutable_buffers(*id)->set_role(planRole(role.getValue()));
  }

  // Arguments kept in the offload tier (shardc-offload).
  for (BlockArgument arg : func.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), kOffloadAttrName)) {
      plan::Buffer *b = p.mutable_buffers(buffers[arg]);
      if (b->kind() != plan::PARAMETER && b->kind() != plan::STATE)
        return func.emitError("argument ")
               << arg.getArgNumber()
               << " is offloaded but is neither a parameter nor state";
      b->set_offloaded(true);
    }

  // The units' optimizer-state shards join their unit (stage 3) or make one
  // whose parameters are whole buffers (stages 1-2).
  for (auto [arg, unitName] : stateShards) {
    unsigned argNo = arg.getArgNumber();
    auto names = func.getArgAttrOfType<ArrayAttr>(argNo, kFlatParamsAttrName);
    auto types = func.getArgAttrOfType<ArrayAttr>(argNo, kFlatTypesAttrName);
    auto suffix =
        func.getArgAttrOfType<StringAttr>(argNo, kStateSuffixAttrName);
    if (!names || !types || names.size() != types.size() || !suffix)
      return func.emitError("optimizer state shard of ")
             << unitName << " has no layout";
    plan::FlatUnit *fu = nullptr;
    for (plan::FlatUnit &u : *p.mutable_units())
      if (u.name() == unitName.getValue())
        fu = &u;
    if (!fu) {
      int64_t worldSize = shardCount(func);
      fu = p.add_units();
      fu->set_name(unitName.str());
      fu->set_buffer(-1);
      int64_t offset = 0;
      for (Attribute typeAttr : types) {
        auto ptype =
            cast<RankedTensorType>(cast<TypeAttr>(typeAttr).getValue());
        plan::FlatParam *fp = fu->add_params();
        fp->set_name(
            cast<StringAttr>(names[fu->params_size() - 1]).getValue().str());
        fp->set_offset(offset);
        for (int64_t d : ptype.getShape())
          fp->add_shape(d);
        offset += ptype.getNumElements();
      }
      fu->set_padded_elements(
          cast<RankedTensorType>(arg.getType()).getNumElements() * worldSize);
    } else if (fu->params_size() != static_cast<int>(names.size()) ||
               llvm::any_of(llvm::enumerate(names), [&](auto entry) {
                 return fu->params(entry.index()).name() !=
                        cast<StringAttr>(entry.value()).getValue();
               })) {
      return func.emitError("optimizer state shard of ")
             << unitName << " has another layout than the unit's parameters";
    }
    plan::FlatState *fs = fu->add_states();
    fs->set_buffer(buffers[arg]);
    fs->set_suffix(suffix.str());
  }

  // In-place updates: a result marked `shardc.updates = N` is the new value
  // of argument N. Its producer writes straight into the argument's buffer
  // when nothing reads the old value after it; otherwise the new value is
  // copied over at the end of the step.
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto names = func->getAttrOfType<ArrayAttr>(kOutputNamesAttrName);
  if (!names || names.size() > ret.getNumOperands())
    return func.emitError("output names do not match the results");
  DenseMap<Value, BlockArgument> inPlace;
  DenseMap<Value, Operation *> inPlaceWriter; // argument -> op updating it
  // Reshapes between an in-place collective and the argument it writes.
  llvm::SmallPtrSet<Operation *, 8> noOpReshapes;
  DenseMap<Value, plan::Category> stagedCategory;
  SmallVector<std::pair<Value, BlockArgument>> copyBack;
  for (unsigned i = names.size(); i < ret.getNumOperands(); ++i) {
    auto target = func.getResultAttrOfType<IntegerAttr>(i, kUpdatesAttrName);
    if (!target || target.getInt() < 0 ||
        target.getInt() >= (int64_t)func.getNumArguments())
      return func.emitError("result ")
             << i << " is neither a graph output nor an in-place update";
    BlockArgument arg = func.getArgument(target.getInt());
    Value v = ret.getOperand(i);
    if (v == arg)
      continue;
    if (v.getType() != arg.getType())
      return func.emitError("result ")
             << i << " updates argument " << arg.getArgNumber()
             << " with a value of another type";
    // A collective's wait completes its start's buffer: the start is what
    // writes (from the moment it is issued) into the argument. So it does
    // through reshapes that only lead here (a ZeRO unit of one parameter,
    // gathered flat): they are then no ops.
    Value written = v;
    Operation *producer = v.getDefiningOp();
    SmallVector<Operation *> throughReshapes;
    for (Value src = v; src.hasOneUse();) {
      auto reshape = src.getDefiningOp<ReshapeOp>();
      if (!reshape)
        break;
      throughReshapes.push_back(reshape);
      src = reshape.getInput();
      if (src.getDefiningOp<CollectiveWaitOp>() && src.hasOneUse()) {
        written = src;
        producer = src.getDefiningOp();
        break;
      }
    }
    if (written == v)
      throughReshapes.clear();
    if (auto wait = dyn_cast_or_null<CollectiveWaitOp>(producer)) {
      written = wait.getPending();
      producer = written.getDefiningOp();
    }
    auto before = [&](Operation *user) {
      return user == producer || user == ret || user->isBeforeInBlock(producer);
    };
    bool canAlias = producer && !isa<ConstantOp>(producer) &&
                    !inPlace.count(written) &&
                    llvm::all_of(arg.getUsers(), before);
    // A whole unit's shard lies inside the gathered unit: every read of the
    // gathered parameters (through views) must come before the update.
    if (canAlias && wholeUnitOf.count(buffers.lookup(arg)))
      for (Operation *user : arg.getUsers())
        if (auto gather = dyn_cast<AllGatherStartOp>(user)) {
          SmallVector<Value> work(gather->getResults());
          while (canAlias && !work.empty())
            for (Operation *reader : work.pop_back_val().getUsers()) {
              canAlias &= before(reader);
              if (isa<CollectiveWaitOp, ReshapeOp, SliceOp>(reader))
                work.append(reader->result_begin(), reader->result_end());
            }
        }
    if (canAlias) {
      inPlace[written] = arg;
      inPlaceWriter[arg] = producer;
      noOpReshapes.insert(throughReshapes.begin(), throughReshapes.end());
      // The new value an offloaded argument is written back from is in
      // memory until then: of the argument's category.
      if (auto write = dyn_cast_or_null<OffloadWriteStartOp>(producer))
        stagedCategory[write.getInput()] =
            p.buffers(buffers.lookup(arg)).category();
    } else if (func.getArgAttr(arg.getArgNumber(), kOffloadAttrName) ||
               isa_and_nonnull<OffloadWriteStartOp>(producer)) {
      // Only an OffloadWriteStart writes into the tier, and only there.
      return func.emitError("result ")
             << i << " updates the offloaded argument " << arg.getArgNumber()
             << " other than by its own shardc.OffloadWriteStart";
    } else {
      copyBack.push_back({v, arg});
    }
  }

  // A concatenation whose inputs are contiguous blocks of its result (all
  // dimensions before the axis 1), a gradient bucket that an all-reduce
  // alone reads, is no op: each input that is a fresh op result only it
  // reads (directly or through reshapes only it reads) is written by its
  // producer straight into its block, through a view of the result; any
  // other input is copied into its block where the concatenation was.
  DenseMap<Value, std::pair<ConcatOp, uint64_t>> concatSlot;
  DenseSet<Operation *> blockConcats;
  auto bytesOf = [](Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    return static_cast<uint64_t>(type.getNumElements()) *
           rt::dtypeSize(toRuntimeType(type.getElementType()));
  };
  for (auto concat : body.getOps<ConcatOp>()) {
    auto type = cast<RankedTensorType>(concat.getType());
    int64_t axis = concat.getAxis();
    // Only all-reduce buckets (stages 0 and 1): at stages 2 and 3 the
    // unit's unsharded gradients stay buffers of their own until the
    // reduce-scatter's copy, which keeps the gradient accounting of hybrid
    // sharding and a plain shard group alike.
    if (!concat->hasOneUse() ||
        !isa<AllReduceStartOp>(*concat->getUsers().begin()) ||
        !type.hasStaticShape() ||
        toRuntimeType(type.getElementType()) == rt::DType::Undefined ||
        inPlace.count(concat.getResult()) ||
        llvm::any_of(type.getShape().take_front(axis),
                     [](int64_t d) { return d != 1; }))
      continue;
    blockConcats.insert(concat);
    uint64_t offset = 0;
    for (Value in : concat.getInputs()) {
      uint64_t at = offset;
      offset += bytesOf(in);
      Value v = in;
      while (v.hasOneUse())
        if (auto reshape = v.getDefiningOp<ReshapeOp>())
          v = reshape.getInput();
        else
          break;
      Operation *def = v.getDefiningOp();
      if (v.hasOneUse() && def && isa<ShardcDialect>(def->getDialect()) &&
          !isa<ConstantOp, CollectiveWaitOp, ReshapeOp, SliceOp, ConcatOp,
               AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp,
               OffloadReadStartOp, OffloadWriteStartOp, OptimizerUpdate>(def) &&
          !inPlace.count(v) && !stagedCategory.count(v) && !concatSlot.count(v))
        concatSlot[v] = {concat, at};
    }
  }
  // The result buffer of each such concatenation, made when its first
  // block is.
  DenseMap<Operation *, int32_t> concatRoot;
  auto rootOf = [&](ConcatOp concat) {
    auto [it, inserted] = concatRoot.try_emplace(concat, 0);
    if (inserted) {
      auto [dtype, shape] = bufferType(concat.getResult());
      it->second =
          writer.addBuffer(locName(concat.getLoc(), "Concat") + ":blocks",
                           dtype, shape, plan::TEMP);
      // The result is its blocks: of their category (a bucket of
      // gradients counts as gradients, as DDP's gradient_as_bucket_view).
      Value first = concat.getInputs().front();
      p.mutable_buffers(it->second)
          ->set_category(isa<OpResult>(first)
                             ? categoryOf(cast<OpResult>(first))
                             : categoryOf(concat->getResult(0)));
    }
    return it->second;
  };
  // Makes buffer `id` the view of `root` at `offset`.
  auto makeBlock = [&](int32_t id, int32_t root, uint64_t offset) {
    plan::Buffer *vb = p.mutable_buffers(id);
    vb->set_is_alias(true);
    vb->set_alias_of(root);
    vb->set_alias_offset(offset);
    vb->set_category(p.buffers(root).category());
  };

  unsigned counter = 0;
  for (Operation &op : body) {
    if (ret == &op) {
      llvm::DenseSet<int32_t> claimed;
      for (auto [value, nameAttr] :
           llvm::zip(ret.getOperands().take_front(names.size()), names)) {
        std::string name = cast<StringAttr>(nameAttr).str();
        int32_t id = buffers.lookup(value);
        plan::Buffer *buf = p.mutable_buffers(id);
        if (buf->kind() == plan::TEMP && !claimed.count(id)) {
          // The producing op writes the graph output directly.
          buf->set_name(name);
          claimed.insert(id);
          p.add_outputs(id);
          continue;
        }
        // An input, parameter, constant or repeated output: copy it.
        auto [dtype, shape] = bufferType(value);
        int32_t out = writer.addBuffer(name, dtype, shape, plan::TEMP);
        plan::Op *copy = p.add_ops();
        copy->set_type("Identity");
        copy->set_name("output:" + name);
        copy->add_inputs(id);
        copy->add_outputs(out);
        claimed.insert(out);
        p.add_outputs(out);
      }
      for (auto &[value, arg] : copyBack) {
        plan::Op *copy = p.add_ops();
        copy->set_type("Identity");
        copy->set_name("update:" + p.buffers(buffers.lookup(arg)).name());
        copy->add_inputs(buffers.lookup(value));
        copy->add_outputs(buffers.lookup(arg));
      }
      continue;
    }
    if (auto cst = dyn_cast<ConstantOp>(op)) {
      auto attr = dyn_cast<DenseElementsAttr>(cst.getValue());
      auto [dtype, shape] = bufferType(cst.getResult());
      if (!attr || dtype == rt::DType::Undefined)
        return cst.emitOpError("constant cannot be stored in a plan");
      std::string name =
          locName(cst.getLoc(), "const") + "#" + std::to_string(counter++);
      auto id = writer.addDataBuffer(name, dtype, shape, plan::CONSTANT,
                                     constantBytes(attr));
      if (!id)
        return cst.emitOpError() << llvm::toString(id.takeError());
      buffers[cst.getResult()] = *id;
      continue;
    }
    if (auto wait = dyn_cast<CollectiveWaitOp>(op)) {
      // The wait completes the start's buffer in place.
      int32_t id = buffers.lookup(wait.getPending());
      plan::Op *pop = p.add_ops();
      pop->set_type("CollectiveWait");
      pop->set_name(locName(op.getLoc(), "CollectiveWait"));
      pop->add_inputs(id);
      pop->add_outputs(id);
      buffers[wait.getResult()] = id;
      continue;
    }
    if (!isa<ShardcDialect>(op.getDialect()))
      return op.emitOpError("cannot be lowered to a plan op");
    if (blockConcats.count(&op)) {
      auto concat = cast<ConcatOp>(op);
      int32_t root = rootOf(concat);
      uint64_t offset = 0;
      for (Value in : concat.getInputs()) {
        int32_t id = buffers.lookup(in);
        const plan::Buffer &b = p.buffers(id);
        if (!(b.is_alias() && b.alias_of() == root &&
              b.alias_offset() == offset)) {
          auto [dtype, shape] = bufferType(in);
          std::string name = locName(op.getLoc(), "Concat") + ":block#" +
                             std::to_string(counter++);
          int32_t block =
              writer.addBuffer(name + ":view", dtype, shape, plan::TEMP);
          makeBlock(block, root, offset);
          plan::Op *copy = p.add_ops();
          copy->set_type("Identity");
          copy->set_name(name);
          copy->add_inputs(id);
          copy->add_outputs(block);
        }
        offset += bytesOf(in);
      }
      buffers[concat.getResult()] = root;
      continue;
    }
    if (noOpReshapes.contains(&op)) {
      buffers[op.getResult(0)] = buffers.lookup(op.getOperand(0));
      continue;
    }
    // A reshape, or a contiguous slice (of the leading dimension, every
    // other one whole, step 1), of a TEMP buffer is a view: no op, no copy,
    // no memory of its own.
    if (isa<ReshapeOp, SliceOp>(op) && !inPlace.count(op.getResult(0))) {
      int32_t src = buffers.lookup(op.getOperand(0));
      const plan::Buffer &sb = p.buffers(src);
      auto inType = cast<RankedTensorType>(op.getOperand(0).getType());
      uint64_t offset = 0;
      bool contiguous = isa<ReshapeOp>(op);
      if (auto slice = dyn_cast<SliceOp>(op)) {
        auto outType = cast<RankedTensorType>(slice.getType());
        contiguous = inType.getRank() >= 1 && slice.getSteps()[0] == 1;
        int64_t rowElements = 1;
        for (int64_t d = 1; d < inType.getRank(); ++d) {
          contiguous &= slice.getStarts()[d] == 0 &&
                        outType.getDimSize(d) == inType.getDimSize(d);
          rowElements *= inType.getDimSize(d);
        }
        if (contiguous)
          offset = slice.getStarts()[0] * rowElements *
                   rt::dtypeSize(toRuntimeType(inType.getElementType()));
      }
      // A view of a parameter or state buffer is safe while nothing writes
      // that buffer: every use of the view must come before its in-place
      // update.
      // (A whole unit's buffer is written by its in-place update only,
      // after every read of the gathered unit: see the in-place updates.)
      bool safeRoot =
          sb.kind() == plan::TEMP ||
          llvm::is_contained(llvm::make_second_range(wholeUnitOf), src);
      if (!safeRoot && contiguous && !sb.is_alias()) {
        Value root = op.getOperand(0);
        Operation *writer = inPlaceWriter.lookup(root);
        safeRoot = isa<BlockArgument>(root) &&
                   llvm::all_of(op.getResult(0).getUsers(), [&](Operation *u) {
                     return !isa<func::ReturnOp>(u) &&
                            !isa<ReshapeOp, SliceOp>(u) &&
                            (!writer || u->isBeforeInBlock(writer));
                   });
      }
      if (contiguous && safeRoot) {
        int32_t root = sb.is_alias() ? sb.alias_of() : src;
        offset += sb.is_alias() ? sb.alias_offset() : 0;
        auto [dtype, shape] = bufferType(op.getResult(0));
        std::string name = locName(op.getLoc(), "view") + ":view";
        int32_t id = writer.addBuffer(name, dtype, shape, plan::TEMP);
        plan::Buffer *vb = p.mutable_buffers(id);
        vb->set_is_alias(true);
        vb->set_alias_of(root);
        vb->set_alias_offset(offset);
        vb->set_category(p.buffers(root).category());
        buffers[op.getResult(0)] = id;
        continue;
      }
    }
    FailureOr<OpDesc> desc = describeOp(&op);
    if (failed(desc))
      return failure();
    plan::Op *pop = p.add_ops();
    pop->set_type(desc->type);
    std::string opName =
        locName(op.getLoc(), desc->type + "#" + std::to_string(counter++));
    pop->set_name(opName);
    pop->set_recompute(op.hasAttr(kRecomputeAttrName));
    if (auto cost = dyn_cast<ComputeCost>(&op))
      pop->set_flops(cost.getFlops());
    // Inputs by position: an absent optional operand (an empty segment of
    // an op with several) is -1, so later operands keep their index.
    auto segments = op.getInherentAttr("operandSegmentSizes");
    if (auto sizes = segments ? dyn_cast_or_null<DenseI32ArrayAttr>(*segments)
                              : DenseI32ArrayAttr()) {
      unsigned next = 0;
      for (int32_t size : sizes.asArrayRef()) {
        if (size == 0)
          pop->add_inputs(-1);
        for (int32_t k = 0; k < size; ++k)
          pop->add_inputs(buffers.lookup(op.getOperand(next++)));
      }
    } else {
      for (Value v : op.getOperands())
        pop->add_inputs(buffers.lookup(v));
    }
    // A whole unit's shard is gathered into the unit's buffer, around it.
    if (auto ag = dyn_cast<AllGatherStartOp>(op)) {
      auto unit = wholeUnitOf.find(buffers.lookup(ag.getInput()));
      if (unit != wholeUnitOf.end()) {
        pop->add_outputs(unit->second);
        buffers[ag.getPending()] = unit->second;
        for (const auto &[name, value] : desc->attrs.all())
          *pop->add_attributes() = toPlanAttr(name, value);
        continue;
      }
    }
    // An all-reduce whose input has no other use reduces in place.
    if (auto ar = dyn_cast<AllReduceStartOp>(op)) {
      Value in = ar.getInput();
      int32_t id = buffers.lookup(in);
      if (in.hasOneUse() && p.buffers(id).kind() == plan::TEMP &&
          !p.buffers(id).is_alias()) {
        pop->add_outputs(id);
        buffers[ar.getPending()] = id;
        // The bucket now holds the summed gradients.
        p.mutable_buffers(id)->set_category(categoryOf(ar->getResult(0)));
        for (const auto &[name, value] : desc->attrs.all())
          *pop->add_attributes() = toPlanAttr(name, value);
        continue;
      }
    }
    for (OpResult r : op.getResults()) {
      if (BlockArgument target = inPlace.lookup(r)) {
        int32_t id = buffers.lookup(target);
        pop->add_outputs(id);
        buffers[r] = id;
        continue;
      }
      // An update of a copy read from the offload tier overwrites the copy,
      // which nothing else reads (no second buffer per state in memory).
      if (auto update = dyn_cast<OptimizerUpdate>(&op)) {
        Value old = update.getUpdatedOperand(r.getResultNumber()).get();
        auto wait = old.getDefiningOp<CollectiveWaitOp>();
        if (wait && old.hasOneUse() &&
            wait.getPending().getDefiningOp<OffloadReadStartOp>()) {
          int32_t id = buffers.lookup(old);
          pop->add_outputs(id);
          buffers[r] = id;
          continue;
        }
      }
      auto [dtype, shape] = bufferType(r);
      if (dtype == rt::DType::Undefined)
        return op.emitOpError("result ")
               << r.getResultNumber()
               << " has an element type plans cannot hold";
      int32_t id =
          writer.addBuffer(opName + ":" + std::to_string(r.getResultNumber()),
                           dtype, shape, plan::TEMP);
      pop->add_outputs(id);
      buffers[r] = id;
      if (auto slot = concatSlot.find(r); slot != concatSlot.end()) {
        auto [concat, offset] = slot->second;
        makeBlock(id, rootOf(concat), offset);
        continue;
      }
      auto staged = stagedCategory.find(r);
      p.mutable_buffers(id)->set_category(
          staged != stagedCategory.end() ? staged->second : categoryOf(r));
      // A write into the tier that no argument takes (a gradient kept
      // there until its update) gets a tier buffer of its own.
      if (isa<OffloadWriteStartOp>(op))
        p.mutable_buffers(id)->set_offloaded(true);
    }
    for (const auto &[name, value] : desc->attrs.all())
      *pop->add_attributes() = toPlanAttr(name, value);
  }
  if (auto ws = func->getAttrOfType<IntegerAttr>(kWorldSizeAttrName))
    p.set_world_size(ws.getInt());
  // A mesh of several axes (hybrid sharding, a reshard group): its shape,
  // and the axes the shards spread along.
  if (auto mesh = module.lookupSymbol<mesh::MeshOp>(kMeshName);
      mesh && mesh.getShape().size() > 1) {
    for (int64_t d : mesh.getShape())
      p.add_mesh_shape(d);
    for (int16_t a : rankGroupsOf(func).shardAxes())
      p.add_shard_axes(a);
  }
  if (auto st = func->getAttrOfType<IntegerAttr>(kZeroStageAttrName))
    p.set_zero_stage(st.getInt());
  p.set_fingerprint(collectiveFingerprint(p));

  // A training step: which output is the loss, and the micro-batch.
  if (auto loss = func->getAttrOfType<StringAttr>("shardc.loss")) {
    plan::Training *t = p.mutable_training();
    auto gradNorm = func->getAttrOfType<StringAttr>(kGradNormAttrName);
    auto lossScale = func->getAttrOfType<StringAttr>(kLossScaleOutputAttrName);
    auto skipped = func->getAttrOfType<StringAttr>(kSkippedOutputAttrName);
    for (auto [i, n] : llvm::enumerate(names)) {
      StringRef name = cast<StringAttr>(n).getValue();
      if (name == loss.getValue())
        t->set_loss_output(i);
      if (gradNorm && name == gradNorm.getValue())
        t->set_grad_norm_output(i);
      if (lossScale && name == lossScale.getValue())
        t->set_loss_scale_output(i);
      if (skipped && name == skipped.getValue())
        t->set_skipped_output(i);
    }
    if (auto opt = func->getAttrOfType<StringAttr>("shardc.optimizer"))
      t->set_optimizer(opt.str());
    int64_t batch = 1;
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), kInputAttrName)) {
        auto shape = cast<RankedTensorType>(arg.getType()).getShape();
        batch = shape.empty() ? 1 : shape[0];
        break;
      }
    int64_t accum = 1;
    if (auto k = func->getAttrOfType<IntegerAttr>(kGradAccumAttrName))
      accum = k.getInt();
    if (accum > 1)
      t->set_grad_accum(accum);
    t->set_micro_batch(batch / accum);
  }
  return success();
}

} // namespace shardc
