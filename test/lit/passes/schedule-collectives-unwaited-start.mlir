// Regression test (fixed ScheduleCollectives bug) (crash): the pass takes the
// first user of every AllGatherStart of a block argument (a parameter
// gather) and of every ReduceScatterStart/AllReduceStart but the last (the
// one-reduction-in-flight rule) to be its CollectiveWait. A start nobody
// waits on is valid IR (the verifier only constrains waits), and the pass
// then dereferences an empty use list and crashes (SIGSEGV).
// RUN: shardc-opt %s -split-input-file -shardc-schedule-collectives | FileCheck %s

// CHECK-LABEL: func.func @main(%arg0: tensor<2xf32>)
// CHECK: shardc.AllGatherStart
func.func @main(%shard: tensor<2xf32>) -> tensor<2xf32> {
  %0 = shardc.AllGatherStart %shard {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  return %shard : tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @main(%arg0: tensor<4xf32>)
// CHECK: shardc.ReduceScatterStart
// CHECK: shardc.ReduceScatterStart
func.func @main(%g: tensor<4xf32>) -> tensor<2xf32> {
  %0 = shardc.ReduceScatterStart %g {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<4xf32> -> !shardc.pending<tensor<2xf32>>
  %1 = shardc.ReduceScatterStart %g {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<4xf32> -> !shardc.pending<tensor<2xf32>>
  %2 = shardc.CollectiveWait %1 {shardc.category = #shardc.category<grads>} : tensor<2xf32>
  return %2 : tensor<2xf32>
}
