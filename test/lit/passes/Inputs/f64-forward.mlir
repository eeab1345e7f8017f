func.func @main(%x: tensor<2xf64> {shardc.input = "x"},
                %w: tensor<2xf64> {shardc.param = "w"}) -> tensor<f64>
    attributes {shardc.output_names = ["loss"]} {
  %0 = shardc.Mul %x, %w : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf64> -> tensor<f64>
  return %1 : tensor<f64>
}
