// Regression test (fixed ScheduleCollectives bug): with
// limit-all-gathers=false ("prefetching runs two units ahead") unit K+2's
// gather starts after unit K's wait, but unit 1's gather is never prefetched
// at all: it still starts right before its own wait, after unit 2's. Turning
// the limit off thus delays unit 1 (later than with the limit) and issues the
// gathers out of unit order, so an in-order communicator finishes unit 2's
// gather before the one unit 1 is waiting for.
// RUN: shardc-opt %s -shardc-schedule-collectives='forward-prefetch=true limit-all-gathers=false' | FileCheck %s

// Expected: once unit 0 is gathered, units 1 and 2 are both in flight, unit
// 1's first, before unit 0's computation.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[U0:[a-z0-9]+]]: tensor<2xf32> {shardc.param_shard = "unit0"}
// CHECK-SAME: %[[U1:[a-z0-9]+]]: tensor<2xf32> {shardc.param_shard = "unit1"}
// CHECK-SAME: %[[U2:[a-z0-9]+]]: tensor<2xf32> {shardc.param_shard = "unit2"}
// CHECK: %[[G0:.*]] = shardc.AllGatherStart %[[U0]]
// CHECK-NEXT: shardc.CollectiveWait %[[G0]]
// CHECK-NOT: shardc.Mul
// CHECK: shardc.AllGatherStart %[[U1]]
// CHECK-NOT: shardc.Mul
// CHECK: shardc.AllGatherStart %[[U2]]
func.func @main(%x: tensor<4xf32> {shardc.input = "x"}, %u0: tensor<2xf32> {shardc.param_shard = "unit0"}, %u1: tensor<2xf32> {shardc.param_shard = "unit1"}, %u2: tensor<2xf32> {shardc.param_shard = "unit2"}) -> tensor<4xf32> {
  %g0 = shardc.AllGatherStart %u0 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %w0 = shardc.CollectiveWait %g0 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %h0 = shardc.Mul %x, %w0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g1 = shardc.AllGatherStart %u1 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %w1 = shardc.CollectiveWait %g1 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %h1 = shardc.Mul %h0, %w1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g2 = shardc.AllGatherStart %u2 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %w2 = shardc.CollectiveWait %g2 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %h2 = shardc.Mul %h1, %w2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %h2 : tensor<4xf32>
}
