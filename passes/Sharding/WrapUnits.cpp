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
// (tied weights) belongs to exactly one unit. Frozen parameters (--freeze)
// are grouped the same way into units of their own, numbered after the
// trained ones; no unit mixes element types.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Sharding/Sharding.h"

#include "mlir/IR/Builders.h"

#include <map>

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_WRAPUNITS
#include "passes/Passes.h.inc"

namespace {

struct WrapUnitsPass : impl::WrapUnitsBase<WrapUnitsPass> {
  using WrapUnitsBase::WrapUnitsBase;
  SHARDC_CHECK_OPTIONS_WrapUnits;

  void runOnOperation() override {
    FailureOr<func::FuncOp> step =
        getStepFunction(getOperation(), "wrap-units");
    if (failed(step))
      return signalPassFailure();
    func::FuncOp func = *step;
    if (std::optional<std::string> err = checkOptions()) {
      func.emitError("wrap-units: ") << *err;
      return signalPassFailure();
    }
    // Trained parameters (an optimizer update consumes them) first, then
    // frozen ones in units of their own: a frozen unit is sharded and
    // gathered at ZeRO-3 like any other but has no update, so the two never
    // share a flat buffer.
    SmallVector<BlockArgument> trained, frozen;
    for (const ParamUpdate &u : collectParamUpdates(func))
      trained.push_back(u.param);
    for (BlockArgument arg : func.getArguments())
      if (auto role = func.getArgAttrOfType<ParamRoleAttr>(arg.getArgNumber(),
                                                           kRoleAttrName))
        if (role.getValue() == ParamRole::Frozen)
          frozen.push_back(arg);

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
    int64_t next = assign(func, trained, 0, firstUse);
    assign(func, frozen, next, firstUse);
  }

  /// Gives `params` (ordered by first use) units numbered from `first`;
  /// returns the next free unit number. A unit holds one element type.
  template <typename FirstUse>
  int64_t assign(func::FuncOp func, SmallVector<BlockArgument> &params,
                 int64_t first, FirstUse firstUse) {
    llvm::stable_sort(params, [&](BlockArgument a, BlockArgument b) {
      return firstUse(a) < firstUse(b);
    });
    OpBuilder b(func.getContext());
    int64_t unit = first - 1, unitElems = 0;
    Type unitElem;
    // Default policy: one unit per layer (and element type).
    std::map<std::pair<std::string, const void *>, int64_t> layerUnits;
    for (BlockArgument p : params) {
      auto type = cast<RankedTensorType>(p.getType());
      std::string module = layerOf(paramName(func, p));
      if (minNumParams == 0) {
        auto key =
            std::make_pair(module, type.getElementType().getAsOpaquePointer());
        auto [it, inserted] =
            layerUnits.try_emplace(key, first + (int64_t)layerUnits.size());
        func.setArgAttr(p.getArgNumber(), kUnitAttrName,
                        b.getI64IntegerAttr(it->second));
        continue;
      }
      if (unit < first || type.getElementType() != unitElem ||
          unitElems >= minNumParams) {
        ++unit;
        unitElems = 0;
        unitElem = type.getElementType();
      }
      unitElems += type.getNumElements();
      func.setArgAttr(p.getArgNumber(), kUnitAttrName,
                      b.getI64IntegerAttr(unit));
    }
    if (minNumParams == 0)
      return first + (int64_t)layerUnits.size();
    return unit + 1;
  }
};

} // namespace
} // namespace shardc
