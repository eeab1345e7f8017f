// Regression test: op verifiers index dimensions of rank-0 operands.
// Concat, Split and Conv on tensor<f32> crash shardc-opt (SIGSEGV); Gather on
// a rank-0 `data` fails verification without any diagnostic. Each case must
// be a verifier error instead.
// RUN: shardc-opt %s -split-input-file -verify-diagnostics

func.func @concat_rank0(%arg0: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{'shardc.Concat' op}}
  %0 = shardc.Concat %arg0, %arg0 {axis = 0 : i64} : (tensor<f32>, tensor<f32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @split_rank0(%arg0: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.Split' op}}
  %0 = shardc.Split %arg0 {axis = 0 : i64} : tensor<f32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @conv_rank0(%arg0: tensor<f32>, %arg1: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.Conv' op}}
  %0 = shardc.Conv %arg0, %arg1 {dilations = array<i64>, group = 1 : i64, kernel_shape = array<i64>, pads = array<i64>, strides = array<i64>} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @gather_rank0(%arg0: tensor<f32>, %arg1: tensor<i64>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.Gather' op}}
  %0 = shardc.Gather %arg0, %arg1 {axis = 0 : i64} : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return %0 : tensor<f32>
}
