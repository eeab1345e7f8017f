//===- ShardcTypes.td - Types of the shardc dialect --------*- tablegen -*-===//
//
// Every value of a model is a builtin ranked tensor. The dialect adds one
// type of its own: the handle of a collective that has been started and not
// yet waited for.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TYPES_TD
#define SHARDC_TYPES_TD

include "ir/ShardcDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class Shardc_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Shardc_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Shardc_PendingType : Shardc_Type<"Pending", "pending"> {
  let summary = "An in-flight collective that will produce a tensor";
  let description = [{
    The result of a collective start op (`shardc.AllGatherStart`,
    `shardc.ReduceScatterStart`, `shardc.AllReduceStart`). The tensor it
    will hold is only readable through the `shardc.CollectiveWait` that
    consumes the handle. The parameter is the type of that tensor.

    ```mlir
    %h = shardc.AllGatherStart %shard {world_size = 2 : i64}
        : tensor<3xf32> -> !shardc.pending<tensor<6xf32>>
    %full = shardc.CollectiveWait %h : tensor<6xf32>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$tensorType);
  let builders = [
    TypeBuilderWithInferredContext<(ins "::mlir::RankedTensorType":$tensorType), [{
      return $_get(tensorType.getContext(), tensorType);
    }]>
  ];
  let skipDefaultBuilders = 1;
  let assemblyFormat = "`<` $tensorType `>`";
  let genVerifyDecl = 1;
}

#endif // SHARDC_TYPES_TD
