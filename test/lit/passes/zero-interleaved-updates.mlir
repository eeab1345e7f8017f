// Updates interleaved with the backward pass (verified IR, though
// shardc-optimizer always puts every update after it) are rejected with a
// clear error instead of producing IR whose collectives do not dominate
// their uses.
// RUN: not shardc-opt %s -shardc-zero='world-size=2 zero-stage=0' 2>&1 | FileCheck %s
// RUN: not shardc-opt %s -shardc-zero='world-size=2 zero-stage=2' 2>&1 | FileCheck %s
// CHECK: error: 'shardc.{{[A-Za-z]+}}Update' op zero: optimizer updates must follow every gradient they use
func.func @main(%x: tensor<2xf32> {shardc.input = "x"}, %a: tensor<2xf32> {shardc.param = "m.a", shardc.unit = 0 : i64}, %b: tensor<2xf32> {shardc.param = "m.b", shardc.unit = 0 : i64}, %step: tensor<f32> {shardc.state = "optimizer.step"}, %ma: tensor<2xf32> {shardc.state = "m.a.momentum_buffer"}, %mb: tensor<2xf32> {shardc.state = "m.b.momentum_buffer"}) -> (tensor<f32>, tensor<2xf32> {shardc.updates = 1 : i64}, tensor<2xf32> {shardc.updates = 4 : i64}, tensor<2xf32> {shardc.updates = 2 : i64}, tensor<2xf32> {shardc.updates = 5 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = []} {
  %s = shardc.Increment %step : tensor<f32>
  %ga = shardc.Mul %x, %b {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %na, %nma = shardc.SGDUpdate %a, %ga, %ma, %s {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %gb = shardc.Mul %x, %a {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %nb, %nmb = shardc.SGDUpdate %b, %gb, %mb, %s {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  return %s, %na, %nma, %nb, %nmb : tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
