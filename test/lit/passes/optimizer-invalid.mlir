// RUN: not shardc-opt %s -shardc-optimizer=optimizer=lamb 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not shardc-opt %s -shardc-optimizer='optimizer=sgd nesterov=true' 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not shardc-opt %s -shardc-optimizer='optimizer=adam beta1=1.5' 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not shardc-opt %s -shardc-optimizer='optimizer=sgd lr=nan' 2>&1 | FileCheck %s --check-prefix=LR-NAN
// RUN: not shardc-opt %s -shardc-optimizer='optimizer=adam eps=-1e-8' 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not shardc-opt %s -shardc-optimizer='optimizer=adam lr-schedule=linear warmup-steps=10 decay-steps=10' 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not shardc-opt %s -shardc-optimizer='optimizer=adam decay-steps=10' 2>&1 | FileCheck %s --check-prefix=CONSTANT
// RUN: not shardc-opt %s -shardc-optimizer='lr-schedule=step' 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not shardc-opt %s -shardc-train-pipeline='min-lr-ratio=2' 2>&1 | FileCheck %s --check-prefix=RATIO
// Pipeline options are checked as they are parsed (so are shardc's flags),
// weight-decay's default (-1, "not given") included.
// RUN: not shardc-opt %s -shardc-train-pipeline='optimizer=sgd weight-decay=-1' 2>&1 | FileCheck %s --check-prefix=PIPELINE-WD

// NAME: for the --optimizer option: 'lamb' is not one of: sgd, adam, adamw
// NESTEROV: error: optimizer: Nesterov momentum requires a momentum and zero dampening
// BETA: error: optimizer: beta1 must be in [0, 1), got 1.5
// LR-NAN: error: optimizer: lr must be finite and >= 0, got nan
// EPS: error: optimizer: eps must be finite and >= 0, got -1e-08
// DECAY: error: optimizer: a linear lr-schedule needs decay-steps (the step at which it reaches min-lr-ratio * lr) greater than warmup-steps (10), got 10
// CONSTANT: error: optimizer: decay-steps and min-lr-ratio are for a decaying schedule: add lr-schedule=linear or cosine
// SCHEDULE: for the --lr-schedule option: 'step' is not one of: constant, linear, cosine
// RATIO: for the --min-lr-ratio option: '2' is out of range: it must be in [0, 1]
// PIPELINE-WD: for the --weight-decay option: '-1' is out of range: it must be finite and >= 0
func.func @main(%x: tensor<2xf32> {shardc.input = "x"},
                %w: tensor<2xf32> {shardc.param = "w"}) -> (tensor<f32>, tensor<2xf32> {shardc.grad_of = "w"})
    attributes {shardc.output_names = ["loss"], shardc.loss = "loss"} {
  %0 = shardc.Mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.ReduceSum %0 {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %1, %x : tensor<f32>, tensor<2xf32>
}
