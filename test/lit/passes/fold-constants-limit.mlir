// RUN: shardc-opt %s -split-input-file -shardc-fold-constants=fold-limit=1024 | FileCheck %s
// RUN: not shardc-opt %s -split-input-file -shardc-fold-constants=fold-limit=0 2>&1 | FileCheck %s --check-prefix=RANGE

// The fold budget bounds every tensor a fold creates or reads: folding
// materializes a splat operand whole, so a reduction of a constant larger
// than the budget runs at execution time even though its result is small.

// CHECK-LABEL: func.func @operand_over_budget(
// CHECK:         %[[C:.*]] = shardc.Constant dense<1.000000e+00> : tensor<257xf32>
// CHECK-NEXT:    %[[S:.*]] = shardc.ReduceSum %[[C]]
// CHECK-NEXT:    return %[[S]]
func.func @operand_over_budget() -> tensor<f32> {
  %0 = shardc.Constant dense<1.0> : tensor<257xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<257xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// At the budget (256 floats, 1024 bytes) it folds.
// CHECK-LABEL: func.func @at_budget(
// CHECK:         %[[C:.*]] = shardc.Constant dense<2.560000e+02> : tensor<f32>
// CHECK-NEXT:    return %[[C]]
func.func @at_budget() -> tensor<f32> {
  %0 = shardc.Constant dense<1.0> : tensor<256xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<256xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// A budget outside its range is refused where the pass option is read.
// RANGE: error: fold-constants: fold-limit must be in [1024, 1099511627776], got 0
