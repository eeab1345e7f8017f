// RUN: shardc-opt %s -split-input-file -shardc-lower-collectives | FileCheck %s

// A gather becomes a start and its wait; the memory category moves to both,
// the mesh size becomes world_size.
// CHECK-LABEL: func.func @all_gather
// CHECK-SAME: (%[[SHARD:[a-z0-9]+]]: tensor<3xf32>)
// CHECK: %[[P:.*]] = shardc.AllGatherStart %[[SHARD]] {shardc.category = #shardc.category<params>, world_size = 2 : i64} : tensor<3xf32> -> !shardc.pending<tensor<6xf32>>
// CHECK: %[[FULL:.*]] = shardc.CollectiveWait %[[P]] {shardc.category = #shardc.category<params>} : tensor<6xf32>
// CHECK: return %[[FULL]]
// CHECK-NOT: mesh.all_gather
mesh.mesh @world(shape = 2)
func.func @all_gather(%shard: tensor<3xf32>) -> tensor<6xf32> {
  %0 = mesh.all_gather %shard on @world mesh_axes = [0] gather_axis = 0 {shardc.category = #shardc.category<params>} : tensor<3xf32> -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

// A reduce-scatter keeps shardc.backward on its start (the scheduler's
// phase marker).
// CHECK-LABEL: func.func @reduce_scatter
// CHECK-SAME: (%[[FLAT:[a-z0-9]+]]: tensor<8xf32>)
// CHECK: %[[P:.*]] = shardc.ReduceScatterStart %[[FLAT]] {shardc.backward, shardc.category = #shardc.category<grads>, world_size = 4 : i64} : tensor<8xf32> -> !shardc.pending<tensor<2xf32>>
// CHECK: %[[SHARD:.*]] = shardc.CollectiveWait %[[P]] {shardc.category = #shardc.category<grads>} : tensor<2xf32>
// CHECK: return %[[SHARD]]
// CHECK-NOT: mesh.reduce_scatter
mesh.mesh @world(shape = 4)
func.func @reduce_scatter(%flat: tensor<8xf32>) -> tensor<2xf32> {
  %0 = mesh.reduce_scatter %flat on @world mesh_axes = [0] scatter_axis = 0 {shardc.backward, shardc.category = #shardc.category<grads>} : tensor<8xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// An all-reduce (sum is the default reduction); without a category the
// start and wait carry none.
// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME: (%[[BUCKET:[a-z0-9]+]]: tensor<5xf32>)
// CHECK: %[[P:.*]] = shardc.AllReduceStart %[[BUCKET]] {world_size = 2 : i64} : tensor<5xf32>
// CHECK: %[[SUM:.*]] = shardc.CollectiveWait %[[P]] : tensor<5xf32>
// CHECK: %[[P2:.*]] = shardc.AllReduceStart %[[BUCKET]] {shardc.category = #shardc.category<grads>, world_size = 2 : i64} : tensor<5xf32>
// CHECK: %[[SUM2:.*]] = shardc.CollectiveWait %[[P2]] {shardc.category = #shardc.category<grads>} : tensor<5xf32>
// CHECK: return %[[SUM]], %[[SUM2]]
// CHECK-NOT: mesh.all_reduce
mesh.mesh @world(shape = 2)
func.func @all_reduce(%bucket: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>) {
  %0 = mesh.all_reduce %bucket on @world mesh_axes = [0] : tensor<5xf32> -> tensor<5xf32>
  %1 = mesh.all_reduce %bucket on @world mesh_axes = [0] reduction = <sum> {shardc.category = #shardc.category<grads>} : tensor<5xf32> -> tensor<5xf32>
  return %0, %1 : tensor<5xf32>, tensor<5xf32>
}

// -----

// A slice of a replicated buffer needs no communication: ShardSlice, no wait.
// CHECK-LABEL: func.func @all_slice
// CHECK-SAME: (%[[FLAT:[a-z0-9]+]]: tensor<16xf32>)
// CHECK: %[[SHARD:.*]] = shardc.ShardSlice %[[FLAT]] {shardc.category = #shardc.category<params>, world_size = 4 : i64} : tensor<16xf32> -> tensor<4xf32>
// CHECK-NOT: shardc.CollectiveWait
// CHECK: return %[[SHARD]]
// CHECK-NOT: mesh.all_slice
mesh.mesh @world(shape = 4)
func.func @all_slice(%flat: tensor<16xf32>) -> tensor<4xf32> {
  %0 = mesh.all_slice %flat on @world mesh_axes = [0] slice_axis = 0 {shardc.category = #shardc.category<params>} : tensor<16xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A slice of a concatenation nothing else reads takes its parts: the rank
// copies only its chunk of them, and the concatenation is gone. A
// concatenation read elsewhere too stays whole.
// CHECK-LABEL: func.func @all_slice_of_concat
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<6xf32>, %[[B:[a-z0-9]+]]: tensor<2xf32>)
// CHECK: %[[SHARD:.*]] = shardc.ShardSlice %[[A]], %[[B]] {world_size = 2 : i64} : tensor<6xf32>, tensor<2xf32> -> tensor<4xf32>
// CHECK: %[[C:.*]] = shardc.Concat %[[B]], %[[A]]
// CHECK: %[[WHOLE:.*]] = shardc.ShardSlice %[[C]] {world_size = 2 : i64} : tensor<8xf32> -> tensor<4xf32>
// CHECK: return %[[SHARD]], %[[WHOLE]], %[[C]]
mesh.mesh @world(shape = 2)
func.func @all_slice_of_concat(%a: tensor<6xf32>, %b: tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) {
  %c = shardc.Concat %a, %b {axis = 0 : i64} : (tensor<6xf32>, tensor<2xf32>) -> tensor<8xf32>
  %0 = mesh.all_slice %c on @world mesh_axes = [0] slice_axis = 0 : tensor<8xf32> -> tensor<4xf32>
  %d = shardc.Concat %b, %a {axis = 0 : i64} : (tensor<2xf32>, tensor<6xf32>) -> tensor<8xf32>
  %1 = mesh.all_slice %d on @world mesh_axes = [0] slice_axis = 0 : tensor<8xf32> -> tensor<4xf32>
  return %0, %1, %d : tensor<4xf32>, tensor<4xf32>, tensor<8xf32>
}

// -----

// The ZeRO-2 round trip of one unit as shardc-zero emits it: every collective
// is lowered in place, in order, and uses are rewired to the waits.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[G:[a-z0-9]+]]: tensor<8xf32>, %[[P:[a-z0-9]+]]: tensor<8xf32>)
// CHECK: %[[RS:.*]] = shardc.ReduceScatterStart %[[G]] {shardc.category = #shardc.category<grads>, world_size = 4 : i64} : tensor<8xf32> -> !shardc.pending<tensor<2xf32>>
// CHECK: %[[GS:.*]] = shardc.CollectiveWait %[[RS]] {shardc.category = #shardc.category<grads>} : tensor<2xf32>
// CHECK: %[[PS:.*]] = shardc.ShardSlice %[[P]] {shardc.category = #shardc.category<params>, world_size = 4 : i64} : tensor<8xf32> -> tensor<2xf32>
// CHECK: %[[NEW:.*]] = shardc.Sub %[[PS]], %[[GS]]
// CHECK: %[[AG:.*]] = shardc.AllGatherStart %[[NEW]] {shardc.category = #shardc.category<params>, world_size = 4 : i64} : tensor<2xf32> -> !shardc.pending<tensor<8xf32>>
// CHECK: %[[FULL:.*]] = shardc.CollectiveWait %[[AG]] {shardc.category = #shardc.category<params>} : tensor<8xf32>
// CHECK: return %[[FULL]]
mesh.mesh @world(shape = 4)
func.func @main(%g: tensor<8xf32>, %p: tensor<8xf32>) -> tensor<8xf32> {
  %gs = mesh.reduce_scatter %g on @world mesh_axes = [0] scatter_axis = 0 {shardc.category = #shardc.category<grads>} : tensor<8xf32> -> tensor<2xf32>
  %ps = mesh.all_slice %p on @world mesh_axes = [0] slice_axis = 0 {shardc.category = #shardc.category<params>} : tensor<8xf32> -> tensor<2xf32>
  %new = shardc.Sub %ps, %gs : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %full = mesh.all_gather %new on @world mesh_axes = [0] gather_axis = 0 {shardc.category = #shardc.category<params>} : tensor<2xf32> -> tensor<8xf32>
  return %full : tensor<8xf32>
}

// -----

// On a mesh of several axes (hybrid sharding: 2 groups x 2 ranks), a
// collective within a group names its axis and spans the group's ranks; one
// over every axis spans every rank and names none.
// CHECK-LABEL: func.func @hybrid
// CHECK: shardc.AllGatherStart %{{.*}} {mesh_axes = array<i64: 1>, world_size = 2 : i64} : tensor<3xf32> -> !shardc.pending<tensor<6xf32>>
// CHECK: shardc.ReduceScatterStart %{{.*}} {mesh_axes = array<i64: 1>, world_size = 2 : i64} : tensor<6xf32> -> !shardc.pending<tensor<3xf32>>
// CHECK: shardc.AllReduceStart %{{.*}} {mesh_axes = array<i64: 0>, world_size = 2 : i64} : tensor<3xf32>
// CHECK: shardc.ShardSlice %{{.*}} {mesh_axes = array<i64: 1>, world_size = 2 : i64} : tensor<6xf32> -> tensor<3xf32>
// CHECK: shardc.AllReduceStart %{{.*}} {world_size = 4 : i64} : tensor<1xf32>
mesh.mesh @world(shape = 2x2)
func.func @hybrid(%shard: tensor<3xf32>, %g: tensor<6xf32>, %s: tensor<1xf32>) -> (tensor<6xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1xf32>) {
  %0 = mesh.all_gather %shard on @world mesh_axes = [1] gather_axis = 0 : tensor<3xf32> -> tensor<6xf32>
  %1 = mesh.reduce_scatter %g on @world mesh_axes = [1] scatter_axis = 0 : tensor<6xf32> -> tensor<3xf32>
  %2 = mesh.all_reduce %1 on @world mesh_axes = [0] : tensor<3xf32> -> tensor<3xf32>
  %3 = mesh.all_slice %g on @world mesh_axes = [1] slice_axis = 0 : tensor<6xf32> -> tensor<3xf32>
  %4 = mesh.all_reduce %s on @world mesh_axes = [0, 1] : tensor<1xf32> -> tensor<1xf32>
  return %0, %2, %3, %4 : tensor<6xf32>, tensor<3xf32>, tensor<3xf32>, tensor<1xf32>
}
