// RUN: shardc-opt %s -split-input-file -shardc-autodiff -shardc-recompute=recompute=true | FileCheck %s
// Without recompute nothing changes.
// RUN: shardc-opt %s -split-input-file -shardc-autodiff -shardc-recompute | FileCheck %s --check-prefix=OFF
// OFF-NOT: shardc.recompute

// Two layers, fc1 (Gemm, Relu, Dropout) and fc2 (Gemm, Tanh, the loss). fc2's
// Tanh is recomputed before the backward op that reads it; its input, fc1's
// output %d, stays from forward for fc2's recomputation and fc2's weight
// gradient. fc1's Gemm is recomputed for ReluGrad just before fc1's backward.
// The clones carry shardc.backward and shardc.recompute.
// CHECK-LABEL: func.func @main
// CHECK: %[[H:.*]] = shardc.Gemm %arg0, %arg1 :
// CHECK: %[[D:.*]] = shardc.Dropout
// CHECK: %[[Y:.*]] = shardc.Gemm %[[D]], %arg2 :
// CHECK: %[[T:.*]] = shardc.Tanh %[[Y]] :
// CHECK: %[[Y2:.*]] = shardc.Gemm %[[D]], %arg2 {shardc.backward, shardc.recompute}
// CHECK: %[[T2:.*]] = shardc.Tanh %[[Y2]] {shardc.backward, shardc.recompute}
// CHECK: %[[DT:.*]] = shardc.TanhGrad %{{.*}}, %[[T2]] {shardc.backward}
// CHECK: %[[DD:.*]] = shardc.Gemm %[[DT]], %arg2 {shardc.backward, transB = true}
// CHECK: shardc.Gemm %[[D]], %[[DT]] {shardc.backward, transA = true}
// CHECK: %[[DR:.*]] = shardc.Dropout %[[DD]] {{.*}}shardc.backward
// CHECK: %[[H2:.*]] = shardc.Gemm %arg0, %arg1 {shardc.backward, shardc.recompute}
// CHECK: shardc.ReluGrad %[[DR]], %[[H2]] {shardc.backward}
func.func @main(%x: tensor<4x3xf32> {shardc.input = "x"},
                %w1: tensor<3x5xf32> {shardc.param = "fc1.weight"},
                %w2: tensor<5x2xf32> {shardc.param = "fc2.weight"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %h = shardc.Gemm %x, %w1 : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %r = shardc.Relu %h : tensor<4x5xf32>
  %d = shardc.Dropout %r {batch_axis = 0 : i64, ratio = 5.000000e-01 : f32, site = 0 : i64} : tensor<4x5xf32>
  %y = shardc.Gemm %d, %w2 : (tensor<4x5xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
  %t = shardc.Tanh %y : tensor<4x2xf32>
  %l = shardc.ReduceSum %t {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Training-mode BatchNormalization recomputed: the clone normalizes again,
// but only the forward's running statistics become the step's update.
// RUN: shardc-opt %s -split-input-file -shardc-autodiff -shardc-recompute=recompute=true -shardc-optimizer | FileCheck %s --check-prefix=BN
// BN-LABEL: func.func @main
// BN: %{{.*}}, %[[RM:.*]], %[[RV:.*]] = shardc.BatchNormalization %[[H:[0-9]+]], {{.*}}unbiased_var = true
// BN: %[[Y2:[a-z0-9_]+]], %{{.*}}, %{{.*}} = shardc.BatchNormalization %[[H]], {{.*}}shardc.backward, shardc.recompute
// BN: shardc.Tanh %[[Y2]] {shardc.backward, shardc.recompute}
// BN: shardc.BatchNormGrad %{{.*}}, %[[H]],
// BN: return {{.*}}, %[[RM]], %[[RV]] :
func.func @main(%x: tensor<4x3xf32> {shardc.input = "x"},
                %w1: tensor<3x3xf32> {shardc.param = "fc1.weight"},
                %s: tensor<3xf32> {shardc.param = "bn.weight"},
                %b: tensor<3xf32> {shardc.param = "bn.bias"},
                %m: tensor<3xf32> {shardc.param = "bn.running_mean"},
                %v: tensor<3xf32> {shardc.param = "bn.running_var"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %h = shardc.Gemm %x, %w1 : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
  %y, %rm, %rv = shardc.BatchNormalization %h, %s, %b, %m, %v {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  %t = shardc.Tanh %y : tensor<4x3xf32>
  %l = shardc.ReduceSum %t {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A parameter-free op computed from one value alone (%h) that crosses into
// the next layer anyway (the residual Add) joins the layer that reads it, as
// a decomposed LayerNorm does: %h is kept, the Tanh of it is recomputed.
// CHECK-LABEL: func.func @main
// CHECK: %[[H:.*]] = shardc.Gemm %arg0, %arg1 :
// CHECK: %[[N:.*]] = shardc.Tanh %[[H]] :
// CHECK: %[[N2:.*]] = shardc.Tanh %[[H]] {shardc.backward, shardc.recompute}
// CHECK: shardc.TanhGrad %{{.*}}, %[[N2]] {shardc.backward}
func.func @main(%x: tensor<4x3xf32> {shardc.input = "x"},
                %w1: tensor<3x3xf32> {shardc.param = "fc1.weight"},
                %s: tensor<3xf32> {shardc.param = "ln.weight"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %h = shardc.Gemm %x, %w1 : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
  %n = shardc.Tanh %h : tensor<4x3xf32>
  %m = shardc.Mul %n, %s : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %z = shardc.Add %h, %m : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %l = shardc.ReduceSum %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
