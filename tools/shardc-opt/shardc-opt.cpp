//===- shardc-opt.cpp - mlir-opt for the shardc dialect -------------------===//
//
// Runs shardc passes on textual IR; the driver of the lit tests.
//
//===----------------------------------------------------------------------===//
#include "ir/ShardcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<shardc::ShardcDialect, mlir::func::FuncDialect,
                  mlir::mesh::MeshDialect>();
  shardc::registerShardcPassesAndPipelines();
  // Every generic transformation (CSE, canonicalization, LICM, SCCP,
  // symbol-dce, ...), so that tests can check what they leave of our IR.
  mlir::registerTransformsPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Shard optimizer driver (shardc dialect passes)\n",
      registry));
}
