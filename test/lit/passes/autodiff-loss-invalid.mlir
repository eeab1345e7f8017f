// RUN: shardc-opt %s -split-input-file -shardc-autodiff=loss=y -verify-diagnostics

// expected-error @below {{autodiff: the model has no output named 'y' (outputs: a, b)}}
func.func @main(%w: tensor<2xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<f32>)
    attributes {shardc.output_names = ["a", "b"]} {
  %0 = shardc.ReduceSum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  %1 = shardc.ReduceMean %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}

// -----

// expected-error @below {{autodiff: the loss 'y' must be a scalar float, but has type 'tensor<2xf32>'}}
func.func @main(%w: tensor<2xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<2xf32>)
    attributes {shardc.output_names = ["a", "y"]} {
  %0 = shardc.ReduceSum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<2xf32>
}

// -----

// An integer scalar is no loss either.
// expected-error @below {{autodiff: the loss 'y' must be a scalar float, but has type 'tensor<i64>'}}
func.func @main(%w: tensor<2xf32> {shardc.param = "w"}, %n: tensor<i64> {shardc.input = "n"}) -> (tensor<f32>, tensor<i64>)
    attributes {shardc.output_names = ["a", "y"]} {
  %0 = shardc.ReduceSum %w {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %0, %n : tensor<f32>, tensor<i64>
}
