//===- ShardcAttrs.td - Attributes of the shardc dialect ---*- tablegen -*-===//
//
// Enumerations that ops and passes share. They are typed attributes, never
// strings: a misspelled value is a parse error, and passes switch over them.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_ATTRS_TD
#define SHARDC_ATTRS_TD

include "ir/ShardcDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Shardc_LossReduction : I32EnumAttr<"LossReduction",
    "how a loss reduces over its targets", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Sum", 1, "sum">,
      I32EnumAttrCase<"Mean", 2, "mean">
    ]> {
  let cppNamespace = "::shardc";
  let genSpecializedAttr = 0;
}

def Shardc_LossReductionAttr
    : EnumAttr<Shardc_Dialect, Shardc_LossReduction, "reduction"> {
  let summary = "Reduction of a loss: none, sum or mean (ONNX `reduction`)";
  let description = [{
    How SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and their
    gradients reduce the per-target losses: `none` keeps them, `sum` adds
    them, `mean` divides the sum by the total weight of the targets that are
    not ignored, e.g. `{reduction = #shardc.reduction<mean>}`. The importer
    reads ONNX's string attribute into it; the plan carries its name.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Shardc_LrSchedule : I32EnumAttr<"LrSchedule",
    "how the learning rate decays after warmup", [
      I32EnumAttrCase<"Constant", 0, "constant">,
      I32EnumAttrCase<"Linear", 1, "linear">,
      I32EnumAttrCase<"Cosine", 2, "cosine">
    ]> {
  let cppNamespace = "::shardc";
  let genSpecializedAttr = 0;
}

def Shardc_LrScheduleAttr
    : EnumAttr<Shardc_Dialect, Shardc_LrSchedule, "lr_schedule"> {
  let summary = "Learning-rate schedule of an optimizer update";
  let description = [{
    The factor SGDUpdate and AdamUpdate multiply their `lr` by at optimizer
    step s (counted from 0: the step counter minus one), with W =
    `warmup_steps`, T = `decay_steps`, R = `min_lr_ratio`: (s + 1) / W while
    s < W; then 1 (`constant`), max(R, (T - s) / (T - W)) (`linear`) or
    R + (1 - R) (1 + cos(pi (s - W) / (T - W))) / 2 (`cosine`), and R once
    s >= T, e.g. `{lr_schedule = #shardc.lr_schedule<cosine>}`. The plan
    carries its name.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Shardc_NormType : I32EnumAttr<"NormType",
    "which vector norm of the gradients clipping bounds", [
      I32EnumAttrCase<"L2", 0, "l2">,
      I32EnumAttrCase<"Inf", 1, "inf">
    ]> {
  let cppNamespace = "::shardc";
  let genSpecializedAttr = 0;
}

def Shardc_NormTypeAttr
    : EnumAttr<Shardc_Dialect, Shardc_NormType, "norm_type"> {
  let summary = "The norm of gradient clipping: l2 or inf";
  let description = [{
    The total norm over all gradients that PartialNorm and ClipCoefficient
    compute, as torch.nn.utils.clip_grad_norm_'s `norm_type`: `l2` (2, the
    square root of the sum of squares of every element) or `inf` (the
    largest absolute value), e.g. `{norm_type = #shardc.norm_type<inf>}`.
    The plan carries its name.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Shardc_MemoryCategory : I32EnumAttr<"MemoryCategory",
    "what a buffer holds, for memory planning and reports", [
      I32EnumAttrCase<"Params", 0, "params">,
      I32EnumAttrCase<"Grads", 1, "grads">,
      I32EnumAttrCase<"OptState", 2, "opt_state">,
      I32EnumAttrCase<"Activations", 3, "activations">,
      I32EnumAttrCase<"Comm", 4, "comm">
    ]> {
  let cppNamespace = "::shardc";
  let genSpecializedAttr = 0;
}

def Shardc_MemoryCategoryAttr
    : EnumAttr<Shardc_Dialect, Shardc_MemoryCategory, "category"> {
  let summary = "Memory category of an op's results (`shardc.category`)";
  let description = [{
    Set by the sharding passes on the ops they create, e.g.
    `{shardc.category = #shardc.category<grads>}`; the plan emitter files
    each result's buffer under it (plan.proto's `Category`). Results
    without it are activations, or gradients when an optimizer update
    consumes them as its gradient.
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Shardc_ParamRole : I32EnumAttr<"ParamRole",
    "whether and why a parameter is trained", [
      I32EnumAttrCase<"Trained", 0, "trained">,
      I32EnumAttrCase<"Frozen", 1, "frozen">,
      I32EnumAttrCase<"NoGradient", 2, "no_gradient">,
      I32EnumAttrCase<"Statistic", 3, "statistic">
    ]> {
  let cppNamespace = "::shardc";
  let genSpecializedAttr = 0;
}

def Shardc_ParamRoleAttr
    : EnumAttr<Shardc_Dialect, Shardc_ParamRole, "param_role"> {
  let summary = "Whether a parameter is trained (`shardc.role`)";
  let description = [{
    Set by autodiff on every `shardc.param` argument of the step:
    `trained` (it gets a gradient and an optimizer update), `frozen`
    (excluded by `--freeze`/`--trainable`: no gradient, no optimizer state,
    no gradient communication), `no_gradient` (no differentiable path from
    it to the loss, or not a float: PyTorch would leave its `.grad` None) or
    `statistic` (a BatchNormalization running statistic, which the op
    updates itself), e.g. `{shardc.role = #shardc.param_role<frozen>}`. The
    plan carries it on the parameter's buffer, for `--print-trainable` and
    memory reports.
  }];
  let assemblyFormat = "`<` $value `>`";
}

// A double parameter of an attribute, held as an APFloat (hashable,
// compared bitwise) and written as a decimal number.
def Shardc_F64Parameter : AttrOrTypeParameter<"::llvm::APFloat", "a double"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double v;
    if (::mlir::failed($_parser.parseFloat(v)))
      return ::mlir::failure();
    return ::llvm::APFloat(v);
  }() }];
  let printer = [{ $_printer << $_self.convertToDouble() }];
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
}

def Shardc_LossScalingAttr : AttrDef<Shardc_Dialect, "LossScaling"> {
  let mnemonic = "loss_scaling";
  let summary = "How a dynamic loss scale changes (`shardc.loss_scale`)";
  let description = [{
    Set by `shardc-loss-scale` on the loss-scale state argument, and carried
    by the LossScale op that updates it: torch.cuda.amp.GradScaler's
    `growth_factor`, `backoff_factor` and `growth_interval`. A step with a
    non-finite gradient multiplies the scale by `backoff_factor`;
    `growth_interval` finite steps in a row multiply it by `growth_factor`.
    A static scale (`shardc --loss-scale VALUE`) has both factors 1, e.g.
    `#shardc.loss_scaling<growth_factor = 2.0, backoff_factor = 0.5,
    growth_interval = 2000>`.
  }];
  let parameters = (ins Shardc_F64Parameter:$growth_factor,
                    Shardc_F64Parameter:$backoff_factor,
                    "int64_t":$growth_interval);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // SHARDC_ATTRS_TD
