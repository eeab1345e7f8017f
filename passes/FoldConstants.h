//===- FoldConstants.h - Folding ops by running their kernels ---*- C++ -*-===//
//
// Constant folding runs the runtime's CPU kernel of an op on its constant
// operands, so folding and execution agree bit for bit. The folding pass
// (shardc-fold-constants) and the importer (which folds as it builds) use it.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_FOLDCONSTANTS_H
#define SHARDC_PASSES_FOLDCONSTANTS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <optional>

namespace shardc {

/// The default size budget of folding, in bytes per tensor (shardc
/// --fold-limit): 16 MiB holds the float causal mask of a 2048-token context
/// (the largest constant that exported attention computes from shapes),
/// while a fold's memory (its operands and results, each within the budget,
/// copied once into the IR) stays a small multiple of it.
constexpr int64_t kDefaultFoldLimit = int64_t(16) << 20;

/// The bytes of a tensor of `type` in the runtime's layout; none when its
/// element count overflows int64 or its element type has no runtime type.
std::optional<int64_t> tensorBytes(mlir::RankedTensorType type);

/// If every operand of `op` is a constant and its operands and results each
/// hold at most `limitBytes` bytes, and its work (a product's or
/// convolution's flops, a pooling's window elements) is at most 16 per byte
/// of that budget, evaluates `op` (with its own folder, else with the CPU
/// kernels), replaces its uses by the folded values,
/// erases it, and returns those values in `replacements`. Fails, leaving
/// `op` alone to run at execution time, when it cannot fold.
mlir::LogicalResult
foldWithKernels(mlir::Operation *op,
                llvm::SmallVectorImpl<mlir::Value> &replacements,
                int64_t limitBytes = kDefaultFoldLimit);

} // namespace shardc

#endif // SHARDC_PASSES_FOLDCONSTANTS_H
