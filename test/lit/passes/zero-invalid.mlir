// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=2 zero-stage=3' -verify-diagnostics
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=2 zero-stage=4' 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=2 zero-stage=-1' 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=0 zero-stage=0' 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=9223372036854775807' 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not shardc-opt %s -split-input-file -shardc-zero-config='world-size=0' 2>&1 | FileCheck %s --check-prefix=PASS-WORLD
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=2 zero-stage=0 bucket-cap-mb=0' 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=2 zero-stage=0 bucket-cap-mb=nan' 2>&1 | FileCheck %s --check-prefix=BUCKET-NAN
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=3 hybrid-shard=3' 2>&1 | FileCheck %s --check-prefix=HYBRID-DIVIDE
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=0 hybrid-shard=2' 2>&1 | FileCheck %s --check-prefix=HYBRID-STAGE0
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=3 reshard-after-forward=3' 2>&1 | FileCheck %s --check-prefix=RESHARD-DIVIDE
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=8 zero-stage=3 hybrid-shard=2 reshard-after-forward=4' 2>&1 | FileCheck %s --check-prefix=RESHARD-HYBRID
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=2 reshard-after-forward=2' 2>&1 | FileCheck %s --check-prefix=RESHARD-STAGE
// RUN: not shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=3 reshard-after-forward=1' 2>&1 | FileCheck %s --check-prefix=RESHARD-ONE
// RUN: not shardc-opt %s -split-input-file -shardc-zero-config='world-size=4 reshard-after-forward=yes' 2>&1 | FileCheck %s --check-prefix=RESHARD-WORD

// Pipeline options are refused as they are parsed; pass options when the
// pass runs. World sizes go up to 2^20.
// STAGE: for the --zero-stage option: '{{4|-1}}' is out of range: it must be in [0, 3]
// WORLD: for the --world-size option: '{{0|9223372036854775807}}' is out of range: it must be in [1, 1048576]
// PASS-WORLD: error: zero-config: world-size must be in [1, 1048576], got 0
// BUCKET: for the --bucket-cap-mb option: '0' is out of range: it must be in (0, 1048576]
// BUCKET-NAN: for the --bucket-cap-mb option: 'nan' is out of range: it must be in (0, 1048576]
// HYBRID-DIVIDE: error: zero-config: --hybrid-shard 3 does not divide the world size 4: shard groups must be equal; pick a divisor of 4 (e.g. the ranks per node)
// HYBRID-STAGE0: error: zero-config: --hybrid-shard needs --zero-stage 1, 2 or 3: stage 0 shards nothing
// RESHARD-DIVIDE: error: zero-config: --reshard-after-forward 3 does not divide the shard group of 4 ranks (--world-size); pick a divisor of 4 (e.g. the ranks per node)
// RESHARD-HYBRID: error: zero-config: --reshard-after-forward 4 does not divide the shard group of 2 ranks (--hybrid-shard); pick a divisor of 2 (e.g. the ranks per node)
// RESHARD-STAGE: error: zero-config: --reshard-after-forward 2 keeps parameters sharded over a group between forward and backward, which only --zero-stage 3 gathers; use --zero-stage 3
// RESHARD-ONE: for the --reshard-after-forward option: '1' is not true, false or a group size G >= 2 (the ranks a unit stays sharded over between forward and backward)
// RESHARD-WORD: for the --reshard-after-forward option: 'yes' is not true, false or a group size G >= 2

// One wrap unit (layer "m") holding an f32 and an f16 parameter cannot be
// flattened into one buffer.
func.func @main(%arg0: tensor<2xf32> {shardc.param = "m.a", shardc.unit = 0 : i64}, %arg1: tensor<2xf16> {shardc.param = "m.b", shardc.unit = 0 : i64}, %arg2: tensor<f32> {shardc.state = "optimizer.step"}, %arg3: tensor<2xf32> {shardc.state = "m.a.momentum_buffer"}, %arg4: tensor<2xf16> {shardc.state = "m.b.momentum_buffer"}) -> (tensor<f32>, tensor<2xf32> {shardc.updates = 0 : i64}, tensor<2xf32> {shardc.updates = 3 : i64}, tensor<2xf16> {shardc.updates = 1 : i64}, tensor<2xf16> {shardc.updates = 4 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = []} {
  %0 = shardc.Mul %arg0, %arg0 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.Mul %arg1, %arg1 : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
  %2 = shardc.Increment %arg2 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg0, %0, %arg3, %2 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  // expected-error@+1 {{zero: a wrap unit mixes element types}}
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg1, %1, %arg4, %2 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf16>, tensor<f32>
  return %2, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1 : tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf16>, tensor<2xf16>
}

// -----

// The parameters of one unit share one update op, so they must share the
// optimizer configuration (here: two learning rates).
func.func @main(%arg0: tensor<2xf32> {shardc.param = "m.a", shardc.unit = 0 : i64}, %arg1: tensor<2xf32> {shardc.param = "m.b", shardc.unit = 0 : i64}, %arg2: tensor<f32> {shardc.state = "optimizer.step"}, %arg3: tensor<2xf32> {shardc.state = "m.a.momentum_buffer"}, %arg4: tensor<2xf32> {shardc.state = "m.b.momentum_buffer"}) -> (tensor<f32>, tensor<2xf32> {shardc.updates = 0 : i64}, tensor<2xf32> {shardc.updates = 3 : i64}, tensor<2xf32> {shardc.updates = 1 : i64}, tensor<2xf32> {shardc.updates = 4 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = []} {
  %0 = shardc.Mul %arg0, %arg1 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = shardc.Increment %arg2 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg0, %0, %arg3, %1 {dampening = 0.000000e+00, lr = 1.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  // expected-error@+1 {{zero: parameters of one wrap unit must share the optimizer configuration}}
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg1, %0, %arg4, %1 {dampening = 0.000000e+00, lr = 2.000000e-01, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00} : tensor<2xf32>, tensor<f32>
  return %1, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1 : tensor<f32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// expected-error@+1 {{zero-config: the module has no func.func @main}}
module {
  func.func @step() {
    return
  }
}
