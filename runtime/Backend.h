//===- Backend.h - Kernel backends ------------------------------*- C++ -*-===//
//
// The executor talks to devices only through these interfaces. The CPU
// backend runs kernels synchronously on the calling thread; the CUDA backend
// (runtime/cuda, a plugin) implements the same interfaces with cudaStream_t
// and cudaEvent_t (runtime/Stream.h), so the executor's schedule (kernels on
// a compute stream, collectives ordered against it by events) does not
// change.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_BACKEND_H
#define SHARDC_RUNTIME_BACKEND_H

#include "runtime/Attrs.h"
#include "runtime/Stream.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>

namespace shardc::rt {

/// Everything a kernel sees of one op invocation. Output views are
/// preallocated with their exact static shapes; kernels never allocate them.
struct KernelContext {
  llvm::StringRef opType;
  llvm::StringRef opName;
  const AttrMap &attrs;
  llvm::ArrayRef<TensorView> inputs;
  llvm::ArrayRef<TensorView> outputs;
  /// This process's rank and the number of ranks (ShardSlice and Dropout
  /// use them).
  int rank = 0;
  int worldSize = 1;
  /// The run's random seed (shardrun --seed) and the global training step
  /// being run, counted from 0: what Dropout's masks are drawn from
  /// (runtime/Philox.h). The same for every op of one step.
  uint64_t seed = 0;
  uint64_t step = 0;
  /// The stream the kernel's work is queued on (the executor's compute
  /// stream). CPU kernels run at once and ignore it; device kernels queue
  /// their work on it.
  Stream *stream = nullptr;

  /// Input `i`, or an absent view when the op has fewer inputs.
  const TensorView &input(size_t i) const;
  bool hasInput(size_t i) const {
    return i < inputs.size() && inputs[i].present();
  }
  bool hasOutput(size_t i) const {
    return i < outputs.size() && outputs[i].present();
  }
  /// An error that names the op: "<type> '<name>': <msg>".
  llvm::Error error(const llvm::Twine &msg) const;
};

using KernelFn = llvm::Error (*)(const KernelContext &ctx);

/// A device: memory, streams and a table of kernels by op type.
class KernelBackend {
public:
  virtual ~KernelBackend() = default;
  virtual llvm::StringRef name() const = 0;

  virtual llvm::Expected<void *> allocate(size_t bytes) = 0;
  virtual void deallocate(void *ptr) = 0;
  virtual std::unique_ptr<Stream> createStream() = 0;
  virtual std::unique_ptr<Event> createEvent() = 0;
  /// An event that measures time on the device (Event::microsSince), for
  /// the trace of a backend whose kernels run after their launch; null on
  /// backends that run kernels as they are queued, whose host clock is
  /// their time.
  virtual std::unique_ptr<Event> createTimingEvent() { return nullptr; }

  /// Copies `bytes` from host memory into memory from allocate() (toDevice)
  /// or back (toHost), in order with the work queued on `stream`. Both
  /// return once the host memory may be reused or read: the copy is done.
  /// The CPU backend copies with memcpy.
  virtual llvm::Error copyToDevice(void *dst, const void *src, size_t bytes,
                                   Stream &stream);
  virtual llvm::Error copyToHost(void *dst, const void *src, size_t bytes,
                                 Stream &stream);
  /// Zero-fills memory from allocate(), queued on `stream`.
  virtual llvm::Error fillZero(void *dst, size_t bytes, Stream &stream);
  /// Whether memory from allocate() can be read and written by the host
  /// directly (true on the CPU backend); otherwise only through the copies.
  virtual bool hostAccessible() const { return true; }

  /// Page-locked host memory that copies to and from this backend's memory
  /// run asynchronously on a stream (cudaHostAlloc): where a device backend
  /// keeps the offload tier (FSDP's CPUOffload). A backend whose memory is
  /// host memory has none (the CPU backend: its tier is a file), and says
  /// so with hasPinnedMemory() false.
  virtual bool hasPinnedMemory() const { return false; }
  virtual llvm::Expected<void *> allocatePinned(size_t bytes);
  virtual void deallocatePinned(void *ptr) {}
  /// Queues a copy of `bytes` from pinned host memory into memory from
  /// allocate() (toDevice) or back on `stream` and returns at once; the
  /// copy is done when the work queued on `stream` before it and it are.
  virtual llvm::Error copyPinnedAsync(void *dst, const void *src, size_t bytes,
                                      bool toDevice, Stream &stream);

  /// The kernel for an op type, or nullptr if this backend has none. The
  /// executor looks every op up once, when it loads a plan.
  KernelFn lookup(llvm::StringRef opType) const;
  /// Queues `kernel` (from lookup()) for the op of `ctx` on `stream`. The
  /// CPU backend runs it on the calling thread before returning.
  virtual llvm::Error launch(KernelFn kernel, const KernelContext &ctx,
                             Stream &stream);

protected:
  void registerKernel(llvm::StringRef opType, KernelFn fn) {
    kernels[opType] = fn;
  }

private:
  llvm::StringMap<KernelFn> kernels;
};

/// The CPU backend: 64-byte aligned host memory, synchronous streams, and the
/// kernels of runtime/cpu.
std::unique_ptr<KernelBackend> createCpuBackend();

/// The threads of the CPU kernels' matrix products in this process (OpenBLAS
/// and oneDNN), from now on and on every thread; at least 1. Until it is
/// called the libraries take their own defaults (every CPU, or
/// OPENBLAS_NUM_THREADS and OMP_NUM_THREADS). shardrun --cpu-threads sets it.
void setCpuKernelThreads(int threads);

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_BACKEND_H
