// RUN: shardc-opt %s '-shardc-autodiff=freeze=^emb' '-shardc-optimizer=optimizer=sgd lr=0.1' -shardc-wrap-units | FileCheck %s --check-prefix=UNITS
// RUN: shardc-opt %s '-shardc-autodiff=freeze=^emb' '-shardc-optimizer=optimizer=sgd lr=0.1' -shardc-wrap-units -shardc-zero='world-size=2 zero-stage=3' | FileCheck %s --check-prefix=STAGE3
// RUN: shardc-opt %s '-shardc-autodiff=freeze=^emb' '-shardc-optimizer=optimizer=sgd lr=0.1' -shardc-wrap-units -shardc-zero='world-size=2 zero-stage=2' | FileCheck %s --check-prefix=STAGE2

// Frozen parameters get wrap units of their own, numbered after the trained
// ones in order of first use and split by element type (emb.weight and
// emb.scale are one layer, but one is f32 and the other f64).
// UNITS-LABEL: func.func @main
// UNITS-SAME: {shardc.param = "emb.weight", shardc.role = #shardc.param_role<frozen>, shardc.unit = 2 : i64}
// UNITS-SAME: {shardc.param = "head.weight", shardc.role = #shardc.param_role<trained>, shardc.unit = 0 : i64}
// UNITS-SAME: {shardc.param = "emb.scale", shardc.role = #shardc.param_role<frozen>, shardc.unit = 1 : i64}

// At ZeRO-3 a frozen unit is a shard argument with the frozen role, gathered
// before its use and never updated; the trained head is gathered and updated
// in place.
// STAGE3-LABEL: func.func @main
// STAGE3-NOT: shardc.param = "emb.weight"
// STAGE3-SAME: %[[H:[a-z0-9]+]]: tensor<3xf32> {shardc.flat_params = ["head.weight"], shardc.flat_types = [tensor<2x3xf32>], shardc.param_shard = "unit0"}
// STAGE3-SAME: %[[S:[a-z0-9]+]]: tensor<1xf64> {shardc.flat_params = ["emb.scale"], shardc.flat_types = [tensor<1xf64>], shardc.param_shard = "frozen0", shardc.role = #shardc.param_role<frozen>}
// STAGE3-SAME: %[[E:[a-z0-9]+]]: tensor<3xf32> {shardc.flat_params = ["emb.weight"], shardc.flat_types = [tensor<2x3xf32>], shardc.param_shard = "frozen1", shardc.role = #shardc.param_role<frozen>}
// STAGE3-DAG: mesh.all_gather %[[E]] {{.*}} : tensor<3xf32> -> tensor<6xf32>
// emb.scale is only used cast to f32: the shard is cast before the gather,
// which moves half the bytes (a cast commutes with gathering).
// STAGE3-DAG: %[[SC:.*]] = shardc.Cast %[[S]] {shardc.category = #shardc.category<params>} : tensor<1xf64> -> tensor<1xf32>
// STAGE3-DAG: mesh.all_gather %[[SC]] {{.*}} : tensor<1xf32> -> tensor<2xf32>
// STAGE3: mesh.all_gather %[[H]] {{.*}} : tensor<3xf32> -> tensor<6xf32>
// STAGE3-NOT: mesh.all_gather
// STAGE3: shardc.SGDUpdate %[[H]]
// STAGE3-NOT: SGDUpdate

// At stage 2 (and 1) frozen units are shards between steps too, like the
// trained ones: each unit is gathered once per step and kept through
// backward.
// STAGE2-LABEL: func.func @main
// STAGE2-SAME: %[[E:[a-z0-9]+]]: tensor<3xf32> {shardc.flat_params = ["emb.weight"], shardc.flat_types = [tensor<2x3xf32>], shardc.param_shard = "frozen1", shardc.role = #shardc.param_role<frozen>}
// STAGE2-COUNT-3: mesh.all_gather
// STAGE2-NOT: mesh.all_gather
// STAGE2: shardc.SGDUpdate
// STAGE2-NOT: SGDUpdate
func.func @main(%x: tensor<2x3xf32> {shardc.input = "x"},
                %e: tensor<2x3xf32> {shardc.param = "emb.weight"},
                %h: tensor<2x3xf32> {shardc.param = "head.weight"},
                %s: tensor<1xf64> {shardc.param = "emb.scale"}) -> tensor<f32>
    attributes {shardc.output_names = ["loss"]} {
  %c = shardc.Cast %s : tensor<1xf64> -> tensor<1xf32>
  %0 = shardc.Mul %x, %e : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = shardc.Mul %0, %c : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32>
  %2 = shardc.Mul %1, %h : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = shardc.ReduceSum %2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %3 : tensor<f32>
}
