// RUN: shardc-opt %s -canonicalize | FileCheck %s

// MatMul(x, Transpose(w)) becomes a Gemm with transB (no transpose is
// materialized). The new ops keep the MatMul's discardable attributes: a
// backward use must stay one, or ZeRO-3 would keep the unit's forward gather
// alive into backward instead of gathering it again.
// CHECK-LABEL: func.func @backward_use
// CHECK: %[[X2:.*]] = shardc.Reshape %arg0 {shardc.backward, shardc.micro_batch = 1 : i64} : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[G:.*]] = shardc.Gemm %[[X2]], %arg1 {shardc.backward, shardc.micro_batch = 1 : i64, transB = true}
// CHECK: shardc.Reshape %[[G]] {shardc.backward, shardc.micro_batch = 1 : i64} : tensor<6x5xf32> -> tensor<2x3x5xf32>
// CHECK-NOT: shardc.Transpose
func.func @backward_use(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x5xf32> {
  %t = shardc.Transpose %w {perm = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
  %y = shardc.MatMul %x, %t {shardc.backward, shardc.micro_batch = 1 : i64} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// Without attributes, none appear.
// CHECK-LABEL: func.func @forward_use
// CHECK: shardc.Gemm %arg0, %arg1 {transB = true} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
func.func @forward_use(%x: tensor<6x4xf32>, %w: tensor<5x4xf32>) -> tensor<6x5xf32> {
  %t = shardc.Transpose %w {perm = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
  %y = shardc.MatMul %x, %t : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}
