//===- DeviceTest.cpp - The CPUs a rank runs its kernels on ---------------===//
//
// shardrun's default --cpu-threads: a rank's CPUs shared among the ranks
// that may run on them (runtime/Device.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/Device.h"

#include "gtest/gtest.h"

#include <sched.h>

using namespace shardc::rt;

namespace {

TEST(DefaultCpuThreads, UnboundRanksShareTheirHostsCpus) {
  // Two hosts of 16 CPUs, unbound: every rank of a host has its key.
  ProcessCpus a{16, 1}, b{16, 2};
  std::vector<uint64_t> keys = {1, 1, 1, 1, 2, 2};
  EXPECT_EQ(defaultCpuThreads(a, keys), 4);
  EXPECT_EQ(defaultCpuThreads(b, keys), 8);
  // More ranks than CPUs: one thread each, not none.
  EXPECT_EQ(defaultCpuThreads(ProcessCpus{2, 1}, {1, 1, 1, 1}), 1);
}

TEST(DefaultCpuThreads, BoundRanksTakeTheirOwnCpus) {
  // mpirun --bind-to core or socket: each mask its own key.
  EXPECT_EQ(defaultCpuThreads(ProcessCpus{1, 10}, {10, 11}), 1);
  EXPECT_EQ(defaultCpuThreads(ProcessCpus{8, 10}, {10, 11, 12, 13}), 8);
  // Two ranks per socket: half a socket each.
  EXPECT_EQ(defaultCpuThreads(ProcessCpus{8, 10}, {10, 10, 11, 11}), 4);
}

TEST(ProcessCpus, CountsTheAffinityMaskAndKeysHostAndMask) {
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  ProcessCpus mine = processCpus();
  EXPECT_GE(mine.count, 1);
  EXPECT_LE(mine.count, CPU_COUNT(&mask));
  EXPECT_EQ(processCpus().key, mine.key);
  if (CPU_COUNT(&mask) < 2)
    return;
  // Narrowing the mask (as a launcher binding the rank does) changes the
  // key and the count.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) {
      CPU_SET(c, &one);
      break;
    }
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  ProcessCpus bound = processCpus();
  ASSERT_EQ(sched_setaffinity(0, sizeof mask, &mask), 0);
  EXPECT_EQ(bound.count, 1);
  EXPECT_NE(bound.key, mine.key);
}

} // namespace
