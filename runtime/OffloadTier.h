//===- OffloadTier.h - Where offloaded buffers live -------------*- C++ -*-===//
//
// The offload tier of one rank: the bytes of the buffers a plan keeps out
// of the rank's memory (shardc --offload), laid out by the memory plan
// (BufferLifetime::offset of each offloaded buffer). Two kinds:
//
//  * A file (the CPU backend; ZeRO-Infinity's NVMe tier): `rank-R.offload`
//    in the directory shardrun's --offload-dir names. It is created and
//    given all its space before the first step, so that a full or
//    unwritable directory is an error then, and unlinked at once: the open
//    descriptor is the only way to it, so it goes with the process however
//    that ends, and two jobs sharing a directory never share a file.
//    Transfers run on one I/O thread, in the order they are started, each a
//    loop of pread / pwrite. A short read or write (a truncated file, a full
//    disk, an I/O error) is an error of that transfer's wait naming the
//    file, the offset and the byte counts.
//  * Pinned host memory (a device backend with KernelBackend::
//    hasPinnedMemory(); FSDP's CPUOffload): one page-locked allocation.
//    Transfers are asynchronous copies on a stream of their own, in the
//    order they are started; each starts after the work the compute stream
//    had queued when it was started (the kernels that wrote what a write
//    copies, and the last readers of the memory a read fills), and its wait
//    makes the compute stream's later work wait for it without blocking the
//    host. The copies overlap the kernels the way the NCCL collectives do.
//
// What a tier holds lives as long as the run (checkpoints save it like any
// other state). The synchronous read() and write() serve the loading of
// initial values and checkpoints, outside any step: they copy between the
// tier and host memory.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_OFFLOADTIER_H
#define SHARDC_RUNTIME_OFFLOADTIER_H

#include "runtime/Backend.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardc::rt {

class OffloadTier {
public:
  virtual ~OffloadTier() = default;

  /// Where the tier is, for messages: "the file PATH" or "pinned host
  /// memory".
  virtual std::string where() const = 0;
  virtual uint64_t size() const = 0;

  /// Copies `n` bytes at `offset` of the tier into host memory `dst`
  /// (read) or from `src` (write), now; no transfer may be in flight.
  virtual llvm::Error read(uint64_t offset, void *dst, uint64_t n) = 0;
  virtual llvm::Error write(uint64_t offset, const void *src, uint64_t n) = 0;

  enum class Direction { Read, Write };
  /// One finished transfer, for the trace: nowMicros() times of its start
  /// and end.
  struct Done {
    Direction direction = Direction::Read;
    uint64_t bytes = 0;
    double startUs = 0, endUs = 0;
  };
  /// Queues a transfer of `n` bytes between `memory` (the backend's) and
  /// `offset` of the tier, after the work queued on `compute` so far;
  /// `memory` must stay valid until the transfer is waited for. `timed`:
  /// the trace wants its times. Returns the ticket wait() takes.
  virtual llvm::Expected<uint64_t> start(Direction direction, uint64_t offset,
                                         void *memory, uint64_t n,
                                         Stream &compute, bool timed) = 0;
  /// Work queued on `compute` from now on runs after transfer `ticket`.
  /// Returns its times when they are known now (a file tier blocks until
  /// the transfer is done), or nothing (pinned memory: see
  /// timesSince()); an error when the transfer failed.
  virtual llvm::Expected<std::optional<Done>> wait(uint64_t ticket,
                                                   Stream &compute) = 0;
  /// The timed transfers whose wait() returned no times, with their times
  /// measured from `anchor` (a timing event reached at host time
  /// `anchorUs`), once the compute stream has finished the step; forgets
  /// them.
  virtual llvm::Expected<std::vector<Done>> timesSince(const Event &anchor,
                                                       double anchorUs) {
    return std::vector<Done>();
  }

  /// Test hook (SHARDRUN_FAULT_OFFLOAD_TRUNCATE_AT): a file tier truncates
  /// its file to half its size before the transfer with this ticket runs.
  virtual void truncateBefore(uint64_t ticket) {}
};

/// Creates `dir` if missing, then `dir`/rank-`rank`.offload with `bytes`
/// bytes allocated on disk (posix_fallocate): an error naming the file and
/// the size when the directory is not writable or has no room.
llvm::Expected<std::unique_ptr<OffloadTier>>
createFileTier(llvm::StringRef dir, int rank, uint64_t bytes);

/// `bytes` of `backend`'s pinned host memory (zero-filled, as a new file
/// reads), with a transfer stream of its own: an error naming the size
/// when the host cannot lock that much. `backend` must outlive the tier.
llvm::Expected<std::unique_ptr<OffloadTier>>
createPinnedTier(KernelBackend &backend, uint64_t bytes);

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_OFFLOADTIER_H
