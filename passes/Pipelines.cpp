//===- Pipelines.cpp - Pass pipelines and registration --------------------===//
#include "passes/Passes.h"

#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace shardc {

void buildImportCleanupPipeline(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createFoldConstants());
  pm.addPass(createCanonicalizerPass());
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
    ZeroOptions zero;
    zero.worldSize = options.worldSize;
    zero.stage = options.zeroStage;
    zero.bucketCapMb = options.bucketCapMb;
    zero.reshardAfterForward = options.reshardAfterForward;
    pm.addPass(createZero(zero));
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
  PassPipelineRegistration<TrainPipelineOptions>(
      "shardc-train-pipeline",
      "Turn an imported forward model into one training step",
      buildTrainPipeline);
}

} // namespace shardc
