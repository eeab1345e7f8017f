//===- ShardSliceTest.cpp - ZeRO-1/2 shards without whole copies ----------===//
//
// A small model compiled for 2 ranks at stages 1 and 2, in two wrap units:
// the first of a weight and its bias, the second of one 2-d weight alone.
// Each rank's parameter and gradient shards are ShardSlices of the
// parameters and gradients themselves (no Concat builds the unit's flat
// buffer first), ZeRO's 1/N gradient average is the updates' grad_scale
// (no Mul), and the lone weight's all-gather writes straight into it (no op
// copies the gathered buffer into the parameter). At stage 2 a Concat may
// only build a reduce-scatter's input. With four units, at most two
// parameter gathers are in flight.
//
//===----------------------------------------------------------------------===//
#include "test/unit/compiler/CompileToPlan.h"

#include <map>
#include <set>

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

  int32_t head = -1;
  for (int32_t i = 0; i < p.buffers_size(); ++i)
    if (p.buffers(i).kind() == plan::PARAMETER &&
        p.buffers(i).name() == "head_weight")
      head = i;
  ASSERT_GE(head, 0);
  // Stage 2's reduce-scatters still read the unit's gradients concatenated.
  std::set<int32_t> reduced;
  for (const plan::Op &op : p.ops())
    if (op.type() == "ReduceScatterStart")
      reduced.insert(op.inputs(0));
  int slices = 0, gathersIntoHead = 0, updates = 0;
  for (const plan::Op &op : p.ops()) {
    if (op.type() == "Concat")
      EXPECT_TRUE(reduced.count(op.outputs(0))) << op.name();
    EXPECT_NE(op.type(), "Mul") << op.name();
    if (op.type() == "ShardSlice") {
      ++slices;
      // The first unit's shards read its two parameters (or gradients).
      EXPECT_TRUE(op.inputs_size() == 1 || op.inputs_size() == 2) << op.name();
    }
    if (op.type() == "AdamUpdate") {
      ++updates;
      EXPECT_GE(op.inputs(5), 0) << op.name() << " has no grad_scale";
    }
    for (int32_t out : op.outputs())
      if (out == head) {
        EXPECT_TRUE(op.type() == "AllGatherStart" ||
                    op.type() == "CollectiveWait")
            << op.type() << " '" << op.name() << "' writes head_weight";
        gathersIntoHead += op.type() == "AllGatherStart";
      }
  }
  // Stage 1 slices the parameters and the gradients of both units; stage 2
  // reduce-scatters the gradients.
  EXPECT_EQ(slices, GetParam() == 1 ? 4 : 2);
  EXPECT_EQ(updates, 2);
  EXPECT_EQ(gathersIntoHead, 1);
  llvm::sys::fs::remove_directories(compiled.dir);
}

INSTANTIATE_TEST_SUITE_P(Stages, ShardSlices, ::testing::Values(1, 2));

const char *kDeepModel = R"(<
  ir_version: 8,
  opset_import: ["" : 15]
>
g (float[4, 4] x, int64[4] y,
   float[4, 4] w0 = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}, float[4] b0 = {1,2,3,4},
   float[4, 4] w1 = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}, float[4] b1 = {1,2,3,4},
   float[4, 4] w2 = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}, float[4] b2 = {1,2,3,4},
   float[4, 4] w3 = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}, float[4] b3 = {1,2,3,4}) => (float loss)
{
  h0 = Gemm<transB=1>(x, w0, b0)
  r0 = Relu(h0)
  h1 = Gemm<transB=1>(r0, w1, b1)
  r1 = Relu(h1)
  h2 = Gemm<transB=1>(r1, w2, b2)
  r2 = Relu(h2)
  logits = Gemm<transB=1>(r2, w3, b3)
  loss = SoftmaxCrossEntropyLoss(logits, y)
}
)";

// Four wrap units: at most two gathers of updated shards are in flight at
// any point of the step, and each gathered buffer is read for the last
// time (its parameters taken out) before the gather two later starts.
TEST_P(ShardSlices, AtMostTwoParameterGathersInFlight) {
  TrainPipelineOptions opts;
  opts.optimizer = OptimizerKind::Adam;
  opts.worldSize = 2;
  opts.stage = GetParam();
  opts.minNumParams = 20; // one layer a unit
  test::CompiledPlan compiled;
  ASSERT_NO_FATAL_FAILURE(test::compileToPlan(kDeepModel, opts, compiled));
  const plan::Plan &p = compiled.plan();
  ASSERT_EQ(p.units_size(), 4);
  // The root buffer of each gather's result, and where each root is read.
  auto rootOf = [&](int32_t b) {
    return p.buffers(b).is_alias() ? p.buffers(b).alias_of() : b;
  };
  std::vector<int32_t> gathered;
  std::vector<size_t> startAt;
  std::map<int32_t, size_t> lastRead;
  for (size_t i = 0; i < static_cast<size_t>(p.ops_size()); ++i) {
    const plan::Op &op = p.ops(i);
    if (op.type() == "AllGatherStart") {
      gathered.push_back(op.outputs(0));
      startAt.push_back(i);
    }
    if (op.type() != "AllGatherStart")
      for (int32_t in : op.inputs())
        if (in >= 0)
          lastRead[rootOf(in)] = i;
  }
  ASSERT_EQ(gathered.size(), 4u);
  for (size_t k = 0; k + 2 < gathered.size(); ++k)
    EXPECT_LT(lastRead[gathered[k]], startAt[k + 2])
        << "gather " << k << " is still read when gather " << k + 2
        << " starts";
  llvm::sys::fs::remove_directories(compiled.dir);
}

} // namespace
