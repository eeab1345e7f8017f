// RUN: shardc-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of the collective ops (AllGatherStart,
// ReduceScatterStart, ShardSlice, CollectiveWait in ir/ShardcOps.cpp): the
// full buffer is world_size shards of the 1-d shard buffer, of the same
// element type; a wait consumes the !shardc.pending handle of a start, and
// yields the tensor the handle is pending.

func.func @gather_not_world_size_shards(%shard: tensor<3xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'shardc.AllGatherStart' op full buffer of 5 elements is not 2 shards of 3}}
  %0 = shardc.AllGatherStart %shard {world_size = 2 : i64} : tensor<3xf32> -> !shardc.pending<tensor<5xf32>>
  %1 = shardc.CollectiveWait %0 : tensor<5xf32>
  return %1 : tensor<5xf32>
}

// -----

func.func @gather_2d(%shard: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'shardc.AllGatherStart' op operates on 1-d buffers}}
  %0 = shardc.AllGatherStart %shard {world_size = 2 : i64} : tensor<2x3xf32> -> !shardc.pending<tensor<4x3xf32>>
  %1 = shardc.CollectiveWait %0 : tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}

// -----

func.func @gather_element_types(%shard: tensor<3xf32>) -> tensor<6xf16> {
  // expected-error @+1 {{'shardc.AllGatherStart' op element types differ}}
  %0 = shardc.AllGatherStart %shard {world_size = 2 : i64} : tensor<3xf32> -> !shardc.pending<tensor<6xf16>>
  %1 = shardc.CollectiveWait %0 : tensor<6xf16>
  return %1 : tensor<6xf16>
}

// -----

func.func @gather_world_size_zero(%shard: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.AllGatherStart' op world_size must be positive}}
  %0 = shardc.AllGatherStart %shard {world_size = 0 : i64} : tensor<3xf32> -> !shardc.pending<tensor<3xf32>>
  %1 = shardc.CollectiveWait %0 : tensor<3xf32>
  return %1 : tensor<3xf32>
}

// -----

func.func @reduce_scatter_not_world_size_shards(%full: tensor<7xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.ReduceScatterStart' op full buffer of 7 elements is not 2 shards of 3}}
  %0 = shardc.ReduceScatterStart %full {world_size = 2 : i64} : tensor<7xf32> -> !shardc.pending<tensor<3xf32>>
  %1 = shardc.CollectiveWait %0 : tensor<3xf32>
  return %1 : tensor<3xf32>
}

// -----

func.func @reduce_scatter_2d(%full: tensor<4x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'shardc.ReduceScatterStart' op operates on 1-d buffers}}
  %0 = shardc.ReduceScatterStart %full {world_size = 2 : i64} : tensor<4x3xf32> -> !shardc.pending<tensor<2x3xf32>>
  %1 = shardc.CollectiveWait %0 : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

func.func @reduce_scatter_world_size_negative(%full: tensor<6xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.ReduceScatterStart' op world_size must be positive}}
  %0 = shardc.ReduceScatterStart %full {world_size = -2 : i64} : tensor<6xf32> -> !shardc.pending<tensor<3xf32>>
  %1 = shardc.CollectiveWait %0 : tensor<3xf32>
  return %1 : tensor<3xf32>
}

// -----

func.func @shard_slice_not_world_size_shards(%full: tensor<6xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'shardc.ShardSlice' op full buffer of 6 elements is not 2 shards of 2}}
  %0 = shardc.ShardSlice %full {world_size = 2 : i64} : tensor<6xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @shard_slice_parts_not_world_size_shards(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.ShardSlice' op full buffer of 7 elements is not 2 shards of 3}}
  %0 = shardc.ShardSlice %a, %b {world_size = 2 : i64} : tensor<4xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @shard_slice_part_not_1d(%a: tensor<2x2xf32>, %b: tensor<2xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.ShardSlice' op operates on 1-d buffers}}
  %0 = shardc.ShardSlice %a, %b {world_size = 2 : i64} : tensor<2x2xf32>, tensor<2xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @shard_slice_no_input() -> tensor<3xf32> {
  // expected-error @+1 {{'shardc.ShardSlice' op needs at least one input}}
  %0 = "shardc.ShardSlice"() {world_size = 2 : i64} : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @shard_slice_0d(%full: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'shardc.ShardSlice' op operates on 1-d buffers}}
  %0 = shardc.ShardSlice %full {world_size = 1 : i64} : tensor<f32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @shard_slice_element_types(%full: tensor<6xf32>) -> tensor<3xi32> {
  // expected-error @+1 {{'shardc.ShardSlice' op element types differ}}
  %0 = shardc.ShardSlice %full {world_size = 2 : i64} : tensor<6xf32> -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

func.func @wait_on_tensor(%buffer: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'shardc.CollectiveWait' op operand #0 must be An in-flight collective that will produce a tensor, but got 'tensor<6xf32>'}}
  %0 = "shardc.CollectiveWait"(%buffer) : (tensor<6xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

func.func @start_yields_tensor(%shard: tensor<3xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'shardc.AllGatherStart' op result #0 must be An in-flight collective that will produce a tensor, but got 'tensor<6xf32>'}}
  %0 = "shardc.AllGatherStart"(%shard) <{world_size = 2 : i64}> : (tensor<3xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

func.func @wait_type(%buffer: tensor<6xf32>) -> tensor<5xf32> {
  %0 = shardc.AllReduceStart %buffer {world_size = 2 : i64} : tensor<6xf32>
  // expected-error @+1 {{failed to verify that the handle is pending the result's type}}
  %1 = "shardc.CollectiveWait"(%0) : (!shardc.pending<tensor<6xf32>>) -> tensor<5xf32>
  return %1 : tensor<5xf32>
}

// -----

func.func @all_reduce_type(%buffer: tensor<6xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{failed to verify that the pending result is the input's type}}
  %0 = "shardc.AllReduceStart"(%buffer) <{world_size = 2 : i64}> : (tensor<6xf32>) -> !shardc.pending<tensor<5xf32>>
  %1 = shardc.CollectiveWait %0 : tensor<5xf32>
  return %1 : tensor<5xf32>
}

// -----

// expected-error @+1 {{a pending collective needs a static shape, got 'tensor<?xf32>'}}
func.func @pending_dynamic(%h: !shardc.pending<tensor<?xf32>>) {
  return
}

// -----

func.func @mesh_axes_empty(%a: tensor<3xf32>) {
  // expected-error@+1 {{mesh_axes must list at least one axis}}
  %p = shardc.AllGatherStart %a {world_size = 2 : i64, mesh_axes = array<i64>} : tensor<3xf32> -> !shardc.pending<tensor<6xf32>>
  return
}

// -----

func.func @mesh_axes_unordered(%a: tensor<6xf32>) {
  // expected-error@+1 {{mesh_axes must be increasing axes >= 0}}
  %p = shardc.ReduceScatterStart %a {world_size = 2 : i64, mesh_axes = array<i64: 1, 0>} : tensor<6xf32> -> !shardc.pending<tensor<3xf32>>
  return
}

// -----

func.func @mesh_axes_negative(%a: tensor<6xf32>) -> tensor<3xf32> {
  // expected-error@+1 {{mesh_axes must be increasing axes >= 0}}
  %s = shardc.ShardSlice %a {world_size = 2 : i64, mesh_axes = array<i64: -1>} : tensor<6xf32> -> tensor<3xf32>
  return %s : tensor<3xf32>
}
