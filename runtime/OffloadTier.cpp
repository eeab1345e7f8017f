//===- OffloadTier.cpp - Where offloaded buffers live ---------------------===//
#include "runtime/OffloadTier.h"

#include "runtime/comm/Communicator.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace shardc::rt {

static llvm::Error tierError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

llvm::Expected<std::unique_ptr<OffloadTier>>
OffloadTier::create(llvm::StringRef dir, int rank, uint64_t bytes) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return tierError("cannot create the offload directory " + dir + ": " +
                     ec.message() +
                     "; give --offload-dir a writable directory");
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "rank-" + std::to_string(rank) + ".offload");
  std::unique_ptr<OffloadTier> tier(new OffloadTier());
  tier->file = path.str().str();
  tier->bytes = bytes;
  tier->fd =
      ::open(tier->file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (tier->fd < 0)
    return tierError("cannot create the offload file " + tier->file + ": " +
                     std::strerror(errno) +
                     "; give --offload-dir a writable directory");
  if (bytes > 0) {
    int rc = ::posix_fallocate(tier->fd, 0, static_cast<off_t>(bytes));
    if (rc != 0) {
      ::close(tier->fd);
      tier->fd = -1;
      ::unlink(tier->file.c_str());
      return tierError("cannot reserve " + llvm::Twine(bytes) +
                       " bytes for the offload "
                       "file " +
                       tier->file + ": " + std::strerror(rc) +
                       (rc == ENOSPC
                            ? "; free space there or give --offload-dir a "
                              "directory on a disk with room"
                            : ""));
    }
  }
  // Only this process holds the file: it disappears with the process, even
  // one killed, and a later job's tier in the same directory is a new file.
  ::unlink(tier->file.c_str());
  tier->io = std::thread([t = tier.get()] { t->ioLoop(); });
  return std::move(tier);
}

OffloadTier::~OffloadTier() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  cv.notify_all();
  if (io.joinable())
    io.join();
  if (fd >= 0)
    ::close(fd);
}

/// pread or pwrite until `n` bytes moved; a short transfer is an error.
static std::string transfer(int fd, const std::string &file, bool isRead,
                            uint64_t offset, void *memory, uint64_t n) {
  uint64_t done = 0;
  auto *p = static_cast<char *>(memory);
  while (done < n) {
    ssize_t got = isRead ? ::pread(fd, p + done, n - done,
                                   static_cast<off_t>(offset + done))
                         : ::pwrite(fd, p + done, n - done,
                                    static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return (isRead ? "short read of the offload file "
                     : "short write of the offload file ") +
             file + " at offset " + std::to_string(offset) + ": " +
             std::to_string(done) + " of " + std::to_string(n) + " bytes" +
             (got < 0 ? std::string(" (") + std::strerror(errno) + ")"
                      : std::string(isRead ? " (the file ends there: was it "
                                             "truncated or removed?)"
                                           : ""));
    done += static_cast<uint64_t>(got);
  }
  return "";
}

llvm::Error OffloadTier::read(uint64_t offset, void *dst, uint64_t n) const {
  std::string err = transfer(fd, file, true, offset, dst, n);
  return err.empty() ? llvm::Error::success() : tierError(err);
}

llvm::Error OffloadTier::write(uint64_t offset, const void *src, uint64_t n) {
  std::string err =
      transfer(fd, file, false, offset, const_cast<void *>(src), n);
  return err.empty() ? llvm::Error::success() : tierError(err);
}

uint64_t OffloadTier::start(Direction direction, uint64_t offset, void *memory,
                            uint64_t n) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu);
    ticket = nextTicket++;
    queue.push_back({ticket, direction, offset, memory, n});
  }
  cv.notify_all();
  return ticket;
}

llvm::Expected<OffloadTier::Done> OffloadTier::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return results.count(ticket) != 0; });
  Result r = std::move(results[ticket]);
  results.erase(ticket);
  if (!r.error.empty())
    return tierError(r.error);
  return r.done;
}

void OffloadTier::ioLoop() {
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    cv.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty())
      return; // stopping, nothing left
    Transfer t = queue.front();
    queue.pop_front();
    bool truncate = t.ticket == truncateTicket;
    lock.unlock();
    if (truncate && ::ftruncate(fd, static_cast<off_t>(bytes / 2)) != 0)
      truncate = false;
    Result r;
    r.done.startUs = nowMicros();
    r.error = transfer(fd, file, t.direction == Direction::Read, t.offset,
                       t.memory, t.n);
    r.done.endUs = nowMicros();
    lock.lock();
    results[t.ticket] = std::move(r);
    cv.notify_all();
  }
}

} // namespace shardc::rt
