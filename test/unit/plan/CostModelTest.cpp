//===- CostModelTest.cpp - The predicted time of a plan's step ------------===//
#include "plan/CostModel.h"
#include "plan/PlanIO.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

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

/// A reduce-scatter over 4 ranks, an 800 s Relu, then its wait.
void addHiddenReduceScatter(PlanWriter &w) {
  int32_t g = w.addBuffer("g", rt::DType::F32, {8}, INPUT);   // 32 bytes
  int32_t s = w.addBuffer("s", rt::DType::F32, {2}, TEMP);    // shard
  int32_t x = w.addBuffer("x", rt::DType::F32, {100}, INPUT); // 400 bytes
  int32_t y = w.addBuffer("y", rt::DType::F32, {100}, TEMP);
  Plan &p = w.plan();
  p.set_world_size(4);
  addOp(p, "ReduceScatterStart", {g}, {s}); // sends 32 * 3/4 = 24 bytes
  addOp(p, "Relu", {x}, {y});               // 800 s of compute
  addOp(p, "CollectiveWait", {s}, {});
}

TEST(CostModelTest, CollectivesOverlapComputeUntilTheirWait) {
  PlanWriter w;
  addHiddenReduceScatter(w);
  StepCost c = estimateStep(w.plan(), unitMachine());
  EXPECT_EQ(c.sentBytes, 24u);
  EXPECT_DOUBLE_EQ(c.commSeconds, 24);
  EXPECT_DOUBLE_EQ(c.commWaitSeconds, 0); // hidden behind the Relu
  EXPECT_DOUBLE_EQ(c.seconds, 800);
  EXPECT_TRUE(c.exposed.empty());

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
  // The wait that held compute, by its start.
  ASSERT_EQ(c2.exposed.size(), 1u);
  EXPECT_EQ(c2.exposed[0].startOp, 0);
  EXPECT_DOUBLE_EQ(c2.exposed[0].seconds, 96);
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

TEST(CostModelTest, CollectivesTakeTheFasterOfRingAndTree) {
  MachineModel m = unitMachine();
  m.linkSeconds = 10;
  using K = CollectiveOpKind;
  // An all-gather of 8 bytes per rank over 4 ranks: 3 ring steps, and each
  // rank sends its 8 bytes to 3 others.
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::AllGatherStart, 8, 4), 3 * 10 + 24);
  // A reduce-scatter of 40 bytes: 3 steps, 3/4 of the input sent.
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::ReduceScatterStart, 40, 4), 3 * 10 + 30);
  // An all-reduce of 40 bytes over 4 ranks: a ring (6 steps, 60 bytes)
  // beats the trees (4 steps, 80 bytes).
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::AllReduceStart, 40, 4), 60 + 60);
  // Over 1024 ranks the ring's 2046 steps lose to the trees' 20.
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::AllReduceStart, 40, 1024), 20 * 10 + 80);
  // One rank does not communicate.
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::AllReduceStart, 40, 1), 0);
}

TEST(CostModelTest, CollectivesAcrossHostsRunAtTheHostLink) {
  MachineModel m = unitMachine();
  m.linkSeconds = 1;
  m.hostRanks = 8;
  m.hostLinkBytesPerSecond = 0.5;
  m.hostLinkSeconds = 4;
  using K = CollectiveOpKind;
  // 8 ranks fit one host: the link.
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::AllGatherStart, 2, 8), 7 * 1 + 14);
  // 16 span two: every step waits for the slower link.
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::AllGatherStart, 2, 16),
                   15 * 4 + 30 / 0.5);
  // A host link faster than the link does not speed a ring up.
  m.hostLinkBytesPerSecond = 100;
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::AllGatherStart, 2, 16), 15 * 4 + 30);
  // Two ranks 8 apart (hybrid sharding's replicas) are on two hosts.
  m.hostLinkBytesPerSecond = 0.5;
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::AllReduceStart, 4, 2, /*span=*/9),
                   2 * 4 + 4 / 0.5);
  EXPECT_DOUBLE_EQ(m.collectiveTime(K::AllReduceStart, 4, 2), 2 * 1 + 4);
}

TEST(CostModelTest, HybridReplicaGroupsCrossHosts) {
  // 16 ranks as 2 replicas x 8 shards, a host per 8 ranks: the shards'
  // reduce-scatter stays in a host, the replicas' all-reduce crosses.
  PlanWriter w;
  int32_t g = w.addBuffer("g", rt::DType::F32, {8}, INPUT); // 32 bytes
  int32_t s = w.addBuffer("s", rt::DType::F32, {1}, TEMP);
  int32_t r = w.addBuffer("r", rt::DType::F32, {1}, TEMP);
  Plan &p = w.plan();
  p.set_world_size(16);
  p.add_mesh_shape(2);
  p.add_mesh_shape(8);
  p.add_shard_axes(1);
  auto axes = [](Op *op, int32_t axis, int64_t n) {
    Attribute *a = op->add_attributes();
    a->set_name("mesh_axes");
    a->mutable_ints()->add_values(axis);
    Attribute *ws = op->add_attributes();
    ws->set_name("world_size");
    ws->set_i(n);
  };
  axes(addOp(p, "ReduceScatterStart", {g}, {s}), 1, 8);
  axes(addOp(p, "AllReduceStart", {s}, {r}), 0, 2);
  MachineModel m = unitMachine();
  m.hostRanks = 8;
  m.hostLinkBytesPerSecond = 0.25;
  StepCost c = estimateStep(p, m);
  // 7/8 of 32 bytes at 1 B/s, then 2 x 1/2 x 4 bytes at 0.25 B/s.
  EXPECT_DOUBLE_EQ(c.commSeconds, 28 + 16);
}

TEST(CostModelTest, RanksBeyondAHostsSlotsSlowItsKernels) {
  MachineModel m = unitMachine();
  EXPECT_DOUBLE_EQ(m.computeSlowdown(64), 1); // no slots given: all fit
  m.hostSlots = 2;
  EXPECT_DOUBLE_EQ(m.computeSlowdown(1), 1);
  EXPECT_DOUBLE_EQ(m.computeSlowdown(2), 1);
  EXPECT_DOUBLE_EQ(m.computeSlowdown(4), 2);
  m.hostRanks = 3; // 64 ranks, 3 per host
  EXPECT_DOUBLE_EQ(m.computeSlowdown(64), 1.5);

  PlanWriter w;
  int32_t x = w.addBuffer("x", rt::DType::F32, {4}, INPUT);
  int32_t a = w.addBuffer("a", rt::DType::F32, {4}, TEMP);
  Plan &p = w.plan();
  addOp(p, "Relu", {x}, {a}); // 32 s alone
  p.set_world_size(4);
  m.hostRanks = 0;
  StepCost c = estimateStep(p, m);
  EXPECT_DOUBLE_EQ(c.computeSlowdown, 2);
  EXPECT_DOUBLE_EQ(c.seconds, 64);
}

TEST(CostModelTest, CollectivesCopyWithTheKernelsCoresOnAFullHost) {
  // A reduce-scatter sending 24 bytes, hidden behind an 800 s Relu.
  PlanWriter w;
  addHiddenReduceScatter(w);
  const Plan &p = w.plan();
  MachineModel m = unitMachine();
  m.linkCpuBytesPerSecond = 0.5; // 24 bytes: 48 s of a core
  // No slots given (a core to spare for every rank): the copies cost the
  // kernels nothing.
  EXPECT_DOUBLE_EQ(estimateStep(p, m).seconds, 800);
  m.hostSlots = 8;
  EXPECT_DOUBLE_EQ(estimateStep(p, m).seconds, 800);
  // 4 ranks on 4 slots: the copies' 48 s join the compute timeline.
  m.hostSlots = 4;
  StepCost c = estimateStep(p, m);
  EXPECT_DOUBLE_EQ(c.commCpuSeconds, 48);
  EXPECT_DOUBLE_EQ(c.computeSeconds, 848);
  EXPECT_DOUBLE_EQ(c.seconds, 848);
  EXPECT_DOUBLE_EQ(c.commSeconds, 24); // the link is as fast as before
  // On 2 slots everything a rank runs takes twice as long.
  m.hostSlots = 2;
  c = estimateStep(p, m);
  EXPECT_DOUBLE_EQ(c.commCpuSeconds, 96);
  EXPECT_DOUBLE_EQ(c.seconds, 1600 + 96);
  // Without link-cpu (the default, and NCCL's case) nothing changes.
  m.linkCpuBytesPerSecond = 0;
  EXPECT_DOUBLE_EQ(estimateStep(p, m).seconds, 1600);
  ASSERT_FALSE(bool(m.parseOverrides("link-cpu=3e9")));
  EXPECT_DOUBLE_EQ(m.linkCpuBytesPerSecond, 3e9);
  ASSERT_FALSE(bool(m.parseOverrides("link-cpu=0")));
  std::string bad = llvm::toString(m.parseOverrides("link-cpu=-1"));
  EXPECT_NE(bad.find("cost model key 'link-cpu' takes a number >= 0"),
            std::string::npos)
      << bad;
}

TEST(CostModelTest, HardwareFilesNameTheirLine) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("machine", "hw", path));
  auto write = [&](const char *text) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << text;
  };
  write("# a machine\nflops = 3e14  # bf16\n\nhost-ranks=8\nlink = "
        "0.33333333333333331\n");
  MachineModel m = MachineModel::cpu();
  ASSERT_FALSE(bool(m.parseFile(path)));
  EXPECT_DOUBLE_EQ(m.flopsPerSecond, 3e14);
  EXPECT_DOUBLE_EQ(m.hostRanks, 8);
  EXPECT_EQ(m.linkBytesPerSecond, 1.0 / 3);
  // toOverrides gives the same machine back, to the last bit.
  MachineModel back = MachineModel::cpu();
  ASSERT_FALSE(bool(back.parseOverrides(m.toOverrides())));
  EXPECT_EQ(back.linkBytesPerSecond, 1.0 / 3);
  EXPECT_EQ(back.flopsPerSecond, 3e14);
  EXPECT_EQ(back.hostRanks, 8);

  write("flops = 3e14\nlinks = 2\n");
  std::string bad = llvm::toString(m.parseFile(path));
  EXPECT_NE(bad.find(std::string(path) + ":2: unknown cost model key 'links'"),
            std::string::npos)
      << bad;
  write("flops 3e14\n");
  bad = llvm::toString(m.parseFile(path));
  EXPECT_NE(bad.find(":1: expected 'key = value', got 'flops 3e14'"),
            std::string::npos)
      << bad;
  write("host-slots = -1\n");
  bad = llvm::toString(m.parseFile(path));
  EXPECT_NE(bad.find("'host-slots' takes a whole number >= 0 (e.g. "
                     "host-slots=8), got '-1'"),
            std::string::npos)
      << bad;
  write("host-ranks = 2.5\n");
  bad = llvm::toString(m.parseFile(path));
  EXPECT_NE(bad.find("'host-ranks' takes a whole number"), std::string::npos)
      << bad;
  write("flops = 1e12\nmemory = 1e9\nflops = 2e12\n");
  bad = llvm::toString(m.parseFile(path));
  EXPECT_NE(bad.find(":3: 'flops' is set again (line 1 set it first)"),
            std::string::npos)
      << bad;
  llvm::sys::fs::remove(path);
  bad = llvm::toString(m.parseFile(path));
  EXPECT_NE(bad.find("cannot read hardware file"), std::string::npos) << bad;
}

} // namespace
