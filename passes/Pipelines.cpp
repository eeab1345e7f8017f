//===- Pipelines.cpp - Pass pipelines and registration --------------------===//
#include "passes/Passes.h"

#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace shardc {

void buildImportCleanupPipeline(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createFoldConstants());
  pm.addPass(createCanonicalizerPass());
}

void registerShardcPassesAndPipelines() {
  registerShardcPasses();
  PassPipelineRegistration<>(
      "shardc-import-cleanup",
      "Fold constants and canonicalize an imported model",
      [](OpPassManager &pm) { buildImportCleanupPipeline(pm); });
}

} // namespace shardc
