// Parameters and float inputs enter the model through casts to the param
// dtype; ops on the model's data compute in it, a float32 constant is
// rounded where it meets the data, the loss computes in float32 on logits
// cast up, and the step's float outputs are float32. The function records
// the dtypes for the ZeRO passes.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-mixed-precision='param-dtype=bf16' | FileCheck %s
// CHECK-LABEL: func.func @main
// CHECK-SAME: shardc.param_dtype = bf16, shardc.reduce_dtype = bf16
// CHECK: %[[X:.*]] = shardc.Cast %arg0 : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK: %[[W:.*]] = shardc.Cast %arg2 : tensor<3x5xf32> -> tensor<3x5xbf16>
// CHECK: %[[H:.*]] = shardc.MatMul %[[X]], %[[W]] : (tensor<4x3xbf16>, tensor<3x5xbf16>) -> tensor<4x5xbf16>
// CHECK: %[[C:.*]] = shardc.Constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[CB:.*]] = shardc.Cast %[[C]] : tensor<f32> -> tensor<bf16>
// CHECK: shardc.Mul %[[H]], %[[CB]] : (tensor<4x5xbf16>, tensor<bf16>) -> tensor<4x5xbf16>
// CHECK: %[[Z:.*]] = shardc.Add {{.*}} -> tensor<4x5xbf16>
// CHECK: %[[ZF:.*]] = shardc.Cast %[[Z]] : tensor<4x5xbf16> -> tensor<4x5xf32>
// CHECK: shardc.SoftmaxCrossEntropyLoss %[[ZF]], %arg1 {{.*}} -> tensor<f32>
// CHECK: return %[[ZF]],

// float16 likewise; a reduce dtype of its own.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-mixed-precision='param-dtype=fp16 reduce-dtype=fp32' | FileCheck %s --check-prefix=F16
// F16: shardc.param_dtype = f16, shardc.reduce_dtype = f32
// F16: shardc.MatMul {{.*}} -> tensor<4x5xf16>

// float32 throughout (the default): nothing changes.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-mixed-precision | FileCheck %s --check-prefix=FP32
// FP32-NOT: shardc.param_dtype
// FP32-NOT: shardc.Cast
// A reduce dtype alone (float32 compute, bfloat16 gradient reduction) only
// records it.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir -shardc-mixed-precision='reduce-dtype=bf16' | FileCheck %s --check-prefix=REDUCE
// REDUCE: shardc.param_dtype = f32, shardc.reduce_dtype = bf16
// REDUCE-NOT: shardc.Cast

// BatchNormalization's running statistics are buffers: float32 by default,
// beside the bfloat16 input, scale and bias; with buffer-dtype=bf16 they are
// cast, and the optimizer stores their new values back in float32.
// RUN: shardc-opt %S/Inputs/bn-forward.mlir -shardc-mixed-precision='param-dtype=bf16' | FileCheck %s --check-prefix=BN
// BN: shardc.BatchNormalization {{.*}} : (tensor<2x3xbf16>, tensor<3xbf16>, tensor<3xbf16>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3xbf16>, tensor<3xf32>, tensor<3xf32>)
// RUN: shardc-opt %S/Inputs/bn-forward.mlir --shardc-train-pipeline='optimizer=sgd param-dtype=bf16 buffer-dtype=bf16' | FileCheck %s --check-prefix=BNBUF
// BNBUF: %[[RM:.*]] = shardc.Cast %arg1 : tensor<3xf32> -> tensor<3xbf16>
// BNBUF: %{{.*}}, %[[NM:.*]], %[[NV:.*]] = shardc.BatchNormalization {{.*}}, %[[RM]], {{.*}} -> (tensor<2x3xbf16>, tensor<3xbf16>, tensor<3xbf16>)
// BNBUF: %[[SM:.*]] = shardc.Cast %[[NM]] : tensor<3xbf16> -> tensor<3xf32>
// BNBUF: %[[SV:.*]] = shardc.Cast %[[NV]] : tensor<3xbf16> -> tensor<3xf32>
// BNBUF: return {{.*}}, %[[SM]], %[[SV]] :

// The ZeRO passes. Stage 0: gradients come out of backward in bfloat16 and
// are all-reduced in it, then cast up for the float32 update.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir --shardc-train-pipeline='optimizer=sgd param-dtype=bf16 world-size=2 zero-stage=0' | FileCheck %s --check-prefix=S0
// S0: shardc.AllReduceStart {{.*}} : tensor<20xbf16>
// S0: shardc.Cast {{.*}}category<grads>{{.*}} : tensor<3x5xbf16> -> tensor<3x5xf32>
// S0: shardc.SGDUpdate %arg{{[0-9]+}}, {{.*}} : tensor<3x5xf32>
// Stage 3: the float32 shard is cast before the all-gather (half the
// bytes), the parameters are bfloat16 views of the gathered buffer, and the
// gradients are reduce-scattered in bfloat16 ...
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir --shardc-train-pipeline='optimizer=sgd param-dtype=bf16 world-size=2 zero-stage=3' | FileCheck %s --check-prefix=S3
// S3: %[[SB:.*]] = shardc.Cast %arg{{[0-9]+}} {shardc.category = #shardc.category<params>} : tensor<8xf32> -> tensor<8xbf16>
// S3-NEXT: shardc.AllGatherStart %[[SB]] {{.*}} : tensor<8xbf16> -> !shardc.pending<tensor<16xbf16>>
// S3: shardc.ReduceScatterStart {{.*}} : tensor<16xbf16> -> !shardc.pending<tensor<8xbf16>>
// S3: shardc.Cast {{.*}} : tensor<8xbf16> -> tensor<8xf32>
// ... or, with reduce-dtype=fp32 (fp32_reduce_scatter), in float32.
// RUN: shardc-opt %S/Inputs/mixed-precision-forward.mlir --shardc-train-pipeline='optimizer=sgd param-dtype=bf16 reduce-dtype=fp32 world-size=2 zero-stage=3' | FileCheck %s --check-prefix=S3F
// S3F: shardc.AllGatherStart {{.*}} : tensor<8xbf16> -> !shardc.pending<tensor<16xbf16>>
// S3F: shardc.ReduceScatterStart {{.*}} : tensor<16xf32> -> !shardc.pending<tensor<8xf32>>

// A model without float32 parameters or inputs (here float64) has nothing
// to compute in the param dtype: a warning, and nothing changes.
// RUN: shardc-opt %S/Inputs/f64-forward.mlir -shardc-mixed-precision='param-dtype=bf16' 2>&1 | FileCheck %s --check-prefix=F64
// F64: warning: mixed-precision: no float32 parameter or input reaches the model; nothing computes in 'bf16'
// F64-NOT: shardc.Cast
