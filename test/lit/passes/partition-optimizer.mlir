// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=1' -shardc-partition-optimizer | FileCheck %s

// Two units (fc: 10 + 5 elements padded to 16; head: 5 padded to 8): each
// rank slices its shard of the flat gradient and parameters, updates it with
// shard-sized state, and the full parameters are gathered back.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[M0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.state = "unit0.momentum_buffer", shardc.state_shard_of = "unit0", shardc.state_suffix = ".momentum_buffer"}
// CHECK-SAME: %[[M1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.state = "unit1.momentum_buffer", shardc.state_shard_of = "unit1", shardc.state_suffix = ".momentum_buffer"}
// CHECK: %[[G0:.*]] = mesh.all_slice %{{.*}} {shardc.category = #shardc.category<grads>, shardc.grad_shard_of = "unit0"} : tensor<16xf32> -> tensor<4xf32>
// CHECK: %[[P0:.*]] = mesh.all_slice %{{.*}} {shardc.category = #shardc.category<params>, shardc.param_shard_of = "unit0"} : tensor<16xf32> -> tensor<4xf32>
// CHECK: %[[NP0:.*]], %{{.*}} = shardc.SGDUpdate %[[P0]], %[[G0]], %[[M0]]
// CHECK-SAME: shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.unit_name = "unit0"
// CHECK: mesh.all_gather %[[NP0]] {{.*}} : tensor<4xf32> -> tensor<16xf32>
// CHECK: mesh.all_slice {{.*}} shardc.grad_shard_of = "unit1"} : tensor<8xf32> -> tensor<2xf32>
// CHECK: shardc.SGDUpdate {{.*}} %[[M1]]
// CHECK-NOT: shardc.SGDUpdate
