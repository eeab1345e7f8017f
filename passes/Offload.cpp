//===- Offload.cpp - Keep optimizer state or parameters in the tier -------===//
//
// FSDP's CPUOffload and DeepSpeed's offload_optimizer / offload_param on the
// whole step: the chosen arguments live in the offload tier, and every op
// that reads one reads a copy that an OffloadReadStart brought into memory
// just for it; the in-place update is written back by an OffloadWriteStart.
// The pass runs last (after schedule-collectives) and schedules its own
// transfers, the way schedule-collectives spreads collectives:
//  - reads are grouped by the op that uses them (an optimizer update reads
//    a unit's state buffers together) and, in the order of those ops, each
//    group's reads start just before the previous op of the same kind:
//    while one update (or gather) computes, the next one's inputs are read
//    (read-ahead of one); the waits are right before the group's op;
//  - writes are grouped by the op producing the new values; each group's
//    waits come just before the next group's writes start (write-behind of
//    one; the last group's before the return).
// At most about two groups' copies are in memory at a time: the update of
// offloaded state never holds a full copy of it.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_OFFLOAD
#include "passes/Passes.h.inc"

namespace {

/// The transfers that feed one op (reads) or leave one op (writes).
struct TransferGroup {
  Operation *anchor = nullptr; // the reading op, or the producing op
  SmallVector<Operation *> starts, waits;
};

struct OffloadPass : impl::OffloadBase<OffloadPass> {
  using OffloadBase::OffloadBase;

  void runOnOperation() override {
    if (offload.empty())
      return;
    FailureOr<func::FuncOp> step = getStepFunction(getOperation(), "offload");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    bool optimizer = llvm::is_contained(offload, OffloadKind::Optimizer);
    bool params = llvm::is_contained(offload, OffloadKind::Params);
    bool grads = llvm::is_contained(offload, OffloadKind::Grads);

    // The arguments to offload: optimizer state (the state operands of the
    // updates) and parameters (whole, or ZeRO-3 shards).
    llvm::SetVector<BlockArgument> chosen;
    func.walk([&](Operation *op) {
      if (!optimizer || !isa<SGDUpdateOp, AdamUpdateOp>(op))
        return;
      SmallVector<Value> states;
      if (auto sgd = dyn_cast<SGDUpdateOp>(op))
        states.push_back(sgd.getMomentumBuffer());
      else
        states.append({cast<AdamUpdateOp>(op).getExpAvg(),
                       cast<AdamUpdateOp>(op).getExpAvgSq()});
      for (Value v : states)
        if (auto arg = dyn_cast<BlockArgument>(v))
          chosen.insert(arg);
    });
    // (BatchNorm's running statistics stay: forward updates them while
    // backward still reads them, and they are a few bytes.)
    if (params)
      for (BlockArgument arg : func.getArguments()) {
        auto role = func.getArgAttrOfType<ParamRoleAttr>(arg.getArgNumber(),
                                                         kRoleAttrName);
        if (role && role.getValue() == ParamRole::Statistic)
          continue;
        if (func.getArgAttr(arg.getArgNumber(), kParamAttrName) ||
            func.getArgAttr(arg.getArgNumber(), kParamShardAttrName))
          chosen.insert(arg);
      }
    // The gradients the updates read (not arguments: values of the step).
    SmallVector<OptimizerUpdate> gradUpdates;
    if (grads)
      func.walk([&](OptimizerUpdate u) {
        if (u.getGrad().getDefiningOp())
          gradUpdates.push_back(u);
      });
    if (chosen.empty() && gradUpdates.empty()) {
      func.emitWarning("offload: the step has nothing to offload (no "
                       "optimizer update reads what --offload names)");
      return;
    }

    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    StepResults results = readStepResults(func);
    OpBuilder b(func.getContext());
    llvm::MapVector<Operation *, TransferGroup> reads, writes;
    for (BlockArgument arg : chosen) {
      func.setArgAttr(arg.getArgNumber(), kOffloadAttrName, b.getUnitAttr());
      // A copy for each op that reads the argument.
      SmallVector<Operation *> users;
      for (Operation *user : arg.getUsers())
        if (user != ret && !llvm::is_contained(users, user))
          users.push_back(user);
      for (Operation *user : users) {
        b.setInsertionPoint(user);
        Value copy = transfer<OffloadReadStartOp>(b, arg, categoryOf(arg, func),
                                                  reads[user], user);
        user->replaceUsesOfWith(arg, copy);
      }
    }
    // The new values of offloaded arguments are written back.
    for (auto &[value, arg] : results.updates) {
      if (!chosen.contains(arg) || value == arg)
        continue;
      Operation *producer = value.getDefiningOp();
      if (!producer) {
        func.emitError("offload: the update of an offloaded argument is "
                       "another argument");
        return signalPassFailure();
      }
      b.setInsertionPointAfter(producer);
      value = transfer<OffloadWriteStartOp>(b, value, categoryOf(arg, func),
                                            writes[producer], producer);
    }
    writeStepResults(func, results);
    // A gradient goes to the tier once complete, and comes back for its
    // update: into a buffer of the tier (offloaded by plan lowering). Only
    // the update reads the copy; other readers (the norm of clipping) keep
    // reading the gradient itself.
    for (OptimizerUpdate u : gradUpdates) {
      Value g = u.getGrad();
      Operation *producer = g.getDefiningOp();
      b.setInsertionPointAfter(producer);
      Value inTier = transfer<OffloadWriteStartOp>(b, g, MemoryCategory::Grads,
                                                   writes[producer], producer);
      Operation *user = u.getOperation();
      b.setInsertionPoint(user);
      Value copy = transfer<OffloadReadStartOp>(
          b, inTier, MemoryCategory::Grads, reads[user], user);
      for (OpOperand &operand : user->getOpOperands())
        if (operand.get() == g)
          operand.set(copy);
    }

    // Schedule: groups in the order of their ops.
    auto ordered = [](llvm::MapVector<Operation *, TransferGroup> &groups) {
      SmallVector<TransferGroup *> out;
      for (auto &entry : groups)
        out.push_back(&entry.second);
      llvm::sort(out, [](TransferGroup *a, TransferGroup *b) {
        return a->anchor->isBeforeInBlock(b->anchor);
      });
      return out;
    };
    // Writes first: each group's starts right after its producer, its
    // waits before the next group's starts (or the first use of what they
    // wrote: a gradient read back), the last group's before the return.
    SmallVector<TransferGroup *> writeOrder = ordered(writes);
    for (TransferGroup *g : writeOrder) {
      Operation *after = g->anchor;
      for (Operation *s : g->starts) {
        s->moveAfter(after);
        after = s;
      }
    }
    Operation *end = body.getTerminator();
    for (size_t k = 0; k < writeOrder.size(); ++k) {
      Operation *waitAt =
          k + 1 < writeOrder.size() ? writeOrder[k + 1]->starts.front() : end;
      for (Operation *w : writeOrder[k]->waits) {
        Operation *at = waitAt;
        for (Operation *user : w->getResult(0).getUsers())
          if (user->isBeforeInBlock(at))
            at = user;
        w->moveBefore(at);
      }
    }
    // Then reads: waits right before their op; starts before the previous
    // group's op (read-ahead of one), but after what they read is written.
    // The read-ahead chains ops of one kind (gathers, updates): the first
    // update's copies are not read during backward, only while the update
    // before it computes.
    SmallVector<TransferGroup *> readOrder = ordered(reads);
    llvm::StringMap<TransferGroup *> previousOfKind;
    for (TransferGroup *gp : readOrder) {
      TransferGroup &g = *gp;
      for (Operation *w : g.waits)
        w->moveBefore(g.anchor);
      TransferGroup *&previous =
          previousOfKind[g.anchor->getName().getStringRef()];
      Operation *startAt = previous ? previous->anchor : g.waits.front();
      previous = gp;
      for (Operation *s : g.starts) {
        Operation *def = s->getOperand(0).getDefiningOp();
        if (def && startAt->isBeforeInBlock(def))
          s->moveAfter(def);
        else
          s->moveBefore(startAt);
      }
    }
  }

  /// A transfer of `value` (a start and its wait, at the insertion point)
  /// in `group`, whose op is `anchor`; the wait's result.
  template <typename StartOp>
  static Value transfer(OpBuilder &b, Value value, MemoryCategory category,
                        TransferGroup &group, Operation *anchor) {
    auto type = cast<RankedTensorType>(value.getType());
    auto start =
        b.create<StartOp>(value.getLoc(), PendingType::get(type), value);
    auto wait =
        b.create<CollectiveWaitOp>(value.getLoc(), type, start.getPending());
    auto attr = MemoryCategoryAttr::get(b.getContext(), category);
    start->setAttr(kCategoryAttrName, attr);
    wait->setAttr(kCategoryAttrName, attr);
    group.anchor = anchor;
    group.starts.push_back(start);
    group.waits.push_back(wait);
    return wait.getResult();
  }

  /// The category of an offloaded argument's copies.
  static MemoryCategory categoryOf(BlockArgument arg, func::FuncOp func) {
    bool isParam = func.getArgAttr(arg.getArgNumber(), kParamAttrName) ||
                   func.getArgAttr(arg.getArgNumber(), kParamShardAttrName);
    return isParam ? MemoryCategory::Params : MemoryCategory::OptState;
  }
};

} // namespace
} // namespace shardc
