// Regression test (fixed ScheduleCollectives bug): with forward-prefetch, a
// backward gather whose parameters are views (see
// schedule-collectives-backward-views.mlir) is taken for a forward one and
// prefetched into forward, right after the last forward wait: the unit is
// gathered twice at once across the loss computation, and backward gathers
// are prefetched although backward-prefetch=none.
// RUN: shardc-opt %s -shardc-schedule-collectives='forward-prefetch=true backward-prefetch=none' | FileCheck %s

// Expected: forward prefetch moves unit 1's forward gather only; the
// backward gathers stay right before their waits, after the loss.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[U0:[a-z0-9]+]]: tensor<2xf32> {shardc.param_shard = "unit0"}
// CHECK-SAME: %[[U1:[a-z0-9]+]]: tensor<2xf32> {shardc.param_shard = "unit1"}
// CHECK: %[[W0:.*]] = shardc.CollectiveWait
// CHECK-NEXT: shardc.AllGatherStart %[[U1]]
// CHECK: shardc.ReduceSum
// CHECK-NEXT: %[[B1:.*]] = shardc.AllGatherStart %[[U1]]
// CHECK-NEXT: shardc.CollectiveWait %[[B1]]
// CHECK: %[[B0:.*]] = shardc.AllGatherStart %[[U0]]
// CHECK-NEXT: shardc.CollectiveWait %[[B0]]
func.func @main(%x: tensor<3xf32> {shardc.input = "x"}, %u0: tensor<2xf32> {shardc.param_shard = "unit0"}, %u1: tensor<2xf32> {shardc.param_shard = "unit1"}) -> (tensor<f32>, tensor<3xf32>) {
  %g0 = shardc.AllGatherStart %u0 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %w0 = shardc.CollectiveWait %g0 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %p0 = shardc.Slice %w0 {shardc.category = #shardc.category<params>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<4xf32> -> tensor<3xf32>
  %h0 = shardc.Mul %x, %p0 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %g1 = shardc.AllGatherStart %u1 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %w1 = shardc.CollectiveWait %g1 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %p1 = shardc.Slice %w1 {shardc.category = #shardc.category<params>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<4xf32> -> tensor<3xf32>
  %h1 = shardc.Mul %h0, %p1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %loss = shardc.ReduceSum %h1 {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
  %b1 = shardc.AllGatherStart %u1 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %v1 = shardc.CollectiveWait %b1 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %q1 = shardc.Slice %v1 {shardc.category = #shardc.category<params>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<4xf32> -> tensor<3xf32>
  %d1 = shardc.Mul %h0, %q1 {shardc.backward} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %b0 = shardc.AllGatherStart %u0 {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<2xf32> -> !shardc.pending<tensor<4xf32>>
  %v0 = shardc.CollectiveWait %b0 {shardc.category = #shardc.category<params>} : tensor<4xf32>
  %q0 = shardc.Slice %v0 {shardc.category = #shardc.category<params>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<4xf32> -> tensor<3xf32>
  %d0 = shardc.Mul %d1, %q0 {shardc.backward} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %loss, %d0 : tensor<f32>, tensor<3xf32>
}
