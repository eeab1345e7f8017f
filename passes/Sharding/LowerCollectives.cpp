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
//   mesh.all_slice      -> shardc.ShardSlice (local, no communication;
//                          of a shardc.Concat's parts where it slices one)
//
// Only 1-d buffers with sum reductions are supported, which is what the ZeRO
// passes produce; anything else is an error naming the op. `world_size` is
// the number of ranks the collective spans. On a mesh of several axes
// (hybrid sharding) a collective over some of them runs within the group of
// ranks along those axes, and says so with `mesh_axes`:
//
//   mesh.all_gather %s on @world mesh_axes = [1]   (mesh 2x2)
//     -> shardc.AllGatherStart %s {mesh_axes = array<i64: 1>, world_size = 2}
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
    if (!meshOp || meshOp.getShape().empty() ||
        llvm::any_of(meshOp.getShape(), [](int64_t d) {
          return ShapedType::isDynamic(d) || d < 1;
        }))
      return op->emitOpError("lower-collectives: needs a mesh of static "
                             "shape");
    int64_t rank = static_cast<int64_t>(meshOp.getShape().size());
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("mesh_axes");
    if (!axes || axes.empty() ||
        llvm::any_of(llvm::enumerate(axes.asArrayRef()), [&](auto entry) {
          int16_t a = entry.value();
          return a < 0 || a >= rank ||
                 (entry.index() > 0 && a <= axes[entry.index() - 1]);
        }))
      return op->emitOpError("lower-collectives: the collective must run "
                             "over increasing axes of its mesh");
    // The ranks it spans, and on a mesh of several axes which ones.
    int64_t n = 1;
    SmallVector<int64_t> groupAxes;
    for (int16_t a : axes.asArrayRef()) {
      n *= meshOp.getShape()[a];
      groupAxes.push_back(a);
    }
    DenseI64ArrayAttr meshAxes;
    if (static_cast<int64_t>(groupAxes.size()) != rank)
      meshAxes = DenseI64ArrayAttr::get(op->getContext(), groupAxes);
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
    ConcatOp deadConcat;
    if (isa<mesh::AllSliceOp>(op)) {
      // A slice of a concatenation read by nothing else takes its parts,
      // so that the rank copies only its chunk of them.
      SmallVector<Value> parts{in};
      auto concat = in.getDefiningOp<ConcatOp>();
      if (concat && in.hasOneUse() && concat.getAxis() == 0)
        parts.assign(concat.getInputs().begin(), concat.getInputs().end());
      start = b.create<ShardSliceOp>(loc, type, parts, n, meshAxes);
      result = start->getResult(0);
      if (parts.size() > 1)
        deadConcat = concat;
    } else {
      auto pending = PendingType::get(cast<RankedTensorType>(type));
      if (isa<mesh::AllGatherOp>(op))
        start = b.create<AllGatherStartOp>(loc, pending, in, n, meshAxes);
      else if (isa<mesh::ReduceScatterOp>(op))
        start = b.create<ReduceScatterStartOp>(loc, pending, in, n, meshAxes);
      else
        start = b.create<AllReduceStartOp>(loc, pending, in, n, meshAxes);
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
    if (deadConcat)
      deadConcat->erase();
    return success();
  }
};

} // namespace
} // namespace shardc
