//===- ShardcOps.td - Ops of the shardc dialect ------------*- tablegen -*-===//
#ifndef SHARDC_OPS_TD
#define SHARDC_OPS_TD

include "ir/ShardcAttrs.td"
include "ir/ShardcDialect.td"
include "ir/ShardcTypes.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Every value of the dialect is a statically shaped ranked tensor.
def Shardc_Tensor : StaticShapeTensorOf<[AnyType]>;
def Shardc_FloatTensor : StaticShapeTensorOf<[F16, F32, F64]>;
def Shardc_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Shardc_BoolTensor : StaticShapeTensorOf<[I1]>;

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

def Shardc_ConstantOp : Shardc_Op<"Constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "output"]>]> {
  let summary = "A compile-time constant tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Shardc_Tensor:$output);
  let hasFolder = 1;
  let hasVerifier = 1;
  let assemblyFormat = "attr-dict $value";
}

def Shardc_ShapeOp : Shardc_Op<"Shape", [Pure]> {
  let summary = "The shape of a tensor (always folds: shapes are static)";
  let arguments = (ins Shardc_Tensor:$input,
                   DefaultValuedAttr<I64Attr, "0">:$start,
                   OptionalAttr<I64Attr>:$end);
  let results = (outs StaticShapeTensorOf<[I64]>:$output);
  let hasFolder = 1;
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Shardc_BinaryOp<string mnemonic, list<Trait> traits = []>
    : Shardc_Op<mnemonic, !listconcat(traits, [Pure])> {
  let arguments = (ins Shardc_Tensor:$lhs, Shardc_Tensor:$rhs);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_AddOp : Shardc_BinaryOp<"Add", [Commutative]> {
  let summary = "Elementwise addition with numpy broadcasting";
}
def Shardc_SubOp : Shardc_BinaryOp<"Sub"> {
  let summary = "Elementwise subtraction with numpy broadcasting";
}
def Shardc_MulOp : Shardc_BinaryOp<"Mul", [Commutative]> {
  let summary = "Elementwise multiplication with numpy broadcasting";
}
def Shardc_DivOp : Shardc_BinaryOp<"Div"> {
  let summary = "Elementwise division with numpy broadcasting";
}
def Shardc_PowOp : Shardc_BinaryOp<"Pow"> {
  let summary = "Elementwise power; the result has the base's element type";
}

def Shardc_WhereOp : Shardc_Op<"Where", [Pure]> {
  let summary = "Elementwise select with numpy broadcasting";
  let arguments = (ins Shardc_BoolTensor:$condition, Shardc_Tensor:$x,
                   Shardc_Tensor:$y);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $condition `,` $x `,` $y attr-dict `:` functional-type(operands, results)
  }];
}

class Shardc_UnaryOp<string mnemonic, Type elementTypes = Shardc_Tensor>
    : Shardc_Op<mnemonic, [Pure, AllTypesMatch<["input", "output"]>]> {
  let arguments = (ins elementTypes:$input);
  let results = (outs elementTypes:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Shardc_SqrtOp : Shardc_UnaryOp<"Sqrt", Shardc_FloatTensor> {
  let summary = "Elementwise square root";
}
def Shardc_ExpOp : Shardc_UnaryOp<"Exp", Shardc_FloatTensor> {
  let summary = "Elementwise exponential";
}
def Shardc_LogOp : Shardc_UnaryOp<"Log", Shardc_FloatTensor> {
  let summary = "Elementwise natural logarithm";
}
def Shardc_ErfOp : Shardc_UnaryOp<"Erf", Shardc_FloatTensor> {
  let summary = "Elementwise error function";
}
def Shardc_TanhOp : Shardc_UnaryOp<"Tanh", Shardc_FloatTensor> {
  let summary = "Elementwise hyperbolic tangent";
}
def Shardc_SigmoidOp : Shardc_UnaryOp<"Sigmoid", Shardc_FloatTensor> {
  let summary = "Elementwise logistic function";
}
def Shardc_NegOp : Shardc_UnaryOp<"Neg"> {
  let summary = "Elementwise negation";
}
def Shardc_ReluOp : Shardc_UnaryOp<"Relu"> {
  let summary = "Elementwise max(x, 0)";
}
def Shardc_IdentityOp : Shardc_UnaryOp<"Identity"> {
  let summary = "A copy of the input";
}

def Shardc_CastOp : Shardc_Op<"Cast", [Pure]> {
  let summary = "Element type conversion";
  let description = [{
    `to` is the ONNX TensorProto.DataType code of the result's element type.
  }];
  let arguments = (ins Shardc_Tensor:$input, I64Attr:$to);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

//===----------------------------------------------------------------------===//
// Linear algebra, normalization, activations over an axis
//===----------------------------------------------------------------------===//

def Shardc_GemmOp : Shardc_Op<"Gemm", [Pure]> {
  let summary = "alpha * op(A) * op(B) + beta * C";
  let arguments = (ins Shardc_FloatTensor:$a, Shardc_FloatTensor:$b,
                   Optional<Shardc_FloatTensor>:$c,
                   DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0f">:$beta,
                   DefaultValuedAttr<I64Attr, "0">:$transA,
                   DefaultValuedAttr<I64Attr, "0">:$transB);
  let results = (outs Shardc_FloatTensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $a `,` $b (`,` $c^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_MatMulOp : Shardc_Op<"MatMul", [Pure]> {
  let summary = "numpy.matmul: batched, broadcasting matrix product";
  let description = [{
    Canonicalization turns `MatMul(x, Transpose(w))` with a 2-d `w` (what
    torch.onnx.export emits for nn.Linear without folding) into a `Gemm` with
    `transB` over `x` reshaped to 2-d: no transposed copy of the weight, in
    forward or backward.
  }];
  let arguments = (ins Shardc_Tensor:$a, Shardc_Tensor:$b);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let assemblyFormat = [{
    $a `,` $b attr-dict `:` functional-type(operands, results)
  }];
}

class Shardc_AxisSoftmaxOp<string mnemonic>
    : Shardc_Op<mnemonic, [Pure, AllTypesMatch<["input", "output"]>]> {
  let arguments = (ins Shardc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Shardc_FloatTensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Shardc_SoftmaxOp : Shardc_AxisSoftmaxOp<"Softmax"> {
  let summary = "Softmax along one axis";
}
def Shardc_LogSoftmaxOp : Shardc_AxisSoftmaxOp<"LogSoftmax"> {
  let summary = "Log of softmax along one axis";
}

def Shardc_LayerNormalizationOp : Shardc_Op<"LayerNormalization", [Pure]> {
  let summary = "Layer normalization over the trailing axes from `axis`";
  let arguments = (ins Shardc_FloatTensor:$input, Shardc_FloatTensor:$scale,
                   Optional<Shardc_FloatTensor>:$bias, I64Attr:$axis,
                   F32Attr:$epsilon);
  let results = (outs Shardc_FloatTensor:$output, Shardc_FloatTensor:$mean,
                 Shardc_FloatTensor:$inv_std_dev);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_BatchNormalizationOp : Shardc_Op<"BatchNormalization", [Pure]> {
  let summary = "Batch normalization (inference or training mode)";
  let description = [{
    In training mode (`training_mode` = 1) the batch statistics normalize the
    input and `running_mean`/`running_var` are the updated statistics; in
    inference mode they equal the inputs `mean`/`var`. With `unbiased_var`
    the running variance is updated with the unbiased batch variance, as
    PyTorch does (ONNX uses the population variance).
  }];
  let arguments = (ins Shardc_FloatTensor:$input, Shardc_FloatTensor:$scale,
                   Shardc_FloatTensor:$bias, Shardc_FloatTensor:$mean,
                   Shardc_FloatTensor:$var, F32Attr:$epsilon,
                   F32Attr:$momentum, I64Attr:$training_mode,
                   DefaultValuedAttr<I64Attr, "0">:$unbiased_var);
  let results = (outs Shardc_FloatTensor:$output,
                 Shardc_FloatTensor:$running_mean,
                 Shardc_FloatTensor:$running_var);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `,` $mean `,` $var attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

def Shardc_ConvOp : Shardc_Op<"Conv", [Pure]> {
  let summary = "N-d convolution (cross-correlation) with groups";
  let arguments = (ins Shardc_FloatTensor:$input, Shardc_FloatTensor:$weight,
                   Optional<Shardc_FloatTensor>:$bias,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$pads,
                   I64Attr:$group);
  let results = (outs Shardc_FloatTensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_MaxPoolOp : Shardc_Op<"MaxPool", [Pure]> {
  let summary = "N-d max pooling, optionally with the argmax indices";
  let arguments = (ins Shardc_Tensor:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$pads,
                   I64Attr:$ceil_mode, I64Attr:$storage_order);
  let results = (outs Shardc_Tensor:$output,
                 Optional<StaticShapeTensorOf<[I64]>>:$indices);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type(results)";
}

def Shardc_AveragePoolOp : Shardc_Op<"AveragePool", [Pure]> {
  let summary = "N-d average pooling";
  let arguments = (ins Shardc_FloatTensor:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, I64Attr:$ceil_mode,
                   I64Attr:$count_include_pad);
  let results = (outs Shardc_FloatTensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_GlobalAveragePoolOp : Shardc_Op<"GlobalAveragePool", [Pure]> {
  let summary = "Mean over all spatial dimensions";
  let arguments = (ins Shardc_FloatTensor:$input);
  let results = (outs Shardc_FloatTensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Shardc_ReshapeOp : Shardc_Op<"Reshape", [Pure]> {
  let summary = "Same elements, new static shape";
  let description = [{
    ONNX Reshape, Flatten, Squeeze and Unsqueeze all import as this op: with
    static shapes the result type says everything.
  }];
  let arguments = (ins Shardc_Tensor:$input);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_TransposeOp : Shardc_Op<"Transpose", [Pure]> {
  let summary = "Permutation of the dimensions";
  let arguments = (ins Shardc_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_GatherOp : Shardc_Op<"Gather", [Pure]> {
  let summary = "Gather slices along an axis by index";
  let arguments = (ins Shardc_Tensor:$data, Shardc_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_ConcatOp : Shardc_Op<"Concat", [Pure]> {
  let summary = "Concatenation along an axis";
  let arguments = (ins Variadic<Shardc_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_SplitOp : Shardc_Op<"Split", [Pure]> {
  let summary = "Split into consecutive pieces along an axis";
  let arguments = (ins Shardc_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<Shardc_Tensor>:$outputs);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($outputs)";
}

def Shardc_SliceOp : Shardc_Op<"Slice", [Pure]> {
  let summary = "Strided slice with one start and step per dimension";
  let description = [{
    `output[i0, i1, ...] = input[starts[0] + i0 * steps[0], ...]`. Starts are
    already clamped into range; steps are non-zero and may be negative.
  }];
  let arguments = (ins Shardc_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$steps);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_ExpandOp : Shardc_Op<"Expand", [Pure]> {
  let summary = "Broadcast to the result's shape";
  let arguments = (ins Shardc_Tensor:$input);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

class Shardc_ReduceOp<string mnemonic> : Shardc_Op<mnemonic, [Pure]> {
  let arguments = (ins Shardc_Tensor:$input, DenseI64ArrayAttr:$axes,
                   I64Attr:$keepdims);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}
def Shardc_ReduceMeanOp : Shardc_ReduceOp<"ReduceMean"> {
  let summary = "Mean over the given axes";
}
def Shardc_ReduceSumOp : Shardc_ReduceOp<"ReduceSum"> {
  let summary = "Sum over the given axes";
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Shardc_SoftmaxCrossEntropyLossOp
    : Shardc_Op<"SoftmaxCrossEntropyLoss", [Pure]> {
  let summary = "Softmax cross-entropy over the class axis 1";
  let arguments = (ins Shardc_FloatTensor:$scores, Shardc_IndexTensor:$labels,
                   Optional<Shardc_FloatTensor>:$weights, StrAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Shardc_FloatTensor:$loss,
                 Optional<Shardc_FloatTensor>:$log_prob);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $scores `,` $labels (`,` $weights^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_NegativeLogLikelihoodLossOp
    : Shardc_Op<"NegativeLogLikelihoodLoss", [Pure]> {
  let summary = "Negative log-likelihood over the class axis 1";
  let arguments = (ins Shardc_FloatTensor:$input, Shardc_IndexTensor:$target,
                   Optional<Shardc_FloatTensor>:$weight, StrAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Shardc_FloatTensor:$loss);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $target (`,` $weight^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Gradients (emitted by the autodiff pass)
//===----------------------------------------------------------------------===//

def Shardc_ReluGradOp : Shardc_Op<"ReluGrad",
    [Pure, AllTypesMatch<["grad", "input", "input_grad"]>]> {
  let summary = "Gradient of Relu: grad where input > 0, else 0";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$input);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($grad)";
}
def Shardc_SigmoidGradOp : Shardc_Op<"SigmoidGrad",
    [Pure, AllTypesMatch<["grad", "output", "input_grad"]>]> {
  let summary = "Gradient of Sigmoid from its output: grad * y * (1 - y)";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$output);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}
def Shardc_TanhGradOp : Shardc_Op<"TanhGrad",
    [Pure, AllTypesMatch<["grad", "output", "input_grad"]>]> {
  let summary = "Gradient of Tanh from its output: grad * (1 - y^2)";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$output);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}
def Shardc_SoftmaxGradOp : Shardc_Op<"SoftmaxGrad",
    [Pure, AllTypesMatch<["grad", "output", "input_grad"]>]> {
  let summary = "Gradient of Softmax from its output";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$output,
                   I64Attr:$axis);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}
def Shardc_LogSoftmaxGradOp : Shardc_Op<"LogSoftmaxGrad",
    [Pure, AllTypesMatch<["grad", "output", "input_grad"]>]> {
  let summary = "Gradient of LogSoftmax from its output";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$output,
                   I64Attr:$axis);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}

def Shardc_ConvGradInputOp : Shardc_Op<"ConvGradInput", [Pure]> {
  let summary = "Gradient of Conv with respect to its input";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$weight,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$pads,
                   I64Attr:$group);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $weight attr-dict `:` functional-type(operands, results)
  }];
}
def Shardc_ConvGradWeightOp : Shardc_Op<"ConvGradWeight", [Pure]> {
  let summary = "Gradient of Conv with respect to its weight";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$pads,
                   I64Attr:$group);
  let results = (outs Shardc_FloatTensor:$weight_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $input attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_MaxPoolGradOp : Shardc_Op<"MaxPoolGrad", [Pure]> {
  let summary = "Scatter-add of the output gradient at the argmax indices";
  let arguments = (ins Shardc_FloatTensor:$grad,
                   StaticShapeTensorOf<[I64]>:$indices);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_AveragePoolGradOp : Shardc_Op<"AveragePoolGrad", [Pure]> {
  let summary = "Gradient of AveragePool";
  let arguments = (ins Shardc_FloatTensor:$grad,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, I64Attr:$ceil_mode,
                   I64Attr:$count_include_pad);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let hasVerifier = 1;
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($input_grad)";
}

def Shardc_LayerNormGradOp : Shardc_Op<"LayerNormGrad", [Pure]> {
  let summary = "Gradient of LayerNormalization (input, scale, bias)";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$input,
                   Shardc_FloatTensor:$scale, Shardc_FloatTensor:$mean,
                   Shardc_FloatTensor:$inv_std_dev, I64Attr:$axis);
  let results = (outs Shardc_FloatTensor:$input_grad,
                 Shardc_FloatTensor:$scale_grad, Shardc_FloatTensor:$bias_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $input `,` $scale `,` $mean `,` $inv_std_dev attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_BatchNormGradOp : Shardc_Op<"BatchNormGrad", [Pure]> {
  let summary = "Gradient of BatchNormalization (input, scale, bias)";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$input,
                   Shardc_FloatTensor:$scale, Shardc_FloatTensor:$mean,
                   Shardc_FloatTensor:$var, F32Attr:$epsilon,
                   I64Attr:$training_mode);
  let results = (outs Shardc_FloatTensor:$input_grad,
                 Shardc_FloatTensor:$scale_grad, Shardc_FloatTensor:$bias_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $input `,` $scale `,` $mean `,` $var attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_SoftmaxCrossEntropyLossGradOp
    : Shardc_Op<"SoftmaxCrossEntropyLossGrad", [Pure]> {
  let summary = "Gradient of SoftmaxCrossEntropyLoss with respect to scores";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$scores,
                   Shardc_IndexTensor:$labels,
                   Optional<Shardc_FloatTensor>:$weights, StrAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Shardc_FloatTensor:$scores_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $scores `,` $labels (`,` $weights^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_NegativeLogLikelihoodLossGradOp
    : Shardc_Op<"NegativeLogLikelihoodLossGrad", [Pure]> {
  let summary = "Gradient of NegativeLogLikelihoodLoss with respect to input";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$input,
                   Shardc_IndexTensor:$target,
                   Optional<Shardc_FloatTensor>:$weight, StrAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $input `,` $target (`,` $weight^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_GatherGradOp : Shardc_Op<"GatherGrad", [Pure]> {
  let summary = "Scatter-add of Gather's output gradient into its data";
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Shardc_FloatTensor:$data_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_SliceGradOp : Shardc_Op<"SliceGrad", [Pure]> {
  let summary = "Zero-filled input gradient with the slice's gradient placed";
  let arguments = (ins Shardc_Tensor:$grad, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$steps);
  let results = (outs Shardc_Tensor:$input_grad);
  let hasVerifier = 1;
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($input_grad)";
}

//===----------------------------------------------------------------------===//
// Optimizer (emitted by the optimizer pass; run in place)
//===----------------------------------------------------------------------===//

def Shardc_IncrementOp : Shardc_Op<"Increment",
    [Pure, AllTypesMatch<["input", "output"]>]> {
  let summary = "x + 1 (the optimizer's step counter), updated in place";
  let arguments = (ins StaticShapeTensorOf<[F32]>:$input);
  let results = (outs StaticShapeTensorOf<[F32]>:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Shardc_SGDUpdateOp : Shardc_Op<"SGDUpdate", [Pure,
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param", "new_momentum_buffer"]>]> {
  let summary = "PyTorch's SGD step (momentum, dampening, Nesterov, weight decay)";
  let arguments = (ins Shardc_FloatTensor:$param, Shardc_FloatTensor:$grad,
                   Shardc_FloatTensor:$momentum_buffer,
                   StaticShapeTensorOf<[F32]>:$step, F32Attr:$lr,
                   F32Attr:$momentum, F32Attr:$dampening,
                   F32Attr:$weight_decay, I64Attr:$nesterov);
  let results = (outs Shardc_FloatTensor:$new_param,
                 Shardc_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $step attr-dict `:` type($param) `,` type($step)
  }];
}

def Shardc_AdamUpdateOp : Shardc_Op<"AdamUpdate", [Pure,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "new_param", "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "PyTorch's Adam or AdamW step with bias correction";
  let arguments = (ins Shardc_FloatTensor:$param, Shardc_FloatTensor:$grad,
                   Shardc_FloatTensor:$exp_avg, Shardc_FloatTensor:$exp_avg_sq,
                   StaticShapeTensorOf<[F32]>:$step, F32Attr:$lr,
                   F32Attr:$beta1, F32Attr:$beta2, F32Attr:$eps,
                   F32Attr:$weight_decay, I64Attr:$decoupled);
  let results = (outs Shardc_FloatTensor:$new_param,
                 Shardc_FloatTensor:$new_exp_avg,
                 Shardc_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $step attr-dict `:` type($param) `,` type($step)
  }];
}

//===----------------------------------------------------------------------===//
// Collectives over flat buffers (lowered from the mesh dialect)
//===----------------------------------------------------------------------===//

// Starting and finishing a collective communicates: both ops read and write
// the network, so nothing generic removes, merges or reorders them (see
// Shardc_CommResource). A start yields a handle that only the wait consumes.
defvar Shardc_Communicates = MemoryEffects<[MemRead<Shardc_CommResource>,
                                            MemWrite<Shardc_CommResource>]>;

class Shardc_CollectiveStartOp<string mnemonic, list<Trait> traits = []>
    : Shardc_Op<mnemonic, !listconcat(traits, [Shardc_Communicates])> {
  let arguments = (ins StaticShapeTensorOf<[AnyType]>:$input,
                   I64Attr:$world_size);
  let results = (outs Shardc_PendingType:$pending);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The tensor the collective produces once waited for.
    ::mlir::RankedTensorType getResultTensorType() {
      return ::llvm::cast<PendingType>(getPending().getType()).getTensorType();
    }
  }];
}

def Shardc_AllGatherStartOp : Shardc_CollectiveStartOp<"AllGatherStart"> {
  let summary = "Start gathering every rank's 1-d shard into a full buffer";
  let description = [{
    Every one of the `world_size` ranks contributes its 1-d `input`; the
    gathered buffer holds them in rank order and is readable after the
    `shardc.CollectiveWait` that consumes the handle.

    ```mlir
    %h = shardc.AllGatherStart %shard {world_size = 2 : i64}
        : tensor<3xf32> -> !shardc.pending<tensor<6xf32>>
    ```
  }];
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` qualified(type($pending))
  }];
}

def Shardc_ReduceScatterStartOp
    : Shardc_CollectiveStartOp<"ReduceScatterStart"> {
  let summary = "Start a sum over ranks of a 1-d buffer, keeping this rank's chunk";
  let description = [{
    The elementwise sum over the `world_size` ranks of `input`, of which
    rank r keeps chunk r (1/`world_size` of the elements).

    ```mlir
    %h = shardc.ReduceScatterStart %grads {world_size = 2 : i64}
        : tensor<6xf32> -> !shardc.pending<tensor<3xf32>>
    ```
  }];
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` qualified(type($pending))
  }];
}

def Shardc_AllReduceStartOp : Shardc_CollectiveStartOp<"AllReduceStart", [
    TypesMatchWith<"the pending result is the input's type", "input",
                   "pending", "PendingType::get(::llvm::cast<::mlir::RankedTensorType>($_self))">]> {
  let summary = "Start a sum over ranks of a buffer";
  let description = [{
    The elementwise sum over the `world_size` ranks of `input` (a gradient
    bucket); the handle's tensor has the input's type.

    ```mlir
    %h = shardc.AllReduceStart %bucket {world_size = 2 : i64} : tensor<8xf32>
    ```
  }];
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Shardc_CollectiveWaitOp : Shardc_Op<"CollectiveWait", [
    Shardc_Communicates,
    TypesMatchWith<"the handle is pending the result's type", "result",
                   "pending", "PendingType::get(::llvm::cast<::mlir::RankedTensorType>($_self))">]> {
  let summary = "Wait until a started collective has written its buffer";
  let description = [{
    Consumes the handle of a collective start and yields the tensor the
    collective produced. Scheduling (`shardc-schedule-collectives`) places
    it just before the first use, so that computation runs in between.

    ```mlir
    %full = shardc.CollectiveWait %h : tensor<6xf32>
    ```
  }];
  let arguments = (ins Shardc_PendingType:$pending);
  let results = (outs StaticShapeTensorOf<[AnyType]>:$result);
  let assemblyFormat = "$pending attr-dict `:` type($result)";
}

def Shardc_ShardSliceOp : Shardc_Op<"ShardSlice", [Pure]> {
  let summary = "This rank's chunk of a 1-d buffer (no communication)";
  let arguments = (ins StaticShapeTensorOf<[AnyType]>:$input, I64Attr:$world_size);
  let results = (outs StaticShapeTensorOf<[AnyType]>:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

#endif // SHARDC_OPS_TD
