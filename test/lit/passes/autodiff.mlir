// RUN: shardc-opt %s -split-input-file -shardc-autodiff | FileCheck %s

// d(sum(x * w))/dw = x: the seed 1.0 expands back over the reduced axis.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x3xf32> {shardc.input = "x"}
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<2x3xf32> {shardc.param = "w", shardc.role = #shardc.param_role<trained>}
// CHECK-SAME: -> (tensor<f32>, tensor<2x3xf32> {shardc.grad_of = "w"})
// CHECK-SAME: shardc.loss = "loss"
// CHECK: %[[MUL:.*]] = shardc.Mul %[[X]], %[[W]]
// CHECK: %[[LOSS:.*]] = shardc.ReduceSum %[[MUL]]
// Backward ops carry {shardc.backward}, which sharding uses to schedule
// parameter use windows.
// CHECK: %[[SEED:.*]] = shardc.Constant {shardc.backward} dense<1.000000e+00> : tensor<f32>
// CHECK: %[[R:.*]] = shardc.Reshape %[[SEED]] {shardc.backward} : tensor<f32> -> tensor<1x1xf32>
// CHECK: %[[E:.*]] = shardc.Expand %[[R]] {shardc.backward} : tensor<1x1xf32> -> tensor<2x3xf32>
// CHECK: %[[DW:.*]] = shardc.Mul %[[E]], %[[X]] {shardc.backward}
// CHECK: return %[[LOSS]], %[[DW]]
func.func @main(%x: tensor<2x3xf32> {shardc.input = "x"},
                %w: tensor<2x3xf32> {shardc.param = "w"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %0 = shardc.Mul %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A parameter used twice (tied embedding and head) accumulates both
// gradients with one Add; the integer indices get none.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[IDX:[a-z0-9]+]]: tensor<2xi64> {shardc.input = "idx"}
// CHECK-SAME: %[[E:[a-z0-9]+]]: tensor<5x4xf32> {shardc.param = "emb", shardc.role = #shardc.param_role<trained>}
// CHECK-SAME: -> (tensor<f32>, tensor<5x4xf32> {shardc.grad_of = "emb"})
// CHECK: %[[H:.*]] = shardc.Gather %[[E]], %[[IDX]]
// CHECK: %[[LOGITS:.*]] = shardc.Gemm %[[H]], %[[E]] {transB = true}
// CHECK: %[[DLOGITS:.*]] = shardc.SoftmaxCrossEntropyLossGrad
// CHECK-DAG: %[[DH:.*]] = shardc.Gemm %[[DLOGITS]], %[[E]] {shardc.backward} :
// CHECK-DAG: %[[DHEAD:.*]] = shardc.Gemm %[[DLOGITS]], %[[H]] {shardc.backward, transA = true}
// CHECK: %[[DEMB:.*]] = shardc.GatherGrad %[[DH]], %[[IDX]] {axis = 0 : i64, shardc.backward}
// CHECK: %[[SUM:.*]] = shardc.Add %[[DHEAD]], %[[DEMB]] {shardc.backward} : (tensor<5x4xf32>, tensor<5x4xf32>)
// CHECK: return %{{.*}}, %[[SUM]]
// CHECK-NOT: shardc.grad_of = "idx"
func.func @main(%idx: tensor<2xi64> {shardc.input = "idx"},
                %labels: tensor<2xi64> {shardc.input = "labels"},
                %emb: tensor<5x4xf32> {shardc.param = "emb"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %h = shardc.Gather %emb, %idx {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %logits = shardc.Gemm %h, %emb {transB = true} : (tensor<2x4xf32>, tensor<5x4xf32>) -> tensor<2x5xf32>
  %loss = shardc.SoftmaxCrossEntropyLoss %logits, %labels {reduction = #shardc.reduction<mean>} : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A broadcast operand's gradient is summed back to its shape.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<3xf32> {shardc.param = "b", shardc.role = #shardc.param_role<trained>}
// CHECK: %[[S:.*]] = shardc.ReduceSum %{{.*}} {axes = array<i64: 0>, keepdims = true, shardc.backward} : tensor<2x3xf32> -> tensor<1x3xf32>
// CHECK: %[[DB:.*]] = shardc.Reshape %[[S]] {shardc.backward} : tensor<1x3xf32> -> tensor<3xf32>
// CHECK: return %{{.*}}, %[[DB]]
func.func @main(%x: tensor<2x3xf32> {shardc.input = "x"},
                %b: tensor<3xf32> {shardc.param = "b"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %0 = shardc.Add %x, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = shardc.Relu %0 : tensor<2x3xf32>
  %2 = shardc.ReduceMean %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// BatchNorm running statistics are not trained; MaxPool gains its indices.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<2x3x2x2xf32>, tensor<f32>, tensor<3xf32> {shardc.grad_of = "scale"}, tensor<3xf32> {shardc.grad_of = "bias"})
// CHECK: %[[Y:.*]], %[[IDX:.*]] = shardc.MaxPool
// CHECK-SAME: -> tensor<2x3x2x2xf32>, tensor<2x3x2x2xi64>
// CHECK: shardc.MaxPoolGrad %{{.*}}, %[[IDX]]
// CHECK: %[[DX:.*]], %[[DS:.*]], %[[DB:.*]] = shardc.BatchNormGrad
// CHECK-SAME: training_mode = true
// CHECK: return %{{.*}}, %{{.*}}, %[[DS]], %[[DB]]
func.func @main(%x: tensor<2x3x4x4xf32> {shardc.input = "x"},
                %scale: tensor<3xf32> {shardc.param = "scale"},
                %bias: tensor<3xf32> {shardc.param = "bias"},
                %mean: tensor<3xf32> {shardc.param = "running_mean"},
                %var: tensor<3xf32> {shardc.param = "running_var"}) -> (tensor<2x3x2x2xf32>, tensor<f32>)
    attributes {shardc.output_names = ["y", "loss"]} {
  %y, %rm, %rv = shardc.BatchNormalization %x, %scale, %bias, %mean, %var {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %p = shardc.MaxPool %y {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>} : tensor<2x3x4x4xf32> -> tensor<2x3x2x2xf32>
  %l = shardc.ReduceSum %p {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<2x3x2x2xf32> -> tensor<f32>
  return %p, %l : tensor<2x3x2x2xf32>, tensor<f32>
}

// -----

// An accuracy output beside the loss: ArgMax of the active logits has no
// gradient (its rule does nothing), and the logits' gradient comes from the
// loss alone.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32>, tensor<2xi64>, tensor<3x4xf32> {shardc.grad_of = "w"})
// CHECK: %[[LOGITS:.*]] = shardc.MatMul
// CHECK: %[[PRED:.*]] = shardc.ArgMax %[[LOGITS]] {axis = 1 : i64, keepdims = false, select_last_index = false}
// CHECK: shardc.SoftmaxCrossEntropyLossGrad
// CHECK-NOT: ArgMax
// CHECK: return %{{.*}}, %[[PRED]], %{{.*}}
func.func @main(%x: tensor<2x3xf32> {shardc.input = "x"},
                %labels: tensor<2xi64> {shardc.input = "labels"},
                %w: tensor<3x4xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<2xi64>)
    attributes {shardc.output_names = ["loss", "pred"]} {
  %logits = shardc.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %pred = shardc.ArgMax %logits {axis = 1 : i64, keepdims = false, select_last_index = false} : tensor<2x4xf32> -> tensor<2xi64>
  %loss = shardc.SoftmaxCrossEntropyLoss %logits, %labels {reduction = #shardc.reduction<mean>} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss, %pred : tensor<f32>, tensor<2xi64>
}

// -----

// Dropout's gradient is the same Dropout (ratio, site, batch axis and outer
// factor) of the output's gradient: the mask is regenerated, never kept. The
// forward's mask result is not needed for it.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x3xf32> {shardc.input = "x"}
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4x3xf32> {shardc.param = "w", shardc.role = #shardc.param_role<trained>}
// CHECK: %[[H:.*]] = shardc.Mul %[[X]], %[[W]]
// CHECK: %[[D:.*]], %[[MASK:.*]] = shardc.Dropout %[[H]] {batch_axis = 0 : i64, batch_outer = 2 : i64, ratio = 3.000000e-01 : f32, site = 2 : i64} : tensor<4x3xf32>, tensor<4x3xi1>
// CHECK: %[[E:.*]] = shardc.Expand
// CHECK: %[[DH:.*]] = shardc.Dropout %[[E]] {batch_axis = 0 : i64, batch_outer = 2 : i64, ratio = 3.000000e-01 : f32, shardc.backward, site = 2 : i64} : tensor<4x3xf32>
// CHECK-NEXT: %[[DW:.*]] = shardc.Mul %[[DH]], %[[X]] {shardc.backward}
// CHECK: return %{{.*}}, %[[MASK]], %[[DW]]
func.func @main(%x: tensor<4x3xf32> {shardc.input = "x"},
                %w: tensor<4x3xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<4x3xi1>)
    attributes {shardc.output_names = ["loss", "mask"]} {
  %0 = shardc.Mul %x, %w : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %1, %mask = shardc.Dropout %0 {batch_axis = 0 : i64, batch_outer = 2 : i64, ratio = 0.3 : f32, site = 2 : i64} : tensor<4x3xf32>, tensor<4x3xi1>
  %2 = shardc.ReduceSum %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32> -> tensor<f32>
  return %2, %mask : tensor<f32>, tensor<4x3xi1>
}
