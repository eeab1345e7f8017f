// RUN: shardc-opt %s -split-input-file -shardc-schedule-collectives='forward-prefetch=false early-updates=false' | FileCheck %s --check-prefixes=SINK,PRE
// RUN: shardc-opt %s -split-input-file -shardc-schedule-collectives='forward-prefetch=false early-updates=false' | FileCheck %s --check-prefix=RS
// RUN: shardc-opt %s -split-input-file -shardc-schedule-collectives='forward-prefetch=false backward-prefetch=none early-updates=false' | FileCheck %s --check-prefixes=SINK,NONE
// RUN: shardc-opt %s -split-input-file -shardc-schedule-collectives='forward-prefetch=false backward-prefetch=post early-updates=false' | FileCheck %s --check-prefixes=SINK,POST
// RUN: shardc-opt %s -split-input-file -shardc-schedule-collectives='forward-prefetch=true backward-prefetch=none early-updates=false' | FileCheck %s --check-prefixes=SINK,FWD
// RUN: shardc-opt %s -split-input-file -shardc-schedule-collectives='forward-prefetch=true limit-all-gathers=false early-updates=false' | FileCheck %s --check-prefixes=SINK,DEPTH2
// RUN: shardc-opt %s -split-input-file -shardc-schedule-collectives | FileCheck %s --check-prefixes=EARLY,DEFER
// RUN: shardc-opt %s -split-input-file -shardc-schedule-collectives=forward-prefetch=true | FileCheck %s --check-prefix=SMALL

// With early-updates (the default), the step count's increment goes first.
// Both buckets' all-reduces are in flight at once (their bytes are twice the
// largest bucket's), so bucket 1's wait and updates (l3.s, l2.s) come after
// bucket 2's start, in the order the all-reduces complete; bucket 2's
// updates follow its wait.
// EARLY-LABEL: func.func @main
// EARLY-NEXT: %[[STEP:.*]] = shardc.Increment %arg5
// EARLY: %[[B1:.*]] = shardc.AllReduceStart
// EARLY-NOT: shardc.CollectiveWait
// EARLY: %[[B2:.*]] = shardc.AllReduceStart
// EARLY-NEXT: %[[R1:.*]] = shardc.CollectiveWait %[[B1]]
// EARLY-NEXT: shardc.Slice %[[R1]]
// EARLY-NEXT: shardc.Mul
// EARLY-NEXT: shardc.SGDUpdate %arg4, %{{.*}}, %arg9, %[[STEP]]
// EARLY-NEXT: shardc.Slice %[[R1]]
// EARLY-NEXT: shardc.Mul
// EARLY-NEXT: shardc.SGDUpdate %arg3, %{{.*}}, %arg8, %[[STEP]]
// EARLY-NEXT: %[[R2:.*]] = shardc.CollectiveWait %[[B2]]
// EARLY: shardc.SGDUpdate %arg2,
// EARLY: shardc.SGDUpdate %arg1,

// ZeRO-0 with two gradient buckets, as shardc-lower-collectives leaves it:
// every all-reduce start is followed by its wait. The starts stay where the
// bucket is complete. A wait sinks to the first use of its result, but no
// further than the start of the second gradient reduction after it (or of
// the next one, where the two would hold more than twice the largest
// reduction's bytes); with two buckets of one size, bucket 1's all-reduce
// overlaps the rest of backward and bucket 2's all-reduce. Waits keep the order of their starts; the
// slicing and averaging of each bucket's gradients sink to the update that
// needs them.
// SINK-LABEL: func.func @main
// SINK: %[[B1:.*]] = shardc.AllReduceStart %{{.*}} {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<8xf32>
// SINK-NOT: shardc.CollectiveWait
// SINK: shardc.Mul %{{.*}} {shardc.backward} :
// SINK: %[[C2:.*]] = shardc.Concat
// SINK-NEXT: %[[B2:.*]] = shardc.AllReduceStart %[[C2]] {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<8xf32>
// SINK-NEXT: %[[STEP:.*]] = shardc.Increment
// SINK-NEXT: %[[R1:.*]] = shardc.CollectiveWait %[[B1]] {shardc.category = #shardc.category<grads>} : tensor<8xf32>
// SINK-NEXT: %[[R2:.*]] = shardc.CollectiveWait %[[B2]] {shardc.category = #shardc.category<grads>} : tensor<8xf32>
// SINK-NEXT: %[[S2A:.*]] = shardc.Slice %[[R2]] {{.*}}starts = array<i64: 4>
// SINK-NEXT: %[[G2A:.*]] = shardc.Mul %[[S2A]], %{{.*}} {shardc.category = #shardc.category<grads>}
// SINK-NEXT: shardc.SGDUpdate %{{.*}}, %[[G2A]], %{{.*}}, %[[STEP]]
// SINK-NEXT: %[[S2B:.*]] = shardc.Slice %[[R2]] {{.*}}starts = array<i64: 0>
// SINK-NEXT: %[[G2B:.*]] = shardc.Mul %[[S2B]], %{{.*}} {shardc.category = #shardc.category<grads>}
// SINK-NEXT: shardc.SGDUpdate %{{.*}}, %[[G2B]], %{{.*}}, %[[STEP]]
// SINK-NEXT: %[[S1A:.*]] = shardc.Slice %[[R1]]
// SINK-NEXT: %[[G1A:.*]] = shardc.Mul %[[S1A]],
// SINK-NEXT: shardc.SGDUpdate %{{.*}}, %[[G1A]],
mesh.mesh @world(shape = 2)
func.func @main(%arg0: tensor<4xf32> {shardc.input = "x"}, %arg1: tensor<4xf32> {shardc.param = "l0.s", shardc.unit = 0 : i64}, %arg2: tensor<4xf32> {shardc.param = "l1.s", shardc.unit = 1 : i64}, %arg3: tensor<4xf32> {shardc.param = "l2.s", shardc.unit = 2 : i64}, %arg4: tensor<4xf32> {shardc.param = "l3.s", shardc.unit = 3 : i64}, %arg5: tensor<f32> {shardc.state = "optimizer.step"}, %arg6: tensor<4xf32> {shardc.state = "l0.s.momentum_buffer"}, %arg7: tensor<4xf32> {shardc.state = "l1.s.momentum_buffer"}, %arg8: tensor<4xf32> {shardc.state = "l2.s.momentum_buffer"}, %arg9: tensor<4xf32> {shardc.state = "l3.s.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 5 : i64}, tensor<4xf32> {shardc.updates = 1 : i64}, tensor<4xf32> {shardc.updates = 6 : i64}, tensor<4xf32> {shardc.updates = 2 : i64}, tensor<4xf32> {shardc.updates = 7 : i64}, tensor<4xf32> {shardc.updates = 3 : i64}, tensor<4xf32> {shardc.updates = 8 : i64}, tensor<4xf32> {shardc.updates = 4 : i64}, tensor<4xf32> {shardc.updates = 9 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"], shardc.world_size = 2 : i64, shardc.zero_stage = 0 : i64} {
  %0 = shardc.Constant dense<5.000000e-01> : tensor<f32>
  %1 = shardc.Constant dense<1.000000e+00> : tensor<4xf32>
  %2 = shardc.Mul %arg0, %arg1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = shardc.Mul %2, %arg2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = shardc.Mul %3, %arg3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = shardc.Mul %4, %arg4 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %6 = shardc.ReduceSum %5 {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  %7 = shardc.Mul %arg4, %1 {shardc.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %8 = shardc.Mul %4, %1 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %9 = shardc.Mul %7, %arg3 {shardc.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %10 = shardc.Mul %7, %3 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %11 = shardc.Concat %8, %10 {axis = 0 : i64, shardc.category = #shardc.category<comm>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  %12 = shardc.AllReduceStart %11 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<8xf32>
  %13 = shardc.CollectiveWait %12 {shardc.category = #shardc.category<grads>} : tensor<8xf32>
  %14 = shardc.Slice %13 {shardc.category = #shardc.category<grads>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<8xf32> -> tensor<4xf32>
  %15 = shardc.Mul %14, %0 {shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %16 = shardc.Slice %13 {shardc.category = #shardc.category<grads>, starts = array<i64: 4>, steps = array<i64: 1>} : tensor<8xf32> -> tensor<4xf32>
  %17 = shardc.Mul %16, %0 {shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %18 = shardc.Mul %9, %arg2 {shardc.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %19 = shardc.Mul %9, %2 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %20 = shardc.Mul %18, %arg0 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %21 = shardc.Concat %19, %20 {axis = 0 : i64, shardc.category = #shardc.category<comm>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  %22 = shardc.AllReduceStart %21 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<8xf32>
  %23 = shardc.CollectiveWait %22 {shardc.category = #shardc.category<grads>} : tensor<8xf32>
  %24 = shardc.Slice %23 {shardc.category = #shardc.category<grads>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<8xf32> -> tensor<4xf32>
  %25 = shardc.Mul %24, %0 {shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %26 = shardc.Slice %23 {shardc.category = #shardc.category<grads>, starts = array<i64: 4>, steps = array<i64: 1>} : tensor<8xf32> -> tensor<4xf32>
  %27 = shardc.Mul %26, %0 {shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %28 = shardc.Increment %arg5 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg1, %27, %arg6, %28 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<4xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg2, %25, %arg7, %28 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<4xf32>, tensor<f32>
  %new_param_2, %new_momentum_buffer_3 = shardc.SGDUpdate %arg3, %17, %arg8, %28 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<4xf32>, tensor<f32>
  %new_param_4, %new_momentum_buffer_5 = shardc.SGDUpdate %arg4, %15, %arg9, %28 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<4xf32>, tensor<f32>
  return %6, %28, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1, %new_param_2, %new_momentum_buffer_3, %new_param_4, %new_momentum_buffer_5 : tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// ZeRO-3 on a chain of four one-parameter units (each 4 elements, no padding
// and no views, world size 2): every unit is gathered in forward, units 3,
// 2, 1 again in backward (unit 0's parameter is not needed by backward).
// PRE-LABEL: func.func @main
// PRE-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32> {shardc.input = "x"}
// PRE-SAME: %[[U0:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l0.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit0"}
// PRE-SAME: %[[U1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l1.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit1"}
// PRE-SAME: %[[U2:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l2.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit2"}
// PRE-SAME: %[[U3:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l3.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit3"}
// Forward with forward-prefetch=false: each gather starts right before its
// wait.
// PRE: %[[G0:.*]] = shardc.AllGatherStart %[[U0]]
// PRE-NEXT: shardc.CollectiveWait %[[G0]]
// PRE: %[[G1:.*]] = shardc.AllGatherStart %[[U1]]
// PRE-NEXT: shardc.CollectiveWait %[[G1]]
// PRE: %[[G2:.*]] = shardc.AllGatherStart %[[U2]]
// PRE-NEXT: shardc.CollectiveWait %[[G2]]
// PRE: %[[G3:.*]] = shardc.AllGatherStart %[[U3]]
// PRE-NEXT: shardc.CollectiveWait %[[G3]]
// backward-prefetch=pre (the default): the next unit's gather starts right
// after the current unit's wait, before its gradient computation.
// PRE: shardc.ReduceSum
// PRE-NEXT: %[[B3:.*]] = shardc.AllGatherStart %[[U3]]
// PRE-NEXT: %[[W3:.*]] = shardc.CollectiveWait %[[B3]]
// PRE-NEXT: %[[B2:.*]] = shardc.AllGatherStart %[[U2]]
// PRE-NEXT: shardc.Mul %[[W3]], %{{.*}} {shardc.backward}
// PRE: %[[W2:.*]] = shardc.CollectiveWait %[[B2]]
// PRE-NEXT: %[[B1:.*]] = shardc.AllGatherStart %[[U1]]
// PRE-NEXT: shardc.Mul %{{.*}}, %[[W2]] {shardc.backward}
// PRE: %[[W1:.*]] = shardc.CollectiveWait %[[B1]]
// PRE-NEXT: shardc.Mul %{{.*}}, %[[W1]] {shardc.backward}
// PRE-NOT: shardc.AllGatherStart
// PRE: return
// Reduce-scatters of units of one size run two at a time: unit 3's is waited for right before
// unit 1's starts, unit 2's right before unit 0's; the last two waits keep
// the order of their starts, each right before the averaging that reads it.
// RS: shardc.zero_stage = 3
// RS: %[[RS3:.*]] = shardc.ReduceScatterStart
// RS-NOT: shardc.CollectiveWait %[[RS3]]
// RS: %[[RS2:.*]] = shardc.ReduceScatterStart
// RS: shardc.CollectiveWait %[[RS3]] {shardc.category = #shardc.category<grads>} : tensor<2xf32>
// RS-NEXT: %[[RS1:.*]] = shardc.ReduceScatterStart
// RS-NEXT: %[[DU0:.*]] = shardc.Mul %{{.*}}, %arg0 {shardc.backward, shardc.category = #shardc.category<grads>}
// RS-NEXT: shardc.CollectiveWait %[[RS2]] {shardc.category = #shardc.category<grads>} : tensor<2xf32>
// RS-NEXT: %[[RS0:.*]] = shardc.ReduceScatterStart %[[DU0]]
// RS-NEXT: shardc.Increment
// RS-NEXT: %[[RW1:.*]] = shardc.CollectiveWait %[[RS1]] {shardc.category = #shardc.category<grads>} : tensor<2xf32>
// RS-NEXT: %[[RW0:.*]] = shardc.CollectiveWait %[[RS0]] {shardc.category = #shardc.category<grads>} : tensor<2xf32>
// RS-NEXT: %[[G:.*]] = shardc.Mul %[[RW0]], %{{.*}} {shardc.category = #shardc.category<grads>}
// RS-NEXT: shardc.SGDUpdate %arg2, %[[G]],

// backward-prefetch=none: every gather starts right before its wait, which
// comes right before its first use.
// NONE-LABEL: func.func @main
// NONE-SAME: %[[U0:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l0.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit0"}
// NONE-SAME: %[[U1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l1.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit1"}
// NONE-SAME: %[[U2:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l2.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit2"}
// NONE-SAME: %[[U3:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l3.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit3"}
// NONE: %[[G0:.*]] = shardc.AllGatherStart %[[U0]]
// NONE-NEXT: shardc.CollectiveWait %[[G0]]
// NONE: %[[G3:.*]] = shardc.AllGatherStart %[[U3]]
// NONE-NEXT: shardc.CollectiveWait %[[G3]]
// NONE: %[[B3:.*]] = shardc.AllGatherStart %[[U3]]
// NONE-NEXT: %[[W3:.*]] = shardc.CollectiveWait %[[B3]]
// NONE-NEXT: shardc.Mul %[[W3]], %{{.*}} {shardc.backward}
// NONE: %[[B2:.*]] = shardc.AllGatherStart %[[U2]]
// NONE-NEXT: %[[W2:.*]] = shardc.CollectiveWait %[[B2]]
// NONE-NEXT: shardc.Mul %{{.*}}, %[[W2]] {shardc.backward}
// NONE: %[[B1:.*]] = shardc.AllGatherStart %[[U1]]
// NONE-NEXT: %[[W1:.*]] = shardc.CollectiveWait %[[B1]]
// NONE-NEXT: shardc.Mul %{{.*}}, %[[W1]] {shardc.backward}

// backward-prefetch=post: the next unit's gather starts after the last use
// of the current unit's parameters.
// POST-LABEL: func.func @main
// POST-SAME: %[[U1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l1.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit1"}
// POST-SAME: %[[U2:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l2.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit2"}
// POST-SAME: %[[U3:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l3.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit3"}
// POST: shardc.ReduceSum
// POST-NEXT: %[[B3:.*]] = shardc.AllGatherStart %[[U3]]
// POST-NEXT: %[[W3:.*]] = shardc.CollectiveWait %[[B3]]
// POST-NEXT: shardc.Mul %[[W3]], %{{.*}} {shardc.backward}
// POST-NEXT: %[[B2:.*]] = shardc.AllGatherStart %[[U2]]
// POST: %[[W2:.*]] = shardc.CollectiveWait %[[B2]]
// POST-NEXT: shardc.Mul %{{.*}}, %[[W2]] {shardc.backward}
// POST-NEXT: %[[B1:.*]] = shardc.AllGatherStart %[[U1]]
// POST: shardc.CollectiveWait %[[B1]]

// forward-prefetch: unit K+1's gather starts right after unit K's wait,
// before unit K's computation. Backward gathers stay in backward.
// FWD-LABEL: func.func @main
// FWD-SAME: %[[U0:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l0.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit0"}
// FWD-SAME: %[[U1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l1.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit1"}
// FWD-SAME: %[[U2:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l2.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit2"}
// FWD-SAME: %[[U3:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l3.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit3"}
// FWD: %[[G0:.*]] = shardc.AllGatherStart %[[U0]]
// FWD-NEXT: %[[W0:.*]] = shardc.CollectiveWait %[[G0]]
// FWD-NEXT: %[[G1:.*]] = shardc.AllGatherStart %[[U1]]
// FWD-NEXT: shardc.Mul %{{.*}}, %[[W0]] :
// FWD-NEXT: %[[W1:.*]] = shardc.CollectiveWait %[[G1]]
// FWD-NEXT: %[[G2:.*]] = shardc.AllGatherStart %[[U2]]
// FWD-NEXT: shardc.Mul %{{.*}}, %[[W1]] :
// FWD-NEXT: %[[W2:.*]] = shardc.CollectiveWait %[[G2]]
// FWD-NEXT: %[[G3:.*]] = shardc.AllGatherStart %[[U3]]
// FWD-NEXT: shardc.Mul %{{.*}}, %[[W2]] :
// FWD-NEXT: %[[W3:.*]] = shardc.CollectiveWait %[[G3]]
// FWD-NEXT: shardc.Mul %{{.*}}, %[[W3]] :
// FWD-NEXT: shardc.ReduceSum
// FWD-NEXT: %[[B3:.*]] = shardc.AllGatherStart %[[U3]]
// FWD-NEXT: shardc.CollectiveWait %[[B3]]

// limit-all-gathers=false: prefetching runs two units ahead, unit K+2's
// gather starting right after unit K's wait, in forward and in backward.
// DEPTH2-LABEL: func.func @main
// DEPTH2-SAME: %[[U0:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l0.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit0"}
// DEPTH2-SAME: %[[U1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l1.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit1"}
// DEPTH2-SAME: %[[U2:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l2.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit2"}
// DEPTH2-SAME: %[[U3:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["l3.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit3"}
// Two ahead: after unit 0's wait, units 1 and 2 start in order; unit 3
// starts after unit 1's wait. Backward likewise runs two units ahead.
// DEPTH2: %[[G0:.*]] = shardc.AllGatherStart %[[U0]]
// DEPTH2-NEXT: %[[W0:.*]] = shardc.CollectiveWait %[[G0]]
// DEPTH2-NEXT: %[[G1:.*]] = shardc.AllGatherStart %[[U1]]
// DEPTH2-NEXT: %[[G2:.*]] = shardc.AllGatherStart %[[U2]]
// DEPTH2: %[[W1:.*]] = shardc.CollectiveWait %[[G1]]
// DEPTH2-NEXT: %[[G3:.*]] = shardc.AllGatherStart %[[U3]]
// DEPTH2: shardc.CollectiveWait %[[G2]]
// DEPTH2: shardc.CollectiveWait %[[G3]]
// DEPTH2: shardc.ReduceSum
// DEPTH2-NEXT: %[[B3:.*]] = shardc.AllGatherStart %[[U3]]
// DEPTH2-NEXT: %[[W3:.*]] = shardc.CollectiveWait %[[B3]]
// DEPTH2-NEXT: %[[B2:.*]] = shardc.AllGatherStart %[[U2]]
// DEPTH2-NEXT: %[[B1:.*]] = shardc.AllGatherStart %[[U1]]
// DEPTH2-NEXT: shardc.Mul %[[W3]], %{{.*}} {shardc.backward}
mesh.mesh @world(shape = 2)
func.func @main(%arg0: tensor<4xf32> {shardc.input = "x"}, %arg1: tensor<f32> {shardc.state = "optimizer.step"}, %arg2: tensor<2xf32> {shardc.flat_params = ["l0.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit0"}, %arg3: tensor<2xf32> {shardc.state = "unit0.momentum_buffer"}, %arg4: tensor<2xf32> {shardc.flat_params = ["l1.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit1"}, %arg5: tensor<2xf32> {shardc.state = "unit1.momentum_buffer"}, %arg6: tensor<2xf32> {shardc.flat_params = ["l2.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit2"}, %arg7: tensor<2xf32> {shardc.state = "unit2.momentum_buffer"}, %arg8: tensor<2xf32> {shardc.flat_params = ["l3.s"], shardc.flat_types = [tensor<4xf32>], shardc.param_shard = "unit3"}, %arg9: tensor<2xf32> {shardc.state = "unit3.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 1 : i64}, tensor<2xf32> {shardc.updates = 3 : i64}, tensor<2xf32> {shardc.updates = 2 : i64}, tensor<2xf32> {shardc.updates = 5 : i64}, tensor<2xf32> {shardc.updates = 4 : i64}, tensor<2xf32> {shardc.updates = 7 : i64}, tensor<2xf32> {shardc.updates = 6 : i64}, tensor<2xf32> {shardc.updates = 9 : i64}, tensor<2xf32> {shardc.updates = 8 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"], shardc.world_size = 2 : i64, shardc.zero_stage = 3 : i64} {
  %0 = shardc.Constant dense<5.000000e-01> : tensor<f32>
  %1 = shardc.Constant dense<1.000000e+00> : tensor<4xf32>
  %2 = shardc.AllGatherStart %arg2 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %3 = shardc.CollectiveWait %2 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %4 = shardc.Mul %arg0, %3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = shardc.AllGatherStart %arg4 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %6 = shardc.CollectiveWait %5 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %7 = shardc.Mul %4, %6 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %8 = shardc.AllGatherStart %arg6 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %9 = shardc.CollectiveWait %8 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %10 = shardc.Mul %7, %9 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %11 = shardc.AllGatherStart %arg8 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %12 = shardc.CollectiveWait %11 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %13 = shardc.Mul %10, %12 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %14 = shardc.ReduceSum %13 {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  %15 = shardc.AllGatherStart %arg8 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %16 = shardc.CollectiveWait %15 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %17 = shardc.Mul %16, %1 {shardc.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %18 = shardc.Mul %10, %1 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %19 = shardc.ReduceScatterStart %18 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<4xf32> -> !shardc.pending<tensor<2xf32>>
  %20 = shardc.CollectiveWait %19 {shardc.category = #shardc.category<grads>} : tensor<2xf32>
  %21 = shardc.Mul %20, %0 {shardc.category = #shardc.category<grads>} : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %22 = shardc.AllGatherStart %arg6 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %23 = shardc.CollectiveWait %22 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %24 = shardc.Mul %17, %23 {shardc.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %25 = shardc.Mul %17, %7 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %26 = shardc.ReduceScatterStart %25 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<4xf32> -> !shardc.pending<tensor<2xf32>>
  %27 = shardc.CollectiveWait %26 {shardc.category = #shardc.category<grads>} : tensor<2xf32>
  %28 = shardc.Mul %27, %0 {shardc.category = #shardc.category<grads>} : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %29 = shardc.AllGatherStart %arg4 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %30 = shardc.CollectiveWait %29 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %31 = shardc.Mul %24, %30 {shardc.backward} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %32 = shardc.Mul %24, %4 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %33 = shardc.ReduceScatterStart %32 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<4xf32> -> !shardc.pending<tensor<2xf32>>
  %34 = shardc.CollectiveWait %33 {shardc.category = #shardc.category<grads>} : tensor<2xf32>
  %35 = shardc.Mul %34, %0 {shardc.category = #shardc.category<grads>} : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %36 = shardc.Mul %31, %arg0 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %37 = shardc.ReduceScatterStart %36 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<4xf32> -> !shardc.pending<tensor<2xf32>>
  %38 = shardc.CollectiveWait %37 {shardc.category = #shardc.category<grads>} : tensor<2xf32>
  %39 = shardc.Mul %38, %0 {shardc.category = #shardc.category<grads>} : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %40 = shardc.Increment %arg1 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg2, %39, %arg3, %40 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg4, %35, %arg5, %40 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %new_param_2, %new_momentum_buffer_3 = shardc.SGDUpdate %arg6, %28, %arg7, %40 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  %new_param_4, %new_momentum_buffer_5 = shardc.SGDUpdate %arg8, %21, %arg9, %40 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  return %14, %40, %new_momentum_buffer, %new_param, %new_momentum_buffer_1, %new_param_0, %new_momentum_buffer_3, %new_param_2, %new_momentum_buffer_5, %new_param_4 : tensor<f32>, tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// early-updates with four buckets of one size, two in flight at a time:
// each bucket's wait comes right before the start of the bucket two after
// it. Bucket d's update, which would run before the last all-reduce (a)
// starts, runs after that start instead, with c's: the updates overlap the
// last all-reduce, as the waits for b and a follow in start order.
// DEFER-LABEL: func.func @main
// DEFER: %[[SD:.*]] = shardc.AllReduceStart
// DEFER-NEXT: shardc.Mul %arg0, %arg3
// DEFER-NEXT: %[[SC:.*]] = shardc.AllReduceStart
// DEFER-NEXT: shardc.Mul %arg0, %arg2
// DEFER-NEXT: %[[WD:.*]] = shardc.CollectiveWait %[[SD]]
// DEFER-NEXT: %[[SB:.*]] = shardc.AllReduceStart
// DEFER-NEXT: shardc.Mul %arg0,
// DEFER-NEXT: %[[WC:.*]] = shardc.CollectiveWait %[[SC]]
// DEFER-NEXT: %[[SA:.*]] = shardc.AllReduceStart
// DEFER-NEXT: %[[GD:.*]] = shardc.Mul %[[WD]]
// DEFER-NEXT: shardc.SGDUpdate %arg4, %[[GD]]
// DEFER-NEXT: %[[GC:.*]] = shardc.Mul %[[WC]]
// DEFER-NEXT: shardc.SGDUpdate %arg3, %[[GC]]
// DEFER-NEXT: %[[WB:.*]] = shardc.CollectiveWait %[[SB]]
// DEFER-NEXT: %[[GB:.*]] = shardc.Mul %[[WB]]
// DEFER-NEXT: shardc.SGDUpdate %arg2, %[[GB]]
// DEFER-NEXT: %[[WA:.*]] = shardc.CollectiveWait %[[SA]]
// DEFER-NEXT: %[[GA:.*]] = shardc.Mul %[[WA]]
// DEFER-NEXT: shardc.SGDUpdate %arg1, %[[GA]]
mesh.mesh @world(shape = 2)
func.func @main(%arg0: tensor<8xf32> {shardc.input = "x"}, %arg1: tensor<8xf32> {shardc.param = "a", shardc.unit = 0 : i64}, %arg2: tensor<8xf32> {shardc.param = "b", shardc.unit = 1 : i64}, %arg3: tensor<8xf32> {shardc.param = "c", shardc.unit = 2 : i64}, %arg4: tensor<8xf32> {shardc.param = "d", shardc.unit = 3 : i64}, %arg5: tensor<f32> {shardc.state = "optimizer.step"}, %arg6: tensor<8xf32> {shardc.state = "a.momentum_buffer"}, %arg7: tensor<8xf32> {shardc.state = "b.momentum_buffer"}, %arg8: tensor<8xf32> {shardc.state = "c.momentum_buffer"}, %arg9: tensor<8xf32> {shardc.state = "d.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 5 : i64}, tensor<8xf32> {shardc.updates = 1 : i64}, tensor<8xf32> {shardc.updates = 6 : i64}, tensor<8xf32> {shardc.updates = 2 : i64}, tensor<8xf32> {shardc.updates = 7 : i64}, tensor<8xf32> {shardc.updates = 3 : i64}, tensor<8xf32> {shardc.updates = 8 : i64}, tensor<8xf32> {shardc.updates = 4 : i64}, tensor<8xf32> {shardc.updates = 9 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"], shardc.world_size = 2 : i64, shardc.zero_stage = 0 : i64} {
  %0 = shardc.Constant dense<5.000000e-01> : tensor<f32>
  %1 = shardc.Mul %arg0, %arg1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = shardc.ReduceSum %1 {axes = array<i64: 0>, keepdims = false} : tensor<8xf32> -> tensor<f32>
  %3 = shardc.Mul %arg0, %arg4 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = shardc.AllReduceStart %3 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<8xf32>
  %5 = shardc.CollectiveWait %4 {shardc.category = #shardc.category<grads>} : tensor<8xf32>
  %6 = shardc.Mul %arg0, %arg3 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %7 = shardc.AllReduceStart %6 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<8xf32>
  %8 = shardc.CollectiveWait %7 {shardc.category = #shardc.category<grads>} : tensor<8xf32>
  %9 = shardc.Mul %arg0, %arg2 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %10 = shardc.AllReduceStart %9 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<8xf32>
  %11 = shardc.CollectiveWait %10 {shardc.category = #shardc.category<grads>} : tensor<8xf32>
  %12 = shardc.Mul %arg0, %1 {shardc.backward, shardc.category = #shardc.category<grads>} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %13 = shardc.AllReduceStart %12 {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<8xf32>
  %14 = shardc.CollectiveWait %13 {shardc.category = #shardc.category<grads>} : tensor<8xf32>
  %15 = shardc.Mul %5, %0 {shardc.category = #shardc.category<grads>} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %16 = shardc.Mul %8, %0 {shardc.category = #shardc.category<grads>} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %17 = shardc.Mul %11, %0 {shardc.category = #shardc.category<grads>} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %18 = shardc.Mul %14, %0 {shardc.category = #shardc.category<grads>} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %19 = shardc.Increment %arg5 : tensor<f32>
  %p4, %m4 = shardc.SGDUpdate %arg4, %15, %arg9, %19 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<8xf32>, tensor<f32>
  %p3, %m3 = shardc.SGDUpdate %arg3, %16, %arg8, %19 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<8xf32>, tensor<f32>
  %p2, %m2 = shardc.SGDUpdate %arg2, %17, %arg7, %19 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<8xf32>, tensor<f32>
  %p1, %m1 = shardc.SGDUpdate %arg1, %18, %arg6, %19 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<8xf32>, tensor<f32>
  return %2, %19, %p1, %m1, %p2, %m2, %p3, %m3, %p4, %m4 : tensor<f32>, tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Forward prefetch past a small unit: unit 1 (2 elements, a quarter of the
// largest) lies between two units of 8 and does not count toward the
// prefetch depth, so unit 2's gather starts with unit 1's, right after
// unit 0's wait, instead of waiting for the small unit's.
// SMALL-LABEL: shardc.flat_params = ["n.s"]
// SMALL: %[[G0:.*]] = shardc.AllGatherStart %arg2
// SMALL-NEXT: %[[W0:.*]] = shardc.CollectiveWait %[[G0]]
// SMALL-NEXT: %[[G1:.*]] = shardc.AllGatherStart %arg3
// SMALL-NEXT: %[[G2:.*]] = shardc.AllGatherStart %arg4
// SMALL-NEXT: shardc.Mul %arg0, %[[W0]]
// SMALL-NEXT: shardc.CollectiveWait %[[G1]]
mesh.mesh @world(shape = 2)
func.func @main(%arg0: tensor<8xf32> {shardc.input = "x"}, %arg1: tensor<f32> {shardc.state = "optimizer.step"}, %arg2: tensor<4xf32> {shardc.flat_params = ["l0.s"], shardc.flat_types = [tensor<8xf32>], shardc.param_shard = "unit0"}, %arg3: tensor<1xf32> {shardc.flat_params = ["n.s"], shardc.flat_types = [tensor<2xf32>], shardc.param_shard = "unit1"}, %arg4: tensor<4xf32> {shardc.flat_params = ["l2.s"], shardc.flat_types = [tensor<8xf32>], shardc.param_shard = "unit2"}) -> tensor<f32> attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"], shardc.world_size = 2 : i64, shardc.zero_stage = 3 : i64} {
  %0 = shardc.AllGatherStart %arg2 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<4xf32> -> !shardc.pending<tensor<8xf32>>
  %1 = shardc.CollectiveWait %0 {shardc.category = #shardc.category<params>} : tensor<8xf32>
  %2 = shardc.Mul %arg0, %1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = shardc.AllGatherStart %arg3 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<1xf32> -> !shardc.pending<tensor<2xf32>>
  %4 = shardc.CollectiveWait %3 {shardc.category = #shardc.category<params>} : tensor<2xf32>
  %5 = shardc.ReduceSum %4 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  %6 = shardc.Mul %2, %5 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %7 = shardc.AllGatherStart %arg4 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<4xf32> -> !shardc.pending<tensor<8xf32>>
  %8 = shardc.CollectiveWait %7 {shardc.category = #shardc.category<params>} : tensor<8xf32>
  %9 = shardc.Mul %6, %8 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %10 = shardc.ReduceSum %9 {axes = array<i64: 0>, keepdims = false} : tensor<8xf32> -> tensor<f32>
  return %10 : tensor<f32>
}
