//===- CommTest.cpp - Communicators across real ranks ---------------------===//
//
// Run under mpirun (see CMakeLists.txt): every rank runs the same tests in
// the same order, each checks its own results, and mpirun fails when any
// rank does. Tests that need MPI skip when the binary is run directly; the
// self communicator and launcher detection tests need nothing.
//
// A rank must never leave a test early between collectives (the other ranks
// would wait forever), so tests use EXPECT_*, not ASSERT_*, around them.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/CommSupport.h"
#include "runtime/comm/Communicator.h"
#include "runtime/kernels/CastOps.h"

#include "llvm/Support/raw_ostream.h"

#include <mpi.h>

#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace shardc::rt;

namespace {

/// The MPI communicator of this process; null when not launched by MPI.
Communicator *mpi = nullptr;

#define REQUIRE_MPI()                                                          \
  do {                                                                         \
    if (!mpi)                                                                  \
      GTEST_SKIP() << "not launched by an MPI launcher";                       \
  } while (false)

std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}
template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}
template <typename T> std::string errorText(llvm::Expected<T> &&value) {
  return errorText(value);
}

/// A start call's handle, or 0 after recording the failure.
CollectiveHandle handleOrFail(llvm::Expected<CollectiveHandle> handle) {
  if (handle)
    return *handle;
  ADD_FAILURE() << llvm::toString(handle.takeError());
  return 0;
}

//===----------------------------------------------------------------------===//
// Element types and the values rank r contributes at index i
//===----------------------------------------------------------------------===//

/// bool elements, stored one per byte as the runtime does.
struct BoolElem {};

template <typename T> struct Elem;
template <> struct Elem<float> {
  using Storage = float;
  static constexpr DType dtype = DType::F32;
  // Small integers: every sum is exact.
  static Storage value(int r, int64_t i) {
    return static_cast<float>((r * 131 + i * 7) % 1000) - 500.0f;
  }
};
template <> struct Elem<double> {
  using Storage = double;
  static constexpr DType dtype = DType::F64;
  static Storage value(int r, int64_t i) {
    return static_cast<double>((r * 977 + i * 13) % 100003) - 5e4 + 0.5;
  }
};
template <> struct Elem<int32_t> {
  using Storage = int32_t;
  static constexpr DType dtype = DType::I32;
  static Storage value(int r, int64_t i) {
    return static_cast<int32_t>((r * 1000003 + i * 17) % 200000) - 100000;
  }
};
template <> struct Elem<int64_t> {
  using Storage = int64_t;
  static constexpr DType dtype = DType::I64;
  // Beyond 32 bits, so a narrowing path would show.
  static Storage value(int r, int64_t i) {
    return (int64_t(r + 1) << 40) + (i * 7919) % 1000003 - 500000;
  }
};
template <> struct Elem<uint8_t> {
  using Storage = uint8_t;
  static constexpr DType dtype = DType::U8;
  static Storage value(int r, int64_t i) {
    return static_cast<uint8_t>((r * 31 + i) % 256);
  }
};
template <> struct Elem<int8_t> {
  using Storage = int8_t;
  static constexpr DType dtype = DType::I8;
  static Storage value(int r, int64_t i) {
    return static_cast<int8_t>((r * 37 + i) % 256 - 128);
  }
};
template <> struct Elem<BoolElem> {
  using Storage = uint8_t;
  static constexpr DType dtype = DType::Bool;
  static Storage value(int r, int64_t i) { return (r + i) % 3 == 0; }
};

/// float16 and bfloat16, held as their bits: small integers, so that every
/// sum of up to 4 ranks is exact in either type (|sum| <= 256).
template <DType D, float (*Load)(uint16_t), uint16_t (*Store)(float)>
struct Float16Elem {
  using Storage = uint16_t;
  static constexpr DType dtype = D;
  static float decode(Storage v) { return Load(v); }
  static Storage encode(float f) { return Store(f); }
  static Storage value(int r, int64_t i) {
    return encode(static_cast<float>((r * 29 + i * 3) % 129 - 64));
  }
};
using HalfElem = Float16Elem<DType::F16, ops::halfToFloat, ops::floatToHalf>;
using BFloat16Elem =
    Float16Elem<DType::BF16, ops::bfloat16ToFloat, ops::floatToBfloat16>;
template <> struct Elem<HalfElem> : HalfElem {};
template <> struct Elem<BFloat16Elem> : BFloat16Elem {};

template <typename T> using Storage = typename Elem<T>::Storage;

template <typename T>
std::vector<Storage<T>> contribution(int rank, int64_t count) {
  std::vector<Storage<T>> v(count);
  for (int64_t i = 0; i < count; ++i)
    v[i] = Elem<T>::value(rank, i);
  return v;
}

template <typename T>
Storage<T> reduced(ReduceOp op, int worldSize, int64_t i) {
  Storage<T> acc = Elem<T>::value(0, i);
  for (int r = 1; r < worldSize; ++r) {
    Storage<T> v = Elem<T>::value(r, i);
    if constexpr (std::is_same_v<T, HalfElem> ||
                  std::is_same_v<T, BFloat16Elem>) {
      float a = Elem<T>::decode(acc), b = Elem<T>::decode(v);
      acc = Elem<T>::encode(op == ReduceOp::Sum ? a + b : std::max(a, b));
    } else {
      acc = op == ReduceOp::Sum ? static_cast<Storage<T>>(acc + v)
                                : std::max(acc, v);
    }
  }
  return acc;
}

/// Compares whole buffers and reports the number of mismatches and the
/// first one, instead of one failure per element.
template <typename S>
void expectEqualBuffers(const std::vector<S> &expected,
                        const std::vector<S> &actual, const std::string &what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  int64_t mismatches = 0, first = -1;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == actual[i])
      continue;
    if (mismatches++ == 0)
      first = static_cast<int64_t>(i);
  }
  if (mismatches == 0)
    return;
  ADD_FAILURE() << what << ": " << mismatches << " of " << expected.size()
                << " elements differ; first at " << first << ": expected "
                << +expected[first] << ", got " << +actual[first];
}

std::string describe(const char *kind, int64_t count, DType dtype,
                     std::optional<ReduceOp> op = std::nullopt) {
  std::string text = std::string(kind) + " of " + std::to_string(count) +
                     " x " + dtypeName(dtype).str();
  if (op)
    text += *op == ReduceOp::Sum ? " (sum)" : " (max)";
  return text;
}

/// Per-rank counts: 1, an odd count, one that does not divide typical chunk
/// sizes, and a large one: 3M elements in the largest buffer (for allgather
/// and reduce-scatter that is count * worldSize, so keep the time of a
/// 4-rank run on 2 cores in check).
std::vector<int64_t> counts(int64_t blocksInLargestBuffer) {
  return {1, 17, 100003, 3000000 / blocksInLargestBuffer + 1};
}

//===----------------------------------------------------------------------===//
// Collectives over MPI, per element type
//===----------------------------------------------------------------------===//

template <typename T> class MpiAllGatherTest : public ::testing::Test {};
using AllGatherTypes = ::testing::Types<float, double, int32_t, int64_t,
                                        uint8_t, int8_t, BoolElem>;
TYPED_TEST_SUITE(MpiAllGatherTest, AllGatherTypes);

TYPED_TEST(MpiAllGatherTest, GathersInRankOrder) {
  REQUIRE_MPI();
  using S = Storage<TypeParam>;
  constexpr DType dtype = Elem<TypeParam>::dtype;
  int size = mpi->worldSize();
  for (int64_t count : counts(size)) {
    std::vector<S> in = contribution<TypeParam>(mpi->rank(), count);
    std::vector<S> out(count * size);
    std::vector<S> expected;
    for (int r = 0; r < size; ++r) {
      std::vector<S> part = contribution<TypeParam>(r, count);
      expected.insert(expected.end(), part.begin(), part.end());
    }
    EXPECT_EQ(errorText(mpi->allGather(in.data(), out.data(), count, dtype)),
              "");
    expectEqualBuffers(expected, out, describe("allgather", count, dtype));
  }
}

TYPED_TEST(MpiAllGatherTest, InPlace) {
  REQUIRE_MPI();
  using S = Storage<TypeParam>;
  constexpr DType dtype = Elem<TypeParam>::dtype;
  int size = mpi->worldSize();
  for (int64_t count : counts(size)) {
    std::vector<S> expected;
    for (int r = 0; r < size; ++r) {
      std::vector<S> part = contribution<TypeParam>(r, count);
      expected.insert(expected.end(), part.begin(), part.end());
    }
    // Only this rank's block holds data; the rest is garbage to overwrite.
    std::vector<S> buffer(count * size, static_cast<S>(1));
    std::copy_n(expected.begin() + mpi->rank() * count, count,
                buffer.begin() + mpi->rank() * count);
    S *block = buffer.data() + mpi->rank() * count;
    EXPECT_EQ(errorText(mpi->allGather(block, buffer.data(), count, dtype)),
              "");
    expectEqualBuffers(expected, buffer,
                       describe("in-place allgather", count, dtype));
  }
}

template <typename T> class MpiReduceTest : public ::testing::Test {};
using ReduceTypes =
    ::testing::Types<float, double, int32_t, int64_t, HalfElem, BFloat16Elem>;
TYPED_TEST_SUITE(MpiReduceTest, ReduceTypes);

TYPED_TEST(MpiReduceTest, ReduceScatterGivesEachRankItsChunk) {
  REQUIRE_MPI();
  using S = Storage<TypeParam>;
  constexpr DType dtype = Elem<TypeParam>::dtype;
  int size = mpi->worldSize(), rank = mpi->rank();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
    for (int64_t count : counts(size)) {
      std::vector<S> in = contribution<TypeParam>(rank, count * size);
      std::vector<S> out(count);
      std::vector<S> expected(count);
      for (int64_t i = 0; i < count; ++i)
        expected[i] = reduced<TypeParam>(op, size, rank * count + i);
      llvm::Expected<CollectiveHandle> handle =
          mpi->reduceScatterStart(in.data(), out.data(), count, dtype, op);
      EXPECT_EQ(errorText(handle), "");
      if (handle) {
        EXPECT_EQ(errorText(mpi->wait(*handle)), "");
      }
      expectEqualBuffers(expected, out,
                         describe("reduce-scatter", count, dtype, op));
    }
  }
}

TYPED_TEST(MpiReduceTest, AllReduce) {
  REQUIRE_MPI();
  using S = Storage<TypeParam>;
  constexpr DType dtype = Elem<TypeParam>::dtype;
  int size = mpi->worldSize();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
    for (int64_t count : counts(1)) {
      std::vector<S> in = contribution<TypeParam>(mpi->rank(), count);
      std::vector<S> out(count);
      std::vector<S> expected(count);
      for (int64_t i = 0; i < count; ++i)
        expected[i] = reduced<TypeParam>(op, size, i);
      EXPECT_EQ(
          errorText(mpi->allReduce(in.data(), out.data(), count, dtype, op)),
          "");
      expectEqualBuffers(expected, out,
                         describe("allreduce", count, dtype, op));
      // The input is left alone.
      expectEqualBuffers(contribution<TypeParam>(mpi->rank(), count), in,
                         describe("allreduce input", count, dtype, op));
    }
  }
}

TYPED_TEST(MpiReduceTest, AllReduceInPlace) {
  REQUIRE_MPI();
  using S = Storage<TypeParam>;
  constexpr DType dtype = Elem<TypeParam>::dtype;
  int size = mpi->worldSize();
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
    for (int64_t count : counts(1)) {
      std::vector<S> buffer = contribution<TypeParam>(mpi->rank(), count);
      std::vector<S> expected(count);
      for (int64_t i = 0; i < count; ++i)
        expected[i] = reduced<TypeParam>(op, size, i);
      EXPECT_EQ(errorText(mpi->allReduce(buffer.data(), buffer.data(), count,
                                         dtype, op)),
                "");
      expectEqualBuffers(expected, buffer,
                         describe("in-place allreduce", count, dtype, op));
    }
  }
}

/// Float32 values whose sum over ranks depends on the order of the
/// additions: magnitudes from 2^-20 to 2^20, either sign.
std::vector<float> orderSensitive(int rank, int64_t count) {
  std::vector<float> values(count);
  uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1);
  for (float &v : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = static_cast<uint32_t>(state >> 32);
    float mantissa = 1.0f + static_cast<float>(bits & 0xffff) / 65536.0f;
    v = std::ldexp(bits >> 31 ? -mantissa : mantissa,
                   static_cast<int>((bits >> 16) % 41) - 20);
  }
  return values;
}

// ZeRO stages 1-3 reduce-scatter the gradients that stage 0 all-reduces,
// split differently, and hybrid sharding reduce-scatters within groups of
// consecutive ranks, then all-reduces across them. They train alike bit for
// bit only if all of these add the ranks' values in one order, whatever an
// element's place in its buffer. Power-of-two groups promise it
// (MpiCommunicator.cpp: one tree, pairs of neighbours first); with two
// ranks any order agrees.
TEST(MpiCommunicatorTest, ReduceScatterAndAllReduceAddInOneOrder) {
  REQUIRE_MPI();
  int size = mpi->worldSize(), rank = mpi->rank();
  if (size & (size - 1))
    GTEST_SKIP() << "one order is promised to power-of-two groups";
  // Hybrid sharding's groups on a size / 2 x 2 mesh (as in
  // SplitGroupsRunTheirOwnCollectives).
  std::unique_ptr<Communicator> inside, across;
  if (size >= 4) {
    llvm::Expected<std::unique_ptr<Communicator>> made =
        mpi->split(rank / 2, rank % 2, "axis 1");
    ASSERT_TRUE(bool(made)) << errorText(made);
    inside = std::move(*made);
    made = mpi->split(rank % 2, rank / 2, "axis 0");
    ASSERT_TRUE(bool(made)) << errorText(made);
    across = std::move(*made);
  }
  for (int64_t count :
       {int64_t(1), int64_t(3), int64_t(1000), int64_t(300007)}) {
    std::vector<float> in = orderSensitive(rank, count * size);
    std::vector<float> scattered(count);
    CollectiveHandle handle = handleOrFail(mpi->reduceScatterStart(
        in.data(), scattered.data(), count, DType::F32, ReduceOp::Sum));
    if (handle) {
      EXPECT_EQ(errorText(mpi->wait(handle)), "");
    }
    // All-reduce the buffer less its first element (every element in
    // another place than in the reduce-scatter's blocks) and in place.
    std::vector<float> shifted(count * size);
    EXPECT_EQ(
        errorText(mpi->allReduce(in.data() + 1, shifted.data() + 1,
                                 count * size - 1, DType::F32, ReduceOp::Sum)),
        "");
    std::vector<float> inPlace = in;
    EXPECT_EQ(
        errorText(mpi->allReduce(inPlace.data(), inPlace.data(), count * size,
                                 DType::F32, ReduceOp::Sum)),
        "");
    int64_t first = rank * count;
    EXPECT_EQ(0, std::memcmp(scattered.data(), inPlace.data() + first,
                             count * sizeof(float)))
        << "reduce-scatter and in-place all-reduce of " << count
        << " x float32 per rank";
    int64_t from = std::max<int64_t>(first, 1);
    EXPECT_EQ(0, std::memcmp(scattered.data() + (from - first),
                             shifted.data() + from,
                             (first + count - from) * sizeof(float)))
        << "reduce-scatter and shifted all-reduce of " << count
        << " x float32 per rank";
    if (inside) {
      // Each pair reduce-scatters the buffer into halves, which the pairs'
      // ranks in the same place all-reduce across: this rank's half of the
      // sum, which the in-place all-reduce above holds too.
      int64_t half = count * size / 2;
      std::vector<float> hybrid(half);
      CollectiveHandle rs = handleOrFail(inside->reduceScatterStart(
          in.data(), hybrid.data(), half, DType::F32, ReduceOp::Sum));
      if (rs) {
        EXPECT_EQ(errorText(inside->wait(rs)), "");
      }
      EXPECT_EQ(errorText(across->allReduce(hybrid.data(), hybrid.data(), half,
                                            DType::F32, ReduceOp::Sum)),
                "");
      EXPECT_EQ(0,
                std::memcmp(hybrid.data(), inPlace.data() + (rank % 2) * half,
                            half * sizeof(float)))
          << "reduce-scatter within pairs and all-reduce across, against "
             "the all-reduce of "
          << count << " x float32 per rank";
    }

    // The values do tell orders apart: summing the ranks' values in
    // another order changes some of the sums (from 3 ranks on).
    if (size > 2 && count > 100) {
      std::vector<float> all(count * size * size);
      EXPECT_EQ(errorText(mpi->allGather(in.data(), all.data(), count * size,
                                         DType::F32)),
                "");
      int64_t differ = 0;
      for (int64_t i = 0; i < count * size; ++i) {
        float forward = 0, backward = 0;
        for (int r = 0; r < size; ++r) {
          forward += all[r * count * size + i];
          backward += all[(size - 1 - r) * count * size + i];
        }
        differ += forward != backward;
      }
      EXPECT_GT(differ, 0);
    }
  }
}

//===----------------------------------------------------------------------===//
// Handles, ordering, overlap, records
//===----------------------------------------------------------------------===//

TEST(MpiCommunicatorTest, Identity) {
  REQUIRE_MPI();
  EXPECT_EQ(mpi->name(), "mpi");
  EXPECT_GE(mpi->rank(), 0);
  EXPECT_LT(mpi->rank(), mpi->worldSize());
  const char *size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (size) {
    EXPECT_EQ(mpi->worldSize(), std::atoi(size));
  }
  EXPECT_EQ(errorText(mpi->barrier()), "");
}

TEST(MpiCommunicatorTest, SecondMpiCommunicatorIsAnError) {
  REQUIRE_MPI();
  llvm::Expected<std::unique_ptr<Communicator>> second =
      createMpiCommunicator();
  EXPECT_NE(errorText(second).find("only once"), std::string::npos);
}

TEST(MpiCommunicatorTest, CollectiveTimeoutMustBeNonNegative) {
  // Checked before MPI is claimed, so this error comes first.
  for (double bad : {-1.0, std::nan(""), HUGE_VAL}) {
    MpiCommunicatorOptions options;
    options.collectiveTimeoutSeconds = bad;
    llvm::Expected<std::unique_ptr<Communicator>> created =
        createMpiCommunicator(options);
    EXPECT_NE(errorText(created).find("the collective timeout must be a "
                                      "number of seconds >= 0"),
              std::string::npos);
  }
}

TEST(MpiCommunicatorTest, ZeroCountIsANoOp) {
  REQUIRE_MPI();
  float sentinel = 42.0f;
  EXPECT_EQ(errorText(mpi->allGather(nullptr, nullptr, 0, DType::F32)), "");
  EXPECT_EQ(errorText(mpi->allReduce(&sentinel, &sentinel, 0, DType::F32,
                                     ReduceOp::Sum)),
            "");
  CollectiveHandle h = handleOrFail(
      mpi->reduceScatterStart(nullptr, nullptr, 0, DType::I64, ReduceOp::Max));
  EXPECT_EQ(errorText(mpi->wait(h)), "");
  EXPECT_EQ(sentinel, 42.0f);
}

TEST(MpiCommunicatorTest, ManyOutstandingHandlesWaitedOutOfOrder) {
  REQUIRE_MPI();
  int size = mpi->worldSize(), rank = mpi->rank();
  constexpr int kOps = 24;
  struct Pending {
    int kind; // 0 allreduce, 1 allgather, 2 reduce-scatter
    int64_t count;
    std::vector<int64_t> in, out;
    CollectiveHandle handle = 0;
  };
  std::vector<Pending> ops(kOps);
  for (int k = 0; k < kOps; ++k) {
    Pending &p = ops[k];
    p.kind = k % 3;
    p.count = 1 + k * 1001;
    // Distinct data per operation: offset the index by the op number.
    int64_t inCount = p.kind == 2 ? p.count * size : p.count;
    p.in.resize(inCount);
    for (int64_t i = 0; i < inCount; ++i)
      p.in[i] = Elem<int64_t>::value(rank, i + k);
    p.out.assign(p.kind == 1 ? p.count * size : p.count, -1);
    llvm::Expected<CollectiveHandle> h =
        p.kind == 0 ? mpi->allReduceStart(p.in.data(), p.out.data(), p.count,
                                          DType::I64, ReduceOp::Sum)
        : p.kind == 1
            ? mpi->allGatherStart(p.in.data(), p.out.data(), p.count,
                                  DType::I64)
            : mpi->reduceScatterStart(p.in.data(), p.out.data(), p.count,
                                      DType::I64, ReduceOp::Sum);
    p.handle = handleOrFail(std::move(h));
  }
  // Handles are distinct.
  std::vector<CollectiveHandle> handles;
  for (const Pending &p : ops)
    handles.push_back(p.handle);
  std::sort(handles.begin(), handles.end());
  EXPECT_EQ(std::unique(handles.begin(), handles.end()), handles.end());

  // Wait newest first, odd positions before even ones.
  std::vector<int> order;
  for (int k = kOps - 1; k >= 0; k -= 2)
    order.push_back(k);
  for (int k = kOps - 2; k >= 0; k -= 2)
    order.push_back(k);
  for (int k : order)
    EXPECT_EQ(errorText(mpi->wait(ops[k].handle)), "") << "op " << k;

  for (int k = 0; k < kOps; ++k) {
    const Pending &p = ops[k];
    std::vector<int64_t> expected;
    if (p.kind == 0) {
      for (int64_t i = 0; i < p.count; ++i)
        expected.push_back(reduced<int64_t>(ReduceOp::Sum, size, i + k));
    } else if (p.kind == 1) {
      for (int r = 0; r < size; ++r)
        for (int64_t i = 0; i < p.count; ++i)
          expected.push_back(Elem<int64_t>::value(r, i + k));
    } else {
      for (int64_t i = 0; i < p.count; ++i)
        expected.push_back(
            reduced<int64_t>(ReduceOp::Sum, size, rank * p.count + i + k));
    }
    expectEqualBuffers(expected, p.out, "op " + std::to_string(k));
  }

  // A handle is retired by its wait.
  std::string again = errorText(mpi->wait(ops[0].handle));
  EXPECT_NE(again.find("unknown collective handle"), std::string::npos)
      << again;
  EXPECT_NE(errorText(mpi->wait(123456789)), "");
}

/// Spins on the calling thread for `micros`; returns a value to keep the
/// work from being optimized away.
double computeFor(double micros) {
  double end = nowMicros() + micros;
  volatile double acc = 0;
  while (nowMicros() < end)
    for (int i = 0; i < 1000; ++i)
      acc = acc + i * 1e-9;
  return acc;
}

TEST(MpiCommunicatorTest, CommunicationOverlapsComputation) {
  REQUIRE_MPI();
  // Start all ranks together, so the collective is not just waiting for a
  // late peer.
  EXPECT_EQ(errorText(mpi->barrier()), "");
  (void)mpi->takeRecords();

  // Out of place, so that even one rank has work to do (a copy).
  constexpr int64_t kCount = int64_t(8) << 20; // 32 MiB of float32.
  std::vector<float> in(kCount, 1.0f), out(kCount, 0.0f);
  // The main thread is free from the start call until it waits; on a loaded
  // machine it may be descheduled right after the start call, so the
  // interval counts from there rather than from the first compute cycle.
  double freeFromUs = nowMicros();
  CollectiveHandle handle = handleOrFail(mpi->allReduceStart(
      in.data(), out.data(), kCount, DType::F32, ReduceOp::Sum));
  (void)computeFor(50000);
  double waitCalledUs = nowMicros();
  EXPECT_EQ(errorText(mpi->wait(handle)), "");
  EXPECT_EQ(out.front(), static_cast<float>(mpi->worldSize()));
  EXPECT_EQ(out.back(), static_cast<float>(mpi->worldSize()));

  std::vector<CollectiveRecord> records = mpi->takeRecords();
  auto it = std::find_if(
      records.begin(), records.end(),
      [&](const CollectiveRecord &r) { return r.handle == handle; });
  ASSERT_NE(it, records.end());
  EXPECT_EQ(it->kind, "allreduce");
  EXPECT_EQ(it->bytes, kCount * 4);
  EXPECT_LE(freeFromUs, it->queuedUs);
  EXPECT_LE(it->queuedUs, it->startUs);
  EXPECT_LT(it->startUs, it->endUs);
  // The communication thread took the collective up and worked on it while
  // the main thread computed, before anyone waited for it.
  EXPECT_LT(it->startUs, waitCalledUs);
  double overlapUs = std::min(it->endUs, waitCalledUs) - it->startUs;
  EXPECT_GT(overlapUs, 0.0);
  std::printf("[ overlap  ] rank %d: allreduce of 32 MiB ran %.0f us, "
              "%.0f us of it before wait() after 50 ms of compute; done "
              "%.0f us after wait() was called\n",
              mpi->rank(), it->endUs - it->startUs, overlapUs,
              std::max(0.0, it->endUs - waitCalledUs));
}

TEST(MpiCommunicatorTest, RecordsDescribeEachCollective) {
  REQUIRE_MPI();
  (void)mpi->takeRecords();
  int size = mpi->worldSize();
  std::vector<double> in(10 * size, 1.0), out(10 * size);
  double before = nowMicros();
  EXPECT_EQ(errorText(mpi->allGather(in.data(), out.data(), 10, DType::F64)),
            "");
  CollectiveHandle rs = handleOrFail(mpi->reduceScatterStart(
      in.data(), out.data(), 10, DType::F64, ReduceOp::Sum));
  EXPECT_EQ(errorText(mpi->wait(rs)), "");
  EXPECT_EQ(errorText(mpi->allReduce(in.data(), out.data(), 10, DType::F64,
                                     ReduceOp::Max)),
            "");
  EXPECT_EQ(errorText(mpi->barrier()), "");
  std::vector<CollectiveRecord> records = mpi->takeRecords();
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].kind, "allgather");
  EXPECT_EQ(records[0].bytes, 10 * 8 * size);
  EXPECT_EQ(records[1].kind, "reduce_scatter");
  EXPECT_EQ(records[1].handle, rs);
  EXPECT_EQ(records[1].bytes, 10 * 8 * size);
  EXPECT_EQ(records[2].kind, "allreduce");
  EXPECT_EQ(records[2].bytes, 10 * 8);
  EXPECT_EQ(records[3].kind, "barrier");
  EXPECT_EQ(records[3].bytes, 0);
  double previousEnd = before;
  for (const CollectiveRecord &r : records) {
    EXPECT_LE(r.queuedUs, r.startUs) << r.kind;
    EXPECT_LE(r.startUs, r.endUs) << r.kind;
    // One FIFO: each starts after the previous ended.
    EXPECT_LE(previousEnd, r.startUs) << r.kind;
    previousEnd = r.endUs;
  }
  EXPECT_TRUE(mpi->takeRecords().empty());
}

TEST(MpiCommunicatorTest, SplitGroupsRunTheirOwnCollectives) {
  REQUIRE_MPI();
  int size = mpi->worldSize(), rank = mpi->rank();
  // Groups of consecutive pairs (hybrid sharding's shard groups) and, across
  // them, of ranks with the same position (the replicas), as a 2-d mesh of
  // size / 2 x 2 makes them; an odd world makes groups of one.
  int width = size % 2 == 0 ? 2 : 1;
  llvm::Expected<std::unique_ptr<Communicator>> inside =
      mpi->split(rank / width, rank % width, "axis 1");
  ASSERT_TRUE(bool(inside)) << errorText(inside);
  llvm::Expected<std::unique_ptr<Communicator>> across =
      mpi->split(rank % width, rank / width, "axis 0");
  ASSERT_TRUE(bool(across)) << errorText(across);
  EXPECT_EQ((*inside)->worldSize(), width);
  EXPECT_EQ((*inside)->rank(), rank % width);
  EXPECT_EQ((*across)->worldSize(), size / width);
  EXPECT_EQ((*across)->rank(), rank / width);
  (void)mpi->takeRecords();

  // A gather within the group sees the group's ranks only.
  std::vector<int64_t> mine = {rank}, gathered(width, -1);
  EXPECT_EQ(errorText((*inside)->allGather(mine.data(), gathered.data(), 1,
                                           DType::I64)),
            "");
  for (int k = 0; k < width; ++k)
    EXPECT_EQ(gathered[k], rank / width * width + k);
  // Reduce-scatter within, then all-reduce across: the sum over every rank,
  // spread over the group (hybrid sharding's gradient path), started on two
  // groups and the whole communicator before any is waited for.
  std::vector<double> grads(2 * width), shard(2), total(1), one = {1.0};
  for (int64_t i = 0; i < 2 * width; ++i)
    grads[i] = rank + 10.0 * i;
  CollectiveHandle rs = handleOrFail((*inside)->reduceScatterStart(
      grads.data(), shard.data(), 2, DType::F64, ReduceOp::Sum));
  CollectiveHandle all = handleOrFail(mpi->allReduceStart(
      one.data(), total.data(), 1, DType::F64, ReduceOp::Sum));
  EXPECT_EQ(errorText((*inside)->wait(rs)), "");
  CollectiveHandle ar = handleOrFail((*across)->allReduceStart(
      shard.data(), shard.data(), 2, DType::F64, ReduceOp::Sum));
  EXPECT_EQ(errorText((*across)->wait(ar)), "");
  EXPECT_EQ(errorText(mpi->wait(all)), "");
  EXPECT_EQ(total[0], size);
  double rankSum = size * (size - 1) / 2.0;
  for (int64_t i = 0; i < 2; ++i) {
    int64_t element = (rank % width) * 2 + i;
    EXPECT_EQ(shard[i], rankSum + 10.0 * element * size) << "element " << i;
  }
  EXPECT_EQ(errorText((*inside)->barrier()), "");

  // The whole communicator records every group's collectives, each named.
  std::vector<CollectiveRecord> records = mpi->takeRecords();
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(records[0].kind, "allgather");
  EXPECT_EQ(records[0].group, "axis 1");
  EXPECT_EQ(records[0].ranks, width);
  EXPECT_EQ(records[0].bytes, 8 * width);
  EXPECT_EQ(records[1].kind, "reduce_scatter");
  EXPECT_EQ(records[1].group, "axis 1");
  EXPECT_EQ(records[2].kind, "allreduce");
  EXPECT_EQ(records[2].group, "");
  EXPECT_EQ(records[2].ranks, size);
  EXPECT_EQ(records[3].group, "axis 0");
  EXPECT_EQ(records[3].ranks, size / width);
  EXPECT_EQ(records[4].kind, "barrier");
  EXPECT_TRUE((*inside)->takeRecords().empty());

  // A negative color is an error, before any rank calls MPI.
  EXPECT_NE(errorText(mpi->split(-1, 0, "none")).find("negative"),
            std::string::npos);
}

TEST(MpiCommunicatorTest, InvalidArgumentsAreErrorsNotCrashes) {
  REQUIRE_MPI();
  // Every rank makes the same mistakes, so none of them reaches MPI.
  std::vector<float> a(64), b(64);
  std::string err = errorText(
      mpi->allReduceStart(a.data(), b.data(), 4, DType::U8, ReduceOp::Sum));
  EXPECT_NE(err.find("uint8"), std::string::npos) << err;
  EXPECT_NE(err.find("not supported"), std::string::npos) << err;
  err = errorText(mpi->reduceScatterStart(a.data(), b.data(), 1, DType::Bool,
                                          ReduceOp::Max));
  EXPECT_NE(err.find("bool"), std::string::npos) << err;
  err = errorText(mpi->allGatherStart(a.data(), b.data(), 4, DType::Undefined));
  EXPECT_NE(err.find("undefined"), std::string::npos) << err;
  err = errorText(
      mpi->allReduce(a.data(), b.data(), -1, DType::F32, ReduceOp::Sum));
  EXPECT_NE(err.find("negative"), std::string::npos) << err;
  err = errorText(mpi->allGather(nullptr, b.data(), 4, DType::F32));
  EXPECT_NE(err.find("null input"), std::string::npos) << err;
  err = errorText(
      mpi->allReduce(a.data(), a.data() + 1, 4, DType::F32, ReduceOp::Sum));
  EXPECT_NE(err.find("overlap"), std::string::npos) << err;
  err = errorText(mpi->reduceScatterStart(a.data(), a.data(), 2, DType::F32,
                                          ReduceOp::Sum));
  EXPECT_NE(err.find("overlap"), std::string::npos) << err;
  err = errorText(mpi->allReduceStart(a.data(), b.data(), INT64_MAX / 2,
                                      DType::F32, ReduceOp::Sum));
  EXPECT_NE(err.find("overflow"), std::string::npos) << err;

  // None of that broke the communicator.
  EXPECT_EQ(errorText(mpi->asyncError()), "");
  std::fill(a.begin(), a.end(), 2.0f);
  EXPECT_EQ(errorText(mpi->allReduce(a.data(), b.data(), 64, DType::F32,
                                     ReduceOp::Sum)),
            "");
  EXPECT_EQ(b[63], 2.0f * mpi->worldSize());
}

//===----------------------------------------------------------------------===//
// Ordering against a compute stream
//===----------------------------------------------------------------------===//

/// The input-ready event of a compute stream that is still running: the
/// input is written only when the event is synchronized, after `delayMs`, as
/// by a device kernel still in flight. Remembers who synchronized it.
class LateInputEvent : public Event {
public:
  LateInputEvent(std::function<void()> produce, int delayMs,
                 std::string error = "")
      : produce(std::move(produce)), delayMs(delayMs), error(std::move(error)) {
  }
  llvm::Error record(Stream &) override { return llvm::Error::success(); }
  llvm::Error wait(Stream &) override { return llvm::Error::success(); }
  llvm::Error synchronize() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    produce();
    synchronizedOn = std::this_thread::get_id();
    ++syncs;
    if (!error.empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
    return llvm::Error::success();
  }

  std::function<void()> produce;
  int delayMs;
  std::string error;
  std::atomic<int> syncs{0};
  std::thread::id synchronizedOn;
};

/// A compute stream with nothing queued.
class IdleStream : public Stream {
public:
  llvm::Error synchronize() override { return llvm::Error::success(); }
};

TEST(MpiCommunicatorTest, CollectivesReadTheInputOnlyOnceItIsReady) {
  REQUIRE_MPI();
  int size = mpi->worldSize(), rank = mpi->rank();
  constexpr int64_t kCount = 4099;
  for (int kind = 0; kind < 3; ++kind) { // allreduce, allgather, reduce-scatter
    int64_t inCount = kind == 2 ? kCount * size : kCount;
    int64_t outCount = kind == 1 ? kCount * size : kCount;
    std::vector<int64_t> produced = contribution<int64_t>(rank, inCount);
    // Until the event is synchronized the input holds garbage.
    std::vector<int64_t> in(inCount, -1), out(outCount, -7);
    LateInputEvent ready(
        [&] { std::copy(produced.begin(), produced.end(), in.begin()); }, 30);
    IdleStream stream;
    llvm::Expected<CollectiveHandle> h =
        kind == 0 ? mpi->allReduceStart(in.data(), out.data(), kCount,
                                        DType::I64, ReduceOp::Sum, &ready)
        : kind == 1
            ? mpi->allGatherStart(in.data(), out.data(), kCount, DType::I64,
                                  &ready)
            : mpi->reduceScatterStart(in.data(), out.data(), kCount, DType::I64,
                                      ReduceOp::Sum, &ready);
    CollectiveHandle handle = handleOrFail(std::move(h));
    EXPECT_EQ(errorText(mpi->wait(handle, &stream)), "") << kind;
    // The communication thread waited for the event; the caller did not.
    EXPECT_EQ(ready.syncs.load(), 1) << kind;
    EXPECT_NE(ready.synchronizedOn, std::this_thread::get_id()) << kind;

    std::vector<int64_t> expected;
    if (kind == 0) {
      for (int64_t i = 0; i < kCount; ++i)
        expected.push_back(reduced<int64_t>(ReduceOp::Sum, size, i));
    } else if (kind == 1) {
      for (int r = 0; r < size; ++r)
        for (int64_t i = 0; i < kCount; ++i)
          expected.push_back(Elem<int64_t>::value(r, i));
    } else {
      for (int64_t i = 0; i < kCount; ++i)
        expected.push_back(
            reduced<int64_t>(ReduceOp::Sum, size, rank * kCount + i));
    }
    expectEqualBuffers(expected, out, "kind " + std::to_string(kind));
  }
  EXPECT_EQ(errorText(mpi->asyncError()), "");
}

/// What SHARD_MPI_CHECK makes of a failing call: its text, file:line and
/// MPI's message. (Called on the test thread with a literal code: Open MPI's
/// MPI_Error_string is a table lookup, safe from any thread once MPI is
/// initialized, which Open MPI requires.)
llvm::Error failingMpiCall() {
  SHARD_MPI_CHECK(MPI_SUCCESS);
  SHARD_MPI_CHECK(MPI_ERR_COUNT);
  return llvm::Error::success();
}

TEST(MpiErrorTest, CheckMacroNamesCallPlaceAndMessage) {
  REQUIRE_MPI();
  std::string err = errorText(failingMpiCall());
  EXPECT_NE(err.find("MPI error in MPI_ERR_COUNT at CommTest.cpp:"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("invalid count"), std::string::npos) << err;
  EXPECT_EQ(errorText(SHARD_MPI_ERROR(MPI_SUCCESS)), "");
}

//===----------------------------------------------------------------------===//
// Self communicator
//===----------------------------------------------------------------------===//

TEST(SelfCommunicatorTest, CollectivesAreCopies) {
  std::unique_ptr<Communicator> self = createSelfCommunicator();
  EXPECT_EQ(self->rank(), 0);
  EXPECT_EQ(self->worldSize(), 1);
  EXPECT_EQ(self->name(), "self");

  std::vector<int64_t> in = contribution<int64_t>(0, 1000), out(1000, 0);
  EXPECT_EQ(errorText(self->allGather(in.data(), out.data(), 1000, DType::I64)),
            "");
  EXPECT_EQ(out, in);
  std::fill(out.begin(), out.end(), 0);
  CollectiveHandle h = handleOrFail(self->reduceScatterStart(
      in.data(), out.data(), 1000, DType::I64, ReduceOp::Max));
  // Done at start: the output is already valid; wait retires the handle.
  EXPECT_EQ(out, in);
  EXPECT_EQ(errorText(self->wait(h)), "");
  std::fill(out.begin(), out.end(), 0);
  EXPECT_EQ(errorText(self->allReduce(in.data(), out.data(), 1000, DType::I64,
                                      ReduceOp::Sum)),
            "");
  EXPECT_EQ(out, in);
  // In place leaves the data as it is.
  EXPECT_EQ(errorText(self->allReduce(out.data(), out.data(), 1000, DType::I64,
                                      ReduceOp::Sum)),
            "");
  EXPECT_EQ(out, in);
  EXPECT_EQ(
      errorText(self->allGather(out.data(), out.data(), 1000, DType::I64)), "");
  EXPECT_EQ(out, in);
  EXPECT_EQ(errorText(self->barrier()), "");
  EXPECT_EQ(errorText(self->asyncError()), "");
}

TEST(SelfCommunicatorTest, SplitIsOneRank) {
  std::unique_ptr<Communicator> self = createSelfCommunicator();
  llvm::Expected<std::unique_ptr<Communicator>> group =
      self->split(0, 0, "axis 1");
  ASSERT_TRUE(bool(group)) << errorText(group);
  EXPECT_EQ((*group)->rank(), 0);
  EXPECT_EQ((*group)->worldSize(), 1);
  float in = 3, out = 0;
  EXPECT_EQ(errorText((*group)->allGather(&in, &out, 1, DType::F32)), "");
  EXPECT_EQ(out, 3);
}

TEST(SelfCommunicatorTest, HandlesAndRecords) {
  std::unique_ptr<Communicator> self = createSelfCommunicator();
  float x[3] = {1, 2, 3}, y[3] = {};
  CollectiveHandle a =
      handleOrFail(self->allReduceStart(x, y, 3, DType::F32, ReduceOp::Sum));
  CollectiveHandle b = handleOrFail(self->allGatherStart(x, y, 3, DType::F32));
  EXPECT_NE(a, b);
  EXPECT_EQ(errorText(self->wait(b)), "");
  EXPECT_EQ(errorText(self->wait(a)), "");
  std::string err = errorText(self->wait(a));
  EXPECT_NE(err.find("unknown collective handle"), std::string::npos) << err;

  std::vector<CollectiveRecord> records = self->takeRecords();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].kind, "allreduce");
  EXPECT_EQ(records[0].handle, a);
  EXPECT_EQ(records[0].bytes, 12);
  EXPECT_EQ(records[1].kind, "allgather");
  EXPECT_LE(records[1].startUs, records[1].endUs);
  EXPECT_TRUE(self->takeRecords().empty());
}

TEST(SelfCommunicatorTest, InvalidArgumentsAreErrors) {
  std::unique_ptr<Communicator> self = createSelfCommunicator();
  float x[4] = {};
  std::string err =
      errorText(self->allReduceStart(x, x, 4, DType::U8, ReduceOp::Sum));
  EXPECT_NE(err.find("uint8"), std::string::npos) << err;
  err = errorText(self->allGatherStart(x, x, -3, DType::F32));
  EXPECT_NE(err.find("negative"), std::string::npos) << err;
  err = errorText(
      self->reduceScatterStart(x, x + 1, 2, DType::F32, ReduceOp::Sum));
  EXPECT_NE(err.find("overlap"), std::string::npos) << err;
  err = errorText(self->wait(99));
  EXPECT_NE(err.find("unknown"), std::string::npos) << err;
}

TEST(SelfCommunicatorTest, CopiesOnceTheInputIsReady) {
  std::unique_ptr<Communicator> self = createSelfCommunicator();
  std::vector<int64_t> produced = contribution<int64_t>(0, 100);
  std::vector<int64_t> in(100, -1), out(100, 0);
  LateInputEvent ready(
      [&] { std::copy(produced.begin(), produced.end(), in.begin()); }, 1);
  CollectiveHandle h = handleOrFail(self->allReduceStart(
      in.data(), out.data(), 100, DType::I64, ReduceOp::Sum, &ready));
  // The copy is done by the start call, on the calling thread, after the
  // event.
  EXPECT_EQ(ready.syncs.load(), 1);
  EXPECT_EQ(ready.synchronizedOn, std::this_thread::get_id());
  EXPECT_EQ(out, produced);
  IdleStream stream;
  EXPECT_EQ(errorText(self->wait(h, &stream)), "");

  // An event that fails fails the start; nothing is copied.
  std::fill(out.begin(), out.end(), 0);
  LateInputEvent broken([] {}, 0, "device lost");
  std::string err = errorText(
      self->allGatherStart(in.data(), out.data(), 100, DType::I64, &broken));
  EXPECT_NE(err.find("allgather: waiting for the input: device lost"),
            std::string::npos)
      << err;
  EXPECT_EQ(out, std::vector<int64_t>(100, 0));
}

//===----------------------------------------------------------------------===//
// Launcher detection
//===----------------------------------------------------------------------===//

/// Clears the launcher variables for one test and restores them after.
class LauncherEnvTest : public ::testing::Test {
protected:
  static constexpr const char *kVars[] = {"OMPI_COMM_WORLD_SIZE",
                                          "OMPI_COMM_WORLD_RANK",
                                          "PMI_SIZE",
                                          "PMI_RANK",
                                          "PMIX_RANK",
                                          "SLURM_PROCID",
                                          "SLURM_NTASKS"};
  void SetUp() override {
    for (const char *var : kVars) {
      const char *value = std::getenv(var);
      saved.push_back(value ? std::optional<std::string>(value) : std::nullopt);
      unsetenv(var);
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < saved.size(); ++i) {
      if (saved[i])
        setenv(kVars[i], saved[i]->c_str(), 1);
      else
        unsetenv(kVars[i]);
    }
  }
  std::vector<std::optional<std::string>> saved;
};

TEST_F(LauncherEnvTest, PlainProcessIsNotLaunched) {
  EXPECT_FALSE(launchedByMpi());
}

TEST_F(LauncherEnvTest, SrunWithoutMpiIsNotLaunched) {
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "2", 1);
  EXPECT_FALSE(launchedByMpi());
}

TEST_F(LauncherEnvTest, LauncherVariables) {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    setenv(var, "0", 1);
    EXPECT_TRUE(launchedByMpi()) << var;
    unsetenv(var);
  }
  // srun --mpi=pmix: SLURM and PMIx variables together.
  setenv("SLURM_PROCID", "1", 1);
  setenv("PMIX_RANK", "1", 1);
  EXPECT_TRUE(launchedByMpi());
  // An empty value does not count.
  unsetenv("PMIX_RANK");
  setenv("PMI_SIZE", "", 1);
  EXPECT_FALSE(launchedByMpi());
}

/// On ranks other than 0: print only failures, tagged with the rank, so the
/// output of N ranks does not interleave into noise.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (!result.failed())
      return;
    std::printf("[rank %d] %s:%d: Failure\n%s\n", rank,
                result.file_name() ? result.file_name() : "?",
                result.line_number(), result.message());
    std::fflush(stdout);
  }
  void OnTestEnd(const ::testing::TestInfo &info) override {
    if (info.result()->Failed())
      std::printf("[rank %d] FAILED %s.%s\n", rank, info.test_suite_name(),
                  info.name());
  }

private:
  int rank;
};

} // namespace

/// Options after gtest's: --max-chunk-bytes=N lowers the MPI communicator's
/// chunk size so that the tests exercise split collectives;
/// --collective-timeout=S turns the collective watchdog on (it must stay
/// quiet in a healthy job).
int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  MpiCommunicatorOptions options;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (arg.consume_front("--max-chunk-bytes=") &&
        !arg.getAsInteger(10, options.maxChunkBytes))
      continue;
    arg = argv[i];
    if (arg.consume_front("--collective-timeout=") &&
        !arg.getAsDouble(options.collectiveTimeoutSeconds))
      continue;
    llvm::errs() << "shard-comm-tests: unknown argument '" << argv[i] << "'\n";
    return 1;
  }

  std::unique_ptr<Communicator> communicator;
  if (launchedByMpi()) {
    llvm::Expected<std::unique_ptr<Communicator>> created =
        createMpiCommunicator(options);
    if (!created) {
      llvm::errs() << "shard-comm-tests: "
                   << llvm::toString(created.takeError()) << "\n";
      return 1;
    }
    communicator = std::move(*created);
    mpi = communicator.get();
    if (mpi->rank() != 0) {
      ::testing::TestEventListeners &listeners =
          ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(mpi->rank()));
    } else {
      std::printf("shard-comm-tests: %d ranks, chunks of at most %lld bytes, "
                  "collective timeout %g s\n",
                  mpi->worldSize(),
                  static_cast<long long>(options.maxChunkBytes),
                  options.collectiveTimeoutSeconds);
    }
  }
  int result = RUN_ALL_TESTS();
  mpi = nullptr;
  communicator.reset(); // Finalizes MPI.
  return result;
}
