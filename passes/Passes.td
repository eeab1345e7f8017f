//===- Passes.td - Shard compiler passes -------------------*- tablegen -*-===//
#ifndef SHARDC_PASSES_TD
#define SHARDC_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldConstants : Pass<"shardc-fold-constants", "mlir::func::FuncOp"> {
  let summary = "Evaluate ops whose operands are all constants";
  let description = [{
    Replaces every shardc op whose operands are all `shardc.Constant` by
    constants holding its results. Ops with a folder of their own (Shape,
    Reshape) use it; every other op is evaluated by the runtime's CPU kernel
    for it, so folding and execution agree bit for bit. Results larger than
    16 MiB are left to run at execution time.

    Before:
    ```mlir
    %0 = shardc.Constant dense<[2, 3]> : tensor<2xi64>
    %1 = shardc.Constant dense<4> : tensor<1xi64>
    %2 = shardc.Concat %0, %1 {axis = 0 : i64}
        : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
    ```
    After:
    ```mlir
    %2 = shardc.Constant dense<[2, 3, 4]> : tensor<3xi64>
    ```
  }];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

def Autodiff : Pass<"shardc-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of the loss of @main";
  let description = [{
    Builds the backward graph of `func.func @main` for its scalar loss (the
    output named by `loss`, or the only scalar float output) and returns the
    gradient of every trainable parameter as an extra result carrying
    `shardc.grad_of = "<param>"`. Trainable parameters are the float
    `shardc.param` arguments that are not BatchNormalization running
    statistics. A parameter used twice (tied weights) accumulates both
    gradients. Ops that need kernels of their own for their gradient emit
    gradient ops (ReluGrad, ConvGradInput, LayerNormGrad, ...); the others
    are differentiated into forward ops. MaxPool gains its indices result.

    Before:
    ```mlir
    func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                    %w: tensor<2xf32> {shardc.param = "w"}) -> tensor<f32>
        attributes {shardc.output_names = ["loss"]} {
      %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = 0 : i64} : tensor<2xf32> -> tensor<f32>
      return %1 : tensor<f32>
    }
    ```
    After: the function also returns `%dw = %x * expand(1.0)` with
    `{shardc.grad_of = "w"}`.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "The output to differentiate (default: the only scalar float output)">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

def Optimizer : Pass<"shardc-optimizer", "mlir::ModuleOp"> {
  let summary = "Turn parameter gradients into in-place optimizer updates";
  let description = [{
    Consumes the `shardc.grad_of` results of @main. Adds the optimizer state
    as zero-initialized arguments (`shardc.state`: a step counter, and per
    parameter SGD's momentum buffer or Adam's exp_avg/exp_avg_sq), and
    returns the updated parameters and state marked `shardc.updates = N` (the
    argument they replace, in place at run time). The update ops implement
    PyTorch's SGD, Adam and AdamW exactly. BatchNormalization in training
    mode also updates its running statistics in place, with PyTorch's
    unbiased running variance.

    Before: `return %loss, %dw : tensor<f32>, tensor<4xf32>` with
    `{shardc.grad_of = "w"}` on the second result.
    After (sgd, momentum 0.9):
    ```mlir
    %s = shardc.Increment %step : tensor<f32>
    %w2, %buf2 = shardc.SGDUpdate %w, %dw, %buf, %s {lr = ..., momentum = 9.0e-01 ...}
    return %loss, %s, %w2, %buf2   // shardc.updates = index of %step, %w, %buf
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd, adam or adamw">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1",
           "Weight decay (default: 0 for sgd and adam, 0.01 for adamw)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam epsilon">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

#endif // SHARDC_PASSES_TD
