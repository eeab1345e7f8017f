//===- BucketGradients.cpp - Bucketed all-reduce of gradients -------------===//
//
// ZeRO stage 0 (DDP): gradients are packed, in the order backward
// produces them, into flat buckets of at most bucket-cap-mb; each bucket is
// summed over ranks with mesh.all_reduce as soon as its last gradient
// exists, and every gradient is sliced back out and averaged where its
// update needs it.
//
// Where the buckets end is chosen by the cost model (plan/CostModel.h), as
// no eager library can: the step's ops, timed in program order, say when
// each gradient exists; all-reduces run one at a time, each taking latency +
// ring bytes / bandwidth; dynamic programming over the gradients finds the
// split whose last all-reduce finishes first, with the fewest buckets among
// equals. A gradient produced last thus gets a bucket of its own instead of
// holding back a large one, and a large early one starts while backward
// goes on when that finishes sooner.
//
// The split is planned for all-reduces kSlowdown times slower than the
// model's: the last all-reduce (of the gradients backward makes last)
// usually decides the finish, so many splits tie, and the fewest buckets
// among them would be one whose reductions end just as the next gradients
// arrive. Measured, reductions that overlap compute run 2-10 times slower
// than alone (2-core CPU, MPI over shared memory: the copies share the
// cores, and ranks drift apart), and a split without slack then holds the
// step at every wait.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "ir/ShardcInterfaces.h"
#include "passes/FoldConstants.h"
#include "plan/CostModel.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

#include <limits>

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_BUCKETGRADIENTS
#include "passes/Passes.h.inc"

namespace {

/// A gradient to reduce: its bytes in the reduce dtype, when it exists, and
/// that dtype (a bucket holds one).
struct Gradient {
  int64_t bytes;
  double readyAt;
  Type elem;
};

using Split = SmallVector<std::pair<size_t, size_t>>;

/// How much slower than the cost model's rate the split must tolerate each
/// all-reduce to be (see the file comment).
constexpr double kSlowdown = 3.0;

/// Buckets filled in order up to `cap` bytes (a larger gradient alone), a
/// new one at each change of element type: the fewest buckets there can be.
Split fillBuckets(ArrayRef<Gradient> grads, int64_t cap) {
  Split out;
  int64_t filled = 0;
  for (size_t j = 0; j < grads.size(); ++j) {
    if (out.empty() || filled + grads[j].bytes > cap ||
        grads[j].elem != grads[out.back().first].elem) {
      out.push_back({j, j});
      filled = 0;
    }
    out.back().second = j + 1;
    filled += grads[j].bytes;
  }
  return out;
}

/// The buckets, as [first, end) ranges of `grads` in order: at most `cap`
/// bytes each (a larger gradient alone), one element type each, and the
/// split whose last all-reduce finishes first when each starts once all its
/// gradients exist and the previous one is done; among equal finishes, the
/// fewest buckets. Dynamic programming over (gradients, buckets), with at
/// most twice fillBuckets' count plus 8 buckets; a model so large that the
/// program would take over kMaxSteps steps gets fillBuckets' split.
Split splitBuckets(ArrayRef<Gradient> grads, int64_t cap,
                   const plan::MachineModel &machine, int64_t ranks) {
  constexpr uint64_t kMaxSteps = 20'000'000;
  constexpr double kNever = std::numeric_limits<double>::infinity();
  Split filled = fillBuckets(grads, cap);
  size_t n = grads.size(), maxBuckets = 2 * filled.size() + 8;
  // finish[j][c]: the earliest the last all-reduce can finish when the
  // first j gradients go into c buckets; from[j][c] where the last of those
  // buckets begins.
  std::vector<std::vector<double>> finish(n + 1);
  std::vector<std::vector<size_t>> from(n + 1);
  finish[0] = {0.0};
  from[0] = {0};
  uint64_t steps = 0;
  for (size_t j = 1; j <= n; ++j) {
    size_t most = std::min(j, maxBuckets);
    finish[j].assign(most + 1, kNever);
    from[j].assign(most + 1, 0);
    int64_t bytes = 0;
    double ready = 0;
    for (size_t i = j; i >= 1; --i) {
      bytes += grads[i - 1].bytes;
      if (grads[i - 1].elem != grads[j - 1].elem || (i < j && bytes > cap))
        break;
      ready = std::max(ready, grads[i - 1].readyAt);
      double reduce =
          kSlowdown * machine.collectiveTime(
                          plan::CollectiveOpKind::AllReduceStart, bytes, ranks);
      size_t options = std::min(most, finish[i - 1].size());
      if ((steps += options) > kMaxSteps)
        return filled;
      for (size_t c = 1; c <= options; ++c) {
        double before = finish[i - 1][c - 1];
        if (before == kNever)
          continue;
        double t = std::max(ready, before) + reduce;
        if (t < finish[j][c]) {
          finish[j][c] = t;
          from[j][c] = i - 1;
        }
      }
    }
  }
  // The earliest finish; finishes within a nanosecond of it are as good,
  // and the fewest buckets among them wins: each all-reduce that runs while
  // kernels do takes their cores on the CPU backend (MPI's shared-memory
  // transport copies with the CPU), so none is split off that would not
  // finish the step sooner. fillBuckets' split is always among the
  // candidates, so there is a finite one.
  double best = *std::min_element(finish[n].begin(), finish[n].end());
  if (best == kNever)
    return filled;
  size_t c = 0;
  while (finish[n][c] > best + 1e-9)
    ++c;
  Split out;
  for (size_t j = n; j > 0; --c) {
    size_t i = from[j][c];
    out.push_back({i, j});
    j = i;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

struct BucketGradientsPass : impl::BucketGradientsBase<BucketGradientsPass> {
  using BucketGradientsBase::BucketGradientsBase;
  SHARDC_CHECK_OPTIONS_BucketGradients;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "bucket-gradients");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    if (std::optional<std::string> err = checkOptions()) {
      func.emitError("bucket-gradients: ") << *err;
      return signalPassFailure();
    }
    FailureOr<RankGroups> ranks = configuredRanks(func, "bucket-gradients");
    if (failed(ranks))
      return signalPassFailure();
    int64_t cap = static_cast<int64_t>(bucketCapMb * (1 << 20));
    OpBuilder b(func.getContext());
    FlatBuilder flat(b, ranks->world);

    SmallVector<ParamUpdate> updates = collectParamUpdates(func);
    DenseMap<Operation *, unsigned> position;
    unsigned i = 0;
    for (Operation &op : func.getBody().front())
      position[&op] = i++;
    auto defPos = [&](const ParamUpdate &u) {
      Operation *d = u.grad.getDefiningOp();
      return d ? position.lookup(d) : 0u;
    };
    llvm::stable_sort(updates, [&](const ParamUpdate &a, const ParamUpdate &c) {
      return defPos(a) < defPos(c);
    });
    // Float gradients are reduced in the step's reduce dtype (mixed
    // precision), each bucket in one element type.
    Type reduce = reduceElementType(func);
    auto reducedElem = [&](Value g) {
      Type e = cast<RankedTensorType>(g.getType()).getElementType();
      return reduce && isa<FloatType>(e) ? reduce : e;
    };
    plan::MachineModel machine = plan::MachineModel::cpu();
    if (llvm::Error err = machine.parseOverrides(costModel)) {
      func.emitError("bucket-gradients: cost-model: ")
          << llvm::toString(std::move(err));
      return signalPassFailure();
    }
    // When each op's results exist, on the compute timeline.
    DenseMap<Operation *, double> doneAt;
    double now = 0;
    double slowdown = machine.computeSlowdown(ranks->world);
    for (Operation &op : func.getBody().front()) {
      if (isa<ConstantOp>(op) || op.getNumResults() == 0)
        continue;
      uint64_t bytes = 0;
      auto add = [&](Value v) {
        if (auto t = dyn_cast<RankedTensorType>(v.getType()))
          bytes += tensorBytes(t).value_or(0);
      };
      llvm::for_each(op.getOperands(), add);
      llvm::for_each(op.getResults(), add);
      auto cost = dyn_cast<ComputeCost>(&op);
      now += machine.kernelTime(cost ? cost.getFlops() : 0, bytes) * slowdown;
      doneAt[&op] = now;
    }
    SmallVector<Gradient> grads;
    for (const ParamUpdate &u : updates) {
      auto t = cast<RankedTensorType>(u.grad.getType());
      Type elem = reducedElem(u.grad);
      Operation *d = u.grad.getDefiningOp();
      grads.push_back(
          {t.getNumElements() *
               std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8),
           d ? doneAt.lookup(d) : 0.0, elem});
    }
    SmallVector<SmallVector<ParamUpdate>> buckets;
    for (auto [first, end] : splitBuckets(grads, cap, machine, ranks->world)) {
      buckets.emplace_back(updates.begin() + first, updates.begin() + end);
    }
    for (auto &bucket : buckets) {
      SmallVector<Value> grads;
      for (auto &u : bucket)
        grads.push_back(u.grad);
      if (Operation *last = latestDef(grads))
        b.setInsertionPointAfter(last);
      else
        b.setInsertionPointToStart(&func.getBody().front());
      Type elem = reducedElem(grads[0]);
      SmallVector<Value> flats;
      for (Value g : grads)
        flats.push_back(flat.flatten(flat.castTo(g, elem, MemoryCategory::Comm),
                                     MemoryCategory::Comm));
      Value bucketFlat = flat.concatFlat(flats, 0, elem, MemoryCategory::Comm);
      // The bucket holds the summed gradients; each gradient is sliced out
      // and averaged right where its update needs it.
      Value reduced = flat.tagged(
          b.create<mesh::AllReduceOp>(bucketFlat.getLoc(), bucketFlat.getType(),
                                      kMeshName, ranks->worldAxes(), bucketFlat,
                                      mesh::ReductionKind::Sum),
          MemoryCategory::Grads);
      int64_t offset = 0;
      for (auto &u : bucket) {
        auto t = cast<RankedTensorType>(u.grad.getType());
        Value g = flat.scaleByInverseWorld(
            flat.castTo(flat.sliceFlat(reduced, offset, t.clone(elem),
                                       MemoryCategory::Grads),
                        t.getElementType(), MemoryCategory::Grads),
            MemoryCategory::Grads);
        u.op->setOperand(1, g);
        offset += t.getNumElements();
      }
    }
  }
};

} // namespace
} // namespace shardc
