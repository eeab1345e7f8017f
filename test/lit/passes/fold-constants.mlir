// RUN: shardc-opt %s -split-input-file -shardc-fold-constants \
// RUN:   | FileCheck %s --implicit-check-not="shardc.{{Concat|Split|Shape|Transpose|Div|Cast|Where|Slice|ReduceSum}}"

// Ops that no case keeps must not be left anywhere (--implicit-check-not);
// every case checks the constants that replace them.

// The example of the pass description: a Concat of constants.
// CHECK-LABEL: func.func @concat(
// CHECK:         %[[C:.*]] = shardc.Constant dense<[2, 3, 4]> : tensor<3xi64>
// CHECK-NEXT:    return %[[C]]
func.func @concat() -> tensor<3xi64> {
  %0 = shardc.Constant dense<[2, 3]> : tensor<2xi64>
  %1 = shardc.Constant dense<4> : tensor<1xi64>
  %2 = shardc.Concat %0, %1 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  return %2 : tensor<3xi64>
}

// -----

// A chain folds in one walk; broadcasting is the kernels'.
// CHECK-LABEL: func.func @chain(
// CHECK-NOT:     shardc.Mul
// CHECK-NOT:     shardc.Add
// CHECK:         %[[C:.*]] = shardc.Constant dense<{{\[}}[1.050000e+01, 4.050000e+01, 9.050000e+01], [4.050000e+01, 1.005000e+02, 1.805000e+02]]> : tensor<2x3xf32>
// CHECK-NEXT:    return %[[C]]
func.func @chain() -> tensor<2x3xf32> {
  %0 = shardc.Constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %1 = shardc.Constant dense<[10.0, 20.0, 30.0]> : tensor<3xf32>
  %2 = shardc.Constant dense<0.5> : tensor<f32>
  %3 = shardc.Mul %0, %1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = shardc.Add %3, %2 : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %4 : tensor<2x3xf32>
}

// -----

// Shape folds through its own folder: it needs only its operand's type.
// CHECK-LABEL: func.func @shape(
// CHECK-NEXT:    %[[C:.*]] = shardc.Constant dense<[3, 4]> : tensor<2xi64>
// CHECK-NEXT:    return %[[C]]
func.func @shape(%arg0: tensor<2x3x4xf32>) -> tensor<2xi64> {
  %0 = shardc.Shape %arg0 {start = 1 : i64} : tensor<2x3x4xf32> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// Reshape's folder: a constant gets the new type, a no-op Reshape of any
// value is its input; a real Reshape of a non-constant stays.
// CHECK-LABEL: func.func @reshape(
// CHECK-SAME:    %[[ARG:.*]]: tensor<2x3xf32>)
// CHECK-NEXT:    %[[IN:.*]] = shardc.Constant dense<{{\[}}[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
// CHECK-NEXT:    %[[R:.*]] = shardc.Constant dense<{{\[}}[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
// CHECK-NEXT:    %[[FLAT:.*]] = shardc.Reshape %[[ARG]] : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT:    return %[[R]], %[[IN]], %[[ARG]], %[[FLAT]] :
func.func @reshape(%arg0: tensor<2x3xf32>) -> (tensor<3x2xi64>, tensor<2x3xi64>, tensor<2x3xf32>, tensor<6xf32>) {
  %0 = shardc.Constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %1 = shardc.Reshape %0 : tensor<2x3xi64> -> tensor<3x2xi64>
  %2 = shardc.Reshape %0 : tensor<2x3xi64> -> tensor<2x3xi64>
  %3 = shardc.Reshape %arg0 : tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = shardc.Reshape %arg0 : tensor<2x3xf32> -> tensor<6xf32>
  return %1, %2, %3, %4 : tensor<3x2xi64>, tensor<2x3xi64>, tensor<2x3xf32>, tensor<6xf32>
}

// -----

// Every result of a multi-result op becomes a constant.
// CHECK-LABEL: func.func @split(
// CHECK:         %[[A:.*]] = shardc.Constant dense<{{\[}}[1, 2]]> : tensor<1x2xi64>
// CHECK-NEXT:    %[[B:.*]] = shardc.Constant dense<{{\[}}[3, 4], [5, 6]]> : tensor<2x2xi64>
// CHECK-NEXT:    return %[[A]], %[[B]]
func.func @split() -> (tensor<1x2xi64>, tensor<2x2xi64>) {
  %0 = shardc.Constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
  %1:2 = shardc.Split %0 {axis = 0 : i64} : tensor<3x2xi64> -> tensor<1x2xi64>, tensor<2x2xi64>
  return %1#0, %1#1 : tensor<1x2xi64>, tensor<2x2xi64>
}

// -----

// Folding runs the CPU kernels, with their semantics: i64 Div truncates
// toward zero, Cast to bool is `!= 0`, Slice steps may be negative, Gather
// indices may be negative.
// CHECK-LABEL: func.func @kernels(
// CHECK:         %[[TR:.*]] = shardc.Constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK:         %[[DIV:.*]] = shardc.Constant dense<[-3, 3]> : tensor<2xi64>
// CHECK:         %[[BOOL:.*]] = shardc.Constant dense<[false, true, true]> : tensor<3xi1>
// CHECK:         %[[WHERE:.*]] = shardc.Constant dense<[1.000000e+00, 5.000000e-01, -2.000000e+00]> : tensor<3xf32>
// CHECK:         %[[SLICE:.*]] = shardc.Constant dense<{{\[}}[6, 4], [3, 1]]> : tensor<2x2xi64>
// CHECK:         %[[SUM:.*]] = shardc.Constant dense<[5, 7, 9]> : tensor<3xi64>
// CHECK:         %[[CAT:.*]] = shardc.Constant dense<9> : tensor<2xi64>
// CHECK:         %[[I32:.*]] = shardc.Constant dense<9> : tensor<2xi32>
// CHECK:         return %[[TR]], %[[DIV]], %[[BOOL]], %[[WHERE]], %[[SLICE]], %[[SUM]], %[[CAT]], %[[I32]] :
func.func @kernels() -> (tensor<3x2xi64>, tensor<2xi64>, tensor<3xi1>, tensor<3xf32>, tensor<2x2xi64>, tensor<3xi64>, tensor<2xi64>, tensor<2xi32>) {
  %0 = shardc.Constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %1 = shardc.Transpose %0 {perm = array<i64: 1, 0>} : tensor<2x3xi64> -> tensor<3x2xi64>
  %d = shardc.Constant dense<[-7, 7]> : tensor<2xi64>
  %two = shardc.Constant dense<2> : tensor<i64>
  %2 = shardc.Div %d, %two : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %f = shardc.Constant dense<[0.0, 0.5, -2.0]> : tensor<3xf32>
  %3 = shardc.Cast %f : tensor<3xf32> -> tensor<3xi1>
  %g = shardc.Constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %4 = shardc.Where %3, %f, %g : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %5 = shardc.Slice %0 {starts = array<i64: 1, 2>, steps = array<i64: -1, -2>} : tensor<2x3xi64> -> tensor<2x2xi64>
  %6 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2x3xi64> -> tensor<3xi64>
  %m1 = shardc.Constant dense<[-1]> : tensor<1xi64>
  %7 = shardc.Gather %6, %m1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %8 = shardc.Concat %7, %7 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %9 = shardc.Cast %8 : tensor<2xi64> -> tensor<2xi32>
  return %1, %2, %3, %4, %5, %6, %8, %9 : tensor<3x2xi64>, tensor<2xi64>, tensor<3xi1>, tensor<3xf32>, tensor<2x2xi64>, tensor<3xi64>, tensor<2xi64>, tensor<2xi32>
}

// -----

// Must not fold: an op with a non-constant operand stays, and so does
// everything it feeds; only the constant Neg beside it folds.
// CHECK-LABEL: func.func @nonconst(
// CHECK-SAME:    %[[ARG:.*]]: tensor<2xf32>)
// CHECK:         %[[C:.*]] = shardc.Constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %[[ADD:.*]] = shardc.Add %[[ARG]], %[[C]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT:    %[[NEG:.*]] = shardc.Constant dense<[-1.000000e+00, -2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %[[MUL:.*]] = shardc.Mul %[[ADD]], %[[NEG]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT:    return %[[MUL]]
func.func @nonconst(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = shardc.Constant dense<[1.0, 2.0]> : tensor<2xf32>
  %1 = shardc.Add %arg0, %0 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = shardc.Neg %0 : tensor<2xf32>
  %3 = shardc.Mul %1, %2 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %3 : tensor<2xf32>
}

// -----

// Must not fold: results over the fold budget (fold-limit, 16 MiB by
// default; here 16 MiB and 4 bytes) are left to run at execution time.
// CHECK-LABEL: func.func @too_large(
// CHECK:         %[[C:.*]] = shardc.Constant dense<1.000000e+00> : tensor<4194305xf32>
// CHECK-NEXT:    %[[NEG:.*]] = shardc.Neg %[[C]] : tensor<4194305xf32>
// CHECK-NEXT:    return %[[NEG]]
func.func @too_large() -> tensor<4194305xf32> {
  %0 = shardc.Constant dense<1.0> : tensor<4194305xf32>
  %1 = shardc.Neg %0 : tensor<4194305xf32>
  return %1 : tensor<4194305xf32>
}

// -----

// Must not fold: the kernel rejects an out-of-range index; the op stays so
// that execution reports the error.
// CHECK-LABEL: func.func @kernel_error(
// CHECK:         %[[G:.*]] = shardc.Gather %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
// CHECK-NEXT:    return %[[G]]
func.func @kernel_error() -> tensor<1xi64> {
  %0 = shardc.Constant dense<[1, 2, 3]> : tensor<3xi64>
  %1 = shardc.Constant dense<[7]> : tensor<1xi64>
  %2 = shardc.Gather %0, %1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  return %2 : tensor<1xi64>
}
