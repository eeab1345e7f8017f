// RUN: shardc-opt %s -shardc-schedule-collectives=backward-prefetch=bogus -verify-diagnostics

// expected-error@+1 {{schedule-collectives: backward-prefetch must be pre, post or none}}
func.func @main(%shard: tensor<2xf32>) -> tensor<4xf32> {
  %0 = shardc.AllGatherStart %shard {shardc.category = "params", world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %1 = shardc.CollectiveWait %0 {shardc.category = "params"} : tensor<4xf32>
  return %1 : tensor<4xf32>
}
