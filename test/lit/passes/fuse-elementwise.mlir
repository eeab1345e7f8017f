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

// ZeRO-1's gradient shard: a ShardSlice of averaged gradients (flattened,
// then zero padding) becomes a shard of the raw gradients and the average
// the update's grad_scale. A part scaled by another scalar keeps every Mul.
// CHECK-LABEL: func.func @grad_scale_shard
// CHECK: %[[HALF:.*]] = shardc.Constant dense<5.000000e-01> : tensor<f32>
// CHECK-NOT: shardc.Mul
// CHECK: %[[FLAT:.*]] = shardc.Reshape %arg1
// CHECK: %[[S:.*]] = shardc.ShardSlice %[[FLAT]], %arg2, %{{.*}} {world_size = 2 : i64} : tensor<4xf32>, tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
// CHECK: shardc.AdamUpdate %arg0, %[[S]], %arg3, %arg4, %arg5 scaled_by %[[HALF]]
// CHECK: shardc.Mul %arg2, %[[HALF]]
// CHECK: shardc.Mul %arg2, %{{.*}}
// CHECK: shardc.ShardSlice
// CHECK-NOT: scaled_by
// CHECK: return
func.func @grad_scale_shard(%p: tensor<4xf32>, %w: tensor<2x2xf32>, %b: tensor<2xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %step: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %half = shardc.Constant dense<0.5> : tensor<f32>
  %quarter = shardc.Constant dense<0.25> : tensor<f32>
  %pad = shardc.Constant dense<0.0> : tensor<2xf32>
  %wa = shardc.Mul %w, %half : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %wf = shardc.Reshape %wa : tensor<2x2xf32> -> tensor<4xf32>
  %ba = shardc.Mul %b, %half : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %g = shardc.ShardSlice %wf, %ba, %pad {world_size = 2 : i64} : tensor<4xf32>, tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
  %p1, %m1, %v1 = shardc.AdamUpdate %p, %g, %m, %v, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, decoupled = false, eps = 1.0e-8 : f64, lr = 1.0e-3 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<f32>
  %b1 = shardc.Mul %b, %half : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %b2 = shardc.Mul %b, %quarter : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %g2 = shardc.ShardSlice %b1, %b2 {world_size = 1 : i64} : tensor<2xf32>, tensor<2xf32> -> tensor<4xf32>
  %p2, %m2, %v2 = shardc.AdamUpdate %p, %g2, %m, %v, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, decoupled = false, eps = 1.0e-8 : f64, lr = 1.0e-3 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<f32>
  return %p1, %p2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A chain nothing reads stays as it is (a fused op needs a result), and an
// op whose operands come from two chains joins both: %c merges %a's chain
// and %b's (whose value the return also reads) into one kernel, its body in
// the block's order.
// CHECK-LABEL: func.func @dead_and_two_chains
// CHECK: shardc.Exp %arg0
// CHECK-NEXT: shardc.Neg
// CHECK-NEXT: %[[F:.*]]:2 = shardc.FusedElementwise %arg1 : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[Y:.*]]: tensor<4xf32>):
// CHECK-NEXT: %[[B:.*]] = shardc.Sqrt %[[Y]]
// CHECK-NEXT: %[[A:.*]] = shardc.Abs %[[Y]]
// CHECK-NEXT: %[[C:.*]] = shardc.Add %[[A]], %[[B]]
// CHECK-NEXT: shardc.Yield %[[B]], %[[C]]
// CHECK: return %[[F]]#1, %[[F]]#0
func.func @dead_and_two_chains(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %d = shardc.Exp %x : tensor<4xf32>
  %e = shardc.Neg %d : tensor<4xf32>
  %b = shardc.Sqrt %y : tensor<4xf32>
  %a = shardc.Abs %y : tensor<4xf32>
  %c = shardc.Add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %c, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// Two chains meet at %c, but the Softmax reads %b before %c: merging %b's
// chain would move %b after its reader, so %c joins %a's chain alone.
// CHECK-LABEL: func.func @merge_blocked
// CHECK: %[[B:.*]] = shardc.Sqrt %arg1
// CHECK-NEXT: shardc.Softmax %[[B]]
// CHECK-NEXT: shardc.FusedElementwise %arg1, %[[B]]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: shardc.Abs
// CHECK-NEXT: shardc.Add
// CHECK-NEXT: shardc.Yield
func.func @merge_blocked(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = shardc.Abs %y : tensor<4xf32>
  %b = shardc.Sqrt %y : tensor<4xf32>
  %s = shardc.Softmax %b {axis = 0 : i64} : tensor<4xf32>
  %c = shardc.Add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %c, %s : tensor<4xf32>, tensor<4xf32>
}

// -----

// GELU's forward and backward as autodiff writes them. Backward reads the
// bias add %h, x / sqrt(2) %d and 1 + erf %a; %d and %a follow from %h in
// elementwise ops, so backward recomputes them: forward's kernel writes %h
// and %y only, and backward's one kernel reads the gradient and %h. The
// copies carry backward's mark. %h itself stays a result: it needs the
// matrix product %x, which backward does not keep.
// CHECK-LABEL: func.func @gelu_recompute
// CHECK: %[[X:.*]] = shardc.MatMul %arg0, %arg1
// CHECK: %[[F:.*]]:2 = shardc.FusedElementwise %arg2, %[[X]], {{.*}} -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK: shardc.Yield %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK: %[[O:.*]] = shardc.MatMul %[[F]]#1, %arg1
// CHECK: %[[G:.*]] = shardc.FusedElementwise %arg3, %{{.*}}, %[[F]]#0, {{.*}} {shardc.backward}
// CHECK: shardc.Div
// CHECK-NEXT: shardc.Erf
// CHECK-NEXT: shardc.Add
// CHECK: shardc.Exp
// CHECK: shardc.Yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]], %[[G]]
// OFF-LABEL: func.func @gelu_recompute
// OFF-COUNT-2: shardc.Div
// OFF-NOT: shardc.Div
func.func @gelu_recompute(%in: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %x = shardc.MatMul %in, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %sqrt2 = shardc.Constant dense<1.41421354> : tensor<f32>
  %one = shardc.Constant dense<1.0> : tensor<f32>
  %half = shardc.Constant dense<0.5> : tensor<f32>
  %k = shardc.Constant dense<1.12837923> : tensor<f32>
  %h = shardc.Add %b, %x : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %d = shardc.Div %h, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = shardc.Erf %d : tensor<4x8xf32>
  %a = shardc.Add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = shardc.Mul %h, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = shardc.Mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %o = shardc.MatMul %y, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %g0 = shardc.Mul %dy, %half {shardc.backward} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %g1 = shardc.Mul %g0, %a {shardc.backward} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g2 = shardc.Mul %g0, %h {shardc.backward} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %d2 = shardc.Mul %d, %d {shardc.backward} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = shardc.Neg %d2 {shardc.backward} : tensor<4x8xf32>
  %ex = shardc.Exp %n {shardc.backward} : tensor<4x8xf32>
  %de = shardc.Mul %ex, %k {shardc.backward} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %g3 = shardc.Mul %g2, %de {shardc.backward} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g4 = shardc.Div %g3, %sqrt2 {shardc.backward} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %dx = shardc.Add %g1, %g4 {shardc.backward} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %o, %dx : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Backward reads %r in a matrix product, which needs it in memory anyway:
// it stays a result. %s needs %t, which backward does not otherwise keep
// (recomputing %s would keep %t instead): it stays too. %u follows from %r:
// backward recomputes it.
// CHECK-LABEL: func.func @kept
// CHECK: %[[T:.*]] = shardc.MatMul %arg0, %arg1
// CHECK: %[[F:.*]]:3 = shardc.FusedElementwise %[[T]] : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK: shardc.MatMul %[[F]]#0, %arg2 {shardc.backward}
// CHECK: shardc.Neg %[[F]]#1 {shardc.backward}
// CHECK: shardc.FusedElementwise %[[F]]#0 {shardc.backward}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: shardc.Neg
// CHECK-NEXT: shardc.Abs
func.func @kept(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %dy: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %t = shardc.MatMul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = shardc.Relu %t : tensor<4x4xf32>
  %s = shardc.Exp %t : tensor<4x4xf32>
  %u = shardc.Neg %r : tensor<4x4xf32>
  %y = shardc.Add %s, %u : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g = shardc.MatMul %r, %dy {shardc.backward} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = shardc.Neg %s {shardc.backward} : tensor<4x4xf32>
  %q = shardc.Abs %u {shardc.backward} : tensor<4x4xf32>
  return %y, %g, %n, %q : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A loss whose scores gradient backward computes: one op gives both, and
// backward keeps the gradient instead of the scores. A loss gradient of the
// constant 1 needs nothing more.
// CHECK-LABEL: func.func @loss_gradient
// CHECK: %[[L:.*]], %[[G:.*]] = shardc.SoftmaxCrossEntropyLossWithGrad %arg0, %arg1 {reduction = #shardc.reduction<mean>} : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
// CHECK-NOT: SoftmaxCrossEntropyLossGrad
// CHECK: return %[[L]], %[[G]]
// OFF-LABEL: func.func @loss_gradient
// OFF: shardc.SoftmaxCrossEntropyLossGrad
func.func @loss_gradient(%s: tensor<4x10xf32>, %l: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>) {
  %loss = shardc.SoftmaxCrossEntropyLoss %s, %l {reduction = #shardc.reduction<mean>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %one = shardc.Constant {shardc.backward} dense<1.0> : tensor<f32>
  %ds = shardc.SoftmaxCrossEntropyLossGrad %one, %s, %l {reduction = #shardc.reduction<mean>, shardc.backward} : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
  return %loss, %ds : tensor<f32>, tensor<4x10xf32>
}

// -----

// A loss gradient that is not the constant 1 (a loss scale) scales the
// gradient in backward, where the gradient op was; class weights and
// ignore_index carry over.
// CHECK-LABEL: func.func @loss_gradient_scaled
// CHECK: %[[L:.*]], %[[G:.*]] = shardc.SoftmaxCrossEntropyLossWithGrad %arg0, %arg1, %arg2 {ignore_index = -100 : i64, reduction = #shardc.reduction<sum>}
// CHECK: %[[D:.*]] = shardc.Mul %[[G]], %arg3 {shardc.backward}
// CHECK: return %[[L]], %[[D]]
func.func @loss_gradient_scaled(%s: tensor<4x10xf32>, %l: tensor<4xi64>, %w: tensor<10xf32>, %scale: tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>) {
  %loss = shardc.SoftmaxCrossEntropyLoss %s, %l, %w {ignore_index = -100 : i64, reduction = #shardc.reduction<sum>} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> tensor<f32>
  %ds = shardc.SoftmaxCrossEntropyLossGrad %scale, %s, %l, %w {ignore_index = -100 : i64, reduction = #shardc.reduction<sum>, shardc.backward} : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> tensor<4x10xf32>
  return %loss, %ds : tensor<f32>, tensor<4x10xf32>
}

// -----

// Left as they are: a per-target loss (reduction none), a loss whose
// log_prob is read, and a gradient of another reduction than the loss's.
// CHECK-LABEL: func.func @loss_gradient_kept
// CHECK-NOT: WithGrad
// CHECK-COUNT-3: shardc.SoftmaxCrossEntropyLossGrad
func.func @loss_gradient_kept(%s: tensor<4x10xf32>, %l: tensor<4xi64>, %dn: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x10xf32>, tensor<4x10xf32>, tensor<f32>, tensor<4x10xf32>, tensor<4x10xf32>) {
  %one = shardc.Constant {shardc.backward} dense<1.0> : tensor<f32>
  %none = shardc.SoftmaxCrossEntropyLoss %s, %l {reduction = #shardc.reduction<none>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<4xf32>
  %d1 = shardc.SoftmaxCrossEntropyLossGrad %dn, %s, %l {reduction = #shardc.reduction<none>, shardc.backward} : (tensor<4xf32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
  %loss, %lp = shardc.SoftmaxCrossEntropyLoss %s, %l {reduction = #shardc.reduction<mean>} : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  %d2 = shardc.SoftmaxCrossEntropyLossGrad %one, %s, %l {reduction = #shardc.reduction<mean>, shardc.backward} : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
  %d3 = shardc.SoftmaxCrossEntropyLossGrad %one, %s, %l {reduction = #shardc.reduction<sum>, shardc.backward} : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
  return %none, %d1, %lp, %loss, %d2, %d3 : tensor<4xf32>, tensor<4x10xf32>, tensor<4x10xf32>, tensor<f32>, tensor<4x10xf32>, tensor<4x10xf32>
}

// -----

// Attention's head split and merge: the products read q, k and v as
// stored ([batch, time, heads, dim]) and write the merged heads in place;
// no Transpose is left. Backward's V^T, a transpose of forward's
// transposed v, reads the stored v (perm 0, 2, 3, 1), so forward's
// transposed copy dies too.
// CHECK-LABEL: func.func @attention
// CHECK-NOT: shardc.Transpose
// CHECK: %[[S:.*]] = shardc.PermutedMatMul %arg0, %arg1 {a_perm = array<i64: 0, 2, 1, 3>, b_perm = array<i64: 0, 2, 3, 1>, output_perm = array<i64: 0, 1, 2, 3>} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x3x5x5xf32>
// CHECK: %[[P:.*]] = shardc.Softmax %[[S]]
// CHECK: %[[O:.*]] = shardc.PermutedMatMul %[[P]], %arg2 {a_perm = array<i64: 0, 1, 2, 3>, b_perm = array<i64: 0, 2, 1, 3>, output_perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf32>
// CHECK: %[[DP:.*]] = shardc.PermutedMatMul %arg3, %arg2 {a_perm = array<i64: 0, 2, 1, 3>, b_perm = array<i64: 0, 2, 3, 1>, output_perm = array<i64: 0, 1, 2, 3>, shardc.backward}
// CHECK: return %[[O]], %[[DP]]
// OFF-LABEL: func.func @attention
// OFF-COUNT-6: shardc.Transpose
func.func @attention(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>, %dout: tensor<2x5x3x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x3x5x5xf32>) {
  %qt = shardc.Transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kt = shardc.Transpose %k {perm = array<i64: 0, 2, 3, 1>} : tensor<2x5x3x4xf32> -> tensor<2x3x4x5xf32>
  %vt = shardc.Transpose %v {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %s = shardc.MatMul %qt, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %p = shardc.Softmax %s {axis = 3 : i64} : tensor<2x3x5x5xf32>
  %o = shardc.MatMul %p, %vt : (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %om = shardc.Transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dt = shardc.Transpose %dout {perm = array<i64: 0, 2, 1, 3>, shardc.backward} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %vtt = shardc.Transpose %vt {perm = array<i64: 0, 1, 3, 2>, shardc.backward} : tensor<2x3x5x4xf32> -> tensor<2x3x4x5xf32>
  %dp = shardc.MatMul %dt, %vtt {shardc.backward} : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  return %om, %dp : tensor<2x5x3x4xf32>, tensor<2x3x5x5xf32>
}

// -----

// Left as they are: transposes something else also reads (folding would
// keep both copies), a transpose that moves the innermost dimension into
// the batch (no unit stride), and a product with a broadcast batch.
// CHECK-LABEL: func.func @transposes_kept
// CHECK-NOT: PermutedMatMul
// CHECK-COUNT-4: shardc.Transpose
func.func @transposes_kept(%x: tensor<2x5x3x4xf32>, %w: tensor<1x3x4x4xf32>) -> (tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>, tensor<2x4x3x3xf32>, tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) {
  %xt = shardc.Transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kt = shardc.Transpose %x {perm = array<i64: 0, 2, 3, 1>} : tensor<2x5x3x4xf32> -> tensor<2x3x4x5xf32>
  %s = shardc.MatMul %xt, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %b = shardc.Transpose %x {perm = array<i64: 0, 3, 2, 1>} : tensor<2x5x3x4xf32> -> tensor<2x4x3x5xf32>
  %bb = shardc.Transpose %x {perm = array<i64: 0, 3, 1, 2>} : tensor<2x5x3x4xf32> -> tensor<2x4x5x3xf32>
  %m = shardc.MatMul %b, %bb : (tensor<2x4x3x5xf32>, tensor<2x4x5x3xf32>) -> tensor<2x4x3x3xf32>
  %y = shardc.MatMul %xt, %w : (tensor<2x3x5x4xf32>, tensor<1x3x4x4xf32>) -> tensor<2x3x5x4xf32>
  return %s, %xt, %m, %y, %kt : tensor<2x3x5x5xf32>, tensor<2x3x5x4xf32>, tensor<2x4x3x3xf32>, tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>
}

// -----

// nn.MultiheadAttention scales the transposed q before its product: the
// transpose moves after the scaling (a scalar Div, element for element the
// same), then folds into the product.
// CHECK-LABEL: func.func @scaled_query
// CHECK-NOT: shardc.Transpose
// CHECK: %[[D:.*]] = shardc.Div %arg0, %{{.*}} : (tensor<5x6x4xf32>, tensor<f32>) -> tensor<5x6x4xf32>
// CHECK: shardc.PermutedMatMul %[[D]], %arg1 {a_perm = array<i64: 1, 0, 2>, b_perm = array<i64: 1, 2, 0>, output_perm = array<i64: 0, 1, 2>}
func.func @scaled_query(%q: tensor<5x6x4xf32>, %k: tensor<5x6x4xf32>) -> tensor<6x5x5xf32> {
  %s = shardc.Constant dense<2.0> : tensor<f32>
  %qt = shardc.Transpose %q {perm = array<i64: 1, 0, 2>} : tensor<5x6x4xf32> -> tensor<6x5x4xf32>
  %qs = shardc.Div %qt, %s : (tensor<6x5x4xf32>, tensor<f32>) -> tensor<6x5x4xf32>
  %kt = shardc.Transpose %k {perm = array<i64: 1, 2, 0>} : tensor<5x6x4xf32> -> tensor<6x4x5xf32>
  %y = shardc.MatMul %qs, %kt : (tensor<6x5x4xf32>, tensor<6x4x5xf32>) -> tensor<6x5x5xf32>
  return %y : tensor<6x5x5xf32>
}

// -----

// A transposed i1 mask read by a Where of two scalars: the Where moves
// before the transpose with its float result type, and the transpose folds.
// CHECK-LABEL: func.func @mask_where
// CHECK-NOT: shardc.Transpose
// CHECK: %[[W:.*]] = shardc.Where %arg0, %{{.*}}, %{{.*}} : (tensor<5x6x4xi1>, tensor<f32>, tensor<f32>) -> tensor<5x6x4xf32>
// CHECK: shardc.PermutedMatMul %[[W]], %arg1 {a_perm = array<i64: 1, 0, 2>
func.func @mask_where(%m: tensor<5x6x4xi1>, %k: tensor<6x4x5xf32>) -> tensor<6x5x5xf32> {
  %one = shardc.Constant dense<1.0> : tensor<f32>
  %zero = shardc.Constant dense<0.0> : tensor<f32>
  %mt = shardc.Transpose %m {perm = array<i64: 1, 0, 2>} : tensor<5x6x4xi1> -> tensor<6x5x4xi1>
  %w = shardc.Where %mt, %one, %zero : (tensor<6x5x4xi1>, tensor<f32>, tensor<f32>) -> tensor<6x5x4xf32>
  %y = shardc.MatMul %w, %k : (tensor<6x5x4xf32>, tensor<6x4x5xf32>) -> tensor<6x5x5xf32>
  return %y : tensor<6x5x5xf32>
}

// -----

// Attention's q, k, v out of one projection: the Split of the product's
// columns becomes one Gemm per piece over contiguous rows of the weight and
// elements of the bias (slices the plan makes views), each reshaped as the
// piece was; the attributes stay.
// CHECK-LABEL: func.func @split_projection
// CHECK-NOT: shardc.Split
// CHECK: %[[W0:.*]] = shardc.Slice %arg1 {shardc.micro_batch = 1 : i64, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<12x8xf32> -> tensor<4x8xf32>
// CHECK: %[[B0:.*]] = shardc.Slice %arg2 {shardc.micro_batch = 1 : i64, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<12xf32> -> tensor<4xf32>
// CHECK: %[[G0:.*]] = shardc.Gemm %arg0, %[[W0]], %[[B0]] {shardc.micro_batch = 1 : i64, transB = true} : (tensor<6x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<6x4xf32>
// CHECK: shardc.Reshape %[[G0]] {shardc.micro_batch = 1 : i64} : tensor<6x4xf32> -> tensor<2x3x4xf32>
// CHECK: shardc.Slice %arg1 {{.*}}starts = array<i64: 4, 0>{{.*}} -> tensor<6x8xf32>
// CHECK: shardc.Slice %arg2 {{.*}}starts = array<i64: 4>{{.*}} -> tensor<6xf32>
// CHECK: shardc.Gemm {{.*}} -> tensor<6x6xf32>
// CHECK: shardc.Slice %arg1 {{.*}}starts = array<i64: 10, 0>{{.*}} -> tensor<2x8xf32>
// CHECK: shardc.Gemm {{.*}} -> tensor<6x2xf32>
// CHECK-NOT: shardc.Split
// OFF-LABEL: func.func @split_projection
// OFF: shardc.Split
func.func @split_projection(%x: tensor<6x8xf32>, %w: tensor<12x8xf32>, %b: tensor<12xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x6xf32>, tensor<2x3x2xf32>) {
  %p = shardc.Gemm %x, %w, %b {shardc.micro_batch = 1 : i64, transB = true} : (tensor<6x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<6x12xf32>
  %r = shardc.Reshape %p {shardc.micro_batch = 1 : i64} : tensor<6x12xf32> -> tensor<2x3x12xf32>
  %q, %k, %v = shardc.Split %r {axis = 2 : i64, shardc.micro_batch = 1 : i64} : tensor<2x3x12xf32> -> tensor<2x3x4xf32>, tensor<2x3x6xf32>, tensor<2x3x2xf32>
  return %q, %k, %v : tensor<2x3x4xf32>, tensor<2x3x6xf32>, tensor<2x3x2xf32>
}

// -----

// Left alone: a weight read without transB (its columns are no contiguous
// slice), a split along another axis, a product read elsewhere too.
// CHECK-LABEL: func.func @split_kept
// CHECK-COUNT-3: shardc.Split
func.func @split_kept(%x: tensor<6x8xf32>, %w: tensor<8x12xf32>, %wt: tensor<12x8xf32>) -> (tensor<6x4xf32>, tensor<6x8xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<6x6xf32>, tensor<6x6xf32>, tensor<6x12xf32>) {
  %p = shardc.Gemm %x, %w : (tensor<6x8xf32>, tensor<8x12xf32>) -> tensor<6x12xf32>
  %a, %b = shardc.Split %p {axis = 1 : i64} : tensor<6x12xf32> -> tensor<6x4xf32>, tensor<6x8xf32>
  %p2 = shardc.Gemm %x, %wt {transB = true} : (tensor<6x8xf32>, tensor<12x8xf32>) -> tensor<6x12xf32>
  %c, %d = shardc.Split %p2 {axis = 0 : i64} : tensor<6x12xf32> -> tensor<3x12xf32>, tensor<3x12xf32>
  %p3 = shardc.Gemm %x, %wt {transB = true} : (tensor<6x8xf32>, tensor<12x8xf32>) -> tensor<6x12xf32>
  %e, %f = shardc.Split %p3 {axis = 1 : i64} : tensor<6x12xf32> -> tensor<6x6xf32>, tensor<6x6xf32>
  return %a, %b, %c, %d, %e, %f, %p3 : tensor<6x4xf32>, tensor<6x8xf32>, tensor<3x12xf32>, tensor<3x12xf32>, tensor<6x6xf32>, tensor<6x6xf32>, tensor<6x12xf32>
}
