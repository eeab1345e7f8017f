//===- BucketViewTest.cpp - Gradient buckets without a copy ---------------===//
//
// A small MLP compiled for 2 ranks at stage 0 (gradients all-reduced in one
// bucket; stages 1-3 reduce-scatter each wrap unit instead): no Concat writes
// the bucket, the all-reduce's input is a TEMP buffer that is no view, and
// every gradient that goes into it is written by its producer straight into it,
// through a view at its block's offset, the blocks back to back and filling the
// buffer, none copied.
//
//===----------------------------------------------------------------------===//
#include "test/unit/compiler/CompileToPlan.h"

#include <map>

using namespace shardc;

namespace {

const char *kModel = R"(<
  ir_version: 8,
  opset_import: ["" : 15]
>
g (float[4, 3] x, int64[4] y,
   float[6, 3] fc1_weight = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18},
   float[6] fc1_bias = {-1,-2,-3,-4,-5,-6},
   float[5, 6] head_weight = {0.5,1.5,2.5,3.5,4.5,5.5,6.5,7.5,8.5,9.5,10.5,11.5,12.5,13.5,14.5,15.5,16.5,17.5,18.5,19.5,20.5,21.5,22.5,23.5,24.5,25.5,26.5,27.5,28.5,29.5},
   float[5] head_bias = {9,8,7,6,5}) => (float loss)
{
  h = Gemm<transB=1>(x, fc1_weight, fc1_bias)
  r = Relu(h)
  logits = Gemm<transB=1>(r, head_weight, head_bias)
  loss = SoftmaxCrossEntropyLoss(logits, y)
}
)";

uint64_t bytesOf(const plan::Buffer &b) {
  uint64_t n = 4; // f32
  for (int64_t d : b.shape())
    n *= d;
  return n;
}

TEST(BucketView, GradientsAreWrittenIntoTheCollectiveBuffer) {
  TrainPipelineOptions opts;
  opts.optimizer = OptimizerKind::Sgd;
  opts.worldSize = 2;
  opts.stage = 0;
  // Writing validates the plan (a view an op writes is a block of a TEMP
  // buffer that is no view).
  test::CompiledPlan compiled;
  ASSERT_NO_FATAL_FAILURE(test::compileToPlan(kModel, opts, compiled));
  const plan::Plan &p = compiled.plan();

  std::string start = "AllReduceStart";
  int collectives = 0;
  for (const plan::Op &op : p.ops()) {
    if (op.type() != start)
      continue;
    ++collectives;
    int32_t bucket = op.inputs(0);
    const plan::Buffer &root = p.buffers(bucket);
    for (const plan::Op &other : p.ops())
      if (other.type() == "Concat")
        for (int32_t out : other.outputs())
          EXPECT_NE(out, bucket) << "a Concat writes the bucket";
    EXPECT_EQ(root.kind(), plan::TEMP);
    EXPECT_FALSE(root.is_alias());
    // The views ops write into it: blocks back to back, filling it.
    std::map<uint64_t, uint64_t> blocks;
    int copies = 0;
    for (const plan::Op &writerOp : p.ops())
      for (int32_t out : writerOp.outputs()) {
        if (out < 0 || !p.buffers(out).is_alias() ||
            p.buffers(out).alias_of() != bucket)
          continue;
        copies += writerOp.type() == "Identity";
        EXPECT_NE(writerOp.type(), "Concat") << writerOp.name();
        EXPECT_TRUE(
            blocks
                .emplace(p.buffers(out).alias_offset(), bytesOf(p.buffers(out)))
                .second)
            << "two writes at one offset";
      }
    uint64_t next = 0;
    for (auto [offset, bytes] : blocks) {
      EXPECT_EQ(offset, next) << "a gap or an overlap in " << root.name();
      next = offset + bytes;
    }
    EXPECT_EQ(next, bytesOf(root)) << root.name();
    EXPECT_EQ(blocks.size(), 4u) << root.name(); // 2 weights, 2 biases
    EXPECT_EQ(copies, 0) << root.name();
  }
  EXPECT_GE(collectives, 1);
  llvm::sys::fs::remove_directories(compiled.dir);
}

} // namespace
