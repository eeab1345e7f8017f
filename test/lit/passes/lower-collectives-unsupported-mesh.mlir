// Regression test (fixed LowerCollectives bug): the pass checks for a 1-d mesh
// but not that the collective runs over that mesh axis with a static size.
//  - mesh_axes = [] (a group of one rank: the collective is an identity) is
//    lowered to a world-size collective: an all-gather becomes an invalid
//    AllGatherStart (the verifier fails after the pass), an all-reduce
//    silently sums over every rank;
//  - a dynamic mesh (shape = ?) gives world_size = -9223372036854775808,
//    which the AllReduceStart verifier does not catch.
// Expected: an error naming the op, like the other unsupported cases.
// RUN: shardc-opt %s -split-input-file -shardc-lower-collectives -verify-diagnostics

mesh.mesh @world(shape = 2)
func.func @gather_no_axes(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error@+1 {{lower-collectives:}}
  %0 = mesh.all_gather %a on @world mesh_axes = [] gather_axis = 0 : tensor<3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

mesh.mesh @world(shape = 2)
func.func @reduce_no_axes(%a: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error@+1 {{lower-collectives:}}
  %0 = mesh.all_reduce %a on @world mesh_axes = [] : tensor<6xf32> -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

mesh.mesh @world(shape = ?)
func.func @dynamic_mesh(%a: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error@+1 {{lower-collectives:}}
  %0 = mesh.all_reduce %a on @world mesh_axes = [0] : tensor<6xf32> -> tensor<6xf32>
  return %0 : tensor<6xf32>
}
