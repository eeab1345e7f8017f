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

// A linear layer over 3-d activations: the bias Add becomes the Gemm's C
// (beta 1), through the Reshape, with the ops' attributes.
// CHECK-LABEL: func.func @bias_into_gemm
// CHECK: %[[X2:.*]] = shardc.Reshape %arg0 {shardc.micro_batch = 1 : i64} : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[G:.*]] = shardc.Gemm %[[X2]], %arg1, %arg2 {shardc.micro_batch = 1 : i64, transB = true} : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<6x5xf32>
// CHECK: %[[Y:.*]] = shardc.Reshape %[[G]] {shardc.micro_batch = 1 : i64} : tensor<6x5xf32> -> tensor<2x3x5xf32>
// CHECK-NOT: shardc.Add
// CHECK: return %[[Y]]
func.func @bias_into_gemm(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %t = shardc.Transpose %w {perm = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
  %y = shardc.MatMul %x, %t {shardc.micro_batch = 1 : i64} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %z = shardc.Add %b, %y {shardc.micro_batch = 1 : i64} : (tensor<5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %z : tensor<2x3x5xf32>
}

// A [1, 1, N] bias is reshaped to [N] first.
// CHECK-LABEL: func.func @bias_row_of_rank_3
// CHECK: %[[C:.*]] = shardc.Reshape %arg2 : tensor<1x1x5xf32> -> tensor<5xf32>
// CHECK: shardc.Gemm %{{.*}}, %arg1, %[[C]] {transB = true}
// CHECK-NOT: shardc.Add
func.func @bias_row_of_rank_3(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>, %b: tensor<1x1x5xf32>) -> tensor<2x3x5xf32> {
  %t = shardc.Transpose %w {perm = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
  %y = shardc.MatMul %x, %t : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %z = shardc.Add %y, %b : (tensor<2x3x5xf32>, tensor<1x1x5xf32>) -> tensor<2x3x5xf32>
  return %z : tensor<2x3x5xf32>
}

// Not folded: an Add that is no bias row (a residual), a product with
// another use, a Gemm that has a C already, attributes that differ.
// CHECK-LABEL: func.func @not_a_bias
// CHECK-COUNT-4: shardc.Add
func.func @not_a_bias(%x: tensor<6x4xf32>, %w: tensor<5x4xf32>, %r: tensor<6x5xf32>, %b: tensor<5xf32>) -> (tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>) {
  %g1 = shardc.Gemm %x, %w {transB = true} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %a1 = shardc.Add %g1, %r : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  %g2 = shardc.Gemm %x, %w {transB = true} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %a2 = shardc.Add %g2, %b : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %g3 = shardc.Gemm %x, %w, %r {transB = true} : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  %a3 = shardc.Add %g3, %b : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %g4 = shardc.Gemm %x, %w {transB = true} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %a4 = shardc.Add %g4, %b {shardc.backward} : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  return %a1, %a2, %g2, %a3, %a4 : tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>
}
