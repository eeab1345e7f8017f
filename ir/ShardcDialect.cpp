//===- ShardcDialect.cpp - The shardc dialect -----------------------------===//
#include "ir/ShardcDialect.h"
#include "ir/gradients/Gradients.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;

#include "ir/ShardcOpsDialect.cpp.inc"

#include "ir/ShardcEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/ShardcAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/ShardcOpsTypes.cpp.inc"

namespace shardc {

void ShardcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/ShardcOps.cpp.inc"
      >();
  // The gradient rules (DifferentiableOpInterface), one file per op family.
  MLIRContext *ctx = getContext();
  registerConstantGradients(ctx);
  registerElementwiseGradients(ctx);
  registerLinearAlgebraGradients(ctx);
  registerNormalizationGradients(ctx);
  registerConvPoolGradients(ctx);
  registerDataMovementGradients(ctx);
  registerReductionGradients(ctx);
  registerLossGradients(ctx);
  registerTypes();
  registerAttributes();
}

void ShardcDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/ShardcOpsTypes.cpp.inc"
      >();
}

void ShardcDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/ShardcAttrs.cpp.inc"
      >();
}

LogicalResult PendingType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  RankedTensorType tensorType) {
  if (!tensorType.hasStaticShape())
    return emitError() << "a pending collective needs a static shape, got "
                       << tensorType;
  return success();
}

LogicalResult
LossScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        llvm::APFloat growth, llvm::APFloat backoff,
                        int64_t growthInterval) {
  double growthFactor = growth.convertToDouble();
  double backoffFactor = backoff.convertToDouble();
  if (!(std::isfinite(growthFactor) && growthFactor >= 1.0))
    return emitError() << "loss scaling's growth_factor must be finite and "
                          ">= 1, got "
                       << growthFactor;
  if (!(backoffFactor > 0.0 && backoffFactor <= 1.0))
    return emitError() << "loss scaling's backoff_factor must be in (0, 1], "
                          "got "
                       << backoffFactor;
  // The tracker counts in float32, exact up to 2^24.
  if (growthInterval < 1 || growthInterval > (int64_t(1) << 24))
    return emitError() << "loss scaling's growth_interval must be in [1, "
                          "16777216], got "
                       << growthInterval;
  return success();
}

Operation *ShardcDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}

int64_t onnxTypeCode(Type t) {
  if (t.isF32())
    return 1;
  if (t.isUnsignedInteger(8))
    return 2;
  if (t.isSignlessInteger(8))
    return 3;
  if (t.isSignlessInteger(32))
    return 6;
  if (t.isSignlessInteger(64))
    return 7;
  if (t.isSignlessInteger(1))
    return 9;
  if (t.isF16())
    return 10;
  if (t.isF64())
    return 11;
  if (t.isBF16())
    return 16;
  return -1;
}

Type elementTypeFromOnnxCode(MLIRContext *ctx, int64_t code) {
  Builder b(ctx);
  switch (code) {
  case 1:
    return b.getF32Type();
  case 2:
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case 3:
    return b.getIntegerType(8);
  case 6:
    return b.getIntegerType(32);
  case 7:
    return b.getIntegerType(64);
  case 9:
    return b.getI1Type();
  case 10:
    return b.getF16Type();
  case 11:
    return b.getF64Type();
  case 16:
    return b.getBF16Type();
  default:
    return nullptr;
  }
}

} // namespace shardc
