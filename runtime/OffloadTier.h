//===- OffloadTier.h - Where offloaded buffers live -------------*- C++ -*-===//
//
// The offload tier of one rank on the CPU backend (ZeRO-Infinity's NVMe
// tier): one file, `rank-R.offload` in the directory shardrun's
// --offload-dir names, laid out by the memory plan (BufferLifetime::offset
// of each offloaded buffer). It is created and given all its space before
// the first step, so that a full or unwritable directory is an error then,
// and unlinked at once: the open descriptor is the only way to it, so it
// goes with the process however that ends, and two jobs sharing a directory
// never share a file. What it holds lives as long as the run (checkpoints
// save it like any other state).
//
// Transfers run on one I/O thread, in the order they are started, each a
// loop of pread / pwrite; start() returns a ticket that wait() finishes. A
// short read or write (a truncated file, a full disk, an I/O error) is an
// error of that transfer's wait naming the file, the offset and the byte
// counts. The synchronous read() and write() serve the loading of initial
// values and checkpoints, outside any step.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_OFFLOADTIER_H
#define SHARDC_RUNTIME_OFFLOADTIER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace shardc::rt {

class OffloadTier {
public:
  /// Creates `dir` if missing, then `dir`/rank-`rank`.offload with `bytes`
  /// bytes allocated on disk (posix_fallocate): an error naming the file
  /// and the size when the directory is not writable or has no room.
  static llvm::Expected<std::unique_ptr<OffloadTier>>
  create(llvm::StringRef dir, int rank, uint64_t bytes);
  ~OffloadTier();
  OffloadTier(const OffloadTier &) = delete;
  OffloadTier &operator=(const OffloadTier &) = delete;

  const std::string &path() const { return file; }
  uint64_t size() const { return bytes; }

  /// Copies `n` bytes at `offset` of the tier into `dst` (read) or from
  /// `src` (write), now.
  llvm::Error read(uint64_t offset, void *dst, uint64_t n) const;
  llvm::Error write(uint64_t offset, const void *src, uint64_t n);

  /// A transfer queued on the I/O thread.
  enum class Direction { Read, Write };
  struct Done {
    /// nowMicros() when the I/O thread began and ended it.
    double startUs = 0, endUs = 0;
  };
  /// Queues a transfer of `n` bytes between `memory` and `offset` of the
  /// tier; `memory` must stay valid until wait() returns.
  uint64_t start(Direction direction, uint64_t offset, void *memory,
                 uint64_t n);
  /// Blocks until transfer `ticket` is done; its error, if it failed.
  llvm::Expected<Done> wait(uint64_t ticket);

  /// Test hook (SHARDRUN_FAULT_OFFLOAD_TRUNCATE_AT): truncates the file to
  /// half its size before the transfer with this ticket runs.
  void truncateBefore(uint64_t ticket) { truncateTicket.store(ticket); }

private:
  OffloadTier() = default;
  void ioLoop();

  std::string file;
  int fd = -1;
  uint64_t bytes = 0;

  struct Transfer {
    uint64_t ticket;
    Direction direction;
    uint64_t offset;
    void *memory;
    uint64_t n;
  };
  struct Result {
    std::string error; // empty: success
    Done done;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Transfer> queue;
  std::map<uint64_t, Result> results;
  uint64_t nextTicket = 1;
  bool stopping = false;
  std::atomic<uint64_t> truncateTicket{0};
  std::thread io;
};

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_OFFLOADTIER_H
