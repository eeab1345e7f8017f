//===- PartitionTest.cpp - ZeRO-3 flat parameter partitioning -------------===//
//
// A model whose parameter sizes do not divide by the world size is compiled
// to a ZeRO-3 plan for world sizes 1-5. For every wrap unit: the parameters
// are laid out back to back, the flat buffer is padded to a multiple of the
// world size by less than one element per rank, every element is owned by
// exactly one rank (the shards each rank loads tile the flat buffer), the
// padding is zero, and stripping it gives back every parameter bit for bit.
//
//===----------------------------------------------------------------------===//
#include "test/unit/compiler/CompileToPlan.h"

#include "runtime/Backend.h"
#include "runtime/cpu/Kernels.h"

#include <cstring>
#include <map>
#include <set>

using namespace shardc;

namespace {

const char *kModel = R"(<
  ir_version: 8,
  opset_import: ["" : 15]
>
g (float[2, 3] x, int64[2] y,
   float[7, 3] fc1_weight = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21},
   float[7] fc1_bias = {-1,-2,-3,-4,-5,-6,-7},
   float[5, 7] head_weight = {0.5,1.5,2.5,3.5,4.5,5.5,6.5,7.5,8.5,9.5,10.5,11.5,12.5,13.5,14.5,15.5,16.5,17.5,18.5,19.5,20.5,21.5,22.5,23.5,24.5,25.5,26.5,27.5,28.5,29.5,30.5,31.5,32.5,33.5,34.5},
   float[5] head_bias = {9,8,7,6,5}) => (float loss)
{
  h = Gemm<transB=1>(x, fc1_weight, fc1_bias)
  r = Relu(h)
  logits = Gemm<transB=1>(r, head_weight, head_bias)
  loss = SoftmaxCrossEntropyLoss(logits, y)
}
)";

class Partition : public ::testing::TestWithParam<int> {};

TEST_P(Partition, EveryElementOwnedByExactlyOneRank) {
  int world = GetParam();
  TrainPipelineOptions opts;
  opts.optimizer = OptimizerKind::Sgd;
  opts.worldSize = world;
  opts.stage = 3;
  // Size-based wrapping: fc1_weight (21) + fc1_bias (7) + head_weight (35)
  // reach 30 elements in one unit, head_bias (5) is the second.
  opts.minNumParams = 30;
  test::CompiledPlan compiled;
  ASSERT_NO_FATAL_FAILURE(test::compileToPlan(kModel, opts, compiled));
  const std::map<std::string, std::vector<uint8_t>> &original =
      compiled.initializers;
  std::string planDir = compiled.planDir();
  const plan::Plan &p = compiled.plan();
  ASSERT_EQ(p.world_size(), world);
  ASSERT_EQ(p.units_size(), 2);
  EXPECT_EQ(p.units(0).params_size(), 3);
  EXPECT_EQ(p.units(1).params_size(), 1);

  // Every rank's shards, as each rank loads them.
  std::vector<std::unique_ptr<plan::LoadedPlan>> ranks;
  for (int r = 0; r < world; ++r) {
    auto loaded = plan::loadPlan(planDir, {}, r);
    ASSERT_TRUE(!!loaded) << llvm::toString(loaded.takeError());
    ranks.push_back(std::move(*loaded));
  }
  std::set<std::string> seen;
  for (const plan::FlatUnit &unit : p.units()) {
    const plan::Buffer &b = p.buffers(unit.buffer());
    ASSERT_EQ(b.shape_size(), 1);
    int64_t shard = b.shape(0), padded = unit.padded_elements();
    EXPECT_EQ(padded, shard * world);
    int64_t total = 0;
    for (const plan::FlatParam &fp : unit.params()) {
      EXPECT_EQ(fp.offset(), total) << "parameters are laid out back to back";
      int64_t n = 1;
      for (int64_t d : fp.shape())
        n *= d;
      total += n;
      EXPECT_TRUE(seen.insert(fp.name()).second)
          << fp.name() << " in two units";
    }
    EXPECT_GE(padded, total);
    EXPECT_LT(padded - total, world) << "padding is less than one per rank";

    // The shards tile the flat buffer: rank r owns [r*S, (r+1)*S).
    std::vector<float> flat(padded);
    for (int r = 0; r < world; ++r) {
      const std::vector<uint8_t> &mine = ranks[r]->bytes[unit.buffer()];
      ASSERT_EQ(mine.size(), shard * sizeof(float));
      std::memcpy(flat.data() + r * shard, mine.data(), mine.size());
    }
    for (int64_t i = total; i < padded; ++i)
      EXPECT_EQ(flat[i], 0.0f) << "padding element " << i;
    // Padding stripped, the parameters come back bit for bit.
    for (const plan::FlatParam &fp : unit.params()) {
      const std::vector<uint8_t> &want = original.at(fp.name());
      EXPECT_EQ(
          0, std::memcmp(flat.data() + fp.offset(), want.data(), want.size()))
          << fp.name();
    }

    // The runtime's ShardSlice takes the same chunk on every rank.
    for (int r = 0; r < world; ++r) {
      std::vector<float> out(shard);
      rt::TensorView in(rt::DType::F32, {padded}, flat.data());
      rt::TensorView o(rt::DType::F32, {shard}, out.data());
      rt::AttrMap attrs;
      rt::KernelContext kc{"ShardSlice", "test", attrs, in, o};
      kc.rank = r;
      kc.worldSize = world;
      ASSERT_FALSE(!!rt::cpu::runKernel(kc));
      EXPECT_EQ(0,
                std::memcmp(out.data(), ranks[r]->bytes[unit.buffer()].data(),
                            shard * sizeof(float)));
    }
  }
  EXPECT_EQ(seen.size(), 4u) << "every trainable parameter is in a unit";
  llvm::sys::fs::remove_directories(compiled.dir);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Partition,
                         ::testing::Values(1, 2, 3, 4, 5));

} // namespace
