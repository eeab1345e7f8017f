func.func @main(%x: tensor<2x3xf32> {shardc.input = "x"},
                %mean: tensor<3xf32> {shardc.param = "running_mean"},
                %var: tensor<3xf32> {shardc.param = "running_var"},
                %scale: tensor<3xf32> {shardc.param = "scale"},
                %bias: tensor<3xf32> {shardc.param = "bias"}) -> tensor<f32>
    attributes {shardc.output_names = ["l"]} {
  %y, %rm, %rv = shardc.BatchNormalization %x, %scale, %bias, %mean, %var {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  %l = shardc.ReduceSum %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
