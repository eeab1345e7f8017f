//===- CostModelTest.cpp - The predicted time of a plan's step ------------===//
#include "plan/CostModel.h"
#include "plan/PlanIO.h"

#include "gtest/gtest.h"

using namespace shardc;
using namespace shardc::plan;

namespace {

Op *addOp(Plan &p, const char *type, std::initializer_list<int32_t> inputs,
          std::initializer_list<int32_t> outputs, uint64_t flops = 0) {
  Op *op = p.add_ops();
  op->set_type(type);
  op->set_name(type);
  for (int32_t i : inputs)
    op->add_inputs(i);
  for (int32_t o : outputs)
    op->add_outputs(o);
  op->set_flops(flops);
  return op;
}

/// Round numbers: 1 flop, 1 byte, 1 sent byte per second; no fixed costs.
MachineModel unitMachine() {
  MachineModel m;
  m.flopsPerSecond = 1;
  m.memoryBytesPerSecond = 1;
  m.linkBytesPerSecond = 1;
  m.tierBytesPerSecond = 1;
  m.kernelSeconds = m.linkSeconds = m.tierSeconds = 0;
  return m;
}

TEST(CostModelTest, KernelsTakeTheirFlopsOrTheirBytes) {
  PlanWriter w;
  int32_t x = w.addBuffer("x", rt::DType::F32, {4}, INPUT); // 16 bytes
  int32_t a = w.addBuffer("a", rt::DType::F32, {4}, TEMP);  // 16
  int32_t b = w.addBuffer("b", rt::DType::F32, {4}, TEMP);  // 16
  Plan &p = w.plan();
  addOp(p, "Relu", {x}, {a});                                 // 32 bytes: 32 s
  addOp(p, "MatMul", {a, a}, {b}, 1000)->set_recompute(true); // 1000 flops
  StepCost c = estimateStep(p, unitMachine());
  EXPECT_DOUBLE_EQ(c.computeSeconds, 32 + 1000);
  EXPECT_DOUBLE_EQ(c.recomputeSeconds, 1000);
  EXPECT_DOUBLE_EQ(c.seconds, 1032);
  EXPECT_EQ(c.sentBytes, 0u);

  MachineModel m = unitMachine();
  m.kernelSeconds = 5;
  EXPECT_DOUBLE_EQ(estimateStep(p, m).seconds, 1042);
}

TEST(CostModelTest, CollectivesOverlapComputeUntilTheirWait) {
  PlanWriter w;
  int32_t g = w.addBuffer("g", rt::DType::F32, {8}, INPUT);   // 32 bytes
  int32_t s = w.addBuffer("s", rt::DType::F32, {2}, TEMP);    // shard
  int32_t x = w.addBuffer("x", rt::DType::F32, {100}, INPUT); // 400 bytes
  int32_t y = w.addBuffer("y", rt::DType::F32, {100}, TEMP);
  Plan &p = w.plan();
  p.set_world_size(4);
  addOp(p, "ReduceScatterStart", {g}, {s}); // sends 32 * 3/4 = 24 bytes
  addOp(p, "Relu", {x}, {y});               // 800 s of compute
  addOp(p, "CollectiveWait", {s}, {});
  StepCost c = estimateStep(p, unitMachine());
  EXPECT_EQ(c.sentBytes, 24u);
  EXPECT_DOUBLE_EQ(c.commSeconds, 24);
  EXPECT_DOUBLE_EQ(c.commWaitSeconds, 0); // hidden behind the Relu
  EXPECT_DOUBLE_EQ(c.seconds, 800);

  // Nothing to hide behind: the wait holds compute for the whole transfer.
  PlanWriter w2;
  int32_t g2 = w2.addBuffer("g", rt::DType::F32, {8}, INPUT);
  int32_t s2 = w2.addBuffer("s", rt::DType::F32, {32}, TEMP);
  Plan &p2 = w2.plan();
  p2.set_world_size(4);
  Op *gather = addOp(p2, "AllGatherStart", {g2}, {s2}); // 32 * 3 = 96
  addOp(p2, "CollectiveWait", {s2}, {});
  StepCost c2 = estimateStep(p2, unitMachine());
  EXPECT_EQ(c2.sentBytes, 96u);
  EXPECT_DOUBLE_EQ(c2.commWaitSeconds, 96);
  EXPECT_DOUBLE_EQ(c2.seconds, 96);
  // Within a group of 2 (hybrid sharding): the group's size counts.
  Attribute *ws = gather->add_attributes();
  ws->set_name("world_size");
  ws->set_i(2);
  EXPECT_EQ(sentBytes(p2, *gather), 32u);
}

TEST(CostModelTest, CollectivesRunOneAtATimeAndTheTierApart) {
  PlanWriter w;
  int32_t a = w.addBuffer("a", rt::DType::F32, {10}, INPUT); // 40 bytes
  int32_t r = w.addBuffer("r", rt::DType::F32, {10}, TEMP);
  int32_t b = w.addBuffer("b", rt::DType::F32, {10}, INPUT);
  int32_t q = w.addBuffer("q", rt::DType::F32, {10}, TEMP);
  int32_t t = w.addBuffer("t", rt::DType::F32, {25}, PARAMETER); // 100
  int32_t m = w.addBuffer("m", rt::DType::F32, {25}, TEMP);
  Plan &p = w.plan();
  p.mutable_buffers(t)->set_offloaded(true);
  p.set_world_size(2);
  addOp(p, "AllReduceStart", {a}, {r});   // 2 * 40 / 2 = 40 s
  addOp(p, "AllReduceStart", {b}, {q});   // queued behind: done at 80
  addOp(p, "OffloadReadStart", {t}, {m}); // the tier: 100 s, from 0
  addOp(p, "CollectiveWait", {q}, {});
  addOp(p, "CollectiveWait", {m}, {});
  StepCost c = estimateStep(p, unitMachine());
  EXPECT_DOUBLE_EQ(c.commSeconds, 80);
  EXPECT_DOUBLE_EQ(c.commWaitSeconds, 80);
  EXPECT_DOUBLE_EQ(c.tierSeconds, 100);
  EXPECT_DOUBLE_EQ(c.tierWaitSeconds, 20);
  EXPECT_EQ(c.tierBytes, 100u);
  EXPECT_DOUBLE_EQ(c.seconds, 100);
}

TEST(CostModelTest, OverridesNameTheirKeys) {
  MachineModel m = MachineModel::cpu();
  ASSERT_FALSE(bool(m.parseOverrides("flops=2e11, link=1e9")));
  EXPECT_DOUBLE_EQ(m.flopsPerSecond, 2e11);
  EXPECT_DOUBLE_EQ(m.linkBytesPerSecond, 1e9);
  EXPECT_DOUBLE_EQ(m.memoryBytesPerSecond,
                   MachineModel::cpu().memoryBytesPerSecond);
  std::string bad = llvm::toString(m.parseOverrides("flop=1"));
  EXPECT_NE(bad.find("unknown cost model key 'flop'"), std::string::npos);
  EXPECT_NE(bad.find("flops, memory"), std::string::npos);
  bad = llvm::toString(m.parseOverrides("tier=-3"));
  EXPECT_NE(bad.find("'tier' takes a positive number"), std::string::npos);
  bad = llvm::toString(m.parseOverrides("link=fast"));
  EXPECT_NE(bad.find("got 'fast'"), std::string::npos);
}

} // namespace
