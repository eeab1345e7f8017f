// RUN: shardc-opt %s -split-input-file -shardc-wrap-units | FileCheck %s
// RUN: shardc-opt %s -split-input-file -shardc-wrap-units=min-num-params=20 | FileCheck %s --check-prefix=MIN

// Default policy: one unit per layer (here, without numbered layers, the
// module: the name up to its last '.'), numbered in order of first use;
// optimizer state gets no unit.
// With min-num-params=20, consecutive parameters merge until a unit holds at
// least 20 elements: fc1.weight (8) + fc1.bias (4) + fc2.weight (12) = 24
// closes unit 0 across module boundaries; the rest (3 + 3 + 1) is unit 1.
// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<4x2xf32> {shardc.param = "fc1.weight", shardc.unit = 0 : i64}
// CHECK-SAME: tensor<4xf32> {shardc.param = "fc1.bias", shardc.unit = 0 : i64}
// CHECK-SAME: tensor<3x4xf32> {shardc.param = "fc2.weight", shardc.unit = 1 : i64}
// CHECK-SAME: tensor<3xf32> {shardc.param = "fc2.bias", shardc.unit = 1 : i64}
// CHECK-SAME: tensor<1x3xf32> {shardc.param = "head.weight", shardc.unit = 2 : i64}
// CHECK-SAME: tensor<1xf32> {shardc.param = "head.bias", shardc.unit = 2 : i64}
// CHECK-SAME: tensor<f32> {shardc.state = "optimizer.step"}
// CHECK-SAME: tensor<4x2xf32> {shardc.state = "fc1.weight.momentum_buffer"}
// MIN-LABEL: func.func @main
// MIN-SAME: {shardc.param = "fc1.weight", shardc.unit = 0 : i64}
// MIN-SAME: {shardc.param = "fc1.bias", shardc.unit = 0 : i64}
// MIN-SAME: {shardc.param = "fc2.weight", shardc.unit = 0 : i64}
// MIN-SAME: {shardc.param = "fc2.bias", shardc.unit = 1 : i64}
// MIN-SAME: {shardc.param = "head.weight", shardc.unit = 1 : i64}
// MIN-SAME: {shardc.param = "head.bias", shardc.unit = 1 : i64}
// MIN-SAME: tensor<f32> {shardc.state = "optimizer.step"}
func.func @main(%arg0: tensor<2x2xf32> {shardc.input = "x"}, %arg1: tensor<4x2xf32> {shardc.param = "fc1.weight"}, %arg2: tensor<4xf32> {shardc.param = "fc1.bias"}, %arg3: tensor<3x4xf32> {shardc.param = "fc2.weight"}, %arg4: tensor<3xf32> {shardc.param = "fc2.bias"}, %arg5: tensor<1x3xf32> {shardc.param = "head.weight"}, %arg6: tensor<1xf32> {shardc.param = "head.bias"}, %arg7: tensor<f32> {shardc.state = "optimizer.step"}, %arg8: tensor<4x2xf32> {shardc.state = "fc1.weight.momentum_buffer"}, %arg9: tensor<4xf32> {shardc.state = "fc1.bias.momentum_buffer"}, %arg10: tensor<3x4xf32> {shardc.state = "fc2.weight.momentum_buffer"}, %arg11: tensor<3xf32> {shardc.state = "fc2.bias.momentum_buffer"}, %arg12: tensor<1x3xf32> {shardc.state = "head.weight.momentum_buffer"}, %arg13: tensor<1xf32> {shardc.state = "head.bias.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 7 : i64}, tensor<4x2xf32> {shardc.updates = 1 : i64}, tensor<4x2xf32> {shardc.updates = 8 : i64}, tensor<4xf32> {shardc.updates = 2 : i64}, tensor<4xf32> {shardc.updates = 9 : i64}, tensor<3x4xf32> {shardc.updates = 3 : i64}, tensor<3x4xf32> {shardc.updates = 10 : i64}, tensor<3xf32> {shardc.updates = 4 : i64}, tensor<3xf32> {shardc.updates = 11 : i64}, tensor<1x3xf32> {shardc.updates = 5 : i64}, tensor<1x3xf32> {shardc.updates = 12 : i64}, tensor<1xf32> {shardc.updates = 6 : i64}, tensor<1xf32> {shardc.updates = 13 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"]} {
  %0 = shardc.Constant dense<2.000000e+00> : tensor<1xf32>
  %1 = shardc.Constant dense<1.000000e+00> : tensor<2x1xf32>
  %2 = shardc.Gemm %arg0, %arg1, %arg2 {transB = true} : (tensor<2x2xf32>, tensor<4x2xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %3 = shardc.Gemm %2, %arg3, %arg4 {transB = true} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = shardc.Gemm %3, %arg5, %arg6 {transB = true} : (tensor<2x3xf32>, tensor<1x3xf32>, tensor<1xf32>) -> tensor<2x1xf32>
  %5 = shardc.ReduceSum %4 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x1xf32> -> tensor<f32>
  %6 = shardc.Gemm %1, %arg5 {shardc.backward} : (tensor<2x1xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  %7 = shardc.Gemm %1, %3 {shardc.backward, transA = true} : (tensor<2x1xf32>, tensor<2x3xf32>) -> tensor<1x3xf32>
  %8 = shardc.Gemm %6, %arg3 {shardc.backward} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %9 = shardc.Gemm %6, %2 {shardc.backward, transA = true} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
  %10 = shardc.ReduceSum %6 {axes = array<i64: 0>, keepdims = true, shardc.backward} : tensor<2x3xf32> -> tensor<1x3xf32>
  %11 = shardc.Reshape %10 {shardc.backward} : tensor<1x3xf32> -> tensor<3xf32>
  %12 = shardc.Gemm %8, %arg0 {shardc.backward, transA = true} : (tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %13 = shardc.ReduceSum %8 {axes = array<i64: 0>, keepdims = true, shardc.backward} : tensor<2x4xf32> -> tensor<1x4xf32>
  %14 = shardc.Reshape %13 {shardc.backward} : tensor<1x4xf32> -> tensor<4xf32>
  %15 = shardc.Increment %arg7 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg1, %12, %arg8, %15 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<4x2xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg2, %14, %arg9, %15 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<4xf32>, tensor<f32>
  %new_param_2, %new_momentum_buffer_3 = shardc.SGDUpdate %arg3, %9, %arg10, %15 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<3x4xf32>, tensor<f32>
  %new_param_4, %new_momentum_buffer_5 = shardc.SGDUpdate %arg4, %11, %arg11, %15 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<3xf32>, tensor<f32>
  %new_param_6, %new_momentum_buffer_7 = shardc.SGDUpdate %arg5, %7, %arg12, %15 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<1x3xf32>, tensor<f32>
  %new_param_8, %new_momentum_buffer_9 = shardc.SGDUpdate %arg6, %0, %arg13, %15 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<1xf32>, tensor<f32>
  return %5, %15, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1, %new_param_2, %new_momentum_buffer_3, %new_param_4, %new_momentum_buffer_5, %new_param_6, %new_momentum_buffer_7, %new_param_8, %new_momentum_buffer_9 : tensor<f32>, tensor<f32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1x3xf32>, tensor<1x3xf32>, tensor<1xf32>, tensor<1xf32>
}

// -----

// Units follow first use, not argument order: enc.weight is declared after
// dec.weight but used first, so it is unit 0.
// CHECK-LABEL: func.func @main
// CHECK-SAME: {shardc.param = "dec.weight", shardc.unit = 1 : i64}
// CHECK-SAME: {shardc.param = "enc.weight", shardc.unit = 0 : i64}
// MIN-LABEL: func.func @main
// MIN-SAME: {shardc.param = "dec.weight", shardc.unit = 0 : i64}
// MIN-SAME: {shardc.param = "enc.weight", shardc.unit = 0 : i64}
func.func @main(%arg0: tensor<2xf32> {shardc.input = "x"}, %arg1: tensor<2xf32> {shardc.param = "dec.weight"}, %arg2: tensor<2xf32> {shardc.param = "enc.weight"}, %arg3: tensor<f32> {shardc.state = "optimizer.step"}, %arg4: tensor<2xf32> {shardc.state = "dec.weight.momentum_buffer"}, %arg5: tensor<2xf32> {shardc.state = "enc.weight.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 3 : i64}, tensor<2xf32> {shardc.updates = 1 : i64}, tensor<2xf32> {shardc.updates = 4 : i64}, tensor<2xf32> {shardc.updates = 2 : i64}, tensor<2xf32> {shardc.updates = 5 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"]} {
  %0 = shardc.Constant dense<1.000000e+00> : tensor<2xf32>
  %1 = shardc.Mul %arg0, %arg2 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = shardc.Mul %1, %arg1 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %3 = shardc.ReduceSum %2 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  %4 = shardc.Mul %arg1, %0 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %5 = shardc.Mul %1, %0 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %6 = shardc.Mul %4, %arg0 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %7 = shardc.Increment %arg3 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg1, %5, %arg4, %7 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg2, %6, %arg5, %7 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  return %3, %7, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1 : tensor<f32>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// A tied parameter (emb.weight: the embedding and, transposed, the head) has
// one update and belongs to exactly one unit, the one of its first use; its
// later use does not open a unit of its own.
// CHECK-LABEL: func.func @main
// CHECK-SAME: {shardc.param = "emb.weight", shardc.unit = 0 : i64}
// CHECK-SAME: {shardc.param = "mid.weight", shardc.unit = 1 : i64}
// CHECK-NOT: shardc.unit = 2
// MIN-LABEL: func.func @main
// MIN-SAME: {shardc.param = "emb.weight", shardc.unit = 0 : i64}
// MIN-SAME: {shardc.param = "mid.weight", shardc.unit = 0 : i64}
// MIN-NOT: shardc.unit = 1
func.func @main(%arg0: tensor<2xi64> {shardc.input = "idx"}, %arg1: tensor<5x3xf32> {shardc.param = "emb.weight"}, %arg2: tensor<3x3xf32> {shardc.param = "mid.weight"}, %arg3: tensor<f32> {shardc.state = "optimizer.step"}, %arg4: tensor<5x3xf32> {shardc.state = "emb.weight.momentum_buffer"}, %arg5: tensor<3x3xf32> {shardc.state = "mid.weight.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 3 : i64}, tensor<5x3xf32> {shardc.updates = 1 : i64}, tensor<5x3xf32> {shardc.updates = 4 : i64}, tensor<3x3xf32> {shardc.updates = 2 : i64}, tensor<3x3xf32> {shardc.updates = 5 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"]} {
  %0 = shardc.Constant dense<1.000000e+00> : tensor<2x5xf32>
  %1 = shardc.Gather %arg1, %arg0 {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %2 = shardc.Gemm %1, %arg2 : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %3 = shardc.Gemm %2, %arg1 {transB = true} : (tensor<2x3xf32>, tensor<5x3xf32>) -> tensor<2x5xf32>
  %4 = shardc.ReduceSum %3 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x5xf32> -> tensor<f32>
  %5 = shardc.Gemm %0, %arg1 {shardc.backward} : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
  %6 = shardc.Gemm %0, %2 {shardc.backward, transA = true} : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  %7 = shardc.Gemm %5, %arg2 {shardc.backward, transB = true} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %8 = shardc.Gemm %1, %5 {shardc.backward, transA = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
  %9 = shardc.GatherGrad %7, %arg0 {axis = 0 : i64, shardc.backward} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<5x3xf32>
  %10 = shardc.Add %6, %9 {shardc.backward} : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  %11 = shardc.Increment %arg3 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg1, %10, %arg4, %11 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<5x3xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg2, %8, %arg5, %11 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<3x3xf32>, tensor<f32>
  return %4, %11, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1 : tensor<f32>, tensor<f32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>
}

// -----

// Parameters under a numbered layer ("blocks.N") form one unit per layer,
// whatever submodule they belong to (one FSDP wrap per transformer block).
// CHECK-LABEL: func.func @main
// CHECK-SAME: {shardc.param = "blocks.0.attn.weight", shardc.unit = 0 : i64}
// CHECK-SAME: {shardc.param = "blocks.0.mlp.weight", shardc.unit = 0 : i64}
// CHECK-SAME: {shardc.param = "blocks.1.attn.weight", shardc.unit = 1 : i64}
// CHECK-SAME: {shardc.param = "blocks.1.mlp.weight", shardc.unit = 1 : i64}
// CHECK-SAME: tensor<f32> {shardc.state = "optimizer.step"}
// MIN-LABEL: func.func @main
// MIN-SAME: {shardc.param = "blocks.0.attn.weight", shardc.unit = 0 : i64}
// MIN-SAME: {shardc.param = "blocks.1.mlp.weight", shardc.unit = 0 : i64}
func.func @main(%arg0: tensor<2xf32> {shardc.input = "x"}, %arg1: tensor<2xf32> {shardc.param = "blocks.0.attn.weight"}, %arg2: tensor<2xf32> {shardc.param = "blocks.0.mlp.weight"}, %arg3: tensor<2xf32> {shardc.param = "blocks.1.attn.weight"}, %arg4: tensor<2xf32> {shardc.param = "blocks.1.mlp.weight"}, %arg5: tensor<f32> {shardc.state = "optimizer.step"}, %arg6: tensor<2xf32> {shardc.state = "blocks.0.attn.weight.momentum_buffer"}, %arg7: tensor<2xf32> {shardc.state = "blocks.0.mlp.weight.momentum_buffer"}, %arg8: tensor<2xf32> {shardc.state = "blocks.1.attn.weight.momentum_buffer"}, %arg9: tensor<2xf32> {shardc.state = "blocks.1.mlp.weight.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 5 : i64}, tensor<2xf32> {shardc.updates = 1 : i64}, tensor<2xf32> {shardc.updates = 6 : i64}, tensor<2xf32> {shardc.updates = 2 : i64}, tensor<2xf32> {shardc.updates = 7 : i64}, tensor<2xf32> {shardc.updates = 3 : i64}, tensor<2xf32> {shardc.updates = 8 : i64}, tensor<2xf32> {shardc.updates = 4 : i64}, tensor<2xf32> {shardc.updates = 9 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"]} {
  %0 = shardc.Constant dense<1.000000e+00> : tensor<2xf32>
  %1 = shardc.Mul %arg0, %arg1 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = shardc.Mul %1, %arg2 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %3 = shardc.Mul %2, %arg3 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %4 = shardc.Mul %3, %arg4 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %5 = shardc.ReduceSum %4 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  %6 = shardc.Mul %arg4, %0 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %7 = shardc.Mul %3, %0 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %8 = shardc.Mul %6, %arg3 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %9 = shardc.Mul %6, %2 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %10 = shardc.Mul %8, %arg2 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %11 = shardc.Mul %8, %1 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %12 = shardc.Mul %10, %arg0 {shardc.backward} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %13 = shardc.Increment %arg5 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg1, %12, %arg6, %13 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg2, %11, %arg7, %13 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %new_param_2, %new_momentum_buffer_3 = shardc.SGDUpdate %arg3, %9, %arg8, %13 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %new_param_4, %new_momentum_buffer_5 = shardc.SGDUpdate %arg4, %7, %arg9, %13 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  return %5, %13, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1, %new_param_2, %new_momentum_buffer_3, %new_param_4, %new_momentum_buffer_5 : tensor<f32>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
