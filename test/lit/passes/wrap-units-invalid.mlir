// RUN: shardc-opt %s -shardc-wrap-units=min-num-params=-1 -verify-diagnostics

// expected-error@+1 {{wrap-units: min-num-params must be >= 0, got -1}}
func.func @main(%arg0: tensor<2xf32> {shardc.input = "x"}, %arg1: tensor<2xf32> {shardc.param = "w"}, %arg2: tensor<f32> {shardc.state = "optimizer.step"}, %arg3: tensor<2xf32> {shardc.state = "w.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 2 : i64}, tensor<2xf32> {shardc.updates = 1 : i64}, tensor<2xf32> {shardc.updates = 3 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"]} {
  %0 = shardc.Mul %arg0, %arg1 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  %2 = shardc.Increment %arg2 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg1, %arg0, %arg3, %2 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  return %1, %2, %new_param, %new_momentum_buffer : tensor<f32>, tensor<f32>, tensor<2xf32>, tensor<2xf32>
}
