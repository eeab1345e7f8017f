//===- Progress.h - Where a rank is, for fault reports ----------*- C++ -*-===//
//
// Every rank publishes where it is (the training step and the plan op its
// executor runs) and, once it ends, how it ended. Three readers need it when
// something goes wrong, each at a moment when nothing else can be asked:
//
//   - the rank's own fatal-signal handler (RankGuard.h), whose last line
//     names the step and op;
//   - the MPI communicator's collective watchdog, which tells the other ranks
//     where this rank is when a collective stalls (MpiCommunicator.cpp);
//   - the local launcher (`shardrun` starting mpirun, tools/shardrun), which
//     creates a small shared file, the progress board, with one record per
//     rank, and after the job reads the record of a rank that ended without
//     a word (SIGKILL: no handler runs) to name it with its step and op.
//
// A record is plain lock-free atomics (and a short text the launcher reads
// only after the rank is gone), so a signal handler may write it and another
// process may read it through a shared mapping. Without a board (a rank that
// mpirun or srun started directly, a single process) the record is this
// process's own and only the first two readers see it.
//
// The executor updates the record per op with relaxed stores; the cost is a
// few nanoseconds per op.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_COMM_PROGRESS_H
#define SHARDC_RUNTIME_COMM_PROGRESS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace shardc::rt::progress {

/// How a rank ended, as its record says. A rank still running, or one that
/// died without running any handler (SIGKILL), says Running.
enum class Ending : int32_t {
  Running = 0,
  /// It finished its work.
  Finished = 1,
  /// It reported an error and exited non-zero.
  Failed = 2,
  /// It ended the whole job through MPI_Abort (after printing why).
  Aborted = 3,
  /// A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT); it printed a
  /// line naming the signal, step and op.
  Crashed = 4,
  /// SIGTERM, SIGINT or SIGHUP told it to stop (mpirun ending the job, a
  /// scheduler, a user).
  Terminated = 5,
  /// The launcher or the process that started it (mpirun's daemon, srun's
  /// step daemon) went away, and it ended itself.
  Orphaned = 6,
  /// Something called exit() while the rank was running (a library's fatal
  /// error, which printed its own message).
  Exited = 7,
};

/// One rank's record: 64 bytes in the progress board.
struct RankRecord {
  /// The rank's process (0 until it attached to the board).
  std::atomic<int32_t> pid{0};
  /// An Ending.
  std::atomic<int32_t> ending{0};
  /// The signal of a Crashed or Terminated ending.
  std::atomic<int32_t> signal{0};
  /// Index of the plan op the executor runs; -1 outside the plan's ops.
  std::atomic<int32_t> op{-1};
  /// The executor's global step, counting from 0; -1 before the first run.
  std::atomic<int64_t> step{-1};
  /// The process's start time in clock ticks since boot (field 22 of
  /// /proc/PID/stat): tells the rank from a later process with its PID.
  std::atomic<int64_t> startTicks{0};
  /// The op's type, NUL-terminated and truncated; written only with a board,
  /// read only after the rank has ended.
  char opType[32] = {};
};
static_assert(sizeof(RankRecord) == 64, "the board's layout is fixed");
static_assert(std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "a signal handler and another process use the record");

/// Executor hooks: the global step of the run that begins, the op it runs
/// (`type` must stay valid until leaveOps() or the next enterOp()), and the
/// end of the plan's ops (collectives issued later, such as the trainer's
/// loss average, are "outside the plan's ops").
void setStep(int64_t step);
void enterOp(int32_t index, const char *type);
void leaveOps();

/// Records how this rank ends (last write wins).
void setEnding(Ending ending, int signal = 0);

/// This rank's record.
const RankRecord &record();

/// Where this rank is now.
struct Position {
  int64_t step = -1;
  int32_t op = -1;
  /// Null outside the plan's ops.
  const char *opType = nullptr;
};
Position position();

/// "step 3, op 57 (MatMul)", "step 3, outside the plan's ops" or "before the
/// first step". Steps count from 1, as in the training log.
std::string describe(const Position &position);
/// The same into `buffer` (NUL-terminated, truncated to `size`); returns the
/// length. Async-signal-safe.
size_t describe(const Position &position, char *buffer, size_t size);

/// The name that starts this process's messages ("shardrun"); "shard" until
/// set. `name` must stay valid.
void setProgramName(const char *name);
const char *programName();

/// The environment variables through which the launcher hands its board and
/// itself to the ranks (mpirun passes the launcher's environment on to local
/// ranks): the board's path, and "PID:START_TICKS" of the launcher.
inline constexpr const char *kBoardEnv = "SHARD_PROGRESS_BOARD";
inline constexpr const char *kLauncherEnv = "SHARD_LAUNCHER";

/// Maps this rank's record of the board named by $SHARD_PROGRESS_BOARD, if
/// set, and moves the record there (from now on the launcher sees it).
/// Success without a board.
llvm::Error attachBoard(int rank);

/// The start time of process `pid` in clock ticks since boot, or -1 when it
/// does not exist or has ended (a zombie counts as ended).
int64_t processStartTicks(int pid);

/// The launcher's side: a board for `ranks` ranks in a new file under the
/// temporary directory, mapped shared. The file is removed by
/// removeFile() or the destructor; the mapping stays valid.
class Board {
public:
  static llvm::Expected<std::unique_ptr<Board>> create(int ranks);
  ~Board();
  Board(const Board &) = delete;
  Board &operator=(const Board &) = delete;

  int ranks() const { return numRanks; }
  const RankRecord &rank(int r) const { return records[r]; }
  llvm::StringRef path() const { return filePath; }
  /// Removes the file (ranks that mapped it keep their mapping). Idempotent.
  void removeFile();

private:
  Board(int ranks, RankRecord *records, size_t bytes, std::string path)
      : numRanks(ranks), records(records), bytes(bytes),
        filePath(std::move(path)) {}
  int numRanks;
  RankRecord *records;
  size_t bytes;
  std::string filePath;
  bool removed = false;
};

} // namespace shardc::rt::progress

#endif // SHARDC_RUNTIME_COMM_PROGRESS_H
