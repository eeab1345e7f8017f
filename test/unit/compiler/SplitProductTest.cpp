//===- SplitProductTest.cpp - q, k, v written where they are read ---------===//
//
// A projection into q, k and v (MatMul of a transposed weight, a bias Add,
// a Split of the last axis, as PyTorch exports attention) compiles, at
// stage 0 and at stage 3, to one Gemm per piece whose weight and bias are
// views of rows of the whole weight and bias (in place: no op copies them),
// with no Split and no bias Add left in forward.
//
//===----------------------------------------------------------------------===//
#include "test/unit/compiler/CompileToPlan.h"

#include <algorithm>
#include <set>
#include <vector>

using namespace shardc;

namespace {

const char *kModel = R"(<
  ir_version: 8,
  opset_import: ["" : 15]
>
g (float[2, 3, 4] x, int64[6] y,
   float[12, 4] w = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48},
   float[12] b = {-1,-2,-3,-4,-5,-6,-7,-8,-9,-10,-11,-12}) => (float loss)
{
  wt = Transpose<perm=[1,0]>(w)
  p = MatMul(x, wt)
  h = Add(p, b)
  q, k, v = Split<axis=2>(h)
  s = Mul(q, k)
  t = Add(s, v)
  shape = Constant<value=int64[2] {6, 4}>()
  logits = Reshape(t, shape)
  loss = SoftmaxCrossEntropyLoss(logits, y)
}
)";

class SplitProduct : public ::testing::TestWithParam<int> {};

TEST_P(SplitProduct, EachPieceIsAGemmOverViewsOfTheWeight) {
  TrainPipelineOptions opts;
  opts.optimizer = OptimizerKind::Adam;
  opts.worldSize = 2;
  opts.stage = GetParam();
  test::CompiledPlan compiled;
  ASSERT_NO_FATAL_FAILURE(test::compileToPlan(kModel, opts, compiled));
  const plan::Plan &p = compiled.plan();
  // The buffer a view's chain of aliases ends in.
  auto root = [&](int32_t id) {
    const plan::Buffer &buf = p.buffers(id);
    return buf.is_alias() ? buf.alias_of() : id;
  };
  int32_t w = -1, b = -1;
  for (int32_t i = 0; i < p.buffers_size(); ++i)
    if (p.buffers(i).kind() == plan::PARAMETER)
      (p.buffers(i).name() == "w" ? w : b) = i;
  // At stage 3 the weight a Gemm reads is the gathered unit's.
  std::set<int32_t> weights, biases;
  if (GetParam() < 3) {
    ASSERT_GE(w, 0);
    ASSERT_GE(b, 0);
    weights.insert(w);
    biases.insert(b);
  }
  int pieces = 0;
  std::vector<int64_t> wOffsets, bOffsets;
  for (const plan::Op &op : p.ops()) {
    EXPECT_NE(op.type(), "Split") << op.name();
    if (op.type() == "AllGatherStart") {
      weights.insert(op.outputs(0));
      biases.insert(op.outputs(0));
    }
    if (op.type() != "Gemm" || op.inputs_size() < 3 || op.inputs(2) < 0)
      continue;
    // A forward piece: [6, 4] = x [6, 4] times 4 rows of w, plus 4 of b.
    const plan::Buffer &out = p.buffers(op.outputs(0));
    ASSERT_EQ(out.shape_size(), 2) << op.name();
    EXPECT_EQ(out.shape(1), 4) << op.name();
    const plan::Buffer &wi = p.buffers(op.inputs(1)),
                       &bi = p.buffers(op.inputs(2));
    EXPECT_TRUE(wi.is_alias()) << op.name() << " copies its weight rows";
    EXPECT_TRUE(bi.is_alias()) << op.name() << " copies its bias";
    EXPECT_TRUE(weights.count(root(op.inputs(1)))) << op.name();
    EXPECT_TRUE(biases.count(root(op.inputs(2)))) << op.name();
    wOffsets.push_back(wi.alias_offset());
    bOffsets.push_back(bi.alias_offset());
    ++pieces;
  }
  ASSERT_EQ(pieces, 3);
  // Consecutive rows: 4 rows of 4 floats, 4 floats of the bias apart.
  std::sort(wOffsets.begin(), wOffsets.end());
  std::sort(bOffsets.begin(), bOffsets.end());
  for (int k = 1; k < 3; ++k) {
    EXPECT_EQ(wOffsets[k] - wOffsets[k - 1], 64);
    EXPECT_EQ(bOffsets[k] - bOffsets[k - 1], 16);
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, SplitProduct, ::testing::Values(0, 3));

} // namespace
