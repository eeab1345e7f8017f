//===- Pipelines.cpp - Pass pipelines and registration --------------------===//
#include "passes/Passes.h"

#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace shardc {

void buildImportCleanupPipeline(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createFoldConstants());
  pm.addPass(createCanonicalizerPass());
}

void buildZeroPipeline(OpPassManager &pm, const ZeroPipelineOptions &options) {
  ZeroConfigOptions config;
  config.worldSize = options.worldSize;
  config.stage = options.stage;
  pm.addPass(createZeroConfig(config));
  int64_t stage = options.stage;
  if (stage <= 1) {
    BucketGradientsOptions bucket;
    bucket.bucketCapMb = options.bucketCapMb;
    pm.addPass(createBucketGradients(bucket));
  }
  if (stage >= 1)
    pm.addPass(createPartitionOptimizer());
  if (stage >= 2)
    pm.addPass(createReduceScatterGradients());
  if (stage >= 3) {
    ShardParametersOptions shard;
    shard.reshardAfterForward = options.reshardAfterForward;
    pm.addPass(createShardParameters(shard));
  }
}

void buildTrainPipeline(OpPassManager &pm,
                        const TrainPipelineOptions &options) {
  buildImportCleanupPipeline(pm);
  AutodiffOptions ad;
  ad.loss = options.loss;
  pm.addPass(createAutodiff(ad));
  OptimizerOptions opt;
  opt.optimizer = options.optimizer;
  opt.lr = options.lr;
  opt.momentum = options.momentum;
  opt.dampening = options.dampening;
  opt.nesterov = options.nesterov;
  opt.weightDecay = options.weightDecay;
  opt.beta1 = options.beta1;
  opt.beta2 = options.beta2;
  opt.eps = options.eps;
  pm.addPass(createOptimizer(opt));
  buildImportCleanupPipeline(pm);
  if (options.zeroStage >= 0) {
    WrapUnitsOptions wrap;
    wrap.minNumParams = options.minNumParams;
    pm.addPass(createWrapUnits(wrap));
    ZeroPipelineOptions zero;
    zero.worldSize = options.worldSize;
    zero.stage = options.zeroStage;
    zero.bucketCapMb = options.bucketCapMb;
    zero.reshardAfterForward = options.reshardAfterForward;
    buildZeroPipeline(pm, zero);
    buildImportCleanupPipeline(pm);
    pm.addPass(createLowerCollectives());
    ScheduleCollectivesOptions sched;
    sched.backwardPrefetch = options.backwardPrefetch;
    sched.forwardPrefetch = options.forwardPrefetch;
    sched.limitAllGathers = options.limitAllGathers;
    pm.addPass(createScheduleCollectives(sched));
  }
}

void registerShardcPassesAndPipelines() {
  registerShardcPasses();
  PassPipelineRegistration<>(
      "shardc-import-cleanup",
      "Fold constants and canonicalize an imported model",
      [](OpPassManager &pm) { buildImportCleanupPipeline(pm); });
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
