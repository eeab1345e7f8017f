//===- Backend.cpp - Kernel backends and the CPU backend ------------------===//
#include "runtime/Backend.h"
#include "runtime/cpu/Kernels.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/mman.h>

namespace shardc::rt {

const TensorView &KernelContext::input(size_t i) const {
  static const TensorView absent;
  return i < inputs.size() ? inputs[i] : absent;
}

llvm::Error KernelContext::error(const llvm::Twine &msg) const {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 opType + " '" + opName + "': " + msg);
}

KernelFn KernelBackend::lookup(llvm::StringRef opType) const {
  auto it = kernels.find(opType);
  return it == kernels.end() ? nullptr : it->second;
}

llvm::Error KernelBackend::launch(KernelFn kernel, const KernelContext &ctx,
                                  Stream &) {
  return kernel(ctx);
}

llvm::Error KernelBackend::copyToDevice(void *dst, const void *src,
                                        size_t bytes, Stream &) {
  if (bytes)
    std::memcpy(dst, src, bytes);
  return llvm::Error::success();
}

llvm::Error KernelBackend::copyToHost(void *dst, const void *src, size_t bytes,
                                      Stream &) {
  if (bytes)
    std::memcpy(dst, src, bytes);
  return llvm::Error::success();
}

llvm::Error KernelBackend::fillZero(void *dst, size_t bytes, Stream &) {
  if (bytes)
    std::memset(dst, 0, bytes);
  return llvm::Error::success();
}

llvm::Expected<void *> KernelBackend::allocatePinned(size_t) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "the " + name() +
                                     " backend has no pinned host memory");
}

llvm::Error KernelBackend::copyPinnedAsync(void *, const void *, size_t, bool,
                                           Stream &) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "the " + name() +
                                     " backend has no pinned host memory");
}

namespace {

/// Work on a CPU stream runs when it is launched; synchronize has nothing
/// left to wait for.
class CpuStream : public Stream {
public:
  llvm::Error synchronize() override { return llvm::Error::success(); }
};

class CpuEvent : public Event {
public:
  llvm::Error record(Stream &) override { return llvm::Error::success(); }
  llvm::Error wait(Stream &) override { return llvm::Error::success(); }
  llvm::Error synchronize() override { return llvm::Error::success(); }
};

class CpuBackend : public KernelBackend {
  static constexpr size_t kHugePage = size_t(2) << 20;

public:
  CpuBackend() {
    for (const auto &[type, fn] : cpu::kernelTable())
      registerKernel(type, fn);
  }
  llvm::StringRef name() const override { return "cpu"; }
  llvm::Error launch(KernelFn kernel, const KernelContext &ctx,
                     Stream &) override {
    return cpu::launchKernel(kernel, ctx);
  }

  llvm::Expected<void *> allocate(size_t bytes) override {
    // 64-byte alignment for vector loads; aligned_alloc needs a multiple.
    size_t align = 64;
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0)
      rounded = 64;
    // A large allocation (the executor's arena: every buffer of the step)
    // asks for transparent huge pages, which Linux gives only to memory that
    // asks where transparent_hugepage/enabled is madvise (a common setting).
    // Streaming kernels touch a new 4 KiB page every 64 cache lines, and in a
    // virtual machine each TLB miss walks two page tables: on the step-time GPT
    // (world size 1, a 2-core VM) 2 MiB pages took the step's matrix products
    // from about 140 to 128 ms and the rest of its kernels from 36 to 28 ms
    // (README, "Own collectives and huge pages").
    if (rounded >= 2 * kHugePage) {
      align = kHugePage;
      rounded = (rounded + kHugePage - 1) / kHugePage * kHugePage;
    }
    void *p = std::aligned_alloc(align, rounded);
#ifdef MADV_HUGEPAGE
    // Advice only: without huge pages the memory works as before.
    if (p && align == kHugePage)
      (void)::madvise(p, rounded, MADV_HUGEPAGE);
#endif
    if (!p)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "out of host memory allocating " +
                                         llvm::Twine(bytes) + " bytes");
    return p;
  }
  void deallocate(void *ptr) override { std::free(ptr); }
  std::unique_ptr<Stream> createStream() override {
    return std::make_unique<CpuStream>();
  }
  std::unique_ptr<Event> createEvent() override {
    return std::make_unique<CpuEvent>();
  }
};

} // namespace

std::unique_ptr<KernelBackend> createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

} // namespace shardc::rt
