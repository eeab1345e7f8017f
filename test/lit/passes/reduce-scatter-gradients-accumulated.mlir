// Gradient accumulation at stage 2: each micro-batch's gradients of the unit
// are reduce-scattered right after that micro-batch's backward, and the
// shards add up before the update (their mean, then the average over ranks).
// RUN: shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-accumulate-gradients='grad-accum=2' -shardc-optimizer -shardc-wrap-units -shardc-zero-config='world-size=2 zero-stage=2' -shardc-partition-optimizer -shardc-reduce-scatter-gradients | FileCheck %s
// CHECK: %{{.*}}, %[[DS0:.*]], %[[DB0:.*]] = shardc.BatchNormGrad
// CHECK: %[[L0:.*]] = shardc.Concat %{{.*}}, %{{.*}} {{.*}} -> tensor<6xf32>
// CHECK-NEXT: %[[R0:.*]] = mesh.reduce_scatter %[[L0]] on @world mesh_axes = [0] scatter_axis = 0 {shardc.category = #shardc.category<grads>} : tensor<6xf32> -> tensor<3xf32>
// CHECK: shardc.BatchNormalization
// CHECK: %{{.*}}, %[[DS1:.*]], %[[DB1:.*]] = shardc.BatchNormGrad
// CHECK: %[[L1:.*]] = shardc.Concat
// CHECK-NEXT: %[[R1:.*]] = mesh.reduce_scatter %[[L1]] {{.*}} : tensor<6xf32> -> tensor<3xf32>
// CHECK: %[[S:.*]] = shardc.Add %[[R0]], %[[R1]] {shardc.category = #shardc.category<grads>} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[M:.*]] = shardc.Mul %[[S]], %{{.*}} {shardc.category = #shardc.category<grads>} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK: %[[G:.*]] = shardc.Mul %[[M]], %{{.*}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK: shardc.SGDUpdate %{{.*}}, %[[G]],
// CHECK-NOT: mesh.reduce_scatter

// accumulate-unsharded: the running sums stay whole, one reduce-scatter.
// RUN: shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-accumulate-gradients='grad-accum=2' -shardc-optimizer -shardc-wrap-units -shardc-zero-config='world-size=2 zero-stage=2' -shardc-partition-optimizer -shardc-reduce-scatter-gradients=accumulate-unsharded | FileCheck %s --check-prefix=UNSHARDED
// UNSHARDED: shardc.Add {{.*}}shardc.micro_batch_sum
// UNSHARDED: mesh.reduce_scatter {{.*}} : tensor<6xf32> -> tensor<3xf32>
// UNSHARDED-NOT: mesh.reduce_scatter

// ZeRO-3: every micro-batch's forward and backward gather the unit again
// (FSDP's behaviour under no_sync), so that gathered parameters live for one
// use window, not across micro-batches.
// RUN: shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-accumulate-gradients='grad-accum=2' -shardc-optimizer -shardc-wrap-units -shardc-zero-config='world-size=2 zero-stage=3' -shardc-partition-optimizer -shardc-reduce-scatter-gradients -shardc-shard-parameters | FileCheck %s --check-prefix=STAGE3
// STAGE3: mesh.all_gather %[[U:[a-z0-9]+]] on @world {{.*}}{shardc.category = #shardc.category<params>} : tensor<3xf32> -> tensor<6xf32>
// STAGE3: shardc.BatchNormalization
// STAGE3: mesh.all_gather %[[U]] {{.*}}{shardc.backward, shardc.category = #shardc.category<params>} :
// STAGE3: shardc.BatchNormGrad
// STAGE3: mesh.all_gather %[[U]] {{.*}}{shardc.category = #shardc.category<params>, shardc.micro_batch = 1 : i64} :
// STAGE3: shardc.BatchNormalization {{.*}}shardc.micro_batch = 1
// STAGE3: mesh.all_gather %[[U]] {{.*}}{shardc.backward, shardc.category = #shardc.category<params>, shardc.micro_batch = 1 : i64} :
// STAGE3: shardc.BatchNormGrad {{.*}}shardc.micro_batch = 1
// STAGE3-NOT: mesh.all_gather
