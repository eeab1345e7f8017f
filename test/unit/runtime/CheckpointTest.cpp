//===- CheckpointTest.cpp - Logical tensors of a plan's state -------------===//
//
// stateLayout maps a plan's PARAMETER and STATE buffers onto the logical
// tensors a checkpoint stores: unit shards cut into their parameters'
// element ranges (padding left out), whole buffers saved by rank 0, per-rank
// statistics by every rank. End-to-end saving, resuming and resharding over
// real ranks is test/checkpoints.
//
//===----------------------------------------------------------------------===//
#include "runtime/Checkpoint.h"

#include "gtest/gtest.h"

#include <map>

using namespace shardc;

namespace {

plan::Buffer *addBuffer(plan::Plan &p, const std::string &name,
                        std::initializer_list<int64_t> shape,
                        plan::BufferKind kind) {
  plan::Buffer *b = p.add_buffers();
  b->set_name(name);
  b->set_dtype(plan::FLOAT32);
  for (int64_t d : shape)
    b->add_shape(d);
  b->set_kind(kind);
  return b;
}

/// 2 ranks, stage 3: unit0 holds a [3] and b [5] (8 elements, 4 per rank)
/// with one optimizer state ".m"; "optimizer.step" is a STATE scalar and
/// "bn.mean" a running statistic.
plan::Plan stage3Plan() {
  plan::Plan p;
  p.set_world_size(2);
  p.set_zero_stage(3);
  addBuffer(p, "unit0", {4}, plan::PARAMETER)->set_shard_count(2);
  addBuffer(p, "unit0.m", {4}, plan::STATE);
  addBuffer(p, "optimizer.step", {}, plan::STATE);
  addBuffer(p, "bn.mean", {2}, plan::PARAMETER)
      ->set_role(plan::RUNNING_STATISTIC);
  addBuffer(p, "x", {2}, plan::INPUT);
  plan::FlatUnit *u = p.add_units();
  u->set_name("unit0");
  u->set_buffer(0);
  u->set_padded_elements(8);
  plan::FlatParam *a = u->add_params();
  a->set_name("a");
  a->set_offset(0);
  a->add_shape(3);
  plan::FlatParam *b = u->add_params();
  b->set_name("b");
  b->set_offset(3);
  b->add_shape(5);
  plan::FlatState *s = u->add_states();
  s->set_buffer(1);
  s->set_suffix(".m");
  return p;
}

std::string describe(const rt::StateLayout &l, const rt::StateSlice &s) {
  return l.tensors[s.tensor].name + " [" + std::to_string(s.tensorElement) +
         ", +" + std::to_string(s.elements) + ") <- buffer " +
         std::to_string(s.buffer) + " @" + std::to_string(s.bufferElement) +
         (s.saved ? " saved" : "");
}

} // namespace

TEST(StateLayoutTest, CutsUnitShardsIntoParameters) {
  plan::Plan p = stage3Plan();
  auto rank0 = rt::stateLayout(p, 0);
  auto rank1 = rt::stateLayout(p, 1);
  ASSERT_TRUE(!!rank0) << llvm::toString(rank0.takeError());
  ASSERT_TRUE(!!rank1) << llvm::toString(rank1.takeError());
  std::vector<std::string> names;
  for (const rt::StateTensor &t : rank0->tensors)
    names.push_back(t.name + (t.perRank ? " per-rank" : ""));
  EXPECT_EQ(names,
            (std::vector<std::string>{"a", "b", "a.m", "b.m", "optimizer.step",
                                      "bn.mean per-rank"}));
  std::vector<std::string> got0, got1;
  for (const rt::StateSlice &s : rank0->slices)
    got0.push_back(describe(*rank0, s));
  for (const rt::StateSlice &s : rank1->slices)
    got1.push_back(describe(*rank1, s));
  // Rank 0 holds flat elements [0, 4): a whole and b's first element.
  EXPECT_EQ(got0, (std::vector<std::string>{
                      "a [0, +3) <- buffer 0 @0 saved",
                      "b [0, +1) <- buffer 0 @3 saved",
                      "a.m [0, +3) <- buffer 1 @0 saved",
                      "b.m [0, +1) <- buffer 1 @3 saved",
                      "optimizer.step [0, +1) <- buffer 2 @0 saved",
                      "bn.mean [0, +2) <- buffer 3 @0 saved"}));
  // Rank 1 holds [4, 8): b's last four, no padding; the scalar is rank 0's
  // to save, the statistic its own.
  EXPECT_EQ(got1,
            (std::vector<std::string>{"b [1, +4) <- buffer 0 @0 saved",
                                      "b.m [1, +4) <- buffer 1 @0 saved",
                                      "optimizer.step [0, +1) <- buffer 2 @0",
                                      "bn.mean [0, +2) <- buffer 3 @0 saved"}));
}

TEST(StateLayoutTest, LeavesPaddingOut) {
  plan::Plan p = stage3Plan();
  // b shrinks to 4 elements: 7 of 8, one element of padding on rank 1.
  p.mutable_units(0)->mutable_params(1)->set_shape(0, 4);
  auto rank1 = rt::stateLayout(p, 1);
  ASSERT_TRUE(!!rank1) << llvm::toString(rank1.takeError());
  int64_t held = 0;
  for (const rt::StateSlice &s : rank1->slices)
    if (s.buffer == 0)
      held += s.elements;
  EXPECT_EQ(held, 3);
}

TEST(StateLayoutTest, RejectsTwoStatesOfOneName) {
  plan::Plan p = stage3Plan();
  addBuffer(p, "a.m", {3}, plan::STATE);
  auto layout = rt::stateLayout(p, 0);
  ASSERT_FALSE(!!layout);
  EXPECT_NE(llvm::toString(layout.takeError()).find("state 'a.m' twice"),
            std::string::npos);
}
