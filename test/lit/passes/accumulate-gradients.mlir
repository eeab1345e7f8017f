// Two micro-batches: the input doubles its rows and each copy of forward and
// backward reads its half; the second BatchNormalization starts from the
// first's running statistics, which the optimizer writes back from the
// last; Dropout's copies draw as micro-batch 0 and 1 of 2; the loss and the
// gradients are the mean of the copies', summed as each copy produces them.
// RUN: shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-accumulate-gradients='grad-accum=2' -shardc-optimizer | FileCheck %s
// CHECK: func.func @main(%[[X:[^:]*]]: tensor<8x3xf32> {shardc.input = "x"}
// CHECK-SAME: shardc.grad_accum = 2 : i64
// CHECK: %[[X0:.*]] = shardc.Slice %[[X]] {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<8x3xf32> -> tensor<4x3xf32>
// CHECK: %[[X1:.*]] = shardc.Slice %[[X]] {starts = array<i64: 4, 0>, steps = array<i64: 1, 1>} : tensor<8x3xf32> -> tensor<4x3xf32>
// CHECK: %{{.*}}, %[[RM0:.*]], %[[RV0:.*]] = shardc.BatchNormalization %[[X0]], %{{.*}}, %{{.*}}, %arg3, %arg4
// CHECK: shardc.Dropout {{.*}}{batch_axis = 0 : i64, micro_batches = 2 : i64
// CHECK: %[[L0:.*]] = shardc.ReduceSum
// CHECK: shardc.Dropout {{.*}}{batch_axis = 0 : i64, micro_batches = 2 : i64, {{.*}}shardc.backward
// CHECK: %{{.*}}, %[[DS0:.*]], %[[DB0:.*]] = shardc.BatchNormGrad %{{.*}}, %[[X0]]
// CHECK: %{{.*}}, %[[RM1:.*]], %[[RV1:.*]] = shardc.BatchNormalization %[[X1]], %{{.*}}, %{{.*}}, %[[RM0]], %[[RV0]]
// CHECK: shardc.Dropout {{.*}}{batch_axis = 0 : i64, micro_batch = 1 : i64, micro_batches = 2 : i64
// CHECK: %[[L1:.*]] = shardc.ReduceSum
// CHECK: %[[LS:.*]] = shardc.Add %[[L0]], %[[L1]]
// CHECK: %[[LOSS:.*]] = shardc.Mul %[[LS]], %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %{{.*}}, %[[DS1:.*]], %[[DB1:.*]] = shardc.BatchNormGrad %{{.*}}, %[[X1]]
// CHECK-DAG: %[[GB:.*]] = shardc.Add %[[DB0]], %[[DB1]] {shardc.category = #shardc.category<grads>, shardc.micro_batch_sum}
// CHECK-DAG: %[[GS:.*]] = shardc.Add %[[DS0]], %[[DS1]] {shardc.category = #shardc.category<grads>, shardc.micro_batch_sum}
// CHECK: return %[[LOSS]], {{.*}}, %[[RM1]], %[[RV1]] :

// grad-accum=1 (the default) changes nothing.
// RUN: shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-accumulate-gradients | FileCheck %s --check-prefix=ONE
// ONE: tensor<4x3xf32> {shardc.input = "x"}
// ONE-NOT: grad_accum
// ONE-NOT: micro_batch

// RUN: not shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-accumulate-gradients='grad-accum=2' 2>&1 | FileCheck %s --check-prefix=FORWARD
// FORWARD: error: accumulate-gradients: the step has no loss gradients to accumulate; grad-accum needs a training step (shardc --optimizer)
// RUN: not shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-train-pipeline='grad-accum=0' 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: for the --grad-accum option: '0' is out of range: it must be in [1, 65536]
// RUN: not shardc-opt %s -shardc-autodiff -shardc-accumulate-gradients='grad-accum=3' 2>&1 | FileCheck %s --check-prefix=ROWS
// ROWS: error: accumulate-gradients: graph input 'y' has 2 rows but 'x' has 4; grad-accum needs every input to hold the micro-batch along its first axis
func.func @main(%x: tensor<4x2xf32> {shardc.input = "x"}, %y: tensor<2xf32> {shardc.input = "y"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %0 = shardc.Mul %x, %w : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %1 = shardc.Mul %0, %y : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %2 = shardc.ReduceSum %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
  return %2 : tensor<f32>
}
