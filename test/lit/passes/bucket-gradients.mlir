// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=0' -shardc-bucket-gradients | FileCheck %s
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=0' -shardc-bucket-gradients=bucket-cap-mb=0.00004 | FileCheck %s --check-prefix=SMALL

// One bucket: the three gradients, in the order backward produces them,
// flattened into 20 elements, summed once, then sliced back and averaged.
// CHECK-LABEL: func.func @main
// CHECK: %[[FLAT:.*]] = shardc.Concat {{.*}} -> tensor<20xf32>
// CHECK: %[[SUM:.*]] = mesh.all_reduce %[[FLAT]] on @world mesh_axes = [0] {shardc.category = #shardc.category<grads>} : tensor<20xf32> -> tensor<20xf32>
// CHECK-COUNT-3: shardc.Mul %{{.*}}, %{{.*}} {shardc.category = #shardc.category<grads>}
// CHECK-NOT: mesh.all_reduce

// A 40-byte cap: every gradient that fits alone is its own bucket.
// SMALL-LABEL: func.func @main
// SMALL: mesh.all_reduce %{{.*}} : tensor<5xf32> -> tensor<5xf32>
// SMALL: mesh.all_reduce %{{.*}} : tensor<10xf32> -> tensor<10xf32>
// SMALL: mesh.all_reduce %{{.*}} : tensor<5xf32> -> tensor<5xf32>
