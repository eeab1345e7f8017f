//===- MemoryPlanTest.cpp - Buffer lifetimes and predicted peaks ----------===//
#include "plan/MemoryPlan.h"
#include "plan/PlanIO.h"

#include "gtest/gtest.h"

#include <random>
#include <vector>

using namespace shardc;
using namespace shardc::plan;

namespace {

Op *addOp(Plan &p, const char *type, std::initializer_list<int32_t> inputs,
          std::initializer_list<int32_t> outputs) {
  Op *op = p.add_ops();
  op->set_type(type);
  op->set_name(type);
  for (int32_t i : inputs)
    op->add_inputs(i);
  for (int32_t o : outputs)
    op->add_outputs(o);
  return op;
}

using Ids = std::vector<int32_t>;

TEST(MemoryPlanTest, TempBuffersLiveFromFirstToLastUse) {
  PlanWriter w;
  int32_t x = w.addBuffer("x", rt::DType::F32, {4}, INPUT); // 16 bytes
  int32_t a = w.addBuffer("a", rt::DType::F32, {4}, TEMP);  // 16
  int32_t b = w.addBuffer("b", rt::DType::F32, {8}, TEMP);  // 32
  int32_t c = w.addBuffer("c", rt::DType::F64, {2}, TEMP);  // 16
  int32_t unused =
      w.addBuffer("u", rt::DType::F32, {100}, TEMP); // never touched
  Plan &p = w.plan();
  addOp(p, "Relu", {x}, {a});      // 0
  addOp(p, "Concat", {a, a}, {b}); // 1
  addOp(p, "ReduceSum", {b}, {c}); // 2
  p.add_inputs(x);
  p.add_outputs(c);
  MemoryPlan mp = planMemory(p);

  EXPECT_TRUE(mp.buffers[x].persistent);
  EXPECT_FALSE(mp.buffers[a].persistent);
  EXPECT_EQ(mp.buffers[a].first, 0);
  EXPECT_EQ(mp.buffers[a].last, 1);
  EXPECT_EQ(mp.buffers[b].bytes, 32u);
  EXPECT_EQ(mp.buffers[unused].first, -1);
  // A graph output lives past the last op: never freed by the plan.
  EXPECT_EQ(mp.buffers[c].last, 3);
  EXPECT_EQ(mp.allocBefore, (std::vector<Ids>{{a}, {b}, {c}}));
  EXPECT_EQ(mp.freeAfter, (std::vector<Ids>{{}, {a}, {b}}));
  // Peak: x (16) + a (16) + b (32) while op 1 runs.
  EXPECT_EQ(mp.peakTotal, 64u);
  EXPECT_EQ(mp.peak[ACTIVATIONS], 64u);
}

TEST(MemoryPlanTest, CategoriesAndViews) {
  PlanWriter w;
  int32_t param = w.addBuffer("w", rt::DType::F32, {10}, STATE); // 40 bytes
  int32_t g = w.addBuffer("g", rt::DType::F32, {10}, TEMP);      // 40
  int32_t v = w.addBuffer("v", rt::DType::F32, {5}, TEMP);       // view of g
  int32_t y = w.addBuffer("y", rt::DType::F32, {5}, TEMP);       // 20
  Plan &p = w.plan();
  p.mutable_buffers(param)->set_category(OPT_STATE);
  p.mutable_buffers(g)->set_category(GRADS);
  p.mutable_buffers(v)->set_is_alias(true);
  p.mutable_buffers(v)->set_alias_of(g);
  p.mutable_buffers(v)->set_alias_offset(20);
  addOp(p, "Identity", {param}, {g}); // 0
  addOp(p, "Neg", {v}, {y});          // 1: reads g through its view
  p.add_outputs(y);
  MemoryPlan mp = planMemory(p);

  // The view keeps its root alive and costs nothing itself.
  EXPECT_EQ(mp.buffers[g].last, 1);
  EXPECT_EQ(mp.freeAfter[1], Ids{g});
  for (const Ids &ids : mp.allocBefore)
    for (int32_t id : ids)
      EXPECT_NE(id, v);
  EXPECT_EQ(mp.peak[OPT_STATE], 40u);
  EXPECT_EQ(mp.peak[GRADS], 40u);
  EXPECT_EQ(mp.peak[ACTIVATIONS], 20u);
  EXPECT_EQ(mp.peakTotal, 100u);
  MemoryPrediction prediction = toPrediction(mp);
  EXPECT_EQ(prediction.grads(), 40u);
  EXPECT_EQ(prediction.total(), 100u);
  EXPECT_STREQ(categoryName(GRADS), "grads");
  EXPECT_STREQ(categoryName(ACTIVATIONS), "activations");
}

TEST(MemoryPlanTest, CollectiveInputLivesUntilItsWait) {
  // The communicator reads a start's input until the wait completes, so the
  // input is freed after the wait, not after the start.
  PlanWriter w;
  int32_t x = w.addBuffer("x", rt::DType::F32, {4}, INPUT);
  int32_t a = w.addBuffer("a", rt::DType::F32, {4}, TEMP);
  int32_t s = w.addBuffer("s", rt::DType::F32, {4}, TEMP);
  int32_t n = w.addBuffer("n", rt::DType::F32, {4}, TEMP);
  int32_t out = w.addBuffer("out", rt::DType::F32, {4}, TEMP);
  Plan &p = w.plan();
  addOp(p, "Relu", {x}, {a});           // 0
  addOp(p, "AllReduceStart", {a}, {s}); // 1
  addOp(p, "Neg", {x}, {n});            // 2
  addOp(p, "CollectiveWait", {s}, {s}); // 3
  addOp(p, "Add", {s, n}, {out});       // 4
  p.add_inputs(x);
  p.add_outputs(out);
  MemoryPlan mp = planMemory(p);

  EXPECT_EQ(mp.buffers[a].first, 0);
  EXPECT_EQ(mp.buffers[a].last, 3);
  EXPECT_EQ(mp.freeAfter, (std::vector<Ids>{{}, {}, {}, {a}, {s, n}}));
}

/// Checks the arena layout of `mp`: every buffer aligned and inside the
/// arena, persistent buffers apart from everything, and no two TEMP buffers
/// whose lifetimes overlap sharing a byte.
void expectArenaIsSound(const Plan &p, const MemoryPlan &mp) {
  EXPECT_GE(mp.arenaBytes, mp.peakTotal);
  std::vector<int32_t> placed;
  for (int i = 0; i < p.buffers_size(); ++i) {
    if (p.buffers(i).is_alias())
      continue;
    const BufferLifetime &life = mp.buffers[i];
    if (!life.persistent && life.first < 0)
      continue;
    EXPECT_EQ(life.offset % kArenaAlignment, 0u) << "buffer " << i;
    EXPECT_LE(life.offset + life.bytes, mp.arenaBytes) << "buffer " << i;
    if (life.persistent)
      EXPECT_LE(life.offset + life.bytes, mp.persistentBytes);
    else
      EXPECT_GE(life.offset, mp.persistentBytes);
    placed.push_back(i);
  }
  for (size_t x = 0; x < placed.size(); ++x)
    for (size_t y = x + 1; y < placed.size(); ++y) {
      const BufferLifetime &a = mp.buffers[placed[x]];
      const BufferLifetime &b = mp.buffers[placed[y]];
      bool together = a.persistent || b.persistent ||
                      (a.first <= b.last && b.first <= a.last);
      bool share = a.offset < b.offset + b.bytes &&
                   b.offset < a.offset + a.bytes && a.bytes && b.bytes;
      EXPECT_FALSE(together && share)
          << "buffers " << placed[x] << " and " << placed[y] << " overlap";
    }
}

TEST(MemoryPlanTest, ArenaReusesDeadSlots) {
  PlanWriter w;
  int32_t x = w.addBuffer("x", rt::DType::F32, {4}, INPUT);  // 16 bytes
  int32_t a = w.addBuffer("a", rt::DType::F32, {64}, TEMP);  // 256
  int32_t b = w.addBuffer("b", rt::DType::F32, {128}, TEMP); // 512
  int32_t c = w.addBuffer("c", rt::DType::F32, {64}, TEMP);  // 256
  Plan &p = w.plan();
  addOp(p, "Relu", {x}, {a});      // 0
  addOp(p, "Concat", {a, a}, {b}); // 1
  addOp(p, "Slice", {b}, {c});     // 2
  p.add_inputs(x);
  p.add_outputs(c);
  MemoryPlan mp = planMemory(p);
  expectArenaIsSound(p, mp);
  EXPECT_EQ(mp.buffers[x].offset, 0u);
  EXPECT_EQ(mp.persistentBytes, kArenaAlignment);
  // b (largest) first, at the start of the TEMP region; a and c meet b but
  // not each other, so they share the slot after it.
  EXPECT_EQ(mp.buffers[b].offset, kArenaAlignment);
  EXPECT_EQ(mp.buffers[a].offset, kArenaAlignment + 512);
  EXPECT_EQ(mp.buffers[c].offset, kArenaAlignment + 512);
  EXPECT_EQ(mp.arenaBytes, kArenaAlignment + 768);
}

TEST(MemoryPlanTest, ArenaIsSoundOnRandomPlans) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    PlanWriter w;
    std::vector<int32_t> values;
    int numPersistent = 1 + rng() % 3;
    for (int i = 0; i < numPersistent; ++i)
      values.push_back(w.addBuffer("p" + std::to_string(i), rt::DType::F32,
                                   {int64_t(1 + rng() % 300)}, STATE));
    int numOps = 1 + rng() % 40;
    Plan &p = w.plan();
    for (int j = 0; j < numOps; ++j) {
      int32_t in0 = values[rng() % values.size()];
      int32_t in1 = values[rng() % values.size()];
      int32_t out = w.addBuffer("t" + std::to_string(j), rt::DType::F32,
                                {int64_t(rng() % 500)}, TEMP);
      addOp(p, "Add", {in0, in1}, {out});
      values.push_back(out);
    }
    p.add_outputs(values.back());
    MemoryPlan mp = planMemory(p);
    SCOPED_TRACE("trial " + std::to_string(trial));
    expectArenaIsSound(p, mp);
  }
}

} // namespace
