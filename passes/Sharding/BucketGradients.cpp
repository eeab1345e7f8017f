//===- BucketGradients.cpp - Bucketed all-reduce of gradients -------------===//
//
// ZeRO stages 0 and 1 (DDP): gradients are packed, in the order backward
// produces them, into flat buckets of at most bucket-cap-mb; each bucket is
// summed over ranks with mesh.all_reduce as soon as its last gradient
// exists, and every gradient is sliced back out and averaged where its
// update needs it.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_BUCKETGRADIENTS
#include "passes/Passes.h.inc"

namespace {

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
    SmallVector<SmallVector<ParamUpdate>> buckets;
    int64_t filled = 0;
    for (const ParamUpdate &u : updates) {
      auto t = cast<RankedTensorType>(u.grad.getType());
      Type elem = reducedElem(u.grad);
      int64_t bytes = t.getNumElements() *
                      std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
      if (buckets.empty() || filled + bytes > cap ||
          reducedElem(buckets.back().front().grad) != elem) {
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
