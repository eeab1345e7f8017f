//===- OffloadTierTest.cpp - The offload tier in pinned host memory -------===//
//
// The CUDA backend's offload tier (runtime/OffloadTier.h): bytes written
// from device memory come back bit for bit, in stream order with the
// kernels around them (a write starts after the kernel that filled its
// memory; a kernel after a read's wait sees the read's bytes), and timed
// transfers get device times once the step is done. The binary's main() is
// in CudaKernelsTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/CudaTestUtil.h"

#include "runtime/OffloadTier.h"

using namespace shardc::rt;
using namespace shardc::rt::cudatest;

namespace {

/// Scales `x` in place by `factor` on `stream` (the Mul kernel).
void scale(KernelBackend &dev, Stream &stream, const TensorView &x,
           const TensorView &factor) {
  AttrMap attrs;
  const TensorView ins[] = {x, factor}, outs[] = {x};
  KernelContext ctx{"Mul", "scale", attrs, ins, outs};
  ctx.stream = &stream;
  ASSERT_FALSE(llvm::errorToBool(dev.launch(dev.lookup("Mul"), ctx, stream)));
}

TEST(CudaOffloadTierTest, MovesBytesInStreamOrder) {
  KernelBackend &dev = gpu();
  ASSERT_TRUE(dev.hasPinnedMemory());
  constexpr int64_t n = 1 << 20; // 4 MiB: copies that take a while
  auto tierOr = createPinnedTier(dev, 2 * n * sizeof(float));
  ASSERT_FALSE(llvm::errorToBool(tierOr.takeError()));
  OffloadTier &tier = **tierOr;
  EXPECT_EQ(tier.where(), "pinned host memory");
  std::unique_ptr<Stream> compute = dev.createStream();

  std::vector<float> host(n), two = {2.0f};
  for (int64_t i = 0; i < n; ++i)
    host[i] = static_cast<float>(i % 1000) - 500.0f;
  TensorView x(DType::F32, {n}, llvm::cantFail(dev.allocate(n * 4)));
  TensorView y(DType::F32, {n}, llvm::cantFail(dev.allocate(n * 4)));
  TensorView factor(DType::F32, {1}, llvm::cantFail(dev.allocate(4)));
  ASSERT_FALSE(llvm::errorToBool(
      dev.copyToDevice(x.data, host.data(), n * 4, *compute)));
  ASSERT_FALSE(llvm::errorToBool(
      dev.copyToDevice(factor.data, two.data(), 4, *compute)));

  // A kernel doubles x, a write copies it out at offset n floats: the
  // write starts after the kernel, without the host waiting between.
  scale(dev, *compute, x, factor);
  auto write = tier.start(OffloadTier::Direction::Write, n * 4, x.data, n * 4,
                          *compute, /*timed=*/true);
  ASSERT_FALSE(llvm::errorToBool(write.takeError()));
  auto wrote = tier.wait(*write, *compute);
  ASSERT_FALSE(llvm::errorToBool(wrote.takeError()));
  // A kernel after the wait may overwrite x: the tier kept the doubled
  // values.
  scale(dev, *compute, x, factor);
  auto read = tier.start(OffloadTier::Direction::Read, n * 4, y.data, n * 4,
                         *compute, /*timed=*/true);
  ASSERT_FALSE(llvm::errorToBool(read.takeError()));
  auto got = tier.wait(*read, *compute);
  ASSERT_FALSE(llvm::errorToBool(got.takeError()));
  // A kernel after the read's wait sees its bytes.
  scale(dev, *compute, y, factor);
  std::vector<float> back(n);
  ASSERT_FALSE(
      llvm::errorToBool(dev.copyToHost(back.data(), y.data, n * 4, *compute)));
  for (int64_t i = 0; i < n; i += 4099)
    ASSERT_EQ(back[i], 4 * host[i]) << i;
  std::vector<float> direct(n);
  ASSERT_FALSE(llvm::errorToBool(tier.read(n * 4, direct.data(), n * 4)));
  for (int64_t i = 0; i < n; i += 4099)
    ASSERT_EQ(direct[i], 2 * host[i]) << i;

  // Device times come once the step is done, measured from an anchor on
  // the compute stream (here one recorded after both transfers: each starts
  // before it, and has its length).
  EXPECT_FALSE(wrote->has_value());
  EXPECT_FALSE(got->has_value());
  std::unique_ptr<Event> anchor = dev.createTimingEvent();
  ASSERT_TRUE(anchor);
  ASSERT_FALSE(llvm::errorToBool(anchor->record(*compute)));
  ASSERT_FALSE(llvm::errorToBool(anchor->synchronize()));
  auto times = tier.timesSince(*anchor, 1e6);
  ASSERT_FALSE(llvm::errorToBool(times.takeError()));
  ASSERT_EQ(times->size(), 2u);
  EXPECT_EQ((*times)[0].direction, OffloadTier::Direction::Write);
  EXPECT_EQ((*times)[1].direction, OffloadTier::Direction::Read);
  for (const OffloadTier::Done &d : *times) {
    EXPECT_EQ(d.bytes, uint64_t(n * 4));
    EXPECT_GT(d.endUs, d.startUs);
  }
  EXPECT_TRUE(tier.timesSince(*anchor, 0)->empty());

  // A range outside the tier is an error naming it.
  auto outside = tier.start(OffloadTier::Direction::Read, n * 4 + 4, y.data,
                            n * 4, *compute, false);
  std::string err = llvm::toString(outside.takeError());
  EXPECT_NE(err.find("do not fit"), std::string::npos) << err;
  dev.deallocate(x.data);
  dev.deallocate(y.data);
  dev.deallocate(factor.data);
}

} // namespace
