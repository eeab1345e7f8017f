// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=0' | FileCheck %s --check-prefix=STAGE0
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=0 bucket-cap-mb=0.00006 cost-model=kernel=1' | FileCheck %s --check-prefix=BUCKET
// Stages 1 and 2 before shard-parameters (the sharded optimizer and the
// gradient reductions), then the whole pipeline (SHARDED1, SHARDED2).
// RUN: shardc-opt %s -split-input-file -shardc-zero-config='world-size=4 zero-stage=1' -shardc-bucket-gradients -shardc-partition-optimizer | FileCheck %s --check-prefix=STAGE1
// RUN: shardc-opt %s -split-input-file -shardc-zero-config='world-size=4 zero-stage=2' -shardc-partition-optimizer -shardc-reduce-scatter-gradients | FileCheck %s --check-prefix=STAGE2
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=1' | FileCheck %s --check-prefix=SHARDED1
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=2' | FileCheck %s --check-prefix=SHARDED2
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=3' | FileCheck %s --check-prefix=STAGE3
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=3 reshard-after-forward=false' | FileCheck %s --check-prefix=KEEP
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=3 reshard-after-forward=2' | FileCheck %s --check-prefix=RESHARD
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=3 reshard-after-forward=4' | FileCheck %s --check-prefix=STAGE3
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=8 zero-stage=3 hybrid-shard=4 reshard-after-forward=2' | FileCheck %s --check-prefix=RESHARD-HYBRID
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=3 hybrid-shard=2' | FileCheck %s --check-prefix=HYBRID3
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=2 hybrid-shard=2' | FileCheck %s --check-prefix=HYBRID2
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=1 hybrid-shard=2' | FileCheck %s --check-prefix=HYBRID1
// RUN: shardc-opt %s -split-input-file -shardc-zero='world-size=4 zero-stage=3 hybrid-shard=4' | FileCheck %s --check-prefix=STAGE3

// A training step (SGD with momentum) of three parameters whose sizes do not
// divide by the world size 4: unit 0 = fc.weight (5x2) + fc.bias (5), 15
// elements padded to 16 (shards of 4); unit 1 = head.scale (5), padded to 8
// (shards of 2). head.scale is also used in backward; fc.* only in forward.

// Stage 0: one bucket holds every gradient, in the order they are produced
// (head.scale, fc.weight, fc.bias), all-reduced once after the last of them;
// each gradient is sliced back out and averaged (x 1/4) for its update.
// STAGE0: mesh.mesh @world(shape = 4)
// STAGE0-LABEL: func.func @main
// STAGE0-SAME: %[[W:[a-z0-9]+]]: tensor<5x2xf32> {shardc.param = "fc.weight", shardc.unit = 0 : i64}
// STAGE0-SAME: %[[B:[a-z0-9]+]]: tensor<5xf32> {shardc.param = "fc.bias", shardc.unit = 0 : i64}
// STAGE0-SAME: %[[S:[a-z0-9]+]]: tensor<5xf32> {shardc.param = "head.scale", shardc.unit = 1 : i64}
// STAGE0-SAME: shardc.world_size = 4 : i64, shardc.zero_stage = 0 : i64
// The gradients autodiff produced are marked as such for the memory plan.
// STAGE0: %[[DS:.*]] = shardc.Reshape %{{.*}} {shardc.backward, shardc.category = #shardc.category<grads>} : tensor<1x5xf32> -> tensor<5xf32>
// STAGE0: %[[DW:.*]] = shardc.Gemm %{{.*}} {shardc.backward, shardc.category = #shardc.category<grads>, transA = true}
// STAGE0: %[[DB:.*]] = shardc.Reshape %{{.*}} {shardc.backward, shardc.category = #shardc.category<grads>} : tensor<1x5xf32> -> tensor<5xf32>
// STAGE0-NOT: mesh.all_reduce
// STAGE0: %[[DWF:.*]] = shardc.Reshape %[[DW]] {shardc.category = #shardc.category<comm>} : tensor<5x2xf32> -> tensor<10xf32>
// STAGE0: %[[FLAT:.*]] = shardc.Concat %[[DS]], %[[DWF]], %[[DB]] {axis = 0 : i64, shardc.category = #shardc.category<comm>} : (tensor<5xf32>, tensor<10xf32>, tensor<5xf32>) -> tensor<20xf32>
// STAGE0: %[[SUM:.*]] = mesh.all_reduce %[[FLAT]] on @world mesh_axes = [0] {shardc.category = #shardc.category<grads>} : tensor<20xf32> -> tensor<20xf32>
// STAGE0: %[[SUMS:.*]] = shardc.Slice %[[SUM]] {shardc.category = #shardc.category<grads>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<20xf32> -> tensor<5xf32>
// STAGE0: %[[QUARTER:.*]] = shardc.Constant dense<2.500000e-01> : tensor<f32>
// STAGE0: %[[GS:.*]] = shardc.Mul %[[SUMS]], %[[QUARTER]] {shardc.category = #shardc.category<grads>}
// STAGE0: %[[SUMW:.*]] = shardc.Slice %[[SUM]] {shardc.category = #shardc.category<grads>, starts = array<i64: 5>, steps = array<i64: 1>} : tensor<20xf32> -> tensor<10xf32>
// STAGE0: %[[SUMW2:.*]] = shardc.Reshape %[[SUMW]] {shardc.category = #shardc.category<grads>} : tensor<10xf32> -> tensor<5x2xf32>
// STAGE0: %[[GW:.*]] = shardc.Mul %[[SUMW2]], %{{.*}} {shardc.category = #shardc.category<grads>}
// STAGE0: %[[SUMB:.*]] = shardc.Slice %[[SUM]] {shardc.category = #shardc.category<grads>, starts = array<i64: 15>, steps = array<i64: 1>} : tensor<20xf32> -> tensor<5xf32>
// STAGE0: %[[GB:.*]] = shardc.Mul %[[SUMB]], %{{.*}} {shardc.category = #shardc.category<grads>}
// Updates stay per parameter, on the averaged gradients.
// STAGE0: shardc.SGDUpdate %[[W]], %[[GW]],
// STAGE0: shardc.SGDUpdate %[[B]], %[[GB]],
// STAGE0: shardc.SGDUpdate %[[S]], %[[GS]],
// STAGE0-NOT: mesh.all_reduce

// A 62-byte bucket cap, and kernels of a second each (so fc.bias's gradient
// exists seconds after the others): head.scale (20 bytes) and fc.weight
// (40 bytes) fill the first bucket, issued right after fc.weight's gradient
// and before fc.bias's is computed; fc.bias (already flat) is a bucket of
// its own.
// BUCKET-LABEL: func.func @main
// BUCKET: %[[DS:.*]] = shardc.Reshape %{{.*}} : tensor<1x5xf32> -> tensor<5xf32>
// BUCKET: %[[DW:.*]] = shardc.Gemm
// BUCKET: %[[DWF:.*]] = shardc.Reshape %[[DW]] {shardc.category = #shardc.category<comm>} : tensor<5x2xf32> -> tensor<10xf32>
// BUCKET: %[[B1:.*]] = shardc.Concat %[[DS]], %[[DWF]] {{.*}} -> tensor<15xf32>
// BUCKET: mesh.all_reduce %[[B1]] on @world mesh_axes = [0] {shardc.category = #shardc.category<grads>} : tensor<15xf32> -> tensor<15xf32>
// BUCKET: %[[DB:.*]] = shardc.Reshape %{{.*}} : tensor<1x5xf32> -> tensor<5xf32>
// BUCKET: mesh.all_reduce %[[DB]] on @world mesh_axes = [0] {shardc.category = #shardc.category<grads>} : tensor<5xf32> -> tensor<5xf32>
// BUCKET-NOT: mesh.all_reduce

// Stage 1: the gradients are all-reduced as in stage 0, then each unit's
// averaged gradients and parameters are flattened, padded with zeros to a
// multiple of 4 and sliced to this rank's shard; one update per unit runs on
// shard-sized optimizer state, and mesh.all_gather rebuilds the parameters.
// STAGE1-LABEL: func.func @main
// STAGE1-SAME: %[[W:[a-z0-9]+]]: tensor<5x2xf32> {shardc.param = "fc.weight", shardc.unit = 0 : i64}
// STAGE1-SAME: %[[B:[a-z0-9]+]]: tensor<5xf32> {shardc.param = "fc.bias", shardc.unit = 0 : i64}
// STAGE1-SAME: %[[S:[a-z0-9]+]]: tensor<5xf32> {shardc.param = "head.scale", shardc.unit = 1 : i64}
// STAGE1-SAME: %[[STEP:[a-z0-9]+]]: tensor<f32> {shardc.state = "optimizer.step"}, %[[M0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.state = "unit0.momentum_buffer", shardc.state_shard_of = "unit0", shardc.state_suffix = ".momentum_buffer"}, %[[M1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.state = "unit1.momentum_buffer", shardc.state_shard_of = "unit1", shardc.state_suffix = ".momentum_buffer"})
// STAGE1-SAME: -> (tensor<f32>, tensor<f32> {shardc.updates = 4 : i64}, tensor<4xf32> {shardc.updates = 5 : i64}, tensor<5x2xf32> {shardc.updates = 1 : i64}, tensor<5xf32> {shardc.updates = 2 : i64}, tensor<2xf32> {shardc.updates = 6 : i64}, tensor<5xf32> {shardc.updates = 3 : i64})
// STAGE1-SAME: shardc.zero_stage = 1 : i64
// ZeRO-1 keeps the all-reduced full gradients until the step: each unit's
// gradient shard is sliced out right before its update.
// STAGE1: %[[SUM:.*]] = mesh.all_reduce %{{.*}} : tensor<20xf32> -> tensor<20xf32>
// STAGE1: %[[GS:.*]] = shardc.Mul %{{.*}} {shardc.category = #shardc.category<grads>} : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
// STAGE1: %[[GW:.*]] = shardc.Mul %{{.*}} {shardc.category = #shardc.category<grads>} : (tensor<5x2xf32>, tensor<f32>) -> tensor<5x2xf32>
// STAGE1: %[[GB:.*]] = shardc.Mul %{{.*}} {shardc.category = #shardc.category<grads>} : (tensor<5xf32>, tensor<f32>) -> tensor<5xf32>
// STAGE1: %[[NSTEP:.*]] = shardc.Increment %[[STEP]]
// STAGE1: %[[GWF:.*]] = shardc.Reshape %[[GW]] {shardc.category = #shardc.category<comm>} : tensor<5x2xf32> -> tensor<10xf32>
// STAGE1: %[[PAD1:.*]] = shardc.Constant {shardc.category = #shardc.category<comm>} dense<0.000000e+00> : tensor<1xf32>
// STAGE1: %[[G0F:.*]] = shardc.Concat %[[GWF]], %[[GB]], %[[PAD1]] {axis = 0 : i64, shardc.category = #shardc.category<comm>} : (tensor<10xf32>, tensor<5xf32>, tensor<1xf32>) -> tensor<16xf32>
// STAGE1: %[[GS0:.*]] = mesh.all_slice %[[G0F]] on @world mesh_axes = [0] slice_axis = 0 {shardc.category = #shardc.category<grads>{{.*}}} : tensor<16xf32> -> tensor<4xf32>
// STAGE1: %[[WF:.*]] = shardc.Reshape %[[W]] {shardc.category = #shardc.category<params>} : tensor<5x2xf32> -> tensor<10xf32>
// STAGE1: %[[PPAD1:.*]] = shardc.Constant {shardc.category = #shardc.category<params>} dense<0.000000e+00> : tensor<1xf32>
// STAGE1: %[[P0F:.*]] = shardc.Concat %[[WF]], %[[B]], %[[PPAD1]] {axis = 0 : i64, shardc.category = #shardc.category<params>} : (tensor<10xf32>, tensor<5xf32>, tensor<1xf32>) -> tensor<16xf32>
// STAGE1: %[[PS0:.*]] = mesh.all_slice %[[P0F]] on @world mesh_axes = [0] slice_axis = 0 {shardc.category = #shardc.category<params>{{.*}}} : tensor<16xf32> -> tensor<4xf32>
// STAGE1: %[[NP0:.*]], %[[NM0:.*]] = shardc.SGDUpdate %[[PS0]], %[[GS0]], %[[M0]], %[[NSTEP]] {{.*}} : tensor<4xf32>, tensor<f32>
// STAGE1: %[[FULL0:.*]] = mesh.all_gather %[[NP0]] on @world mesh_axes = [0] gather_axis = 0 {shardc.category = #shardc.category<params>} : tensor<4xf32> -> tensor<16xf32>
// STAGE1: %[[NWF:.*]] = shardc.Slice %[[FULL0]] {shardc.category = #shardc.category<params>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<16xf32> -> tensor<10xf32>
// STAGE1: %[[NW:.*]] = shardc.Reshape %[[NWF]] {shardc.category = #shardc.category<params>} : tensor<10xf32> -> tensor<5x2xf32>
// STAGE1: %[[NB:.*]] = shardc.Slice %[[FULL0]] {shardc.category = #shardc.category<params>, starts = array<i64: 10>, steps = array<i64: 1>} : tensor<16xf32> -> tensor<5xf32>
// STAGE1: %[[PAD3:.*]] = shardc.Constant {shardc.category = #shardc.category<comm>} dense<0.000000e+00> : tensor<3xf32>
// STAGE1: %[[GSF:.*]] = shardc.Concat %[[GS]], %[[PAD3]] {axis = 0 : i64, shardc.category = #shardc.category<comm>} : (tensor<5xf32>, tensor<3xf32>) -> tensor<8xf32>
// STAGE1: %[[GS1:.*]] = mesh.all_slice %[[GSF]] on @world mesh_axes = [0] slice_axis = 0 {shardc.category = #shardc.category<grads>{{.*}}} : tensor<8xf32> -> tensor<2xf32>
// STAGE1: %[[PPAD3:.*]] = shardc.Constant {shardc.category = #shardc.category<params>} dense<0.000000e+00> : tensor<3xf32>
// STAGE1: %[[P1F:.*]] = shardc.Concat %[[S]], %[[PPAD3]] {axis = 0 : i64, shardc.category = #shardc.category<params>} : (tensor<5xf32>, tensor<3xf32>) -> tensor<8xf32>
// STAGE1: %[[PS1:.*]] = mesh.all_slice %[[P1F]] {{.*}} : tensor<8xf32> -> tensor<2xf32>
// STAGE1: %[[NP1:.*]], %[[NM1:.*]] = shardc.SGDUpdate %[[PS1]], %[[GS1]], %[[M1]], %[[NSTEP]] {{.*}} : tensor<2xf32>, tensor<f32>
// STAGE1: %[[FULL1:.*]] = mesh.all_gather %[[NP1]] {{.*}} : tensor<2xf32> -> tensor<8xf32>
// STAGE1: %[[NS:.*]] = shardc.Slice %[[FULL1]] {shardc.category = #shardc.category<params>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<8xf32> -> tensor<5xf32>
// STAGE1-NOT: shardc.SGDUpdate
// STAGE1: return %{{.*}}, %[[NSTEP]], %[[NM0]], %[[NW]], %[[NB]], %[[NM1]], %[[NS]] :

// The whole stage-1 pipeline keeps the parameters as shards between steps:
// each unit is gathered where forward first reads it and kept through
// backward (one gather per unit and step, as at stage 3 with
// reshard-after-forward=false); the updates write the shards in place.
// Each unit's gradients are reduce-scattered (a rank reads only its shard
// of their sum), once per step: no all-reduce.
// SHARDED1-LABEL: func.func @main
// SHARDED1-SAME: %[[P0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.param_shard = "unit0"}
// SHARDED1-SAME: %[[P1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.param_shard = "unit1"}
// SHARDED1-SAME: shardc.reshard_after_forward = 1 : i64
// SHARDED1-SAME: shardc.zero_stage = 1 : i64
// SHARDED1: mesh.all_gather %[[P0]] {{.*}} : tensor<4xf32> -> tensor<16xf32>
// SHARDED1: %[[FULL1:.*]] = mesh.all_gather %[[P1]] {{.*}} : tensor<2xf32> -> tensor<8xf32>
// SHARDED1: %[[S:.*]] = shardc.Slice %[[FULL1]]
// SHARDED1: shardc.Mul %{{.*}}, %[[S]] :
// SHARDED1: shardc.Mul %[[S]], %{{.*}} {shardc.backward}
// SHARDED1: mesh.reduce_scatter %{{.*}} : tensor<8xf32> -> tensor<2xf32>
// SHARDED1: mesh.reduce_scatter %{{.*}} : tensor<16xf32> -> tensor<4xf32>
// SHARDED1-NOT: mesh.all_reduce
// SHARDED1: shardc.SGDUpdate %[[P0]],
// SHARDED1: shardc.SGDUpdate %[[P1]],
// SHARDED1-NOT: mesh.all_gather
// SHARDED1: return

// Stage 2: no all-reduce; each unit's flattened, padded gradient is
// reduce-scattered (and averaged) as soon as its last gradient exists:
// head.scale's before fc.weight's gradient is even computed.
// STAGE2-LABEL: func.func @main
// STAGE2-SAME: %[[STEP:[a-z0-9]+]]: tensor<f32> {shardc.state = "optimizer.step"}, %[[M0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.state = "unit0.momentum_buffer", shardc.state_shard_of = "unit0", shardc.state_suffix = ".momentum_buffer"}, %[[M1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.state = "unit1.momentum_buffer", shardc.state_shard_of = "unit1", shardc.state_suffix = ".momentum_buffer"})
// STAGE2-NOT: mesh.all_reduce
// STAGE2: %[[DS:.*]] = shardc.Reshape %{{.*}} : tensor<1x5xf32> -> tensor<5xf32>
// STAGE2: %[[PAD3:.*]] = shardc.Constant {shardc.category = #shardc.category<comm>} dense<0.000000e+00> : tensor<3xf32>
// STAGE2: %[[G1F:.*]] = shardc.Concat %[[DS]], %[[PAD3]] {{.*}} -> tensor<8xf32>
// STAGE2: %[[RS1:.*]] = mesh.reduce_scatter %[[G1F]] on @world mesh_axes = [0] scatter_axis = 0 {shardc.category = #shardc.category<grads>} : tensor<8xf32> -> tensor<2xf32>
// STAGE2: %[[QUARTER1:.*]] = shardc.Constant dense<2.500000e-01> : tensor<f32>
// STAGE2: %[[GS1:.*]] = shardc.Mul %[[RS1]], %[[QUARTER1]] {shardc.category = #shardc.category<grads>} : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
// STAGE2: %[[DW:.*]] = shardc.Gemm
// STAGE2: %[[DB:.*]] = shardc.Reshape %{{.*}} : tensor<1x5xf32> -> tensor<5xf32>
// STAGE2: %[[DWF:.*]] = shardc.Reshape %[[DW]] {shardc.category = #shardc.category<comm>} : tensor<5x2xf32> -> tensor<10xf32>
// STAGE2: %[[PAD1:.*]] = shardc.Constant {shardc.category = #shardc.category<comm>} dense<0.000000e+00> : tensor<1xf32>
// STAGE2: %[[G0F:.*]] = shardc.Concat %[[DWF]], %[[DB]], %[[PAD1]] {{.*}} -> tensor<16xf32>
// STAGE2: %[[RS0:.*]] = mesh.reduce_scatter %[[G0F]] on @world mesh_axes = [0] scatter_axis = 0 {shardc.category = #shardc.category<grads>} : tensor<16xf32> -> tensor<4xf32>
// STAGE2: %[[GS0:.*]] = shardc.Mul %[[RS0]], %{{.*}} {shardc.category = #shardc.category<grads>} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// STAGE2: %[[PS0:.*]] = mesh.all_slice %{{.*}} : tensor<16xf32> -> tensor<4xf32>
// STAGE2: %[[NP0:.*]], %[[NM0:.*]] = shardc.SGDUpdate %[[PS0]], %[[GS0]], %[[M0]], %{{.*}} : tensor<4xf32>, tensor<f32>
// STAGE2: mesh.all_gather %[[NP0]] {{.*}} : tensor<4xf32> -> tensor<16xf32>
// STAGE2: %[[PS1:.*]] = mesh.all_slice %{{.*}} : tensor<8xf32> -> tensor<2xf32>
// STAGE2: %[[NP1:.*]], %[[NM1:.*]] = shardc.SGDUpdate %[[PS1]], %[[GS1]], %[[M1]], %{{.*}} : tensor<2xf32>, tensor<f32>
// STAGE2: mesh.all_gather %[[NP1]] {{.*}} : tensor<2xf32> -> tensor<8xf32>
// STAGE2-NOT: mesh.all_reduce

// SHARDED2-LABEL: func.func @main
// SHARDED2-SAME: %[[P0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.param_shard = "unit0"}
// SHARDED2-SAME: %[[P1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.param_shard = "unit1"}
// SHARDED2-SAME: shardc.reshard_after_forward = 1 : i64
// SHARDED2: mesh.all_gather %[[P0]] {{.*}} : tensor<4xf32> -> tensor<16xf32>
// SHARDED2: mesh.all_gather %[[P1]] {{.*}} : tensor<2xf32> -> tensor<8xf32>
// SHARDED2: mesh.reduce_scatter %{{.*}} : tensor<8xf32> -> tensor<2xf32>
// SHARDED2: mesh.reduce_scatter %{{.*}} : tensor<16xf32> -> tensor<4xf32>
// SHARDED2: shardc.SGDUpdate %[[P0]],
// SHARDED2: shardc.SGDUpdate %[[P1]],
// SHARDED2-NOT: mesh.all_gather
// SHARDED2-NOT: mesh.all_reduce
// SHARDED2: return

// Stage 3: each unit is one shardc.param_shard argument recording its
// layout; the parameter arguments are gone. A unit is gathered before each
// use window and its parameters are views of the gathered buffer: unit 0
// only in forward, unit 1 (also used by backward) again in backward. The
// update runs on the shard argument and writes it in place.
// STAGE3-LABEL: func.func @main
// STAGE3-SAME: (%[[X:[a-z0-9]+]]: tensor<2x2xf32> {shardc.input = "x"}, %[[STEP:[a-z0-9]+]]: tensor<f32> {shardc.state = "optimizer.step"}, %[[M0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.state = "unit0.momentum_buffer", shardc.state_shard_of = "unit0", shardc.state_suffix = ".momentum_buffer"}, %[[M1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.state = "unit1.momentum_buffer", shardc.state_shard_of = "unit1", shardc.state_suffix = ".momentum_buffer"}, %[[P0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.param_shard = "unit0"}, %[[P1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.param_shard = "unit1"})
// STAGE3-SAME: -> (tensor<f32>, tensor<f32> {shardc.updates = 1 : i64}, tensor<4xf32> {shardc.updates = 2 : i64}, tensor<2xf32> {shardc.updates = 3 : i64}, tensor<4xf32> {shardc.updates = 4 : i64}, tensor<2xf32> {shardc.updates = 5 : i64})
// STAGE3-SAME: shardc.zero_stage = 3 : i64
// STAGE3: %[[FULL0:.*]] = mesh.all_gather %[[P0]] on @world mesh_axes = [0] gather_axis = 0 {shardc.category = #shardc.category<params>} : tensor<4xf32> -> tensor<16xf32>
// STAGE3: %[[WF:.*]] = shardc.Slice %[[FULL0]] {shardc.category = #shardc.category<params>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<16xf32> -> tensor<10xf32>
// STAGE3: %[[W:.*]] = shardc.Reshape %[[WF]] {shardc.category = #shardc.category<params>} : tensor<10xf32> -> tensor<5x2xf32>
// STAGE3: %[[B:.*]] = shardc.Slice %[[FULL0]] {shardc.category = #shardc.category<params>, starts = array<i64: 10>, steps = array<i64: 1>} : tensor<16xf32> -> tensor<5xf32>
// STAGE3: %[[Y:.*]] = shardc.Gemm %[[X]], %[[W]], %[[B]]
// STAGE3: %[[FULL1:.*]] = mesh.all_gather %[[P1]] on @world mesh_axes = [0] gather_axis = 0 {shardc.category = #shardc.category<params>} : tensor<2xf32> -> tensor<8xf32>
// STAGE3: %[[S:.*]] = shardc.Slice %[[FULL1]] {shardc.category = #shardc.category<params>, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<8xf32> -> tensor<5xf32>
// STAGE3: shardc.Mul %[[Y]], %[[S]] :
// STAGE3: %[[FULL1B:.*]] = mesh.all_gather %[[P1]] {{.*}} : tensor<2xf32> -> tensor<8xf32>
// STAGE3: %[[SB:.*]] = shardc.Slice %[[FULL1B]] {{.*}} : tensor<8xf32> -> tensor<5xf32>
// STAGE3: shardc.Mul %[[SB]], %{{.*}} {shardc.backward}
// STAGE3-NOT: mesh.all_gather
// STAGE3: mesh.reduce_scatter %{{.*}} : tensor<8xf32> -> tensor<2xf32>
// STAGE3: mesh.reduce_scatter %{{.*}} : tensor<16xf32> -> tensor<4xf32>
// STAGE3: %[[NSTEP:.*]] = shardc.Increment %[[STEP]]
// STAGE3: %[[NP0:.*]], %[[NM0:.*]] = shardc.SGDUpdate %[[P0]], %{{.*}}, %[[M0]], %[[NSTEP]] {{.*}} : tensor<4xf32>, tensor<f32>
// STAGE3: %[[NP1:.*]], %[[NM1:.*]] = shardc.SGDUpdate %[[P1]], %{{.*}}, %[[M1]], %[[NSTEP]] {{.*}} : tensor<2xf32>, tensor<f32>
// STAGE3-NOT: mesh.all_gather
// STAGE3: return %{{.*}}, %[[NSTEP]], %[[NM0]], %[[NM1]], %[[NP0]], %[[NP1]] :

// Without reshard-after-forward a unit has one use window: backward reads
// head.scale from the forward gather.
// KEEP-LABEL: func.func @main
// KEEP-SAME: %[[P0:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.param_shard = "unit0"}
// KEEP-SAME: %[[P1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.param_shard = "unit1"}
// KEEP: mesh.all_gather %[[P0]]
// KEEP: %[[FULL1:.*]] = mesh.all_gather %[[P1]] {{.*}} : tensor<2xf32> -> tensor<8xf32>
// KEEP: %[[S:.*]] = shardc.Slice %[[FULL1]]
// KEEP: shardc.Mul %{{.*}}, %[[S]] :
// KEEP: shardc.Mul %[[S]], %{{.*}} {shardc.backward}
// KEEP-NOT: mesh.all_gather

// Resharding to groups of 2 after forward: the mesh's axis splits into 2x2,
// shards spread over both axes; after its last forward use, head.scale's
// gathered unit (8) is sliced along axis 1 (4 of it kept), and backward
// gathers the slice within the group of 2. fc.* has no backward use and no
// slice. reshard-after-forward=4 (the whole shard group) is the default.
// RESHARD: mesh.mesh @world(shape = 2x2)
// RESHARD-LABEL: func.func @main
// RESHARD-SAME: %[[P1:[a-z0-9]+]]: tensor<2xf32> {shardc.flat_params = ["head.scale"], shardc.flat_types = [tensor<5xf32>], shardc.param_shard = "unit1"}
// RESHARD-SAME: shardc.reshard_after_forward = 2 : i64, shardc.world_size = 4 : i64
// RESHARD: mesh.all_gather %{{.*}} on @world mesh_axes = [0, 1] gather_axis = 0 {{.*}} : tensor<4xf32> -> tensor<16xf32>
// RESHARD: %[[FULL1:.*]] = mesh.all_gather %[[P1]] on @world mesh_axes = [0, 1] gather_axis = 0 {{.*}} : tensor<2xf32> -> tensor<8xf32>
// RESHARD: %[[S:.*]] = shardc.Slice %[[FULL1]]
// RESHARD: shardc.Mul %{{.*}}, %[[S]] :
// RESHARD-NEXT: %[[KEPT:.*]] = mesh.all_slice %[[FULL1]] on @world mesh_axes = [1] slice_axis = 0 {{.*}} : tensor<8xf32> -> tensor<4xf32>
// RESHARD: %[[BACK:.*]] = mesh.all_gather %[[KEPT]] on @world mesh_axes = [1] gather_axis = 0 {shardc.backward, {{.*}}} : tensor<4xf32> -> tensor<8xf32>
// RESHARD: %[[BS:.*]] = shardc.Slice %[[BACK]]
// RESHARD: shardc.Mul %[[BS]], %{{.*}} {shardc.backward}
// RESHARD: mesh.reduce_scatter %{{.*}} on @world mesh_axes = [0, 1] scatter_axis = 0 {{.*}} : tensor<8xf32> -> tensor<2xf32>
// RESHARD-NOT: mesh.all_gather
// RESHARD-NOT: mesh.all_slice
// RESHARD: return

// With hybrid sharding (groups of 4 of 8 ranks), the shard group's axis
// splits: a 2x2x2 mesh, shards along axes 1 and 2, backward gathers along
// axis 2, gradient shards all-reduced along axis 0.
// RESHARD-HYBRID: mesh.mesh @world(shape = 2x2x2)
// RESHARD-HYBRID: %[[FULL1:.*]] = mesh.all_gather %{{.*}} on @world mesh_axes = [1, 2] gather_axis = 0 {{.*}} : tensor<2xf32> -> tensor<8xf32>
// RESHARD-HYBRID: %[[KEPT:.*]] = mesh.all_slice %[[FULL1]] on @world mesh_axes = [2] slice_axis = 0 {{.*}} : tensor<8xf32> -> tensor<4xf32>
// RESHARD-HYBRID: mesh.all_gather %[[KEPT]] on @world mesh_axes = [2] gather_axis = 0 {shardc.backward, {{.*}}} : tensor<4xf32> -> tensor<8xf32>
// RESHARD-HYBRID: %[[RS:.*]] = mesh.reduce_scatter %{{.*}} on @world mesh_axes = [1, 2] scatter_axis = 0 {{.*}} : tensor<8xf32> -> tensor<2xf32>
// RESHARD-HYBRID: mesh.all_reduce %[[RS]] on @world mesh_axes = [0]

// Hybrid sharding, 2 groups of 2 ranks: the mesh is 2x2, shards are half
// the units (16 / 2, 6 / 2: padded for 2 shards, not 4), gathered and
// reduce-scattered within the group (axis 1); each reduce-scattered shard is
// then summed across the groups (axis 0), which hold replicas of it, and
// averaged over all 4 ranks. hybrid-shard=4 (every rank) is plain ZeRO-3.
// HYBRID3: mesh.mesh @world(shape = 2x2)
// HYBRID3-LABEL: func.func @main
// HYBRID3-SAME: %[[P0:[a-z0-9]+]]: tensor<8xf32> {shardc.flat_params = ["fc.weight", "fc.bias"], shardc.flat_types = [tensor<5x2xf32>, tensor<5xf32>], shardc.param_shard = "unit0"}
// HYBRID3-SAME: shardc.shard_group = 2 : i64, shardc.world_size = 4 : i64, shardc.zero_stage = 3 : i64
// HYBRID3: mesh.all_gather %[[P0]] on @world mesh_axes = [1] gather_axis = 0 {{.*}} : tensor<8xf32> -> tensor<16xf32>
// HYBRID3: %[[RS1:.*]] = mesh.reduce_scatter %{{.*}} on @world mesh_axes = [1] scatter_axis = 0 {{.*}} : tensor<6xf32> -> tensor<3xf32>
// HYBRID3: %[[AR1:.*]] = mesh.all_reduce %[[RS1]] on @world mesh_axes = [0] {{.*}} : tensor<3xf32> -> tensor<3xf32>
// HYBRID3: %[[Q:.*]] = shardc.Constant dense<2.500000e-01> : tensor<f32>
// HYBRID3: shardc.Mul %[[AR1]], %[[Q]]
// HYBRID3: %[[RS0:.*]] = mesh.reduce_scatter %{{.*}} on @world mesh_axes = [1] scatter_axis = 0 {{.*}} : tensor<16xf32> -> tensor<8xf32>
// HYBRID3: mesh.all_reduce %[[RS0]] on @world mesh_axes = [0] {{.*}} : tensor<8xf32> -> tensor<8xf32>
// HYBRID3: shardc.SGDUpdate %[[P0]], {{.*}} : tensor<8xf32>, tensor<f32>
// HYBRID3-NOT: mesh.all_gather
// HYBRID3: return
// Stage 2: the same gradient path; the updated shards are gathered within
// the group.
// HYBRID2: mesh.mesh @world(shape = 2x2)
// HYBRID2: mesh.reduce_scatter %{{.*}} mesh_axes = [1] {{.*}} : tensor<6xf32> -> tensor<3xf32>
// HYBRID2: mesh.all_reduce %{{.*}} mesh_axes = [0] {{.*}} : tensor<3xf32> -> tensor<3xf32>
// HYBRID2: mesh.reduce_scatter %{{.*}} mesh_axes = [1] {{.*}} : tensor<16xf32> -> tensor<8xf32>
// HYBRID2: mesh.all_reduce %{{.*}} mesh_axes = [0] {{.*}} : tensor<8xf32> -> tensor<8xf32>
// HYBRID2: mesh.all_gather %{{.*}} mesh_axes = [1] gather_axis = 0 {{.*}} : tensor<8xf32> -> tensor<16xf32>
// Stage 1: the gradient path of stage 2 (reduce-scattered within the
// group, the shard all-reduced across the groups); the optimizer state is
// sharded and the units gathered within the group.
// HYBRID1: mesh.mesh @world(shape = 2x2)
// HYBRID1: mesh.all_gather %{{.*}} on @world mesh_axes = [1] gather_axis = 0 {{.*}} : tensor<8xf32> -> tensor<16xf32>
// HYBRID1: mesh.reduce_scatter %{{.*}} mesh_axes = [1] {{.*}} : tensor<6xf32> -> tensor<3xf32>
// HYBRID1: mesh.all_reduce %{{.*}} mesh_axes = [0] {{.*}} : tensor<3xf32> -> tensor<3xf32>
// HYBRID1: mesh.reduce_scatter %{{.*}} mesh_axes = [1] {{.*}} : tensor<16xf32> -> tensor<8xf32>
// HYBRID1: mesh.all_reduce %{{.*}} mesh_axes = [0] {{.*}} : tensor<8xf32> -> tensor<8xf32>
// HYBRID1-NOT: mesh.all_slice
func.func @main(%arg0: tensor<2x2xf32> {shardc.input = "x"}, %arg1: tensor<5x2xf32> {shardc.param = "fc.weight", shardc.unit = 0 : i64}, %arg2: tensor<5xf32> {shardc.param = "fc.bias", shardc.unit = 0 : i64}, %arg3: tensor<5xf32> {shardc.param = "head.scale", shardc.unit = 1 : i64}, %arg4: tensor<f32> {shardc.state = "optimizer.step"}, %arg5: tensor<5x2xf32> {shardc.state = "fc.weight.momentum_buffer"}, %arg6: tensor<5xf32> {shardc.state = "fc.bias.momentum_buffer"}, %arg7: tensor<5xf32> {shardc.state = "head.scale.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 4 : i64}, tensor<5x2xf32> {shardc.updates = 1 : i64}, tensor<5x2xf32> {shardc.updates = 5 : i64}, tensor<5xf32> {shardc.updates = 2 : i64}, tensor<5xf32> {shardc.updates = 6 : i64}, tensor<5xf32> {shardc.updates = 3 : i64}, tensor<5xf32> {shardc.updates = 7 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"]} {
  %0 = shardc.Constant dense<1.000000e+00> : tensor<2x5xf32>
  %1 = shardc.Gemm %arg0, %arg1, %arg2 {transB = true} : (tensor<2x2xf32>, tensor<5x2xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  %2 = shardc.Mul %1, %arg3 : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  %3 = shardc.ReduceSum %2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x5xf32> -> tensor<f32>
  %4 = shardc.Mul %arg3, %0 {shardc.backward} : (tensor<5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %5 = shardc.Mul %1, %0 {shardc.backward} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %6 = shardc.ReduceSum %5 {axes = array<i64: 0>, keepdims = true, shardc.backward} : tensor<2x5xf32> -> tensor<1x5xf32>
  %7 = shardc.Reshape %6 {shardc.backward} : tensor<1x5xf32> -> tensor<5xf32>
  %8 = shardc.Gemm %4, %arg0 {shardc.backward, transA = true} : (tensor<2x5xf32>, tensor<2x2xf32>) -> tensor<5x2xf32>
  %9 = shardc.ReduceSum %4 {axes = array<i64: 0>, keepdims = true, shardc.backward} : tensor<2x5xf32> -> tensor<1x5xf32>
  %10 = shardc.Reshape %9 {shardc.backward} : tensor<1x5xf32> -> tensor<5xf32>
  %11 = shardc.Increment %arg4 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg1, %8, %arg5, %11 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.899999976, nesterov = false, weight_decay = 0.000000e+00} : tensor<5x2xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg2, %10, %arg6, %11 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.899999976, nesterov = false, weight_decay = 0.000000e+00} : tensor<5xf32>, tensor<f32>
  %new_param_2, %new_momentum_buffer_3 = shardc.SGDUpdate %arg3, %7, %arg7, %11 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.899999976, nesterov = false, weight_decay = 0.000000e+00} : tensor<5xf32>, tensor<f32>
  return %3, %11, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1, %new_param_2, %new_momentum_buffer_3 : tensor<f32>, tensor<f32>, tensor<5x2xf32>, tensor<5x2xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}

// -----

// A tied parameter: emb.weight is both the embedding and (transposed) the
// head, used twice in forward and once in backward. Stage 3 gathers it once
// per window (both forward uses read the same view); its gradient (the sum
// of both uses) is reduce-scattered once, and all-reduced once in stage 0.
// STAGE0-LABEL: func.func @main
// STAGE0: %[[DE:.*]] = shardc.Add %{{.*}} {shardc.backward, {{.*}}} : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
// STAGE0: %[[DEF:.*]] = shardc.Reshape %[[DE]] {shardc.category = #shardc.category<comm>} : tensor<5x3xf32> -> tensor<15xf32>
// STAGE0: %[[FLAT:.*]] = shardc.Concat %{{.*}}, %[[DEF]] {{.*}} : (tensor<5xf32>, tensor<15xf32>) -> tensor<20xf32>
// STAGE0: mesh.all_reduce %[[FLAT]]
// STAGE0-NOT: mesh.all_reduce
// STAGE0-NOT: mesh.all_gather

// BUCKET-LABEL: func.func @main
// BUCKET: mesh.all_reduce %{{.*}} : tensor<5xf32> -> tensor<5xf32>
// BUCKET: mesh.all_reduce %{{.*}} : tensor<15xf32> -> tensor<15xf32>
// BUCKET-NOT: mesh.all_reduce

// STAGE2-LABEL: func.func @main
// STAGE2: %[[DE:.*]] = shardc.Add %{{.*}} : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
// STAGE2: %[[DEF:.*]] = shardc.Reshape %[[DE]] {shardc.category = #shardc.category<comm>} : tensor<5x3xf32> -> tensor<15xf32>
// STAGE2: %[[DEP:.*]] = shardc.Concat %[[DEF]], %{{.*}} : (tensor<15xf32>, tensor<1xf32>) -> tensor<16xf32>
// STAGE2: mesh.reduce_scatter %[[DEP]] {{.*}} : tensor<16xf32> -> tensor<4xf32>
// STAGE2-NOT: mesh.reduce_scatter {{.*}} : tensor<16xf32>

// STAGE3-LABEL: func.func @main
// STAGE3-SAME: %[[E:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["emb.weight"], shardc.flat_types = [tensor<5x3xf32>], shardc.param_shard = "unit0"}
// STAGE3: %[[FULL:.*]] = mesh.all_gather %[[E]] {{.*}} : tensor<4xf32> -> tensor<16xf32>
// STAGE3: %[[EF:.*]] = shardc.Slice %[[FULL]] {{.*}} : tensor<16xf32> -> tensor<15xf32>
// STAGE3: %[[EMB:.*]] = shardc.Reshape %[[EF]] {{.*}} : tensor<15xf32> -> tensor<5x3xf32>
// STAGE3: %[[H:.*]] = shardc.Gather %[[EMB]],
// STAGE3-NOT: mesh.all_gather %[[E]]
// STAGE3: shardc.Gemm %[[H]], %[[EMB]], %{{.*}} {transB = true}
// STAGE3: %[[FULLB:.*]] = mesh.all_gather %[[E]] {{.*}} : tensor<4xf32> -> tensor<16xf32>
// STAGE3: %[[EFB:.*]] = shardc.Slice %[[FULLB]]
// STAGE3: %[[EMBB:.*]] = shardc.Reshape %[[EFB]]
// STAGE3: shardc.Gemm %{{.*}}, %[[EMBB]] {shardc.backward}
// STAGE3-NOT: mesh.all_gather %[[E]]
// STAGE3: %[[DE:.*]] = shardc.Add %{{.*}} : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
// STAGE3: %[[DEF:.*]] = shardc.Reshape %[[DE]] {shardc.category = #shardc.category<comm>} : tensor<5x3xf32> -> tensor<15xf32>
// STAGE3: %[[DEP:.*]] = shardc.Concat %[[DEF]], %{{.*}} : (tensor<15xf32>, tensor<1xf32>) -> tensor<16xf32>
// STAGE3: mesh.reduce_scatter %[[DEP]] {{.*}} : tensor<16xf32> -> tensor<4xf32>
// STAGE3-NOT: mesh.reduce_scatter {{.*}} : tensor<16xf32>
// STAGE3: shardc.SGDUpdate %[[E]],

// KEEP-LABEL: func.func @main
// KEEP-SAME: %[[E:[a-z0-9]+]]: tensor<4xf32> {shardc.flat_params = ["emb.weight"], shardc.flat_types = [tensor<5x3xf32>], shardc.param_shard = "unit0"}
// KEEP: %[[FULL:.*]] = mesh.all_gather %[[E]]
// KEEP: %[[EF:.*]] = shardc.Slice %[[FULL]]
// KEEP: %[[EMB:.*]] = shardc.Reshape %[[EF]]
// KEEP: shardc.Gemm %{{.*}}, %[[EMB]] {shardc.backward}
// KEEP-NOT: mesh.all_gather %[[E]]
func.func @main(%arg0: tensor<2xi64> {shardc.input = "idx"}, %arg1: tensor<2xi64> {shardc.input = "labels"}, %arg2: tensor<5x3xf32> {shardc.param = "emb.weight", shardc.unit = 0 : i64}, %arg3: tensor<5xf32> {shardc.param = "head.bias", shardc.unit = 1 : i64}, %arg4: tensor<f32> {shardc.state = "optimizer.step"}, %arg5: tensor<5x3xf32> {shardc.state = "emb.weight.momentum_buffer"}, %arg6: tensor<5xf32> {shardc.state = "head.bias.momentum_buffer"}) -> (tensor<f32>, tensor<f32> {shardc.updates = 4 : i64}, tensor<5x3xf32> {shardc.updates = 2 : i64}, tensor<5x3xf32> {shardc.updates = 5 : i64}, tensor<5xf32> {shardc.updates = 3 : i64}, tensor<5xf32> {shardc.updates = 6 : i64}) attributes {shardc.loss = "loss", shardc.optimizer = "sgd", shardc.output_names = ["loss"]} {
  %0 = shardc.Constant {shardc.backward} dense<1.000000e+00> : tensor<f32>
  %1 = shardc.Gather %arg2, %arg0 {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %2 = shardc.Gemm %1, %arg2, %arg3 {transB = true} : (tensor<2x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  %loss = shardc.SoftmaxCrossEntropyLoss %2, %arg1 {reduction = #shardc.reduction<mean>} : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
  %3 = shardc.SoftmaxCrossEntropyLossGrad %0, %2, %arg1 {reduction = #shardc.reduction<mean>, shardc.backward} : (tensor<f32>, tensor<2x5xf32>, tensor<2xi64>) -> tensor<2x5xf32>
  %4 = shardc.Gemm %3, %arg2 {shardc.backward} : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
  %5 = shardc.Gemm %3, %1 {shardc.backward, transA = true} : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  %6 = shardc.ReduceSum %3 {axes = array<i64: 0>, keepdims = true, shardc.backward} : tensor<2x5xf32> -> tensor<1x5xf32>
  %7 = shardc.Reshape %6 {shardc.backward} : tensor<1x5xf32> -> tensor<5xf32>
  %8 = shardc.GatherGrad %4, %arg0 {axis = 0 : i64, shardc.backward} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<5x3xf32>
  %9 = shardc.Add %5, %8 {shardc.backward} : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  %10 = shardc.Increment %arg4 : tensor<f32>
  %new_param, %new_momentum_buffer = shardc.SGDUpdate %arg2, %9, %arg5, %10 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.899999976, nesterov = false, weight_decay = 0.000000e+00} : tensor<5x3xf32>, tensor<f32>
  %new_param_0, %new_momentum_buffer_1 = shardc.SGDUpdate %arg3, %7, %arg6, %10 {dampening = 0.000000e+00, lr = 1.000000e-03, momentum = 0.899999976, nesterov = false, weight_decay = 0.000000e+00} : tensor<5xf32>, tensor<f32>
  return %loss, %10, %new_param, %new_momentum_buffer, %new_param_0, %new_momentum_buffer_1 : tensor<f32>, tensor<f32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5xf32>, tensor<5xf32>
}
