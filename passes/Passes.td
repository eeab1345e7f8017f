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

#endif // SHARDC_PASSES_TD
