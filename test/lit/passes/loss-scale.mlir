// Loss scaling, the forward half: fp16 compute scales dynamically by
// default (GradScaler's init 2^16, growth 2 every 2000 steps, backoff 0.5);
// the scale and its tracker are f32 state, the scale starting at its
// initial value, and autodiff seeds the loss gradient with the scale.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-mixed-precision='param-dtype=fp16' -shardc-loss-scale -shardc-autodiff | FileCheck %s --check-prefix=AUTO
// AUTO: func.func @main({{.*}}, %[[S:.*]]: tensor<f32> {shardc.loss_scale = #shardc.loss_scaling<growth_factor = 2.000000e+00, backoff_factor = 5.000000e-01, growth_interval = 2000>, shardc.state = "loss_scale", shardc.state_init = 6.553600e+04 : f64}, %{{.*}}: tensor<f32> {shardc.loss_scale_tracker, shardc.state = "loss_scale.growth_tracker"})
// AUTO: %[[L:.*]] = shardc.Cast %{{.*}} : tensor<4x5xf16> -> tensor<4x5xf32>
// AUTO: shardc.SoftmaxCrossEntropyLossGrad %[[S]], %[[L]]

// bf16 and fp32 need no scale: auto adds nothing, and the dynamic options
// without a dynamic scale are an error.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-mixed-precision='param-dtype=bf16' -shardc-loss-scale | FileCheck %s --check-prefix=NONE
// NONE-NOT: shardc.loss_scale
// NONE-NOT: shardc.state
// RUN: not shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-loss-scale='init-loss-scale=1024' 2>&1 | FileCheck %s --check-prefix=NOTDYN
// NOTDYN: error: loss-scale: init-loss-scale and the loss-scale-growth/backoff options are for a dynamic loss scale: add loss-scale=dynamic
// RUN: not shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-loss-scale='loss-scale=huge' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: 'huge' is not auto, none, dynamic or a positive number
// RUN: not shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-loss-scale='loss-scale=1e-50' 2>&1 | FileCheck %s --check-prefix=TINY
// TINY: error: loss-scale: the loss scale 1.000000e-50 is not a normal float32 (between 1.2e-38 and 3.4e38); give a power of two such as 65536
// RUN: not shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-loss-scale='loss-scale=dynamic loss-scale-backoff-factor=1.5' 2>&1 | FileCheck %s --check-prefix=BACKOFF
// BACKOFF: loss-scale-backoff-factor must be in (0, 1), got 1.5

// A static scale (fp32 here: scaling works at any precision) never changes:
// both factors 1. The initial value is rounded to float32, as GradScaler's.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-loss-scale='loss-scale=1000.1' | FileCheck %s --check-prefix=STATIC
// STATIC: shardc.loss_scale = #shardc.loss_scaling<growth_factor = 1.000000e+00, backoff_factor = 1.000000e+00, growth_interval = 1>, shardc.state = "loss_scale", shardc.state_init = 1000.0999755859375 : f64

// The optimizer half on one process: after the last gradient, a PartialNorm
// chain (l2) feeds LossScale; the step counter and the updates skip with
// it, the updates unscale, a schedule counts every step on a counter of its
// own, and the scale used and the skip flag are graph outputs.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-mixed-precision='param-dtype=fp16' -shardc-loss-scale='init-loss-scale=256 loss-scale-growth-interval=3' -shardc-autodiff -shardc-optimizer='optimizer=adam lr-schedule=linear decay-steps=10' -shardc-unscale-gradients | FileCheck %s --check-prefix=STEP
// STEP: func.func @main({{.*}}%[[SCALE:[a-z0-9]+]]: tensor<f32> {shardc.loss_scale = #shardc.loss_scaling<growth_factor = 2.000000e+00, backoff_factor = 5.000000e-01, growth_interval = 3>, shardc.state = "loss_scale", shardc.state_init = 2.560000e+02 : f64}, %[[TRACK:[a-z0-9]+]]: tensor<f32> {{.*}}, %[[STEPC:[a-z0-9]+]]: tensor<f32> {shardc.state = "optimizer.step"}{{.*}}, %[[LRC:[a-z0-9]+]]: tensor<f32> {shardc.state = "lr_scheduler.step"})
// STEP-SAME: shardc.loss_scale_output = "loss_scale"
// STEP-SAME: shardc.output_names = ["logits", "loss", "loss_scale", "skipped"]
// STEP-SAME: shardc.skipped_output = "skipped"
// STEP: %[[GW:.*]] = shardc.Cast %{{.*}} {shardc.backward} : tensor<3x5xf16> -> tensor<3x5xf32>
// STEP-NEXT: %[[P0:.*]] = shardc.PartialNorm %[[GW]] {norm_type = #shardc.norm_type<l2>
// STEP-NEXT: %[[P1:.*]] = shardc.PartialNorm %{{.*}}, %[[P0]]
// STEP-NEXT: %[[SKIP:.*]], %[[UNSCALE:.*]], %[[USED:.*]], %[[NEWS:.*]], %[[NEWT:.*]] = shardc.LossScale %[[P1]], %[[SCALE]], %[[TRACK]] {loss_scaling = #shardc.loss_scaling<growth_factor = 2.000000e+00, backoff_factor = 5.000000e-01, growth_interval = 3>
// STEP-NEXT: %[[S:.*]] = shardc.Increment %[[STEPC]] unless %[[SKIP]] : tensor<f32>
// STEP-NEXT: %[[LR:.*]] = shardc.Increment %[[LRC]] {{.*}}: tensor<f32>
// STEP-NEXT: shardc.AdamUpdate %{{.*}}, %[[GW]], %{{.*}}, %{{.*}}, %[[S]] scaled_by %[[UNSCALE]] unless %[[SKIP]] lr_at %[[LR]]
// STEP-NEXT: shardc.AdamUpdate {{.*}}, %[[S]] scaled_by %[[UNSCALE]] unless %[[SKIP]] lr_at %[[LR]]
// STEP-NEXT: return %{{.*}}, %{{.*}}, %[[USED]], %[[SKIP]], {{.*}}, %[[NEWS]], %[[NEWT]] :

// Stage 2 on two ranks: each rank sums its gradient shards, and one
// all-reduce adds the ranks' sums, so that an inf on either rank skips the
// step on both. With clipping, the coefficient unscales too, and the norm
// is the unscaled gradients'.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-mixed-precision='param-dtype=fp16' -shardc-loss-scale -shardc-autodiff -shardc-optimizer='optimizer=sgd' -shardc-zero-config='world-size=2 zero-stage=2' -shardc-partition-optimizer -shardc-reduce-scatter-gradients -shardc-unscale-gradients -shardc-clip-gradients='clip-grad-norm=1.0' | FileCheck %s --check-prefix=STAGE2
// STAGE2: %[[F:.*]] = shardc.Reshape %{{.*}} : tensor<f64> -> tensor<1xf64>
// STAGE2-NEXT: %[[R:.*]] = mesh.all_reduce %[[F]] on @world mesh_axes = [0] {{.*}} : tensor<1xf64> -> tensor<1xf64>
// STAGE2-NEXT: %[[T:.*]] = shardc.Reshape %[[R]] {{.*}} : tensor<1xf64> -> tensor<f64>
// STAGE2-NEXT: %[[SKIP:.*]], %[[UNSCALE:.*]], %{{.*}}, %{{.*}}, %{{.*}} = shardc.LossScale %[[T]]
// STAGE2: %{{.*}}, %[[COEF:.*]] = shardc.ClipCoefficient %{{.*}} unscaled_by %[[UNSCALE]] {max_norm = 1.000000e+00
// STAGE2: shardc.Increment %{{.*}} unless %[[SKIP]]
// STAGE2: shardc.SGDUpdate {{.*}} scaled_by %[[COEF]] unless %[[SKIP]]
// STAGE2: shardc.SGDUpdate {{.*}} scaled_by %[[COEF]] unless %[[SKIP]]

// Without a loss scale the optimizer half does nothing.
// RUN: shardc-opt %S/Inputs/zero-step.mlir -shardc-unscale-gradients | FileCheck %s --check-prefix=NOSCALE
// NOSCALE-NOT: shardc.LossScale
// NOSCALE-NOT: unless
