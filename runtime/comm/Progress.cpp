//===- Progress.cpp - Where a rank is, for fault reports ------------------===//
#include "runtime/comm/Progress.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shardc::rt::progress {

namespace {

RankRecord localRecord;
/// The record in use: localRecord, or this rank's record of the board.
std::atomic<RankRecord *> current{&localRecord};
/// The op's type as the executor holds it (the record's text is a copy, kept
/// only for the launcher).
std::atomic<const char *> currentType{nullptr};
std::atomic<bool> onBoard{false};
std::atomic<const char *> program{"shard"};

/// Appends to a fixed buffer without allocating (async-signal-safe).
struct Appender {
  char *buffer;
  size_t size;
  size_t length = 0;

  void add(const char *text) {
    for (; text && *text && length + 1 < size; ++text)
      buffer[length++] = *text;
    if (size)
      buffer[length] = '\0';
  }
  void add(int64_t value) {
    char digits[24];
    int n = 0;
    uint64_t v = value < 0 ? 0 - static_cast<uint64_t>(value)
                           : static_cast<uint64_t>(value);
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    if (value < 0)
      digits[n++] = '-';
    char text[24];
    for (int i = 0; i < n; ++i)
      text[i] = digits[n - 1 - i];
    text[n] = '\0';
    add(text);
  }
};

} // namespace

void setStep(int64_t step) {
  current.load(std::memory_order_relaxed)
      ->step.store(step, std::memory_order_relaxed);
}

void enterOp(int32_t index, const char *type) {
  RankRecord *r = current.load(std::memory_order_relaxed);
  currentType.store(type, std::memory_order_relaxed);
  r->op.store(index, std::memory_order_relaxed);
  if (onBoard.load(std::memory_order_relaxed)) {
    size_t i = 0;
    for (; type && type[i] && i + 1 < sizeof(r->opType); ++i)
      r->opType[i] = type[i];
    r->opType[i] = '\0';
  }
}

void leaveOps() {
  current.load(std::memory_order_relaxed)
      ->op.store(-1, std::memory_order_relaxed);
  currentType.store(nullptr, std::memory_order_relaxed);
}

void setEnding(Ending ending, int signal) {
  RankRecord *r = current.load(std::memory_order_relaxed);
  r->signal.store(signal, std::memory_order_relaxed);
  r->ending.store(static_cast<int32_t>(ending), std::memory_order_release);
}

const RankRecord &record() { return *current.load(std::memory_order_acquire); }

Position position() {
  const RankRecord &r = record();
  Position p;
  p.step = r.step.load(std::memory_order_relaxed);
  p.op = r.op.load(std::memory_order_relaxed);
  p.opType = p.op >= 0 ? currentType.load(std::memory_order_relaxed) : nullptr;
  return p;
}

size_t describe(const Position &position, char *buffer, size_t size) {
  Appender out{buffer, size};
  if (size)
    buffer[0] = '\0';
  if (position.step < 0) {
    out.add("before the first step");
    return out.length;
  }
  out.add("step ");
  out.add(position.step + 1);
  if (position.op < 0) {
    out.add(", outside the plan's ops");
    return out.length;
  }
  out.add(", op ");
  out.add(static_cast<int64_t>(position.op));
  if (position.opType && *position.opType) {
    out.add(" (");
    out.add(position.opType);
    out.add(")");
  }
  return out.length;
}

std::string describe(const Position &position) {
  char buffer[160];
  describe(position, buffer, sizeof(buffer));
  return buffer;
}

void setProgramName(const char *name) { program.store(name); }
const char *programName() { return program.load(); }

int64_t processStartTicks(int pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  char text[1024];
  ssize_t n = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (n <= 0)
    return -1;
  text[n] = '\0';
  // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, the
  // last ')' ends it. STATE is field 3, the start time field 22.
  const char *p = std::strrchr(text, ')');
  if (!p)
    return -1;
  int field = 2;
  const char *state = nullptr;
  for (const char *q = p + 1; *q; ++q) {
    if (*q != ' ')
      continue;
    ++field;
    if (field == 3)
      state = q + 1;
    if (field == 22) {
      if (!state || *state == 'Z' || *state == 'X')
        return -1;
      return std::strtoll(q + 1, nullptr, 10);
    }
  }
  return -1;
}

llvm::Error attachBoard(int rank) {
  const char *path = std::getenv(kBoardEnv);
  if (!path || !*path)
    return llvm::Error::success();
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot use the launcher's progress board " +
                                       llvm::Twine(path) + ": " + what);
  };
  int fd = ::open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return fail(std::strerror(errno));
  struct stat st;
  size_t need = static_cast<size_t>(rank + 1) * sizeof(RankRecord);
  if (::fstat(fd, &st) != 0 || rank < 0 ||
      static_cast<size_t>(st.st_size) < need) {
    ::close(fd);
    return fail("it has no record for rank " + llvm::Twine(rank));
  }
  void *mem = ::mmap(nullptr, static_cast<size_t>(st.st_size),
                     PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mem == MAP_FAILED)
    return fail(std::strerror(errno));
  RankRecord *mine = static_cast<RankRecord *>(mem) + rank;
  const RankRecord &old = record();
  mine->startTicks.store(processStartTicks(getpid()));
  mine->step.store(old.step.load());
  mine->op.store(old.op.load());
  mine->signal.store(old.signal.load());
  mine->ending.store(old.ending.load());
  mine->opType[0] = '\0';
  mine->pid.store(getpid(), std::memory_order_release);
  current.store(mine, std::memory_order_release);
  onBoard.store(true);
  // The last rank to attach removes the file (the launcher does too, on its
  // next look): no file is left behind if the launcher is killed now.
  const RankRecord *all = static_cast<const RankRecord *>(mem);
  size_t ranks = static_cast<size_t>(st.st_size) / sizeof(RankRecord);
  bool everyone = true;
  for (size_t r = 0; r < ranks; ++r)
    everyone = everyone && all[r].pid.load(std::memory_order_acquire) > 0;
  if (everyone)
    ::unlink(path);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Board>> Board::create(int ranks) {
  llvm::SmallString<128> model;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, model);
  llvm::sys::path::append(model, "shardrun-board-%%%%%%%%");
  int fd = -1;
  llvm::SmallString<128> path;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          model, fd, path, llvm::sys::fs::OF_None, 0600))
    return llvm::createStringError(ec, "cannot create the progress board " +
                                           model + ": " + ec.message());
  size_t bytes = static_cast<size_t>(ranks) * sizeof(RankRecord);
  void *mem = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0)
    mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (mem == MAP_FAILED) {
    ::unlink(path.c_str());
    return llvm::createStringError(
        std::error_code(err, std::generic_category()),
        "cannot map the progress board " + path + ": " + std::strerror(err));
  }
  RankRecord *records = static_cast<RankRecord *>(mem);
  for (int r = 0; r < ranks; ++r)
    new (&records[r]) RankRecord();
  return std::unique_ptr<Board>(
      new Board(ranks, records, bytes, std::string(path.str())));
}

void Board::removeFile() {
  if (removed)
    return;
  removed = true;
  ::unlink(filePath.c_str());
}

Board::~Board() {
  removeFile();
  ::munmap(records, bytes);
}

} // namespace shardc::rt::progress
