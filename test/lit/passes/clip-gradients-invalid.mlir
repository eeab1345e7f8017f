// RUN: not shardc-opt %S/Inputs/zero-step.mlir -shardc-clip-gradients='clip-norm-type=inf' 2>&1 | FileCheck %s --check-prefix=NO-MAX
// RUN: not shardc-opt %S/Inputs/zero-step.mlir -shardc-clip-gradients='clip-grad-norm=-1' 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not shardc-opt %S/Inputs/zero-step.mlir -shardc-train-pipeline='clip-grad-norm=0' 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not shardc-opt %S/Inputs/zero-step.mlir -shardc-clip-gradients='clip-grad-norm=1 clip-norm-type=1' 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not shardc-opt %s -shardc-clip-gradients='clip-grad-norm=1' 2>&1 | FileCheck %s --check-prefix=NO-UPDATES
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-clip-gradients='clip-grad-norm=1' | not shardc-opt -shardc-clip-gradients='clip-grad-norm=1' 2>&1 | FileCheck %s --check-prefix=TWICE

// NO-MAX: error: clip-gradients: clip-norm-type needs clip-grad-norm
// NEGATIVE: error: clip-gradients: clip-grad-norm must be finite and > 0, got -1
// ZERO: for the --clip-grad-norm option: '0' is out of range: it must be finite and > 0
// TYPE: for the --clip-norm-type option: '1' is not one of: 2, inf
// NO-UPDATES: error: clip-gradients: the step updates no parameter; clip-grad-norm needs an optimizer (shardc --optimizer) and a trained parameter
// TWICE: error: 'shardc.SGDUpdate' op clip-gradients: the update already scales its gradient; the step is clipped twice
func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"], shardc.loss = "loss"} {
  %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
