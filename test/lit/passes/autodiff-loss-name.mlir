// RUN: shardc-opt %s -shardc-autodiff=loss=b | FileCheck %s
// RUN: not shardc-opt %s -shardc-autodiff=loss=nope 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not shardc-opt %s -shardc-autodiff=loss=y 2>&1 | FileCheck %s --check-prefix=NOTSCALAR

// --loss picks one of several scalar outputs.
// CHECK: -> (tensor<f32>, tensor<f32>, tensor<2xf32>, tensor<2xf32> {shardc.grad_of = "w"})
// CHECK-SAME: shardc.loss = "b"
// BAD: error: autodiff: the model has no output named 'nope' (outputs: a, b, y)
// NOTSCALAR: error: autodiff: the loss 'y' must be a scalar float, but has type 'tensor<2xf32>'
func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<f32>, tensor<2xf32>)
    attributes {shardc.output_names = ["a", "b", "y"]} {
  %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  %2 = shardc.ReduceMean %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %1, %2, %0 : tensor<f32>, tensor<f32>, tensor<2xf32>
}
