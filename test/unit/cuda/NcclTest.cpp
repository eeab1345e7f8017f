//===- NcclTest.cpp - The NCCL communicator on one GPU --------------------===//
//
// The NCCL communicator at world size 1 over the self communicator: device
// collectives ordered against a compute stream by events, host collectives
// forwarded to the host communicator, argument errors. Runs with the other
// CUDA tests (a GPU is needed); several ranks run through shardrun in
// scripts/gpu_check.sh when the machine has several GPUs.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/CudaTestUtil.h"

using namespace shardc::rt;
using namespace shardc::rt::cudatest;

namespace {

struct NcclFixture : ::testing::Test {
  void SetUp() override {
    host = createSelfCommunicator();
    auto c = cuda::createNcclCommunicator(*host, 0, /*timeoutSeconds=*/60);
    ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
    comm = std::move(*c);
    stream = gpu().createStream();
  }

  void *deviceCopy(const std::vector<float> &v) {
    void *d = llvm::cantFail(gpu().allocate(v.size() * sizeof(float)));
    EXPECT_FALSE(llvm::errorToBool(
        gpu().copyToDevice(d, v.data(), v.size() * sizeof(float), *stream)));
    owned.push_back(d);
    return d;
  }

  std::vector<float> hostCopy(const void *d, size_t n) {
    std::vector<float> v(n);
    EXPECT_FALSE(llvm::errorToBool(
        gpu().copyToHost(v.data(), d, n * sizeof(float), *stream)));
    return v;
  }

  void TearDown() override {
    comm.reset();
    for (void *d : owned)
      gpu().deallocate(d);
  }

  std::unique_ptr<Communicator> host, comm;
  std::unique_ptr<Stream> stream;
  std::vector<void *> owned;
};

TEST_F(NcclFixture, DeviceCollectivesAreOrderedByEvents) {
  EXPECT_EQ(comm->name(), "nccl");
  std::vector<float> values = {1, -2, 3.5f, 4};
  void *in = deviceCopy(values);
  void *out = deviceCopy(std::vector<float>(4, 0));
  std::unique_ptr<Event> ready = gpu().createEvent();
  ASSERT_FALSE(llvm::errorToBool(ready->record(*stream)));
  for (int kind = 0; kind < 3; ++kind) {
    llvm::Expected<CollectiveHandle> h =
        kind == 0 ? comm->allReduceStart(in, out, 4, DType::F32, ReduceOp::Sum,
                                         ready.get())
        : kind == 1 ? comm->allGatherStart(in, out, 4, DType::F32, ready.get())
                    : comm->reduceScatterStart(in, out, 4, DType::F32,
                                               ReduceOp::Max, ready.get());
    ASSERT_TRUE(bool(h)) << llvm::toString(h.takeError());
    ASSERT_FALSE(llvm::errorToBool(comm->wait(*h, stream.get())));
    // One rank: every collective copies.
    EXPECT_EQ(hostCopy(out, 4), values) << "collective " << kind;
  }
  EXPECT_FALSE(llvm::errorToBool(comm->asyncError()));
}

TEST_F(NcclFixture, HostBuffersGoToTheHostCommunicator) {
  float in = 2.5f, out = 0;
  ASSERT_FALSE(llvm::errorToBool(
      comm->allReduce(&in, &out, 1, DType::F32, ReduceOp::Sum)));
  EXPECT_EQ(out, 2.5f);
  EXPECT_FALSE(llvm::errorToBool(comm->barrier()));
}

TEST_F(NcclFixture, ArgumentErrorsStartNothing) {
  void *d = deviceCopy(std::vector<float>(4, 1));
  llvm::Expected<CollectiveHandle> h =
      comm->allReduceStart(d, d, -1, DType::F32, ReduceOp::Sum, nullptr);
  EXPECT_FALSE(bool(h));
  llvm::consumeError(h.takeError());
  h = comm->allReduceStart(d, d, 4, DType::Bool, ReduceOp::Sum, nullptr);
  EXPECT_FALSE(bool(h));
  llvm::consumeError(h.takeError());
}

} // namespace
