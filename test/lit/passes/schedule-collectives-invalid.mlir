// RUN: not shardc-opt %s -shardc-schedule-collectives=backward-prefetch=bogus 2>&1 | FileCheck %s

// The option parser rejects an unknown value before the pass runs, and lists
// the choices.
// CHECK: for the --backward-prefetch option: 'bogus' is not one of: pre, post, none
func.func @main(%shard: tensor<2xf32>) -> tensor<4xf32> {
  %0 = shardc.AllGatherStart %shard {world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %1 = shardc.CollectiveWait %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
