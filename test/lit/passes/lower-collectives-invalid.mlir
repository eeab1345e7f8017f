// RUN: shardc-opt %s -split-input-file -shardc-lower-collectives -verify-diagnostics

mesh.mesh @grid(shape = 2x?)
func.func @dynamic_mesh(%a: tensor<3xf32>) -> tensor<6xf32> {
  // expected-error@+1 {{lower-collectives: needs a mesh of static shape}}
  %0 = mesh.all_gather %a on @grid mesh_axes = [0] gather_axis = 0 : tensor<3xf32> -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

mesh.mesh @world(shape = 2)
func.func @max_reduce_scatter(%a: tensor<6xf32>) -> tensor<3xf32> {
  // expected-error@+1 {{lower-collectives: only sum reductions}}
  %0 = mesh.reduce_scatter %a on @world mesh_axes = [0] reduction = <max> scatter_axis = 0 : tensor<6xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

mesh.mesh @world(shape = 2)
func.func @min_all_reduce(%a: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error@+1 {{lower-collectives: only sum reductions}}
  %0 = mesh.all_reduce %a on @world mesh_axes = [0] reduction = <min> : tensor<6xf32> -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

mesh.mesh @world(shape = 2)
func.func @two_d_buffer(%a: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // expected-error@+1 {{lower-collectives: only 1-d buffers}}
  %0 = mesh.all_gather %a on @world mesh_axes = [0] gather_axis = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
