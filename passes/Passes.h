//===- Passes.h - Shard compiler passes -------------------------*- C++ -*-===//
#ifndef SHARDC_PASSES_PASSES_H
#define SHARDC_PASSES_PASSES_H

#include "ir/ShardcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace shardc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The passes every model goes through after import: constant folding,
/// canonicalization and dead-code removal.
void buildImportCleanupPipeline(mlir::OpPassManager &pm);

/// Registers the passes and pipelines of Shard (for shardc-opt).
void registerShardcPassesAndPipelines();

} // namespace shardc

#endif // SHARDC_PASSES_PASSES_H
