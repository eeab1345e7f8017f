// RUN: shardc-opt %s -shardc-autodiff | FileCheck %s --check-prefix=ALL
// RUN: shardc-opt %s '-shardc-autodiff=freeze=^emb' | FileCheck %s --check-prefix=FREEZE
// RUN: shardc-opt %s '-shardc-autodiff=trainable=head' | FileCheck %s --check-prefix=FREEZE
// RUN: not shardc-opt %s '-shardc-autodiff=freeze=nomatch' 2>&1 | FileCheck %s --check-prefix=UNUSED
// RUN: not shardc-opt %s '-shardc-autodiff=trainable=*a' 2>&1 | FileCheck %s --check-prefix=INVALID

// Every parameter gets its role. Without --freeze/--trainable: w_emb and
// head are trained; `unused` reaches the loss through no differentiable
// path (it is not used). BatchNorm statistics are checked on the CNN
// example (test/lit/training/freeze.test).
// ALL-LABEL: func.func @main(
// ALL-SAME: {shardc.param = "emb.weight", shardc.role = #shardc.param_role<trained>}
// ALL-SAME: {shardc.param = "head.weight", shardc.role = #shardc.param_role<trained>}
// ALL-SAME: {shardc.param = "unused", shardc.role = #shardc.param_role<no_gradient>}
// ALL: shardc.grad_of = "emb.weight"
// ALL-SAME: shardc.grad_of = "head.weight"

// Frozen: no gradient is computed for it (nothing flows into the frozen
// operand of the first Mul), only head gets one.
// FREEZE-LABEL: func.func @main(
// FREEZE-SAME: {shardc.param = "emb.weight", shardc.role = #shardc.param_role<frozen>}
// FREEZE-SAME: {shardc.param = "head.weight", shardc.role = #shardc.param_role<trained>}
// FREEZE-NOT: shardc.grad_of = "emb.weight"
// FREEZE: shardc.grad_of = "head.weight"
// FREEZE-NOT: shardc.grad_of

// UNUSED: error: --freeze 'nomatch' matches no parameter (they are named like 'emb.weight', 'head.weight', 'unused'; shardc --print-trainable lists them all)
// INVALID: error: --trainable '*a' is not a valid regular expression:
func.func @main(%x: tensor<2x3xf32> {shardc.input = "x"},
                %e: tensor<2x3xf32> {shardc.param = "emb.weight"},
                %h: tensor<2x3xf32> {shardc.param = "head.weight"},
                %u: tensor<2x3xf32> {shardc.param = "unused"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %0 = shardc.Mul %x, %e : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = shardc.Mul %0, %h : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = shardc.ReduceSum %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %2 : tensor<f32>
}
