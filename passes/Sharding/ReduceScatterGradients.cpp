//===- ReduceScatterGradients.cpp - Gradient shards by reduce-scatter -----===//
//
// ZeRO stages 2 and 3: the slice of a wrap unit's full gradient that
// shardc-partition-optimizer took for this rank becomes a mesh.reduce_scatter
// of the unit's flattened, padded local gradient, issued as soon as the
// unit's last gradient is produced and averaged over ranks; a rank never
// holds the summed full gradient.
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

struct ReduceScatterGradientsPass
    : impl::ReduceScatterGradientsBase<ReduceScatterGradientsPass> {
  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "reduce-scatter-gradients");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    FailureOr<int64_t> n =
        configuredWorldSize(func, "reduce-scatter-gradients");
    if (failed(n))
      return signalPassFailure();
    OpBuilder b(func.getContext());
    FlatBuilder flat(b, *n);
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
      if (Operation *last = latestDef(grads))
        b.setInsertionPointAfter(last);
      else
        b.setInsertionPoint(slice);
      SmallVector<Value> flats;
      for (Value g : grads)
        flats.push_back(flat.flatten(g, MemoryCategory::Comm));
      Type elem = cast<RankedTensorType>(gflat.getType()).getElementType();
      Value local = flat.concatFlat(flats, pad, elem, MemoryCategory::Comm);
      Value summed = flat.tagged(b.create<mesh::ReduceScatterOp>(
                                     slice.getLoc(), slice.getType(), kMeshName,
                                     ArrayRef<int16_t>{0}, local,
                                     mesh::ReductionKind::Sum, APInt(64, 0)),
                                 MemoryCategory::Grads);
      Value avg = flat.scaleByInverseWorld(summed, MemoryCategory::Grads);
      slice.getResult().replaceAllUsesWith(avg);
      eraseDeadProducers(slice);
    }
  }
};

} // namespace
} // namespace shardc
