// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero='world-size=4 zero-stage=3' -shardc-offload='offload=optimizer' | FileCheck %s --check-prefix=OPT
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero='world-size=4 zero-stage=3' -shardc-offload='offload=params' | FileCheck %s --check-prefix=PARAMS
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero='world-size=4 zero-stage=3' -shardc-offload='offload=grads' | FileCheck %s --check-prefix=GRADS
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-zero='world-size=4 zero-stage=3' -shardc-offload | FileCheck %s --check-prefix=NONE
// RUN: not shardc-opt %S/Inputs/zero-step.mlir -shardc-offload='offload=everything' 2>&1 | FileCheck %s --check-prefix=BAD

// ZeRO-3 with SGD momentum, two units. offload=optimizer: the momentum
// shards live in the tier. Each update reads its copy (waited right before
// it); unit 1's read starts before unit 0's update (read-ahead), unit 0's
// write is waited for before unit 1's write starts (write-behind), and the
// waits of the writes are the updates the step returns.
// OPT-LABEL: func.func @main
// OPT-SAME: %[[M0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.offload, shardc.state = "unit0.momentum_buffer"
// OPT-SAME: %[[M1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.offload, shardc.state = "unit1.momentum_buffer"
// OPT: %[[R0:.*]] = shardc.OffloadReadStart %[[M0]] {shardc.category = #shardc.category<opt_state>} : tensor<4xf32> -> !shardc.pending<tensor<4xf32>>
// OPT-NEXT: %[[C0:.*]] = shardc.CollectiveWait %[[R0]]
// OPT-NEXT: %[[R1:.*]] = shardc.OffloadReadStart %[[M1]]
// OPT-NEXT: %{{.*}}, %[[N0:.*]] = shardc.SGDUpdate %{{.*}}, %{{.*}}, %[[C0]],
// OPT-NEXT: %[[W0:.*]] = shardc.OffloadWriteStart %[[N0]] {{.*}} : tensor<4xf32> -> !shardc.pending<tensor<4xf32>>
// OPT-NEXT: %[[C1:.*]] = shardc.CollectiveWait %[[R1]]
// OPT-NEXT: %{{.*}}, %[[N1:.*]] = shardc.SGDUpdate %{{.*}}, %{{.*}}, %[[C1]],
// OPT-NEXT: %[[D0:.*]] = shardc.CollectiveWait %[[W0]]
// OPT-NEXT: %[[W1:.*]] = shardc.OffloadWriteStart %[[N1]]
// OPT-NEXT: %[[D1:.*]] = shardc.CollectiveWait %[[W1]]
// OPT-NEXT: return %{{.*}}, %{{.*}}, %[[D0]], %[[D1]], %{{.*}}, %{{.*}} :

// offload=params: the parameter shards live in the tier; every gather and
// every update reads its own copy, and the updated shards are written back.
// PARAMS-LABEL: func.func @main
// PARAMS-SAME: %[[P0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.offload, shardc.param_shard = "unit0"}
// PARAMS-SAME: %[[P1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.offload, shardc.param_shard = "unit1"}
// PARAMS: %[[R0:.*]] = shardc.OffloadReadStart %[[P0]] {shardc.category = #shardc.category<params>}
// PARAMS-NEXT: %[[C0:.*]] = shardc.CollectiveWait %[[R0]]
// PARAMS: mesh.all_gather %[[C0]] on @world
// PARAMS-COUNT-2: mesh.all_gather %{{[0-9]+}} on @world
// PARAMS: shardc.SGDUpdate %{{[0-9]+}},
// PARAMS: shardc.OffloadWriteStart %new_param {shardc.category = #shardc.category<params>}
// PARAMS: shardc.SGDUpdate %{{[0-9]+}},
// PARAMS: shardc.OffloadWriteStart %new_param_3
// PARAMS-NOT: mesh.all_gather %arg

// offload=grads: each reduced gradient shard goes to the tier once complete
// (unit 1's, then unit 0's, whose write starts after unit 1's finished) and
// is read back for its update, unit 0's while unit 1's is read.
// GRADS: %[[G1:.*]] = shardc.Mul %reduce_scatter, %{{.*}} {shardc.category = #shardc.category<grads>}
// GRADS-NEXT: %[[W1:.*]] = shardc.OffloadWriteStart %[[G1]] {shardc.category = #shardc.category<grads>} : tensor<2xf32> -> !shardc.pending<tensor<2xf32>>
// GRADS: %[[G0:.*]] = shardc.Mul %reduce_scatter_2,
// GRADS-NEXT: %[[T1:.*]] = shardc.CollectiveWait %[[W1]]
// GRADS-NEXT: %[[W0:.*]] = shardc.OffloadWriteStart %[[G0]]
// GRADS: %[[T0:.*]] = shardc.CollectiveWait %[[W0]]
// GRADS-NEXT: %[[R0:.*]] = shardc.OffloadReadStart %[[T0]]
// GRADS-NEXT: %[[C0:.*]] = shardc.CollectiveWait %[[R0]]
// GRADS-NEXT: %[[R1:.*]] = shardc.OffloadReadStart %[[T1]]
// GRADS-NEXT: shardc.SGDUpdate %arg4, %[[C0]],
// GRADS-NEXT: %[[C1:.*]] = shardc.CollectiveWait %[[R1]]
// GRADS-NEXT: shardc.SGDUpdate %arg5, %[[C1]],

// Without a value the pass does nothing.
// NONE-NOT: shardc.Offload
// NONE-NOT: shardc.offload

// BAD: for the --offload option: 'everything' is not one of: optimizer, params, grads
