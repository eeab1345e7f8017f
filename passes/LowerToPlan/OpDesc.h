//===- OpDesc.h - shardc ops as plan ops ------------------------*- C++ -*-===//
//
// The one place where a shardc op becomes the (type, attributes) pair that a
// plan op and a runtime kernel use. Plan emission uses it, and so does the
// constant folder (passes/FoldConstants.h), which runs the CPU kernels on
// constant operands: folding and execution share one implementation of every
// op.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_LOWERTOPLAN_OPDESC_H
#define SHARDC_PASSES_LOWERTOPLAN_OPDESC_H

#include "runtime/Attrs.h"
#include "runtime/Tensor.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace shardc {

/// A shardc op as the runtime sees it.
struct OpDesc {
  std::string type;
  rt::AttrMap attrs;
};

/// Describes `op` (a shardc op): type = the op name without the dialect
/// prefix, attributes converted by kind. Emits an error on `op` and fails for
/// an attribute kind a plan cannot carry.
mlir::FailureOr<OpDesc> describeOp(mlir::Operation *op);

/// The runtime element type of an MLIR element type, or Undefined.
rt::DType toRuntimeType(mlir::Type elementType);

/// The bytes of a constant in the runtime's layout (row-major, one byte per
/// bool); a splat is expanded.
std::vector<uint8_t> constantBytes(mlir::DenseElementsAttr attr);
/// A DenseElementsAttr of `type` from bytes in the runtime's layout.
mlir::DenseElementsAttr constantFromBytes(mlir::RankedTensorType type,
                                          llvm::ArrayRef<uint8_t> bytes);

} // namespace shardc

#endif // SHARDC_PASSES_LOWERTOPLAN_OPDESC_H
