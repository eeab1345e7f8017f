//===- ShardcInterfaces.td - Op interfaces of shardc -------*- tablegen -*-===//
#ifndef SHARDC_INTERFACES_TD
#define SHARDC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Shardc_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::shardc";
  let description = [{
    An op the autodiff pass can differentiate. Its rule reads the gradients
    of the op's results from a `GradientEmitter`, builds the backward ops at
    the emitter's insertion point and adds the gradients of the operands with
    `accumulate`. The autodiff pass calls a rule only when at least one result
    has a gradient; an op reached by a gradient without this interface is an
    error ("autodiff: no gradient rule for this op").

    The rules are external models, one file per op family under
    `ir/gradients/`, attached when the dialect is initialized (see
    docs/autodiff.md).
  }];
  let methods = [
    InterfaceMethod<[{
        Emits the backward ops of this op and accumulates the gradients of
        its active operands. Fails, with a diagnostic on the op, when the op
        cannot be differentiated as used.
      }],
      "::mlir::LogicalResult", "backprop",
      (ins "::shardc::GradientEmitter &":$emitter)>,
  ];
}

def Shardc_OptimizerUpdateOpInterface : OpInterface<"OptimizerUpdate"> {
  let cppNamespace = "::shardc";
  let description = [{
    An optimizer update (SGDUpdate, AdamUpdate): the operands that the
    passes after the optimizer rewrite, whatever the optimizer. Clipping
    sets `grad_scale`; loss scaling sets `grad_scale`, `skip` and `lr_step`.
  }];
  let methods = [
    InterfaceMethod<"The gradient the update reads.", "::mlir::Value",
                    "getGrad">,
    InterfaceMethod<"The step counter (after its Increment).", "::mlir::Value",
                    "getStep">,
    InterfaceMethod<"The factor the gradient is multiplied by, or null.",
                    "::mlir::Value", "getGradScale">,
    InterfaceMethod<"The grad_scale operand, to set.",
                    "::mlir::MutableOperandRange", "getGradScaleMutable">,
    InterfaceMethod<"The skip flag operand, to set.",
                    "::mlir::MutableOperandRange", "getSkipMutable">,
    InterfaceMethod<"The schedule's counter operand, to set.",
                    "::mlir::MutableOperandRange", "getLrStepMutable">,
    InterfaceMethod<[{
      The operand that result `result` is the new value of: the parameter
      (result 0, operand 0) or a state buffer (result k, operand k + 1: the
      operands are the parameter, the gradient, then the states in the
      results' order). The kernel may write the result over it.
    }], "::mlir::OpOperand &", "getUpdatedOperand", (ins "unsigned":$result),
    [{}], [{
      return $_op->getOpOperand(result == 0 ? 0 : result + 1);
    }]>,
  ];
}

def Shardc_ComputeCostOpInterface : OpInterface<"ComputeCost"> {
  let cppNamespace = "::shardc";
  let description = [{
    An op that computes more than it moves: a matrix product or a
    convolution, forward or gradient. Its floating-point operations go into
    the plan (`Op.flops`), where the cost model (plan/CostModel.h) times the
    op by them; an op without this interface is timed by the bytes it reads
    and writes.
  }];
  let methods = [
    InterfaceMethod<[{
        The floating-point operations of one execution: 2 per multiply-add,
        from the static shapes of the operands and results.
      }],
      "uint64_t", "getFlops">,
  ];
}

#endif // SHARDC_INTERFACES_TD
