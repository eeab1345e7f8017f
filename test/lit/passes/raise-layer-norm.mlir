// RUN: shardc-opt %s -split-input-file -shardc-raise-layer-norm | FileCheck %s

// PyTorch's opset-14 nn.LayerNorm: the whole chain, scale and bias included,
// becomes one LayerNormalization over axis 2.
// CHECK-LABEL: func.func @affine
// CHECK-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = shardc.LayerNormalization %arg0, %arg1, %arg2 {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
// CHECK-NEXT: return %[[Y]]
func.func @affine(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %two = shardc.Constant dense<2.0> : tensor<f32>
  %eps = shardc.Constant dense<9.99999974E-6> : tensor<f32>
  %m = shardc.ReduceMean %x {axes = array<i64: 2>, keepdims = true} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %d = shardc.Sub %x, %m : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %p = shardc.Pow %d, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %v = shardc.ReduceMean %p {axes = array<i64: 2>, keepdims = true} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %e = shardc.Add %v, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %s = shardc.Sqrt %e : tensor<2x3x1xf32>
  %n = shardc.Div %d, %s : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y = shardc.Mul %n, %g : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %z = shardc.Add %b, %y : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %z : tensor<2x3x8xf32>
}

// -----

// No affine part, d * d for the square, epsilon on the left, two trailing
// axes: a ones scale over the normalized shape 3x8, axis 1.
// CHECK-LABEL: func.func @plain
// CHECK: %[[ONES:.*]] = shardc.Constant dense<1.000000e+00> : tensor<3x8xf32>
// CHECK: shardc.LayerNormalization %arg0, %[[ONES]] {axis = 1 : i64, epsilon = 1.000000e-03 : f32}
// CHECK-NOT: shardc.ReduceMean
func.func @plain(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %eps = shardc.Constant dense<1.0E-3> : tensor<1xf32>
  %m = shardc.ReduceMean %x {axes = array<i64: 1, 2>, keepdims = true} : tensor<2x3x8xf32> -> tensor<2x1x1xf32>
  %d = shardc.Sub %x, %m : (tensor<2x3x8xf32>, tensor<2x1x1xf32>) -> tensor<2x3x8xf32>
  %p = shardc.Mul %d, %d : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %v = shardc.ReduceMean %p {axes = array<i64: 1, 2>, keepdims = true} : tensor<2x3x8xf32> -> tensor<2x1x1xf32>
  %e = shardc.Add %eps, %v : (tensor<1xf32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %s = shardc.Sqrt %e : tensor<2x1x1xf32>
  %n = shardc.Div %d, %s : (tensor<2x3x8xf32>, tensor<2x1x1xf32>) -> tensor<2x3x8xf32>
  return %n : tensor<2x3x8xf32>
}

// -----

// The centred value is also returned: the chain stays as written.
// CHECK-LABEL: func.func @shared
// CHECK-NOT: shardc.LayerNormalization
// CHECK: shardc.Div
func.func @shared(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = shardc.Constant dense<2.0> : tensor<f32>
  %eps = shardc.Constant dense<1.0E-5> : tensor<f32>
  %m = shardc.ReduceMean %x {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = shardc.Sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p = shardc.Pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %v = shardc.ReduceMean %p {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %e = shardc.Add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = shardc.Sqrt %e : tensor<4x1xf32>
  %n = shardc.Div %d, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n, %d : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Not over the trailing axes (a mean over axis 0), and not a square (Pow
// by 3): neither is a layer norm.
// CHECK-LABEL: func.func @leading
// CHECK-NOT: shardc.LayerNormalization
func.func @leading(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %two = shardc.Constant dense<2.0> : tensor<f32>
  %eps = shardc.Constant dense<1.0E-5> : tensor<f32>
  %m = shardc.ReduceMean %x {axes = array<i64: 0>, keepdims = true} : tensor<4x8xf32> -> tensor<1x8xf32>
  %d = shardc.Sub %x, %m : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %p = shardc.Pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %v = shardc.ReduceMean %p {axes = array<i64: 0>, keepdims = true} : tensor<4x8xf32> -> tensor<1x8xf32>
  %e = shardc.Add %v, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s = shardc.Sqrt %e : tensor<1x8xf32>
  %n = shardc.Div %d, %s : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @cube
// CHECK-NOT: shardc.LayerNormalization
func.func @cube(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %three = shardc.Constant dense<3.0> : tensor<f32>
  %eps = shardc.Constant dense<1.0E-5> : tensor<f32>
  %m = shardc.ReduceMean %x {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = shardc.Sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p = shardc.Pow %d, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %v = shardc.ReduceMean %p {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %e = shardc.Add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = shardc.Sqrt %e : tensor<4x1xf32>
  %n = shardc.Div %d, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n : tensor<4x8xf32>
}
