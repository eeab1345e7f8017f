//===- Autodiff.cpp - Reverse-mode differentiation of the loss ------------===//
//
// Builds the backward graph of `func.func @main` for its scalar loss output
// and returns the gradient of every trainable parameter as an extra result
// marked `shardc.grad_of = "<param>"`.
//
// Trainable parameters are the float `shardc.param` arguments, except the
// running statistics of BatchNormalization (its mean/var operands), those
// --freeze names or --trainable leaves out, and module buffers
// (`shardc.buffer`, from PyTorch's dynamo exporter) no --trainable names. Only
// values that depend on a trainable parameter get gradients (activity
// analysis), so integer inputs, constants and shape-only subgraphs carry none.
// A value used several times (a tied embedding and head) accumulates the
// gradients of all its uses.
//
// This file is the driver only: the gradient rule of each op is its
// DifferentiableOpInterface model, one file per op family in ir/gradients/
// (docs/autodiff.md).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "ir/GradientEmitter.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Regex.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

namespace {

/// The --freeze and --trainable patterns: a parameter is trained when it
/// matches a --trainable pattern (or none is given) and no --freeze one.
struct ParamSelection {
  struct Pattern {
    std::string flag, source;
    std::unique_ptr<llvm::Regex> regex;
    bool used = false;
  };
  SmallVector<Pattern> freeze, trainable;

  LogicalResult compile(func::FuncOp func, StringRef flag,
                        ArrayRef<std::string> sources,
                        SmallVector<Pattern> &out) {
    for (const std::string &source : sources) {
      auto regex = std::make_unique<llvm::Regex>(source);
      std::string error;
      if (!regex->isValid(error))
        return func.emitError("--")
               << flag << " '" << source
               << "' is not a valid regular expression: " << error;
      out.push_back({flag.str(), source, std::move(regex)});
    }
    return success();
  }

  /// Whether `name` is left out of training; marks the patterns it matches.
  /// A module buffer (`buffer`) is trained only when a --trainable pattern
  /// names it.
  bool isFrozen(StringRef name, bool buffer) {
    bool named = false;
    for (Pattern &p : trainable)
      if (p.regex->match(name))
        named = p.used = true;
    bool inTrainable = named || (trainable.empty() && !buffer);
    bool inFreeze = false;
    for (Pattern &p : freeze)
      if (p.regex->match(name))
        inFreeze = p.used = true;
    return inFreeze || !inTrainable;
  }

  /// A pattern that matches no parameter is an error (a typo would
  /// otherwise train everything, or nothing, silently).
  LogicalResult checkUsed(func::FuncOp func, ArrayRef<std::string> names) {
    for (Pattern &p : llvm::concat<Pattern>(freeze, trainable)) {
      if (p.used)
        continue;
      auto diag = func.emitError("--")
                  << p.flag << " '" << p.source
                  << "' matches no parameter (they are named like ";
      for (auto [i, name] :
           llvm::enumerate(llvm::ArrayRef(names).take_front(3)))
        diag << (i ? ", '" : "'") << name << "'";
      return diag << "; shardc --print-trainable lists them all)";
    }
    return success();
  }
};

/// Emits the backward ops. One instance per function.
class Differentiator : public GradientEmitter {
public:
  Differentiator(func::FuncOp func)
      : GradientEmitter(func.getContext()), func(func) {}

  LogicalResult run(StringRef lossName, ParamSelection &selection);

  Value grad(Value result) const override { return grads.lookup(result); }
  bool isActive(Value v) const override { return activeValues.contains(v); }
  void accumulate(Value v, Value g) override;

private:
  LogicalResult backprop(Operation *op);

  func::FuncOp func;
  DenseMap<Value, Value> grads;
  llvm::DenseSet<Value> activeValues;
};

void Differentiator::accumulate(Value v, Value g) {
  if (!g || !isActive(v))
    return;
  assert(g.getType() == v.getType() && "gradient type mismatch");
  auto it = grads.find(v);
  if (it == grads.end()) {
    grads[v] = g;
    return;
  }
  it->second = create<AddOp>(v.getType(), it->second, g);
}

/// Runs `op`'s gradient rule when one of its results has a gradient.
LogicalResult Differentiator::backprop(Operation *op) {
  if (llvm::none_of(op->getResults(),
                    [&](Value r) { return static_cast<bool>(grad(r)); }))
    return success();
  auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
  if (!differentiable)
    return op->emitOpError("autodiff: no gradient rule for this op");
  loc = op->getLoc();
  return differentiable.backprop(*this);
}

LogicalResult Differentiator::run(StringRef lossName,
                                  ParamSelection &selection) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto names = func->getAttrOfType<ArrayAttr>(kOutputNamesAttrName);
  if (!names || names.size() != ret.getNumOperands())
    return func.emitError("autodiff: @main has no output names");

  // The loss: the named output, or the only scalar float output.
  int lossIndex = -1;
  if (!lossName.empty()) {
    for (auto [i, n] : llvm::enumerate(names))
      if (cast<StringAttr>(n).getValue() == lossName)
        lossIndex = i;
    if (lossIndex < 0) {
      std::string list;
      for (Attribute n : names)
        list += (list.empty() ? "" : ", ") + cast<StringAttr>(n).str();
      return func.emitError("autodiff: the model has no output named '")
             << lossName << "' (outputs: " << list << ")";
    }
  } else {
    int count = 0;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto t = tensorTy(v);
      if (t.getNumElements() == 1 && isa<FloatType>(t.getElementType())) {
        lossIndex = i;
        ++count;
      }
    }
    if (count != 1)
      return func.emitError("autodiff: the model has ")
             << count << " scalar float outputs; name the loss with --loss";
  }
  Value loss = ret.getOperand(lossIndex);
  auto lossType = tensorTy(loss);
  if (lossType.getNumElements() != 1 ||
      !isa<FloatType>(lossType.getElementType()))
    return func.emitError("autodiff: the loss '")
           << cast<StringAttr>(names[lossIndex]).getValue()
           << "' must be a scalar float, but has type " << lossType;
  func->setAttr(
      "shardc.loss",
      builder.getStringAttr(cast<StringAttr>(names[lossIndex]).getValue()));

  // Trainable parameters: float params that are not BatchNorm statistics.
  llvm::DenseSet<Value> statistics;
  func.walk([&](BatchNormalizationOp bn) {
    statistics.insert(bn.getMean());
    statistics.insert(bn.getVar());
  });
  // Every parameter gets its role; the trainable ones are differentiated
  // and become `trained` if a gradient reaches them.
  SmallVector<BlockArgument> params;
  SmallVector<std::string> paramNames;
  auto setRole = [&](BlockArgument arg, ParamRole role) {
    func.setArgAttr(arg.getArgNumber(), kRoleAttrName,
                    ParamRoleAttr::get(func.getContext(), role));
  };
  for (BlockArgument arg : func.getArguments()) {
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttrName);
    if (!name)
      continue;
    paramNames.push_back(name.str());
    bool frozen = selection.isFrozen(
        name.getValue(),
        func.getArgAttr(arg.getArgNumber(), kBufferAttrName) != nullptr);
    if (!isa<FloatType>(tensorTy(arg).getElementType())) {
      setRole(arg, ParamRole::NoGradient);
      continue;
    }
    if (statistics.contains(arg)) {
      setRole(arg, ParamRole::Statistic);
      continue;
    }
    if (frozen) {
      setRole(arg, ParamRole::Frozen);
      continue;
    }
    params.push_back(arg);
  }
  if (failed(selection.checkUsed(func, paramNames)))
    return failure();

  // MaxPool needs its argmax indices for the backward pass.
  SmallVector<MaxPoolOp> pools;
  func.walk([&](MaxPoolOp mp) {
    if (!mp.getIndices())
      pools.push_back(mp);
  });
  for (MaxPoolOp mp : pools) {
    builder.setInsertionPoint(mp);
    auto withIdx = builder.create<MaxPoolOp>(
        mp.getLoc(), mp.getOutput().getType(),
        RankedTensorType::get(tensorTy(mp.getOutput()).getShape(),
                              builder.getI64Type()),
        mp.getInput(), mp.getKernelShapeAttr(), mp.getStridesAttr(),
        mp.getDilationsAttr(), mp.getPadsAttr(), mp.getCeilModeAttr(),
        builder.getI64IntegerAttr(0));
    mp.getOutput().replaceAllUsesWith(withIdx.getOutput());
    mp.erase();
  }

  // Activity: values that depend on a trainable parameter.
  for (BlockArgument p : params)
    activeValues.insert(p);
  for (Operation &op : body.without_terminator()) {
    bool in = llvm::any_of(op.getOperands(),
                           [&](Value v) { return activeValues.contains(v); });
    if (!in)
      continue;
    for (Value r : op.getResults())
      if (isa<FloatType>(tensorTy(r).getElementType()))
        activeValues.insert(r);
  }

  // Reverse sweep.
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  builder.setInsertionPoint(ret);
  loc = loss.getLoc();
  if (isActive(loss)) {
    // The seed: 1, or the loss scale (shardc-loss-scale), which multiplies
    // every gradient.
    BlockArgument scale;
    for (BlockArgument arg : func.getArguments())
      if (func.getArgAttr(arg.getArgNumber(), kLossScaleAttrName))
        scale = arg;
    if (scale) {
      Value seed = scale;
      if (tensorTy(seed).getElementType() != lossType.getElementType())
        seed = builder.create<CastOp>(
            loss.getLoc(), RankedTensorType::get({}, lossType.getElementType()),
            seed);
      if (lossType.getRank() != 0)
        seed = builder.create<ReshapeOp>(loss.getLoc(), lossType, seed);
      grads[loss] = seed;
    } else {
      grads[loss] = builder.create<ConstantOp>(
          loss.getLoc(), lossType,
          cast<ElementsAttr>(DenseElementsAttr::get(
              lossType, builder.getFloatAttr(lossType.getElementType(), 1.0))));
    }
  }
  for (Operation *op : llvm::reverse(forward))
    if (failed(backprop(op)))
      return failure();
  // Mark the backward ops: sharding passes schedule parameter use windows
  // (forward, backward) from it.
  for (Operation *op = forward.empty() ? &body.front()
                                       : forward.back()->getNextNode();
       op && op != ret.getOperation(); op = op->getNextNode())
    op->setAttr(kBackwardAttrName, UnitAttr::get(func.getContext()));

  // Return the parameter gradients.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<std::string> gradOf;
  for (BlockArgument p : params) {
    Value g = grads.lookup(p);
    setRole(p, g ? ParamRole::Trained : ParamRole::NoGradient);
    if (!g)
      continue; // PyTorch leaves .grad None: the optimizer skips it.
    results.push_back(g);
    gradOf.push_back(
        func.getArgAttrOfType<StringAttr>(p.getArgNumber(), kParamAttrName)
            .str());
  }
  unsigned firstGrad = ret.getNumOperands();
  builder.setInsertionPoint(ret);
  builder.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  SmallVector<Type> types;
  for (Value v : results)
    types.push_back(v.getType());
  func.setFunctionType(
      builder.getFunctionType(func.getFunctionType().getInputs(), types));
  for (auto [i, name] : llvm::enumerate(gradOf))
    func.setResultAttr(firstGrad + i, kGradOfAttrName,
                       builder.getStringAttr(name));
  return success();
}

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;
  void runOnOperation() override {
    FailureOr<func::FuncOp> step = getStepFunction(getOperation(), "autodiff");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    ParamSelection selection;
    if (failed(selection.compile(func, "freeze", freeze, selection.freeze)) ||
        failed(selection.compile(func, "trainable", trainable,
                                 selection.trainable)))
      return signalPassFailure();
    Differentiator d(func);
    if (failed(d.run(loss, selection)))
      signalPassFailure();
  }
};

} // namespace
} // namespace shardc
