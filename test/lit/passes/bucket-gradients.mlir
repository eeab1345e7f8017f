// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=0' -shardc-bucket-gradients | FileCheck %s
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=0' -shardc-bucket-gradients=bucket-cap-mb=0.00004 | FileCheck %s --check-prefix=SMALL
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=0' -shardc-bucket-gradients=cost-model=kernel=1 | FileCheck %s --check-prefix=TIMED
// RUN: not shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=4 zero-stage=0' -shardc-bucket-gradients=cost-model=speed=1 2>&1 | FileCheck %s --check-prefix=BAD

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

// Kernels of a second each: the last gradient (fc.bias) exists a second
// after fc.weight's, so reducing it alone finishes first; the two before it
// finish long before either way and share a bucket (fewer buckets).
// TIMED-LABEL: func.func @main
// TIMED: mesh.all_reduce %{{.*}} : tensor<15xf32> -> tensor<15xf32>
// TIMED: mesh.all_reduce %{{.*}} : tensor<5xf32> -> tensor<5xf32>
// TIMED-NOT: mesh.all_reduce

// BAD: error: bucket-gradients: cost-model: {{.*}}speed
