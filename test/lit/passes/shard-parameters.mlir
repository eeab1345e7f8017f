// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=3' -shardc-partition-optimizer -shardc-reduce-scatter-gradients -shardc-shard-parameters | FileCheck %s
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=3 reshard-after-forward=false' -shardc-partition-optimizer -shardc-reduce-scatter-gradients -shardc-shard-parameters | FileCheck %s --check-prefix=KEEP

// Parameters live as shard arguments; each unit is gathered before its
// forward window and, for head.scale (used by backward), again before its
// backward window; the update writes the shard in place and no full
// parameters are rebuilt.
// CHECK-LABEL: func.func @main
// CHECK-NOT: shardc.param = "fc.weight"
// CHECK-SAME: %[[P0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.param_shard = "unit0"}
// CHECK-SAME: %[[P1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.param_shard = "unit1"}
// CHECK: mesh.all_gather %[[P0]] {{.*}} : tensor<4xf32> -> tensor<16xf32>
// CHECK: mesh.all_gather %[[P1]] {{.*}} : tensor<2xf32> -> tensor<8xf32>
// CHECK: mesh.all_gather %[[P1]] {{.*}} : tensor<2xf32> -> tensor<8xf32>
// CHECK: shardc.SGDUpdate %[[P0]]
// CHECK: shardc.SGDUpdate %[[P1]]
// CHECK-NOT: mesh.all_gather

// Without resharding after forward, head.scale is gathered once for both.
// KEEP-LABEL: func.func @main
// KEEP: mesh.all_gather %{{.*}} : tensor<4xf32> -> tensor<16xf32>
// KEEP: mesh.all_gather %{{.*}} : tensor<2xf32> -> tensor<8xf32>
// KEEP-NOT: mesh.all_gather
