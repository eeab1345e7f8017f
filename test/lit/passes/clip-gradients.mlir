// One rank: the three gradients' parts chain in PartialNorm right after the
// last gradient, ClipCoefficient finishes them, every update takes the
// coefficient, and the norm is a graph output named by shardc.grad_norm.
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-clip-gradients='clip-grad-norm=0.5' | FileCheck %s
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32>, tensor<f32>, tensor<f32> {shardc.updates
// CHECK-SAME: shardc.grad_norm = "grad_norm"
// CHECK-SAME: shardc.output_names = ["loss", "grad_norm"]
// CHECK: %[[GW:.*]] = shardc.Gemm {{.*}}transA = true
// CHECK-NEXT: shardc.ReduceSum
// CHECK-NEXT: %[[GB:.*]] = shardc.Reshape
// CHECK-NEXT: %[[S0:.*]] = shardc.PartialNorm %[[GW]] {norm_type = #shardc.norm_type<l2>, shardc.category = #shardc.category<grads>} : (tensor<5x2xf32>) -> tensor<f64>
// CHECK-NEXT: %[[S1:.*]] = shardc.PartialNorm %[[GB]], %[[S0]] {{.*}} : (tensor<5xf32>, tensor<f64>) -> tensor<f64>
// CHECK-NEXT: %[[S2:.*]] = shardc.PartialNorm %{{.*}}, %[[S1]] {{.*}} : (tensor<5xf32>, tensor<f64>) -> tensor<f64>
// CHECK-NEXT: %[[NORM:.*]], %[[COEF:.*]] = shardc.ClipCoefficient %[[S2]] {max_norm = 5.000000e-01 : f64, norm_type = #shardc.norm_type<l2>, shardc.category = #shardc.category<grads>} : tensor<f64> -> tensor<f32>, tensor<f32>
// CHECK-NOT: mesh.
// CHECK: shardc.SGDUpdate %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scaled_by %[[COEF]] {{.*}} : tensor<5x2xf32>, tensor<f32>, tensor<f32>
// CHECK: shardc.SGDUpdate {{.*}} scaled_by %[[COEF]]
// CHECK: shardc.SGDUpdate {{.*}} scaled_by %[[COEF]]
// CHECK: return %{{.*}}, %[[NORM]], %{{.*}} :

// Stage 2 on four ranks: the parts of this rank's gradient shards are
// summed over the ranks before the norm is finished.
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=2' -shardc-partition-optimizer -shardc-reduce-scatter-gradients -shardc-clip-gradients='clip-grad-norm=0.5' | FileCheck %s --check-prefix=STAGE2
// STAGE2: %[[S0:.*]] = shardc.PartialNorm %{{.*}} : (tensor<4xf32>) -> tensor<f64>
// STAGE2-NEXT: %[[S1:.*]] = shardc.PartialNorm %{{.*}}, %[[S0]] {{.*}} : (tensor<2xf32>, tensor<f64>) -> tensor<f64>
// STAGE2-NEXT: %[[F:.*]] = shardc.Reshape %[[S1]] {{.*}} : tensor<f64> -> tensor<1xf64>
// STAGE2-NEXT: %[[R:.*]] = mesh.all_reduce %[[F]] on @world mesh_axes = [0] {{.*}} : tensor<1xf64> -> tensor<1xf64>
// STAGE2-NEXT: %[[T:.*]] = shardc.Reshape %[[R]] {{.*}} : tensor<1xf64> -> tensor<f64>
// STAGE2-NEXT: %{{.*}}, %[[COEF:.*]] = shardc.ClipCoefficient %[[T]]
// STAGE2: shardc.SGDUpdate {{.*}} scaled_by %[[COEF]] {{.*}}shardc.unit_name = "unit0"
// STAGE2: shardc.SGDUpdate {{.*}} scaled_by %[[COEF]] {{.*}}shardc.unit_name = "unit1"

// The inf-norm at stage 1: the ranks' parts are gathered and reduced by
// PartialNorm, so that a NaN on one rank reaches all.
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=1' -shardc-partition-optimizer -shardc-clip-gradients='clip-grad-norm=0.5 clip-norm-type=inf' | FileCheck %s --check-prefix=INF
// INF: %[[F:.*]] = shardc.Reshape %{{.*}} : tensor<f64> -> tensor<1xf64>
// INF-NEXT: %[[A:.*]] = mesh.all_gather %[[F]] on @world mesh_axes = [0] gather_axis = 0 {{.*}} : tensor<1xf64> -> tensor<4xf64>
// INF-NEXT: %[[M:.*]] = shardc.PartialNorm %[[A]] {norm_type = #shardc.norm_type<inf>{{.*}}} : (tensor<4xf64>) -> tensor<f64>
// INF-NEXT: shardc.ClipCoefficient %[[M]] {max_norm = 5.000000e-01 : f64, norm_type = #shardc.norm_type<inf>

// Stage 0 on four ranks: every rank holds the averaged full gradients and
// computes the norm alone.
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=0' -shardc-bucket-gradients -shardc-clip-gradients='clip-grad-norm=0.5' | FileCheck %s --check-prefix=STAGE0
// STAGE0: mesh.all_reduce {{.*}} : tensor<20xf32> -> tensor<20xf32>
// STAGE0-NOT: mesh.
// STAGE0: shardc.ClipCoefficient
// STAGE0-NOT: mesh.
// STAGE0: return

// Without clip-grad-norm the pass changes nothing.
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-clip-gradients | FileCheck %s --check-prefix=OFF
// OFF-NOT: PartialNorm
// OFF-NOT: scaled_by
