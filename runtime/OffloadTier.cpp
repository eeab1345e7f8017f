//===- OffloadTier.cpp - Where offloaded buffers live ---------------------===//
#include "runtime/OffloadTier.h"

#include "runtime/comm/Communicator.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace shardc::rt {

namespace {

llvm::Error tierError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// An error when `n` bytes at `offset` do not lie inside a tier of `size`
/// bytes.
llvm::Error checkRange(const OffloadTier &tier, uint64_t offset, uint64_t n) {
  if (offset <= tier.size() && n <= tier.size() - offset)
    return llvm::Error::success();
  return tierError("offload tier in " + tier.where() + ": " + llvm::Twine(n) +
                   " bytes at offset " + llvm::Twine(offset) +
                   " do not fit its " + llvm::Twine(tier.size()) + " bytes");
}

/// The file tier (the CPU backend).
class FileTier : public OffloadTier {
public:
  static llvm::Expected<std::unique_ptr<OffloadTier>>
  create(llvm::StringRef dir, int rank, uint64_t bytes);
  ~FileTier() override;

  std::string where() const override { return "the file " + file; }
  uint64_t size() const override { return bytes; }
  llvm::Error read(uint64_t offset, void *dst, uint64_t n) override;
  llvm::Error write(uint64_t offset, const void *src, uint64_t n) override;
  llvm::Expected<uint64_t> start(Direction direction, uint64_t offset,
                                 void *memory, uint64_t n, Stream &compute,
                                 bool timed) override;
  llvm::Expected<std::optional<Done>> wait(uint64_t ticket,
                                           Stream &compute) override;
  void truncateBefore(uint64_t ticket) override {
    truncateTicket.store(ticket);
  }

private:
  FileTier() = default;
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

llvm::Expected<std::unique_ptr<OffloadTier>>
FileTier::create(llvm::StringRef dir, int rank, uint64_t bytes) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return tierError("cannot create the offload directory " + dir + ": " +
                     ec.message() +
                     "; give --offload-dir a writable directory");
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "rank-" + std::to_string(rank) + ".offload");
  std::unique_ptr<FileTier> tier(new FileTier());
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

FileTier::~FileTier() {
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
std::string transfer(int fd, const std::string &file, bool isRead,
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

llvm::Error FileTier::read(uint64_t offset, void *dst, uint64_t n) {
  if (llvm::Error err = checkRange(*this, offset, n))
    return err;
  std::string err = transfer(fd, file, true, offset, dst, n);
  return err.empty() ? llvm::Error::success() : tierError(err);
}

llvm::Error FileTier::write(uint64_t offset, const void *src, uint64_t n) {
  if (llvm::Error err = checkRange(*this, offset, n))
    return err;
  std::string err =
      transfer(fd, file, false, offset, const_cast<void *>(src), n);
  return err.empty() ? llvm::Error::success() : tierError(err);
}

llvm::Expected<uint64_t> FileTier::start(Direction direction, uint64_t offset,
                                         void *memory, uint64_t n,
                                         Stream &compute, bool) {
  if (llvm::Error err = checkRange(*this, offset, n))
    return std::move(err);
  // The compute stream has written what a write reads (the CPU backend
  // runs kernels as they launch; this keeps the order on any other).
  if (direction == Direction::Write)
    if (llvm::Error err = compute.synchronize())
      return std::move(err);
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu);
    ticket = nextTicket++;
    queue.push_back({ticket, direction, offset, memory, n});
  }
  cv.notify_all();
  return ticket;
}

llvm::Expected<std::optional<OffloadTier::Done>> FileTier::wait(uint64_t ticket,
                                                                Stream &) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return results.count(ticket) != 0; });
  Result r = std::move(results[ticket]);
  results.erase(ticket);
  if (!r.error.empty())
    return tierError(r.error);
  return std::optional<Done>(r.done);
}

void FileTier::ioLoop() {
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
    r.done.direction = t.direction;
    r.done.bytes = t.n;
    r.done.startUs = nowMicros();
    r.error = transfer(fd, file, t.direction == Direction::Read, t.offset,
                       t.memory, t.n);
    r.done.endUs = nowMicros();
    lock.lock();
    results[t.ticket] = std::move(r);
    cv.notify_all();
  }
}

/// The pinned host memory tier (a device backend).
class PinnedTier : public OffloadTier {
public:
  PinnedTier(KernelBackend &backend, char *base, uint64_t bytes,
             std::unique_ptr<Stream> copies)
      : backend(backend), base(base), bytes(bytes), copies(std::move(copies)) {}
  ~PinnedTier() override {
    // Nothing may copy into or out of the memory once it is gone.
    llvm::consumeError(copies->synchronize());
    backend.deallocatePinned(base);
  }

  std::string where() const override { return "pinned host memory"; }
  uint64_t size() const override { return bytes; }

  llvm::Error read(uint64_t offset, void *dst, uint64_t n) override {
    if (llvm::Error err = checkRange(*this, offset, n))
      return err;
    if (llvm::Error err = copies->synchronize())
      return err;
    if (n)
      std::memcpy(dst, base + offset, n);
    return llvm::Error::success();
  }
  llvm::Error write(uint64_t offset, const void *src, uint64_t n) override {
    if (llvm::Error err = checkRange(*this, offset, n))
      return err;
    if (llvm::Error err = copies->synchronize())
      return err;
    if (n)
      std::memcpy(base + offset, src, n);
    return llvm::Error::success();
  }

  llvm::Expected<uint64_t> start(Direction direction, uint64_t offset,
                                 void *memory, uint64_t n, Stream &compute,
                                 bool timed) override {
    if (llvm::Error err = checkRange(*this, offset, n))
      return std::move(err);
    llvm::Expected<Transfer> t = takeTransfer(timed);
    if (!t)
      return t.takeError();
    t->direction = direction;
    t->bytes = n;
    // After the kernels queued so far: those that wrote what a write
    // copies, and the last readers of the memory a read fills.
    if (llvm::Error err = t->ready->record(compute))
      return std::move(err);
    if (llvm::Error err = t->ready->wait(*copies))
      return std::move(err);
    bool deviceTimes = t->begin != nullptr;
    if (deviceTimes)
      if (llvm::Error err = t->begin->record(*copies))
        return std::move(err);
    if (timed && !deviceTimes)
      t->done.startUs = nowMicros();
    bool toDevice = direction == Direction::Read;
    char *tier = base + offset;
    if (llvm::Error err = backend.copyPinnedAsync(toDevice ? memory : tier,
                                                  toDevice ? tier : memory, n,
                                                  toDevice, *copies))
      return std::move(err);
    if (timed && !deviceTimes)
      t->done.endUs = nowMicros(); // a backend whose copies are done here
    if (deviceTimes)
      if (llvm::Error err = t->end->record(*copies))
        return std::move(err);
    if (llvm::Error err = t->finished->record(*copies))
      return std::move(err);
    uint64_t ticket = nextTicket++;
    inFlight.emplace(ticket, std::move(*t));
    return ticket;
  }

  llvm::Expected<std::optional<Done>> wait(uint64_t ticket,
                                           Stream &compute) override {
    auto it = inFlight.find(ticket);
    if (it == inFlight.end())
      return tierError("offload tier in pinned host memory: transfer " +
                       llvm::Twine(ticket) + " is not in flight");
    Transfer t = std::move(it->second);
    inFlight.erase(it);
    llvm::Error err = t.finished->wait(compute);
    std::optional<Done> done;
    t.done.direction = t.direction;
    t.done.bytes = t.bytes;
    if (t.timed && !t.begin)
      done = t.done;
    if (t.timed && t.begin && !err)
      timed.push_back(std::move(t)); // times once the step is done
    else
      spare.push_back(std::move(t));
    if (err)
      return std::move(err);
    return done;
  }

  llvm::Expected<std::vector<Done>> timesSince(const Event &anchor,
                                               double anchorUs) override {
    std::vector<Done> out;
    for (Transfer &t : timed) {
      llvm::Expected<double> start = t.begin->microsSince(anchor);
      if (!start)
        return start.takeError();
      llvm::Expected<double> length = t.end->microsSince(*t.begin);
      if (!length)
        return length.takeError();
      Done d = t.done;
      d.startUs = anchorUs + *start;
      d.endUs = d.startUs + *length;
      out.push_back(d);
    }
    for (Transfer &t : timed)
      spare.push_back(std::move(t));
    timed.clear();
    return out;
  }

private:
  /// One transfer's events: `ready` (the compute stream's point it starts
  /// after), `finished` (the copy stream's point after it), and, timed on
  /// a backend with timing events, `begin` and `end` around the copy.
  struct Transfer {
    std::unique_ptr<Event> ready, finished, begin, end;
    Direction direction = Direction::Read;
    uint64_t bytes = 0;
    bool timed = false;
    Done done;
  };

  /// A transfer's events, reused from earlier transfers where there are.
  llvm::Expected<Transfer> takeTransfer(bool wantTimes) {
    Transfer t;
    auto found = std::find_if(spare.begin(), spare.end(), [&](Transfer &s) {
      return !wantTimes || s.begin || !backendTimes;
    });
    if (found != spare.end()) {
      t = std::move(*found);
      spare.erase(found);
    } else {
      t.ready = backend.createEvent();
      t.finished = backend.createEvent();
      if (!t.ready || !t.finished)
        return tierError("cannot create the offload tier's events");
    }
    if (wantTimes && !t.begin && backendTimes) {
      t.begin = backend.createTimingEvent();
      t.end = backend.createTimingEvent();
      if (!t.begin || !t.end) {
        backendTimes = false; // host times, taken around the copy
        t.begin.reset();
        t.end.reset();
      }
    }
    t.timed = wantTimes;
    t.done = Done();
    return std::move(t);
  }

  KernelBackend &backend;
  char *base;
  uint64_t bytes;
  std::unique_ptr<Stream> copies;
  std::map<uint64_t, Transfer> inFlight;
  std::vector<Transfer> timed, spare;
  uint64_t nextTicket = 1;
  bool backendTimes = true;
};

} // namespace

llvm::Expected<std::unique_ptr<OffloadTier>>
createFileTier(llvm::StringRef dir, int rank, uint64_t bytes) {
  return FileTier::create(dir, rank, bytes);
}

llvm::Expected<std::unique_ptr<OffloadTier>>
createPinnedTier(KernelBackend &backend, uint64_t bytes) {
  llvm::Expected<void *> memory = backend.allocatePinned(bytes);
  if (!memory)
    return tierError("cannot lock " + llvm::Twine(bytes) +
                     " bytes of host memory for the offload tier (shardc "
                     "--offload): " +
                     llvm::toString(memory.takeError()) +
                     "; offload fewer buffers, or run fewer ranks per host");
  std::memset(*memory, 0, bytes);
  std::unique_ptr<Stream> copies = backend.createStream();
  if (!copies) {
    backend.deallocatePinned(*memory);
    return tierError("cannot create the offload tier's transfer stream");
  }
  return std::make_unique<PinnedTier>(backend, static_cast<char *>(*memory),
                                      bytes, std::move(copies));
}

} // namespace shardc::rt
