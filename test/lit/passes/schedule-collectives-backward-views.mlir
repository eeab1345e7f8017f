// Regression test (fixed ScheduleCollectives bug): a backward parameter
// gather is recognised by `shardc.backward` on the op right after its wait,
// but when the unit's parameters are views of the gathered buffer (padding,
// several or multi-dimensional parameters: nearly every real unit) that op
// is the view (Slice/Reshape), which carries no `shardc.backward`. Every
// backward gather is then taken for a forward one, and backward-prefetch=pre
// (the default) or post never prefetches anything.
// RUN: shardc-opt %s -shardc-schedule-collectives=backward-prefetch=pre | FileCheck %s

// Expected: unit 0's backward gather starts right after unit 1's backward
// wait, as it does when the gathered buffer is used without views.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[U0:[a-z0-9]+]]: tensor<2xf32> {shardc.param_shard = "unit0"}
// CHECK: shardc.ReduceSum
// CHECK-NEXT: %[[B1:.*]] = shardc.AllGatherStart
// CHECK-NEXT: %[[V1:.*]] = shardc.CollectiveWait %[[B1]]
// CHECK-NEXT: %[[B0:.*]] = shardc.AllGatherStart %[[U0]]
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
