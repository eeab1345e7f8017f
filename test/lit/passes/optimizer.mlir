// RUN: shardc-opt %s -split-input-file -shardc-optimizer='optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0.01' | FileCheck %s --check-prefix=SGD
// RUN: shardc-opt %s -split-input-file -shardc-optimizer='optimizer=adamw lr=0.001' | FileCheck %s --check-prefix=ADAMW
// RUN: shardc-opt %s -split-input-file -shardc-optimizer='optimizer=adam lr-schedule=cosine warmup-steps=100 decay-steps=1000 min-lr-ratio=0.1' | FileCheck %s --check-prefix=COSINE
// RUN: shardc-opt %s -split-input-file -shardc-optimizer='optimizer=sgd warmup-steps=5' | FileCheck %s --check-prefix=WARMUP

// The gradient result becomes an update of the parameter; optimizer state
// (step counter, momentum buffer / exp_avg, exp_avg_sq) is new zero-initialized
// arguments, each updated in place.
// SGD-LABEL: func.func @main
// SGD-SAME: %[[W:[a-z0-9]+]]: tensor<2xf32> {shardc.param = "w"}
// SGD-SAME: %[[STEP:[a-z0-9]+]]: tensor<f32> {shardc.state = "optimizer.step"}
// SGD-SAME: %[[BUF:[a-z0-9]+]]: tensor<2xf32> {shardc.state = "w.momentum_buffer"}
// SGD-SAME: -> (tensor<f32>, tensor<f32> {shardc.updates = 2 : i64}, tensor<2xf32> {shardc.updates = 1 : i64}, tensor<2xf32> {shardc.updates = 3 : i64})
// SGD-SAME: shardc.optimizer = "sgd"
// SGD: %[[S:.*]] = shardc.Increment %[[STEP]]
// SGD: %[[NW:.*]], %[[NB:.*]] = shardc.SGDUpdate %[[W]], %[[G:.*]], %[[BUF]], %[[S]]
// SGD-SAME: {dampening = 0.000000e+00 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 1.000000e-02 : f64}
// SGD: return %{{.*}}, %[[S]], %[[NW]], %[[NB]]

// AdamW defaults to weight decay 0.01 and is decoupled.
// ADAMW-LABEL: func.func @main
// ADAMW-SAME: {shardc.state = "w.exp_avg"}
// ADAMW-SAME: {shardc.state = "w.exp_avg_sq"}
// ADAMW: shardc.AdamUpdate
// ADAMW-SAME: decoupled = true
// ADAMW-SAME: weight_decay = 1.000000e-02 : f64

// A schedule travels on every update as attributes, evaluated at run time
// from the step counter; without one the updates carry none.
// COSINE-LABEL: func.func @main
// COSINE: shardc.AdamUpdate
// COSINE-SAME: decay_steps = 1000 : i64
// COSINE-SAME: lr_schedule = #shardc.lr_schedule<cosine>
// COSINE-SAME: min_lr_ratio = 1.000000e-01 : f64
// COSINE-SAME: warmup_steps = 100 : i64
// WARMUP-LABEL: func.func @main
// WARMUP: shardc.SGDUpdate
// WARMUP-NOT: lr_schedule
// WARMUP-SAME: warmup_steps = 5 : i64
// SGD-NOT: lr_schedule
// SGD-NOT: warmup_steps
func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<2xf32> {shardc.grad_of = "w"})
    attributes {shardc.output_names = ["loss"], shardc.loss = "loss"} {
  %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %1, %x : tensor<f32>, tensor<2xf32>
}

// -----

// Training-mode BatchNormalization updates its running statistics in place
// with PyTorch's unbiased variance.
// SGD-LABEL: func.func @main
// SGD-SAME: -> (tensor<2x3xf32>, tensor<3xf32> {shardc.updates = 1 : i64}, tensor<3xf32> {shardc.updates = 2 : i64})
// SGD: %[[Y:.*]], %[[RM:.*]], %[[RV:.*]] = shardc.BatchNormalization
// SGD-SAME: unbiased_var = true
// SGD: return %[[Y]], %[[RM]], %[[RV]]
func.func @main(%x: tensor<2x3xf32> {shardc.input = "x"},
                %mean: tensor<3xf32> {shardc.param = "running_mean"},
                %var: tensor<3xf32> {shardc.param = "running_var"},
                %scale: tensor<3xf32> {shardc.param = "scale"},
                %bias: tensor<3xf32> {shardc.param = "bias"}) -> tensor<2x3xf32>
    attributes {shardc.output_names = ["y"], shardc.loss = "y"} {
  %y, %rm, %rv = shardc.BatchNormalization %x, %scale, %bias, %mean, %var {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32, training_mode = true} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y : tensor<2x3xf32>
}
