//===- MemoryBudgetTest.cpp - Choosing options that fit a budget ----------===//
//
// The search of shardc --memory-budget over a model of peaks and times
// given in closed form (each knob's notch saves bytes and adds seconds), so
// that the right answer is known.
//
//===----------------------------------------------------------------------===//
#include "passes/MemoryBudget.h"
#include "passes/Passes.h"

#include "gtest/gtest.h"

#include <random>

using namespace shardc;

namespace {

BudgetSpace fullSpace() {
  BudgetSpace s;
  s.stages = {0, 1, 2, 3};
  s.reshards = {ReshardSpec{ReshardSpec::Keep, 0},
                ReshardSpec{ReshardSpec::Group, 2},
                ReshardSpec{ReshardSpec::Full, 0}};
  s.prefetches = {BackwardPrefetch::Pre, BackwardPrefetch::None};
  s.recomputes = {false, true};
  s.offloads = {{}, {OffloadKind::Optimizer}};
  return s;
}

/// Peak and time as sums over the knobs' notches: saved[k][i] bytes less
/// and added[k][i] seconds more at notch i of knob k.
struct Additive {
  uint64_t base = 0;
  std::vector<std::vector<uint64_t>> saved;
  std::vector<std::vector<double>> added;
  int calls = 0;

  llvm::Expected<BudgetEstimate> operator()(const BudgetChoice &c) {
    ++calls;
    BudgetEstimate e{base, 1.0};
    for (int k = 0; k < kNumBudgetKnobs; ++k) {
      e.peakBytes -= saved[k][c.level[k]];
      e.seconds += added[k][c.level[k]];
    }
    return e;
  }
};

Additive example() {
  Additive m;
  m.base = 1200; // every notch at once: 40 bytes
  m.saved = {{0, 300, 400, 600}, {0, 50, 100}, {0, 10}, {0, 200}, {0, 250}};
  m.added = {{0, 1, 2, 5}, {0, 1, 2}, {0, 1}, {0, 10}, {0, 3}};
  return m;
}

TEST(MemoryBudgetTest, TheFastestSettingWhenItFits) {
  BudgetSpace s = fullSpace();
  Additive m = example();
  std::string log;
  llvm::raw_string_ostream os(log);
  auto c = chooseForBudget(1200, s, std::ref(m), os);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(*c, BudgetChoice{});
  EXPECT_EQ(c->flags(s), "--zero-stage 0");
  EXPECT_NE(log.find("chose --zero-stage 0: peak 1.2 KiB"), std::string::npos)
      << log;
}

// A move the model finds free (an offload whose transfers it expects to
// hide) is taken first on the way down, and undone once the stage alone
// fits: no slower by the model, and a run does not pay its transfers.
TEST(MemoryBudgetTest, UndoesAFreeMoveThatIsNoLongerNeeded) {
  BudgetSpace s = fullSpace();
  Additive m = example();
  m.saved[4] = {0, 50};
  m.added[4] = {0, 0};
  std::string log;
  llvm::raw_string_ostream os(log);
  auto c = chooseForBudget(820, s, std::ref(m), os);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->flags(s), "--zero-stage 2") << log;
  EXPECT_NE(log.find("back to"), std::string::npos) << log;
}

TEST(MemoryBudgetTest, MovesByBytesSavedPerSecondThenTheFastestFit) {
  BudgetSpace s = fullSpace();
  Additive m = example();
  std::string log;
  llvm::raw_string_ostream os(log);
  // 350 bytes to save: stage 1 saves the most per second (300 / 1), then
  // stage 2 is the fastest move that fits (recompute and offload fit too).
  auto c = chooseForBudget(850, s, std::ref(m), os);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->flags(s), "--zero-stage 2") << log;
  EXPECT_NE(log.find("--zero-stage 1: peak 1.2 KiB, step 1.000 s -> peak "
                     "900.0 B, step 2.000 s (300.0 B saved per second "
                     "added)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("--zero-stage 2: peak 900.0 B, step 2.000 s -> peak "
                     "800.0 B, step 3.000 s (fits)"),
            std::string::npos)
      << log;
}

TEST(MemoryBudgetTest, StageThreeKnobsAndTheFlagsThatSelectThem) {
  BudgetSpace s = fullSpace();
  BudgetChoice c;
  c[BudgetKnob::Stage] = 3;
  c[BudgetKnob::Reshard] = 1;
  c[BudgetKnob::Prefetch] = 1;
  c[BudgetKnob::Recompute] = 1;
  c[BudgetKnob::Offload] = 1;
  EXPECT_EQ(c.flags(s), "--zero-stage 3 --reshard-after-forward=2 "
                        "--backward-prefetch none --recompute --offload "
                        "optimizer");
  // Below stage 3 the stage-3 knobs say nothing.
  c[BudgetKnob::Stage] = 2;
  EXPECT_EQ(c.flags(s), "--zero-stage 2 --recompute --offload optimizer");
}

TEST(MemoryBudgetTest, BelowTheFloorNamesTheSmallestPeak) {
  BudgetSpace s = fullSpace();
  Additive m = example();
  std::string log;
  llvm::raw_string_ostream os(log);
  auto c = chooseForBudget(39, s, std::ref(m), os);
  ASSERT_FALSE(bool(c));
  std::string msg = llvm::toString(c.takeError());
  EXPECT_NE(msg.find("below the smallest predicted per-rank peak within "
                     "reach, 40.0 B (40 bytes, with --zero-stage 3 "
                     "--reshard-after-forward=true --backward-prefetch none "
                     "--recompute --offload optimizer)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(m.calls, 2); // refused after compiling the start and the floor
  EXPECT_TRUE(bool(chooseForBudget(40, s, std::ref(m), os)));
}

TEST(MemoryBudgetTest, FixedKnobsStay) {
  BudgetSpace s = fullSpace();
  s.stages = {3};                       // --zero-stage 3
  s.offloads = {{OffloadKind::Params}}; // --offload params
  Additive m = example();
  m.saved[0] = {600};
  m.added[0] = {5};
  m.saved[4] = {250};
  m.added[4] = {3};
  m.base = 1300; // 450 with the fixed knobs; recompute and a full reshard
                 // (300 bytes) are what fits 150
  std::string log;
  llvm::raw_string_ostream os(log);
  auto c = chooseForBudget(150, s, std::ref(m), os);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError()) << log;
  EXPECT_EQ((*c)[BudgetKnob::Stage], 0);
  EXPECT_EQ((*c)[BudgetKnob::Offload], 0);
  // The command line's own flags are not repeated.
  EXPECT_EQ(c->flags(s), "--reshard-after-forward=true --backward-prefetch pre "
                         "--recompute")
      << log;
}

// A notch that saves nothing by itself but opens one that does (stage 1,
// then stage 2) is taken when no move saves.
TEST(MemoryBudgetTest, CrossesAPlateau) {
  BudgetSpace s = fullSpace();
  s.stages = {0, 1, 2};
  s.prefetches = {BackwardPrefetch::Pre};
  s.reshards = {ReshardSpec{}};
  s.offloads = {{}};
  Additive m;
  m.base = 1000;
  m.saved = {{0, 0, 500}, {0}, {0}, {0, 100}, {0}};
  m.added = {{0, 1, 2}, {0}, {0}, {0, 100}, {0}};
  std::string log;
  llvm::raw_string_ostream os(log);
  auto c = chooseForBudget(550, s, std::ref(m), os);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->flags(s), "--zero-stage 2") << log;
  EXPECT_NE(log.find("--zero-stage 1: peak 900.0 B, step 101.000 s -> peak "
                     "900.0 B, step 102.000 s (the same peak; opens other "
                     "moves)"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("no one change"), std::string::npos) << log;
}

// The way down takes the first move that fits (a costly offload); the way
// back from the smallest peak ends faster, and wins.
TEST(MemoryBudgetTest, TheFasterOfTheWayDownAndTheWayBack) {
  BudgetSpace s = fullSpace();
  s.stages = {0, 1, 2};
  s.prefetches = {BackwardPrefetch::Pre};
  s.reshards = {ReshardSpec{}};
  s.recomputes = {false};
  s.offloads = {{},
                {OffloadKind::Optimizer},
                {OffloadKind::Optimizer, OffloadKind::Grads}};
  Additive m;
  m.base = 1000;
  m.saved = {{0, 100, 300}, {0}, {0}, {0}, {0, 200, 450}};
  m.added = {{0, 0.2, 0.3}, {0}, {0}, {0}, {0, 0.1, 3}};
  std::string log;
  llvm::raw_string_ostream os(log);
  auto c = chooseForBudget(600, s, std::ref(m), os);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->flags(s), "--zero-stage 2 --offload optimizer") << log;
  EXPECT_NE(log.find("the way back from the smallest peak is faster: peak "
                     "500.0 B, step 1.400 s against peak 550.0 B, step "
                     "4.000 s"),
            std::string::npos)
      << log;
}

// The ladders of a command line: each from the fastest setting to the one
// that saves the most memory; what the command line gives is fixed.
TEST(MemoryBudgetTest, LaddersOfACommandLine) {
  TrainPipelineOptions o;
  ASSERT_TRUE(mlir::succeeded(o.parseFromString("world-size=8")));
  BudgetSpace s = BudgetSpace::of(o);
  EXPECT_EQ(s.stages, (std::vector<int64_t>{0, 1, 2, 3}));
  // A 1/G slice per rank: a larger G keeps less.
  ASSERT_EQ(s.reshards.size(), 4u);
  EXPECT_EQ(s.reshards[0], (ReshardSpec{ReshardSpec::Keep, 0}));
  EXPECT_EQ(s.reshards[1], (ReshardSpec{ReshardSpec::Group, 2}));
  EXPECT_EQ(s.reshards[2], (ReshardSpec{ReshardSpec::Group, 4}));
  EXPECT_EQ(s.reshards[3], (ReshardSpec{ReshardSpec::Full, 0}));
  EXPECT_EQ(s.recomputes, (std::vector<bool>{false, true}));
  EXPECT_EQ(s.offloads.size(), 4u);

  TrainPipelineOptions h;
  ASSERT_TRUE(mlir::succeeded(h.parseFromString(
      "world-size=8 hybrid-shard=4 recompute-units=blocks offload=params")));
  BudgetSpace t = BudgetSpace::of(h);
  EXPECT_EQ(t.stages, (std::vector<int64_t>{1, 2, 3})); // hybrid shards
  ASSERT_EQ(t.reshards.size(), 3u);                     // G = 2 of 4
  EXPECT_EQ(t.recomputes, (std::vector<bool>{true}));
  ASSERT_EQ(t.offloads.size(), 1u);
  EXPECT_EQ(t.offloads[0], (std::vector<OffloadKind>{OffloadKind::Params}));

  TrainPipelineOptions one; // no --world-size: the stage is not a knob
  BudgetSpace u = BudgetSpace::of(one);
  EXPECT_FALSE(u.sharded);
  EXPECT_EQ(u.size(BudgetKnob::Stage), 1);
}

// On random additive models: whenever the floor fits, the choice fits, and
// no single notch back from it fits in less time.
TEST(MemoryBudgetTest, ChoicesFitAndAreLocallyCheapest) {
  std::mt19937 rng(7);
  BudgetSpace s = fullSpace();
  for (int trial = 0; trial < 300; ++trial) {
    Additive m;
    m.base = 20000;
    m.saved.resize(kNumBudgetKnobs);
    m.added.resize(kNumBudgetKnobs);
    for (int k = 0; k < kNumBudgetKnobs; ++k) {
      uint64_t save = 0;
      double add = 0;
      for (int i = 0; i < s.size(static_cast<BudgetKnob>(k)); ++i) {
        if (i) {
          save += rng() % 1500;
          add += (rng() % 1000) / 100.0;
        }
        m.saved[k].push_back(save);
        m.added[k].push_back(add);
      }
    }
    uint64_t budget = 5000 + rng() % 15000;
    std::string log;
    llvm::raw_string_ostream os(log);
    auto c = chooseForBudget(budget, s, std::ref(m), os);
    BudgetChoice floor;
    for (int k = 0; k < kNumBudgetKnobs; ++k)
      floor.level[k] = s.size(static_cast<BudgetKnob>(k)) - 1;
    uint64_t floorPeak = (*m(floor)).peakBytes;
    if (floorPeak > budget) {
      EXPECT_FALSE(bool(c));
      llvm::consumeError(c.takeError());
      continue;
    }
    ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
    BudgetEstimate e = *m(*c);
    EXPECT_LE(e.peakBytes, budget) << log;
    for (int k = 0; k < kNumBudgetKnobs; ++k) {
      if (c->level[k] == 0 || ((k == 1 || k == 2) && c->level[0] != 3))
        continue;
      BudgetChoice back = *c;
      --back.level[k];
      if (k == 0 && c->level[0] == 3)
        back.level[1] = back.level[2] = 0;
      BudgetEstimate b = *m(back);
      EXPECT_FALSE(b.peakBytes <= budget && b.seconds < e.seconds)
          << "trial " << trial << ", knob " << k << "\n"
          << log;
    }
  }
}

} // namespace
