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

#endif // SHARDC_INTERFACES_TD
