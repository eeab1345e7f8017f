func.func @main(%x: tensor<4x3xf32> {shardc.input = "x"},
                %s: tensor<3xf32> {shardc.param = "bn.weight"},
                %b: tensor<3xf32> {shardc.param = "bn.bias"},
                %m: tensor<3xf32> {shardc.param = "bn.running_mean"},
                %v: tensor<3xf32> {shardc.param = "bn.running_var"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %y, %rm, %rv = shardc.BatchNormalization %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  %d = shardc.Dropout %y {batch_axis = 0 : i64, ratio = 5.000000e-01 : f32, site = 0 : i64} : tensor<4x3xf32>
  %l = shardc.ReduceSum %d {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
