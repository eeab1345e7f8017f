//===- MixedPrecision.cpp - Forward and backward in a 16-bit float
//---------===//
//
// Rewrites the imported forward model to compute in the param dtype (FSDP's
// MixedPrecision). The model's data enters through casts of the float
// parameters and float graph inputs; an op computes in the param dtype when
// one of its operands carries data, so computations on constants and shapes
// alone (positions, masks) stay float32 until they meet the data. The
// upcast list computes in float32. The ZeRO passes read the recorded dtypes.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"

namespace {

Type precisionType(MLIRContext *ctx, Precision p) {
  switch (p) {
  case Precision::Bf16:
    return BFloat16Type::get(ctx);
  case Precision::Fp16:
    return Float16Type::get(ctx);
  case Precision::Fp32:
  case Precision::Param:
    break;
  }
  return Float32Type::get(ctx);
}

/// Ops that compute in float32 whatever the param dtype (the loss and the
/// log-probabilities it is taken from).
bool computesInFloat32(Operation *op) {
  return isa<SoftmaxCrossEntropyLossOp, NegativeLogLikelihoodLossOp,
             LogSoftmaxOp>(op);
}

/// Operands and results of `op` that are buffers (BatchNormalization's
/// running statistics), kept in the buffer dtype.
bool isBufferOperand(Operation *op, unsigned i) {
  return isa<BatchNormalizationOp>(op) && (i == 3 || i == 4);
}
bool isBufferResult(Operation *op, unsigned i) {
  return isa<BatchNormalizationOp>(op) && (i == 1 || i == 2);
}

bool hasElem(Value v, Type elem) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType() == elem;
}

RankedTensorType withElem(Value v, Type elem) {
  return cast<RankedTensorType>(v.getType()).clone(elem);
}

/// Whether `op` verifies, without reporting why not.
bool quietlyVerifies(Operation *op) {
  ScopedDiagnosticHandler quiet(op->getContext(),
                                [](Diagnostic &) { return success(); });
  return succeeded(verify(op, /*verifyRecursively=*/false));
}

struct MixedPrecisionPass : impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "mixed-precision");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    MLIRContext *ctx = func.getContext();
    Type f32 = Float32Type::get(ctx);
    Type compute = precisionType(ctx, paramDtype);
    Type reduce = reduceDtype == Precision::Param
                      ? compute
                      : precisionType(ctx, reduceDtype);
    Type buffer = bufferDtype == Precision::Param
                      ? compute
                      : precisionType(ctx, bufferDtype);
    if (compute == f32 && reduce == f32 && buffer == f32)
      return;
    if (func->hasAttr(kParamDTypeAttrName)) {
      func.emitError("mixed-precision: the step already has a param dtype");
      return signalPassFailure();
    }
    func->setAttr(kParamDTypeAttrName, TypeAttr::get(compute));
    func->setAttr(kReduceDTypeAttrName, TypeAttr::get(reduce));
    Block &body = func.getBody().front();
    for (Operation &op : body.without_terminator())
      if (op.getNumRegions()) {
        op.emitOpError("mixed-precision: ops with regions are not supported");
        return signalPassFailure();
      }

    OpBuilder b(ctx);
    // `v` as `elem`, cast right before `user` (or reusing a cast made
    // for an earlier user of the same value).
    DenseMap<std::pair<Value, Type>, Value> casts;
    auto castFor = [&](Value v, Type elem, Operation *user) -> Value {
      auto [it, inserted] = casts.try_emplace({v, elem}, Value());
      if (!inserted)
        return it->second;
      b.setInsertionPoint(user);
      it->second = b.create<CastOp>(v.getLoc(), withElem(v, elem), v);
      return it->second;
    };

    // Buffers: arguments that are BatchNormalization running statistics.
    llvm::DenseSet<Value> buffers;
    for (Operation &op : body)
      for (OpOperand &use : op.getOpOperands())
        if (isBufferOperand(&op, use.getOperandNumber()) &&
            isa<BlockArgument>(use.get()))
          buffers.insert(use.get());

    // The model's data: float32 values derived from parameters or inputs,
    // and the upcast ops' results.
    llvm::DenseSet<Value> data;
    for (BlockArgument arg : func.getArguments()) {
      bool param = !!func.getArgAttr(arg.getArgNumber(), kParamAttrName);
      bool input = !!func.getArgAttr(arg.getArgNumber(), kInputAttrName);
      if (!hasElem(arg, f32) || (!param && !input) || arg.use_empty())
        continue;
      Type elem = buffers.contains(arg) ? buffer : compute;
      if (elem == f32)
        continue;
      Operation *first = nullptr;
      for (Operation *user : arg.getUsers())
        if (!first || user->isBeforeInBlock(first))
          first = user;
      Value c = castFor(arg, elem, first);
      arg.replaceAllUsesExcept(c, c.getDefiningOp());
      if (!buffers.contains(arg))
        data.insert(c);
    }
    if (compute == f32)
      return; // only a reduce (or buffer) dtype
    if (data.empty())
      func.emitWarning("mixed-precision: no float32 parameter or input "
                       "reaches the model; nothing computes in ")
          << compute;

    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (isa<CastOp>(op) && data.contains(op->getResult(0)))
        continue; // an entry cast made above
      bool onData = llvm::any_of(op->getOperands(),
                                 [&](Value v) { return data.contains(v); });
      if (!onData)
        continue;
      if (computesInFloat32(op)) {
        for (OpOperand &use : op->getOpOperands())
          if (data.contains(use.get()) && !hasElem(use.get(), f32))
            use.set(castFor(use.get(), f32, op));
        for (Value r : op->getResults())
          if (hasElem(r, f32))
            data.insert(r);
        continue;
      }
      for (OpResult r : op->getResults()) {
        if (!hasElem(r, f32))
          continue;
        bool isBuffer = isBufferResult(op, r.getResultNumber());
        r.setType(withElem(r, isBuffer ? buffer : compute));
        if (!isBuffer)
          data.insert(r);
      }
      // Float32 operands join the data in the compute dtype, unless the op
      // takes them only as float32 (Resize's scales, say).
      SmallVector<std::pair<OpOperand *, Value>> rounded;
      for (OpOperand &use : op->getOpOperands())
        if (hasElem(use.get(), f32) &&
            !isBufferOperand(op, use.getOperandNumber())) {
          rounded.push_back({&use, use.get()});
          use.set(castFor(use.get(), compute, op));
        }
      if (quietlyVerifies(op))
        continue;
      for (auto [use, original] : rounded)
        if (!data.contains(original))
          use->set(original);
      if (quietlyVerifies(op))
        continue;
      (void)verify(op);
      op->emitOpError("mixed-precision: cannot compute in ")
          << compute << "; train this model with param-dtype=fp32";
      return signalPassFailure();
    }

    // The step's outputs keep the types the model declared (float32 loss and
    // logits; a buffer's new value in its argument's type).
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    for (OpOperand &use : ret->getOpOperands()) {
      auto want = dyn_cast<RankedTensorType>(
          func.getFunctionType().getResult(use.getOperandNumber()));
      if (want && use.get().getType() != want)
        use.set(castFor(use.get(), want.getElementType(), ret));
    }
  }
};

} // namespace
} // namespace shardc
