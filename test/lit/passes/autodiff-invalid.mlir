// RUN: shardc-opt %s -split-input-file -shardc-autodiff -verify-diagnostics

// expected-error @below {{autodiff: the model has 2 scalar float outputs; name the loss with --loss}}
func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<f32>)
    attributes {shardc.output_names = ["a", "b"]} {
  %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  %2 = shardc.ReduceMean %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %1, %2 : tensor<f32>, tensor<f32>
}

// -----

// expected-error @below {{autodiff: the model has 0 scalar float outputs; name the loss with --loss}}
func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> tensor<2xf32>
    attributes {shardc.output_names = ["y"]} {
  %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// expected-error @below {{autodiff: the module has no func.func @main}}
module {
  func.func @train(%w: tensor<2xf32> {shardc.param = "w"}) -> tensor<f32>
      attributes {shardc.output_names = ["loss"]} {
    %0 = shardc.ReduceSum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// expected-error @below {{autodiff: @main has no output names}}
func.func @main(%w: tensor<2xf32> {shardc.param = "w"}) -> tensor<f32> {
  %0 = shardc.ReduceSum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// One output name for two results.
// expected-error @below {{autodiff: @main has no output names}}
func.func @main(%w: tensor<2xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<2xf32>)
    attributes {shardc.output_names = ["loss"]} {
  %0 = shardc.ReduceSum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<2xf32>
}

// -----

// A gradient op in the forward graph has no gradient rule of its own.
func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  // expected-error @below {{'shardc.ReluGrad' op autodiff: no gradient rule for this op}}
  %0 = shardc.ReluGrad %w, %x : tensor<2xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// The loss depends on LayerNormalization's mean only.
func.func @main(%x: tensor<2x4xf32> {shardc.input = "x"},
                %s: tensor<4xf32> {shardc.param = "s"},
                %w: tensor<2x4xf32> {shardc.param = "w"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %0 = shardc.Mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // expected-error @below {{'shardc.LayerNormalization' op autodiff: the gradient reaches only a secondary result of this op, which has no gradient rule}}
  %1:3 = shardc.LayerNormalization %0, %s {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %2 = shardc.ReduceSum %1#1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x1xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// A scale that only broadcasts to the normalized shape.
func.func @main(%x: tensor<2x4xf32> {shardc.input = "x"},
                %s: tensor<1xf32> {shardc.param = "s"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  // expected-error @below {{'shardc.LayerNormalization' op autodiff: the scale must have the normalized shape exactly}}
  %0:3 = shardc.LayerNormalization %x, %s {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4xf32>, tensor<1xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %1 = shardc.ReduceSum %0#0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A bias that only broadcasts to the scale's shape.
func.func @main(%x: tensor<2x4xf32> {shardc.input = "x"},
                %s: tensor<4xf32> {shardc.param = "s"},
                %b: tensor<1xf32> {shardc.param = "b"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  // expected-error @below {{'shardc.LayerNormalization' op autodiff: the bias must have the scale's shape}}
  %0:3 = shardc.LayerNormalization %x, %s, %b {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<1xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %1 = shardc.ReduceSum %0#0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
