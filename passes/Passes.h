//===- Passes.h - Shard compiler passes -------------------------*- C++ -*-===//
#ifndef SHARDC_PASSES_PASSES_H
#define SHARDC_PASSES_PASSES_H

#include "ir/ShardcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
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
  // Sharding (applied when world-size > 1 or zero-stage is given).
  Option<int64_t> worldSize{*this, "world-size", llvm::cl::desc("Ranks"),
                            llvm::cl::init(1)};
  Option<int64_t> zeroStage{*this, "zero-stage",
                            llvm::cl::desc("ZeRO stage 0-3 (-1: no sharding)"),
                            llvm::cl::init(-1)};
  Option<double> bucketCapMb{*this, "bucket-cap-mb",
                             llvm::cl::desc("All-reduce bucket size in MiB"),
                             llvm::cl::init(25.0)};
  Option<int64_t> minNumParams{*this, "min-num-params",
                               llvm::cl::desc("Wrap-unit size (0: per module)"),
                               llvm::cl::init(0)};
  Option<bool> reshardAfterForward{*this, "reshard-after-forward",
                                   llvm::cl::desc("Stage 3: regather in backward"),
                                   llvm::cl::init(true)};
  Option<std::string> backwardPrefetch{*this, "backward-prefetch",
                                       llvm::cl::desc("pre, post or none"),
                                       llvm::cl::init("pre")};
  Option<bool> forwardPrefetch{*this, "forward-prefetch",
                               llvm::cl::desc("Prefetch in forward"),
                               llvm::cl::init(false)};
  Option<bool> limitAllGathers{*this, "limit-all-gathers",
                               llvm::cl::desc("At most two gathers in flight"),
                               llvm::cl::init(true)};
};

/// Options of the shardc-zero pipeline.
struct ZeroPipelineOptions
    : public mlir::PassPipelineOptions<ZeroPipelineOptions> {
  Option<int64_t> worldSize{*this, "world-size", llvm::cl::desc("Ranks"),
                            llvm::cl::init(1)};
  Option<int64_t> stage{*this, "stage", llvm::cl::desc("ZeRO stage 0-3"),
                        llvm::cl::init(3)};
  Option<double> bucketCapMb{*this, "bucket-cap-mb",
                             llvm::cl::desc("All-reduce bucket size in MiB"),
                             llvm::cl::init(25.0)};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("Stage 3: gather again in backward"), llvm::cl::init(true)};
};

/// The ZeRO rewrite of a training step for one stage: zero-config, then the
/// stage's passes (bucket-gradients, partition-optimizer,
/// reduce-scatter-gradients, shard-parameters).
void buildZeroPipeline(mlir::OpPassManager &pm,
                       const ZeroPipelineOptions &options);

/// Import cleanup, autodiff, the optimizer, and cleanup again: a forward
/// model becomes one training step.
void buildTrainPipeline(mlir::OpPassManager &pm,
                        const TrainPipelineOptions &options);

/// Registers the passes and pipelines of Shard (for shardc-opt).
void registerShardcPassesAndPipelines();

} // namespace shardc

#endif // SHARDC_PASSES_PASSES_H
