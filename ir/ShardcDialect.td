//===- ShardcDialect.td - The shardc dialect ---------------*- tablegen -*-===//
//
// Tensor-level ops of a model as Shard compiles it: ONNX operators with
// static shapes and normalized attributes (opset-13 semantics), the gradient
// and optimizer ops of training, and the runtime-facing collective ops.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_DIALECT_TD
#define SHARDC_DIALECT_TD

include "mlir/IR/OpBase.td"

def Shardc_Dialect : Dialect {
  let name = "shardc";
  let cppNamespace = "::shardc";
  let summary = "Static-shape tensor ops of the Shard training compiler";
  let description = [{
    Every value is a statically shaped ranked tensor. Op names follow ONNX
    operator names so that diagnostics, IR and plans read the same. Axes are
    non-negative and defaults are explicit: an op carries everything its
    kernel needs (see docs/ops.md).
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 0;
  let useDefaultTypePrinterParser = 0;
}

class Shardc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Shardc_Dialect, mnemonic, traits>;

#endif // SHARDC_DIALECT_TD
