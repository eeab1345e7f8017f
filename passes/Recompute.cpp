//===- Recompute.cpp - Activation recomputation ---------------------------===//
//
// Activation checkpointing (FairScale's checkpoint_wrapper, FSDP's
// activation checkpointing) on the step autodiff produced. The forward ops
// are cut into segments, one per layer: an op belongs to the layer of the
// parameters it reads (the parameter name up to its first numeric component,
// "blocks.3", else its module, "fc1": the default wrap units), else to the
// latest segment among the ops that produce its operands (a parameter-free
// op computed from one value alone that crosses to a later segment anyway
// joins the segment that reads it: moveSingleRootChains). For each selected
// segment, the values it computes that backward ops read are no longer kept
// from the forward pass: the segment's ops that produce them are cloned
// right before the first backward op that reads one, and the backward ops
// read the clones. What stays alive from forward to backward is what the
// segment reads from outside (its inputs: the previous segment's outputs;
// parameters and constants) and its own outputs, which the next segment's
// backward needs in any case.
//
// Every op is pure and deterministic, Dropout included (its mask is a
// function of seed, step, site and element), so the clones compute the
// values the forward pass computed, bit for bit, and the step's results do
// not change. The clones carry `shardc.backward` (ZeRO-3 then gathers the
// segment's parameters for them, as for the rest of backward) and
// `shardc.recompute` (the plan marks them; the trace shows them apart).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Regex.h"

#include <climits>

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_RECOMPUTE
#include "passes/Passes.h.inc"

namespace {

/// Whether `op` reads a parameter.
bool readsParam(func::FuncOp func, Operation *op) {
  return llvm::any_of(op->getOperands(), [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && !paramName(func, arg).empty();
  });
}

/// Parameter-free ops computed from one value alone that already crosses
/// into a later segment join the segment that reads them, so that the one
/// value crosses rather than it and what is computed from it: a LayerNorm
/// that an exporter decomposed (ReduceMean, Sub, Pow, Sqrt, Div of the
/// residual stream, then a Mul by the next layer's weight) otherwise belongs
/// to the previous layer, and its output would be kept beside its input.
void moveSingleRootChains(func::FuncOp func, ArrayRef<Operation *> forward,
                          DenseMap<Operation *, int> &segmentOf) {
  // The one value each parameter-free op's result is a function of (with
  // constants), if there is one.
  DenseMap<Value, Value> root;
  auto rootOf = [&](Value v) {
    auto it = root.find(v);
    return it == root.end() ? v : it->second;
  };
  for (Operation *op : forward) {
    if (readsParam(func, op))
      continue;
    Value r;
    bool single = true;
    for (Value v : op->getOperands()) {
      if (Operation *def = v.getDefiningOp(); def && def->getNumOperands() == 0)
        continue; // a constant
      Value rv = rootOf(v);
      if (r && rv != r)
        single = false;
      r = rv;
    }
    if (r && single)
      for (Value res : op->getResults())
        root[res] = r;
  }
  for (Operation *op : llvm::reverse(forward)) {
    if (op->getNumResults() == 0 || readsParam(func, op))
      continue;
    Value r = root.lookup(op->getResult(0));
    Operation *rootDef = r ? r.getDefiningOp() : nullptr;
    if (!rootDef || !segmentOf.count(rootDef))
      continue;
    int from = segmentOf.lookup(rootDef);
    // The earliest segment that reads the op, if only later ones do.
    int to = INT_MAX;
    bool movable = true;
    for (Value res : op->getResults())
      for (Operation *user : res.getUsers()) {
        if (user->hasAttr(kBackwardAttrName))
          continue;
        auto it = segmentOf.find(user);
        if (it == segmentOf.end()) {
          movable = false; // returned
          continue;
        }
        to = std::min(to, it->second);
      }
    if (!movable || to == INT_MAX || to <= from)
      continue;
    // The root must cross to a later segment anyway, through an op that is
    // not computed from it alone.
    bool crosses = llvm::any_of(r.getUsers(), [&](Operation *user) {
      auto it = segmentOf.find(user);
      return !user->hasAttr(kBackwardAttrName) && it != segmentOf.end() &&
             it->second > from &&
             (user->getNumResults() == 0 ||
              root.lookup(user->getResult(0)) != r);
    });
    if (crosses)
      segmentOf[op] = to;
  }
}

struct RecomputePass : impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step = getStepFunction(getOperation(), "recompute");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    if (!recompute && recomputeUnits.empty())
      return;
    SmallVector<std::pair<std::string, llvm::Regex>> patterns;
    for (const std::string &source : recomputeUnits) {
      llvm::Regex regex(source);
      std::string error;
      if (!regex.isValid(error)) {
        func.emitError("--recompute-units '")
            << source << "' is not a valid regular expression: " << error;
        return signalPassFailure();
      }
      patterns.emplace_back(source, std::move(regex));
    }

    // Segments of the forward ops, in order of first appearance.
    Block &body = func.getBody().front();
    SmallVector<std::string> names;
    llvm::StringMap<int> index;
    DenseMap<Operation *, int> segmentOf;
    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator()) {
      if (op.hasAttr(kBackwardAttrName))
        continue;
      forward.push_back(&op);
      int segment = -1;
      for (Value v : op.getOperands()) {
        if (auto arg = dyn_cast<BlockArgument>(v)) {
          StringRef name = paramName(func, arg);
          if (name.empty())
            continue;
          auto [it, inserted] =
              index.try_emplace(layerOf(name), (int)names.size());
          if (inserted)
            names.push_back(it->first().str());
          segment = std::max(segment, it->second);
        } else if (Operation *def = v.getDefiningOp()) {
          if (auto it = segmentOf.find(def); it != segmentOf.end())
            segment = std::max(segment, it->second);
        }
      }
      segmentOf[&op] = segment;
    }
    moveSingleRootChains(func, forward, segmentOf);

    // Which segments are recomputed; a pattern that selects none is an
    // error (a typo would silently recompute nothing).
    std::vector<bool> selected(names.size(), patterns.empty());
    for (auto &[source, regex] : patterns) {
      bool used = false;
      for (size_t s = 0; s < names.size(); ++s)
        if (regex.match(names[s]))
          selected[s] = used = true;
      if (!used) {
        std::string list;
        for (const std::string &n : names)
          list += (list.empty() ? "" : ", ") + n;
        func.emitError("--recompute-units '")
            << source << "' matches no layer (layers: " << list << ")";
        return signalPassFailure();
      }
    }

    MLIRContext *ctx = func.getContext();
    for (size_t s = 0; s < names.size(); ++s) {
      if (!selected[s])
        continue;
      auto inSegment = [&](Operation *op) {
        return op && !op->hasAttr(kBackwardAttrName) &&
               op->getBlock() == &body && segmentOf.count(op) &&
               segmentOf.lookup(op) == static_cast<int>(s);
      };
      // The segment's values that backward reads. Its internal ones are
      // recomputed from where backward first reads one. Its outputs (read by
      // another segment's forward ops, or returned) live on until then
      // anyway, for the next segment's backward: backward ops from there on
      // read recomputed copies, earlier ones the originals, which then die
      // as they would without recomputation.
      SmallVector<Value> internal, outputs;
      Operation *firstReader = nullptr;
      for (Operation *op : forward) {
        if (!inSegment(op) || op->getNumOperands() == 0)
          continue; // constants are not activations
        for (Value r : op->getResults()) {
          auto readers =
              llvm::make_filter_range(r.getUsers(), [](Operation *u) {
                return u->hasAttr(kBackwardAttrName);
              });
          if (readers.empty())
            continue;
          bool output = llvm::any_of(r.getUsers(), [&](Operation *user) {
            return !user->hasAttr(kBackwardAttrName) && !inSegment(user);
          });
          (output ? outputs : internal).push_back(r);
          if (output)
            continue;
          for (Operation *user : readers)
            if (!firstReader || user->isBeforeInBlock(firstReader))
              firstReader = user;
        }
      }
      if (!firstReader)
        continue;
      auto fromFirstReader = [&](OpOperand &use) {
        Operation *user = use.getOwner();
        return user->hasAttr(kBackwardAttrName) &&
               !user->hasAttr(kRecomputeAttrName) &&
               (user == firstReader || firstReader->isBeforeInBlock(user));
      };
      llvm::SetVector<Value> saved(internal.begin(), internal.end());
      for (Value v : outputs)
        if (llvm::any_of(v.getUses(), fromFirstReader))
          saved.insert(v);
      // The segment's ops those values need, in forward order.
      llvm::DenseSet<Operation *> needed;
      SmallVector<Operation *> work;
      for (Value v : saved)
        work.push_back(v.getDefiningOp());
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (!needed.insert(op).second)
          continue;
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp();
              inSegment(def) && def->getNumOperands() > 0)
            work.push_back(def);
      }
      OpBuilder builder(firstReader);
      IRMapping clones;
      for (Operation *op : forward) {
        if (!needed.contains(op))
          continue;
        Operation *copy = builder.clone(*op, clones);
        copy->setAttr(kBackwardAttrName, UnitAttr::get(ctx));
        copy->setAttr(kRecomputeAttrName, UnitAttr::get(ctx));
      }
      for (Value v : saved)
        v.replaceUsesWithIf(clones.lookup(v), fromFirstReader);
    }
  }
};

} // namespace
} // namespace shardc
