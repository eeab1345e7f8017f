//===- LowerCollectives.cpp - mesh collectives to start/wait ops ----------===//
//
// The mesh dialect's collectives are pure tensor ops with no asynchronous
// form (and no runtime lowering in LLVM 19). Each becomes a start op that
// hands a flat buffer to the communicator and yields a `!shardc.pending`
// handle, and a wait op that consumes the handle and makes the result
// available, so that scheduling can put computation between them. Unlike
// the mesh ops, start and wait communicate (they have memory effects on the
// network), so generic transformations keep every one of them in order:
//
//   mesh.all_gather     -> shardc.AllGatherStart     + shardc.CollectiveWait
//   mesh.reduce_scatter -> shardc.ReduceScatterStart + shardc.CollectiveWait
//   mesh.all_reduce     -> shardc.AllReduceStart     + shardc.CollectiveWait
//   mesh.all_slice      -> shardc.ShardSlice (local, no communication)
//
// Only 1-d buffers on a 1-d mesh with sum reductions are supported, which is
// what the ZeRO pass produces; anything else is an error naming the op.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_LOWERCOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

struct LowerCollectivesPass : impl::LowerCollectivesBase<LowerCollectivesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<mesh::AllGatherOp, mesh::ReduceScatterOp, mesh::AllReduceOp,
              mesh::AllSliceOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops)
      if (failed(lower(module, op)))
        return signalPassFailure();
  }

  LogicalResult lower(ModuleOp module, Operation *op) {
    auto meshName = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
    auto meshOp =
        meshName ? module.lookupSymbol<mesh::MeshOp>(meshName) : mesh::MeshOp();
    if (!meshOp || meshOp.getShape().size() != 1 ||
        ShapedType::isDynamic(meshOp.getShape()[0]) || meshOp.getShape()[0] < 1)
      return op->emitOpError("lower-collectives: needs a 1-d mesh of static "
                             "size");
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("mesh_axes");
    if (!axes || axes.asArrayRef() != ArrayRef<int16_t>{0})
      return op->emitOpError("lower-collectives: the collective must run over "
                             "mesh axis 0 (mesh_axes = [0])");
    int64_t n = meshOp.getShape()[0];
    if (cast<RankedTensorType>(op->getOperand(0).getType()).getRank() != 1)
      return op->emitOpError("lower-collectives: only 1-d buffers");
    if (auto kind = op->getAttrOfType<mesh::ReductionKindAttr>("reduction"))
      if (kind.getValue() != mesh::ReductionKind::Sum)
        return op->emitOpError("lower-collectives: only sum reductions");
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value in = op->getOperand(0);
    Type type = op->getResult(0).getType();
    auto category = op->getAttr(kCategoryAttrName);
    Operation *start = nullptr;
    Value result;
    if (isa<mesh::AllSliceOp>(op)) {
      start = b.create<ShardSliceOp>(loc, type, in, n);
      result = start->getResult(0);
    } else {
      auto pending = PendingType::get(cast<RankedTensorType>(type));
      if (isa<mesh::AllGatherOp>(op))
        start = b.create<AllGatherStartOp>(loc, pending, in, n);
      else if (isa<mesh::ReduceScatterOp>(op))
        start = b.create<ReduceScatterStartOp>(loc, pending, in, n);
      else
        start = b.create<AllReduceStartOp>(loc, pending, in, n);
      Operation *wait =
          b.create<CollectiveWaitOp>(loc, type, start->getResult(0));
      if (category)
        wait->setAttr(kCategoryAttrName, category);
      result = wait->getResult(0);
    }
    if (category)
      start->setAttr(kCategoryAttrName, category);
    for (StringRef a : {kBackwardAttrName})
      if (op->hasAttr(a))
        start->setAttr(a, op->getAttr(a));
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
    return success();
  }
};

} // namespace
} // namespace shardc
