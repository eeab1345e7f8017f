//===- Passes.h - Shard compiler passes -------------------------*- C++ -*-===//
#ifndef SHARDC_PASSES_PASSES_H
#define SHARDC_PASSES_PASSES_H

#include "ir/ShardcDialect.h"
#include "passes/OptionChoices.h"
#include "passes/OptionRange.h"

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

#include "passes/PipelineOptions.h.inc"

/// Pipeline options whose options can also become a tool's own flags.
template <typename T>
struct ShardcPipelineOptions : public mlir::PassPipelineOptions<T> {
  /// A pass's ListOption as a pipeline option: each occurrence adds one
  /// value (`--freeze A --freeze B`). MLIR's ListOption splits a value at
  /// commas outside brackets, and its bracket matching never returns on an
  /// unbalanced '(' or '[': a mistyped regular expression would hang the
  /// tool instead of failing.
  template <typename DataType>
  class RepeatedOption
      : public mlir::detail::PassOptions::ListOption<DataType> {
  public:
    using mlir::detail::PassOptions::ListOption<DataType>::ListOption;
    using mlir::detail::PassOptions::ListOption<DataType>::operator=;
    bool handleOccurrence(unsigned, llvm::StringRef argName,
                          llvm::StringRef arg) override {
      DataType value;
      if (this->getParser().parse(*this, argName, arg, value))
        return true;
      this->optHasValue = true;
      this->addValue(value);
      return false;
    }
  };

  /// A pass's BoundedOption as a pipeline option: a value outside its range
  /// (Passes.td) is refused as it is parsed, with the range, whether it
  /// comes from a tool's flag or a pipeline string.
  template <typename DataType>
  class BoundedOption : public mlir::detail::PassOptions::Option<DataType> {
  public:
    template <typename... Args>
    BoundedOption(OptionRange<DataType> range,
                  mlir::detail::PassOptions &parent, llvm::StringRef arg,
                  Args &&...args)
        : mlir::detail::PassOptions::Option<DataType>(
              parent, arg, std::forward<Args>(args)...),
          range(range) {}
    using mlir::detail::PassOptions::Option<DataType>::operator=;

    bool handleOccurrence(unsigned pos, llvm::StringRef argName,
                          llvm::StringRef arg) override {
      DataType value;
      if (this->getParser().parse(*this, argName, arg, value))
        return true;
      if (!range.contains(value))
        return this->error("'" + arg + "' is out of range: it must be " +
                           range.description);
      this->setValue(value);
      this->setPosition(pos);
      this->optHasValue = true;
      return false;
    }

  private:
    OptionRange<DataType> range;
  };

  /// Registers the options named by `args` as top-level command-line flags
  /// in `category` (they stay pipeline options too), so that a tool parses
  /// its command line straight into these options: shardc's training and
  /// sharding flags are the train pipeline's options.
  void addAsToolFlags(llvm::ArrayRef<const char *> args,
                      llvm::cl::OptionCategory &category) {
    for (const char *arg : args) {
      llvm::cl::Option *opt = this->OptionsMap.lookup(arg);
      assert(opt && "not an option of this pipeline");
      opt->removeArgument();
      opt->addSubCommand(llvm::cl::SubCommand::getTopLevel());
      opt->addCategory(category);
      opt->addArgument();
    }
  }
};

/// Options of the import cleanup pipeline (shardc's --fold-limit).
struct ImportCleanupPipelineOptions
    : public ShardcPipelineOptions<ImportCleanupPipelineOptions> {
  SHARDC_PIPELINE_OPTIONS_FoldConstants
};

/// The passes every model goes through after import: constant folding,
/// canonicalization and dead-code removal.
void buildImportCleanupPipeline(mlir::OpPassManager &pm,
                                const FoldConstantsOptions &options = {});

/// Options of the training pipeline (shardc's flags, shardc-opt's
/// --shardc-train-pipeline='...'): the options of its passes, declared in
/// Passes.td. Sharding applies when world-size or zero-stage is given.
// The members are generated from Passes.td (PipelineOptions.h.inc): one
// macro per pass, each declaring that pass's options.
// clang-format off
struct TrainPipelineOptions
    : public ShardcPipelineOptions<TrainPipelineOptions> {
  SHARDC_PIPELINE_OPTIONS_FoldConstants
  SHARDC_PIPELINE_OPTIONS_MixedPrecision
  SHARDC_PIPELINE_OPTIONS_LossScale
  SHARDC_PIPELINE_OPTIONS_Autodiff
  SHARDC_PIPELINE_OPTIONS_Recompute
  SHARDC_PIPELINE_OPTIONS_AccumulateGradients
  SHARDC_PIPELINE_OPTIONS_Optimizer
  SHARDC_PIPELINE_OPTIONS_WrapUnits
  SHARDC_PIPELINE_OPTIONS_ZeroConfig
  SHARDC_PIPELINE_OPTIONS_BucketGradients
  SHARDC_PIPELINE_OPTIONS_ReduceScatterGradients
  SHARDC_PIPELINE_OPTIONS_ScheduleCollectives
  SHARDC_PIPELINE_OPTIONS_SyncBatchNorm
  SHARDC_PIPELINE_OPTIONS_Offload
  SHARDC_PIPELINE_OPTIONS_ClipGradients
  SHARDC_PIPELINE_OPTIONS_FuseElementwise

  /// True when the step is to be sharded (world-size or zero-stage given).
  bool shards() const { return worldSize.hasValue() || stage.hasValue(); }
};

/// Options of the shardc-zero pipeline.
struct ZeroPipelineOptions
    : public ShardcPipelineOptions<ZeroPipelineOptions> {
  SHARDC_PIPELINE_OPTIONS_ZeroConfig
  SHARDC_PIPELINE_OPTIONS_BucketGradients
  SHARDC_PIPELINE_OPTIONS_ReduceScatterGradients
};
// clang-format on

/// The ZeRO rewrite of a training step for one stage: zero-config, then the
/// stage's passes (bucket-gradients, partition-optimizer,
/// reduce-scatter-gradients, shard-parameters).
void buildZeroPipeline(mlir::OpPassManager &pm,
                       const ZeroPipelineOptions &options);

/// Import cleanup, autodiff, the optimizer, and cleanup again: a forward
/// model becomes one training step.
void buildTrainPipeline(mlir::OpPassManager &pm,
                        const TrainPipelineOptions &options);

/// The step function of a module (`func.func @main`), or an error on the
/// module naming `pass` when it has none.
mlir::FailureOr<mlir::func::FuncOp> getStepFunction(mlir::ModuleOp module,
                                                    llvm::StringRef pass);

/// Registers the passes and pipelines of Shard (for shardc-opt).
void registerShardcPassesAndPipelines();

} // namespace shardc

#endif // SHARDC_PASSES_PASSES_H
