//===- ClipGradients.cpp - Gradient clipping by the total norm ------------===//
//
// torch.nn.utils.clip_grad_norm_ over the gradients the optimizer updates
// read, wherever the ZeRO passes left them: full and averaged at stage 0
// (every rank holds the same values and computes the norm alone), this
// rank's shard at stages 1-3 (padding zeros add nothing; the ranks' parts
// are combined over the mesh). The parts accumulate in a chain of
// PartialNorm ops right after the last gradient exists; ClipCoefficient
// finishes the norm and the clamped coefficient, which every update takes
// as its grad_scale operand, and the norm becomes a graph output that the
// plan's training record names.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_CLIPGRADIENTS
#include "passes/Passes.h.inc"

namespace {

struct ClipGradientsPass : impl::ClipGradientsBase<ClipGradientsPass> {
  using ClipGradientsBase::ClipGradientsBase;
  SHARDC_CHECK_OPTIONS_ClipGradients;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "clip-gradients");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    // clip-grad-norm's default (0, outside its range) means "no clipping".
    if (maxNorm == 0) {
      if (normType != NormType::L2) {
        func.emitError("clip-gradients: clip-norm-type needs clip-grad-norm");
        return signalPassFailure();
      }
      return;
    }
    if (std::optional<std::string> err = checkOptions()) {
      func.emitError("clip-gradients: ") << *err;
      return signalPassFailure();
    }

    SmallVector<Operation *> updates;
    SmallVector<Value> grads;
    func.walk([&](Operation *op) {
      if (isa<SGDUpdateOp, AdamUpdateOp>(op)) {
        updates.push_back(op);
        grads.push_back(op->getOperand(1));
      }
    });
    if (updates.empty()) {
      func.emitError("clip-gradients: the step updates no parameter; "
                     "clip-grad-norm needs an optimizer (shardc --optimizer) "
                     "and a trained parameter");
      return signalPassFailure();
    }
    for (Operation *op : updates)
      if (getGradScale(op)) {
        op->emitOpError("clip-gradients: the update already scales its "
                        "gradient; the step is clipped twice");
        return signalPassFailure();
      }

    OpBuilder b(func.getContext());
    Block &body = func.getBody().front();
    Operation *last = latestDef(grads);
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(&body);
    // Every update needs the coefficient, so it waits for the last
    // gradient: updates placed earlier (the ZeRO passes put each unit's
    // right after its own gradient), and whatever uses their results before
    // that point (the gather of the updated parameters), move after it, in
    // their order.
    llvm::SetVector<Operation *> later;
    if (last)
      for (Operation &op : body) {
        bool dependent = isa<SGDUpdateOp, AdamUpdateOp>(op) ||
                         llvm::any_of(op.getOperands(), [&](Value v) {
                           return later.contains(v.getDefiningOp());
                         });
        if (dependent && &op == last) {
          op.emitOpError("clip-gradients: a gradient depends on an "
                         "optimizer update of this step");
          return signalPassFailure();
        }
        if (dependent)
          later.insert(&op);
        if (&op == last)
          break;
      }

    Location loc = NameLoc::get(b.getStringAttr("clip_grad_norm"),
                                updates.front()->getLoc());
    FlatBuilder flat(b, 1);
    // The parts are f64: a sum of squares overflows f32 long before the
    // norm does.
    auto part64 = RankedTensorType::get({}, b.getF64Type());
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    auto norm = NormTypeAttr::get(b.getContext(), normType);
    Value part;
    for (Value g : grads)
      part = flat.tagged(b.create<PartialNormOp>(loc, part64, g, part, norm),
                         MemoryCategory::Grads);

    // At stages 1-3 each rank holds its own shards: combine the parts.
    int64_t world = 1, stage = 0;
    if (auto ws = func->getAttrOfType<IntegerAttr>(kWorldSizeAttrName))
      world = ws.getInt();
    if (auto st = func->getAttrOfType<IntegerAttr>(kZeroStageAttrName))
      stage = st.getInt();
    if (world > 1 && stage >= 1) {
      Value one = flat.flatten(part, MemoryCategory::Grads);
      if (normType == NormType::L2) {
        Value sum =
            flat.tagged(b.create<mesh::AllReduceOp>(
                            loc, one.getType(), kMeshName, ArrayRef<int16_t>{0},
                            one, mesh::ReductionKind::Sum),
                        MemoryCategory::Grads);
        part = flat.tagged(b.create<ReshapeOp>(loc, part64, sum),
                           MemoryCategory::Grads);
      } else {
        // Gathered and reduced by PartialNorm, which propagates a NaN that
        // a max reduction of the network might drop.
        auto allType = RankedTensorType::get({world}, b.getF64Type());
        Value all = flat.tagged(b.create<mesh::AllGatherOp>(
                                    loc, allType, kMeshName,
                                    ArrayRef<int16_t>{0}, one, APInt(64, 0)),
                                MemoryCategory::Grads);
        part = flat.tagged(
            b.create<PartialNormOp>(loc, part64, all, Value(), norm),
            MemoryCategory::Grads);
      }
    }
    auto clip = b.create<ClipCoefficientOp>(loc, scalar, scalar, part,
                                            b.getF64FloatAttr(maxNorm), norm);
    flat.tag(clip, MemoryCategory::Grads);
    Operation *after = clip;
    for (Operation *op : later) {
      op->moveAfter(after);
      after = op;
    }
    for (Operation *op : updates) {
      if (auto sgd = dyn_cast<SGDUpdateOp>(op))
        sgd.getGradScaleMutable().assign(clip.getCoefficient());
      else
        cast<AdamUpdateOp>(op).getGradScaleMutable().assign(
            clip.getCoefficient());
    }

    // The norm is a graph output, named in shardc.output_names and by the
    // function's shardc.grad_norm.
    auto names = func->getAttrOfType<ArrayAttr>(kOutputNamesAttrName);
    SmallVector<Attribute> outNames(names ? names.getValue()
                                          : ArrayRef<Attribute>());
    std::string name = "grad_norm";
    for (int k = 1;
         llvm::any_of(outNames,
                      [&](Attribute a) {
                        return cast<StringAttr>(a).getValue() == name;
                      });
         ++k)
      name = "grad_norm_" + std::to_string(k);
    StepResults results = readStepResults(func);
    results.outputs.push_back(clip.getNorm());
    outNames.push_back(b.getStringAttr(name));
    writeStepResults(func, results);
    func->setAttr(kOutputNamesAttrName, b.getArrayAttr(outNames));
    func->setAttr(kGradNormAttrName, b.getStringAttr(name));
  }

  static Value getGradScale(Operation *op) {
    if (auto sgd = dyn_cast<SGDUpdateOp>(op))
      return sgd.getGradScale();
    return cast<AdamUpdateOp>(op).getGradScale();
  }
};

} // namespace
} // namespace shardc
