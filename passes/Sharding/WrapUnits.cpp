//===- WrapUnits.cpp - Group parameters into FSDP wrap units --------------===//
//
// A wrap unit is the set of parameters that is flattened into one buffer,
// sharded, gathered and reduced together (FSDP's FlatParameter). Trainable
// parameters (those an optimizer update consumes) are ordered by their first
// use; by default every layer (the parameter name up to its first numeric
// component, "blocks.3", else its module, "fc1") becomes a unit, as wrapping
// every transformer block in FSDP would; with min-num-params,
// consecutive parameters are merged until a unit holds at least that many
// elements (size_based_auto_wrap_policy). A parameter used in several places
// (tied weights) belongs to exactly one unit.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_WRAPUNITS
#include "passes/Passes.h.inc"

namespace {

/// The layer a parameter belongs to: its name up to the first numeric
/// component ("blocks.3.attn.qkv.weight" -> "blocks.3"), else its module
/// ("fc1.weight" -> "fc1").
std::string layerOf(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  std::string prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix += (i ? "." : "") + parts[i].str();
    unsigned n;
    if (!parts[i].getAsInteger(10, n))
      return prefix;
  }
  return name.rsplit('.').first.str();
}

struct WrapUnitsPass : impl::WrapUnitsBase<WrapUnitsPass> {
  using WrapUnitsBase::WrapUnitsBase;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "wrap-units");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    if (minNumParams < 0) {
      func.emitError("wrap-units: min-num-params must be >= 0");
      return signalPassFailure();
    }
    SmallVector<ParamUpdate> updates = collectParamUpdates(func);

    // Order by first use in the body.
    DenseMap<Operation *, unsigned> position;
    unsigned i = 0;
    func.walk([&](Operation *op) { position[op] = i++; });
    auto firstUse = [&](BlockArgument p) {
      unsigned best = ~0u;
      for (Operation *user : p.getUsers())
        best = std::min(best, position.lookup(user));
      return best;
    };
    llvm::stable_sort(updates, [&](const ParamUpdate &a, const ParamUpdate &b) {
      return firstUse(a.param) < firstUse(b.param);
    });

    OpBuilder b(func.getContext());
    int64_t unit = -1, unitElems = 0;
    std::string unitModule;
    llvm::StringMap<int64_t> layerUnits; // default policy: one unit per layer
    for (const ParamUpdate &u : updates) {
      if (minNumParams == 0) {
        std::string layer = layerOf(paramName(func, u.param));
        auto [it, inserted] = layerUnits.try_emplace(layer, layerUnits.size());
        func.setArgAttr(u.param.getArgNumber(), kUnitAttrName,
                        b.getI64IntegerAttr(it->second));
        continue;
      }
      std::string module = layerOf(paramName(func, u.param));
      int64_t n = cast<RankedTensorType>(u.param.getType()).getNumElements();
      bool startNew;
      if (minNumParams > 0)
        startNew = unit < 0 || unitElems >= minNumParams;
      else
        startNew = unit < 0 || module != unitModule;
      if (startNew) {
        ++unit;
        unitElems = 0;
        unitModule = module;
      }
      unitElems += n;
      func.setArgAttr(u.param.getArgNumber(), kUnitAttrName,
                      b.getI64IntegerAttr(unit));
    }
  }
};

} // namespace
} // namespace shardc
