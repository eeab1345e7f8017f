// Every pass needs the step function @main; without it each one reports an
// error naming itself (getStepFunction, passes/StepFunction.cpp) and fails,
// instead of silently doing nothing. sed puts each pass's name into the
// expected error.
// RUN: sed 's/PASS/autodiff/' %s | shardc-opt -verify-diagnostics -shardc-autodiff
// RUN: sed 's/PASS/optimizer/' %s | shardc-opt -verify-diagnostics -shardc-optimizer
// RUN: sed 's/PASS/wrap-units/' %s | shardc-opt -verify-diagnostics -shardc-wrap-units
// RUN: sed 's/PASS/zero-config/' %s | shardc-opt -verify-diagnostics -shardc-zero-config
// RUN: sed 's/PASS/bucket-gradients/' %s | shardc-opt -verify-diagnostics -shardc-bucket-gradients
// RUN: sed 's/PASS/partition-optimizer/' %s | shardc-opt -verify-diagnostics -shardc-partition-optimizer
// RUN: sed 's/PASS/reduce-scatter-gradients/' %s | shardc-opt -verify-diagnostics -shardc-reduce-scatter-gradients
// RUN: sed 's/PASS/shard-parameters/' %s | shardc-opt -verify-diagnostics -shardc-shard-parameters
// RUN: sed 's/PASS/schedule-collectives/' %s | shardc-opt -verify-diagnostics -shardc-schedule-collectives

// expected-error @below {{PASS: the module has no func.func @main}}
module {
  func.func @step(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
