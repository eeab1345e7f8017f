//===- ShardcDialect.h - The shardc dialect ---------------------*- C++ -*-===//
#ifndef SHARDC_IR_SHARDCDIALECT_H
#define SHARDC_IR_SHARDCDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace shardc {
/// The network between ranks, as a side-effect resource: collective start
/// and wait ops read and write it (see ShardcDialect.td).
struct CommResource : public mlir::SideEffects::Resource::Base<CommResource> {
  llvm::StringRef getName() final { return "<Communication>"; }
};
} // namespace shardc

#include "ir/ShardcOpsDialect.h.inc"

#include "ir/ShardcEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/ShardcAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/ShardcOpsTypes.h.inc"

#include "ir/ShardcInterfaces.h"

#define GET_OP_CLASSES
#include "ir/ShardcOps.h.inc"

namespace shardc {

/// The numpy broadcast of `shapes`, or nullopt if they do not broadcast.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes);

/// ONNX TensorProto.DataType code of an MLIR element type, or -1.
int64_t onnxTypeCode(mlir::Type elementType);
/// The MLIR element type of an ONNX TensorProto.DataType code, or null.
mlir::Type elementTypeFromOnnxCode(mlir::MLIRContext *ctx, int64_t code);

/// Argument attribute names on the entry function: a graph input carries
/// `shardc.input = "<name>"`, a parameter `shardc.param = "<name>"`.
constexpr llvm::StringLiteral kInputAttrName = "shardc.input";
constexpr llvm::StringLiteral kParamAttrName = "shardc.param";
/// Unit argument attribute beside `shardc.param`: the exporter recorded the
/// initializer as a module buffer, not a parameter (PyTorch's dynamo
/// exporter: a registered rotary table, a causal mask). Autodiff freezes it
/// unless a --trainable pattern names it.
constexpr llvm::StringLiteral kBufferAttrName = "shardc.buffer";
/// Function attribute: an array of the graph output names.
constexpr llvm::StringLiteral kOutputNamesAttrName = "shardc.output_names";
/// Result attribute set by autodiff: the parameter whose gradient it is.
constexpr llvm::StringLiteral kGradOfAttrName = "shardc.grad_of";
/// Argument attribute: optimizer state (zero-initialized, persistent), e.g.
/// `shardc.state = "fc.weight.exp_avg"`.
constexpr llvm::StringLiteral kStateAttrName = "shardc.state";
/// Argument attribute set by autodiff on every parameter: whether and why
/// it is trained, a ParamRoleAttr (`#shardc.param_role<frozen>`).
constexpr llvm::StringLiteral kRoleAttrName = "shardc.role";
/// Discardable op attribute: the op belongs to the backward pass.
constexpr llvm::StringLiteral kBackwardAttrName = "shardc.backward";
/// Discardable op attribute set by shardc-recompute on the backward copies
/// of forward ops that recompute activations.
constexpr llvm::StringLiteral kRecomputeAttrName = "shardc.recompute";
/// Discardable op attribute: memory category of the op's results, a
/// MemoryCategoryAttr (`#shardc.category<grads>`).
constexpr llvm::StringLiteral kCategoryAttrName = "shardc.category";
/// Discardable op attribute on an op with several results of which only
/// some are parameter gradients (BatchNormGrad: the input's gradient is an
/// activation gradient, the scale's and bias's are parameter gradients): the
/// result numbers that are, a DenseI64ArrayAttr. The other results are
/// activations.
constexpr llvm::StringLiteral kGradResultsAttrName = "shardc.grad_results";
/// Result attribute: this result is the new value of argument N (an
/// in-place update of a parameter or state).
constexpr llvm::StringLiteral kUpdatesAttrName = "shardc.updates";
/// Function attribute set by shardc-accumulate-gradients: the number of
/// micro-batches K each step accumulates (its graph inputs hold K of them).
constexpr llvm::StringLiteral kGradAccumAttrName = "shardc.grad_accum";
/// Discardable op attribute set by shardc-accumulate-gradients on the Adds
/// of a gradient's running sum over the micro-batches and on the Mul that
/// takes its mean: shardc-reduce-scatter-gradients reduces each
/// micro-batch's terms as they finish (reduce-scatter is linear).
constexpr llvm::StringLiteral kMicroBatchSumAttrName = "shardc.micro_batch_sum";
/// Discardable op attribute set by shardc-accumulate-gradients on micro-batch
/// m's copy of each forward and backward op (m >= 1; absent: micro-batch 0):
/// ZeRO-3 gathers parameters per micro-batch's use window.
constexpr llvm::StringLiteral kMicroBatchAttrName = "shardc.micro_batch";
/// Function attribute set by shardc-clip-gradients: the graph output that
/// holds the step's total gradient norm (before clipping).
constexpr llvm::StringLiteral kGradNormAttrName = "shardc.grad_norm";
/// Function attributes set by shardc-mixed-precision (TypeAttrs): the element
/// type forward and backward compute in, and the one gradients are reduced
/// in across ranks (the ZeRO passes cast to it around their reductions).
constexpr llvm::StringLiteral kParamDTypeAttrName = "shardc.param_dtype";
constexpr llvm::StringLiteral kReduceDTypeAttrName = "shardc.reduce_dtype";
/// Argument attribute of a `shardc.state` argument: the value its buffer
/// starts with (an F64 FloatAttr; absent: zero).
constexpr llvm::StringLiteral kStateInitAttrName = "shardc.state_init";
/// Argument attributes set by shardc-loss-scale: on the loss scale (a
/// LossScalingAttr, how it changes; autodiff seeds the loss gradient with
/// it), and on its growth tracker (a UnitAttr).
constexpr llvm::StringLiteral kLossScaleAttrName = "shardc.loss_scale";
constexpr llvm::StringLiteral kLossScaleTrackerAttrName =
    "shardc.loss_scale_tracker";
/// Function attributes set by shardc-unscale-gradients: the graph outputs
/// that hold the loss scale the step used and whether it skipped its update.
constexpr llvm::StringLiteral kLossScaleOutputAttrName =
    "shardc.loss_scale_output";
constexpr llvm::StringLiteral kSkippedOutputAttrName = "shardc.skipped_output";

} // namespace shardc

#endif // SHARDC_IR_SHARDCDIALECT_H
