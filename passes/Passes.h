//===- Passes.h - Shard compiler passes -------------------------*- C++ -*-===//
#ifndef SHARDC_PASSES_PASSES_H
#define SHARDC_PASSES_PASSES_H

#include "ir/ShardcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
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

/// Options of the training pipeline (shardc's flags, shardc-opt's
/// --shardc-train-pipeline='...').
struct TrainPipelineOptions
    : public mlir::PassPipelineOptions<TrainPipelineOptions> {
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("The loss output (default: the only "
                                          "scalar float output)"),
                           llvm::cl::init("")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd, adam or adamw"),
                                llvm::cl::init("sgd")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<double> dampening{*this, "dampening",
                           llvm::cl::desc("SGD dampening"), llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::desc("SGD Nesterov"),
                        llvm::cl::init(false)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (default 0; 0.01 for adamw)"),
      llvm::cl::init(-1.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("Adam beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("Adam beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("Adam epsilon"),
                     llvm::cl::init(1e-8)};
};

/// Import cleanup, autodiff, the optimizer, and cleanup again: a forward
/// model becomes one training step.
void buildTrainPipeline(mlir::OpPassManager &pm,
                        const TrainPipelineOptions &options);

/// Registers the passes and pipelines of Shard (for shardc-opt).
void registerShardcPassesAndPipelines();

} // namespace shardc

#endif // SHARDC_PASSES_PASSES_H
