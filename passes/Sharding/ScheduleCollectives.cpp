//===- ScheduleCollectives.cpp - Overlap communication with compute -------===//
//
// After lowering, every collective is a start immediately followed by its
// wait. This pass spreads them apart:
//  - every wait sinks to just before the first use of its result, so
//    reduce-scatters and all-reduces of gradients (started as soon as their
//    bucket is complete) overlap the rest of the backward pass, but no
//    later than the start of the second reduction after it, or of the next
//    one where the two would hold more than twice the largest reduction's
//    bytes (full gradients held for their reduction); with hybrid sharding a
//    shard's all-reduce across the groups starts before the next reduction, and
//    is waited for where the update needs it. Waits of reductions keep the
//    order of their starts, the order in which the communication thread
//    completes them;
//  - parameter all-gathers (stages 1-3) are prefetched: with
//    forward-prefetch the gather of the next unit starts as soon as the current
//    unit's gather has completed, overlapping the current unit's forward
//    computation; in backward, `pre` starts the next unit's gather before the
//    current unit's gradient computation and `post` right after it (FSDP's
//    BackwardPrefetch.BACKWARD_PRE / BACKWARD_POST); `none` gathers on use.
//    A unit gathered in the compute dtype (mixed precision) moves its
//    shard's cast along with the gather's start; a backward gather of the
//    slice forward kept (a reshard group) starts after that slice is taken.
//  - limit-all-gathers prefetches one unit ahead; without it, two. Small
//    units (at most a quarter of the largest unit, together at most a
//    quarter of it: a final norm, a positional embedding) do not count, so
//    they do not hold back the next large gather;
//  - where a unit's updated shard is gathered in the same step (a pipeline
//    of partition-optimizer without shard-parameters), the gather starts
//    right after its update, at most two gathers in flight: gather K is
//    waited for, and its parameters taken out of its buffer, before gather
//    K + 2 starts;
//  - early-updates moves each optimizer update to where its gradient (or
//    gradient shard) is reduced and its parameter's last reader has read it,
//    after the reduction that starts there. The updates that would then run
//    before the step's last gradient reduction starts move after it: with
//    backward done, they are the only computation left to overlap it.
// Because the whole step is known, these decisions are made once, globally,
// and every rank executes the same sequence of collectives.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "passes/FoldConstants.h"

#include <limits>

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_SCHEDULECOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

struct Gather {
  AllGatherStartOp start;
  CollectiveWaitOp wait;
};

/// The last op that uses `v` or a value computed from it only by view ops
/// (the parameter views of a gathered unit).
Operation *lastUseThroughViews(Value v) {
  Operation *last = nullptr;
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value cur = work.pop_back_val();
    for (Operation *user : cur.getUsers()) {
      if (!last || last->isBeforeInBlock(user))
        last = user;
      if (isa<SliceOp, ReshapeOp>(user))
        work.push_back(user->getResult(0));
    }
  }
  return last;
}

struct ScheduleCollectivesPass
    : impl::ScheduleCollectivesBase<ScheduleCollectivesPass> {
  using ScheduleCollectivesBase::ScheduleCollectivesBase;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "schedule-collectives");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    Block &body = func.getBody().front();
    auto stage = func->getAttrOfType<IntegerAttr>(kZeroStageAttrName);
    gathersAroundShard = stage && (stage.getInt() == 1 || stage.getInt() == 2);

    // Sink gradient and bucket bookkeeping (averaging, slicing a reduced
    // bucket back into gradients) to its first use, so that the waits it
    // reads can sink too. Walking backwards moves whole chains.
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops)) {
      auto cat = op->getAttrOfType<MemoryCategoryAttr>(kCategoryAttrName);
      if (!cat ||
          (cat.getValue() != MemoryCategory::Grads &&
           cat.getValue() != MemoryCategory::Comm) ||
          !isa<MulOp, SliceOp, ReshapeOp, CastOp>(op) ||
          op->getNumResults() == 0)
        continue;
      Operation *firstUser = nullptr;
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers())
          if (!firstUser || user->isBeforeInBlock(firstUser))
            firstUser = user;
      if (firstUser && firstUser->getBlock() == &body &&
          op->getNextNode() != firstUser)
        op->moveBefore(firstUser);
    }

    // Sink every wait to its first use.
    SmallVector<CollectiveWaitOp> waits;
    body.walk([&](CollectiveWaitOp w) { waits.push_back(w); });
    for (CollectiveWaitOp w : waits) {
      Operation *firstUser = nullptr;
      for (Operation *user : w.getResult().getUsers())
        if (!firstUser || user->isBeforeInBlock(firstUser))
          firstUser = user;
      if (firstUser && firstUser->getBlock() == &body)
        w->moveBefore(firstUser);
    }

    // A gradient reduction keeps its unit's full gradient alive until its
    // wait: wait for it before the next reduction starts, so that at most
    // one unit's full gradient is in flight (the overlap with the next
    // unit's backward computation remains). Reductions of other values
    // (SyncBatchNorm's statistics) are waited for at their use anyway.
    // (With hybrid sharding, a gradient shard's all-reduce across the groups
    // reads the wait of its reduce-scatter within the group: a shard, not a
    // full gradient, and not a reduction of this kind.)
    auto crossGroup = [](Operation *op) -> CollectiveWaitOp {
      auto ar = dyn_cast<AllReduceStartOp>(op);
      return ar ? ar.getInput().getDefiningOp<CollectiveWaitOp>()
                : CollectiveWaitOp();
    };
    SmallVector<Operation *> reductions;
    for (Operation &op : body) {
      auto cat = op.getAttrOfType<MemoryCategoryAttr>(kCategoryAttrName);
      if (isa<ReduceScatterStartOp, AllReduceStartOp>(&op) && cat &&
          cat.getValue() == MemoryCategory::Grads && !crossGroup(&op))
        reductions.push_back(&op);
    }
    SmallVector<int64_t> reducedBytes;
    int64_t budget = 0;
    for (Operation *r : reductions) {
      auto t = dyn_cast<RankedTensorType>(r->getOperand(0).getType());
      reducedBytes.push_back(t ? tensorBytes(t).value_or(0) : 0);
      budget = std::max(budget, 2 * reducedBytes.back());
    }
    for (size_t k = 0; k + 1 < reductions.size(); ++k) {
      Value pending = reductions[k]->getResult(0);
      if (pending.use_empty())
        continue;
      // At most two reductions in flight, within the budget: this one is
      // waited for before the second one after it starts, or before the
      // next one if the two would exceed the budget.
      size_t j = k + 1;
      if (reducedBytes[k] + reducedBytes[j] <= budget) {
        if (k + 2 >= reductions.size())
          continue;
        j = k + 2;
      }
      Operation *wait = *pending.getUsers().begin();
      if (reductions[j]->isBeforeInBlock(wait))
        wait->moveBefore(reductions[j]);
    }
    // The communication thread completes reductions in the order they
    // start: a wait that sank past a later reduction's wait moves up to it
    // (it costs nothing there), so the updates that follow the waits run
    // in the order their gradients arrive.
    for (size_t k = reductions.size(); k-- > 1;) {
      Value earlier = reductions[k - 1]->getResult(0),
            later = reductions[k]->getResult(0);
      if (!earlier.hasOneUse() || !later.hasOneUse())
        continue;
      Operation *earlierWait = *earlier.getUsers().begin(),
                *laterWait = *later.getUsers().begin();
      if (isa<CollectiveWaitOp>(earlierWait) &&
          isa<CollectiveWaitOp>(laterWait) &&
          laterWait->isBeforeInBlock(earlierWait))
        earlierWait->moveBefore(laterWait);
    }
    // The all-reduce across the groups starts where its reduce-scatter's
    // wait must be at the latest: before the next reduction (or its own
    // wait), so that the reduce-scatter overlaps the backward computation
    // up to there and the all-reduce the computation after it.
    for (size_t k = 0; k < reductions.size(); ++k) {
      Value pending = reductions[k]->getResult(0);
      if (!pending.hasOneUse())
        continue;
      auto wait = dyn_cast<CollectiveWaitOp>(*pending.getUsers().begin());
      if (!wait || !wait.getResult().hasOneUse())
        continue;
      Operation *ar = *wait.getResult().getUsers().begin();
      if (crossGroup(ar) != wait || !ar->getResult(0).hasOneUse())
        continue;
      Operation *dest = *ar->getResult(0).getUsers().begin();
      if (k + 1 < reductions.size() && reductions[k + 1]->isBeforeInBlock(dest))
        dest = reductions[k + 1];
      if (ar->getBlock() != dest->getBlock() || !ar->isBeforeInBlock(dest))
        continue;
      wait->moveBefore(dest);
      ar->moveBefore(dest);
    }

    // Parameter gathers, by phase, in execution order.
    // A gather belongs to the phase of the computations that use it,
    // looking through the views of its parameters.
    SmallVector<Gather> forward, backward;
    for (Operation &op : body) {
      auto start = dyn_cast<AllGatherStartOp>(&op);
      // The input is a parameter shard, or its cast to the compute dtype
      // (mixed precision), which moves with the start, or (backward, with a
      // reshard group) the slice forward kept of the unit, which stays.
      auto shardCast =
          start ? start.getInput().getDefiningOp<CastOp>() : CastOp();
      Value shard = shardCast ? shardCast.getInput() : Value();
      if (!start ||
          !(isa<BlockArgument>(shardCast ? shard : start.getInput()) ||
            start.getInput().getDefiningOp<ShardSliceOp>()) ||
          (shardCast && !shardCast->hasOneUse()) ||
          !start.getPending().hasOneUse())
        continue;
      auto wait =
          dyn_cast<CollectiveWaitOp>(*start.getPending().getUsers().begin());
      if (!wait)
        continue;
      // By its first use: a unit kept whole from forward through backward
      // (stages 1 and 2, --reshard-after-forward=false) is a forward gather.
      Operation *first = nullptr;
      SmallVector<Value> work{wait.getResult()};
      while (!work.empty()) {
        for (Operation *user : work.pop_back_val().getUsers()) {
          if (isa<SliceOp, ReshapeOp>(user)) {
            work.push_back(user->getResult(0));
            continue;
          }
          if (!first || user->isBeforeInBlock(first))
            first = user;
        }
      }
      if (first)
        (first->hasAttr(kBackwardAttrName) ? backward : forward)
            .push_back({start, wait});
    }
    // Gather k starts at unit i's point (i < k): `depth` units ahead, not
    // counting small units between (each at most a quarter of the largest
    // unit, together at most a quarter of it), so that a final norm or a
    // positional embedding does not hold back the next large gather. Units
    // i..k are then gathered at once: at most depth + 1 large units and a
    // quarter of the largest unit more.
    size_t depth = limitAllGathers ? 1 : 2;
    auto prefetch = [&](SmallVector<Gather> &gathers, bool post) {
      SmallVector<int64_t> bytes;
      int64_t largest = 0;
      for (Gather &g : gathers) {
        auto t = dyn_cast<RankedTensorType>(g.wait.getResult().getType());
        bytes.push_back(t ? tensorBytes(t).value_or(0) : 0);
        largest = std::max(largest, bytes.back());
      }
      for (size_t k = 1; k < gathers.size(); ++k) {
        size_t i = k, large = 0;
        int64_t small = 0;
        while (i > 0) {
          int64_t b = bytes[i - 1];
          if (4 * b <= largest) {
            if (4 * (small + b) > largest)
              break;
            small += b;
          } else if (large++ == depth) {
            break;
          }
          --i;
        }
        i = std::min(i, k < depth ? 0 : k - depth);
        Gather &prev = gathers[i];
        Operation *anchor = prev.wait;
        if (post)
          if (Operation *last = lastUseThroughViews(prev.wait.getResult()))
            anchor = last;
        // Gathers prefetched at the same point keep their order.
        Operation *prevStart = gathers[k - 1].start;
        if (anchor->isBeforeInBlock(prevStart) &&
            prevStart->isBeforeInBlock(gathers[k].start))
          anchor = prevStart->isBeforeInBlock(prev.wait) ? anchor : prevStart;
        Operation *input = gathers[k].start.getInput().getDefiningOp();
        if (input && !isa<CastOp>(input) && anchor->isBeforeInBlock(input))
          anchor = input;
        if (anchor->isBeforeInBlock(gathers[k].start)) {
          if (auto c = gathers[k].start.getInput().getDefiningOp<CastOp>()) {
            c->moveAfter(anchor);
            anchor = c;
          }
          gathers[k].start->moveAfter(anchor);
        }
      }
    };
    if (forwardPrefetch)
      prefetch(forward, /*post=*/false);
    if (backwardPrefetch != BackwardPrefetch::None)
      prefetch(backward, /*post=*/backwardPrefetch == BackwardPrefetch::Post);

    if (earlyUpdates) {
      // Scalars of the arguments alone (the step count's increment) go
      // first, so that no update waits for them.
      for (Operation &op :
           llvm::make_early_inc_range(body.without_terminator()))
        if (isPure(&op) && !op.getNumRegions() && op.getNumOperands() &&
            op.getNumResults() &&
            llvm::all_of(op.getOperands(),
                         [](Value v) { return isa<BlockArgument>(v); }) &&
            llvm::all_of(op.getResultTypes(), [](Type t) {
              auto r = dyn_cast<RankedTensorType>(t);
              return r && r.getRank() == 0;
            }))
          op.moveBefore(&body.front());
      for (Operation &op : llvm::make_early_inc_range(body))
        if (isa<OptimizerUpdate>(op))
          hoistUpdate(&op, body);
      // The last gradient reduction has no backward computation left to
      // overlap: the updates that do not read it run while it is in flight.
      Operation *last = nullptr;
      for (Operation *r : reductions)
        if (!last || last->isBeforeInBlock(r))
          last = r;
      if (last)
        deferPastLastReduction(last, body);
    }

    // Stages 1 and 2 gather each unit's updated parameters: the gather
    // starts as soon as its update (and the cast to the gathered dtype) is
    // done, overlapping the updates after it; its wait stays at first use.
    updateGathers.clear();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      auto start = dyn_cast<AllGatherStartOp>(&op);
      if (!start)
        continue;
      Operation *input = start.getInput().getDefiningOp();
      auto cast = dyn_cast_or_null<CastOp>(input);
      Operation *update =
          cast && cast->hasOneUse() ? cast.getInput().getDefiningOp() : input;
      if (!update || !isa<OptimizerUpdate>(update) ||
          update->getBlock() != &body)
        continue;
      Operation *anchor = update;
      if (cast && cast->hasOneUse() && update->isBeforeInBlock(cast)) {
        cast->moveAfter(anchor);
        anchor = cast;
      }
      if (anchor->isBeforeInBlock(start))
        start->moveAfter(anchor);
      updateGathers.push_back(start);
    }
    boundUpdateGathers(body);
  }

  /// Stages 1 and 2: at most two gathers of updated shards in flight. Each
  /// holds its unit's whole flat buffer until the gathered parameters are
  /// copied into place, so gather K is waited for before gather K + 2
  /// starts, and the views and casts that take its parameters out of the
  /// buffer (read by nothing else: the step's results) follow the wait, so
  /// that the buffer dies there instead of at the end of the step.
  void boundUpdateGathers(Block &body) {
    llvm::sort(updateGathers, [](AllGatherStartOp a, AllGatherStartOp b) {
      return a->isBeforeInBlock(b);
    });
    for (size_t k = 0; k + 2 < updateGathers.size(); ++k) {
      AllGatherStartOp start = updateGathers[k];
      Operation *limit = updateGathers[k + 2];
      if (!start.getPending().hasOneUse())
        continue;
      auto wait =
          dyn_cast<CollectiveWaitOp>(*start.getPending().getUsers().begin());
      if (!wait || wait->getBlock() != &body || wait->isBeforeInBlock(limit))
        continue;
      wait->moveBefore(limit);
      // The parameters' chain: pure ops that read only the wait's result
      // and each other, in block order.
      SmallVector<Operation *> chain;
      SmallVector<Value> work{wait.getResult()};
      while (!work.empty()) {
        for (Operation *user : work.pop_back_val().getUsers()) {
          if (user->getBlock() != &body || !isPure(user) ||
              user->getNumRegions() || user->getNumOperands() != 1 ||
              llvm::is_contained(chain, user) || !limit->isBeforeInBlock(user))
            continue;
          chain.push_back(user);
          for (Value r : user->getResults())
            work.push_back(r);
        }
      }
      llvm::sort(chain, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      Operation *point = wait;
      for (Operation *op : chain) {
        op->moveAfter(point);
        point = op;
      }
    }
  }

  /// The gathers of updated shards (stages 1 and 2), in block order.
  SmallVector<AllGatherStartOp> updateGathers;

  /// The update `update` and the producers that move with it, in block
  /// order.
  static SmallVector<Operation *> updateChain(Operation *update, Block &body) {
    SmallVector<Operation *> chain{update};
    for (size_t i = 0; i < chain.size(); ++i)
      for (Value v : chain[i]->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && def->getBlock() == &body &&
            !llvm::is_contained(chain, def) && movesWith(def, chain[i]))
          chain.push_back(def);
    llvm::sort(chain, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    return chain;
  }

  /// Whether `op` is a collective start, or a pure op that makes what one
  /// sends (a bucket, a cast).
  static bool startsComm(Operation *op) {
    if (isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp>(op))
      return true;
    auto cat = op->getAttrOfType<MemoryCategoryAttr>(kCategoryAttrName);
    return cat && cat.getValue() == MemoryCategory::Comm && isPure(op);
  }

  /// Whether an all-gather reads a result of `update` (or its cast): at
  /// stages 1 and 2 the updated shard is gathered for the next step.
  static bool feedsGather(Operation *update) {
    for (Operation *user : update->getUsers()) {
      if (isa<AllGatherStartOp>(user))
        return true;
      if (isa<CastOp>(user) && llvm::any_of(user->getUsers(), [](Operation *u) {
            return isa<AllGatherStartOp>(u);
          }))
        return true;
    }
    return false;
  }

  /// Moves the updates that run before `last`, the step's last gradient
  /// reduction start, to just after it (and the starts that follow it),
  /// keeping their order: at the end of backward they are the only
  /// computation left that can overlap the last reduction. An update whose
  /// results are read before that point stays, and so does one whose shard
  /// is then gathered in the same step: its gather overlaps backward.
  ///
  /// A deferred update keeps its reduced gradient alive until it runs. At
  /// stages 1 and 2 (where every unit is gathered by the next step, so no
  /// update feeds a gather) only the latest updates move, as many as update
  /// together as many elements as the last reduction sends: an update
  /// reads and writes about 28 bytes an element (Adam), the reduction sends
  /// 4 to 8, over a link no faster than memory, so they still cover it,
  /// and the step does not keep all its reduced gradient shards until the
  /// end.
  void deferPastLastReduction(Operation *last, Block &body) {
    Operation *point = last;
    while (point->getNextNode() && startsComm(point->getNextNode()))
      point = point->getNextNode();
    SmallVector<Operation *> updates;
    for (Operation &op : body)
      if (isa<OptimizerUpdate>(op) && op.isBeforeInBlock(last) &&
          !feedsGather(&op))
        updates.push_back(&op);
    int64_t budget = gathersAroundShard
                         ? cast<RankedTensorType>(last->getOperand(0).getType())
                               .getNumElements()
                         : std::numeric_limits<int64_t>::max();
    SmallVector<Operation *> deferred; // latest first
    for (Operation *update : llvm::reverse(updates)) {
      if (budget <= 0)
        break;
      SmallVector<Operation *> chain = updateChain(update, body);
      bool readEarly = llvm::any_of(chain, [&](Operation *op) {
        return llvm::any_of(op->getUsers(), [&](Operation *user) {
          return !llvm::is_contained(chain, user) &&
                 (user->getBlock() != &body || !point->isBeforeInBlock(user));
        });
      });
      if (readEarly)
        continue;
      if (auto t = dyn_cast<RankedTensorType>(cast<OptimizerUpdate>(update)
                                                  .getUpdatedOperand(0)
                                                  .get()
                                                  .getType()))
        budget -= t.getNumElements();
      deferred.push_back(update);
    }
    for (Operation *update : llvm::reverse(deferred))
      for (Operation *op : updateChain(update, body)) {
        op->moveAfter(point);
        point = op;
      }
  }

  /// Whether `op`, an operand's producer, moves along with `reader`: a pure
  /// op that only `reader` reads (the gradient's slice of its bucket, its
  /// average, its cast).
  static bool movesWith(Operation *op, Operation *reader) {
    return isPure(op) && !op->getNumRegions() &&
           !isa<CollectiveWaitOp, AllGatherStartOp, ReduceScatterStartOp,
                AllReduceStartOp>(op) &&
           llvm::all_of(op->getUsers(),
                        [&](Operation *user) { return user == reader; });
  }

  /// Stages 1 and 2: a unit's shard lies inside its gathered buffer.
  bool gathersAroundShard = false;

  /// Moves optimizer update `update` (with the chain of producers that move
  /// with it) to the earliest point where its operands exist and every other
  /// reader of them has read them (the update then still writes in place),
  /// but after the collective starts that follow that point: an update runs
  /// while the next gradient reduction is in flight, never before it starts.
  void hoistUpdate(Operation *update, Block &body) {
    // The chain, producers before readers.
    SmallVector<Operation *> chain = updateChain(update, body);
    // The latest op the chain must follow.
    Operation *bound = nullptr;
    auto after = [&](Operation *op) {
      if (op && op->getBlock() == &body && !llvm::is_contained(chain, op) &&
          op->isBeforeInBlock(update) && (!bound || bound->isBeforeInBlock(op)))
        bound = op;
    };
    for (Operation *op : chain)
      for (Value v : op->getOperands())
        after(v.getDefiningOp());
    // The values it writes over: their other readers read them first.
    auto updateOp = cast<OptimizerUpdate>(update);
    for (unsigned r = 0; r < update->getNumResults(); ++r)
      for (Operation *user : updateOp.getUpdatedOperand(r).get().getUsers()) {
        after(user);
        // At stages 1 and 2 a unit's gather fills the unit's buffer in place
        // around the shard it reads (the plan's whole unit): the update of
        // the shard also follows every read of the gathered parameters.
        if (auto gather = dyn_cast<AllGatherStartOp>(user);
            gather && gathersAroundShard)
          for (Operation *wait : gather.getPending().getUsers())
            for (Value v : wait->getResults())
              after(lastUseThroughViews(v));
      }
    // Past the collective starts (and the bucket or cast they send) that
    // follow: they do not wait for the update.
    Operation *next = bound ? bound->getNextNode() : &body.front();
    while (next && next != chain.front() && !llvm::is_contained(chain, next) &&
           startsComm(next))
      bound = next, next = next->getNextNode();
    if (!bound || !bound->isBeforeInBlock(chain.front()))
      return;
    for (Operation *op : chain) {
      op->moveAfter(bound);
      bound = op;
    }
  }
};

} // namespace
} // namespace shardc
