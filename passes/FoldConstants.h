//===- FoldConstants.h - Folding ops by running their kernels ---*- C++ -*-===//
//
// Constant folding runs the runtime's CPU kernel of an op on its constant
// operands, so folding and execution agree bit for bit. The folding pass
// (shardc-fold-constants) and the importer (which folds as it builds) use it.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_FOLDCONSTANTS_H
#define SHARDC_PASSES_FOLDCONSTANTS_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

namespace shardc {

/// If every operand of `op` is a constant and the results are small enough,
/// evaluates `op` (with its own folder, else with the CPU kernels), replaces
/// its uses by the folded values, erases it, and returns those values in
/// `replacements`. Fails, leaving `op` alone, when it cannot fold.
mlir::LogicalResult
foldWithKernels(mlir::Operation *op,
                llvm::SmallVectorImpl<mlir::Value> &replacements);

} // namespace shardc

#endif // SHARDC_PASSES_FOLDCONSTANTS_H
