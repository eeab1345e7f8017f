//===- TraceStatsTest.cpp - The overlap shardrun --trace reports ----------===//
#include "runtime/TraceStats.h"

#include <gtest/gtest.h>

using namespace shardc::rt;

namespace {

TEST(TraceStats, NoCollectivesIsAllHidden) {
  OverlapStats s = overlapStats({{0, 10}}, {});
  EXPECT_EQ(s.collectiveUs, 0);
  EXPECT_EQ(s.exposedUs, 0);
  EXPECT_EQ(s.hiddenFraction(), 1.0);
}

TEST(TraceStats, CollectiveWithNoKernelIsAllExposed) {
  OverlapStats s = overlapStats({{0, 5}, {20, 30}}, {{6, 16}});
  EXPECT_EQ(s.collectiveUs, 10);
  EXPECT_EQ(s.exposedUs, 10);
  EXPECT_EQ(s.hiddenFraction(), 0.0);
}

TEST(TraceStats, PartialCoverByKernelsInAnyOrder) {
  // Collective [10, 30); kernels cover [5, 15) and [25, 40): 10 of 20
  // hidden. Unsorted input, and a kernel nested in another.
  OverlapStats s = overlapStats({{25, 40}, {5, 15}, {7, 9}}, {{10, 30}});
  EXPECT_EQ(s.collectiveUs, 20);
  EXPECT_EQ(s.exposedUs, 10);
  EXPECT_DOUBLE_EQ(s.hiddenFraction(), 0.5);
}

TEST(TraceStats, ConcurrentCollectivesCountOnce) {
  // Two collectives in flight together over [0, 10) and one alone [20, 25);
  // one kernel [8, 22) spans both groups.
  OverlapStats s = overlapStats({{8, 22}}, {{0, 10}, {2, 6}, {20, 25}});
  EXPECT_EQ(s.collectiveUs, 15);
  EXPECT_EQ(s.exposedUs, 15 - 2 - 2);
}

TEST(TraceStats, OneKernelOverSeveralCollectives) {
  OverlapStats s = overlapStats({{0, 100}}, {{10, 20}, {30, 40}, {90, 110}});
  EXPECT_EQ(s.collectiveUs, 40);
  EXPECT_EQ(s.exposedUs, 10);
}

TEST(TraceStats, EmptyAndReversedSpansCountAsNothing) {
  OverlapStats s = overlapStats({{5, 5}, {9, 3}}, {{4, 4}, {10, 2}, {0, 1}});
  EXPECT_EQ(s.collectiveUs, 1);
  EXPECT_EQ(s.exposedUs, 1);
}

} // namespace
