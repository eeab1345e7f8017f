// Two ranks: the training-mode BatchNorm normalizes with the global moments
// (this rank's sums / the global count, all-reduced), and its gradient with
// the all-reduced gradient moments; the new backward ops keep
// shardc.backward.
// RUN: shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-zero-config='world-size=2 zero-stage=0' -shardc-sync-batchnorm='sync-batchnorm=true' | FileCheck %s
// CHECK-LABEL: func.func @main
// CHECK: %[[P:.*]] = shardc.BatchNormStats %arg0 {count = 8 : i64} : (tensor<4x3xf32>) -> tensor<6xf64>
// CHECK-NEXT: %[[M:.*]] = mesh.all_reduce %[[P]] on @world mesh_axes = [0] : tensor<6xf64> -> tensor<6xf64>
// CHECK-NEXT: shardc.BatchNormalization %arg0, %arg1, %arg2, %arg3, %arg4 moments %[[M]] {batch_count = 8 : i64,
// CHECK: %[[DY:.*]] = shardc.Dropout {{.*}}shardc.backward
// CHECK-NEXT: %[[Q:.*]] = shardc.BatchNormGradStats %[[DY]], %arg0, %[[M]] {count = 8 : i64, shardc.backward}
// CHECK-NEXT: %[[G:.*]] = mesh.all_reduce %[[Q]] on @world mesh_axes = [0] {shardc.backward} : tensor<6xf64> -> tensor<6xf64>
// CHECK-NEXT: shardc.BatchNormGrad %[[DY]], %arg0, %arg1, %arg3, %arg4 moments %[[M]], %[[G]] {

// With gradient accumulation every micro-batch's copy synchronizes its own
// statistics (the global count is the micro-batch's on all ranks), and the
// new ops carry the copies' shardc.micro_batch (the first copy is the
// original, unmarked).
// RUN: shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-accumulate-gradients=grad-accum=2 -shardc-zero-config='world-size=4 zero-stage=0' -shardc-sync-batchnorm='sync-batchnorm=true' | FileCheck %s --check-prefix=ACCUM
// ACCUM: %[[X0:.*]] = shardc.Slice %arg0
// ACCUM: %[[X1:.*]] = shardc.Slice %arg0
// ACCUM: shardc.BatchNormStats %[[X0]] {count = 16 : i64}
// ACCUM: shardc.BatchNormGradStats {{.*}}, %[[X0]], {{.*}} {count = 16 : i64, shardc.backward}
// ACCUM: shardc.BatchNormStats %[[X1]] {count = 16 : i64, shardc.micro_batch = 1 : i64}
// ACCUM: shardc.BatchNormGradStats {{.*}}, %[[X1]], {{.*}} {count = 16 : i64, shardc.backward, shardc.micro_batch = 1 : i64}

// One rank's batch is the global batch: nothing changes.
// RUN: shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-zero-config='world-size=1 zero-stage=0' -shardc-sync-batchnorm='sync-batchnorm=true' | FileCheck %s --check-prefix=ONE
// Without the option the pass does nothing.
// RUN: shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-zero-config='world-size=2 zero-stage=0' -shardc-sync-batchnorm | FileCheck %s --check-prefix=ONE
// ONE-NOT: BatchNormStats
// ONE-NOT: mesh.all_reduce
// ONE-NOT: moments

// A step without training-mode BatchNorm gets a warning.
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero-config='world-size=2 zero-stage=0' -shardc-sync-batchnorm='sync-batchnorm=true' 2>&1 >/dev/null | FileCheck %s --check-prefix=NOBN
// NOBN: warning: sync-batchnorm: the step has no training-mode BatchNormalization; nothing to synchronize

// The pass needs the world size.
// RUN: not shardc-opt %S/Inputs/bn-dropout-forward.mlir -shardc-autodiff -shardc-sync-batchnorm='sync-batchnorm=true' 2>&1 | FileCheck %s --check-prefix=NOWORLD
// NOWORLD: error: sync-batchnorm: the step has no world size; run shardc-zero-config first
