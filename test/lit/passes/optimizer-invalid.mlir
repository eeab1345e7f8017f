// RUN: not shardc-opt %s -shardc-optimizer=optimizer=lamb 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not shardc-opt %s -shardc-optimizer='optimizer=sgd nesterov=true' 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not shardc-opt %s -shardc-optimizer='optimizer=adam beta1=1.5' 2>&1 | FileCheck %s --check-prefix=BETA

// NAME: for the --optimizer option: 'lamb' is not one of: sgd, adam, adamw
// NESTEROV: error: optimizer: Nesterov momentum requires a momentum and zero dampening
// BETA: error: optimizer: lr, momentum, weight decay and eps must be >= 0 and betas in [0, 1)
func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<2xf32> {shardc.grad_of = "w"})
    attributes {shardc.output_names = ["loss"], shardc.loss = "loss"} {
  %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %1, %x : tensor<f32>, tensor<2xf32>
}
