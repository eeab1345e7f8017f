// recompute-units selects layers by name; the others keep their
// activations. A pattern that matches no layer, or is not a regular
// expression, is an error.
// RUN: shardc-opt %s -shardc-autodiff -shardc-recompute='recompute-units=fc2' | FileCheck %s --check-prefix=UNITS
// UNITS-LABEL: func.func @main
// UNITS: shardc.Tanh {{.*}}shardc.recompute
// UNITS-NOT: shardc.recompute
// UNITS: return
// RUN: not shardc-opt %s -shardc-autodiff -shardc-recompute='recompute-units=blocks' 2>&1 | FileCheck %s --check-prefix=NOMATCH
// NOMATCH: error: --recompute-units 'blocks' matches no layer (layers: fc1, fc2)
// RUN: not shardc-opt %s -shardc-autodiff -shardc-recompute='recompute-units=*fc' 2>&1 | FileCheck %s --check-prefix=BADREGEX
// BADREGEX: error: --recompute-units '*fc' is not a valid regular expression: repetition-operator operand invalid
func.func @main(%x: tensor<4x3xf32> {shardc.input = "x"},
                %w1: tensor<3x5xf32> {shardc.param = "fc1.weight"},
                %w2: tensor<5x2xf32> {shardc.param = "fc2.weight"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %h = shardc.Gemm %x, %w1 : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %r = shardc.Relu %h : tensor<4x5xf32>
  %y = shardc.Gemm %r, %w2 : (tensor<4x5xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
  %t = shardc.Tanh %y : tensor<4x2xf32>
  %l = shardc.ReduceSum %t {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
