// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=2' -shardc-partition-optimizer -shardc-reduce-scatter-gradients | FileCheck %s

// The gradient shards become reduce-scatters issued right after each unit's
// last gradient (head's before fc's gradient is computed), averaged.
// CHECK-LABEL: func.func @main
// CHECK: mesh.reduce_scatter %{{.*}} {shardc.category = #shardc.category<grads>} : tensor<8xf32> -> tensor<2xf32>
// CHECK: shardc.Gemm {{.*}}transA = true
// CHECK: mesh.reduce_scatter %{{.*}} {shardc.category = #shardc.category<grads>} : tensor<16xf32> -> tensor<4xf32>
// CHECK: shardc.Increment
// CHECK-NOT: shardc.grad_shard_of
// CHECK-NOT: mesh.reduce_scatter
