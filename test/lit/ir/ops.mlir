// Every shardc op in its custom form: parsing, verifying and printing give
// back the same IR, also through the generic form.
// RUN: shardc-opt %s | shardc-opt | FileCheck %s
// RUN: shardc-opt %s -mlir-print-op-generic | shardc-opt | FileCheck %s

// CHECK-LABEL: func.func @constants_and_shapes(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x4xf32>)
func.func @constants_and_shapes(%x: tensor<2x3x4xf32>) -> (tensor<2xi64>, tensor<2x3xi1>, tensor<2xi64>, tensor<3xi64>) {
  // CHECK: %[[C:.*]] = shardc.Constant dense<[2, 3]> : tensor<2xi64>
  %c = shardc.Constant dense<[2, 3]> : tensor<2xi64>
  // CHECK: %[[B:.*]] = shardc.Constant dense<true> : tensor<2x3xi1>
  %b = shardc.Constant dense<true> : tensor<2x3xi1>
  // CHECK: %[[S:.*]] = shardc.Shape %[[X]] {end = 3 : i64, start = 1 : i64} : tensor<2x3x4xf32> -> tensor<2xi64>
  %s = shardc.Shape %x {start = 1 : i64, end = 3 : i64} : tensor<2x3x4xf32> -> tensor<2xi64>
  // The default start 0 is not printed.
  // CHECK: %[[S0:.*]] = shardc.Shape %[[X]] : tensor<2x3x4xf32> -> tensor<3xi64>
  %s0 = shardc.Shape %x {start = 0 : i64} : tensor<2x3x4xf32> -> tensor<3xi64>
  // CHECK: return %[[C]], %[[B]], %[[S]], %[[S0]]
  return %c, %b, %s, %s0 : tensor<2xi64>, tensor<2x3xi1>, tensor<2xi64>, tensor<3xi64>
}

// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME:    %[[A:[^:]*]]: tensor<2x3xf32>, %[[B:[^:]*]]: tensor<3xf32>, %[[M:[^:]*]]: tensor<2x3xi1>, %[[I:[^:]*]]: tensor<2x3xi64>)
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %m: tensor<2x3xi1>, %i: tensor<2x3xi64>) {
  // CHECK: shardc.Add %[[A]], %[[B]] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = shardc.Add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: shardc.Sub %[[B]], %[[A]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = shardc.Sub %b, %a : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: shardc.Mul %[[I]], %[[I]] : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  %2 = shardc.Mul %i, %i : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  // CHECK: shardc.Div %[[A]], %[[A]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = shardc.Div %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: shardc.Pow %[[A]], %[[I]] : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  %4 = shardc.Pow %a, %i : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  // CHECK: shardc.Where %[[M]], %[[A]], %[[B]] : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = shardc.Where %m, %a, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: shardc.Sqrt %[[A]] : tensor<2x3xf32>
  %6 = shardc.Sqrt %a : tensor<2x3xf32>
  // CHECK: shardc.Exp %[[A]] : tensor<2x3xf32>
  %7 = shardc.Exp %a : tensor<2x3xf32>
  // CHECK: shardc.Log %[[A]] : tensor<2x3xf32>
  %8 = shardc.Log %a : tensor<2x3xf32>
  // CHECK: shardc.Erf %[[A]] : tensor<2x3xf32>
  %9 = shardc.Erf %a : tensor<2x3xf32>
  // CHECK: shardc.Tanh %[[A]] : tensor<2x3xf32>
  %10 = shardc.Tanh %a : tensor<2x3xf32>
  // CHECK: shardc.Sigmoid %[[A]] : tensor<2x3xf32>
  %11 = shardc.Sigmoid %a : tensor<2x3xf32>
  // CHECK: shardc.Neg %[[I]] : tensor<2x3xi64>
  %12 = shardc.Neg %i : tensor<2x3xi64>
  // CHECK: shardc.Relu %[[A]] : tensor<2x3xf32>
  %13 = shardc.Relu %a : tensor<2x3xf32>
  // CHECK: shardc.Identity %[[M]] : tensor<2x3xi1>
  %14 = shardc.Identity %m : tensor<2x3xi1>
  // CHECK: shardc.Cast %[[A]] : tensor<2x3xf32> -> tensor<2x3xi64>
  %15 = shardc.Cast %a : tensor<2x3xf32> -> tensor<2x3xi64>
  return
}

// CHECK-LABEL: func.func @linalg_and_normalization(
// CHECK-SAME:    %[[A:[^:]*]]: tensor<2x4xf32>, %[[B:[^:]*]]: tensor<3x4xf32>, %[[C:[^:]*]]: tensor<3xf32>, %[[X:[^:]*]]: tensor<2x3x4xf32>, %[[S:[^:]*]]: tensor<4xf32>)
func.func @linalg_and_normalization(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>, %c: tensor<3xf32>, %x: tensor<2x3x4xf32>, %s: tensor<4xf32>) {
  // CHECK: shardc.Gemm %[[A]], %[[B]], %[[C]] {alpha = 5.000000e-01 : f32, transB = true} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = shardc.Gemm %a, %b, %c {alpha = 0.5 : f32, transB = true} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: shardc.Gemm %[[A]], %[[B]] {transB = true} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %1 = shardc.Gemm %a, %b {transB = true} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  // CHECK: shardc.MatMul %[[X]], %[[S]] : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  %2 = shardc.MatMul %x, %s : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  // CHECK: shardc.Softmax %[[X]] {axis = 2 : i64} : tensor<2x3x4xf32>
  %3 = shardc.Softmax %x {axis = 2 : i64} : tensor<2x3x4xf32>
  // CHECK: shardc.LogSoftmax %[[X]] {axis = 0 : i64} : tensor<2x3x4xf32>
  %4 = shardc.LogSoftmax %x {axis = 0 : i64} : tensor<2x3x4xf32>
  // CHECK: shardc.LayerNormalization %[[X]], %[[S]], %[[S]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  %5:3 = shardc.LayerNormalization %x, %s, %s {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  // CHECK: shardc.LayerNormalization %[[X]], %[[S]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  %6:3 = shardc.LayerNormalization %x, %s {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  // CHECK: shardc.BatchNormalization %[[X]], %[[C]], %[[C]], %[[C]], %[[C]] {epsilon = 9.99999974E-6 : f32, momentum = 0.899999976 : f32, training_mode = true} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %7:3 = shardc.BatchNormalization %x, %c, %c, %c, %c {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // SyncBatchNorm's moments: 2 ranks of 8 values per channel.
  // CHECK: %[[P:.*]] = shardc.BatchNormStats %[[X]] {count = 16 : i64} : (tensor<2x3x4xf32>) -> tensor<6xf64>
  %8 = shardc.BatchNormStats %x {count = 16 : i64} : (tensor<2x3x4xf32>) -> tensor<6xf64>
  // CHECK: shardc.BatchNormalization %[[X]], %[[C]], %[[C]], %[[C]], %[[C]] moments %[[P]] {batch_count = 16 : i64, {{.*}}} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<6xf64>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %9:3 = shardc.BatchNormalization %x, %c, %c, %c, %c moments %8 {batch_count = 16 : i64, epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<6xf64>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: %[[Q:.*]] = shardc.BatchNormGradStats %[[X]], %[[X]], %[[P]] {count = 16 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<6xf64>) -> tensor<6xf64>
  %10 = shardc.BatchNormGradStats %x, %x, %8 {count = 16 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<6xf64>) -> tensor<6xf64>
  // CHECK: shardc.BatchNormGrad %[[X]], %[[X]], %[[C]], %[[C]], %[[C]] moments %[[P]], %[[Q]] {epsilon = 9.99999974E-6 : f32, training_mode = true} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<6xf64>, tensor<6xf64>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %11:3 = shardc.BatchNormGrad %x, %x, %c, %c, %c moments %8, %10 {epsilon = 1.0e-5 : f32, training_mode = true} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<6xf64>, tensor<6xf64>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// CHECK-LABEL: func.func @conv_and_pool(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<1x4x7x7xf32>, %[[W:[^:]*]]: tensor<6x2x3x3xf32>, %[[B:[^:]*]]: tensor<6xf32>)
func.func @conv_and_pool(%x: tensor<1x4x7x7xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>) {
  // CHECK: shardc.Conv %[[X]], %[[W]], %[[B]] {dilations = array<i64: 1, 2>, group = 2 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 0, 1, 2>, strides = array<i64: 2, 1>} : (tensor<1x4x7x7xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x4x5xf32>
  %0 = shardc.Conv %x, %w, %b {dilations = array<i64: 1, 2>, group = 2 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 0, 1, 2>, strides = array<i64: 2, 1>} : (tensor<1x4x7x7xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x4x5xf32>
  // CHECK: shardc.Conv %[[X]], %[[W]] {{{.*}}} : (tensor<1x4x7x7xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x5x5xf32>
  %1 = shardc.Conv %x, %w {dilations = array<i64: 1, 1>, group = 2 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x7x7xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x5x5xf32>
  // CHECK: shardc.MaxPool %[[X]] {ceil_mode = true, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>} : tensor<1x4x7x7xf32> -> tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>
  %2:2 = shardc.MaxPool %x {ceil_mode = true, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>} : tensor<1x4x7x7xf32> -> tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>
  // CHECK: shardc.MaxPool %[[X]] {{{.*}}} : tensor<1x4x7x7xf32> -> tensor<1x4x3x3xf32>{{$}}
  %3 = shardc.MaxPool %x {ceil_mode = false, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, storage_order = 0 : i64, strides = array<i64: 2, 2>} : tensor<1x4x7x7xf32> -> tensor<1x4x3x3xf32>
  // CHECK: shardc.AveragePool %[[X]] {ceil_mode = false, count_include_pad = true, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x4x7x7xf32> -> tensor<1x4x4x4xf32>
  %4 = shardc.AveragePool %x {ceil_mode = false, count_include_pad = true, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x4x7x7xf32> -> tensor<1x4x4x4xf32>
  // CHECK: shardc.GlobalAveragePool %[[X]] : tensor<1x4x7x7xf32> -> tensor<1x4x1x1xf32>
  %5 = shardc.GlobalAveragePool %x : tensor<1x4x7x7xf32> -> tensor<1x4x1x1xf32>
  return
}

// CHECK-LABEL: func.func @data_movement(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x3x4xf32>, %[[I:[^:]*]]: tensor<5xi32>, %[[E:[^:]*]]: tensor<3x1xf32>)
func.func @data_movement(%x: tensor<2x3x4xf32>, %i: tensor<5xi32>, %e: tensor<3x1xf32>) {
  // CHECK: shardc.Reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %0 = shardc.Reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // CHECK: shardc.Transpose %[[X]] {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = shardc.Transpose %x {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  // CHECK: shardc.Gather %[[X]], %[[I]] {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi32>) -> tensor<2x5x4xf32>
  %2 = shardc.Gather %x, %i {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi32>) -> tensor<2x5x4xf32>
  // CHECK: shardc.Concat %[[X]], %[[X]], %[[X]] {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x12xf32>
  %3 = shardc.Concat %x, %x, %x {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x12xf32>
  // CHECK: shardc.Split %[[X]] {axis = 1 : i64} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>, tensor<2x2x4xf32>
  %4:2 = shardc.Split %x {axis = 1 : i64} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>, tensor<2x2x4xf32>
  // CHECK: shardc.Slice %[[X]] {starts = array<i64: 1, 0, 3>, steps = array<i64: -1, 1, -2>} : tensor<2x3x4xf32> -> tensor<2x3x2xf32>
  %5 = shardc.Slice %x {starts = array<i64: 1, 0, 3>, steps = array<i64: -1, 1, -2>} : tensor<2x3x4xf32> -> tensor<2x3x2xf32>
  // CHECK: shardc.Expand %[[E]] : tensor<3x1xf32> -> tensor<2x3x4xf32>
  %6 = shardc.Expand %e : tensor<3x1xf32> -> tensor<2x3x4xf32>
  // CHECK: shardc.GatherElements %[[X]], %[[J:[^ ]*]] {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x2x1xi64>) -> tensor<2x2x1xf32>
  %j = shardc.Constant dense<1> : tensor<2x2x1xi64>
  %ge = shardc.GatherElements %x, %j {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x2x1xi64>) -> tensor<2x2x1xf32>
  // CHECK: shardc.GatherElementsGrad %{{.*}}, %[[J]] {axis = 2 : i64} : (tensor<2x2x1xf32>, tensor<2x2x1xi64>) -> tensor<2x3x4xf32>
  %geg = shardc.GatherElementsGrad %ge, %j {axis = 2 : i64} : (tensor<2x2x1xf32>, tensor<2x2x1xi64>) -> tensor<2x3x4xf32>
  // CHECK: shardc.ScatterElements %[[X]], %[[J]], %{{.*}} {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x2x1xi64>, tensor<2x2x1xf32>) -> tensor<2x3x4xf32>
  %se = shardc.ScatterElements %x, %j, %ge {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x2x1xi64>, tensor<2x2x1xf32>) -> tensor<2x3x4xf32>
  // CHECK: shardc.TopKIndices %[[X]] {axis = 2 : i64, k = 2 : i64, largest = false} : tensor<2x3x4xf32> -> tensor<2x3x2xi64>
  %tk = shardc.TopKIndices %x {axis = 2 : i64, k = 2 : i64, largest = false} : tensor<2x3x4xf32> -> tensor<2x3x2xi64>
  // CHECK: shardc.ReduceMean %[[X]] {axes = array<i64: 0, 2>, keepdims = true} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %7 = shardc.ReduceMean %x {axes = array<i64: 0, 2>, keepdims = true} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  // CHECK: shardc.ReduceSum %[[X]] {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
  %8 = shardc.ReduceSum %x {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @losses(
// CHECK-SAME:    %[[S:[^:]*]]: tensor<2x5x3xf32>, %[[L:[^:]*]]: tensor<2x3xi64>, %[[W:[^:]*]]: tensor<5xf32>)
func.func @losses(%s: tensor<2x5x3xf32>, %l: tensor<2x3xi64>, %w: tensor<5xf32>) {
  // CHECK: shardc.SoftmaxCrossEntropyLoss %[[S]], %[[L]], %[[W]] {ignore_index = -100 : i64, reduction = #shardc.reduction<none>} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> (tensor<2x3xf32>, tensor<2x5x3xf32>)
  %0:2 = shardc.SoftmaxCrossEntropyLoss %s, %l, %w {ignore_index = -100 : i64, reduction = #shardc.reduction<none>} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> (tensor<2x3xf32>, tensor<2x5x3xf32>)
  // CHECK: shardc.SoftmaxCrossEntropyLoss %[[S]], %[[L]] {reduction = #shardc.reduction<mean>} : (tensor<2x5x3xf32>, tensor<2x3xi64>) -> tensor<f32>
  %1 = shardc.SoftmaxCrossEntropyLoss %s, %l {reduction = #shardc.reduction<mean>} : (tensor<2x5x3xf32>, tensor<2x3xi64>) -> tensor<f32>
  // CHECK: shardc.NegativeLogLikelihoodLoss %[[S]], %[[L]] {reduction = #shardc.reduction<sum>} : (tensor<2x5x3xf32>, tensor<2x3xi64>) -> tensor<f32>
  %2 = shardc.NegativeLogLikelihoodLoss %s, %l {reduction = #shardc.reduction<sum>} : (tensor<2x5x3xf32>, tensor<2x3xi64>) -> tensor<f32>
  // CHECK: shardc.NegativeLogLikelihoodLoss %[[S]], %[[L]], %[[W]] {ignore_index = 0 : i64, reduction = #shardc.reduction<mean>} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> tensor<f32>
  %3 = shardc.NegativeLogLikelihoodLoss %s, %l, %w {ignore_index = 0 : i64, reduction = #shardc.reduction<mean>} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @abs_argmax_range(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x3xf32>, %[[S:[^:]*]]: tensor<i64>, %[[L:[^:]*]]: tensor<i64>, %[[D:[^:]*]]: tensor<i64>)
func.func @abs_argmax_range(%x: tensor<2x3xf32>, %s: tensor<i64>, %l: tensor<i64>, %d: tensor<i64>) {
  // CHECK: shardc.Abs %[[X]] : tensor<2x3xf32>
  %0 = shardc.Abs %x : tensor<2x3xf32>
  // CHECK: shardc.ArgMax %[[X]] {axis = 1 : i64, keepdims = false, select_last_index = true} : tensor<2x3xf32> -> tensor<2xi64>
  %1 = shardc.ArgMax %x {axis = 1 : i64, keepdims = false, select_last_index = true} : tensor<2x3xf32> -> tensor<2xi64>
  // CHECK: shardc.Range %[[S]], %[[L]], %[[D]] : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<5xi64>
  %2 = shardc.Range %s, %l, %d : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<5xi64>
  return
}

// CHECK-LABEL: func.func @clipping(
// CHECK-SAME:    %[[G:[^:]*]]: tensor<4x3xf32>, %[[H:[^:]*]]: tensor<3xf64>, %[[S:[^:]*]]: tensor<f32>)
func.func @clipping(%g: tensor<4x3xf32>, %h: tensor<3xf64>, %s: tensor<f32>) {
  // CHECK: %[[P0:.*]] = shardc.PartialNorm %[[G]] {norm_type = #shardc.norm_type<l2>} : (tensor<4x3xf32>) -> tensor<f64>
  %0 = shardc.PartialNorm %g {norm_type = #shardc.norm_type<l2>} : (tensor<4x3xf32>) -> tensor<f64>
  // CHECK: %[[P1:.*]] = shardc.PartialNorm %[[H]], %[[P0]] {norm_type = #shardc.norm_type<inf>} : (tensor<3xf64>, tensor<f64>) -> tensor<f64>
  %1 = shardc.PartialNorm %h, %0 {norm_type = #shardc.norm_type<inf>} : (tensor<3xf64>, tensor<f64>) -> tensor<f64>
  // CHECK: %{{.*}}, %[[C:.*]] = shardc.ClipCoefficient %[[P1]] {max_norm = 2.500000e-01 : f64, norm_type = #shardc.norm_type<inf>} : tensor<f64> -> tensor<f32>, tensor<f32>
  %n, %c = shardc.ClipCoefficient %1 {max_norm = 0.25 : f64, norm_type = #shardc.norm_type<inf>} : tensor<f64> -> tensor<f32>, tensor<f32>
  // CHECK: shardc.AdamUpdate %[[G]], %[[G]], %[[G]], %[[G]], %[[S]] scaled_by %[[C]] {{{.*}}} : tensor<4x3xf32>, tensor<f32>, tensor<f32>
  %2:3 = shardc.AdamUpdate %g, %g, %g, %g, %s scaled_by %c {beta1 = 0.9, beta2 = 0.999, decoupled = true, eps = 1.0e-8, lr = 0.001, weight_decay = 0.01} : tensor<4x3xf32>, tensor<f32>, tensor<f32>
  return
}
