func.func @main(%x: tensor<4x3xf32> {shardc.input = "x"},
                %y: tensor<4xi64> {shardc.input = "y"},
                %w: tensor<3x5xf32> {shardc.param = "w"},
                %b: tensor<5xf32> {shardc.param = "b"}) -> (tensor<4x5xf32>, tensor<f32>)
    attributes {shardc.output_names = ["logits", "loss"]} {
  %h = shardc.MatMul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %c = shardc.Constant dense<0.5> : tensor<f32>
  %s = shardc.Mul %h, %c : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  %z = shardc.Add %s, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %l = shardc.SoftmaxCrossEntropyLoss %z, %y {reduction = #shardc.reduction<mean>} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %z, %l : tensor<4x5xf32>, tensor<f32>
}
