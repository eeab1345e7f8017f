//===- ShardcOps.td - Ops of the shardc dialect ------------*- tablegen -*-===//
#ifndef SHARDC_OPS_TD
#define SHARDC_OPS_TD

include "ir/ShardcAttrs.td"
include "ir/ShardcDialect.td"
include "ir/ShardcInterfaces.td"
include "ir/ShardcTypes.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Every value of the dialect is a statically shaped ranked tensor.
def Shardc_Tensor : StaticShapeTensorOf<[AnyType]>;
def Shardc_FloatTensor : StaticShapeTensorOf<[F16, BF16, F32, F64]>;
def Shardc_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Shardc_BoolTensor : StaticShapeTensorOf<[I1]>;

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

def Shardc_ConstantOp : Shardc_Op<"Constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "output"]>]> {
  let summary = "A compile-time constant tensor";
  let description = [{
    A tensor known at compile time: `value` holds its elements, and its type
    must equal the result type (any element type). ONNX Constant (every
    supported `value_*` form) and ConstantOfShape (a splat) import as this op;
    `shardc-fold-constants` replaces ops whose operands are all constants by it.
    It folds to its value.

    ```mlir
    %shape = shardc.Constant dense<[2, 3]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Shardc_Tensor:$output);
  let hasFolder = 1;
  let hasVerifier = 1;
  let assemblyFormat = "attr-dict $value";
}

def Shardc_RangeOp : Shardc_Op<"Range", [Pure,
    AllElementTypesMatch<["start", "limit", "delta", "output"]>]> {
  let summary = "start, start + delta, ... up to (not including) limit";
  let description = [{
    The 1-d sequence `start + i * delta` for `i` in
    `[0, max(ceil((limit - start) / delta), 0))`, from three scalar operands
    of one element type (f32, f64, i32 or i64). The length is fixed by the
    result type (static shapes), and the kernel checks that the operands give
    it. Imports ONNX Range (`torch.arange`); its operands are usually
    constants, so it folds at import.

    ```mlir
    %r = shardc.Range %start, %limit, %delta
        : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<5xi64>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$start, Shardc_Tensor:$limit,
                   Shardc_Tensor:$delta);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $start `,` $limit `,` $delta attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_ShapeOp : Shardc_Op<"Shape", [Pure]> {
  let summary = "The shape of a tensor (always folds: shapes are static)";
  let description = [{
    The dimensions `start` (default 0) up to, not including, `end` (default: the
    input's rank) of the input's shape, as a 1-d i64 tensor of `end - start`
    elements; the verifier requires `0 <= start <= end <= rank`. Imports ONNX
    Shape, with opset-15's `start`/`end` clamped and made non-negative. Shapes
    are static, so it always folds to a constant.

    ```mlir
    %s = shardc.Shape %x {end = 3 : i64, start = 1 : i64} : tensor<2x3x4xf32> -> tensor<2xi64>
    ```
  }];
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

// The result type is the numpy broadcast of the operand shapes: builders infer
// it (InferTypeOpInterface) and the verifier checks it, both with
// broadcastShapes (ShardcOps.cpp). refineReturnTypes leaves the check to the
// verifier, so that a mismatch is one error that names both shapes.
defvar Shardc_InfersBroadcast =
    DeclareOpInterfaceMethods<InferTypeOpInterface, ["refineReturnTypes"]>;

class Shardc_BinaryOp<string mnemonic, list<Trait> traits = []>
    : Shardc_Op<mnemonic, !listconcat(traits, [Pure, Shardc_InfersBroadcast])> {
  let arguments = (ins Shardc_Tensor:$lhs, Shardc_Tensor:$rhs);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_AddOp : Shardc_BinaryOp<"Add", [Commutative, SameOperandsAndResultElementType]> {
  let summary = "Elementwise addition with numpy broadcasting";
  let description = [{
    Elementwise `lhs + rhs`, with both operands broadcast numpy-style; the
    verifier requires the result shape to be their broadcast shape. Operands and
    result have one element type (floats or integers; integers wrap). Imports
    ONNX Add.

    ```mlir
    %y = shardc.Add %x, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    ```
  }];
}
def Shardc_SubOp : Shardc_BinaryOp<"Sub", [SameOperandsAndResultElementType]> {
  let summary = "Elementwise subtraction with numpy broadcasting";
  let description = [{
    Elementwise `lhs - rhs`, with both operands broadcast numpy-style; the
    verifier requires the result shape to be their broadcast shape. Operands and
    result have one element type (floats or integers; integers wrap). Imports
    ONNX Sub.

    ```mlir
    %y = shardc.Sub %x, %mean : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
    ```
  }];
}
def Shardc_MulOp : Shardc_BinaryOp<"Mul", [Commutative, SameOperandsAndResultElementType]> {
  let summary = "Elementwise multiplication with numpy broadcasting";
  let description = [{
    Elementwise `lhs * rhs`, with both operands broadcast numpy-style; the
    verifier requires the result shape to be their broadcast shape. Operands and
    result have one element type (floats or integers; integers wrap). Imports
    ONNX Mul.

    ```mlir
    %y = shardc.Mul %x, %scale : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    ```
  }];
}
def Shardc_DivOp : Shardc_BinaryOp<"Div", [SameOperandsAndResultElementType]> {
  let summary = "Elementwise division with numpy broadcasting";
  let description = [{
    Elementwise `lhs / rhs`, with both operands broadcast numpy-style; the
    verifier requires the result shape to be their broadcast shape. Operands and
    result have one element type (floats or integers; integer division truncates
    toward zero and a zero divisor is a run-time error). Imports ONNX Div.

    ```mlir
    %y = shardc.Div %x, %n : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    ```
  }];
}
def Shardc_PowOp : Shardc_BinaryOp<"Pow"> {
  let summary = "Elementwise power; the result has the base's element type";
  let description = [{
    Elementwise `lhs` raised to the power `rhs`, with both operands broadcast
    numpy-style to the result shape. Unlike the other binary ops the exponent
    may have another element type than the base (each f32, f64, i32 or i64); the
    result has the base's element type. Imports ONNX Pow.

    ```mlir
    %y = shardc.Pow %x, %two : (tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
    ```
  }];
}

def Shardc_WhereOp : Shardc_Op<"Where", [Pure, Shardc_InfersBroadcast,
    AllElementTypesMatch<["x", "y", "output"]>]> {
  let summary = "Elementwise select with numpy broadcasting";
  let description = [{
    Elementwise `condition ? x : y`, with the three operands broadcast
    numpy-style to the result shape. `condition` is i1; `x`, `y` and the result
    have one element type, of any kind. Imports ONNX Where.

    ```mlir
    %y = shardc.Where %mask, %x, %zero
        : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Shardc_BoolTensor:$condition, Shardc_Tensor:$x,
                   Shardc_Tensor:$y);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $condition `,` $x `,` $y attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_EqualOp : Shardc_Op<"Equal", [Pure, Commutative]> {
  let summary = "Elementwise lhs == rhs with numpy broadcasting";
  let description = [{
    True where the broadcast operands are equal; the operands have one
    element type (floats, integers or booleans) and the result is i1 with
    their broadcast shape. Not differentiable: it builds masks (e.g.
    `masked_fill(mask == 0, ...)`), which reach the loss only through
    `shardc.Where`'s condition. Imports ONNX Equal.

    ```mlir
    %m = shardc.Equal %a, %b : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$lhs, Shardc_Tensor:$rhs);
  let results = (outs Shardc_BoolTensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

// Comparisons and boolean logic: the operands broadcast numpy-style and the
// result is i1 with their broadcast shape (inferred by builders, checked by
// the verifier). None of them is differentiable: their results are masks,
// which reach the loss only through shardc.Where's condition.
class Shardc_CompareOp<string mnemonic, list<Trait> traits = [],
                       Type operandTypes = Shardc_Tensor>
    : Shardc_Op<mnemonic, !listconcat(traits, [Pure, Shardc_InfersBroadcast])> {
  let arguments = (ins operandTypes:$lhs, operandTypes:$rhs);
  let results = (outs Shardc_BoolTensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_GreaterOp : Shardc_CompareOp<"Greater"> {
  let summary = "Elementwise lhs > rhs with numpy broadcasting";
  let description = [{
    True where the broadcast `lhs` is greater than `rhs`; the operands have
    one element type (floats or integers; a NaN compares false). Imports ONNX
    Greater (`x > 0.5`, and the masks of BCEWithLogits and KLDiv exports).

    ```mlir
    %m = shardc.Greater %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi1>
    ```
  }];
}
def Shardc_LessOp : Shardc_CompareOp<"Less"> {
  let summary = "Elementwise lhs < rhs with numpy broadcasting";
  let description = [{
    True where the broadcast `lhs` is less than `rhs`; the operands have one
    element type (floats or integers; a NaN compares false). Imports ONNX
    Less.

    ```mlir
    %m = shardc.Less %x, %zero : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi1>
    ```
  }];
}
def Shardc_GreaterOrEqualOp : Shardc_CompareOp<"GreaterOrEqual"> {
  let summary = "Elementwise lhs >= rhs with numpy broadcasting";
  let description = [{
    True where the broadcast `lhs` is greater than or equal to `rhs`; the
    operands have one element type (floats or integers; a NaN compares
    false). Imports ONNX GreaterOrEqual.

    ```mlir
    %m = shardc.GreaterOrEqual %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
    ```
  }];
}
def Shardc_LessOrEqualOp : Shardc_CompareOp<"LessOrEqual"> {
  let summary = "Elementwise lhs <= rhs with numpy broadcasting";
  let description = [{
    True where the broadcast `lhs` is less than or equal to `rhs`; the
    operands have one element type (floats or integers; a NaN compares
    false). Imports ONNX LessOrEqual.

    ```mlir
    %m = shardc.LessOrEqual %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
    ```
  }];
}
def Shardc_AndOp : Shardc_CompareOp<"And", [Commutative], Shardc_BoolTensor> {
  let summary = "Elementwise logical and of i1 tensors, broadcasting";
  let description = [{
    The logical and of two broadcast i1 tensors. Imports ONNX And.

    ```mlir
    %m = shardc.And %a, %b : (tensor<4x8xi1>, tensor<8xi1>) -> tensor<4x8xi1>
    ```
  }];
}
def Shardc_OrOp : Shardc_CompareOp<"Or", [Commutative], Shardc_BoolTensor> {
  let summary = "Elementwise logical or of i1 tensors, broadcasting";
  let description = [{
    The logical or of two broadcast i1 tensors. Imports ONNX Or.

    ```mlir
    %m = shardc.Or %a, %b : (tensor<4x8xi1>, tensor<8xi1>) -> tensor<4x8xi1>
    ```
  }];
}
def Shardc_XorOp : Shardc_CompareOp<"Xor", [Commutative], Shardc_BoolTensor> {
  let summary = "Elementwise logical exclusive or of i1 tensors, broadcasting";
  let description = [{
    True where exactly one of the two broadcast i1 operands is. Imports ONNX
    Xor.

    ```mlir
    %m = shardc.Xor %a, %b : (tensor<4x8xi1>, tensor<8xi1>) -> tensor<4x8xi1>
    ```
  }];
}

def Shardc_MaxOp : Shardc_BinaryOp<"Max", [Commutative, SameOperandsAndResultElementType]> {
  let summary = "Elementwise maximum with numpy broadcasting";
  let description = [{
    Elementwise `max(lhs, rhs)` of broadcast operands of one element type
    (floats or integers); a NaN operand gives NaN, as torch.maximum does.
    ONNX Max (variadic) imports as a chain of these. Its gradient goes to the
    larger operand, and is split evenly between the two on ties, as
    torch.maximum's is.

    ```mlir
    %y = shardc.Max %a, %b : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    ```
  }];
}
def Shardc_MinOp : Shardc_BinaryOp<"Min", [Commutative, SameOperandsAndResultElementType]> {
  let summary = "Elementwise minimum with numpy broadcasting";
  let description = [{
    Elementwise `min(lhs, rhs)` of broadcast operands of one element type
    (floats or integers); a NaN operand gives NaN, as torch.minimum does.
    ONNX Min (variadic) imports as a chain of these. Its gradient goes to the
    smaller operand, and is split evenly between the two on ties, as
    torch.minimum's is.

    ```mlir
    %y = shardc.Min %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    ```
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
  let description = [{
    The elementwise square root of a float tensor (f16, f32 or f64); the result
    has the input's type. Imports ONNX Sqrt.

    ```mlir
    %y = shardc.Sqrt %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_ExpOp : Shardc_UnaryOp<"Exp", Shardc_FloatTensor> {
  let summary = "Elementwise exponential";
  let description = [{
    The elementwise exponential `e^x` of a float tensor (f16, f32 or f64); the
    result has the input's type. Imports ONNX Exp.

    ```mlir
    %y = shardc.Exp %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_LogOp : Shardc_UnaryOp<"Log", Shardc_FloatTensor> {
  let summary = "Elementwise natural logarithm";
  let description = [{
    The elementwise natural logarithm of a float tensor (f16, f32 or f64); the
    result has the input's type. Imports ONNX Log.

    ```mlir
    %y = shardc.Log %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_ErfOp : Shardc_UnaryOp<"Erf", Shardc_FloatTensor> {
  let summary = "Elementwise error function";
  let description = [{
    The elementwise Gauss error function of a float tensor (f16, f32 or f64);
    the result has the input's type. Imports ONNX Erf. Exported GELU activations
    use it.

    ```mlir
    %y = shardc.Erf %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_TanhOp : Shardc_UnaryOp<"Tanh", Shardc_FloatTensor> {
  let summary = "Elementwise hyperbolic tangent";
  let description = [{
    The elementwise hyperbolic tangent of a float tensor (f16, f32 or f64); the
    result has the input's type. Imports ONNX Tanh. Its gradient is
    `shardc.TanhGrad`, computed from the output.

    ```mlir
    %y = shardc.Tanh %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_SigmoidOp : Shardc_UnaryOp<"Sigmoid", Shardc_FloatTensor> {
  let summary = "Elementwise logistic function";
  let description = [{
    The elementwise logistic function `1 / (1 + exp(-x))` of a float tensor
    (f16, f32 or f64); the result has the input's type. Imports ONNX Sigmoid.
    Its gradient is `shardc.SigmoidGrad`, computed from the output.

    ```mlir
    %y = shardc.Sigmoid %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_NegOp : Shardc_UnaryOp<"Neg"> {
  let summary = "Elementwise negation";
  let description = [{
    The elementwise negation `-x`; the result has the input's type (floats, or
    integers, which wrap). Imports ONNX Neg.

    ```mlir
    %y = shardc.Neg %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_AbsOp : Shardc_UnaryOp<"Abs"> {
  let summary = "Elementwise absolute value";
  let description = [{
    The elementwise `|x|`; the result has the input's type (floats, or
    integers, where the most negative value wraps to itself). Imports ONNX
    Abs. Its gradient is `grad * sign(x)`, 0 at x = 0 as in PyTorch.

    ```mlir
    %y = shardc.Abs %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_ReluOp : Shardc_UnaryOp<"Relu"> {
  let summary = "Elementwise max(x, 0)";
  let description = [{
    The elementwise `max(x, 0)`; the result has the input's type (floats or
    integers). Imports ONNX Relu. Its gradient is `shardc.ReluGrad`.

    ```mlir
    %y = shardc.Relu %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_SoftplusOp : Shardc_UnaryOp<"Softplus", Shardc_FloatTensor> {
  let summary = "Elementwise log(1 + exp(x))";
  let description = [{
    The smooth ReLU, computed as `max(x, 0) + log1p(exp(-|x|))` so that it
    neither overflows for large x nor loses precision for very negative x.
    Imports ONNX Softplus (what torch.nn.Softplus with beta 1 and Mish
    export to). Its gradient is `grad * sigmoid(x)`.

    ```mlir
    %y = shardc.Softplus %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_NotOp : Shardc_UnaryOp<"Not", Shardc_BoolTensor> {
  let summary = "Elementwise logical not of an i1 tensor";
  let description = [{
    The logical negation of an i1 tensor. Imports ONNX Not.

    ```mlir
    %m = shardc.Not %a : tensor<4x8xi1>
    ```
  }];
}
def Shardc_SignOp : Shardc_UnaryOp<"Sign"> {
  let summary = "Elementwise sign: -1, 0 or 1";
  let description = [{
    -1 for negative, 1 for positive and 0 for zero elements (floats or
    signed integers; NaN stays NaN); the result has the input's type. Imports
    ONNX Sign. Its gradient is zero, as PyTorch's is.

    ```mlir
    %y = shardc.Sign %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_FloorOp : Shardc_UnaryOp<"Floor", Shardc_FloatTensor> {
  let summary = "Elementwise rounding down";
  let description = [{
    The largest integer not greater than each element of a float tensor; the
    result has the input's type. Imports ONNX Floor. Its gradient is zero, as
    PyTorch's is.

    ```mlir
    %y = shardc.Floor %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_CeilOp : Shardc_UnaryOp<"Ceil", Shardc_FloatTensor> {
  let summary = "Elementwise rounding up";
  let description = [{
    The smallest integer not less than each element of a float tensor; the
    result has the input's type. Imports ONNX Ceil. Its gradient is zero, as
    PyTorch's is.

    ```mlir
    %y = shardc.Ceil %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_SinOp : Shardc_UnaryOp<"Sin", Shardc_FloatTensor> {
  let summary = "Elementwise sine";
  let description = [{
    The elementwise sine (radians) of a float tensor; the result has the
    input's type. Imports ONNX Sin. Its gradient is `grad * cos(x)`.

    ```mlir
    %y = shardc.Sin %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_CosOp : Shardc_UnaryOp<"Cos", Shardc_FloatTensor> {
  let summary = "Elementwise cosine";
  let description = [{
    The elementwise cosine (radians) of a float tensor; the result has the
    input's type. Imports ONNX Cos. Its gradient is `-grad * sin(x)`.

    ```mlir
    %y = shardc.Cos %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_TanOp : Shardc_UnaryOp<"Tan", Shardc_FloatTensor> {
  let summary = "Elementwise tangent";
  let description = [{
    The elementwise tangent (radians) of a float tensor; the result has the
    input's type. Imports ONNX Tan. Its gradient is `grad * (1 + y * y)` (y the output).

    ```mlir
    %y = shardc.Tan %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_AsinOp : Shardc_UnaryOp<"Asin", Shardc_FloatTensor> {
  let summary = "Elementwise arcsine";
  let description = [{
    The elementwise arcsine (NaN outside [-1, 1]) of a float tensor; the result has the
    input's type. Imports ONNX Asin. Its gradient is `grad / sqrt(1 - x * x)`.

    ```mlir
    %y = shardc.Asin %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_AcosOp : Shardc_UnaryOp<"Acos", Shardc_FloatTensor> {
  let summary = "Elementwise arccosine";
  let description = [{
    The elementwise arccosine (NaN outside [-1, 1]) of a float tensor; the result has the
    input's type. Imports ONNX Acos. Its gradient is `-grad / sqrt(1 - x * x)`.

    ```mlir
    %y = shardc.Acos %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_AtanOp : Shardc_UnaryOp<"Atan", Shardc_FloatTensor> {
  let summary = "Elementwise arctangent";
  let description = [{
    The elementwise arctangent of a float tensor; the result has the
    input's type. Imports ONNX Atan. Its gradient is `grad / (1 + x * x)`.

    ```mlir
    %y = shardc.Atan %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_SinhOp : Shardc_UnaryOp<"Sinh", Shardc_FloatTensor> {
  let summary = "Elementwise hyperbolic sine";
  let description = [{
    The elementwise hyperbolic sine of a float tensor; the result has the
    input's type. Imports ONNX Sinh. Its gradient is `grad * cosh(x)`.

    ```mlir
    %y = shardc.Sinh %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_CoshOp : Shardc_UnaryOp<"Cosh", Shardc_FloatTensor> {
  let summary = "Elementwise hyperbolic cosine";
  let description = [{
    The elementwise hyperbolic cosine of a float tensor; the result has the
    input's type. Imports ONNX Cosh. Its gradient is `grad * sinh(x)`.

    ```mlir
    %y = shardc.Cosh %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_AsinhOp : Shardc_UnaryOp<"Asinh", Shardc_FloatTensor> {
  let summary = "Elementwise inverse hyperbolic sine";
  let description = [{
    The elementwise inverse hyperbolic sine of a float tensor; the result has the
    input's type. Imports ONNX Asinh. Its gradient is `grad / sqrt(x * x + 1)`.

    ```mlir
    %y = shardc.Asinh %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_AcoshOp : Shardc_UnaryOp<"Acosh", Shardc_FloatTensor> {
  let summary = "Elementwise inverse hyperbolic cosine";
  let description = [{
    The elementwise inverse hyperbolic cosine (NaN below 1) of a float tensor; the result has the
    input's type. Imports ONNX Acosh. Its gradient is `grad / sqrt(x * x - 1)`.

    ```mlir
    %y = shardc.Acosh %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_AtanhOp : Shardc_UnaryOp<"Atanh", Shardc_FloatTensor> {
  let summary = "Elementwise inverse hyperbolic tangent";
  let description = [{
    The elementwise inverse hyperbolic tangent (NaN outside [-1, 1]) of a float tensor; the result has the
    input's type. Imports ONNX Atanh. Its gradient is `grad / (1 - x * x)`.

    ```mlir
    %y = shardc.Atanh %x : tensor<2x3xf32>
    ```
  }];
}
def Shardc_IdentityOp : Shardc_UnaryOp<"Identity"> {
  let summary = "A copy of the input";
  let description = [{
    A copy of the input, of any type. Imports ONNX Identity, and also Dropout in
    inference or with ratio 0 (its mask output becomes an all-true constant) and
    a ReduceSum/ReduceMean without axes under `noop_with_empty_axes`.

    ```mlir
    %y = shardc.Identity %x : tensor<2x3xf32>
    ```
  }];
}

def Shardc_CastOp : Shardc_Op<"Cast", [Pure]> {
  let summary = "Element type conversion";
  let description = [{
    Converts every element to the element type of the result, which is the
    target type; the shape does not change. The element types are those ONNX
    Cast can target in Shard: f16, bf16, f32, f64, i1, i8, ui8, i32 and i64
    (to a 16-bit float: round to nearest even); float to
    integer truncates toward zero and conversion to i1 is `x != 0`. Imports ONNX
    Cast, whose `to` type code gives the result type.

    ```mlir
    %y = shardc.Cast %x : tensor<4xi64> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_DropoutOp : Shardc_Op<"Dropout", [Pure,
    AllTypesMatch<["input", "output"]>]> {
  let summary = "Training-mode dropout, its mask drawn from (seed, step, element)";
  let description = [{
    `output = input * mask / (1 - ratio)`, where each element of the boolean
    `mask` is false with probability `ratio` (0 <= ratio < 1). The mask is not
    an operand: the kernel computes it from the run's seed (`shardrun --seed`),
    the global training step, the dropout `site` and the element's index in the
    global batch, with Philox4x32-10 (`runtime/Philox.h`). So it is the same
    in every run with the same seed and at every world size and ZeRO stage, and
    differs between steps, samples and sites.

    The global index follows the samples: they run along `batch_axis`, whose
    size is `batch_outer` * B * inner for the micro-batch B (axis index
    (p * B + s) * inner + j holds sample s of outer group p; `batch_outer` is
    1 when the axis starts with the samples, as in [B, T, D] or [B*H, T, T],
    and T for PyTorch attention's [T*B, D]). So the input, flattened, is
    [O, B * I] with O the product of the sizes before `batch_axis` times
    `batch_outer`, and with N data parallel ranks, rank r's input is slab r of
    every row of the global batch's input, [O, N * B * I]: element i of row o
    is global element (o * N + r) * B * I + i. A `batch_axis` of -1 (with
    `batch_outer` 1) means the input does not depend on the batch, and every
    rank draws the same mask.

    With gradient accumulation over `micro_batches` K, the step's forward
    and backward are repeated for each micro-batch, and the copy for
    micro-batch `micro_batch` m draws as rank m * N + r of N * K ranks would:
    the global batch of N ranks accumulating K micro-batches is that of
    N * K ranks, in the same order (`shardc-accumulate-gradients`).

    The optional `mask` result is that mask (ONNX Dropout's second output);
    canonicalization drops it when it is unused (PyTorch exports it always).
    Imports ONNX Dropout in training mode with a ratio above 0, `site`
    numbering the model's training-mode Dropout nodes in graph order and
    `batch_axis` and `batch_outer` found by following the batch from the
    graph inputs (`frontend/BatchAxis.h`). Because the mask is a pure
    function of `(seed, step, site, element)`, the gradient is the same op
    applied to the output's gradient: the backward pass regenerates the mask
    rather than keeping it. It never folds: its value depends on the step.

    ```mlir
    %y, %mask = shardc.Dropout %x {batch_axis = 0 : i64, ratio = 2.000000e-01 : f32, site = 0 : i64}
        : tensor<8x16xf32>, tensor<8x16xi1>
    // Attention's [T*B, D] with T = 16 (batch_outer is 1 when left out):
    %z = shardc.Dropout %h {batch_axis = 0 : i64, batch_outer = 16 : i64, ratio = 1.000000e-01 : f32, site = 1 : i64}
        : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$input, F32Attr:$ratio,
                   I64Attr:$site, I64Attr:$batch_axis,
                   DefaultValuedAttr<I64Attr, "1">:$batch_outer,
                   DefaultValuedAttr<I64Attr, "0">:$micro_batch,
                   DefaultValuedAttr<I64Attr, "1">:$micro_batches);
  let results = (outs Shardc_FloatTensor:$output,
                 Optional<Shardc_BoolTensor>:$mask);
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) (`,` type($mask)^)?";
}

//===----------------------------------------------------------------------===//
// Linear algebra, normalization, activations over an axis
//===----------------------------------------------------------------------===//

def Shardc_GemmOp : Shardc_Op<"Gemm", [Pure,
    DeclareOpInterfaceMethods<Shardc_ComputeCostOpInterface>]> {
  let summary = "alpha * op(A) * op(B) + beta * C";
  let description = [{
    `alpha * op(a) * op(b) + beta * c`, where `op` transposes its 2-d operand
    when `transA`/`transB` is true: `op(a)` is (M, K), `op(b)` is (K, N), the
    result is (M, N) and the optional `c` broadcasts numpy-style to it; all of
    them share one float element type. `alpha` and `beta` default to 1.0 and
    `transA`/`transB` to false. Imports ONNX Gemm; MatMul's canonicalization
    also creates it for a product with a transposed 2-d weight.
    Canonicalization folds an `Add` of a bias row to a Gemm without `c` (seen
    through a Reshape, as MatMul's canonicalization leaves a linear layer over
    3-d activations) into its `c`: the bias is added as the product is written,
    not in another pass over it.

    ```mlir
    %y = shardc.Gemm %x, %w, %b {transB = true}
        : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$a, Shardc_FloatTensor:$b,
                   Optional<Shardc_FloatTensor>:$c,
                   DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0f">:$beta,
                   DefaultValuedAttr<BoolAttr, "false">:$transA,
                   DefaultValuedAttr<BoolAttr, "false">:$transB);
  let results = (outs Shardc_FloatTensor:$output);
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let assemblyFormat = [{
    $a `,` $b (`,` $c^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_MatMulOp : Shardc_Op<"MatMul", [Pure,
    DeclareOpInterfaceMethods<Shardc_ComputeCostOpInterface>]> {
  let summary = "numpy.matmul: batched, broadcasting matrix product";
  let description = [{
    numpy.matmul: the matrix product over the last two dimensions, with the
    leading (batch) dimensions broadcast; a 1-d `a` is a row and a 1-d `b` a
    column, and that dimension is dropped from the result. Operands and result
    have one element type. Imports ONNX MatMul. Canonicalization turns
    `MatMul(x, Transpose(w))` with a 2-d `w` (what torch.onnx.export emits for
    nn.Linear without folding) into a `Gemm` with `transB` over `x` reshaped to
    2-d: no transposed copy of the weight, in forward or backward.

    ```mlir
    %y = shardc.MatMul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$a, Shardc_Tensor:$b);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let assemblyFormat = [{
    $a `,` $b attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_PermutedMatMulOp : Shardc_Op<"PermutedMatMul", [Pure,
    DeclareOpInterfaceMethods<Shardc_ComputeCostOpInterface>]> {
  let summary = "Batched matrix product of permuted operands, permuted result";
  let description = [{
    `Transpose(MatMul(Transpose(a, a_perm), Transpose(b, b_perm)),
    output_perm)` without the transposed copies: the kernels read `a` and
    `b` and write the result through strides (a BLAS's leading dimension
    and transpose flag per matrix, one product per batch). Operands and
    result have one element type and one rank, at least 3; the permuted
    operands' batch dimensions are equal (no broadcasting). So that each
    matrix has unit stride along one of its dimensions, a permutation's
    last two entries include rank - 1 (the operand's innermost dimension),
    and `output_perm` ends with rank - 1. Emitted by
    `shardc-fuse-elementwise` for attention's head split and merge and the
    transposed operands of its gradients.

    ```mlir
    // q, k: [batch, time, heads, dim]; scores: [batch, heads, time, time].
    %s = shardc.PermutedMatMul %q, %k
        {a_perm = array<i64: 0, 2, 1, 3>, b_perm = array<i64: 0, 2, 3, 1>,
         output_perm = array<i64: 0, 1, 2, 3>}
        : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$a, Shardc_Tensor:$b,
                   DenseI64ArrayAttr:$a_perm, DenseI64ArrayAttr:$b_perm,
                   DenseI64ArrayAttr:$output_perm);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
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
  let description = [{
    `exp(x) / sum(exp(x))` along the one dimension `axis` (ONNX opset-13
    semantics), for float tensors; the result has the input's type and the
    verifier requires `0 <= axis < rank`. Imports ONNX Softmax, with `axis` made
    non-negative (default: the last dimension). Its gradient is
    `shardc.SoftmaxGrad`.

    ```mlir
    %y = shardc.Softmax %x {axis = 1 : i64} : tensor<2x3xf32>
    ```
  }];
}
def Shardc_LogSoftmaxOp : Shardc_AxisSoftmaxOp<"LogSoftmax"> {
  let summary = "Log of softmax along one axis";
  let description = [{
    `x - log(sum(exp(x)))` along the one dimension `axis` (ONNX opset-13
    semantics), for float tensors; the result has the input's type and the
    verifier requires `0 <= axis < rank`. Imports ONNX LogSoftmax, with `axis`
    made non-negative (default: the last dimension). Its gradient is
    `shardc.LogSoftmaxGrad`.

    ```mlir
    %y = shardc.LogSoftmax %x {axis = 1 : i64} : tensor<2x3xf32>
    ```
  }];
}

def Shardc_LayerNormalizationOp : Shardc_Op<"LayerNormalization", [Pure]> {
  let summary = "Layer normalization over the trailing axes from `axis`";
  let description = [{
    Normalizes the input over the dimensions from `axis` to the last:
    `(x - mean) * inv_std_dev * scale + bias` with
    `inv_std_dev = 1 / sqrt(var + epsilon)` (population variance); `scale` and
    the optional `bias` have the input's float element type and broadcast to the
    normalized shape. The results `mean` and `inv_std_dev` have the input's
    dimensions before `axis` and 1s from `axis` on, and `shardc.LayerNormGrad`
    reuses them. Imports ONNX LayerNormalization, always with all three results.

    ```mlir
    %y, %mean, %inv_std_dev = shardc.LayerNormalization %x, %scale, %bias
        {axis = 2 : i64, epsilon = 9.99999974E-6 : f32}
        : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
        -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
    ```
  }];
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
    Per-channel `(x - mean) / sqrt(var + epsilon) * scale + bias` over an
    (N, C, ...) float input, whose element type `scale`, `bias` and the output
    share; `scale`, `bias`, `mean`, `var` and both results
    `running_mean`/`running_var` have shape (C). With `training_mode` the batch
    statistics (population variance) normalize and
    `running_mean = mean * momentum + batch_mean * (1 - momentum)`, likewise
    `running_var`; in inference mode `mean`/`var` normalize and the running
    statistics equal them. With `unbiased_var` (default false;
    `shardc-optimizer` sets it, as PyTorch does, whereas ONNX uses the
    population variance) the running variance is updated with the unbiased batch
    variance. Imports ONNX BatchNormalization.

    With `moments` (training mode only; `shardc-sync-batchnorm`, as
    torch.nn.SyncBatchNorm) the batch statistics are not this input's:
    `moments` is the f64 (2 * C) tensor `[mean, mean of squares]` of the
    global batch (BatchNormStats summed over the ranks), the variance is
    `mean of squares - mean^2`, and `batch_count` (the global batch's
    values per channel) gives the unbiased running variance.

    ```mlir
    %y, %running_mean, %running_var = shardc.BatchNormalization %x, %scale, %bias, %mean, %var
        {epsilon = 9.99999974E-6 : f32, momentum = 0.899999976 : f32, training_mode = true}
        : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
        -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
    %y2, %rm2, %rv2 = shardc.BatchNormalization %x, %scale, %bias, %mean, %var moments %m
        {batch_count = 64 : i64, epsilon = 9.99999974E-6 : f32,
         momentum = 0.899999976 : f32, training_mode = true}
        : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<6xf64>)
        -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$input, Shardc_FloatTensor:$scale,
                   Shardc_FloatTensor:$bias, Shardc_FloatTensor:$mean,
                   Shardc_FloatTensor:$var, F32Attr:$epsilon,
                   F32Attr:$momentum, BoolAttr:$training_mode,
                   DefaultValuedAttr<BoolAttr, "false">:$unbiased_var,
                   Optional<1DTensorOf<[F64]>>:$moments,
                   OptionalAttr<I64Attr>:$batch_count);
  let results = (outs Shardc_FloatTensor:$output,
                 Shardc_FloatTensor:$running_mean,
                 Shardc_FloatTensor:$running_var);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `,` $mean `,` $var (`moments` $moments^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_BatchNormStatsOp : Shardc_Op<"BatchNormStats", [Pure]> {
  let summary = "One rank's share of the global batch's BatchNorm moments";
  let description = [{
    Per channel of an (N, C, ...) float input, `[sum(x), sum(x^2)] / count`
    as an f64 (2 * C) tensor (the C sums of x, then the C sums of squares),
    accumulated in f64. `count` is the number of values per channel in the
    global batch (this input's N * spatial size times the ranks), so that
    the sum of the ranks' results (`mesh.all_reduce`) is the global batch's
    mean and mean of squares: the `moments` of a synchronized
    BatchNormalization (`shardc-sync-batchnorm`).

    ```mlir
    %part = shardc.BatchNormStats %x {count = 64 : i64}
        : (tensor<2x3x4x4xf32>) -> tensor<6xf64>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$input, I64Attr:$count);
  let results = (outs 1DTensorOf<[F64]>:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

def Shardc_ConvOp : Shardc_Op<"Conv", [Pure,
    DeclareOpInterfaceMethods<Shardc_ComputeCostOpInterface>]> {
  let summary = "N-d convolution (cross-correlation) with groups";
  let description = [{
    N-d cross-correlation of an (N, C, d...) input with an (M, C/group, k...)
    weight, plus the optional (M) bias, giving (N, M, o...), all of one float
    element type. `kernel_shape` (the weight's spatial dims), `strides` and
    `dilations` have one entry per spatial dimension and `pads` two (all begins,
    then all ends); `group` divides C and M, and the verifier checks each
    `o = (d + pad_begin + pad_end - dilation * (k - 1) - 1) / stride + 1`.
    Imports ONNX Conv with every default filled in and `auto_pad` resolved into
    `pads`.

    ```mlir
    %y = shardc.Conv %x, %w, %b
        {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>,
         pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
        : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
    ```
  }];
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

def Shardc_MaxPoolOp : Shardc_Op<"MaxPool", [Pure,
    AllElementTypesMatch<["input", "output"]>]> {
  let summary = "N-d max pooling, optionally with the argmax indices";
  let description = [{
    N-d max pooling of an (N, C, d...) input (any element type; padding never
    wins the max), with windows given as for Conv by `kernel_shape`, `strides`,
    `dilations` and `pads`; with `ceil_mode` the output sizes round up, though
    every window starts inside the input or its begin padding. The optional i64
    `indices` result holds the flat input index of each maximum (row-major, or
    column-major over the spatial dimensions with `storage_order` = 1);
    `shardc-autodiff` adds it for `shardc.MaxPoolGrad`. Imports ONNX MaxPool
    with `auto_pad` resolved.

    ```mlir
    %y, %indices = shardc.MaxPool %x
        {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>}
        : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>, tensor<1x3x4x4xi64>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$dilations, DenseI64ArrayAttr:$pads,
                   BoolAttr:$ceil_mode, I64Attr:$storage_order);
  let results = (outs Shardc_Tensor:$output,
                 Optional<StaticShapeTensorOf<[I64]>>:$indices);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type(results)";
}

def Shardc_AveragePoolOp : Shardc_Op<"AveragePool", [Pure,
    AllElementTypesMatch<["input", "output"]>]> {
  let summary = "N-d average pooling";
  let description = [{
    N-d average pooling of an (N, C, d...) float input, with windows as for
    MaxPool but without dilations. With `count_include_pad` the divisor counts
    the padding inside the window (up to the padded edge when `ceil_mode` lets a
    window run past it), otherwise only the input elements. Imports ONNX
    AveragePool with `auto_pad` resolved into `pads`.

    ```mlir
    %y = shardc.AveragePool %x
        {ceil_mode = false, count_include_pad = false, kernel_shape = array<i64: 3, 3>,
         pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
        : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$input,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, BoolAttr:$ceil_mode,
                   BoolAttr:$count_include_pad);
  let results = (outs Shardc_FloatTensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_GlobalAveragePoolOp : Shardc_Op<"GlobalAveragePool", [Pure,
    AllElementTypesMatch<["input", "output"]>]> {
  let summary = "Mean over all spatial dimensions";
  let description = [{
    The mean over all spatial dimensions of an (N, C, d...) float input, giving
    (N, C, 1, ...). Imports ONNX GlobalAveragePool.

    ```mlir
    %y = shardc.GlobalAveragePool %x : tensor<1x3x8x8xf32> -> tensor<1x3x1x1xf32>
    ```
  }];
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
    The input's elements, in row-major order, with the result's static shape;
    the element type and the number of elements do not change. ONNX Reshape,
    Flatten, Squeeze and Unsqueeze all import as this op: with static shapes the
    result type says everything. It folds away when the types are equal and into
    a constant when its input is one.

    ```mlir
    %y = shardc.Reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_TransposeOp : Shardc_Op<"Transpose", [Pure,
    AllElementTypesMatch<["input", "output"]>]> {
  let summary = "Permutation of the dimensions";
  let description = [{
    Permutes the dimensions: result dimension i is input dimension `perm[i]`,
    and `perm` must be a permutation of `0 .. rank-1`. Any element type. Imports
    ONNX Transpose, with the default `perm` (the dimensions reversed) made
    explicit.

    ```mlir
    %y = shardc.Transpose %x {perm = array<i64: 0, 2, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_TriluOp : Shardc_Op<"Trilu", [Pure,
    AllTypesMatch<["input", "output"]>]> {
  let summary = "Upper or lower triangle of the last two dimensions";
  let description = [{
    Keeps element (i, j) of every matrix in the last two dimensions where
    `j - i >= k` (`upper`) or `j - i <= k` (lower), and zeroes the others.
    Imports ONNX Trilu (`torch.triu`/`torch.tril`, e.g. causal masks), whose
    `k` input must be a compile-time constant. A constant Trilu folds at
    import; the gradient of a Trilu is the same Trilu of the gradient.

    ```mlir
    %y = shardc.Trilu %x {k = 0 : i64, upper = false} : tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input, I64Attr:$k, BoolAttr:$upper);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Shardc_GatherOp : Shardc_Op<"Gather", [Pure,
    AllElementTypesMatch<["data", "output"]>]> {
  let summary = "Gather slices along an axis by index";
  let description = [{
    Takes the slices of `data` along `axis` at `indices` (i32 or i64; negative
    indices count from the end, and an out-of-range one is a run-time error):
    the result shape is
    `data.shape[:axis] + indices.shape + data.shape[axis+1:]`, with `data`'s
    element type (any). Imports ONNX Gather, e.g. an embedding lookup.

    ```mlir
    %y = shardc.Gather %table, %ids {axis = 0 : i64}
        : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$data, Shardc_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_GatherElementsOp : Shardc_Op<"GatherElements", [Pure,
    AllElementTypesMatch<["data", "output"]>]> {
  let summary = "Gather elements along an axis by a same-rank index tensor";
  let description = [{
    `output[c] = data[c with c[axis] = indices[c]]` for every coordinate `c`
    of `indices` (i32 or i64; negative indices count from the end, and an
    out-of-range one is a run-time error). `indices` has `data`'s rank and no
    larger a size than `data` on any other axis; the result has its shape and
    `data`'s element type (any). At most 8 dimensions. Imports ONNX
    GatherElements (`torch.gather`).

    ```mlir
    %y = shardc.GatherElements %logp, %picked {axis = 1 : i64}
        : (tensor<4x10xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$data, Shardc_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_ScatterElementsOp : Shardc_Op<"ScatterElements", [Pure,
    AllElementTypesMatch<["data", "updates", "output"]>]> {
  let summary = "Write elements along an axis by a same-rank index tensor";
  let description = [{
    A copy of `data` with `output[c with c[axis] = indices[c]] = updates[c]`
    for every coordinate `c` of `indices` (i32 or i64; negative indices count
    from the end, and an out-of-range one is a run-time error), in the order
    of the indices' elements: of repeated indices the last wins, on every
    backend. `indices` has `data`'s rank and no larger a size than `data` on
    any other axis; `updates` has the indices' shape, the result the data's.
    At most 8 dimensions. Imports ONNX ScatterElements (and Scatter) without
    a reduction (`Tensor.scatter_`); with `add` the importer adds a
    GatherElementsGrad of the updates to the data instead.

    ```mlir
    %y = shardc.ScatterElements %zeros, %labels, %ones {axis = 1 : i64}
        : (tensor<4x10xf32>, tensor<4x1xi64>, tensor<4x1xf32>) -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$data, Shardc_IndexTensor:$indices,
                   Shardc_Tensor:$updates, I64Attr:$axis);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $data `,` $indices `,` $updates attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_ConcatOp : Shardc_Op<"Concat", [Pure]> {
  let summary = "Concatenation along an axis";
  let description = [{
    Concatenates one or more inputs along `axis`. They have the result's rank
    and element type (any) and the same dimensions except along `axis`, where
    their sizes add up to the result's. Imports ONNX Concat.

    ```mlir
    %y = shardc.Concat %a, %b {axis = 1 : i64}
        : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Variadic<Shardc_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_SplitOp : Shardc_Op<"Split", [Pure]> {
  let summary = "Split into consecutive pieces along an axis";
  let description = [{
    Splits the input along `axis` into consecutive pieces, one per result: each
    result's size along `axis` is given by its type, the sizes add up to the
    input's, and the other dimensions are the input's. Any element type. Imports
    ONNX Split, whose `split` sizes (or even split) become the result types.

    ```mlir
    %a, %b = shardc.Split %x {axis = 1 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>, tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<Shardc_Tensor>:$outputs);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($outputs)";
}

def Shardc_SliceOp : Shardc_Op<"Slice", [Pure,
    AllElementTypesMatch<["input", "output"]>]> {
  let summary = "Strided slice with one start and step per dimension";
  let description = [{
    Strided slice with one start and step per dimension:
    `output[i0, i1, ...] = input[starts[0] + i0 * steps[0], starts[1] + i1 * steps[1], ...]`,
    the result type giving the number of elements per dimension. Starts are
    already clamped into range and steps are non-zero and may be negative; the
    verifier checks that every index taken lies in the input. Imports ONNX
    Slice, whose constant `starts`, `ends`, `axes` and `steps` are resolved at
    import. Any element type.

    ```mlir
    %y = shardc.Slice %x {starts = array<i64: 1, 0>, steps = array<i64: -1, 2>}
        : tensor<2x6xf32> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$steps);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_ExpandOp : Shardc_Op<"Expand", [Pure]> {
  let summary = "Broadcast to the result's shape";
  let description = [{
    Broadcasts the input numpy-style to the result's shape, which must be the
    broadcast of the two shapes; the element type (any) does not change. Imports
    ONNX Expand, whose `shape` operand is resolved at import.

    ```mlir
    %y = shardc.Expand %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

class Shardc_ReduceOp<string mnemonic>
    : Shardc_Op<mnemonic, [Pure, AllElementTypesMatch<["input", "output"]>]> {
  let arguments = (ins Shardc_Tensor:$input, DenseI64ArrayAttr:$axes,
                   BoolAttr:$keepdims);
  let results = (outs Shardc_Tensor:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}
def Shardc_ReduceMeanOp : Shardc_ReduceOp<"ReduceMean"> {
  let summary = "Mean over the given axes";
  let description = [{
    The mean over the dimensions in `axes`, which the verifier requires to be
    sorted, unique and in range (empty `axes` reduce nothing); with `keepdims`
    every reduced dimension stays with size 1, otherwise it is dropped. Floats
    are accumulated in double; the mean of integers truncates. Imports ONNX
    ReduceMean (axes from the attribute or a constant input, negative ones
    normalized, none meaning all).

    ```mlir
    %y = shardc.ReduceMean %x {axes = array<i64: 1>, keepdims = false}
        : tensor<2x3x4xf32> -> tensor<2x4xf32>
    ```
  }];
}
def Shardc_ReduceSumOp : Shardc_ReduceOp<"ReduceSum"> {
  let summary = "Sum over the given axes";
  let description = [{
    The sum over the dimensions in `axes`, which the verifier requires to be
    sorted, unique and in range (empty `axes` reduce nothing); with `keepdims`
    every reduced dimension stays with size 1, otherwise it is dropped. Floats
    are accumulated in double; integers wrap. Imports ONNX ReduceSum (axes from
    the attribute or a constant input, negative ones normalized, none meaning
    all).

    ```mlir
    %y = shardc.ReduceSum %x {axes = array<i64: 0, 2>, keepdims = true}
        : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
    ```
  }];
}

def Shardc_ReduceMaxOp : Shardc_ReduceOp<"ReduceMax"> {
  let summary = "Maximum over the given axes";
  let description = [{
    The largest element over the dimensions in `axes` (sorted, unique and in
    range; empty `axes` reduce nothing); with `keepdims` every reduced
    dimension stays with size 1, otherwise it is dropped. A NaN gives NaN, as
    torch.amax does. Imports ONNX ReduceMax (axes as for ReduceSum). Its
    gradient goes to the elements equal to the maximum, split evenly among
    ties as torch.amax's is.

    ```mlir
    %y = shardc.ReduceMax %x {axes = array<i64: 1>, keepdims = false}
        : tensor<4x8xf32> -> tensor<4xf32>
    ```
  }];
}
def Shardc_ReduceMinOp : Shardc_ReduceOp<"ReduceMin"> {
  let summary = "Minimum over the given axes";
  let description = [{
    The smallest element over the dimensions in `axes` (sorted, unique and in
    range; empty `axes` reduce nothing); with `keepdims` every reduced
    dimension stays with size 1, otherwise it is dropped. A NaN gives NaN, as
    torch.amin does. Imports ONNX ReduceMin. Its gradient goes to the
    elements equal to the minimum, split evenly among ties as torch.amin's
    is.

    ```mlir
    %y = shardc.ReduceMin %x {axes = array<i64: 1>, keepdims = true}
        : tensor<4x8xf32> -> tensor<4x1xf32>
    ```
  }];
}

def Shardc_ArgMaxOp : Shardc_Op<"ArgMax", [Pure]> {
  let summary = "Index of the largest element along an axis (i64)";
  let description = [{
    The index along `axis` of the largest element, as i64: the first one
    among equal maxima, or the last with `select_last_index`. With `keepdims`
    the reduced dimension stays with size 1, otherwise it is dropped; the
    verifier requires `0 <= axis < rank` and that result shape. Imports ONNX
    ArgMax (what accuracy metrics export to). Not differentiable: its integer
    result carries no gradient, and autodiff passes over it.

    ```mlir
    %i = shardc.ArgMax %logits {axis = 1 : i64, keepdims = false, select_last_index = false}
        : tensor<4x10xf32> -> tensor<4xi64>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input, I64Attr:$axis, BoolAttr:$keepdims,
                   BoolAttr:$select_last_index);
  let results = (outs StaticShapeTensorOf<[I64]>:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

def Shardc_TopKIndicesOp : Shardc_Op<"TopKIndices", [Pure]> {
  let summary = "Indices of the k largest (or smallest) elements along an axis";
  let description = [{
    The indices along `axis` of the `k` largest elements of each line (the
    `k` smallest without `largest`), as i64, best first; of equal values the
    lower index comes first, and a NaN counts as larger than every number
    (so it leads with `largest` and trails without). The result has the
    input's shape with `k` on the axis; the verifier requires
    `0 <= axis < rank` and `0 <= k <=` the axis' size. Imports ONNX TopK
    (`torch.topk`, `torch.sort` with k the whole axis), whose values are a
    GatherElements of the input at these indices: they carry the gradient,
    these do not.

    ```mlir
    %i = shardc.TopKIndices %router {axis = 1 : i64, k = 2 : i64, largest = true}
        : tensor<16x8xf32> -> tensor<16x2xi64>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$input, I64Attr:$axis, I64Attr:$k,
                   BoolAttr:$largest);
  let results = (outs StaticShapeTensorOf<[I64]>:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Shardc_SoftmaxCrossEntropyLossOp
    : Shardc_Op<"SoftmaxCrossEntropyLoss", [Pure]> {
  let summary = "Softmax cross-entropy over the class axis 1";
  let description = [{
    The cross-entropy of softmax(`scores`) over the class axis 1 against integer
    `labels` (i32 or i64): `scores` is (N, C, d...), `labels` (N, d...), and the
    optional `weights` (C) scale each target's loss; targets equal to
    `ignore_index` contribute 0. `reduction` `none` gives a labels-shaped loss,
    `sum` and `mean` a scalar (`mean` divides by the total weight of the targets
    not ignored). The optional `log_prob` result is log_softmax(`scores`).
    Imports ONNX SoftmaxCrossEntropyLoss (reduction `mean` by default).

    ```mlir
    %loss = shardc.SoftmaxCrossEntropyLoss %scores, %labels {reduction = #shardc.reduction<mean>}
        : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$scores, Shardc_IndexTensor:$labels,
                   Optional<Shardc_FloatTensor>:$weights, Shardc_LossReductionAttr:$reduction,
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
  let description = [{
    The negative log-likelihood of `input` (N, C, d...), usually
    log-probabilities, at integer `target` classes (N, d...; i32 or i64): each
    target's loss is `-input[n, t, ...] * weight[t]` with the optional `weight`
    (C), and 0 where `t` equals `ignore_index`. `reduction` `none` gives a
    target-shaped loss, `sum` and `mean` a scalar (`mean` divides by the total
    weight of the targets not ignored). Imports ONNX NegativeLogLikelihoodLoss
    (reduction `mean` by default).

    ```mlir
    %loss = shardc.NegativeLogLikelihoodLoss %log_prob, %target, %weight
        {ignore_index = -100 : i64, reduction = #shardc.reduction<sum>}
        : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$input, Shardc_IndexTensor:$target,
                   Optional<Shardc_FloatTensor>:$weight, Shardc_LossReductionAttr:$reduction,
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
  let description = [{
    The gradient of Relu with respect to its input: `grad` where `input > 0`,
    else 0. `grad`, `input` and the result share one float tensor type. Emitted
    by `shardc-autodiff`.

    ```mlir
    %dx = shardc.ReluGrad %dy, %x : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$input);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($grad)";
}
def Shardc_SigmoidGradOp : Shardc_Op<"SigmoidGrad",
    [Pure, AllTypesMatch<["grad", "output", "input_grad"]>]> {
  let summary = "Gradient of Sigmoid from its output: grad * y * (1 - y)";
  let description = [{
    The gradient of Sigmoid with respect to its input, from the forward output
    `y`: `grad * y * (1 - y)`. `grad`, `output` and the result share one float
    tensor type. Emitted by `shardc-autodiff`.

    ```mlir
    %dx = shardc.SigmoidGrad %dy, %y : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$output);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}
def Shardc_TanhGradOp : Shardc_Op<"TanhGrad",
    [Pure, AllTypesMatch<["grad", "output", "input_grad"]>]> {
  let summary = "Gradient of Tanh from its output: grad * (1 - y^2)";
  let description = [{
    The gradient of Tanh with respect to its input, from the forward output `y`:
    `grad * (1 - y^2)`. `grad`, `output` and the result share one float tensor
    type. Emitted by `shardc-autodiff`.

    ```mlir
    %dx = shardc.TanhGrad %dy, %y : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$output);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}
def Shardc_SoftmaxGradOp : Shardc_Op<"SoftmaxGrad",
    [Pure, AllTypesMatch<["grad", "output", "input_grad"]>]> {
  let summary = "Gradient of Softmax from its output";
  let description = [{
    The gradient of Softmax with respect to its input, from the forward output
    `y` along the forward op's `axis`: `y * (grad - sum_axis(grad * y))`.
    `grad`, `output` and the result share one float tensor type. Emitted by
    `shardc-autodiff`.

    ```mlir
    %dx = shardc.SoftmaxGrad %dy, %y {axis = 1 : i64} : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$output,
                   I64Attr:$axis);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}
def Shardc_LogSoftmaxGradOp : Shardc_Op<"LogSoftmaxGrad",
    [Pure, AllTypesMatch<["grad", "output", "input_grad"]>]> {
  let summary = "Gradient of LogSoftmax from its output";
  let description = [{
    The gradient of LogSoftmax with respect to its input, from the forward
    output `y` along the forward op's `axis`: `grad - exp(y) * sum_axis(grad)`.
    `grad`, `output` and the result share one float tensor type. Emitted by
    `shardc-autodiff`, for LogSoftmax and for the `log_prob` result of
    SoftmaxCrossEntropyLoss (axis 1).

    ```mlir
    %dx = shardc.LogSoftmaxGrad %dy, %y {axis = 1 : i64} : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$output,
                   I64Attr:$axis);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}

def Shardc_ConvGradInputOp : Shardc_Op<"ConvGradInput", [Pure,
    DeclareOpInterfaceMethods<Shardc_ComputeCostOpInterface>,
    AllElementTypesMatch<["grad", "weight", "input_grad"]>]> {
  let summary = "Gradient of Conv with respect to its input";
  let description = [{
    The gradient of Conv with respect to its input: the transposed convolution
    of `grad` (N, M, o...) with `weight`, of the forward input's type. The
    attributes are the forward Conv's, and the verifier checks the shapes as for
    Conv with the result in the input's place. Emitted by `shardc-autodiff`;
    ONNX ConvTranspose also imports as it (`grad` being the ConvTranspose
    input and `weight` its (C, M/group, k...) weight), so it has a gradient
    rule itself: a Conv of the result's gradient with `weight` for `grad`, and
    a ConvGradWeight for `weight`.

    ```mlir
    %dx = shardc.ConvGradInput %dy, %w
        {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>,
         pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
        : (tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x3x8x8xf32>
    ```
  }];
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
def Shardc_ConvGradWeightOp : Shardc_Op<"ConvGradWeight", [Pure,
    DeclareOpInterfaceMethods<Shardc_ComputeCostOpInterface>,
    AllElementTypesMatch<["grad", "input", "weight_grad"]>]> {
  let summary = "Gradient of Conv with respect to its weight";
  let description = [{
    The gradient of Conv with respect to its weight, from `grad` (N, M, o...)
    and the forward `input`; the result has the weight's type
    (M, C/group, k...). The attributes are the forward Conv's, and the verifier
    checks the shapes as for Conv. Emitted by `shardc-autodiff` (the bias
    gradient is a ReduceSum of `grad`).

    ```mlir
    %dw = shardc.ConvGradWeight %dy, %x
        {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>,
         pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
        : (tensor<1x4x8x8xf32>, tensor<1x3x8x8xf32>) -> tensor<4x3x3x3xf32>
    ```
  }];
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

def Shardc_MaxPoolGradOp : Shardc_Op<"MaxPoolGrad", [Pure,
    AllElementTypesMatch<["grad", "input_grad"]>]> {
  let summary = "Scatter-add of the output gradient at the argmax indices";
  let description = [{
    The gradient of MaxPool with respect to its input: zeros of the forward
    input's type, to which every `grad` element is added at its flat index in
    `indices` (MaxPool's i64 `indices` result with `storage_order` 0, of the
    gradient's shape; overlapping windows accumulate). Emitted by
    `shardc-autodiff`, which gives the MaxPool its `indices` result.

    ```mlir
    %dx = shardc.MaxPoolGrad %dy, %indices
        : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xi64>) -> tensor<1x3x8x8xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad,
                   StaticShapeTensorOf<[I64]>:$indices);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_AveragePoolGradOp : Shardc_Op<"AveragePoolGrad", [Pure,
    AllElementTypesMatch<["grad", "input_grad"]>]> {
  let summary = "Gradient of AveragePool";
  let description = [{
    The gradient of AveragePool with respect to its input: every `grad` element
    is spread evenly over its window, with the forward op's divisor. The
    attributes are the forward AveragePool's, and the result has its input's
    type (verified as for AveragePool). Emitted by `shardc-autodiff`.

    ```mlir
    %dx = shardc.AveragePoolGrad %dy
        {ceil_mode = false, count_include_pad = false, kernel_shape = array<i64: 3, 3>,
         pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
        : tensor<1x3x4x4xf32> -> tensor<1x3x8x8xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad,
                   DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, BoolAttr:$ceil_mode,
                   BoolAttr:$count_include_pad);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let hasVerifier = 1;
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($input_grad)";
}

def Shardc_LayerNormGradOp : Shardc_Op<"LayerNormGrad", [Pure,
    AllElementTypesMatch<["grad", "input", "scale", "input_grad", "scale_grad", "bias_grad"]>]> {
  let summary = "Gradient of LayerNormalization (input, scale, bias)";
  let description = [{
    The gradients of LayerNormalization with respect to its input, scale and
    bias (PyTorch's layer-norm backward), from `grad`, the forward `input` and
    `scale`, and the `mean` and `inv_std_dev` that LayerNormalization returned,
    for the same `axis`. `input_grad` has the input's shape; `scale_grad` and
    `bias_grad` have the scale's, which `shardc-autodiff` (its emitter) requires
    to be the normalized shape.

    ```mlir
    %dx, %dscale, %dbias = shardc.LayerNormGrad %dy, %x, %scale, %mean, %inv_std_dev
        {axis = 2 : i64}
        : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>,
           tensor<2x3x1xf32>, tensor<2x3x1xf32>)
        -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
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

def Shardc_BatchNormGradOp : Shardc_Op<"BatchNormGrad", [Pure,
    AttrSizedOperandSegments, AllElementTypesMatch<["grad", "input", "scale", "input_grad", "scale_grad", "bias_grad"]>]> {
  let summary = "Gradient of BatchNormalization (input, scale, bias)";
  let description = [{
    The gradients of BatchNormalization's output with respect to its input,
    scale and bias, with the forward op's `epsilon` and `training_mode`. With
    `training_mode` the batch statistics are recomputed from `input` (population
    variance) and differentiated through; otherwise
    `input_grad = grad * scale / sqrt(var + epsilon)`. `input_grad` has the
    (N, C, ...) input's shape and `scale_grad`/`bias_grad` shape (C). Emitted by
    `shardc-autodiff`; the running statistics get no gradient.

    With `moments` and `grad_moments` (training mode, `shardc-sync-batchnorm`)
    the statistics are the global batch's: `moments` as the forward op's
    (`[mean, mean of squares]`), and `grad_moments` the global
    `[mean(grad), mean(grad * (input - mean))]` (BatchNormGradStats summed
    over the ranks), which give `input_grad`; `scale_grad` and `bias_grad`
    stay this rank's sums (normalized with the global statistics), averaged
    over the ranks with the other gradients, as torch.nn.SyncBatchNorm's.

    ```mlir
    %dx, %dscale, %dbias = shardc.BatchNormGrad %dy, %x, %scale, %mean, %var
        {epsilon = 9.99999974E-6 : f32, training_mode = true}
        : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
        -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$input,
                   Shardc_FloatTensor:$scale, Shardc_FloatTensor:$mean,
                   Shardc_FloatTensor:$var, F32Attr:$epsilon,
                   BoolAttr:$training_mode,
                   Optional<1DTensorOf<[F64]>>:$moments,
                   Optional<1DTensorOf<[F64]>>:$grad_moments);
  let results = (outs Shardc_FloatTensor:$input_grad,
                 Shardc_FloatTensor:$scale_grad, Shardc_FloatTensor:$bias_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $input `,` $scale `,` $mean `,` $var (`moments` $moments^ `,` $grad_moments)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_BatchNormGradStatsOp : Shardc_Op<"BatchNormGradStats", [Pure,
    AllTypesMatch<["grad", "input"]>]> {
  let summary = "One rank's share of a synchronized BatchNorm's gradient moments";
  let description = [{
    Per channel, `[sum(grad), sum(grad * (input - mean))] / count` as an f64
    (2 * C) tensor, where `mean` is the first half of `moments` (the global
    batch's, as BatchNormalization takes them) and `count` the global
    batch's values per channel. Summed over the ranks it is the
    `grad_moments` operand of a synchronized BatchNormGrad
    (`shardc-sync-batchnorm`).

    ```mlir
    %part = shardc.BatchNormGradStats %dy, %x, %m {count = 64 : i64}
        : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<6xf64>) -> tensor<6xf64>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$input,
                   1DTensorOf<[F64]>:$moments, I64Attr:$count);
  let results = (outs 1DTensorOf<[F64]>:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $input `,` $moments attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_SoftmaxCrossEntropyLossWithGradOp
    : Shardc_Op<"SoftmaxCrossEntropyLossWithGrad", [Pure]> {
  let summary = "SoftmaxCrossEntropyLoss and its scores gradient in one pass";
  let description = [{
    SoftmaxCrossEntropyLoss's `loss` (`reduction` `sum` or `mean`, a scalar)
    and, from the same exponentials, `scores_grad`: the gradient of the loss
    with respect to `scores` for a loss gradient of 1, i.e.
    SoftmaxCrossEntropyLossGrad with `grad` = 1, bit for bit. Operands and
    attributes are SoftmaxCrossEntropyLoss's. Emitted by
    `shardc-fuse-elementwise` for a loss whose gradient backward computes:
    backward then multiplies `scores_grad` by the loss's gradient (when
    that is not the constant 1) instead of reading the scores again.

    ```mlir
    %loss, %dscores = shardc.SoftmaxCrossEntropyLossWithGrad %scores, %labels
        {reduction = #shardc.reduction<mean>}
        : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$scores, Shardc_IndexTensor:$labels,
                   Optional<Shardc_FloatTensor>:$weights, Shardc_LossReductionAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Shardc_FloatTensor:$loss, Shardc_FloatTensor:$scores_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $scores `,` $labels (`,` $weights^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_SoftmaxCrossEntropyLossGradOp
    : Shardc_Op<"SoftmaxCrossEntropyLossGrad", [Pure]> {
  let summary = "Gradient of SoftmaxCrossEntropyLoss with respect to scores";
  let description = [{
    The gradient of SoftmaxCrossEntropyLoss's loss with respect to `scores`, of
    the scores' shape. `grad` has the loss's shape (a scalar for `sum` and
    `mean`, the labels' shape for `none`); `labels`, `weights`, `reduction` and
    `ignore_index` are the forward op's, with the same shape checks. Emitted by
    `shardc-autodiff`.

    ```mlir
    %dscores = shardc.SoftmaxCrossEntropyLossGrad %dloss, %scores, %labels
        {reduction = #shardc.reduction<mean>}
        : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$scores,
                   Shardc_IndexTensor:$labels,
                   Optional<Shardc_FloatTensor>:$weights, Shardc_LossReductionAttr:$reduction,
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
  let description = [{
    The gradient of NegativeLogLikelihoodLoss's loss with respect to `input`, of
    the input's shape: zero except at each target's class. `grad` has the loss's
    shape (a scalar for `sum` and `mean`, the target's shape for `none`);
    `target`, `weight`, `reduction` and `ignore_index` are the forward op's,
    with the same shape checks. Emitted by `shardc-autodiff`.

    ```mlir
    %dlog_prob = shardc.NegativeLogLikelihoodLossGrad %dloss, %log_prob, %target
        {reduction = #shardc.reduction<mean>}
        : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_FloatTensor:$input,
                   Shardc_IndexTensor:$target,
                   Optional<Shardc_FloatTensor>:$weight, Shardc_LossReductionAttr:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Shardc_FloatTensor:$input_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $input `,` $target (`,` $weight^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_GatherElementsGradOp : Shardc_Op<"GatherElementsGrad", [Pure,
    AllElementTypesMatch<["grad", "data_grad"]>]> {
  let summary = "Scatter-add of GatherElements' output gradient into its data";
  let description = [{
    The gradient of GatherElements with respect to its data: zeros of the
    data's type, to which each element of `grad` is added at
    `c with c[axis] = indices[c]` (repeated indices accumulate in the order
    of the indices' elements, on every backend). `grad` has the indices'
    shape. Emitted by `shardc-autodiff`.

    ```mlir
    %dlogp = shardc.GatherElementsGrad %dy, %picked {axis = 1 : i64}
        : (tensor<4x1xf32>, tensor<4x1xi64>) -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Shardc_FloatTensor:$data_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_GatherGradOp : Shardc_Op<"GatherGrad", [Pure,
    AllElementTypesMatch<["grad", "data_grad"]>]> {
  let summary = "Scatter-add of Gather's output gradient into its data";
  let description = [{
    The gradient of Gather with respect to its data: zeros of the data's type,
    to which the slices of `grad` are added along `axis` at `indices` (i32 or
    i64; repeated indices accumulate, negative ones count from the end). `grad`
    must have the Gather's output shape,
    `data.shape[:axis] + indices.shape + data.shape[axis+1:]`. Emitted by
    `shardc-autodiff`.

    ```mlir
    %dtable = shardc.GatherGrad %dy, %ids {axis = 0 : i64}
        : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$grad, Shardc_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Shardc_FloatTensor:$data_grad);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_SliceGradOp : Shardc_Op<"SliceGrad", [Pure,
    AllElementTypesMatch<["grad", "input_grad"]>]> {
  let summary = "Zero-filled input gradient with the slice's gradient placed";
  let description = [{
    The gradient of Slice with respect to its input: zeros of the input's type
    with `input_grad[starts + i * steps] = grad[i]`, for the forward op's
    `starts` and `steps` (verified as for Slice). Any element type. Emitted by
    `shardc-autodiff`.

    ```mlir
    %dx = shardc.SliceGrad %dy {starts = array<i64: 1, 0>, steps = array<i64: -1, 2>}
        : tensor<2x3xf32> -> tensor<2x6xf32>
    ```
  }];
  let arguments = (ins Shardc_Tensor:$grad, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$steps);
  let results = (outs Shardc_Tensor:$input_grad);
  let hasVerifier = 1;
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($input_grad)";
}

//===----------------------------------------------------------------------===//
// Optimizer (emitted by the optimizer pass; run in place)
//===----------------------------------------------------------------------===//

// Scalar operands of the optimizer ops whose type is fixed (no type in the
// assembly): a 0-d i1 flag and a 0-d f32 counter.
def Shardc_SkipFlag : 0DTensorOf<[I1]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI1Type())">;
def Shardc_F32Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;
def Shardc_F64Scalar : 0DTensorOf<[F64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF64Type())">;

def Shardc_IncrementOp : Shardc_Op<"Increment",
    [Pure, AllTypesMatch<["input", "output"]>]> {
  let summary = "x + 1 (the optimizer's step counter), updated in place";
  let description = [{
    `input + 1` for an f32 tensor. `shardc-optimizer` counts training steps with
    it: the counter is a scalar `shardc.state` argument, incremented once per
    step before the updates that read it, and the result replaces the argument
    in place at run time. With `skip` (LossScale's: the step found a
    non-finite gradient) true, the output is the input: a skipped step is
    not counted, as torch.optim's `step` state is not.

    ```mlir
    %step1 = shardc.Increment %step : tensor<f32>
    %step2 = shardc.Increment %step unless %skip : tensor<f32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$input,
                   Optional<Shardc_SkipFlag>:$skip);
  let results = (outs StaticShapeTensorOf<[F32]>:$output);
  let assemblyFormat = "$input (`unless` $skip^)? attr-dict `:` type($input)";
}

def Shardc_SGDUpdateOp : Shardc_Op<"SGDUpdate", [Pure, AttrSizedOperandSegments,
    Shardc_OptimizerUpdateOpInterface,
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param", "new_momentum_buffer"]>]> {
  let summary = "PyTorch's SGD step (momentum, dampening, Nesterov, weight decay)";
  let description = [{
    One step of torch.optim.SGD, emitted by `shardc-optimizer`:
    `d = grad + weight_decay * param`; with `momentum` != 0,
    `buf = momentum * momentum_buffer + (1 - dampening) * d` (just `d` when
    `step` = 1) and `d = nesterov ? d + momentum * buf : buf`; then
    `new_param = param - lr * d`. `param`, `grad`, `momentum_buffer` and both
    results share one float tensor type, and `step` is the f32 step counter
    after its `shardc.Increment`. The results replace `param` and
    `momentum_buffer` in place at run time. Hyper-parameters are f64, as
    PyTorch's are Python floats. With `lr_schedule` (and its
    `warmup_steps`, `decay_steps`, `min_lr_ratio`; see LrScheduleAttr) the
    learning rate of the step is `lr` times the schedule's factor. With
    `grad_scale` (an f32 scalar: gradient clipping's ClipCoefficient), the
    step uses `grad * grad_scale`, multiplied in the element type first, as
    torch.nn.utils.clip_grad_norm_ scales the gradients in place before the
    optimizer reads them (with loss scaling, GradScaler's unscale too).
    With `skip` (LossScale's) true the step changes nothing: the results are
    `param` and `momentum_buffer`, as GradScaler skips `optimizer.step()`
    when a gradient is not finite. With `lr_step` the schedule is at that
    counter instead of `step` (loss scaling: `step` counts the steps taken,
    `lr_step` every step, as torch.optim.lr_scheduler stepped each
    iteration).

    ```mlir
    %w1, %buf1 = shardc.SGDUpdate %w, %dw, %buf, %step
        {dampening = 0.000000e+00 : f64, lr = 1.000000e-02 : f64,
         momentum = 9.000000e-01 : f64, nesterov = false,
         weight_decay = 0.000000e+00 : f64}
        : tensor<4x3xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$param, Shardc_FloatTensor:$grad,
                   Shardc_FloatTensor:$momentum_buffer,
                   StaticShapeTensorOf<[F32]>:$step, F64Attr:$lr,
                   F64Attr:$momentum, F64Attr:$dampening,
                   F64Attr:$weight_decay, BoolAttr:$nesterov,
                   OptionalAttr<Shardc_LrScheduleAttr>:$lr_schedule,
                   OptionalAttr<I64Attr>:$warmup_steps,
                   OptionalAttr<I64Attr>:$decay_steps,
                   OptionalAttr<F64Attr>:$min_lr_ratio,
                   Optional<0DTensorOf<[F32]>>:$grad_scale,
                   Optional<Shardc_SkipFlag>:$skip,
                   Optional<Shardc_F32Scalar>:$lr_step);
  let results = (outs Shardc_FloatTensor:$new_param,
                 Shardc_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $step (`scaled_by` $grad_scale^)?
    (`unless` $skip^)? (`lr_at` $lr_step^)? attr-dict
    `:` type($param) `,` type($step) (`,` type($grad_scale)^)?
  }];
  let hasVerifier = 1;
}

def Shardc_AdamUpdateOp : Shardc_Op<"AdamUpdate", [Pure, AttrSizedOperandSegments,
    Shardc_OptimizerUpdateOpInterface,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "new_param", "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "PyTorch's Adam or AdamW step with bias correction";
  let description = [{
    One step of torch.optim.Adam, or AdamW with `decoupled` (amsgrad off),
    emitted by `shardc-optimizer`. Weight decay is
    `param *= 1 - lr * weight_decay` with `decoupled`, else
    `grad += weight_decay * param`; then
    `exp_avg = beta1 * exp_avg + (1 - beta1) * grad`,
    `exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2` and
    `param -= lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps)`.
    All operands but `step` (the f32 counter after its `shardc.Increment`) and
    all results share one float tensor type; the results replace `param`,
    `exp_avg` and `exp_avg_sq` in place at run time. Hyper-parameters, the
    optional learning-rate schedule, `grad_scale`, `skip` and `lr_step` are
    SGDUpdate's.

    ```mlir
    %w1, %m1, %v1 = shardc.AdamUpdate %w, %dw, %m, %v, %step
        {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64,
         decay_steps = 1000 : i64, decoupled = true, eps = 1.000000e-08 : f64,
         lr = 1.000000e-03 : f64, lr_schedule = #shardc.lr_schedule<cosine>,
         min_lr_ratio = 1.000000e-01 : f64, warmup_steps = 100 : i64,
         weight_decay = 1.000000e-02 : f64}
        : tensor<4x3xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$param, Shardc_FloatTensor:$grad,
                   Shardc_FloatTensor:$exp_avg, Shardc_FloatTensor:$exp_avg_sq,
                   StaticShapeTensorOf<[F32]>:$step, F64Attr:$lr,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                   F64Attr:$weight_decay, BoolAttr:$decoupled,
                   OptionalAttr<Shardc_LrScheduleAttr>:$lr_schedule,
                   OptionalAttr<I64Attr>:$warmup_steps,
                   OptionalAttr<I64Attr>:$decay_steps,
                   OptionalAttr<F64Attr>:$min_lr_ratio,
                   Optional<0DTensorOf<[F32]>>:$grad_scale,
                   Optional<Shardc_SkipFlag>:$skip,
                   Optional<Shardc_F32Scalar>:$lr_step);
  let results = (outs Shardc_FloatTensor:$new_param,
                 Shardc_FloatTensor:$new_exp_avg,
                 Shardc_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $step (`scaled_by` $grad_scale^)?
    (`unless` $skip^)? (`lr_at` $lr_step^)? attr-dict
    `:` type($param) `,` type($step) (`,` type($grad_scale)^)?
  }];
  let hasVerifier = 1;
}

def Shardc_PartialNormOp : Shardc_Op<"PartialNorm", [Pure]> {
  let summary = "One tensor's share of a gradient norm, added to a running one";
  let description = [{
    Gradient clipping's accumulation (emitted by `shardc-clip-gradients`):
    for `norm_type` l2, `init + sum(input^2)`; for inf,
    `max(init, max(|input|))`; `init` is 0 when absent. The result is an
    f64 scalar, accumulated in f64 whatever the input's float type (a sum of
    squares of f32 gradients overflows f32 long before their norm does); a
    NaN anywhere gives NaN (as torch.linalg.vector_norm). Chained over the
    gradients a rank holds, it yields the rank's part of the total norm that
    ClipCoefficient finishes.

    ```mlir
    %s0 = shardc.PartialNorm %dw {norm_type = #shardc.norm_type<l2>}
        : (tensor<4x3xf32>) -> tensor<f64>
    %s1 = shardc.PartialNorm %db, %s0 {norm_type = #shardc.norm_type<l2>}
        : (tensor<4xf32>, tensor<f64>) -> tensor<f64>
    ```
  }];
  let arguments = (ins Shardc_FloatTensor:$input,
                   Optional<0DTensorOf<[F64]>>:$init,
                   Shardc_NormTypeAttr:$norm_type);
  let results = (outs 0DTensorOf<[F64]>:$result);
  let assemblyFormat = [{
    $input (`,` $init^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Shardc_ClipCoefficientOp : Shardc_Op<"ClipCoefficient", [Pure]> {
  let summary = "The total gradient norm and the factor that clips it";
  let description = [{
    Finishes a gradient norm accumulated by PartialNorm (over every rank's
    shards, once reduced; f64): `norm` is `sqrt(total)` for `norm_type` l2
    and `total` for inf, rounded to f32, and `coefficient` is
    `min(max_norm / (norm + 1e-6), 1)`, computed in f32 as
    torch.nn.utils.clip_grad_norm_ computes its clamped clip coefficient.
    The optimizer updates multiply their gradients by the coefficient
    (their `grad_scale`). A NaN or infinite norm gives a NaN or zero
    coefficient, as in PyTorch. `max_norm` must be finite and positive.

    With `unscale` (LossScale's: the gradients are still multiplied by the
    loss scale) the norm is the unscaled gradients', `norm * unscale` in
    f32, and the coefficient clips and unscales at once: the clamped factor
    times `unscale`, as GradScaler's `unscale_` before clipping.

    ```mlir
    %norm, %coef = shardc.ClipCoefficient %total
        {max_norm = 1.000000e+00 : f64, norm_type = #shardc.norm_type<l2>}
        : tensor<f64> -> tensor<f32>, tensor<f32>
    %norm2, %coef2 = shardc.ClipCoefficient %total unscaled_by %unscale
        {max_norm = 1.000000e+00 : f64, norm_type = #shardc.norm_type<l2>}
        : tensor<f64> -> tensor<f32>, tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F64]>:$total,
                   Optional<Shardc_F32Scalar>:$unscale, F64Attr:$max_norm,
                   Shardc_NormTypeAttr:$norm_type);
  let results = (outs 0DTensorOf<[F32]>:$norm, 0DTensorOf<[F32]>:$coefficient);
  let assemblyFormat = [{
    $total (`unscaled_by` $unscale^)? attr-dict `:` type($total) `->` type($norm) `,` type($coefficient)
  }];
  let hasVerifier = 1;
}

def Shardc_LossScaleOp : Shardc_Op<"LossScale", [Pure]> {
  let summary = "Dynamic loss scaling: skip, unscale and the next scale";
  let description = [{
    torch.cuda.amp.GradScaler's step and update (FairScale's
    ShardedGradScaler), emitted by `shardc-unscale-gradients` after the last
    gradient. `total` is the gradients' sum of squares over every rank
    (PartialNorm l2, f64), which is finite exactly when every gradient
    element is: `skip` is true when it is not. `scale` (the loss-scale
    state, f32) multiplied the loss this step; the results are `unscale`,
    `1 / scale` (computed in f64 and rounded, as GradScaler's `inv_scale`),
    which the updates multiply their gradients by; `used`, the scale itself
    (the step's log); and the state's next values: on a skipped step
    `new_scale = scale * backoff_factor` and `new_tracker = 0`, otherwise
    `new_tracker = tracker + 1` and, when that reaches `growth_interval`,
    `new_scale = scale * growth_factor` (kept only if finite) and
    `new_tracker = 0` (PyTorch's `_amp_update_scale_`). `loss_scaling` holds
    the factors; a static scale has both 1.

    ```mlir
    %skip, %unscale, %used, %scale1, %tracker1 = shardc.LossScale %total, %scale, %tracker
        {loss_scaling = #shardc.loss_scaling<growth_factor = 2.000000e+00,
         backoff_factor = 5.000000e-01, growth_interval = 2000>}
    ```
  }];
  let arguments = (ins Shardc_F64Scalar:$total, Shardc_F32Scalar:$scale,
                   Shardc_F32Scalar:$tracker,
                   Shardc_LossScalingAttr:$loss_scaling);
  let results = (outs Shardc_SkipFlag:$skip, Shardc_F32Scalar:$unscale,
                 Shardc_F32Scalar:$used, Shardc_F32Scalar:$new_scale,
                 Shardc_F32Scalar:$new_tracker);
  let assemblyFormat = "$total `,` $scale `,` $tracker attr-dict";
}

//===----------------------------------------------------------------------===//
// Collectives over flat buffers (lowered from the mesh dialect)
//===----------------------------------------------------------------------===//

// Starting and finishing a collective communicates: both ops read and write
// the network, so nothing generic removes, merges or reorders them (see
// Shardc_CommResource). A start yields a handle that only the wait consumes.
defvar Shardc_Communicates = MemoryEffects<[MemRead<Shardc_CommResource>,
                                            MemWrite<Shardc_CommResource>]>;

// `world_size` is the number of ranks the collective spans: every rank, or
// with a mesh of several axes (hybrid sharding) the group of ranks along the
// axes `mesh_axes` lists (the ranks that differ from this one only along
// them; absent: every axis).
class Shardc_CollectiveStartOp<string mnemonic, list<Trait> traits = []>
    : Shardc_Op<mnemonic, !listconcat(traits, [Shardc_Communicates])> {
  let arguments = (ins StaticShapeTensorOf<[AnyType]>:$input,
                   I64Attr:$world_size,
                   OptionalAttr<DenseI64ArrayAttr>:$mesh_axes);
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
    Starts gathering every rank's 1-d `input` into one buffer, in rank order:
    the handle's tensor is 1-d with `world_size` times the input's elements, of
    the same element type, and is readable after the `shardc.CollectiveWait`
    that consumes the handle. The input stays alive until then.
    `shardc-lower-collectives` emits it for `mesh.all_gather` (ZeRO-3 parameter
    gathers, and the rebuilding of parameters from updated shards).

    ```mlir
    %h = shardc.AllGatherStart %shard {world_size = 2 : i64}
        : tensor<3xf32> -> !shardc.pending<tensor<6xf32>>
    %full = shardc.CollectiveWait %h : tensor<6xf32>
    ```

    With hybrid sharding (a 2-d mesh of groups x ranks per group), within
    the group: `{mesh_axes = array<i64: 1>, world_size = 2 : i64}`.
  }];
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` qualified(type($pending))
  }];
}

def Shardc_ReduceScatterStartOp
    : Shardc_CollectiveStartOp<"ReduceScatterStart"> {
  let summary = "Start a sum over ranks of a 1-d buffer, keeping this rank's chunk";
  let description = [{
    Starts the elementwise sum over the `world_size` ranks of the 1-d `input`,
    of which rank r keeps chunk r: the handle's tensor is 1-d with
    1/`world_size` of the input's elements, of the same element type, and is
    readable after the `shardc.CollectiveWait` that consumes the handle.
    `shardc-lower-collectives` emits it for `mesh.reduce_scatter` (ZeRO-2 and
    ZeRO-3 gradient shards).

    ```mlir
    %h = shardc.ReduceScatterStart %grads {world_size = 2 : i64}
        : tensor<6xf32> -> !shardc.pending<tensor<3xf32>>
    %mine = shardc.CollectiveWait %h : tensor<3xf32>
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
    Starts the elementwise sum over the `world_size` ranks of `input`; the
    handle's tensor has the input's type and is readable after the
    `shardc.CollectiveWait` that consumes the handle. The verifier requires a
    positive `world_size`. `shardc-lower-collectives` emits it for
    `mesh.all_reduce` (the gradient buckets of `shardc-bucket-gradients`).

    ```mlir
    %h = shardc.AllReduceStart %bucket {world_size = 2 : i64} : tensor<8xf32>
    %sum = shardc.CollectiveWait %h : tensor<8xf32>
    ```
  }];
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// Moving a buffer between the rank's memory and the offload tier
// (`shardc-offload`): asynchronous like a collective, finished by the same
// CollectiveWait, and like a collective never removed, merged or reordered.
class Shardc_OffloadStartOp<string mnemonic>
    : Shardc_Op<mnemonic, [Shardc_Communicates,
        TypesMatchWith<"the handle is pending the input's type", "input",
                       "pending",
                       "PendingType::get(::llvm::cast<::mlir::RankedTensorType>($_self))">]> {
  let arguments = (ins StaticShapeTensorOf<[AnyType]>:$input);
  let results = (outs Shardc_PendingType:$pending);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` qualified(type($pending))
  }];
}

def Shardc_OffloadReadStartOp : Shardc_OffloadStartOp<"OffloadReadStart"> {
  let summary = "Start reading a buffer of the offload tier into memory";
  let description = [{
    Starts copying `input`, an argument that lives in the offload tier
    (`shardc.offload`), into a buffer of the rank's memory, readable after
    the `shardc.CollectiveWait` that consumes the handle. On the CPU backend
    the tier is a file (`shardrun --offload-dir`) and the copy one read on
    the executor's I/O thread.

    ```mlir
    %h = shardc.OffloadReadStart %m : tensor<4xf32> -> !shardc.pending<tensor<4xf32>>
    %copy = shardc.CollectiveWait %h : tensor<4xf32>
    ```
  }];
}

def Shardc_OffloadWriteStartOp : Shardc_OffloadStartOp<"OffloadWriteStart"> {
  let summary = "Start writing a buffer back into the offload tier";
  let description = [{
    Starts copying `input` into the offload tier; the handle's tensor, after
    its `shardc.CollectiveWait`, is returned as the in-place update of an
    offloaded argument, whose tier buffer plan lowering makes the write's
    destination. The input stays alive until the wait.

    ```mlir
    %h = shardc.OffloadWriteStart %m2 : tensor<4xf32> -> !shardc.pending<tensor<4xf32>>
    %m_new = shardc.CollectiveWait %h : tensor<4xf32>
    return ..., %m_new, ...
    ```
  }];
}

def Shardc_CollectiveWaitOp : Shardc_Op<"CollectiveWait", [
    Shardc_Communicates,
    TypesMatchWith<"the handle is pending the result's type", "result",
                   "pending", "PendingType::get(::llvm::cast<::mlir::RankedTensorType>($_self))">]> {
  let summary = "Wait until a started collective has written its buffer";
  let description = [{
    Waits for the collective whose `!shardc.pending` handle it consumes and
    yields the tensor the collective produced (the type the handle is pending).
    Like the starts it communicates, so no generic transformation removes,
    merges or reorders it. Plan lowering requires every start to be waited
    for exactly once (the IR alone does not).
    `shardc-lower-collectives` emits it right after its start, and
    `shardc-schedule-collectives` sinks it to just before the first use, so that
    computation overlaps the communication.

    ```mlir
    %h = shardc.AllGatherStart %shard {world_size = 2 : i64}
        : tensor<3xf32> -> !shardc.pending<tensor<6xf32>>
    %full = shardc.CollectiveWait %h : tensor<6xf32>
    ```
  }];
  let arguments = (ins Shardc_PendingType:$pending);
  let results = (outs StaticShapeTensorOf<[AnyType]>:$result);
  let assemblyFormat = "$pending attr-dict `:` type($result)";
}

def Shardc_ShardSliceOp : Shardc_Op<"ShardSlice", [Pure]> {
  let summary = "This rank's chunk of 1-d buffers laid end to end (no communication)";
  let description = [{
    This rank's chunk of its 1-d inputs laid end to end, without
    communication: with `x` their concatenation and `n = size(x) /
    world_size`, `output = x[rank * n, (rank + 1) * n)`, the rank coming
    from the executor at run time (with `mesh_axes`, the rank's position in
    its group along those axes, of `world_size` ranks). The inputs have
    `world_size` times the output's elements together, all of the output's
    element type (any). `shardc-lower-collectives` emits it for
    `mesh.all_slice` (the parameter and gradient shards of ZeRO), taking the
    parts of a 1-d `shardc.Concat` as its inputs, so that a rank copies its
    own chunk once instead of the whole concatenation and then the chunk.

    ```mlir
    %mine = shardc.ShardSlice %flat {world_size = 2 : i64} : tensor<6xf32> -> tensor<3xf32>
    %part = shardc.ShardSlice %w, %b {world_size = 2 : i64} : tensor<4xf32>, tensor<2xf32> -> tensor<3xf32>
    ```
  }];
  let arguments = (ins Variadic<StaticShapeTensorOf<[AnyType]>>:$inputs,
                   I64Attr:$world_size, OptionalAttr<DenseI64ArrayAttr>:$mesh_axes);
  let results = (outs StaticShapeTensorOf<[AnyType]>:$output);
  let hasVerifier = 1;
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($output)";
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def Shardc_FusedElementwiseOp : Shardc_Op<"FusedElementwise", [Pure,
    IsolatedFromAbove, SingleBlock]> {
  let summary = "A chain of elementwise float32 ops run as one kernel";
  let description = [{
    The ops of its body, run as one pass over memory: the body's block
    arguments are the inputs, its `shardc.Yield` gives the results.
    `shardc-fuse-elementwise` makes it from chains of elementwise ops, after
    everything else in the pipeline, so that a chain reads its inputs and
    writes its results once instead of writing and reading every
    intermediate tensor. Plan lowering turns the body into the plan op's
    `program` (runtime/kernels/FusedOps.h), whose kernels compute what the
    body's ops compute one by one, bit for bit.

    The verifier requires: every body op one that FusedOps.h lists, on f32
    values (a Where's condition: an i1 input), with the results' shape (all
    results have one shape); every input broadcasting to that shape as
    `input[(i / inner) % size]` (equal, scalar, trailing or per-row); at
    most 16 inputs, 48 body ops and 8 results.

    ```mlir
    %y = shardc.FusedElementwise %x, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %h: tensor<f32>):
      %e = shardc.Erf %a : tensor<4x8xf32>
      %m = shardc.Mul %e, %h : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
      shardc.Yield %m : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Shardc_Tensor>:$inputs);
  let results = (outs Variadic<Shardc_Tensor>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, results) $body
  }];
}

def Shardc_YieldOp : Shardc_Op<"Yield", [Pure, Terminator,
    HasParent<"FusedElementwiseOp">]> {
  let summary = "The results of a shardc.FusedElementwise body";
  let description = [{
    Ends a `shardc.FusedElementwise` body; its operands are the op's
    results, of the same types.

    ```mlir
    shardc.Yield %m : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Shardc_Tensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

#endif // SHARDC_OPS_TD
