//===- Gradients.h - Gradient rules of the shardc ops -----------*- C++ -*-===//
//
// Each function attaches DifferentiableOpInterface to the ops of one family
// (the sections of ir/ShardcOps.td); ShardcDialect::initialize calls them all.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_IR_GRADIENTS_GRADIENTS_H
#define SHARDC_IR_GRADIENTS_GRADIENTS_H

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace shardc {

/// Constant and Shape: differentiable by design with no gradient.
void registerConstantGradients(mlir::MLIRContext *ctx);
/// Add, Sub, Mul, Div, Pow, Where, the unary math ops and Cast.
void registerElementwiseGradients(mlir::MLIRContext *ctx);
/// Gemm and MatMul.
void registerLinearAlgebraGradients(mlir::MLIRContext *ctx);
/// Softmax, LogSoftmax, LayerNormalization and BatchNormalization.
void registerNormalizationGradients(mlir::MLIRContext *ctx);
/// Conv and the pooling ops.
void registerConvPoolGradients(mlir::MLIRContext *ctx);
/// Reshape, Transpose, Gather, Concat, Split, Slice and Expand.
void registerDataMovementGradients(mlir::MLIRContext *ctx);
/// ReduceSum and ReduceMean.
void registerReductionGradients(mlir::MLIRContext *ctx);
/// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
void registerLossGradients(mlir::MLIRContext *ctx);

} // namespace shardc

#endif // SHARDC_IR_GRADIENTS_GRADIENTS_H
