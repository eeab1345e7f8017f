//===- Sharding.h - Helpers shared by the ZeRO/FSDP passes ------*- C++ -*-===//
#ifndef SHARDC_PASSES_SHARDING_SHARDING_H
#define SHARDC_PASSES_SHARDING_SHARDING_H

#include "ir/ShardcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace shardc {

/// Argument attribute set by shardc-wrap-units: the parameter's unit index.
constexpr llvm::StringLiteral kUnitAttrName = "shardc.unit";
/// Argument attributes of a ZeRO-3 flat parameter shard.
constexpr llvm::StringLiteral kParamShardAttrName = "shardc.param_shard";
constexpr llvm::StringLiteral kFlatParamsAttrName = "shardc.flat_params";
constexpr llvm::StringLiteral kFlatTypesAttrName = "shardc.flat_types";
/// Function attributes recording the sharding configuration.
constexpr llvm::StringLiteral kWorldSizeAttrName = "shardc.world_size";
constexpr llvm::StringLiteral kZeroStageAttrName = "shardc.zero_stage";
/// The mesh every collective runs on.
constexpr llvm::StringLiteral kMeshName = "world";

/// One optimizer update of a parameter (SGDUpdate or AdamUpdate).
struct ParamUpdate {
  mlir::Operation *op = nullptr;
  mlir::BlockArgument param;
  mlir::Value grad;
  /// Optimizer state arguments, in operand order.
  llvm::SmallVector<mlir::BlockArgument> states;
  mlir::Value step;
};

/// The parameter updates of @main, in body order.
llvm::SmallVector<ParamUpdate> collectParamUpdates(mlir::func::FuncOp func);

/// The `shardc.param` name of an argument ("" if none).
llvm::StringRef paramName(mlir::func::FuncOp func, mlir::BlockArgument arg);

/// The results of @main split into graph outputs and in-place updates.
struct StepResults {
  llvm::SmallVector<mlir::Value> outputs;
  llvm::SmallVector<std::pair<mlir::Value, mlir::BlockArgument>> updates;
};
StepResults readStepResults(mlir::func::FuncOp func);
/// Replaces @main's return with `results`, recomputing the function type
/// and the `shardc.updates` result attributes from the arguments' current
/// positions (arguments may have been added or erased since).
void writeStepResults(mlir::func::FuncOp func, const StepResults &results);

} // namespace shardc

#endif // SHARDC_PASSES_SHARDING_SHARDING_H
