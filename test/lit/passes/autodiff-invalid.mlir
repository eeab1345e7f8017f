// RUN: shardc-opt %s -split-input-file -shardc-autodiff -verify-diagnostics

// expected-error @below {{autodiff: the model has 2 scalar float outputs; name the loss with --loss}}
func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<f32>)
    attributes {shardc.output_names = ["a", "b"]} {
  %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = 0 : i64} : tensor<2xf32> -> tensor<f32>
  %2 = shardc.ReduceMean %0 {axes = array<i64: 0>, keepdims = 0 : i64} : tensor<2xf32> -> tensor<f32>
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
