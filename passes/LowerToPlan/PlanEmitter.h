//===- PlanEmitter.h - Lowering the final IR to a plan ----------*- C++ -*-===//
#ifndef SHARDC_PASSES_LOWERTOPLAN_PLANEMITTER_H
#define SHARDC_PASSES_LOWERTOPLAN_PLANEMITTER_H

#include "plan/PlanIO.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <functional>
#include <vector>

namespace shardc {

/// Returns the bytes of the parameter `name` in the runtime's layout.
using ParamReader =
    std::function<llvm::Expected<std::vector<uint8_t>>(llvm::StringRef name)>;

/// Lowers `func.func @main` of `module` into `writer`'s plan: one buffer per
/// SSA value, one plan op per shardc op in program order, graph inputs and
/// outputs in order. Errors are emitted as diagnostics on the offending op.
/// With an empty `params` (a writer set shapes-only), parameters are
/// recorded by shape alone and never read.
mlir::LogicalResult emitPlan(mlir::ModuleOp module, const ParamReader &params,
                             plan::PlanWriter &writer);

} // namespace shardc

#endif // SHARDC_PASSES_LOWERTOPLAN_PLANEMITTER_H
