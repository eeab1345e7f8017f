// RUN: shardc-opt %s -split-input-file -shardc-fuse-elementwise | FileCheck %s
// RUN: shardc-opt %s -split-input-file -shardc-fuse-elementwise=fuse-elementwise=false | FileCheck %s --check-prefix=OFF

// GELU after a bias add, as PyTorch exports it: one fused op. The bias is a
// trailing vector, the constants scalars; %h and %a are read after the
// chain (as backward reads them), so they are results besides %y.
// CHECK-LABEL: func.func @gelu
// CHECK: %[[F:.*]]:3 = shardc.FusedElementwise %arg1, %arg0, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[B:.*]]: tensor<8xf32>, %[[X:.*]]: tensor<4x8xf32>, %[[S:.*]]: tensor<f32>, %[[O:.*]]: tensor<f32>, %[[HALF:.*]]: tensor<f32>):
// CHECK-NEXT: %[[H:.*]] = shardc.Add %[[B]], %[[X]]
// CHECK-NEXT: %[[D:.*]] = shardc.Div %[[H]], %[[S]]
// CHECK-NEXT: %[[E:.*]] = shardc.Erf %[[D]]
// CHECK-NEXT: %[[A:.*]] = shardc.Add %[[E]], %[[O]]
// CHECK-NEXT: %[[M:.*]] = shardc.Mul %[[H]], %[[A]]
// CHECK-NEXT: %[[Y:.*]] = shardc.Mul %[[M]], %[[HALF]]
// CHECK-NEXT: shardc.Yield %[[H]], %[[A]], %[[Y]] : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]#2, %[[F]]#0, %[[F]]#1
// OFF-LABEL: func.func @gelu
// OFF-NOT: FusedElementwise
func.func @gelu(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %sqrt2 = shardc.Constant dense<1.41421354> : tensor<f32>
  %one = shardc.Constant dense<1.0> : tensor<f32>
  %half = shardc.Constant dense<0.5> : tensor<f32>
  %h = shardc.Add %b, %x : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %d = shardc.Div %h, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = shardc.Erf %d : tensor<4x8xf32>
  %a = shardc.Add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = shardc.Mul %h, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = shardc.Mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y, %h, %a : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Attention's scale and causal mask: the i1 mask is an input of the fused
// op (a trailing 1x1x4x4 run), the chain's only result feeds Softmax.
// CHECK-LABEL: func.func @mask
// CHECK: %[[F:.*]] = shardc.FusedElementwise %arg0, %{{.*}}, %arg1, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<f32>, tensor<1x1x4x4xi1>, tensor<f32>) -> tensor<2x3x4x4xf32>
// CHECK: shardc.Mul
// CHECK-NEXT: shardc.Where
// CHECK-NEXT: shardc.Yield
// CHECK: shardc.Softmax %[[F]]
func.func @mask(%s: tensor<2x3x4x4xf32>, %m: tensor<1x1x4x4xi1>) -> tensor<2x3x4x4xf32> {
  %scale = shardc.Constant dense<0.35> : tensor<f32>
  %ninf = shardc.Constant dense<0xFF800000> : tensor<f32>
  %a = shardc.Mul %s, %scale : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %w = shardc.Where %m, %a, %ninf : (tensor<1x1x4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %p = shardc.Softmax %w {axis = 3 : i64} : tensor<2x3x4x4xf32>
  return %p : tensor<2x3x4x4xf32>
}

// -----

// %a is read by the Softmax between the two chains' ops: fusing %b into %a's
// chain would put the fused op after that reader. So both stay single ops,
// and single ops are not rewritten.
// CHECK-LABEL: func.func @reader_between
// CHECK-NOT: FusedElementwise
// CHECK: shardc.Neg
// CHECK: shardc.Softmax
// CHECK: shardc.Exp
func.func @reader_between(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %a = shardc.Neg %x : tensor<2x4xf32>
  %s = shardc.Softmax %a {axis = 1 : i64} : tensor<2x4xf32>
  %b = shardc.Exp %a : tensor<2x4xf32>
  return %s, %b : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Not fused: another shape (a broadcast result is its own chain), f64, a
// middle broadcast (2x1x4 against 2x3x4 spans two runs) and an i64 Pow
// exponent.
// CHECK-LABEL: func.func @not_fusible
// CHECK-NOT: FusedElementwise
func.func @not_fusible(%x: tensor<2x3x4xf32>, %y: tensor<2x1x4xf32>, %d: tensor<4xf64>, %k: tensor<i64>) -> (tensor<2x3x4xf32>, tensor<4xf64>, tensor<2x3x4xf32>) {
  %a = shardc.Add %x, %y : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  %p = shardc.Pow %a, %k : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  %e = shardc.Exp %d : tensor<4xf64>
  %n = shardc.Neg %e : tensor<4xf64>
  return %p, %n, %a : tensor<2x3x4xf32>, tensor<4xf64>, tensor<2x3x4xf32>
}

// -----

// ZeRO's gradient average before an f32 Adam update becomes the update's
// grad_scale; a Mul that something else reads stays.
// CHECK-LABEL: func.func @grad_scale
// CHECK: %[[HALF:.*]] = shardc.Constant dense<5.000000e-01> : tensor<f32>
// CHECK-NOT: shardc.Mul
// CHECK: shardc.AdamUpdate %arg0, %arg1, %arg2, %arg3, %arg4 scaled_by %[[HALF]]
// CHECK: %[[KEEP:.*]] = shardc.Mul %arg1, %[[HALF]]
// CHECK: shardc.AdamUpdate %arg0, %[[KEEP]]
// CHECK-NOT: scaled_by
// CHECK: return
func.func @grad_scale(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %step: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %half = shardc.Constant dense<0.5> : tensor<f32>
  %a = shardc.Mul %g, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %p1, %m1, %v1 = shardc.AdamUpdate %p, %a, %m, %v, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, decoupled = false, eps = 1.0e-8 : f64, lr = 1.0e-3 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<f32>
  %b = shardc.Mul %g, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %p2, %m2, %v2 = shardc.AdamUpdate %p, %b, %m, %v, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, decoupled = false, eps = 1.0e-8 : f64, lr = 1.0e-3 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<f32>
  return %p1, %p2, %b, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A chain nothing reads stays as it is (a fused op needs a result), and an
// op whose operands come from two chains joins the first it may: %c joins
// %a's chain, %b's stays alone.
// CHECK-LABEL: func.func @dead_and_two_chains
// CHECK: shardc.Exp %arg0
// CHECK-NEXT: shardc.Neg
// CHECK-NEXT: %[[B:.*]] = shardc.Sqrt %arg1
// CHECK-NEXT: %[[F:.*]] = shardc.FusedElementwise %arg1, %[[B]]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: shardc.Abs
// CHECK-NEXT: shardc.Add
// CHECK-NEXT: shardc.Yield
// CHECK: return %[[F]], %[[B]]
func.func @dead_and_two_chains(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %d = shardc.Exp %x : tensor<4xf32>
  %e = shardc.Neg %d : tensor<4xf32>
  %b = shardc.Sqrt %y : tensor<4xf32>
  %a = shardc.Abs %y : tensor<4xf32>
  %c = shardc.Add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %c, %b : tensor<4xf32>, tensor<4xf32>
}
