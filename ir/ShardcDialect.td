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
include "mlir/Interfaces/SideEffectInterfaces.td"

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
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerTypes();
    void registerAttributes();
  }];
}

class Shardc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Shardc_Dialect, mnemonic, traits>;

// The network between ranks. Ops that start or finish a collective read and
// write it, so that no generic transformation (CSE, canonicalization, DCE,
// code motion) merges, drops or reorders communication: every rank must
// issue the same collectives in the same order.
def Shardc_CommResource : Resource<"::shardc::CommResource">;

#endif // SHARDC_DIALECT_TD
