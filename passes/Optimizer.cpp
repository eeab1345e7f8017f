//===- Optimizer.cpp - Parameter gradients to in-place updates ------------===//
//
// Turns the `shardc.grad_of` results that autodiff added into optimizer
// updates. Optimizer state is explicit: zero-initialized `shardc.state`
// arguments of @main, so later passes (ZeRO) can partition it like any other
// value. Every updated parameter or state is returned with
// `shardc.updates = <argument index>`; the plan emitter makes those updates
// in place.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_OPTIMIZER
#include "passes/Passes.h.inc"

namespace {

struct OptimizerPass : impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;
  SHARDC_CHECK_OPTIONS_Optimizer;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step = getStepFunction(getOperation(), "optimizer");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    if (std::optional<std::string> err = checkOptions()) {
      func.emitError("optimizer: ") << *err;
      return signalPassFailure();
    }
    // weight-decay's default (-1, outside its range) means "not given".
    double wd = weightDecay >= 0
                    ? weightDecay.getValue()
                    : (optimizer == OptimizerKind::AdamW ? 0.01 : 0.0);
    if (nesterov && (momentum <= 0 || dampening != 0)) {
      func.emitError("optimizer: Nesterov momentum requires a momentum and "
                     "zero dampening");
      return signalPassFailure();
    }
    bool decays = lrSchedule != LrSchedule::Constant;
    if (!decays && (decaySteps != 0 || minLrRatio != 0)) {
      func.emitError("optimizer: decay-steps and min-lr-ratio are for a "
                     "decaying schedule: add lr-schedule=linear or cosine");
      return signalPassFailure();
    }
    if (decays && decaySteps <= warmupSteps) {
      func.emitError("optimizer: a ")
          << stringifyLrSchedule(lrSchedule)
          << " lr-schedule needs decay-steps (the step at which it reaches "
             "min-lr-ratio * lr) greater than warmup-steps ("
          << warmupSteps.getValue() << "), got " << decaySteps.getValue();
      return signalPassFailure();
    }

    OpBuilder b(func.getContext());
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Location loc = ret.getLoc();

    // Parameters by name.
    llvm::StringMap<BlockArgument> params;
    for (BlockArgument arg : func.getArguments())
      if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        kParamAttrName))
        params[name.getValue()] = arg;

    auto addState = [&](Type type, const Twine &name) {
      unsigned idx = func.getNumArguments();
      func.insertArgument(idx, type,
                          b.getDictionaryAttr(b.getNamedAttr(
                              kStateAttrName, b.getStringAttr(name))),
                          loc);
      return func.getArgument(idx);
    };

    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    SmallVector<std::pair<Value, unsigned>> updates; // (new value, arg index)
    SmallVector<std::pair<std::string, unsigned>> gradResults;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (auto g = func.getResultAttrOfType<StringAttr>(i, kGradOfAttrName)) {
        gradResults.push_back({g.str(), (unsigned)i});
        continue;
      }
      results.push_back(v);
      resultAttrs.push_back(func.getResultAttrDict(i)
                                ? func.getResultAttrDict(i)
                                : b.getDictionaryAttr({}));
    }

    // The schedule's attributes, on every update (absent: lr throughout).
    LrScheduleAttr scheduleAttr =
        decays ? LrScheduleAttr::get(b.getContext(), lrSchedule)
               : LrScheduleAttr();
    IntegerAttr warmupAttr =
        warmupSteps > 0 ? b.getI64IntegerAttr(warmupSteps) : IntegerAttr();
    IntegerAttr decayAttr =
        decays ? b.getI64IntegerAttr(decaySteps) : IntegerAttr();
    FloatAttr minRatioAttr =
        decays ? b.getF64FloatAttr(minLrRatio) : FloatAttr();

    b.setInsertionPoint(ret);
    auto f32 = b.getF32Type();
    if (!gradResults.empty()) {
      BlockArgument step =
          addState(RankedTensorType::get({}, f32), "optimizer.step");
      b.setInsertionPoint(ret);
      Value newStep =
          b.create<IncrementOp>(loc, step.getType(), step, /*skip=*/Value());
      updates.push_back({newStep, step.getArgNumber()});
      for (auto &[name, index] : gradResults) {
        BlockArgument p = params.lookup(name);
        if (!p) {
          func.emitError("optimizer: gradient of unknown parameter '")
              << name << "'";
          return signalPassFailure();
        }
        Value grad = ret.getOperand(index);
        Location ploc = NameLoc::get(b.getStringAttr(name), loc);
        if (optimizer == OptimizerKind::Sgd) {
          BlockArgument buf = addState(p.getType(), name + ".momentum_buffer");
          b.setInsertionPoint(ret);
          auto upd = b.create<SGDUpdateOp>(
              ploc, TypeRange{p.getType(), p.getType()}, p, grad, buf, newStep,
              b.getF64FloatAttr(lr), b.getF64FloatAttr(momentum),
              b.getF64FloatAttr(dampening), b.getF64FloatAttr(wd),
              b.getBoolAttr(nesterov), scheduleAttr, warmupAttr, decayAttr,
              minRatioAttr, /*grad_scale=*/Value(), /*skip=*/Value(),
              /*lr_step=*/Value());
          updates.push_back({upd.getNewParam(), p.getArgNumber()});
          updates.push_back({upd.getNewMomentumBuffer(), buf.getArgNumber()});
        } else {
          BlockArgument m = addState(p.getType(), name + ".exp_avg");
          BlockArgument v = addState(p.getType(), name + ".exp_avg_sq");
          b.setInsertionPoint(ret);
          auto upd = b.create<AdamUpdateOp>(
              ploc, TypeRange{p.getType(), p.getType(), p.getType()}, p, grad,
              m, v, newStep, b.getF64FloatAttr(lr), b.getF64FloatAttr(beta1),
              b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
              b.getF64FloatAttr(wd),
              b.getBoolAttr(optimizer == OptimizerKind::AdamW), scheduleAttr,
              warmupAttr, decayAttr, minRatioAttr, /*grad_scale=*/Value(),
              /*skip=*/Value(), /*lr_step=*/Value());
          updates.push_back({upd.getNewParam(), p.getArgNumber()});
          updates.push_back({upd.getNewExpAvg(), m.getArgNumber()});
          updates.push_back({upd.getNewExpAvgSq(), v.getArgNumber()});
        }
      }
    }

    // BatchNormalization running statistics, updated as PyTorch does. With
    // gradient accumulation a chain of normalizations (one per micro-batch)
    // passes them on: the last one's are the step's.
    func.walk([&](BatchNormalizationOp bn) {
      // A recomputation's statistics repeat its forward's: never stored.
      if (!bn.getTrainingMode() || bn->hasAttr(kRecomputeAttrName))
        return;
      // Statistics in a buffer dtype (shardc-mixed-precision) are casts of
      // the arguments, and are stored back in the arguments' type.
      auto argOf = [](Value v) {
        if (auto c = v.getDefiningOp<CastOp>())
          v = c.getInput();
        return dyn_cast<BlockArgument>(v);
      };
      BlockArgument mean = argOf(bn.getMean());
      BlockArgument var = argOf(bn.getVar());
      if (!mean || !var ||
          !func.getArgAttr(mean.getArgNumber(), kParamAttrName) ||
          !func.getArgAttr(var.getArgNumber(), kParamAttrName))
        return;
      BatchNormalizationOp last = bn;
      while (true) {
        last.setUnbiasedVar(true);
        BatchNormalizationOp next;
        for (Operation *user : last.getRunningMean().getUsers())
          if (auto n = dyn_cast<BatchNormalizationOp>(user);
              n && !n->hasAttr(kRecomputeAttrName) &&
              n.getMean() == last.getRunningMean() &&
              n.getVar() == last.getRunningVar())
            next = n;
        if (!next)
          break;
        last = next;
      }
      auto stored = [&](Value v, BlockArgument arg) -> Value {
        if (v.getType() == arg.getType())
          return v;
        b.setInsertionPoint(ret);
        return b.create<CastOp>(v.getLoc(), arg.getType(), v);
      };
      updates.push_back(
          {stored(last.getRunningMean(), mean), mean.getArgNumber()});
      updates.push_back(
          {stored(last.getRunningVar(), var), var.getArgNumber()});
    });

    for (auto &[value, arg] : updates) {
      results.push_back(value);
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(kUpdatesAttrName, b.getI64IntegerAttr(arg))));
    }
    b.setInsertionPoint(ret);
    b.create<func::ReturnOp>(loc, results);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    func.setFunctionType(
        b.getFunctionType(func.getFunctionType().getInputs(), types));
    func.setAllResultAttrs(resultAttrs);
    func->setAttr("shardc.optimizer",
                  b.getStringAttr(optimizerName(optimizer)));
  }
};

} // namespace
} // namespace shardc
