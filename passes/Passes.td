//===- Passes.td - Shard compiler passes -------------------*- tablegen -*-===//
#ifndef SHARDC_PASSES_TD
#define SHARDC_PASSES_TD

include "mlir/Pass/PassBase.td"

/// A numeric option whose values must lie in `range`, an interval such as
/// "[0, inf)" or "(0, 1048576]" ("inf" for no bound; a floating-point value
/// must also be finite). gen_pipeline_options.py makes pipeline options
/// (and so shardc's flags) refuse a value outside it as they parse it, and
/// gives the pass `checkOptions()` for the values it is given directly
/// (passes/OptionRange.h). The default may lie outside the range: it then
/// means "not given".
class BoundedOption<string varName, string arg, string valueType,
                    string default, string desc, string rangeText,
                    string additionalFlags = "">
    : Option<varName, arg, valueType, default, desc, additionalFlags> {
  string range = rangeText;
}

def FoldConstants : Pass<"shardc-fold-constants", "mlir::func::FuncOp"> {
  let summary = "Evaluate ops whose operands are all constants";
  let description = [{
    Replaces every shardc op whose operands are all `shardc.Constant` by
    constants holding its results. Ops with a folder of their own (Shape,
    Reshape) use it; every other op is evaluated by the runtime's CPU kernel
    for it, so folding and execution agree bit for bit. Results larger than
    `fold-limit` bytes (operands too: folding materializes them) are left to
    run at execution time.

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
  let options = [
    BoundedOption<"foldLimit", "fold-limit", "int64_t", /*default=*/"16777216",
           "Largest tensor, in bytes, that constant folding creates or reads "
           "(default 16 MiB); larger ones are computed at execution time",
           "[1024, 1099511627776]">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

def RaiseLayerNorm : Pass<"shardc-raise-layer-norm", "mlir::func::FuncOp"> {
  let summary = "Turn layer norm written out as its formula into one op";
  let description = [{
    PyTorch exports `nn.LayerNorm` below opset 17 as its formula over the
    trailing axes: a mean, a subtraction, a square, a second mean, an
    epsilon, a square root and a division, then the affine scale and bias.
    Each such chain whose intermediate values nothing else reads becomes one
    `shardc.LayerNormalization` (a ones scale when the chain has none), so
    that forward reads the input once per pass and backward is one
    `LayerNormGrad` instead of a dozen elementwise ops and reductions.

    Before:
    ```mlir
    %m = shardc.ReduceMean %x {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = shardc.Sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %p = shardc.Pow %d, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %v = shardc.ReduceMean %p {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
    %e = shardc.Add %v, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
    %s = shardc.Sqrt %e : tensor<4x1xf32>
    %n = shardc.Div %d, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %y = shardc.Mul %n, %gamma : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %z = shardc.Add %y, %beta : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
    After:
    ```mlir
    %z, %mean, %inv_std_dev = shardc.LayerNormalization %x, %gamma, %beta
        {axis = 1 : i64, epsilon = 9.99999974E-6 : f32}
        : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
        -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
    ```
  }];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

def LossScale : Pass<"shardc-loss-scale", "mlir::ModuleOp"> {
  let summary = "Scale the loss before backward (GradScaler), sharded";
  let description = [{
    Loss scaling for float16 training (torch.cuda.amp.GradScaler, FairScale's
    ShardedGradScaler, DeepSpeed's dynamic loss scale), the forward half:
    on the model after shardc-mixed-precision and before autodiff, adds the
    loss scale as a float32 `shardc.state` argument, which starts at the
    initial scale (`shardc.state_init`) and carries how it changes
    (`shardc.loss_scale = #shardc.loss_scaling<...>`), and its growth
    tracker (`shardc.loss_scale_tracker`, starting at 0). Autodiff seeds the
    loss gradient with the scale instead of 1, so every gradient comes out
    multiplied by it; float16 gradients that would underflow to zero keep
    their digits. shardc-unscale-gradients, after the ZeRO passes, finds
    non-finite gradients, skips the update on every rank, unscales and
    updates the scale.

    `loss-scale=auto` (the default) scales dynamically when
    `param-dtype=fp16` and not otherwise; `dynamic` is GradScaler's (initial
    scale `init-loss-scale`, 65536; `loss-scale-backoff-factor` 0.5 after a
    step with an inf or NaN gradient; `loss-scale-growth-factor` 2 after
    `loss-scale-growth-interval` 2000 finite steps in a row); a number is a
    static scale (steps with non-finite gradients are still skipped).

    Before: `func.func @main(%x: tensor<2x3xf16> {shardc.input = "x"}, ...)`
    returning the loss.
    After (`loss-scale=dynamic`): two more arguments,
    ```mlir
    %scale: tensor<f32> {shardc.loss_scale = #shardc.loss_scaling<growth_factor = 2.000000e+00,
                             backoff_factor = 5.000000e-01, growth_interval = 2000>,
                         shardc.state = "loss_scale", shardc.state_init = 6.553600e+04 : f64},
    %tracker: tensor<f32> {shardc.loss_scale_tracker, shardc.state = "loss_scale.growth_tracker"}
    ```
  }];
  let options = [
    Option<"lossScale", "loss-scale", "::shardc::LossScaleSpec",
           /*default=*/"::shardc::LossScaleSpec{}",
           "Loss scaling: dynamic (GradScaler's), a static VALUE, none, or "
           "auto (default: dynamic with param-dtype fp16, else none)">,
    BoundedOption<"initLossScale", "init-loss-scale", "double",
           /*default=*/"0",
           "The dynamic loss scale's first value (GradScaler's init_scale; "
           "default 65536)", "(0, inf)", "::llvm::cl::value_desc(\"S\")">,
    BoundedOption<"growthFactor", "loss-scale-growth-factor", "double",
           /*default=*/"2.0",
           "What a dynamic loss scale is multiplied by after "
           "loss-scale-growth-interval finite steps (default 2)", "(1, inf)">,
    BoundedOption<"backoffFactor", "loss-scale-backoff-factor", "double",
           /*default=*/"0.5",
           "What a dynamic loss scale is multiplied by after a step with an "
           "inf or NaN gradient (default 0.5)", "(0, 1)">,
    BoundedOption<"growthInterval", "loss-scale-growth-interval", "int64_t",
           /*default=*/"2000",
           "Finite steps in a row before a dynamic loss scale grows "
           "(default 2000)", "[1, 16777216]">,
  ];
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
    statistics and that `freeze`/`trainable` (regular expressions searched
    in the parameter's name) leave in training; a module buffer the
    exporter recorded as such (`shardc.buffer`) is trained only when a
    `trainable` pattern names it. Every parameter gets its
    role, `shardc.role = #shardc.param_role<trained|frozen|no_gradient|
    statistic>`; a pattern that matches no parameter is an error. A
    parameter used twice (tied weights) accumulates both gradients. The
    loss's gradient starts at 1, or at the loss scale when an argument
    carries `shardc.loss_scale` (shardc-loss-scale). Ops that need kernels
    of their own for their gradient emit
    gradient ops (ReluGrad, ConvGradInput, LayerNormGrad, ...); the others
    are differentiated into forward ops. MaxPool gains its indices result.
    Each op's gradient rule is its `DifferentiableOpInterface` model, one
    file per op family in `ir/gradients/` (docs/autodiff.md); an op that a
    gradient reaches without one is an error.

    Before:
    ```mlir
    func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                    %w: tensor<2xf32> {shardc.param = "w"}) -> tensor<f32>
        attributes {shardc.output_names = ["loss"]} {
      %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
      return %1 : tensor<f32>
    }
    ```
    After: the function also returns `%dw = %x * expand(1.0)` with
    `{shardc.grad_of = "w"}`, and `%w` has
    `shardc.role = #shardc.param_role<trained>` (with `freeze=^w$`:
    `#shardc.param_role<frozen>` and no gradient).
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "The output to differentiate (default: the only scalar float output)">,
    ListOption<"freeze", "freeze", "std::string",
           "Do not train the parameters whose names match REGEX (searched "
           "anywhere in the name, e.g. '^encoder[.]' or 'mask$'; repeatable)",
           "::llvm::cl::value_desc(\"REGEX\")">,
    ListOption<"trainable", "trainable", "std::string",
           "Train only the parameters whose names match REGEX (and no "
           "--freeze; repeatable); also trains a module buffer that PyTorch's "
           "dynamo exporter marked as one, which is frozen otherwise",
           "::llvm::cl::value_desc(\"REGEX\")">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

def MixedPrecision : Pass<"shardc-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Compute forward and backward in bfloat16 or float16";
  let description = [{
    FSDP's `MixedPrecision` (FairScale's `mixed_precision`/`compute_dtype`)
    on the imported forward model, before autodiff. The float32 parameters
    stay the master weights (the optimizer and its state stay float32); each
    float parameter and float graph input is cast to `param-dtype` before its
    first use, and every op that computes on the model's data (a value
    derived from a parameter or a float input) computes in `param-dtype`: its
    float32 results take that type, and a float32 operand that does not carry
    model data (a constant, a mask or positions computed from shapes) is
    rounded to it where it meets the data. Kernels accumulate reductions,
    dot products, softmax sums and normalization statistics in float32 and
    round once on output (docs/ops.md).

    Ops that compute in float32 (the upcast list, as PyTorch autocast's fp32
    list): SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and
    LogSoftmax take their data operands cast up to float32 and return
    float32; the step's float outputs (the loss, logits) are returned in
    float32. BatchNormalization's running statistics are buffers: they stay
    in `buffer-dtype` (default float32, FSDP's default of leaving buffers
    alone) and are stored rounded to it.

    Autodiff then differentiates through the casts: the gradients come out
    in `param-dtype` and are cast up to float32 for the optimizer. The
    function records `shardc.param_dtype` and `shardc.reduce_dtype`: the ZeRO
    passes reduce gradients in the reduce dtype (`reduce-dtype=fp32` is
    FairScale's `fp32_reduce_scatter`) and, at stage 3, cast a unit's
    parameter shard to `param-dtype` before the all-gather, halving its bytes
    (FairScale's `broadcast_fp16`, FSDP's behaviour). With every dtype fp32
    the pass changes nothing.

    Before:
    ```mlir
    func.func @main(%x: tensor<2x3xf32> {shardc.input = "x"},
                    %w: tensor<3x4xf32> {shardc.param = "w"}, %y: tensor<2xi64> {shardc.input = "y"}) -> tensor<f32> {
      %h = shardc.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      %l = shardc.SoftmaxCrossEntropyLoss %h, %y {reduction = #shardc.reduction<mean>} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    After (`param-dtype=bf16`):
    ```mlir
      %xb = shardc.Cast %x : tensor<2x3xf32> -> tensor<2x3xbf16>
      %wb = shardc.Cast %w : tensor<3x4xf32> -> tensor<3x4xbf16>
      %h = shardc.MatMul %xb, %wb : (tensor<2x3xbf16>, tensor<3x4xbf16>) -> tensor<2x4xbf16>
      %hf = shardc.Cast %h : tensor<2x4xbf16> -> tensor<2x4xf32>
      %l = shardc.SoftmaxCrossEntropyLoss %hf, %y ... -> tensor<f32>
    ```
    with `shardc.param_dtype = bf16, shardc.reduce_dtype = bf16` on @main.
  }];
  let options = [
    Option<"paramDtype", "param-dtype", "::shardc::Precision",
           /*default=*/"::shardc::Precision::Fp32",
           "The element type forward and backward compute in; parameters, "
           "optimizer state and the update stay float32 (default fp32)",
           [{::llvm::cl::values(
             clEnumValN(::shardc::Precision::Fp32, "fp32", "float32 throughout"),
             clEnumValN(::shardc::Precision::Bf16, "bf16", "bfloat16 compute"),
             clEnumValN(::shardc::Precision::Fp16, "fp16",
                        "float16 compute, with dynamic loss scaling"))}]>,
    Option<"reduceDtype", "reduce-dtype", "::shardc::Precision",
           /*default=*/"::shardc::Precision::Param",
           "The element type gradients are reduced in across ranks (default: "
           "param-dtype's; fp32 is FairScale's fp32_reduce_scatter)",
           [{::llvm::cl::values(
             clEnumValN(::shardc::Precision::Param, "param", "param-dtype's"),
             clEnumValN(::shardc::Precision::Fp32, "fp32", "float32"),
             clEnumValN(::shardc::Precision::Bf16, "bf16", "bfloat16"),
             clEnumValN(::shardc::Precision::Fp16, "fp16", "float16"))}]>,
    Option<"bufferDtype", "buffer-dtype", "::shardc::Precision",
           /*default=*/"::shardc::Precision::Fp32",
           "The element type of buffers (BatchNorm running statistics), "
           "which are stored rounded to it (default fp32)",
           [{::llvm::cl::values(
             clEnumValN(::shardc::Precision::Fp32, "fp32", "float32"),
             clEnumValN(::shardc::Precision::Bf16, "bf16", "bfloat16"),
             clEnumValN(::shardc::Precision::Fp16, "fp16", "float16"),
             clEnumValN(::shardc::Precision::Param, "param", "param-dtype's"))}]>,
  ];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

def Recompute : Pass<"shardc-recompute", "mlir::ModuleOp"> {
  let summary = "Recompute activations in backward instead of keeping them";
  let description = [{
    Activation checkpointing (FairScale's `checkpoint_wrapper`, FSDP's
    activation checkpointing, DeepSpeed's activation checkpointing) on the
    step autodiff produced. The forward ops are cut into one segment per
    layer: an op belongs to the layer of the parameters it reads (the
    parameter name up to its first numeric component, `blocks.3`, else its
    module, `fc1`: the default wrap units), else to the latest segment among
    the producers of its operands; a parameter-free op computed from one value
    alone that crosses into a later segment anyway (a LayerNorm an exporter
    decomposed, normalizing the residual stream) joins the segment that reads
    it, so that only the value crosses. In each selected segment (every one with
    `recompute`, those whose layer name matches a `recompute-units` pattern
    otherwise) the values backward reads are no longer kept from forward: the
    segment's ops that produce them are cloned before the first backward op
    that reads one, and backward reads the clones. Only the segment's inputs
    and outputs (which the neighbouring segments' backward reads anyway),
    parameters and constants stay alive from forward to backward. All ops are
    pure and deterministic (a Dropout mask is a function of seed, step, site
    and element), so the step computes the same values bit for bit. Clones
    carry `shardc.backward` (at ZeRO-3 the segment's parameters are gathered
    for them like for the rest of backward) and `shardc.recompute` (the plan
    marks them and the trace shows them as "recompute"). A training-mode
    BatchNormalization's clone computes its running statistics again, but
    only the forward's update them.

    Before (recompute):
    ```mlir
    %h = shardc.Gemm %x, %w1 ...            // layer fc1
    %r = shardc.Relu %h ...
    %y = shardc.Gemm %r, %w2 ...            // layer fc2
    ...
    %dr = shardc.Gemm %dy, %w2 ... {shardc.backward}
    %dh = shardc.ReluGrad %dr, %r {shardc.backward}
    ```
    After: `%r` lives only in forward; before `%dr`'s backward reader,
    `%h2 = shardc.Gemm %x, %w1 {shardc.backward, shardc.recompute}`,
    `%r2 = shardc.Relu %h2 {shardc.backward, shardc.recompute}`, and
    `shardc.ReluGrad %dr, %r2`.
  }];
  let options = [
    Option<"recompute", "recompute", "bool", /*default=*/"false",
           "Recompute every layer's activations in backward instead of "
           "keeping them from forward (activation checkpointing)">,
    ListOption<"recomputeUnits", "recompute-units", "std::string",
           "Recompute only the layers whose names match REGEX (searched in "
           "the layer name, e.g. 'blocks[.]'; repeatable; implies "
           "--recompute)",
           "::llvm::cl::value_desc(\"REGEX\")">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

def AccumulateGradients : Pass<"shardc-accumulate-gradients", "mlir::ModuleOp"> {
  let summary = "Accumulate gradients over K micro-batches per optimizer step";
  let description = [{
    Gradient accumulation (DDP's `no_sync`, DeepSpeed's
    `gradient_accumulation_steps`, Lightning's `accumulate_grad_batches`) on
    the step autodiff produced: every graph input grows from B to K * B rows,
    and the forward and backward ops are repeated for each micro-batch m on
    rows [m * B, (m + 1) * B). Each repetition's gradients join a running sum
    as soon as they exist, so one micro-batch's activations are live at a
    time; the step returns the mean over the micro-batches of the loss, of
    float scalar outputs and of every gradient (integer scalar outputs are
    summed; other outputs are the last micro-batch's). The optimizer then
    steps once; at stages 0-1 the ZeRO passes reduce the accumulated
    gradients once per step, at stages 2-3 each micro-batch's as it finishes
    (shardc-reduce-scatter-gradients; each copy's ops carry
    `shardc.micro_batch = m`, and ZeRO-3 gathers parameters per micro-batch).
    Training-mode BatchNormalization's running statistics pass from one
    micro-batch to the next, as PyTorch updates them on every forward, and
    Dropout's copy m draws as rank m * N + r of N * K (`micro_batch`). The
    function records `shardc.grad_accum = K`; the plan's training record
    carries it, and shardrun feeds rank r's micro-batches m = 0..K-1 with
    chunk m * N + r of the step's N * K * B samples.

    Before (B = 4): `%x: tensor<4x3xf32> {shardc.input = "x"}`, the loss `%l`
    and a gradient `%g` returned.
    After (grad-accum=2):
    ```mlir
    %x: tensor<8x3xf32> {shardc.input = "x"}
    %x0 = shardc.Slice %x {starts = array<i64: 0, 0>, ...} : tensor<8x3xf32> -> tensor<4x3xf32>
    %x1 = shardc.Slice %x {starts = array<i64: 4, 0>, ...} : tensor<8x3xf32> -> tensor<4x3xf32>
    ... forward and backward on %x0 (%l0, %g0), then on %x1 (%l1, %g1) ...
    %gs = shardc.Add %g0, %g1
    %g = shardc.Mul %gs, 0.5      // the mean, and likewise the loss
    ```
  }];
  let options = [
    BoundedOption<"gradAccum", "grad-accum", "int64_t", /*default=*/"1",
           "Micro-batches per optimizer step: accumulate the gradients of K "
           "forward and backward passes, then step once (default 1)",
           "[1, 65536]", "::llvm::cl::value_desc(\"K\")">,
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
    PyTorch's SGD, Adam and AdamW exactly. With `lr-schedule`/`warmup-steps`
    the updates carry the schedule (LrScheduleAttr): their learning rate is
    a function of the step counter at run time, as torch.optim.lr_scheduler's
    LambdaLR computes it. BatchNormalization in training mode also updates
    its running statistics in place, with PyTorch's unbiased running
    variance.

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
    Option<"optimizer", "optimizer", "::shardc::OptimizerKind",
           /*default=*/"::shardc::OptimizerKind::Sgd",
           "The optimizer of the training step (default sgd)",
           [{::llvm::cl::values(
             clEnumValN(::shardc::OptimizerKind::Sgd, "sgd", "torch.optim.SGD"),
             clEnumValN(::shardc::OptimizerKind::Adam, "adam", "torch.optim.Adam"),
             clEnumValN(::shardc::OptimizerKind::AdamW, "adamw", "torch.optim.AdamW"))}]>,
    BoundedOption<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate (default 1e-3)",
           "[0, inf)">,
    BoundedOption<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum (default 0)",
           "[0, inf)">,
    BoundedOption<"dampening", "dampening", "double", /*default=*/"0.0", "SGD dampening (default 0)",
           "(-inf, inf)">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "SGD Nesterov momentum">,
    BoundedOption<"weightDecay", "weight-decay", "double", /*default=*/"-1",
           "Weight decay (default: 0 for sgd and adam, 0.01 for adamw)", "[0, inf)">,
    BoundedOption<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1 (default 0.9)",
           "[0, 1)">,
    BoundedOption<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2 (default 0.999)",
           "[0, 1)">,
    BoundedOption<"eps", "eps", "double", /*default=*/"1e-8", "Adam epsilon (default 1e-8)",
           "[0, inf)">,
    Option<"lrSchedule", "lr-schedule", "::shardc::LrSchedule",
           /*default=*/"::shardc::LrSchedule::Constant",
           "How the learning rate changes over the optimizer steps after warmup "
           "(default constant)",
           [{::llvm::cl::values(
             clEnumValN(::shardc::LrSchedule::Constant, "constant", "lr throughout"),
             clEnumValN(::shardc::LrSchedule::Linear, "linear",
                        "linear decay to min-lr-ratio * lr at decay-steps"),
             clEnumValN(::shardc::LrSchedule::Cosine, "cosine",
                        "cosine decay to min-lr-ratio * lr at decay-steps"))}]>,
    BoundedOption<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Optimizer steps of linear warmup: step s (from 0) uses lr * (s + 1) / W "
           "(default 0)", "[0, inf)">,
    BoundedOption<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "The optimizer step at which a linear or cosine schedule reaches "
           "min-lr-ratio * lr, counted from step 0 (warmup included)", "[0, inf)">,
    BoundedOption<"minLrRatio", "min-lr-ratio", "double", /*default=*/"0.0",
           "The learning rate a linear or cosine schedule decays to, as a fraction "
           "of lr (default 0)", "[0, 1]">,
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
    A tied parameter belongs to one unit. Frozen parameters
    (`shardc.role = #shardc.param_role<frozen>`) are grouped the same way
    into units of their own, numbered after the trained ones, so that
    ZeRO-3 shards them too; no unit mixes element types.

    Before: `%w: tensor<4x4xf32> {shardc.param = "fc1.weight"}`
    After:  `%w: tensor<4x4xf32> {shardc.param = "fc1.weight", shardc.unit = 0 : i64}`
  }];
  let options = [
    BoundedOption<"minNumParams", "min-num-params", "int64_t", /*default=*/"0",
           "Merge parameters into units of at least this many elements "
           "(0: one unit per layer)", "[0, inf)">,
  ];
}

def ZeroConfig : Pass<"shardc-zero-config", "mlir::ModuleOp"> {
  let summary = "Configure a training step for data parallelism (ZeRO)";
  let description = [{
    Records `shardc.world_size` and `shardc.zero_stage` on @main, creates
    the 1-d mesh `@world` every collective runs on, checks that the optimizer
    updates follow the backward pass, and marks parameter gradients as
    gradients for memory planning (`shardc.category`; an op that also yields
    activation gradients, like BatchNormGrad, lists its parameter-gradient
    results in `shardc.grad_results`). The `shardc-zero` pipeline runs it, then
    per stage: 0: bucket-gradients; 1-3: partition-optimizer,
    reduce-scatter-gradients (at stage 1 with accumulate-unsharded: whole
    gradients over micro-batches, DeepSpeed's ZeRO-1), shard-parameters.
    Between steps the parameters are shards at stages 1-3;
    stages 1 and 2 record `shardc.reshard_after_forward = 1`, so that each
    unit, gathered in forward, stays whole through its last use in backward
    (FSDP's SHARD_GRAD_OP).

    With `hybrid-shard=G` (FSDP's HYBRID_SHARD and _HYBRID_SHARD_ZERO2,
    DeepSpeed's hpZ), G < N dividing N: the mesh is 2-d, N/G groups x G
    ranks, and `shardc.shard_group = G` tells the stage passes to spread
    each shard along axis 1 (within a group of G consecutive ranks), gather
    and reduce-scatter there, and all-reduce the gradient shards along axis 0
    (across the groups, which hold replicas of the same shards).

    With `reshard-after-forward=G` at stage 3 (FSDP2's integer form, ZeRO++'s
    hpZ), G dividing the S ranks of a shard group: the shard group's axis is
    split in two, S/G x G, and `shardc.reshard_after_forward = G` tells
    shard-parameters to keep each unit's gathered parameters, after forward,
    as a slice along the last axis (G consecutive ranks), which backward
    gathers along it. `false` records 1 (keep everything); `true`, the
    default, records nothing (backward gathers from the shards). The option
    is for stage 3 only: stages 1 and 2 always record 1.

    After: `mesh.mesh @world(shape = 4)` and
    `func.func @main(...) attributes {shardc.world_size = 4 : i64, shardc.zero_stage = 3 : i64}`;
    with hybrid-shard=2, `mesh.mesh @world(shape = 2x2)` and
    `shardc.shard_group = 2 : i64`; with world-size=8 hybrid-shard=4
    reshard-after-forward=2, `mesh.mesh @world(shape = 2x2x2)`: shards along
    axes 1 and 2, backward gathers along axis 2.
  }];
  let options = [
    BoundedOption<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of ranks the step runs on (default 1, at most 2^20)",
           "[1, 1048576]">,
    BoundedOption<"stage", "zero-stage", "int64_t", /*default=*/"3",
           "0: DDP (all-reduce), 1: shard optimizer state (OSS, ZeRO-1; "
           "gradients reduce-scattered once per step), 2: also gradients "
           "every micro-batch (SHARD_GRAD_OP), 3: also free the parameters "
           "after forward (FULL_SHARD); default 3",
           "[0, 3]">,
    BoundedOption<"hybridShard", "hybrid-shard", "int64_t", /*default=*/"0",
           "Hybrid sharding (HYBRID_SHARD, hpZ): shard within groups of this "
           "many consecutive ranks (e.g. one node) and replicate across the "
           "groups, which all-reduce the gradient shards; must divide the "
           "world size; 0 (default): shard over every rank",
           "[0, 1048576]">,
    Option<"reshardAfterForward", "reshard-after-forward",
           "::shardc::ReshardSpec", /*default=*/"::shardc::ReshardSpec{}",
           "Stage 3, what a unit keeps from forward for backward: true (default) "
           "frees the gathered parameters and gathers again from the shards; "
           "false keeps them; a group size G (FSDP2's integer form, e.g. the "
           "ranks per node) keeps a copy sharded over G ranks, gathered within "
           "them in backward; G must divide the shard group">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def BucketGradients : Pass<"shardc-bucket-gradients", "mlir::ModuleOp"> {
  let summary = "Average gradients over ranks with bucketed all-reduces (DDP)";
  let description = [{
    Stage 0 (DDP): gradients, in the order backward produces them, are
    packed into flat buckets of at most bucket-cap-mb; each bucket is summed
    with `mesh.all_reduce` as soon as its last gradient exists; every
    gradient is sliced back out and averaged (times 1/N) where its update
    needs it. The cost model (cost-model; plan/CostModel.h) chooses where
    buckets end: timing the step's ops in order says when each gradient
    exists, all-reduces run one at a time, and the split whose last
    all-reduce finishes first wins (the fewest buckets among equals).

    Before: `shardc.SGDUpdate %w, %g, ...`
    After:
    ```mlir
    %b = shardc.Concat %g_flat, %h_flat : ... -> tensor<20xf32>
    %s = mesh.all_reduce %b on @world mesh_axes = [0] : tensor<20xf32> -> tensor<20xf32>
    %g2 = shardc.Mul (shardc.Slice %s ...), 1/N
    shardc.SGDUpdate %w, %g2, ...
    ```
  }];
  let options = [
    BoundedOption<"bucketCapMb", "bucket-cap-mb", "double", /*default=*/"25",
           "Largest gradient all-reduce bucket in MiB (stage 0; default "
           "25, at most 2^20); within it the cost model sizes the buckets",
           "(0, 1048576]">,
    Option<"costModel", "cost-model", "std::string", /*default=*/"\"\"",
           "Override the cost model's machine (defaults: one rank of the CPU "
           "backend), which sizes gradient buckets and judges --print-cost "
           "and --memory-budget: KEY=VALUE,... with keys flops (per second, "
           "matrix products), memory (bytes per second, other kernels), "
           "kernel (seconds per kernel), link (bytes per second a rank "
           "sends), link-latency (seconds per step of a collective's ring or "
           "tree), host-link and host-link-latency (a host's network bandwidth, all "
           "its interfaces, and latency), "
           "host-ranks (ranks per host), host-slots (ranks a host runs at "
           "full speed), link-cpu (bytes per second of collective sends "
           "that take the ranks' kernel time on a full host; 0: none), "
           "tier (bytes per second to and from the offload "
           "tier), tier-latency. shardc's --hardware FILE sets them from a "
           "file">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def PartitionOptimizer : Pass<"shardc-partition-optimizer", "mlir::ModuleOp"> {
  let summary = "Shard optimizer state: each rank updates its shard of each unit";
  let description = [{
    The base of stages 1-3 (FairScale OSS's sharded optimizer): each wrap
    unit's parameters, gradients and optimizer state are flattened and padded
    to a multiple of the world size; a rank updates only its shard
    (`mesh.all_slice`) with shard-sized optimizer state, and `mesh.all_gather`
    rebuilds the full parameters from the updated shards. The shardc-zero
    pipeline then runs shard-parameters, which keeps the parameters as shards
    between steps and gathers them where the next step uses them.

    Before (a 5-element parameter, world size 2, Adam):
    `%p2, %m2, %v2 = shardc.AdamUpdate %p, %g, %m, %v, %step`
    After:
    ```mlir
    %gs = mesh.all_slice %g_flat_padded ... : tensor<6xf32> -> tensor<3xf32>
    %ps = mesh.all_slice %p_flat_padded ... : tensor<6xf32> -> tensor<3xf32>
    %ps2, %ms2, %vs2 = shardc.AdamUpdate %ps, %gs, %ms, %vs, %step
    %pf = mesh.all_gather %ps2 ... : tensor<3xf32> -> tensor<6xf32>
    ```
    with `%ms`, `%vs` new `tensor<3xf32>` arguments (`shardc.state = "unit0.exp_avg"`).
  }];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def ReduceScatterGradients
    : Pass<"shardc-reduce-scatter-gradients", "mlir::ModuleOp"> {
  let summary = "Gradient shards by reduce-scatter as soon as a unit is complete";
  let description = [{
    Stages 1-3: the gradient shard partition-optimizer sliced from a
    unit's full gradient becomes a `mesh.reduce_scatter` of the unit's
    flattened, padded local gradient, issued right after the unit's last
    gradient is produced, and averaged over ranks. A rank keeps only its
    gradient shard.

    With gradient accumulation (shardc-accumulate-gradients), each
    micro-batch's gradients of the unit are reduce-scattered as soon as that
    micro-batch's backward produced them, and each shard joins a running sum
    when the next micro-batch's gradients are ready: memory stays sharded (the
    sum and at most two shards), at K reduce-scatters per unit and step.
    With `accumulate-unsharded` the gradients' running sums are kept whole
    and reduce-scattered once per step instead (1/K of the bytes, one
    unsharded gradient per rank): what the shardc-zero pipeline does at
    stage 1 (a rank reads only its shard of the summed gradients, so it
    receives only that shard: ZeRO's communication volume, as DP's, not an
    all-reduce).

    Before: `%gs = mesh.all_slice %g_flat ... {shardc.grad_shard_of = "unit0"}` (before the update)
    After (right after the unit's last gradient):
    ```mlir
    %r = mesh.reduce_scatter %g_flat on @world mesh_axes = [0] scatter_axis = 0 : tensor<6xf32> -> tensor<3xf32>
    %gs = shardc.Mul %r, 1/N
    ```
  }];
  let options = [
    Option<"accumulateUnsharded", "accumulate-unsharded", "bool",
           /*default=*/"false",
           "Stages 2, 3 with grad-accum: accumulate whole local gradients and "
           "reduce-scatter them once per step (fewer bytes, more memory) instead "
           "of reduce-scattering every micro-batch (stage 1 always does)">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def ShardParameters : Pass<"shardc-shard-parameters", "mlir::ModuleOp"> {
  let summary = "Parameters as flat shards, all-gathered per use window";
  let description = [{
    Each wrap unit becomes one `shardc.param_shard` argument (this rank's
    shard, with the layout in `shardc.flat_params` / `shardc.flat_types`)
    updated in place; before each use window (forward, and again in backward
    with reshard-after-forward) the unit is gathered with `mesh.all_gather`
    and its parameters are views of the gathered buffer. How the backward
    window gathers follows zero-config's `shardc.reshard_after_forward`:
    absent, from the shard; 1, not at all (one window for the step); G, from
    a `mesh.all_slice` of the forward's gathered buffer along the mesh's
    last axis (taken after the forward's last use, kept until backward),
    gathered along that axis: within G ranks. A tied parameter is
    gathered once per window. A unit of frozen parameters becomes a
    `shardc.param_shard = "frozenK"` argument with the frozen role, gathered
    the same way and never updated.

    At stages 1 and 2 the plan keeps such a unit whole (plan.proto's
    FlatUnit.whole): every rank holds the unit's whole flat buffer, the
    shard argument is this rank's block of it, and the one gather of the
    step fills the buffer around the block in place. The update writes the
    block in place after the last read of the gathered parameters (see
    schedule-collectives), so the shard costs no memory of its own: the
    parameters take the unit's bytes once, as at stage 0.

    Before: `%ps = mesh.all_slice %p_flat_padded` feeding the update, and the
    parameters `%w`, `%b` used by forward and backward ops.
    After:
    ```mlir
    func.func @main(..., %u0: tensor<3xf32> {shardc.param_shard = "unit0", ...})
    %f = mesh.all_gather %u0 ... : tensor<3xf32> -> tensor<6xf32>   // before the first forward use
    %w = shardc.Reshape (shardc.Slice %f ...)                       // views
    ...
    %f2 = mesh.all_gather %u0 ...                                   // before the first backward use
    %u0_new, ... = shardc.AdamUpdate %u0, ...                       // in place
    ```
    With `shardc.reshard_after_forward = 2` on a 2x2 mesh:
    ```mlir
    %f = mesh.all_gather %u0 on @world mesh_axes = [0, 1] ... : tensor<3xf32> -> tensor<12xf32>
    ...                                                             // forward uses
    %k = mesh.all_slice %f on @world mesh_axes = [1] ... : tensor<12xf32> -> tensor<6xf32>
    %f2 = mesh.all_gather %k on @world mesh_axes = [1] ... : tensor<6xf32> -> tensor<12xf32>
    ```
  }];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def Offload : Pass<"shardc-offload", "mlir::ModuleOp"> {
  let summary = "Keep optimizer state or parameters in the offload tier";
  let description = [{
    FSDP's CPUOffload, DeepSpeed's offload_optimizer / offload_param,
    ZeRO-Infinity's NVMe tier: the step's optimizer state (`offload=optimizer`)
    or parameters (`offload=params`; at stage 3 their shards) stay in the
    offload tier, outside the rank's memory: a file in `shardrun
    --offload-dir` on the CPU backend. Each such argument gets
    `shardc.offload`; every op that reads it reads instead a copy made by a
    `shardc.OffloadReadStart` / `shardc.CollectiveWait` pair right before it,
    and its in-place update (the returned new value) is written back by a
    `shardc.OffloadWriteStart` / `shardc.CollectiveWait` pair right after
    its producer, which plan lowering makes write into the argument's tier
    buffer. With `offload=grads`, the gradient each update reads is written
    to the tier as soon as it is complete (reduced) and read back for its
    update. The optimizer update thus runs on one unit's copy at a time,
    never on a full copy of the state. `shardc-schedule-collectives` then
    reads ahead and writes behind. The
    counters of the step and of loss scaling stay in memory (a few bytes).

    Before (`offload=optimizer`):
    ```mlir
    func.func @main(..., %m: tensor<4xf32> {shardc.state = "unit0.exp_avg"}, ...)
    %p2, %m2, %v2 = shardc.AdamUpdate %p, %g, %m, %v, %step ...
    return ..., %m2, ...
    ```
    After:
    ```mlir
    func.func @main(..., %m: tensor<4xf32> {shardc.offload, shardc.state = "unit0.exp_avg"}, ...)
    %r = shardc.OffloadReadStart %m : tensor<4xf32> -> !shardc.pending<tensor<4xf32>>
    %mf = shardc.CollectiveWait %r : tensor<4xf32>
    %p2, %m2, %v2 = shardc.AdamUpdate %p, %g, %mf, %vf, %step ...
    %w = shardc.OffloadWriteStart %m2 : tensor<4xf32> -> !shardc.pending<tensor<4xf32>>
    %mt = shardc.CollectiveWait %w : tensor<4xf32>
    return ..., %mt, ...
    ```
  }];
  let options = [
    ListOption<"offload", "offload", "::shardc::OffloadKind",
           "Keep this in the offload tier (shardrun --offload-dir): optimizer "
           "(the optimizer state, FSDP CPUOffload / DeepSpeed "
           "offload_optimizer), params (the parameters, their shards at "
           "stage 3: offload_param) or grads (the gradients the updates read, "
           "from their reduction to their update); repeatable">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

def SyncBatchNorm : Pass<"shardc-sync-batchnorm", "mlir::ModuleOp"> {
  let summary = "Normalize training-mode BatchNorm over the global batch";
  let description = [{
    torch.nn.SyncBatchNorm for every training-mode BatchNormalization of the
    step (after autodiff and the ZeRO passes, on `shardc.world_size` ranks):
    the batch statistics are those of the global batch, all ranks' inputs
    together, instead of this rank's. Forward, each rank's per-channel sums
    of x and x^2, divided by the global count (`shardc.BatchNormStats`, f64),
    are summed by one `mesh.all_reduce`, giving the global mean and mean of
    squares that BatchNormalization normalizes with (its `moments`; the
    running variance is unbiased by the global count). Backward, the sums of
    the output gradient and of gradient * (x - mean) are all-reduced the same
    way (`shardc.BatchNormGradStats`) and give the input gradient; the scale
    and bias gradients stay this rank's sums, averaged with every other
    gradient. Every rank then holds the same running statistics. One forward
    and one backward all-reduce of 2 * C f64 values per BatchNorm (per
    micro-batch with gradient accumulation). Without `sync-batchnorm`, or on
    one rank (where the batch is the global batch), the pass does nothing.

    Before (two ranks, `x: tensor<4x3xf32>`):
    ```mlir
    %y, %rm, %rv = shardc.BatchNormalization %x, %s, %b, %m, %v {training_mode = true, ...}
    ...
    %dx, %ds, %db = shardc.BatchNormGrad %dy, %x, %s, %m, %v {training_mode = true, ...}
    ```
    After (`sync-batchnorm`):
    ```mlir
    %p = shardc.BatchNormStats %x {count = 8 : i64} : (tensor<4x3xf32>) -> tensor<6xf64>
    %mo = mesh.all_reduce %p on @world mesh_axes = [0] : tensor<6xf64> -> tensor<6xf64>
    %y, %rm, %rv = shardc.BatchNormalization %x, %s, %b, %m, %v moments %mo {batch_count = 8 : i64, ...}
    ...
    %q = shardc.BatchNormGradStats %dy, %x, %mo {count = 8 : i64}
    %gm = mesh.all_reduce %q on @world mesh_axes = [0] : tensor<6xf64> -> tensor<6xf64>
    %dx, %ds, %db = shardc.BatchNormGrad %dy, %x, %s, %m, %v moments %mo, %gm {...}
    ```
  }];
  let options = [
    Option<"syncBatchnorm", "sync-batchnorm", "bool", /*default=*/"false",
           "Training-mode BatchNorm statistics over the global batch, all "
           "ranks together (torch.nn.SyncBatchNorm)">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def UnscaleGradients : Pass<"shardc-unscale-gradients", "mlir::ModuleOp"> {
  let summary = "Skip non-finite steps, unscale and update the loss scale";
  let description = [{
    The optimizer half of loss scaling (shardc-loss-scale): torch.cuda.amp.
    GradScaler's `unscale_`, `step` and `update`, sharded as FairScale's
    ShardedGradScaler. Runs after the ZeRO passes, on the gradients the
    optimizer updates read (each rank's shards at stages 1-3), and before
    shardc-clip-gradients. Right after the last gradient exists, a chain of
    PartialNorm (l2, f64: finite exactly when every element is) sums the
    rank's gradients; at stages 1-3 with more than one rank one
    `mesh.all_reduce` sums the ranks' parts, so that a non-finite gradient
    on any rank skips the step on every rank. `shardc.LossScale` turns the
    sum and the scale into the skip flag, the unscale factor and the
    scale's next value. Every update takes `grad_scale` = the unscale
    factor and `skip`: a skipped step leaves parameters and optimizer state
    as they were, and the step counter that Adam's bias correction and
    SGD's first momentum step read is not incremented. A learning-rate
    schedule keeps counting every step (a state counter of its own,
    `lr_at`), as torch.optim.lr_scheduler stepped every iteration.
    Updates placed before the last gradient move after LossScale. The
    scale the step used and the skip flag become graph outputs
    (`shardc.loss_scale_output`, `shardc.skipped_output`): shardrun logs
    "loss_scale" every step and "skipped": true. Without a loss scale the
    pass does nothing.

    Before (stage 2, two ranks):
    ```mlir
    %s = shardc.Increment %step : tensor<f32>
    %g0 = ... : tensor<3xf32>    // unit0's gradient shard
    %w, %m, %v = shardc.AdamUpdate %p0, %g0, %m0, %v0, %s ...
    ```
    After:
    ```mlir
    %t0 = shardc.PartialNorm %g0 {norm_type = #shardc.norm_type<l2>} : (tensor<3xf32>) -> tensor<f64>
    %r = mesh.all_reduce (shardc.Reshape %t0 : tensor<1xf64>) on @world mesh_axes = [0] ...
    %skip, %unscale, %used, %scale1, %tracker1 = shardc.LossScale %total, %scale, %tracker {...}
    %s = shardc.Increment %step unless %skip : tensor<f32>
    %w, %m, %v = shardc.AdamUpdate %p0, %g0, %m0, %v0, %s scaled_by %unscale unless %skip ...
    return ..., %used, %skip, %scale1, %tracker1   // "loss_scale", "skipped" and the state
    ```
  }];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def ClipGradients : Pass<"shardc-clip-gradients", "mlir::ModuleOp"> {
  let summary = "Clip the gradients by their total norm across shards";
  let description = [{
    torch.nn.utils.clip_grad_norm_ (FSDP's `clip_grad_norm_`, FairScale
    OSS's `clip_grad_norm`) for the step's final gradients: runs after the
    ZeRO passes, on the gradients the optimizer updates read (averaged over
    ranks; at stages 1-3 this rank's shards, whose padding is zero). Each
    rank chains `shardc.PartialNorm` over its gradients right after the
    last one exists; at stages 1-3 with more than one rank the ranks' parts
    are combined (l2: `mesh.all_reduce` sum; inf: `mesh.all_gather` and a
    PartialNorm of the gathered parts, so that a NaN on any rank reaches
    every rank). `shardc.ClipCoefficient` finishes the norm and the factor
    `min(max-norm / (norm + 1e-6), 1)`, which every update takes as its
    `grad_scale`; updates that the ZeRO passes placed before the last
    gradient (each unit's right after its own) move after the coefficient,
    with the ops that use their results there. The norm becomes a graph output (`shardc.grad_norm` names
    it; the plan's training record points at it and shardrun logs it as
    "grad_norm" every step). Without `clip-grad-norm` the pass does nothing.

    Before (stage 2, two ranks):
    ```mlir
    %g0 = ... : tensor<3xf32>    // unit0's gradient shard
    %g1 = ... : tensor<5xf32>    // unit1's
    %w, %m, %v = shardc.AdamUpdate %p0, %g0, %m0, %v0, %step ...
    ```
    After (`clip-grad-norm=1.0`):
    ```mlir
    %s0 = shardc.PartialNorm %g0 {norm_type = #shardc.norm_type<l2>} : (tensor<3xf32>) -> tensor<f64>
    %s1 = shardc.PartialNorm %g1, %s0 {norm_type = #shardc.norm_type<l2>} : (tensor<5xf32>, tensor<f64>) -> tensor<f64>
    %r = mesh.all_reduce (shardc.Reshape %s1 : tensor<1xf64>) on @world mesh_axes = [0] ...
    %norm, %coef = shardc.ClipCoefficient (shardc.Reshape %r : tensor<f64>)
        {max_norm = 1.000000e+00 : f64, norm_type = #shardc.norm_type<l2>} : tensor<f64> -> tensor<f32>, tensor<f32>
    %w, %m, %v = shardc.AdamUpdate %p0, %g0, %m0, %v0, %step scaled_by %coef ...
    return ..., %norm   // shardc.grad_norm = "grad_norm"
    ```
  }];
  let options = [
    BoundedOption<"maxNorm", "clip-grad-norm", "double", /*default=*/"0",
           "Clip the gradients to this total norm (torch.nn.utils.clip_grad_norm_'s "
           "max_norm; default: no clipping)", "(0, inf)",
           "::llvm::cl::value_desc(\"MAX\")">,
    Option<"normType", "clip-norm-type", "::shardc::NormType",
           /*default=*/"::shardc::NormType::L2",
           "The norm clip-grad-norm bounds (default 2)",
           [{::llvm::cl::values(
             clEnumValN(::shardc::NormType::L2, "2", "the Euclidean norm"),
             clEnumValN(::shardc::NormType::Inf, "inf", "the largest absolute value"))}]>,
  ];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def LowerCollectives : Pass<"shardc-lower-collectives", "mlir::ModuleOp"> {
  let summary = "Lower mesh collectives to start/wait ops over flat buffers";
  let description = [{
    `mesh.all_gather`, `mesh.reduce_scatter` and `mesh.all_reduce` become a
    `shardc.*Start` op, which yields a `!shardc.pending` handle, and a
    `shardc.CollectiveWait` that consumes it; `mesh.all_slice` becomes the
    local `shardc.ShardSlice`. The mesh ops are pure values (CSE may merge
    two equal gathers); start and wait communicate, so from here on no
    generic transformation merges, drops or reorders a collective.

    Before: `%1 = mesh.all_gather %0 on @world mesh_axes = [0] gather_axis = 0 : tensor<3xf32> -> tensor<6xf32>`
    After:
    ```mlir
    %p = shardc.AllGatherStart %0 {world_size = 2 : i64} : tensor<3xf32> -> !shardc.pending<tensor<6xf32>>
    %1 = shardc.CollectiveWait %p : tensor<6xf32>
    ```
    On a mesh of several axes (hybrid sharding, `@world(shape = 2x2)`), a
    collective over some of them runs within the group of ranks along them:
    `mesh_axes = [1]` becomes `{mesh_axes = array<i64: 1>, world_size = 2 : i64}`.

    A slice of a 1-d `shardc.Concat` that nothing else reads (ZeRO-1 and 2's
    parameter and gradient shards of a unit) takes the concatenation's
    parts, so each rank copies its own chunk once, not the whole unit and
    then its chunk:

    Before:
    ```mlir
    %c = shardc.Concat %w, %b {axis = 0 : i64} : (tensor<6xf32>, tensor<2xf32>) -> tensor<8xf32>
    %s = mesh.all_slice %c on @world mesh_axes = [0] slice_axis = 0 : tensor<8xf32> -> tensor<4xf32>
    ```
    After: `%s = shardc.ShardSlice %w, %b {world_size = 2 : i64} : tensor<6xf32>, tensor<2xf32> -> tensor<4xf32>`
  }];
  let dependentDialects = ["::shardc::ShardcDialect", "::mlir::mesh::MeshDialect"];
}

def ScheduleCollectives : Pass<"shardc-schedule-collectives", "mlir::ModuleOp"> {
  let summary = "Place collective starts and waits to overlap computation";
  let description = [{
    Sinks every `shardc.CollectiveWait` to the first use of its result (a
    gradient reduction's wait at the latest before the next reduction's
    start but one: two in flight, holding at most twice the largest
    reduction's bytes) and
    prefetches parameter all-gathers (forward prefetch, backward
    prefetch pre/post/none; one unit ahead with limit-all-gathers, two
    without, not counting small units between: at most a quarter of the
    largest unit, together at most a quarter of it, so a final norm does
    not hold back the next large gather). A gather belongs to the phase of
    its first use: a unit kept whole from forward through backward (stages
    1 and 2) is prefetched in forward.

    Optimizer updates (early-updates) move to where their gradient has been
    reduced and their parameter last read, after the collective start that
    follows: the update of unit K runs while unit K+1's gradient is reduced.
    At stages 1 and 2 an update also follows every read of its unit's
    gathered parameters, since it writes its shard inside them.
    Updates that would run before the step's last gradient reduction starts
    move after it, to overlap it; at stages 1 and 2 only the latest of them,
    together as many elements as that reduction sends (each keeps its
    reduced gradient alive until it runs).

    Before: `%p = shardc.AllGatherStart %u ...` right before its wait and use.
    After (forward-prefetch): the start of unit K+1 sits right after the wait
    of unit K, before unit K's computation.

    Before (early-updates), every update after the last wait:
    ```mlir
    %g0 = shardc.CollectiveWait %r0 ...
    %r1 = shardc.ReduceScatterStart %full1 ...
    %g1 = shardc.CollectiveWait %r1 ...
    %w0n = shardc.SGDUpdate %w0, %g0 ...
    %w1n = shardc.SGDUpdate %w1, %g1 ...
    ```
    After (%r1 is the last reduction):
    ```mlir
    %g0 = shardc.CollectiveWait %r0 ...
    %r1 = shardc.ReduceScatterStart %full1 ...
    %w0n = shardc.SGDUpdate %w0, %g0 ...
    %g1 = shardc.CollectiveWait %r1 ...
    %w1n = shardc.SGDUpdate %w1, %g1 ...
    ```
  }];
  let options = [
    Option<"backwardPrefetch", "backward-prefetch", "::shardc::BackwardPrefetch",
           /*default=*/"::shardc::BackwardPrefetch::Pre",
           "When to prefetch the next unit's parameters in backward (default pre)",
           [{::llvm::cl::values(
             clEnumValN(::shardc::BackwardPrefetch::Pre, "pre",
                        "before the current unit's gradient computation (BACKWARD_PRE)"),
             clEnumValN(::shardc::BackwardPrefetch::Post, "post",
                        "after it (BACKWARD_POST)"),
             clEnumValN(::shardc::BackwardPrefetch::None, "none",
                        "gather each unit when it is used"))}]>,
    Option<"forwardPrefetch", "forward-prefetch", "bool", /*default=*/"true",
           "Prefetch the next unit's parameters in forward (default on; "
           "--forward-prefetch=false gathers each unit where forward "
           "first uses it)">,
    Option<"limitAllGathers", "limit-all-gathers", "bool", /*default=*/"true",
           "Prefetch parameter all-gathers one unit ahead (default on; "
           "off: two), not counting small units between">,
    Option<"earlyUpdates", "early-updates", "bool", /*default=*/"true",
           "Run each optimizer update as soon as its gradient is reduced "
           "and its parameter read, overlapping the remaining reductions "
           "(default on; the numbers are the same either way)">,
  ];
}

def FuseElementwise : Pass<"shardc-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Run chains of elementwise ops as one kernel each";
  let description = [{
    The last pass of the train pipeline. Rewrites that leave every computed
    bit as it was (the loss's, with a loss gradient other than 1, to one
    float rounding):

    - A chain of elementwise f32 ops of one shape (those
      runtime/kernels/FusedOps.h lists: arithmetic, Erf, Exp, Tanh,
      Sigmoid, Relu, Where, the activation gradients, ...) becomes one
      `shardc.FusedElementwise`: GELU and its gradient, attention's scale
      and mask, a bias add and its activation. An op joins the chain of an
      operand's producer when no op outside the chain reads a chain value
      before it (the fused op takes the place of the chain's last op, so
      every outside reader must come after it); the values outside ops read
      become the fused op's results, the rest are never written to memory.
      An op whose operands come from two chains merges them where the rule
      allows (GELU's gradient: the erf and the exp sides). Inputs must
      broadcast to the chain's shape as one run of its dimensions (a
      scalar, a bias, a per-row mean or the same shape), and a chain holds
      at most 16 inputs, 48 ops and 8 results. Ops of different memory
      categories or recompute marks are not mixed. A chain of one op stays
      as it is.
    - Before the chains form, a forward elementwise value that backward
      reads only in elementwise ops of its shape is recomputed there, when
      at most 8 forward elementwise ops give it from values backward keeps
      anyway (arguments, constants, values a matrix product or a
      normalization's gradient reads). The copies go before the first
      backward reader and fuse into its chain: GELU's forward then writes,
      and the step keeps until backward, its input x and output only, not
      x / sqrt(2) and 1 + erf(x / sqrt(2)) too.
    - A gradient multiplied by a scalar (ZeRO's 1 / N average) right before
      the f32 optimizer update that alone reads it becomes the update's
      `grad_scale` (the update multiplies first, in f32, as the Mul did);
      so does the scalar of a gradient shard (`shardc.ShardSlice`, ZeRO-1)
      whose every part is the same product, read by nothing else, or zero
      padding.
    - A softmax cross-entropy loss (sum or mean) whose scores gradient
      backward computes becomes `shardc.SoftmaxCrossEntropyLossWithGrad`:
      one pass over the scores in forward gives the loss and the gradient
      for a loss gradient of 1, bit for bit SoftmaxCrossEntropyLossGrad's.
      Backward multiplies it by the loss's gradient where that is not the
      constant 1 (a loss scale: one float rounding more than before)
      instead of computing every exponential again; forward keeps the
      gradient for backward in place of the scores, of their size. A loss
      whose log_prob is read stays as it is.
    - Attention's transposes are read through strides: a transpose that
      only an elementwise op with scalar other operands reads (the scaled
      query of nn.MultiheadAttention), whose result only products and
      transposes read, moves after that op; a transpose of a transpose
      becomes one transpose of the source; then a batched f32/f64
      MatMul (equal batch dimensions) whose operand is a transpose only
      such products read, or whose result only a transpose reads, becomes
      `shardc.PermutedMatMul` of the untransposed tensors: the head split
      ([batch, time, heads, dim] read as [batch, heads, time, dim]), K^T,
      the merge of the heads, and the transposed operands of the
      gradients. A transpose that moves the innermost dimension into the
      batch stays (a BLAS needs one unit stride per matrix).
    - A Split of a Gemm's columns (`transB`, the weight's rows; seen through
      a Reshape that keeps the last dimension: attention's q, k and v out of
      one projection) becomes one Gemm per piece, over a Slice of the
      weight's rows and of the bias: contiguous slices the plan makes
      views, so each piece is written where it is read, not copied out of
      the whole product. Each output element is the same dot product over
      the same operands (on OpenBLAS the same bits: the GPT example trains
      bit for bit as without the pass, distributed/fuse-elementwise.test).

    Before:
    ```mlir
    %d = shardc.Div %x, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %e = shardc.Erf %d : tensor<4x8xf32>
    %a = shardc.Add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %m = shardc.Mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = shardc.Mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    ```
    After (`%a` is also read after the chain, so it stays a result):
    ```mlir
    %y:2 = shardc.FusedElementwise %x, %sqrt2, %one, %half
        : (tensor<4x8xf32>, tensor<f32>, tensor<f32>, tensor<f32>)
        -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    ^bb0(%x0: tensor<4x8xf32>, %s: tensor<f32>, %o: tensor<f32>, %h: tensor<f32>):
      %d = shardc.Div %x0, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
      ...
      shardc.Yield %a, %y : tensor<4x8xf32>, tensor<4x8xf32>
    }
    ```
  }];
  let options = [
    Option<"fuseElementwise", "fuse-elementwise", "bool", /*default=*/"true",
           "Fuse chains of elementwise ops into one kernel each, and ZeRO's "
           "gradient average into the optimizer update (default on; the "
           "numbers are the same either way)">,
  ];
  let dependentDialects = ["::shardc::ShardcDialect"];
}

#endif // SHARDC_PASSES_TD
