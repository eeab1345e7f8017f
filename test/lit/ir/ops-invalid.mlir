// RUN: shardc-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of the shardc ops (ir/ShardcOps.cpp), in the
// order of that file. Type constraints of the ODS definitions come first.

func.func @dynamic_shape(%arg0: tensor<?x3xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %0 = shardc.Relu %arg0 : tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @sqrt_of_int(%arg0: tensor<3xi64>) -> tensor<3xi64> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = shardc.Sqrt %arg0 : tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

func.func @constant_type() -> tensor<3xi64> {
  // expected-error @+1 {{failed to verify that all of {value, output} have same type}}
  %0 = "shardc.Constant"() <{value = dense<[1, 2]> : tensor<2xi64>}> : () -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

func.func @shape_range(%arg0: tensor<2x3xf32>) -> tensor<1xi64> {
  // expected-error @+1 {{'shardc.Shape' op start/end out of range for rank 2}}
  %0 = shardc.Shape %arg0 {start = 1 : i64, end = 3 : i64} : tensor<2x3xf32> -> tensor<1xi64>
  return %0 : tensor<1xi64>
}

// -----

func.func @shape_result(%arg0: tensor<2x3xf32>) -> tensor<3xi64> {
  // expected-error @+1 {{'shardc.Shape' op result must be a 1-d tensor of 2 elements}}
  %0 = shardc.Shape %arg0 : tensor<2x3xf32> -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

func.func @broadcast_mismatch(%arg0: tensor<2x3xf32>, %arg1: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.Add' op operand shapes [2, 3] and [4] do not broadcast}}
  %0 = shardc.Add %arg0, %arg1 : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_result(%arg0: tensor<2x1xf32>, %arg1: tensor<3xf32>) -> tensor<2x1xf32> {
  // expected-error @+1 {{'shardc.Sub' op result shape [2, 1] is not the broadcast shape [2, 3]}}
  %0 = shardc.Sub %arg0, %arg1 : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

func.func @binary_element_types(%arg0: tensor<3xf32>, %arg1: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.Mul' op requires the same element type for all operands and results}}
  %0 = shardc.Mul %arg0, %arg1 : (tensor<3xf32>, tensor<3xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @binary_result_type(%arg0: tensor<3xf32>) -> tensor<3xf64> {
  // expected-error @+1 {{'shardc.Div' op requires the same element type for all operands and results}}
  %0 = shardc.Div %arg0, %arg0 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}

// -----

func.func @pow_result_type(%arg0: tensor<3xf32>, %arg1: tensor<3xi64>) -> tensor<3xi64> {
  // expected-error @+1 {{'shardc.Pow' op result element type must be 'f32'}}
  %0 = shardc.Pow %arg0, %arg1 : (tensor<3xf32>, tensor<3xi64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

func.func @where_types(%arg0: tensor<3xi1>, %arg1: tensor<3xf32>, %arg2: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.Where' op failed to verify that all of {x, y, output} have same element type}}
  %0 = shardc.Where %arg0, %arg1, %arg2 : (tensor<3xi1>, tensor<3xf32>, tensor<3xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @where_broadcast(%arg0: tensor<2xi1>, %arg1: tensor<3xf32>, %arg2: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.Where' op operand shapes [2] and [3] and [3] do not broadcast}}
  %0 = shardc.Where %arg0, %arg1, %arg2 : (tensor<2xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @cast_shape(%arg0: tensor<3xf32>) -> tensor<4xi64> {
  // expected-error @+1 {{'shardc.Cast' op result shape must equal the input shape}}
  %0 = shardc.Cast %arg0 : tensor<3xf32> -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @cast_target(%arg0: tensor<3xf32>) -> tensor<3xi16> {
  // expected-error @+1 {{'shardc.Cast' op unsupported target element type 'i16'}}
  %0 = shardc.Cast %arg0 : tensor<3xf32> -> tensor<3xi16>
  return %0 : tensor<3xi16>
}

// -----

//===----------------------------------------------------------------------===//
// Linear algebra, normalization
//===----------------------------------------------------------------------===//

func.func @gemm_rank(%arg0: tensor<2x3x4xf32>, %arg1: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{'shardc.Gemm' op A and B must be 2-d}}
  %0 = shardc.Gemm %arg0, %arg1 : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gemm_inner(%arg0: tensor<2x3xf32>, %arg1: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{'shardc.Gemm' op inner dimensions differ: 3 vs 4}}
  %0 = shardc.Gemm %arg0, %arg1 : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gemm_trans_inner(%arg0: tensor<3x2xf32>, %arg1: tensor<3x5xf32>) -> tensor<2x5xf32> {
  // transB makes B (5, 3): its inner dim is 5.
  // expected-error @+1 {{'shardc.Gemm' op inner dimensions differ: 3 vs 5}}
  %0 = shardc.Gemm %arg0, %arg1 {transA = true, transB = true} : (tensor<3x2xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gemm_result(%arg0: tensor<2x3xf32>, %arg1: tensor<3x5xf32>) -> tensor<5x2xf32> {
  // expected-error @+1 {{'shardc.Gemm' op result must be [2, 5]}}
  %0 = shardc.Gemm %arg0, %arg1 : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<5x2xf32>
  return %0 : tensor<5x2xf32>
}

// -----

func.func @gemm_c(%arg0: tensor<2x3xf32>, %arg1: tensor<3x5xf32>, %arg2: tensor<3xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{'shardc.Gemm' op C of shape [3] does not broadcast to [2, 5]}}
  %0 = shardc.Gemm %arg0, %arg1, %arg2 : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<3xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @matmul_rank(%arg0: tensor<f32>, %arg1: tensor<3xf32>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.MatMul' op operands must have rank >= 1}}
  %0 = shardc.MatMul %arg0, %arg1 : (tensor<f32>, tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @matmul_types(%arg0: tensor<2x3xf32>, %arg1: tensor<3x4xi64>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shardc.MatMul' op operands and result must have one element type}}
  %0 = shardc.MatMul %arg0, %arg1 : (tensor<2x3xf32>, tensor<3x4xi64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul_inner(%arg0: tensor<2x3xf32>, %arg1: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{'shardc.MatMul' op inner dimensions differ: 3 vs 4}}
  %0 = shardc.MatMul %arg0, %arg1 : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @matmul_batch(%arg0: tensor<2x2x3xf32>, %arg1: tensor<3x3x4xf32>) -> tensor<3x2x4xf32> {
  // expected-error @+1 {{'shardc.MatMul' op batch dimensions do not broadcast}}
  %0 = shardc.MatMul %arg0, %arg1 : (tensor<2x2x3xf32>, tensor<3x3x4xf32>) -> tensor<3x2x4xf32>
  return %0 : tensor<3x2x4xf32>
}

// -----

func.func @matmul_vector_result(%arg0: tensor<3xf32>, %arg1: tensor<3x4xf32>) -> tensor<1x4xf32> {
  // The 1 prepended to a 1-D A is removed again.
  // expected-error @+1 {{'shardc.MatMul' op result shape [1, 4], expected [4]}}
  %0 = shardc.MatMul %arg0, %arg1 : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

func.func @pmm_rank(%arg0: tensor<5x4xf32>, %arg1: tensor<4x5xf32>) -> tensor<5x5xf32> {
  // expected-error @+1 {{'shardc.PermutedMatMul' op operands and result must have one rank, at least 3}}
  %0 = shardc.PermutedMatMul %arg0, %arg1 {a_perm = array<i64: 0, 1>, b_perm = array<i64: 0, 1>, output_perm = array<i64: 0, 1>} : (tensor<5x4xf32>, tensor<4x5xf32>) -> tensor<5x5xf32>
  return %0 : tensor<5x5xf32>
}

// -----

func.func @pmm_perm(%arg0: tensor<2x5x4xf32>, %arg1: tensor<2x4x5xf32>) -> tensor<2x5x5xf32> {
  // expected-error @+1 {{'shardc.PermutedMatMul' op a_perm must be a permutation of the 3 dimensions, got [0, 1, 1]}}
  %0 = shardc.PermutedMatMul %arg0, %arg1 {a_perm = array<i64: 0, 1, 1>, b_perm = array<i64: 0, 1, 2>, output_perm = array<i64: 0, 1, 2>} : (tensor<2x5x4xf32>, tensor<2x4x5xf32>) -> tensor<2x5x5xf32>
  return %0 : tensor<2x5x5xf32>
}

// -----

func.func @pmm_stride(%arg0: tensor<2x5x4xf32>, %arg1: tensor<4x2x5xf32>) -> tensor<2x5x5xf32> {
  // expected-error @+1 {{'shardc.PermutedMatMul' op b_perm [2, 0, 1] must keep the last dimension among the matrix's two}}
  %0 = shardc.PermutedMatMul %arg0, %arg1 {a_perm = array<i64: 0, 1, 2>, b_perm = array<i64: 2, 0, 1>, output_perm = array<i64: 0, 1, 2>} : (tensor<2x5x4xf32>, tensor<4x2x5xf32>) -> tensor<2x5x5xf32>
  return %0 : tensor<2x5x5xf32>
}

// -----

func.func @pmm_output(%arg0: tensor<2x5x4xf32>, %arg1: tensor<2x4x5xf32>) -> tensor<5x2x5xf32> {
  // expected-error @+1 {{'shardc.PermutedMatMul' op output_perm [1, 2, 0] must keep the last dimension last}}
  %0 = shardc.PermutedMatMul %arg0, %arg1 {a_perm = array<i64: 0, 1, 2>, b_perm = array<i64: 0, 1, 2>, output_perm = array<i64: 1, 2, 0>} : (tensor<2x5x4xf32>, tensor<2x4x5xf32>) -> tensor<5x2x5xf32>
  return %0 : tensor<5x2x5xf32>
}

// -----

func.func @pmm_inner(%arg0: tensor<2x5x4xf32>, %arg1: tensor<2x5x4xf32>) -> tensor<2x5x5xf32> {
  // expected-error @+1 {{'shardc.PermutedMatMul' op inner dimensions differ: 4 vs 5}}
  %0 = shardc.PermutedMatMul %arg0, %arg1 {a_perm = array<i64: 0, 1, 2>, b_perm = array<i64: 0, 1, 2>, output_perm = array<i64: 0, 1, 2>} : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x5xf32>
  return %0 : tensor<2x5x5xf32>
}

// -----

func.func @pmm_batch(%arg0: tensor<2x5x4xf32>, %arg1: tensor<3x4x5xf32>) -> tensor<2x5x5xf32> {
  // expected-error @+1 {{'shardc.PermutedMatMul' op permuted batch dimensions differ: [2] vs [3]}}
  %0 = shardc.PermutedMatMul %arg0, %arg1 {a_perm = array<i64: 0, 1, 2>, b_perm = array<i64: 0, 1, 2>, output_perm = array<i64: 0, 1, 2>} : (tensor<2x5x4xf32>, tensor<3x4x5xf32>) -> tensor<2x5x5xf32>
  return %0 : tensor<2x5x5xf32>
}

// -----

func.func @pmm_result(%arg0: tensor<2x5x4xf32>, %arg1: tensor<2x4x5xf32>) -> tensor<2x5x4xf32> {
  // expected-error @+1 {{'shardc.PermutedMatMul' op result shape [2, 5, 4], expected [2, 5, 5]}}
  %0 = shardc.PermutedMatMul %arg0, %arg1 {a_perm = array<i64: 0, 1, 2>, b_perm = array<i64: 0, 1, 2>, output_perm = array<i64: 0, 1, 2>} : (tensor<2x5x4xf32>, tensor<2x4x5xf32>) -> tensor<2x5x4xf32>
  return %0 : tensor<2x5x4xf32>
}

// -----

func.func @softmax_axis(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.Softmax' op axis 2 is out of range for rank 2}}
  %0 = shardc.Softmax %arg0 {axis = 2 : i64} : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @logsoftmax_negative_axis(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // Axes are normalized at import: a negative axis is invalid IR.
  // expected-error @+1 {{'shardc.LogSoftmax' op axis -1 is out of range for rank 2}}
  %0 = shardc.LogSoftmax %arg0 {axis = -1 : i64} : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @layernorm_axis(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.LayerNormalization' op axis 2 is out of range for rank 2}}
  %0:3 = shardc.LayerNormalization %arg0, %arg1 {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %0#0 : tensor<2x3xf32>
}

// -----

func.func @layernorm_result(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{'shardc.LayerNormalization' op result shape must equal the input shape}}
  %0:3 = shardc.LayerNormalization %arg0, %arg1 {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<3x2xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %0#0 : tensor<3x2xf32>
}

// -----

func.func @layernorm_scale(%arg0: tensor<2x3xf32>, %arg1: tensor<2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.LayerNormalization' op scale and bias must broadcast to the normalized shape [3]}}
  %0:3 = shardc.LayerNormalization %arg0, %arg1 {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %0#0 : tensor<2x3xf32>
}

// -----

func.func @layernorm_bias(%arg0: tensor<2x3xf32>, %arg1: tensor<3xf32>, %arg2: tensor<2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.LayerNormalization' op scale and bias must broadcast to the normalized shape [3]}}
  %0:3 = shardc.LayerNormalization %arg0, %arg1, %arg2 {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %0#0 : tensor<2x3xf32>
}

// -----

func.func @layernorm_stats(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'shardc.LayerNormalization' op mean and inv_std_dev must have shape [2, 1, 1]}}
  %0:3 = shardc.LayerNormalization %arg0, %arg1 {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2xf32>, tensor<2xf32>)
  return %0#0 : tensor<2x3x4xf32>
}

// -----

func.func @batchnorm_rank(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.BatchNormalization' op input must have rank >= 2 (N, C, ...)}}
  %0:3 = shardc.BatchNormalization %arg0, %arg1, %arg1, %arg1, %arg1 {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = false} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0 : tensor<3xf32>
}

// -----

func.func @batchnorm_stats_type(%arg0: tensor<2x3x4xbf16>, %arg1: tensor<3xbf16>, %arg2: tensor<3xf32>) -> tensor<2x3x4xbf16> {
  // expected-error @+1 {{'shardc.BatchNormalization' op mean, var and running statistics must have one element type, got 'f32' and 'bf16'}}
  %0:3 = shardc.BatchNormalization %arg0, %arg1, %arg1, %arg2, %arg1 {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = false} : (tensor<2x3x4xbf16>, tensor<3xbf16>, tensor<3xbf16>, tensor<3xf32>, tensor<3xbf16>) -> (tensor<2x3x4xbf16>, tensor<3xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x3x4xbf16>
}

// -----

func.func @batchnorm_stats(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3xf32>, %arg2: tensor<4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'shardc.BatchNormalization' op scale, bias, mean, var and running statistics must have shape [3]}}
  %0:3 = shardc.BatchNormalization %arg0, %arg1, %arg1, %arg2, %arg1 {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = false} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x3x4xf32>
}

// -----

func.func @batchnorm_running_stats(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'shardc.BatchNormalization' op scale, bias, mean, var and running statistics must have shape [3]}}
  %0:3 = shardc.BatchNormalization %arg0, %arg1, %arg1, %arg1, %arg1 {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<1x3x1xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x3x4xf32>
}

// -----

func.func @batchnorm_moments_without_count(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3xf32>, %m: tensor<6xf64>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'shardc.BatchNormalization' op takes moments and batch_count together}}
  %0:3 = shardc.BatchNormalization %arg0, %arg1, %arg1, %arg1, %arg1 moments %m {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<6xf64>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x3x4xf32>
}

// -----

func.func @batchnorm_moments_inference(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3xf32>, %m: tensor<6xf64>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'shardc.BatchNormalization' op moments need training_mode}}
  %0:3 = shardc.BatchNormalization %arg0, %arg1, %arg1, %arg1, %arg1 moments %m {batch_count = 16 : i64, epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = false} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<6xf64>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x3x4xf32>
}

// -----

func.func @batchnorm_moments_shape(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3xf32>, %m: tensor<3xf64>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'shardc.BatchNormalization' op moments must have shape [6] (two per channel)}}
  %0:3 = shardc.BatchNormalization %arg0, %arg1, %arg1, %arg1, %arg1 moments %m {batch_count = 16 : i64, epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf64>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x3x4xf32>
}

// -----

func.func @batchnorm_stats_count(%arg0: tensor<2x3x4xf32>) -> tensor<6xf64> {
  // expected-error @+1 {{'shardc.BatchNormStats' op count 12 must be a positive multiple of the input's 8 values per channel}}
  %0 = shardc.BatchNormStats %arg0 {count = 12 : i64} : (tensor<2x3x4xf32>) -> tensor<6xf64>
  return %0 : tensor<6xf64>
}

// -----

func.func @batchnorm_stats_result(%arg0: tensor<2x3x4xf32>) -> tensor<3xf64> {
  // expected-error @+1 {{'shardc.BatchNormStats' op result must have shape [6] (two per channel)}}
  %0 = shardc.BatchNormStats %arg0 {count = 16 : i64} : (tensor<2x3x4xf32>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}

// -----

func.func @batchnorm_grad_stats_moments(%arg0: tensor<2x3x4xf32>, %m: tensor<4xf64>) -> tensor<6xf64> {
  // expected-error @+1 {{'shardc.BatchNormGradStats' op moments must have shape [6] (two per channel)}}
  %0 = shardc.BatchNormGradStats %arg0, %arg0, %m {count = 16 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf64>) -> tensor<6xf64>
  return %0 : tensor<6xf64>
}

// -----

func.func @batchnorm_grad_half_moments(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3xf32>, %m: tensor<6xf64>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'shardc.BatchNormGrad' op takes moments and grad_moments together}}
  %0:3 = "shardc.BatchNormGrad"(%arg0, %arg0, %arg1, %arg1, %arg1, %m) {epsilon = 1.0e-5 : f32, training_mode = true, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0>} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<6xf64>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x3x4xf32>
}

// -----

func.func @batchnorm_result(%arg0: tensor<2x3x4xf32>, %arg1: tensor<3xf32>) -> tensor<2x3x5xf32> {
  // expected-error @+1 {{'shardc.BatchNormalization' op result shape must equal the input shape}}
  %0:3 = shardc.BatchNormalization %arg0, %arg1, %arg1, %arg1, %arg1 {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = false} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x5xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0 : tensor<2x3x5xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

func.func @conv_weight_rank(%arg0: tensor<1x2x5x5xf32>, %arg1: tensor<4x2x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'shardc.Conv' op weight rank must equal input rank}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<4x2x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @conv_group(%arg0: tensor<1x4x5x5xf32>, %arg1: tensor<6x1x3x3xf32>) -> tensor<1x6x3x3xf32> {
  // expected-error @+1 {{'shardc.Conv' op group 4 must divide input channels 4 and output channels 6}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 4 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<6x1x3x3xf32>) -> tensor<1x6x3x3xf32>
  return %0 : tensor<1x6x3x3xf32>
}

// -----

func.func @conv_group_zero(%arg0: tensor<1x4x5x5xf32>, %arg1: tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32> {
  // expected-error @+1 {{'shardc.Conv' op group 0 must divide input channels 4 and output channels 6}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 0 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32>
  return %0 : tensor<1x6x3x3xf32>
}

// -----

func.func @conv_weight_channels(%arg0: tensor<1x4x5x5xf32>, %arg1: tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32> {
  // expected-error @+1 {{'shardc.Conv' op weight has 4 input channels per group, expected 2}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 2 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32>
  return %0 : tensor<1x6x3x3xf32>
}

// -----

func.func @conv_kernel_shape(%arg0: tensor<1x4x5x5xf32>, %arg1: tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32> {
  // expected-error @+1 {{'shardc.Conv' op kernel_shape must equal the weight's spatial dims}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32>
  return %0 : tensor<1x6x4x4xf32>
}

// -----

func.func @conv_result_channels(%arg0: tensor<1x4x5x5xf32>, %arg1: tensor<6x4x3x3xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+1 {{'shardc.Conv' op result must have shape [N, M, ...] = [1, 6, ...]}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @conv_bias(%arg0: tensor<1x4x5x5xf32>, %arg1: tensor<6x4x3x3xf32>, %arg2: tensor<4xf32>) -> tensor<1x6x3x3xf32> {
  // expected-error @+1 {{'shardc.Conv' op bias must have shape [6]}}
  %0 = shardc.Conv %arg0, %arg1, %arg2 {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>, tensor<4xf32>) -> tensor<1x6x3x3xf32>
  return %0 : tensor<1x6x3x3xf32>
}

// -----

func.func @conv_spatial(%arg0: tensor<1x4x5x5xf32>, %arg1: tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32> {
  // (5 + 1 + 1 - 3) / 2 + 1 = 3 rows, (5 - 3) / 1 + 1 = 3 columns with
  // dilation 1, but dilation 2 in the columns leaves 1.
  // expected-error @+1 {{'shardc.Conv' op spatial dim 1 of the result is 3, expected 1}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64: 1, 2>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 0, 1, 0>, strides = array<i64: 2, 1>} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32>
  return %0 : tensor<1x6x3x3xf32>
}

// -----

func.func @conv_attr_lengths(%arg0: tensor<1x4x5x5xf32>, %arg1: tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32> {
  // expected-error @+1 {{'shardc.Conv' op kernel_shape, strides, dilations and pads have inconsistent lengths}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32>
  return %0 : tensor<1x6x3x3xf32>
}

// -----

func.func @conv_stride_zero(%arg0: tensor<1x4x5x5xf32>, %arg1: tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32> {
  // expected-error @+1 {{'shardc.Conv' op window sizes, strides and dilations must be positive and pads non-negative}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 0, 1>} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32>
  return %0 : tensor<1x6x3x3xf32>
}

// -----

func.func @maxpool_nc(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x3x2x2xf32> {
  // expected-error @+1 {{'shardc.MaxPool' op result must keep N and C of the input}}
  %0 = shardc.MaxPool %arg0 {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>} : tensor<1x2x4x4xf32> -> tensor<1x3x2x2xf32>
  return %0 : tensor<1x3x2x2xf32>
}

// -----

func.func @maxpool_indices(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  // expected-error @+1 {{'shardc.MaxPool' op indices must have the result's shape}}
  %0, %1 = shardc.MaxPool %arg0 {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>, tensor<1x2x4x4xi64>
  return %0 : tensor<1x2x2x2xf32>
}

// -----

func.func @maxpool_window_rank(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  // expected-error @+1 {{'shardc.MaxPool' op expects input and result of rank 3 for a 1-d window}}
  %0 = shardc.MaxPool %arg0 {ceil_mode = false, dilations = array<i64: 1>, kernel_shape = array<i64: 2>, pads = array<i64: 0, 0>, storage_order = 0 : i64, strides = array<i64: 2>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
  return %0 : tensor<1x2x2x2xf32>
}

// -----

func.func @maxpool_ceil_mode(%arg0: tensor<1x2x5x5xf32>) -> tensor<1x2x2x2xf32> {
  // With ceil_mode, (5 - 2) / 2 rounds up: 3 windows per dim.
  // expected-error @+1 {{'shardc.MaxPool' op spatial dim 0 of the result is 2, expected 3}}
  %0 = shardc.MaxPool %arg0 {ceil_mode = true, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>} : tensor<1x2x5x5xf32> -> tensor<1x2x2x2xf32>
  return %0 : tensor<1x2x2x2xf32>
}

// -----

func.func @maxpool_negative_pad(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  // expected-error @+1 {{'shardc.MaxPool' op window sizes, strides and dilations must be positive and pads non-negative}}
  %0 = shardc.MaxPool %arg0 {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, -1, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
  return %0 : tensor<1x2x2x2xf32>
}

// -----

func.func @averagepool_nc(%arg0: tensor<1x2x4x4xf32>) -> tensor<2x2x2x2xf32> {
  // expected-error @+1 {{'shardc.AveragePool' op result must keep N and C of the input}}
  %0 = shardc.AveragePool %arg0 {ceil_mode = false, count_include_pad = false, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x2x4x4xf32> -> tensor<2x2x2x2xf32>
  return %0 : tensor<2x2x2x2xf32>
}

// -----

func.func @averagepool_window(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  // Pads of 1 on each side: (4 + 2 - 2) / 2 + 1 = 3.
  // expected-error @+1 {{'shardc.AveragePool' op spatial dim 0 of the result is 2, expected 3}}
  %0 = shardc.AveragePool %arg0 {ceil_mode = false, count_include_pad = false, kernel_shape = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
  return %0 : tensor<1x2x2x2xf32>
}

// -----

func.func @globalaveragepool_rank(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shardc.GlobalAveragePool' op input must have rank >= 2}}
  %0 = shardc.GlobalAveragePool %arg0 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @globalaveragepool_result(%arg0: tensor<1x2x4x4xf32>) -> tensor<1x2xf32> {
  // expected-error @+1 {{'shardc.GlobalAveragePool' op result must have shape [1, 2, 1, 1]}}
  %0 = shardc.GlobalAveragePool %arg0 : tensor<1x2x4x4xf32> -> tensor<1x2xf32>
  return %0 : tensor<1x2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

func.func @reshape_count(%arg0: tensor<2x3xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'shardc.Reshape' op cannot reshape [2, 3] (6 elements) to [4, 2] (8 elements)}}
  %0 = shardc.Reshape %arg0 : tensor<2x3xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @reshape_type(%arg0: tensor<2x3xf32>) -> tensor<6xf64> {
  // expected-error @+1 {{'shardc.Reshape' op element type must not change}}
  %0 = shardc.Reshape %arg0 : tensor<2x3xf32> -> tensor<6xf64>
  return %0 : tensor<6xf64>
}

// -----

func.func @transpose_perm_size(%arg0: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  // expected-error @+1 {{'shardc.Transpose' op perm must have 3 entries}}
  %0 = shardc.Transpose %arg0 {perm = array<i64: 1, 0>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return %0 : tensor<3x2x4xf32>
}

// -----

func.func @transpose_not_permutation(%arg0: tensor<2x3x4xf32>) -> tensor<3x3x4xf32> {
  // expected-error @+1 {{'shardc.Transpose' op perm is not a permutation}}
  %0 = shardc.Transpose %arg0 {perm = array<i64: 1, 1, 2>} : tensor<2x3x4xf32> -> tensor<3x3x4xf32>
  return %0 : tensor<3x3x4xf32>
}

// -----

func.func @transpose_result(%arg0: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  // expected-error @+1 {{'shardc.Transpose' op result must have shape [4, 2, 3]}}
  %0 = shardc.Transpose %arg0 {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return %0 : tensor<3x2x4xf32>
}

// -----

func.func @gather_axis(%arg0: tensor<2x3xf32>, %arg1: tensor<4xi64>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shardc.Gather' op axis 2 is out of range for rank 2}}
  %0 = shardc.Gather %arg0, %arg1 {axis = 2 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @gather_shape(%arg0: tensor<2x3xf32>, %arg1: tensor<4x5xi64>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shardc.Gather' op result must have shape [2, 4, 5]}}
  %0 = shardc.Gather %arg0, %arg1 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x5xi64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @gather_index_type(%arg0: tensor<2x3xf32>, %arg1: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = shardc.Gather %arg0, %arg1 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @gather_elements_rank(%arg0: tensor<2x3xf32>, %arg1: tensor<2xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{'shardc.GatherElements' op indices must have the data's rank 2, got 1}}
  %0 = shardc.GatherElements %arg0, %arg1 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @gather_elements_larger(%arg0: tensor<2x3xf32>, %arg1: tensor<3x5xi64>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'shardc.GatherElements' op indices dimension 0 (3) exceeds the data's (2)}}
  %0 = shardc.GatherElements %arg0, %arg1 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x5xi64>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

func.func @gather_elements_result(%arg0: tensor<2x3xf32>, %arg1: tensor<2x1xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{'shardc.GatherElements' op result must have the indices' shape [2, 1]}}
  %0 = shardc.GatherElements %arg0, %arg1 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @topk_k(%arg0: tensor<2x3xf32>) -> tensor<2x4xi64> {
  // expected-error @+1 {{'shardc.TopKIndices' op k 4 is out of range [0, 3] for axis 1}}
  %0 = shardc.TopKIndices %arg0 {axis = 1 : i64, k = 4 : i64, largest = true} : tensor<2x3xf32> -> tensor<2x4xi64>
  return %0 : tensor<2x4xi64>
}

// -----

func.func @topk_result(%arg0: tensor<2x3xf32>) -> tensor<2x3xi64> {
  // expected-error @+1 {{'shardc.TopKIndices' op result must have shape [2, 2]}}
  %0 = shardc.TopKIndices %arg0 {axis = 1 : i64, k = 2 : i64, largest = true} : tensor<2x3xf32> -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

func.func @scatter_elements_updates(%arg0: tensor<2x3xf32>, %arg1: tensor<2x1xi64>, %arg2: tensor<2x2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.ScatterElements' op updates must have the indices' shape [2, 1]}}
  %0 = shardc.ScatterElements %arg0, %arg1, %arg2 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @scatter_elements_result(%arg0: tensor<2x3xf32>, %arg1: tensor<2x1xi64>, %arg2: tensor<2x1xf32>) -> tensor<2x1xf32> {
  // expected-error @+1 {{'shardc.ScatterElements' op result must have the data's shape [2, 3]}}
  %0 = shardc.ScatterElements %arg0, %arg1, %arg2 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xi64>, tensor<2x1xf32>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

func.func @scatter_elements_larger(%arg0: tensor<2x3xf32>, %arg1: tensor<3x1xi64>, %arg2: tensor<3x1xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.ScatterElements' op indices dimension 0 (3) exceeds the data's (2)}}
  %0 = shardc.ScatterElements %arg0, %arg1, %arg2 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x1xi64>, tensor<3x1xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @gather_elements_grad_axis(%arg0: tensor<2x1xf32>, %arg1: tensor<2x1xi64>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.GatherElementsGrad' op axis 2 is out of range for rank 2}}
  %0 = shardc.GatherElementsGrad %arg0, %arg1 {axis = 2 : i64} : (tensor<2x1xf32>, tensor<2x1xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @concat_empty() -> tensor<0xf32> {
  // expected-error @+1 {{'shardc.Concat' op needs at least one input}}
  %0 = shardc.Concat {axis = 0 : i64} : () -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

func.func @concat_axis(%arg0: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'shardc.Concat' op axis 2 is out of range for rank 2}}
  %0 = shardc.Concat %arg0, %arg0 {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @concat_rank(%arg0: tensor<2x3xf32>, %arg1: tensor<2xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'shardc.Concat' op inputs must share rank and element type}}
  %0 = shardc.Concat %arg0, %arg1 {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @concat_element_type(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xi64>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'shardc.Concat' op inputs must share rank and element type}}
  %0 = shardc.Concat %arg0, %arg1 {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @concat_other_dims(%arg0: tensor<2x3xf32>, %arg1: tensor<2x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'shardc.Concat' op inputs differ outside the concat axis}}
  %0 = shardc.Concat %arg0, %arg1 {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @concat_result(%arg0: tensor<2x3xf32>, %arg1: tensor<1x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'shardc.Concat' op result must have shape [3, 3]}}
  %0 = shardc.Concat %arg0, %arg1 {axis = 0 : i64} : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @split_axis(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.Split' op axis -1 is out of range for rank 2}}
  %0 = shardc.Split %arg0 {axis = -1 : i64} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @split_sizes(%arg0: tensor<2x6xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'shardc.Split' op output sizes along axis sum to 5, expected 6}}
  %0:2 = shardc.Split %arg0 {axis = 1 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>, tensor<2x3xf32>
  return %0#0 : tensor<2x2xf32>
}

// -----

func.func @split_rank(%arg0: tensor<2x6xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.Split' op outputs must have the input's rank}}
  %0:2 = shardc.Split %arg0 {axis = 1 : i64} : tensor<2x6xf32> -> tensor<2x3xf32>, tensor<6xf32>
  return %0#0 : tensor<2x3xf32>
}

// -----

func.func @split_other_dims(%arg0: tensor<2x6xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.Split' op outputs differ from the input outside the axis}}
  %0:2 = shardc.Split %arg0 {axis = 1 : i64} : tensor<2x6xf32> -> tensor<2x3xf32>, tensor<1x3xf32>
  return %0#0 : tensor<2x3xf32>
}

// -----

func.func @slice_entries(%arg0: tensor<4x6xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'shardc.Slice' op starts, steps and the sliced shape need one entry per dim}}
  %0 = shardc.Slice %arg0 {starts = array<i64: 1>, steps = array<i64: 1>} : tensor<4x6xf32> -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @slice_step_zero(%arg0: tensor<4x6xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'shardc.Slice' op step of dim 0 is zero}}
  %0 = shardc.Slice %arg0 {starts = array<i64: 1, 0>, steps = array<i64: 0, 1>} : tensor<4x6xf32> -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @slice_out_of_range(%arg0: tensor<4x6xf32>) -> tensor<4x3xf32> {
  // Columns 4, 6, 8: the last two are not in the input.
  // expected-error @+1 {{'shardc.Slice' op slice of dim 1 leaves the input}}
  %0 = shardc.Slice %arg0 {starts = array<i64: 0, 4>, steps = array<i64: 1, 2>} : tensor<4x6xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @slice_negative_step_out_of_range(%arg0: tensor<4x6xf32>) -> tensor<3x6xf32> {
  // Rows 1, 0, -1.
  // expected-error @+1 {{'shardc.Slice' op slice of dim 0 leaves the input}}
  %0 = shardc.Slice %arg0 {starts = array<i64: 1, 0>, steps = array<i64: -1, 1>} : tensor<4x6xf32> -> tensor<3x6xf32>
  return %0 : tensor<3x6xf32>
}

// -----

func.func @expand_type(%arg0: tensor<3x1xf32>) -> tensor<3x4xf64> {
  // expected-error @+1 {{'shardc.Expand' op element type must not change}}
  %0 = shardc.Expand %arg0 : tensor<3x1xf32> -> tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// -----

func.func @expand_shape(%arg0: tensor<3x2xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'shardc.Expand' op operand shapes [3, 2] and [3, 4] do not broadcast}}
  %0 = shardc.Expand %arg0 : tensor<3x2xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @expand_shrinks(%arg0: tensor<3x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{'shardc.Expand' op result shape [1, 4] is not the broadcast shape [3, 4]}}
  %0 = shardc.Expand %arg0 : tensor<3x4xf32> -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

func.func @reduce_axes_order(%arg0: tensor<2x3x4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'shardc.ReduceMean' op axes must be sorted, unique and in range}}
  %0 = shardc.ReduceMean %arg0 {axes = array<i64: 2, 1>, keepdims = false} : tensor<2x3x4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @reduce_axes_range(%arg0: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'shardc.ReduceSum' op axes must be sorted, unique and in range}}
  %0 = shardc.ReduceSum %arg0 {axes = array<i64: 3>, keepdims = true} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @reduce_axes_negative(%arg0: tensor<2x3x4xf32>) -> tensor<2x3x1xf32> {
  // expected-error @+1 {{'shardc.ReduceSum' op axes must be sorted, unique and in range}}
  %0 = shardc.ReduceSum %arg0 {axes = array<i64: -1>, keepdims = true} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  return %0 : tensor<2x3x1xf32>
}

// -----

func.func @reduce_keepdims(%arg0: tensor<2x3x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shardc.ReduceSum' op result must have shape [2, 1, 4]}}
  %0 = shardc.ReduceSum %arg0 {axes = array<i64: 1>, keepdims = true} : tensor<2x3x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

func.func @loss_scores_rank(%arg0: tensor<5xf32>, %arg1: tensor<5xi64>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.SoftmaxCrossEntropyLoss' op scores must have shape [N, C, ...]}}
  %0 = shardc.SoftmaxCrossEntropyLoss %arg0, %arg1 {reduction = #shardc.reduction<mean>} : (tensor<5xf32>, tensor<5xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @loss_labels(%arg0: tensor<4x5xf32>, %arg1: tensor<5xi64>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.SoftmaxCrossEntropyLoss' op labels must have shape [4]}}
  %0 = shardc.SoftmaxCrossEntropyLoss %arg0, %arg1 {reduction = #shardc.reduction<mean>} : (tensor<4x5xf32>, tensor<5xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @loss_labels_spatial(%arg0: tensor<2x5x3xf32>, %arg1: tensor<2x5xi64>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.NegativeLogLikelihoodLoss' op labels must have shape [2, 3]}}
  %0 = shardc.NegativeLogLikelihoodLoss %arg0, %arg1 {reduction = #shardc.reduction<mean>} : (tensor<2x5x3xf32>, tensor<2x5xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @loss_weights(%arg0: tensor<4x5xf32>, %arg1: tensor<4xi64>, %arg2: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.NegativeLogLikelihoodLoss' op weights must have shape [5]}}
  %0 = shardc.NegativeLogLikelihoodLoss %arg0, %arg1, %arg2 {reduction = #shardc.reduction<sum>} : (tensor<4x5xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @loss_reduction(%arg0: tensor<4x5xf32>, %arg1: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+2 {{expected ::shardc::LossReduction to be one of: none, sum, mean}}
  // expected-error @+1 {{failed to parse Shardc_LossReductionAttr parameter 'value' which is to be a `::shardc::LossReduction`}}
  %0 = shardc.SoftmaxCrossEntropyLoss %arg0, %arg1 {reduction = #shardc.reduction<max>} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @loss_none_shape(%arg0: tensor<4x5xf32>, %arg1: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.SoftmaxCrossEntropyLoss' op loss must have shape [4]}}
  %0 = shardc.SoftmaxCrossEntropyLoss %arg0, %arg1 {reduction = #shardc.reduction<none>} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @loss_mean_shape(%arg0: tensor<4x5xf32>, %arg1: tensor<4xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{'shardc.NegativeLogLikelihoodLoss' op loss must have shape []}}
  %0 = shardc.NegativeLogLikelihoodLoss %arg0, %arg1 {reduction = #shardc.reduction<mean>} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @loss_log_prob(%arg0: tensor<4x5xf32>, %arg1: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.SoftmaxCrossEntropyLoss' op log_prob must have the scores' shape}}
  %0, %1 = shardc.SoftmaxCrossEntropyLoss %arg0, %arg1 {reduction = #shardc.reduction<mean>} : (tensor<4x5xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<5x4xf32>)
  return %0 : tensor<f32>
}

// -----

func.func @loss_with_grad_none(%arg0: tensor<4x5xf32>, %arg1: tensor<4xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{'shardc.SoftmaxCrossEntropyLossWithGrad' op takes reduction sum or mean (a scalar loss)}}
  %0, %1 = shardc.SoftmaxCrossEntropyLossWithGrad %arg0, %arg1 {reduction = #shardc.reduction<none>} : (tensor<4x5xf32>, tensor<4xi64>) -> (tensor<4xf32>, tensor<4x5xf32>)
  return %0 : tensor<4xf32>
}

// -----

func.func @loss_with_grad_shape(%arg0: tensor<4x5xf32>, %arg1: tensor<4xi64>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.SoftmaxCrossEntropyLossWithGrad' op scores gradient must have the scores' shape}}
  %0, %1 = shardc.SoftmaxCrossEntropyLossWithGrad %arg0, %arg1 {reduction = #shardc.reduction<sum>} : (tensor<4x5xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<5x4xf32>)
  return %0 : tensor<f32>
}

// -----

func.func @loss_label_type(%arg0: tensor<4x5xf32>, %arg1: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = shardc.SoftmaxCrossEntropyLoss %arg0, %arg1 {reduction = #shardc.reduction<mean>} : (tensor<4x5xf32>, tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A bias of another element type than the scale was accepted before, and
// autodiff then gave it a gradient of the wrong type.
func.func @layer_norm_element_types(%x: tensor<2x4xf32>, %s: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shardc.LayerNormalization' op input, scale, bias and result must have one element type, got 'f32' and 'f16'}}
  %0:3 = shardc.LayerNormalization %x, %s, %b {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf16>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %0#0 : tensor<2x4xf32>
}

// -----

func.func @gemm_element_types(%a: tensor<2x3xf32>, %b: tensor<3x4xf64>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shardc.Gemm' op A, B, C and result must have one element type, got 'f32' and 'f64'}}
  %0 = shardc.Gemm %a, %b : (tensor<2x3xf32>, tensor<3x4xf64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @max_pool_element_types(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf16> {
  // expected-error @+1 {{'shardc.MaxPool' op failed to verify that all of {input, output} have same element type}}
  %0 = shardc.MaxPool %x {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>} : tensor<1x1x4x4xf32> -> tensor<1x1x2x2xf16>
  return %0 : tensor<1x1x2x2xf16>
}

// -----

func.func @split_element_types(%x: tensor<4xf32>) -> tensor<2xf16> {
  // expected-error @+1 {{'shardc.Split' op outputs must have the input's element type}}
  %0:2 = shardc.Split %x {axis = 0 : i64} : tensor<4xf32> -> tensor<2xf32>, tensor<2xf16>
  return %0#1 : tensor<2xf16>
}

// -----

func.func @loss_element_types(%s: tensor<4x5xf32>, %l: tensor<4xi64>) -> tensor<f16> {
  // expected-error @+1 {{'shardc.SoftmaxCrossEntropyLoss' op scores, loss, weights and log_prob must have one element type, got 'f32' and 'f16'}}
  %0 = shardc.SoftmaxCrossEntropyLoss %s, %l {reduction = #shardc.reduction<mean>} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f16>
  return %0 : tensor<f16>
}

// -----

func.func @all_reduce_bool(%b: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'shardc.AllReduceStart' op cannot sum 'i1' over ranks}}
  %0 = shardc.AllReduceStart %b {world_size = 2 : i64} : tensor<4xi1>
  %1 = shardc.CollectiveWait %0 : tensor<4xi1>
  return %1 : tensor<4xi1>
}

// -----

func.func @equal_element_types(%a: tensor<3xf32>, %b: tensor<3xi64>) -> tensor<3xi1> {
  // expected-error @+1 {{'shardc.Equal' op operands must have one element type, got 'f32' and 'i64'}}
  %0 = shardc.Equal %a, %b : (tensor<3xf32>, tensor<3xi64>) -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

func.func @trilu_rank(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.Trilu' op input must have rank >= 2}}
  %0 = shardc.Trilu %x {k = 0 : i64, upper = true} : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @argmax_shape(%x: tensor<2x3xf32>) -> tensor<2x1xi64> {
  // expected-error @+1 {{'shardc.ArgMax' op result must have shape [2]}}
  %0 = shardc.ArgMax %x {axis = 1 : i64, keepdims = false, select_last_index = false} : tensor<2x3xf32> -> tensor<2x1xi64>
  return %0 : tensor<2x1xi64>
}

// -----

func.func @dropout_ratio(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shardc.Dropout' op ratio must be in [0, 1), got 1.0}}
  %0 = shardc.Dropout %x {batch_axis = 0 : i64, ratio = 1.0 : f32, site = 0 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @argmax_axis(%x: tensor<2x3xf32>) -> tensor<2xi64> {
  // expected-error @+1 {{'shardc.ArgMax' op axis 2 is out of range for rank 2}}
  %0 = shardc.ArgMax %x {axis = 2 : i64, keepdims = false, select_last_index = false} : tensor<2x3xf32> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

func.func @dropout_site(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'shardc.Dropout' op site must be in [0, 2^32), got -1}}
  %0 = shardc.Dropout %x {batch_axis = 0 : i64, ratio = 0.5 : f32, site = -1 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @range_not_scalar(%s: tensor<1xi64>, %l: tensor<i64>, %d: tensor<i64>) -> tensor<4xi64> {
  // expected-error @+1 {{'shardc.Range' op start, limit and delta must be scalars (rank 0)}}
  %0 = shardc.Range %s, %l, %d : (tensor<1xi64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @dropout_batch_axis(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shardc.Dropout' op batch_axis must be -1 or an axis of the input, got 2}}
  %0 = shardc.Dropout %x {batch_axis = 2 : i64, ratio = 0.5 : f32, site = 0 : i64} : tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @dropout_batch_outer(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  // expected-error @+1 {{'shardc.Dropout' op batch_outer must be at least 1, got 0}}
  %0 = shardc.Dropout %x {batch_axis = 0 : i64, batch_outer = 0 : i64, ratio = 0.5 : f32, site = 0 : i64} : tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

func.func @dropout_batch_outer_divides(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  // expected-error @+1 {{'shardc.Dropout' op batch_outer 4 does not divide the batch axis's size 6}}
  %0 = shardc.Dropout %x {batch_axis = 0 : i64, batch_outer = 4 : i64, ratio = 0.5 : f32, site = 0 : i64} : tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

func.func @dropout_batch_outer_no_batch(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  // expected-error @+1 {{'shardc.Dropout' op batch_outer must be 1 without a batch axis, got 3}}
  %0 = shardc.Dropout %x {batch_axis = -1 : i64, batch_outer = 3 : i64, ratio = 0.5 : f32, site = 0 : i64} : tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

func.func @range_type(%s: tensor<i8>, %l: tensor<i8>, %d: tensor<i8>) -> tensor<4xi8> {
  // expected-error @+1 {{'shardc.Range' op element type must be f32, f64, i32 or i64, got 'i8'}}
  %0 = shardc.Range %s, %l, %d : (tensor<i8>, tensor<i8>, tensor<i8>) -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

func.func @dropout_mask_shape(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'shardc.Dropout' op mask must have the input's shape}}
  %0, %m = shardc.Dropout %x {batch_axis = 0 : i64, ratio = 0.5 : f32, site = 0 : i64} : tensor<2x4xf32>, tensor<4x2xi1>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @greater_element_types(%a: tensor<3xf32>, %b: tensor<3xi64>) -> tensor<3xi1> {
  // expected-error @+1 {{'shardc.Greater' op operands must have one element type, got 'f32' and 'i64'}}
  %0 = shardc.Greater %a, %b : (tensor<3xf32>, tensor<3xi64>) -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

func.func @less_or_equal_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<3xi1> {
  // expected-error @+1 {{'shardc.LessOrEqual' op result shape [3] is not the broadcast shape [2, 3]}}
  %0 = shardc.LessOrEqual %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

func.func @max_shapes(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.Max' op operand shapes [2, 3] and [4] do not broadcast}}
  %0 = shardc.Max %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @reduce_max_shape(%a: tensor<2x3xf32>) -> tensor<2x1xf32> {
  // expected-error @+1 {{'shardc.ReduceMax' op result must have shape [2]}}
  %0 = shardc.ReduceMax %a {axes = array<i64: 1>, keepdims = false} : tensor<2x3xf32> -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

func.func @lr_warmup_negative(%w: tensor<2xf32>, %s: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{warmup_steps must be >= 0, got -1}}
  %0, %1 = shardc.SGDUpdate %w, %w, %w, %s {dampening = 0.0, lr = 0.1, momentum = 0.0, nesterov = false, weight_decay = 0.0, warmup_steps = -1 : i64} : tensor<2xf32>, tensor<f32>
  return %0 : tensor<2xf32>
}

// -----

func.func @lr_decay_of_constant(%w: tensor<2xf32>, %s: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{decay_steps and min_lr_ratio need a linear or cosine lr_schedule}}
  %0, %1 = shardc.SGDUpdate %w, %w, %w, %s {dampening = 0.0, lr = 0.1, momentum = 0.0, nesterov = false, weight_decay = 0.0, decay_steps = 10 : i64} : tensor<2xf32>, tensor<f32>
  return %0 : tensor<2xf32>
}

// -----

func.func @lr_decay_before_warmup_ends(%w: tensor<2xf32>, %s: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{a cosine lr_schedule needs decay_steps greater than warmup_steps (10)}}
  %0, %1, %2 = shardc.AdamUpdate %w, %w, %w, %w, %s {beta1 = 0.9, beta2 = 0.999, decoupled = true, eps = 1.0e-8, lr = 0.001, weight_decay = 0.01, lr_schedule = #shardc.lr_schedule<cosine>, warmup_steps = 10 : i64, decay_steps = 10 : i64} : tensor<2xf32>, tensor<f32>
  return %0 : tensor<2xf32>
}

// -----

func.func @lr_min_ratio(%w: tensor<2xf32>, %s: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{min_lr_ratio must be in [0, 1], got 1.5}}
  %0, %1 = shardc.SGDUpdate %w, %w, %w, %s {dampening = 0.0, lr = 0.1, momentum = 0.0, nesterov = false, weight_decay = 0.0, lr_schedule = #shardc.lr_schedule<linear>, decay_steps = 10 : i64, min_lr_ratio = 1.5} : tensor<2xf32>, tensor<f32>
  return %0 : tensor<2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Gradient clipping
//===----------------------------------------------------------------------===//

func.func @clip_max_norm_zero(%t: tensor<f64>) -> tensor<f32> {
  // expected-error @+1 {{max_norm must be finite and positive, got 0}}
  %n, %c = shardc.ClipCoefficient %t {max_norm = 0.0, norm_type = #shardc.norm_type<l2>} : tensor<f64> -> tensor<f32>, tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @clip_max_norm_inf(%t: tensor<f64>) -> tensor<f32> {
  // expected-error @+1 {{max_norm must be finite and positive, got INF}}
  %n, %c = shardc.ClipCoefficient %t {max_norm = 0x7FF0000000000000 : f64, norm_type = #shardc.norm_type<inf>} : tensor<f64> -> tensor<f32>, tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @clip_total_not_scalar(%t: tensor<1xf64>) -> tensor<f32> {
  // expected-error @+1 {{operand #0 must be 0D tensor of 64-bit float values}}
  %n, %c = shardc.ClipCoefficient %t {max_norm = 1.0, norm_type = #shardc.norm_type<l2>} : tensor<1xf64> -> tensor<f32>, tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @partial_norm_f32_init(%g: tensor<3xf32>, %i: tensor<f32>) -> tensor<f64> {
  // expected-error @+1 {{operand #1 must be 0D tensor of 64-bit float values}}
  %0 = shardc.PartialNorm %g, %i {norm_type = #shardc.norm_type<l2>} : (tensor<3xf32>, tensor<f32>) -> tensor<f64>
  return %0 : tensor<f64>
}

// -----

func.func @partial_norm_type(%g: tensor<3xf32>) -> tensor<f64> {
  // expected-error @+2 {{expected ::shardc::NormType to be one of: l2, inf}}
  // expected-error @+1 {{failed to parse Shardc_NormTypeAttr parameter 'value' which is to be a `::shardc::NormType`}}
  %0 = shardc.PartialNorm %g {norm_type = #shardc.norm_type<l1>} : (tensor<3xf32>) -> tensor<f64>
  return %0 : tensor<f64>
}

// -----

func.func @grad_scale_not_scalar(%w: tensor<2xf32>, %s: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{operand #4 must be 0D tensor of 32-bit float values}}
  %0, %1 = shardc.SGDUpdate %w, %w, %w, %s scaled_by %w {dampening = 0.0, lr = 0.1, momentum = 0.0, nesterov = false, weight_decay = 0.0} : tensor<2xf32>, tensor<f32>, tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @loss_scaling_shrinks(%t: tensor<f64>, %s: tensor<f32>) -> tensor<i1> {
  // expected-error @+1 {{loss scaling's growth_factor must be finite and >= 1, got 5.000000e-01}}
  %k, %u, %x, %n, %r = shardc.LossScale %t, %s, %s {loss_scaling = #shardc.loss_scaling<growth_factor = 0.5, backoff_factor = 0.5, growth_interval = 2000>}
  return %k : tensor<i1>
}

// -----

func.func @loss_scaling_interval(%t: tensor<f64>, %s: tensor<f32>) -> tensor<i1> {
  // expected-error @+1 {{loss scaling's growth_interval must be in [1, 16777216], got 0}}
  %k, %u, %x, %n, %r = shardc.LossScale %t, %s, %s {loss_scaling = #shardc.loss_scaling<growth_factor = 2.0, backoff_factor = 0.5, growth_interval = 0>}
  return %k : tensor<i1>
}

// -----

func.func @skip_not_bool(%w: tensor<2xf32>, %s: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{operand #4 must be 0D tensor of 1-bit signless integer values}}
  %0, %1 = "shardc.SGDUpdate"(%w, %w, %w, %s, %s) <{dampening = 0.0 : f64, lr = 0.1 : f64, momentum = 0.0 : f64, nesterov = false, weight_decay = 0.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0>}> : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>)
  return %0 : tensor<2xf32>
}

// -----

func.func @fused_body_op(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = shardc.FusedElementwise %x : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    // expected-error @+1 {{cannot be part of a shardc.FusedElementwise (runtime/kernels/FusedOps.h lists the ops that can)}}
    %s = shardc.Softmax %a {axis = 1 : i64} : tensor<2x4xf32>
    shardc.Yield %s : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

func.func @fused_result_f64(%x: tensor<2x4xf64>) -> tensor<2x4xf64> {
  // expected-error @+1 {{results must all be f32 of one shape; result 0 is 'tensor<2x4xf64>'}}
  %0 = shardc.FusedElementwise %x : (tensor<2x4xf64>) -> tensor<2x4xf64> {
  ^bb0(%a: tensor<2x4xf64>):
    %n = shardc.Neg %a : tensor<2x4xf64>
    shardc.Yield %n : tensor<2x4xf64>
  }
  return %0 : tensor<2x4xf64>
}

// -----

func.func @fused_middle_broadcast(%x: tensor<2x3x4xf32>, %y: tensor<2x1x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{input 1 of type 'tensor<2x1x4xf32>' does not broadcast to 'tensor<2x3x4xf32>' as (i / inner) % size (one run of the result's dimensions)}}
  %0 = shardc.FusedElementwise %x, %y : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32> {
  ^bb0(%a: tensor<2x3x4xf32>, %b: tensor<2x1x4xf32>):
    %s = shardc.Add %a, %b : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
    shardc.Yield %s : tensor<2x3x4xf32>
  }
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @fused_yield_types(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{yields 2 values whose types are not the results' types}}
  %0 = shardc.FusedElementwise %x : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %n = shardc.Neg %a : tensor<2x4xf32>
    shardc.Yield %n, %a : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

func.func @fused_where_condition(%x: tensor<2x4xf32>, %c: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = shardc.FusedElementwise %x, %c : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %k: tensor<2x4xf32>):
    %n = shardc.Neg %a : tensor<2x4xf32>
    // expected-error @+1 {{'shardc.Where' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<2x4xf32>'}}
    %w = "shardc.Where"(%n, %a, %k) : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    shardc.Yield %w : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

func.func @fused_body_shape(%x: tensor<2x4xf32>, %s: tensor<f32>) -> tensor<2x4xf32> {
  %0 = shardc.FusedElementwise %x, %s : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %k: tensor<f32>):
    // expected-error @+1 {{in a shardc.FusedElementwise must have 1 operands and one f32 result of the op's result shape}}
    %n = shardc.Neg %k : tensor<f32>
    %m = shardc.Mul %a, %n : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    shardc.Yield %m : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}
