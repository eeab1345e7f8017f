//===- ShardSliceTest.cpp - ZeRO-1/2 shards without whole copies ----------===//
//
// A small model compiled for 2 ranks at stages 1 and 2, in two wrap units:
// the first of a weight and its bias, the second of one 2-d weight alone.
// Each unit is one whole buffer on every rank, of which only the rank's
// shard (a view) is current between steps: the step gathers the unit around
// it in place, once, in forward, keeps it through backward and updates the
// shard in place. Each unit's gradients are reduce-scattered (no ShardSlice
// of summed gradients: a rank reads only its shard of the sum), ZeRO's 1/N
// gradient average is the updates' grad_scale (no Mul), and a Concat may
// only build a reduce-scatter's input. With four units, every gather starts
// before the first gradient reduction: the gathers overlap forward, not the
// reductions of backward. Computing in bfloat16, a unit is gathered from
// a cast of its shard: then the shard is a buffer of its own.
//
//===----------------------------------------------------------------------===//
#include "test/unit/compiler/CompileToPlan.h"

#include <map>
#include <set>
#include <string>
#include <vector>

using namespace shardc;

namespace {

const char *kModel = R"(<
  ir_version: 8,
  opset_import: ["" : 15]
>
g (float[4, 3] x, int64[4] y,
   float[6, 3] fc1_weight = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18},
   float[6] fc1_bias = {-1,-2,-3,-4,-5,-6},
   float[6, 4] head_weight = {0.5,1.5,2.5,3.5,4.5,5.5,6.5,7.5,8.5,9.5,10.5,11.5,12.5,13.5,14.5,15.5,16.5,17.5,18.5,19.5,20.5,21.5,22.5,23.5}) => (float loss)
{
  h = Gemm<transB=1>(x, fc1_weight, fc1_bias)
  r = Relu(h)
  logits = MatMul(r, head_weight)
  loss = SoftmaxCrossEntropyLoss(logits, y)
}
)";

class ShardSlices : public ::testing::TestWithParam<int> {};

TEST_P(ShardSlices, ShardTheUnitsPartsAndGatherInPlace) {
  TrainPipelineOptions opts;
  opts.optimizer = OptimizerKind::Adam;
  opts.worldSize = 2;
  opts.stage = GetParam();
  // fc1_weight (18) + fc1_bias (6) reach 24 elements in one unit;
  // head_weight (24) is the second.
  opts.minNumParams = 24;
  test::CompiledPlan compiled;
  ASSERT_NO_FATAL_FAILURE(test::compileToPlan(kModel, opts, compiled));
  const plan::Plan &p = compiled.plan();
  ASSERT_EQ(p.units_size(), 2);

  // No parameter is a buffer of its own: each unit is one shard buffer.
  for (const plan::Buffer &b : p.buffers()) {
    if (b.kind() == plan::PARAMETER) {
      EXPECT_TRUE(b.name() != "fc1_weight" && b.name() != "fc1_bias" &&
                  b.name() != "head_weight")
          << b.name();
    }
  }
  // Each unit is whole: every rank holds all of it, its shard is a view of
  // its block, the unit's one gather fills the buffer around the view in
  // place, and the update writes the view in place (no copy).
  std::map<int32_t, int32_t> unitOfView; // shard view -> unit buffer
  for (const plan::FlatUnit &u : p.units()) {
    ASSERT_GE(u.buffer(), 0) << u.name();
    EXPECT_TRUE(u.whole()) << u.name();
    const plan::Buffer &b = p.buffers(u.buffer());
    EXPECT_EQ(b.kind(), plan::PARAMETER) << u.name();
    EXPECT_LE(b.shard_count(), 1) << u.name();
    ASSERT_EQ(b.shape_size(), 1) << u.name();
    EXPECT_EQ(b.shape(0), u.padded_elements()) << u.name();
    for (int32_t i = 0; i < p.buffers_size(); ++i) {
      const plan::Buffer &v = p.buffers(i);
      if (!v.is_alias() || v.alias_of() != u.buffer() ||
          v.alias_shard_stride() == 0)
        continue;
      EXPECT_EQ(v.alias_offset(), 0u) << v.name();
      EXPECT_EQ(v.alias_shard_stride(), u.padded_elements() / 2 * 4)
          << v.name();
      EXPECT_EQ(unitOfView.count(i), 0u);
      unitOfView[i] = u.buffer();
    }
  }
  EXPECT_EQ(unitOfView.size(), 2u);
  std::map<int32_t, int> gathersInto, updatesOf;
  // The reduce-scatters read the unit's gradients concatenated.
  std::set<int32_t> reduced;
  for (const plan::Op &op : p.ops())
    if (op.type() == "ReduceScatterStart")
      reduced.insert(op.inputs(0));
  int slices = 0, gathers = 0, updates = 0;
  for (const plan::Op &op : p.ops()) {
    if (op.type() == "Concat")
      EXPECT_TRUE(reduced.count(op.outputs(0))) << op.name();
    EXPECT_NE(op.type(), "Mul") << op.name();
    if (op.type() == "ShardSlice") {
      ++slices;
      // The first unit's shard reads its two gradients.
      EXPECT_TRUE(op.inputs_size() == 1 || op.inputs_size() == 2) << op.name();
    }
    if (op.type() == "AdamUpdate") {
      ++updates;
      EXPECT_GE(op.inputs(5), 0) << op.name() << " has no grad_scale";
      EXPECT_EQ(op.outputs(0), op.inputs(0)) << op.name() << " copies";
      ++updatesOf[op.outputs(0)];
    }
    if (op.type() == "AllGatherStart") {
      ++gathers;
      auto unit = unitOfView.find(op.inputs(0));
      ASSERT_NE(unit, unitOfView.end()) << op.name();
      EXPECT_EQ(op.outputs(0), unit->second) << op.name();
      ++gathersInto[unit->second];
    } else if (op.type() != "CollectiveWait") {
      for (int32_t out : op.outputs()) {
        if (unitOfView.count(out)) {
          EXPECT_EQ(op.type(), "AdamUpdate") << op.name() << " writes a shard";
        }
      }
    }
  }
  for (auto [view, unit] : unitOfView) {
    EXPECT_EQ(gathersInto[unit], 1) << p.buffers(unit).name();
    EXPECT_EQ(updatesOf[view], 1) << p.buffers(view).name();
  }
  // Both stages reduce-scatter the units' gradients. Each unit is gathered
  // once.
  EXPECT_EQ(slices, 0);
  EXPECT_EQ(updates, 2);
  EXPECT_EQ(gathers, 2);
  llvm::sys::fs::remove_directories(compiled.dir);
}

INSTANTIATE_TEST_SUITE_P(Stages, ShardSlices, ::testing::Values(1, 2));

/// An MLP of `layers` Gemm layers of 4 x 4 weights and 4 biases (w0, b0,
/// ...) with ReLUs between them and a softmax cross-entropy loss, as ONNX
/// text.
std::string layeredModel(int layers) {
  std::string params, body, input = "x";
  for (int k = 0; k < layers; ++k) {
    std::string n = std::to_string(k);
    params += ",\n   float[4, 4] w" + n +
              " = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}, float[4] b" + n +
              " = {1,2,3,4}";
    bool last = k + 1 == layers;
    std::string out = last ? "logits" : "h" + n;
    body += "  " + out + " = Gemm<transB=1>(" + input + ", w" + n + ", b" + n +
            ")\n";
    if (!last) {
      body += "  r" + n + " = Relu(h" + n + ")\n";
      input = "r" + n;
    }
  }
  return "<\n  ir_version: 8,\n  opset_import: [\"\" : 15]\n>\n"
         "g (float[4, 4] x, int64[4] y" +
         params + ") => (float loss)\n{\n" + body +
         "  loss = SoftmaxCrossEntropyLoss(logits, y)\n}\n";
}

/// layeredModel(layers) with Adam for 2 ranks at `stage`, a unit a layer.
void compileLayers(int layers, int stage, test::CompiledPlan &out) {
  TrainPipelineOptions opts;
  opts.optimizer = OptimizerKind::Adam;
  opts.worldSize = 2;
  opts.stage = stage;
  opts.minNumParams = 20; // one layer a unit
  ASSERT_NO_FATAL_FAILURE(
      test::compileToPlan(layeredModel(layers).c_str(), opts, out));
}

// Four wrap units: each is gathered once, in forward, before the first
// gradient reduction starts, and no gather follows an update (the updated
// shards are gathered by the next step's forward).
TEST_P(ShardSlices, GathersRunInForward) {
  test::CompiledPlan compiled;
  ASSERT_NO_FATAL_FAILURE(compileLayers(4, GetParam(), compiled));
  const plan::Plan &p = compiled.plan();
  ASSERT_EQ(p.units_size(), 4);
  std::vector<size_t> gathers;
  size_t firstReduction = p.ops_size(), firstUpdate = p.ops_size();
  for (size_t i = 0; i < static_cast<size_t>(p.ops_size()); ++i) {
    const std::string &type = p.ops(i).type();
    if (type == "AllGatherStart")
      gathers.push_back(i);
    if ((type == "AllReduceStart" || type == "ReduceScatterStart") &&
        firstReduction == static_cast<size_t>(p.ops_size()))
      firstReduction = i;
    if (type == "AdamUpdate" &&
        firstUpdate == static_cast<size_t>(p.ops_size()))
      firstUpdate = i;
  }
  ASSERT_EQ(gathers.size(), 4u);
  ASSERT_LT(firstReduction, static_cast<size_t>(p.ops_size()));
  for (size_t k = 0; k < gathers.size(); ++k) {
    EXPECT_LT(gathers[k], firstReduction) << "gather " << k;
    EXPECT_LT(gathers[k], firstUpdate) << "gather " << k;
  }
  llvm::sys::fs::remove_directories(compiled.dir);
}

// The updates that move past the last gradient reduction to overlap it are
// the latest ones only, about as many elements as it sends (the first
// unit's 20): the others keep their places, freeing their reduced gradients
// early.
TEST_P(ShardSlices, OnlyTheLatestUpdatesWaitForTheLastReduction) {
  test::CompiledPlan compiled;
  ASSERT_NO_FATAL_FAILURE(compileLayers(6, GetParam(), compiled));
  const plan::Plan &p = compiled.plan();
  ASSERT_EQ(p.units_size(), 6);
  int lastReduction = -1;
  for (int i = 0; i < p.ops_size(); ++i)
    if (p.ops(i).type() == "AllReduceStart" ||
        p.ops(i).type() == "ReduceScatterStart")
      lastReduction = i;
  ASSERT_GE(lastReduction, 0);
  int before = 0, after = 0;
  for (int i = 0; i < p.ops_size(); ++i)
    if (p.ops(i).type() == "AdamUpdate")
      ++(i < lastReduction ? before : after);
  EXPECT_GE(before, 1) << "every update waits for the last reduction";
  // The first unit's own update, and at least one more to overlap.
  EXPECT_GE(after, 2);
  llvm::sys::fs::remove_directories(compiled.dir);
}

// With bfloat16 compute the gathered unit is a cast of the shard, not the
// shard's own buffer: the unit's parameter buffer holds the shards.
TEST(ShardSlicesMixedPrecision, CastGathersKeepShardBuffers) {
  TrainPipelineOptions opts;
  opts.optimizer = OptimizerKind::Adam;
  opts.worldSize = 2;
  opts.stage = 1;
  opts.paramDtype = Precision::Bf16;
  opts.minNumParams = 24;
  test::CompiledPlan compiled;
  ASSERT_NO_FATAL_FAILURE(test::compileToPlan(kModel, opts, compiled));
  const plan::Plan &p = compiled.plan();
  ASSERT_EQ(p.units_size(), 2);
  for (const plan::FlatUnit &u : p.units()) {
    ASSERT_GE(u.buffer(), 0) << u.name();
    EXPECT_FALSE(u.whole()) << u.name();
    EXPECT_EQ(p.buffers(u.buffer()).shard_count(), 2) << u.name();
  }
  for (const plan::Buffer &b : p.buffers())
    EXPECT_EQ(b.alias_shard_stride(), 0u) << b.name();
  llvm::sys::fs::remove_directories(compiled.dir);
}

} // namespace
