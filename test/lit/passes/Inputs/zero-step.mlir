func.func @main(%arg0: tensor<2x2xf32> {shardc.input = "x"}, %arg1: tensor<5x2xf32> {shardc.param = "fc.weight", shardc.unit = 0 : i64}, %arg2: tensor<5xf32> {shardc.param = "fc.bias", shardc.unit = 0 : i64}, %arg3: tensor<5xf32> {shardc.param = "head.scale", shardc.unit = 1 : i64}, %arg4: tensor<f32> {shardc.state = "optimizer.step"}, %arg5: tensor<5x2xf32> {shardc.state = "fc.weight.momentum_buffer"}, %arg6: tensor<5xf32> {shardc.state = "fc.bias.momentum_buffer"}, %arg7: tensor<5xf32> {shardc.state = "head.scale.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 4 : i64}, tensor<5x2xf32> {shardc.updates = 1 : i64}, tensor<5x2xf32> {shardc.updates = 5 : i64}, tensor<5xf32> {shardc.updates = 2 : i64}, tensor<5xf32> {shardc.updates = 6 : i64}, tensor<5xf32> {shardc.updates = 3 : i64}, tensor<5xf32> {shardc.updates = 7 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"]} {
  %0 = shardc.Constant dense<1.000000e+00> : tensor<2x5xf32>
  %1 = shardc.Gemm %arg0, %arg1, %arg2 {transB = true} : (tensor<2x2xf32>, tensor<5x2xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  %2 = shardc.Mul %1, %arg3 : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  %3 = shardc.ReduceSum %2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x5xf32> -> tensor<f32>
  %4 = shardc.Mul %arg3, %0 {shardc.backward} : (tensor<5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %5 = shardc.Mul %1, %0 {shardc.backward} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %6 = shardc.ReduceSum %5 {axes = array<i64: 0>, keepdims = true, shardc.backward} : tensor<2x5xf32> -> tensor<1x5xf32>
  %7 = shardc.Reshape %6 {shardc.backward} : tensor<1x5xf32> -> tensor<5xf32>
  %8 = shardc.Gemm %4, %arg0 {shardc.backward, transA = true} : (tensor<2x5xf32>, tensor<2x2xf32>) -> tensor<5x2xf32>
  %9 = shardc.ReduceSum %4 {axes = array<i64: 0>, keepdims = true, shardc.backward} : tensor<2x5xf32> -> tensor<1x5xf32>
  %10 = shardc.Reshape %9 {shardc.backward} : tensor<1x5xf32> -> tensor<5xf32>
  %11 = shardc.Increment %arg4 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg1, %8, %arg5, %11 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.899999976, nesterov = false, weight_decay = 0.000000e+00} : tensor<5x2xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg2, %10, %arg6, %11 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.899999976, nesterov = false, weight_decay = 0.000000e+00} : tensor<5xf32>, tensor<f32>
  %new_param_2, %new_momentum_buffer_3 = shardc.SGDUpdate %arg3, %7, %arg7, %11 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.899999976, nesterov = false, weight_decay = 0.000000e+00} : tensor<5xf32>, tensor<f32>
  return %3, %11, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1, %new_param_2, %new_momentum_buffer_3 : tensor<f32>, tensor<f32>, tensor<5x2xf32>, tensor<5x2xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}
