//===- Pipelines.cpp - Pass pipelines and registration --------------------===//
#include "passes/Passes.h"

#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace shardc {

void buildImportCleanupPipeline(OpPassManager &pm,
                                const FoldConstantsOptions &options) {
  pm.addNestedPass<func::FuncOp>(createFoldConstants(options));
  pm.addNestedPass<func::FuncOp>(createRaiseLayerNorm());
  pm.addPass(createCanonicalizerPass());
}

/// Zero-config and the stage's passes, configured from any pipeline options
/// that hold their options (the shardc-zero and the train pipeline's).
template <typename OptionsT>
static void addZeroPasses(OpPassManager &pm, const OptionsT &options) {
  pm.addPass(createZeroConfig(getZeroConfigOptions(options)));
  int64_t stage = options.stage;
  if (stage == 0) {
    pm.addPass(createBucketGradients(getBucketGradientsOptions(options)));
    return;
  }
  pm.addPass(createPartitionOptimizer());
  // A rank updates only its shard, so it needs only its shard of the summed
  // gradients: a reduce-scatter (ZeRO's communication volume, as DP's),
  // not an all-reduce. Stage 1 keeps whole gradients over micro-batches
  // (DeepSpeed's ZeRO-1) and reduce-scatters them once per step; stage 2
  // shards them every micro-batch, unless accumulate-unsharded.
  ReduceScatterGradientsOptions reduce =
      getReduceScatterGradientsOptions(options);
  reduce.accumulateUnsharded |= stage == 1;
  pm.addPass(createReduceScatterGradients(reduce));
  pm.addPass(createShardParameters());
}

void buildZeroPipeline(OpPassManager &pm, const ZeroPipelineOptions &options) {
  addZeroPasses(pm, options);
}

void buildTrainPipeline(OpPassManager &pm,
                        const TrainPipelineOptions &options) {
  FoldConstantsOptions fold = getFoldConstantsOptions(options);
  buildImportCleanupPipeline(pm, fold);
  pm.addPass(createMixedPrecision(getMixedPrecisionOptions(options)));
  pm.addPass(createLossScale(getLossScaleOptions(options)));
  pm.addPass(createAutodiff(getAutodiffOptions(options)));
  pm.addPass(createRecompute(getRecomputeOptions(options)));
  pm.addPass(createAccumulateGradients(getAccumulateGradientsOptions(options)));
  pm.addPass(createOptimizer(getOptimizerOptions(options)));
  buildImportCleanupPipeline(pm, fold);
  // Unscaling and clipping read the gradients the updates finally take:
  // after the ZeRO rewrite, whose collectives they join.
  ClipGradientsOptions clip = getClipGradientsOptions(options);
  if (!options.shards()) {
    // One process: its batch is the global batch, and sync-batchnorm has
    // nothing to synchronize.
    pm.addPass(createUnscaleGradients());
    pm.addPass(createClipGradients(clip));
    pm.addPass(createOffload(getOffloadOptions(options)));
    pm.addPass(createFuseElementwise(getFuseElementwiseOptions(options)));
    return;
  }
  pm.addPass(createWrapUnits(getWrapUnitsOptions(options)));
  addZeroPasses(pm, options);
  pm.addPass(createSyncBatchNorm(getSyncBatchNormOptions(options)));
  buildImportCleanupPipeline(pm, fold);
  pm.addPass(createUnscaleGradients());
  pm.addPass(createClipGradients(clip));
  pm.addPass(createLowerCollectives());
  pm.addPass(createScheduleCollectives(getScheduleCollectivesOptions(options)));
  pm.addPass(createOffload(getOffloadOptions(options)));
  pm.addPass(createFuseElementwise(getFuseElementwiseOptions(options)));
}

void registerShardcPassesAndPipelines() {
  registerShardcPasses();
  PassPipelineRegistration<ImportCleanupPipelineOptions>(
      "shardc-import-cleanup",
      "Fold constants and canonicalize an imported model",
      [](OpPassManager &pm, const ImportCleanupPipelineOptions &options) {
        buildImportCleanupPipeline(pm, getFoldConstantsOptions(options));
      });
  PassPipelineRegistration<ZeroPipelineOptions>(
      "shardc-zero",
      "Rewrite a training step into a per-rank ZeRO stage 0-3 step",
      buildZeroPipeline);
  PassPipelineRegistration<TrainPipelineOptions>(
      "shardc-train-pipeline",
      "Turn an imported forward model into one training step",
      buildTrainPipeline);
}

} // namespace shardc
