// Regression test (fixed WrapUnits bug): units are cut wherever the layer of
// consecutive parameters (in first-use order) changes, so a layer whose
// parameters are not used consecutively becomes several units. Here blk.w,
// blk.sub.w, blk.b are used in this order and blk is split into units 0 and
// 2, although "each layer is a unit" (and FSDP would wrap blk.w and blk.b
// together).
// RUN: shardc-opt %s -shardc-wrap-units | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: {shardc.param = "blk.w", shardc.unit = [[BLK:[0-9]+]] : i64}
// CHECK-SAME: {shardc.param = "blk.sub.w", shardc.unit = {{[0-9]+}} : i64}
// CHECK-SAME: {shardc.param = "blk.b", shardc.unit = [[BLK]] : i64}
func.func @main(%arg0: tensor<2xf32> {shardc.input = "x"}, %arg1: tensor<2xf32> {shardc.param = "blk.w"}, %arg2: tensor<2xf32> {shardc.param = "blk.sub.w"}, %arg3: tensor<2xf32> {shardc.param = "blk.b"}, %arg4: tensor<f32> {shardc.state = "optimizer.step"}, %arg5: tensor<2xf32> {shardc.state = "blk.w.momentum_buffer"}, %arg6: tensor<2xf32> {shardc.state = "blk.sub.w.momentum_buffer"}, %arg7: tensor<2xf32> {shardc.state = "blk.b.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 4 : i64}, tensor<2xf32> {shardc.updates = 1 : i64}, tensor<2xf32> {shardc.updates = 5 : i64}, tensor<2xf32> {shardc.updates = 2 : i64}, tensor<2xf32> {shardc.updates = 6 : i64}, tensor<2xf32> {shardc.updates = 3 : i64}, tensor<2xf32> {shardc.updates = 7 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"]} {
  %0 = shardc.Constant dense<1.000000e+00> : tensor<2xf32>
  %1 = shardc.Mul %arg0, %arg1 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = shardc.Mul %1, %arg2 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %3 = shardc.Add %2, %arg3 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %4 = shardc.ReduceSum %3 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  %5 = shardc.Mul %arg2, %0 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %6 = shardc.Mul %1, %0 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %7 = shardc.Mul %5, %arg0 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %8 = shardc.Increment %arg4 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg1, %7, %arg5, %8 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg2, %6, %arg6, %8 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %new_param_2, %new_momentum_buffer_3 = shardc.SGDUpdate %arg3, %0, %arg7, %8 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  return %4, %8, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1, %new_param_2, %new_momentum_buffer_3 : tensor<f32>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
