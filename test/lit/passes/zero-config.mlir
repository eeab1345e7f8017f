// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=2' | FileCheck %s
// RUN: not shardc-opt %S/Inputs/zero-step.mlir -shardc-partition-optimizer 2>&1 | FileCheck %s --check-prefix=NOCONFIG

// The configuration lands on @main and the mesh every collective runs on is
// created; parameter gradients are marked as gradients for memory planning.
// CHECK: mesh.mesh @world(shape = 4)
// CHECK-LABEL: func.func @main
// CHECK-SAME: shardc.world_size = 4 : i64, shardc.zero_stage = 2 : i64
// CHECK: shardc.Gemm %{{.*}} {shardc.backward, shardc.category = #shardc.category<grads>, transA = true}
// CHECK-NOT: mesh.

// NOCONFIG: error: partition-optimizer: the step has no world size; run shardc-zero-config first
