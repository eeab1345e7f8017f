//===- ReduceScatterGradients.cpp - Gradient shards by reduce-scatter -----===//
//
// ZeRO stages 1-3: the slice of a wrap unit's full gradient that
// shardc-partition-optimizer took for this rank becomes a mesh.reduce_scatter
// of the unit's flattened, padded local gradient, issued as soon as the
// unit's last gradient is produced and averaged over ranks; a rank never
// holds the summed full gradient. With hybrid sharding the reduce-scatter
// runs within the shard group, and an all-reduce of the shard across the
// groups (which hold replicas of it) completes the sum over every rank.
//
// With gradient accumulation the unit's gradients are means of running sums
// over the micro-batches (shardc.micro_batch_sum). Reduce-scatter is linear,
// so each micro-batch's gradients are reduce-scattered as soon as that
// micro-batch's backward has produced them, and the shards are summed: a
// rank holds one micro-batch's local gradients at a time, the sum and at
// most two shards (K times the bytes of one reduce-scatter). With
// accumulate-unsharded (always at stage 1, DeepSpeed's ZeRO-1) the running
// sums stay whole and are reduce-scattered once per step.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_REDUCESCATTERGRADIENTS
#include "passes/Passes.h.inc"

namespace {

/// The micro-batch terms of a gradient that shardc-accumulate-gradients
/// summed (in micro-batch order) and the factor of their mean, or false.
bool microBatchTerms(Value grad, SmallVectorImpl<Value> &terms, Value &factor) {
  auto mean = grad.getDefiningOp<MulOp>();
  if (!mean || !mean->hasAttr(kMicroBatchSumAttrName))
    return false;
  factor = mean.getRhs();
  SmallVector<Value> reversed;
  Value sum = mean.getLhs();
  while (auto add = sum.getDefiningOp<AddOp>()) {
    if (!add->hasAttr(kMicroBatchSumAttrName))
      break;
    reversed.push_back(add.getRhs());
    sum = add.getLhs();
  }
  reversed.push_back(sum);
  terms.assign(reversed.rbegin(), reversed.rend());
  return terms.size() > 1;
}

struct ReduceScatterGradientsPass
    : impl::ReduceScatterGradientsBase<ReduceScatterGradientsPass> {
  using ReduceScatterGradientsBase::ReduceScatterGradientsBase;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "reduce-scatter-gradients");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    FailureOr<RankGroups> ranks =
        configuredRanks(func, "reduce-scatter-gradients");
    if (failed(ranks))
      return signalPassFailure();
    OpBuilder b(func.getContext());
    FlatBuilder flat(b, ranks->world);
    SmallVector<mesh::AllSliceOp> slices;
    func.walk([&](mesh::AllSliceOp s) {
      if (s->hasAttr(kGradShardOfAttrName))
        slices.push_back(s);
    });
    for (mesh::AllSliceOp slice : slices) {
      // The unit's gradients, as partition-optimizer flattened them.
      Value gflat = slice.getInput();
      SmallVector<Value> parts;
      if (auto concat = gflat.getDefiningOp<ConcatOp>())
        parts.assign(concat.getInputs().begin(), concat.getInputs().end());
      else
        parts.push_back(gflat);
      SmallVector<Value> grads;
      int64_t pad = 0;
      // partition-optimizer's flattening reshapes and padding carry the
      // "comm" category; anything else is a gradient itself.
      auto isComm = [](Operation *op) {
        auto cat = op ? op->getAttrOfType<MemoryCategoryAttr>(kCategoryAttrName)
                      : MemoryCategoryAttr();
        return cat && cat.getValue() == MemoryCategory::Comm;
      };
      for (Value p : parts) {
        if (auto c = p.getDefiningOp<ConstantOp>(); c && isComm(c)) {
          pad += cast<RankedTensorType>(c.getType()).getNumElements();
          continue;
        }
        auto r = p.getDefiningOp<ReshapeOp>();
        grads.push_back(r && isComm(r) ? r.getInput() : p);
      }
      // Reduced in the step's reduce dtype (mixed precision), and back in
      // the shard's type after.
      auto shardType = cast<RankedTensorType>(slice.getType());
      Type elem = shardType.getElementType();
      Type reduce = reduceElementType(func);
      if (!reduce || !isa<FloatType>(elem))
        reduce = elem;
      // One reduce-scatter of the unit's local gradients `parts`, right
      // after the last of them exists.
      SmallVector<Operation *> issued; // the reduce-scatters, in order
      // With `across`, the shard is also summed across the groups (hybrid
      // sharding); a sum of micro-batches does that once, for the total.
      auto reduceScatter = [&](ArrayRef<Value> parts, bool across) {
        if (Operation *last = latestDef(parts))
          b.setInsertionPointAfter(last);
        else
          b.setInsertionPoint(slice);
        SmallVector<Value> flats;
        for (Value g : parts)
          flats.push_back(
              flat.flatten(flat.castTo(g, reduce, MemoryCategory::Comm),
                           MemoryCategory::Comm));
        Value local = flat.concatFlat(flats, pad, reduce, MemoryCategory::Comm);
        Value shard = flat.tagged(b.create<mesh::ReduceScatterOp>(
                                      slice.getLoc(), shardType.clone(reduce),
                                      kMeshName, ranks->shardAxes(), local,
                                      mesh::ReductionKind::Sum, APInt(64, 0)),
                                  MemoryCategory::Grads);
        issued.push_back(shard.getDefiningOp());
        // Hybrid sharding: the other groups' sums of the same shard.
        if (across)
          shard = flat.sumOverReplicas(shard, *ranks, MemoryCategory::Grads);
        return flat.castTo(shard, elem, MemoryCategory::Grads);
      };
      // Every gradient of the unit accumulated over the same micro-batches:
      // terms[m] holds micro-batch m's.
      SmallVector<SmallVector<Value>> terms;
      Value factor;
      if (!accumulateUnsharded)
        for (Value g : grads) {
          SmallVector<Value> mine;
          Value f;
          if (!microBatchTerms(g, mine, f) ||
              (!terms.empty() && mine.size() != terms.size())) {
            terms.clear();
            break;
          }
          terms.resize(mine.size());
          for (auto [m, t] : llvm::enumerate(mine))
            terms[m].push_back(t);
          factor = f;
        }
      Value summed;
      if (terms.empty()) {
        summed = reduceScatter(grads, /*across=*/true);
      } else {
        SmallVector<Value> shards;
        for (auto &parts : terms)
          shards.push_back(reduceScatter(parts, /*across=*/false));
        // Micro-batch m's shard joins the sum when micro-batch m + 1's
        // gradients are ready (the last one's where the update needs it):
        // each reduce-scatter overlaps a micro-batch's backward, and a rank
        // holds the sum and at most two shards.
        summed = shards.front();
        for (size_t m = 1; m < shards.size(); ++m) {
          if (m + 1 < shards.size())
            b.setInsertionPoint(issued[m + 1]);
          else
            b.setInsertionPoint(slice);
          summed = flat.tagged(b.create<AddOp>(slice.getLoc(), slice.getType(),
                                               summed, shards[m]),
                               MemoryCategory::Grads);
        }
        b.setInsertionPoint(slice);
        // Across the groups, in the reduce dtype like the reduce-scatters.
        if (ranks->hybrid())
          summed = flat.castTo(
              flat.sumOverReplicas(
                  flat.castTo(summed, reduce, MemoryCategory::Grads), *ranks,
                  MemoryCategory::Grads),
              elem, MemoryCategory::Grads);
        summed = flat.tagged(
            b.create<MulOp>(slice.getLoc(), slice.getType(), summed, factor),
            MemoryCategory::Grads);
      }
      Value avg = flat.scaleByInverseWorld(summed, MemoryCategory::Grads);
      slice.getResult().replaceAllUsesWith(avg);
      eraseDeadProducers(slice);
    }
  }
};

} // namespace
} // namespace shardc
