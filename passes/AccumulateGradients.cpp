//===- AccumulateGradients.cpp - K micro-batches per optimizer step -------===//
//
// Gradient accumulation (DDP's no_sync, DeepSpeed's
// gradient_accumulation_steps) as a rewrite of the differentiated step: its
// graph inputs grow from B to K * B samples, and the forward and backward
// ops are repeated for each micro-batch m, reading rows [m * B, (m + 1) * B)
// of every input. Each repetition's gradients are added to the running sum
// as soon as they exist (so that one micro-batch's activations and
// gradients are live at a time), and the step returns the means over the K
// micro-batches of the loss and of every gradient: one optimizer step on
// the whole K * B batch. Each copy's ops carry shardc.micro_batch = m
// (m >= 1), so that ZeRO-3 gathers parameters per micro-batch.
//
// What differs between repetitions is carried along: training-mode
// BatchNormalization's running statistics pass from one micro-batch to the
// next (as PyTorch updates them on every forward), and Dropout draws micro
// batch m's masks as rank m * N + r of N * K would.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/BitVector.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_ACCUMULATEGRADIENTS
#include "passes/Passes.h.inc"

namespace {

struct AccumulateGradientsPass
    : impl::AccumulateGradientsBase<AccumulateGradientsPass> {
  using AccumulateGradientsBase::AccumulateGradientsBase;
  SHARDC_CHECK_OPTIONS_AccumulateGradients;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "accumulate-gradients");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    if (std::optional<std::string> err = checkOptions()) {
      func.emitError("accumulate-gradients: ") << *err;
      return signalPassFailure();
    }
    if (gradAccum == 1)
      return;
    if (failed(rewrite(func, gradAccum)))
      return signalPassFailure();
  }

  LogicalResult rewrite(func::FuncOp func, int64_t k) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    auto names = func->getAttrOfType<ArrayAttr>(kOutputNamesAttrName);
    auto loss = func->getAttrOfType<StringAttr>("shardc.loss");
    bool hasGrad = false;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      hasGrad |= bool(func.getResultAttr(i, kGradOfAttrName));
    if (!names || !loss || !hasGrad)
      return func.emitError("accumulate-gradients: the step has no loss "
                            "gradients to accumulate; grad-accum needs a "
                            "training step (shardc --optimizer)");

    // Every graph input holds B samples along its first axis.
    SmallVector<BlockArgument> inputs;
    int64_t batch = -1;
    StringRef firstName;
    for (BlockArgument arg : func.getArguments()) {
      auto name =
          func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kInputAttrName);
      if (!name)
        continue;
      auto type = cast<RankedTensorType>(arg.getType());
      if (type.getRank() == 0)
        return func.emitError("accumulate-gradients: graph input '")
               << name.getValue()
               << "' is a scalar, but grad-accum splits every input along "
                  "its first (batch) axis";
      if (batch < 0) {
        batch = type.getDimSize(0);
        firstName = name.getValue();
      } else if (type.getDimSize(0) != batch) {
        return func.emitError("accumulate-gradients: graph input '")
               << name.getValue() << "' has " << type.getDimSize(0)
               << " rows but '" << firstName << "' has " << batch
               << "; grad-accum needs every input to hold the micro-batch "
                  "along its first axis";
      }
      inputs.push_back(arg);
    }
    if (inputs.empty())
      return func.emitError("accumulate-gradients: the step has no graph "
                            "input to split into micro-batches");

    SmallVector<Operation *> original;
    for (Operation &op : body.without_terminator())
      original.push_back(&op);

    // The inputs of K micro-batches, and each micro-batch's rows of them.
    OpBuilder b(func.getContext());
    SmallVector<SmallVector<Value>> slices(k);
    for (BlockArgument old : inputs) {
      unsigned idx = old.getArgNumber();
      auto type = cast<RankedTensorType>(old.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= k;
      func.insertArgument(idx,
                          RankedTensorType::get(shape, type.getElementType()),
                          func.getArgAttrDict(idx), old.getLoc());
      BlockArgument whole = func.getArgument(idx);
      b.setInsertionPointToStart(&body);
      for (int64_t m = 0; m < k; ++m) {
        SmallVector<int64_t> starts(type.getRank(), 0),
            steps(type.getRank(), 1);
        starts[0] = m * batch;
        slices[m].push_back(
            b.create<SliceOp>(old.getLoc(), type, whole, starts, steps));
      }
      old.replaceAllUsesWith(slices[0].back());
    }
    llvm::BitVector dead(func.getNumArguments());
    for (BlockArgument old : inputs)
      dead.set(old.getArgNumber());
    func.eraseArguments(dead);

    // Micro-batch m's copy of the forward and backward, in order.
    SmallVector<IRMapping> maps(k);
    b.setInsertionPoint(ret);
    for (int64_t m = 1; m < k; ++m) {
      for (auto [s0, sm] : llvm::zip(slices[0], slices[m]))
        maps[m].map(s0, sm);
      for (Operation *op : original)
        b.clone(*op, maps[m])
            ->setAttr(kMicroBatchAttrName, b.getI64IntegerAttr(m));
    }
    auto copyOf = [&](Operation *op, int64_t m) {
      return m == 0 ? op : maps[m].lookup(op);
    };
    for (Operation *op : original) {
      if (isa<DropoutOp>(op))
        for (int64_t m = 0; m < k; ++m) {
          auto d = cast<DropoutOp>(copyOf(op, m));
          d.setMicroBatch(m);
          d.setMicroBatches(k);
        }
      // Running statistics flow from one micro-batch's forward to the next.
      if (auto bn = dyn_cast<BatchNormalizationOp>(op);
          bn && bn.getTrainingMode() && isa<BlockArgument>(bn.getMean()))
        for (int64_t m = 1; m < k; ++m) {
          auto prev = cast<BatchNormalizationOp>(copyOf(op, m - 1));
          auto cur = cast<BatchNormalizationOp>(copyOf(op, m));
          cur.getMeanMutable().assign(prev.getRunningMean());
          cur.getVarMutable().assign(prev.getRunningVar());
        }
    }

    // The step's results over the micro-batches: the running sum of each
    // gradient (and of the loss and float scalars, then their mean; integer
    // scalars are counts and stay summed), added as each copy produces it;
    // other outputs are the last micro-batch's.
    FlatBuilder scale(b, k);
    SmallVector<Value> results;
    for (auto [i, result] : llvm::enumerate(ret.getOperands())) {
      Value v = result;
      auto copyValue = [&](int64_t m) {
        return m == 0 ? v : maps[m].lookupOrDefault(v);
      };
      auto type = cast<RankedTensorType>(v.getType());
      bool isGrad = bool(func.getResultAttr(i, kGradOfAttrName));
      Type elem = type.getElementType();
      bool isFloat = isa<FloatType>(elem);
      bool isCount = isa<IntegerType>(elem) && elem.getIntOrFloatBitWidth() > 1;
      if (!isGrad && !(type.getNumElements() == 1 && (isFloat || isCount))) {
        results.push_back(copyValue(k - 1));
        continue;
      }
      MemoryCategory category =
          isGrad ? MemoryCategory::Grads : MemoryCategory::Activations;
      Value acc = v;
      for (int64_t m = 1; m < k; ++m) {
        Value next = copyValue(m);
        if (Operation *last = latestDef({acc, next}))
          b.setInsertionPointAfter(last);
        else
          b.setInsertionPointToStart(&body);
        acc = scale.tagged(b.create<AddOp>(v.getLoc(), type, acc, next),
                           category);
        if (isGrad)
          acc.getDefiningOp()->setAttr(kMicroBatchSumAttrName, b.getUnitAttr());
      }
      if (isFloat) {
        b.setInsertionPointAfterValue(acc);
        acc = scale.scaleByInverseWorld(acc, category);
        if (isGrad)
          acc.getDefiningOp()->setAttr(kMicroBatchSumAttrName, b.getUnitAttr());
      }
      results.push_back(acc);
    }
    b.setInsertionPoint(ret);
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    func->setAttr(kGradAccumAttrName, b.getI64IntegerAttr(k));
    return success();
  }
};

} // namespace
} // namespace shardc
