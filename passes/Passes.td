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

def WrapUnits : Pass<"shardc-wrap-units", "mlir::ModuleOp"> {
  let summary = "Group trainable parameters into FSDP wrap units";
  let description = [{
    Marks every parameter that an optimizer update consumes with
    `shardc.unit = K`. Parameters are ordered by first use; by default each
    layer is a unit (the name up to its first numeric component, e.g.
    "blocks.3", else the module, e.g. "fc1"), like wrapping every transformer
    block; with `min-num-params` consecutive parameters are merged until a
    unit holds at least that many elements (size_based_auto_wrap_policy).
    A tied parameter belongs to one unit.

    Before: `%w: tensor<4x4xf32> {shardc.param = "fc1.weight"}`
    After:  `%w: tensor<4x4xf32> {shardc.param = "fc1.weight", shardc.unit = 0 : i64}`
  }];
  let options = [
    Option<"minNumParams", "min-num-params", "int64_t", /*default=*/"0",
           "Merge parameters into units of at least this many elements "
           "(0: one unit per layer)">,
  ];
}

def Zero : Pass<"shardc-zero", "mlir::ModuleOp"> {
  let summary = "Rewrite the training step into a ZeRO stage 0-3 per-rank step";
  let description = [{
    Stage 0 averages gradients with bucketed `mesh.all_reduce`; stage 1 also
    shards optimizer state and updates per wrap unit on this rank's shard
    (`mesh.all_slice`), rebuilding parameters with `mesh.all_gather`; stage 2
    reduce-scatters each unit's flattened gradient as soon as it is complete;
    stage 3 keeps parameters only as flat shards (`shardc.param_shard`
    arguments) and all-gathers each unit before each use window. Flat buffers
    are padded to a multiple of the world size.

    Before (one parameter, Adam):
    ```mlir
    %p2, %m2, %v2 = shardc.AdamUpdate %p, %g, %m, %v, %step {...}
    ```
    After (stage 2, world size 2, %p of 5 elements padded to 6):
    ```mlir
    %gf = shardc.Concat %g, %zero : ... -> tensor<6xf32>
    %gs = mesh.reduce_scatter %gf on @world mesh_axes = [0] scatter_axis = 0 : tensor<6xf32> -> tensor<3xf32>
    %ps = mesh.all_slice %pf on @world mesh_axes = [0] slice_axis = 0 : tensor<6xf32> -> tensor<3xf32>
    %ps2, %ms2, %vs2 = shardc.AdamUpdate %ps, %gs_avg, %ms, %vs, %step {...}
    %pf2 = mesh.all_gather %ps2 on @world mesh_axes = [0] gather_axis = 0 : tensor<3xf32> -> tensor<6xf32>
    ```
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1", "Number of ranks">,
    Option<"stage", "stage", "int64_t", /*default=*/"3", "ZeRO stage (0-3)">,
    Option<"bucketCapMb", "bucket-cap-mb", "double", /*default=*/"25",
           "Gradient all-reduce bucket size in MiB (stages 0 and 1)">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true",
           "Stage 3: free gathered parameters after forward and gather again "
           "in backward">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def LowerCollectives : Pass<"shardc-lower-collectives", "mlir::ModuleOp"> {
  let summary = "Lower mesh collectives to start/wait ops over flat buffers";
  let description = [{
    `mesh.all_gather`, `mesh.reduce_scatter` and `mesh.all_reduce` become a
    `shardc.*Start` op and a `shardc.CollectiveWait`; `mesh.all_slice`
    becomes the local `shardc.ShardSlice`.

    Before: `%1 = mesh.all_gather %0 on @world mesh_axes = [0] gather_axis = 0 : tensor<3xf32> -> tensor<6xf32>`
    After:
    ```mlir
    %p = shardc.AllGatherStart %0 {world_size = 2 : i64} : tensor<3xf32> -> tensor<6xf32>
    %1 = shardc.CollectiveWait %p : tensor<6xf32>
    ```
  }];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def ScheduleCollectives : Pass<"shardc-schedule-collectives", "mlir::ModuleOp"> {
  let summary = "Place collective starts and waits to overlap computation";
  let description = [{
    Sinks every `shardc.CollectiveWait` to the first use of its result and
    prefetches ZeRO-3 parameter all-gathers (forward prefetch, backward
    prefetch pre/post/none, at most two gathers in flight with
    limit-all-gathers).

    Before: `%p = shardc.AllGatherStart %u ...` right before its wait and use.
    After (forward-prefetch): the start of unit K+1 sits right after the wait
    of unit K, before unit K's computation.
  }];
  let options = [
    Option<"backwardPrefetch", "backward-prefetch", "std::string",
           /*default=*/"\"pre\"", "pre, post or none">,
    Option<"forwardPrefetch", "forward-prefetch", "bool", /*default=*/"false",
           "Prefetch the next unit's parameters in forward">,
    Option<"limitAllGathers", "limit-all-gathers", "bool", /*default=*/"true",
           "At most two parameter all-gathers in flight">,
  ];
}

#endif // SHARDC_PASSES_TD
