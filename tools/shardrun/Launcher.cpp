//===- Launcher.cpp - Runs a plan's ranks as local MPI processes ----------===//
//
// `shardrun PLAN` with a plan for N > 1 ranks starts mpirun with N copies of
// itself and waits for it. The job must not outlive the launcher, hang, or
// end without saying which rank failed where:
//
// Starting. The launcher forks and execs mpirun itself. Before the exec the
// child asks for PR_SET_PDEATHSIG(SIGTERM): when the launcher ends for any
// reason, SIGKILL included, the kernel sends mpirun SIGTERM, and mpirun ends
// every rank (SIGTERM, then SIGKILL after 1 s). The launcher has one thread,
// so "the parent thread ended" means "the launcher ended". Each rank also
// polls for the launcher ($SHARD_LAUNCHER, runtime/comm/RankGuard.h) and for
// its parent, so a rank ends within 0.2 s even if mpirun itself is gone.
//
// Messages. With the progress board (below) every way a rank ends is said
// once, by the rank or by the launcher, so mpirun runs with --quiet: its
// help banners ("MPI_ABORT was invoked", "Primary job terminated normally,
// but 1 process returned a non-zero exit code", "mpirun noticed that process
// rank 1 ... exited on signal 9") would repeat it in a dozen lines. What
// --quiet also hides is mpirun's own failure to start ranks; when mpirun
// fails and a rank never reached the board, the launcher says so and gives
// the mpirun command to run for mpirun's message. Without a board mpirun
// speaks as usual.
//
// Signals. SIGINT, SIGTERM and SIGHUP are blocked in the launcher and taken
// with sigtimedwait in its wait loop (signals the launcher was started
// ignoring stay ignored). The first one prints one line and is passed on to
// mpirun as SIGTERM; if mpirun has not ended 10 s later, or a second signal
// comes, the launcher kills mpirun and every rank it knows with SIGKILL.
// Once mpirun is gone the launcher dies of the signal it received, so its
// parent sees the usual status (a shell reports 128 + N). mpirun stays in the
// launcher's process group (a terminal's Ctrl-C and Ctrl-Z reach both; mpirun
// passes Ctrl-Z on to the ranks), and puts each rank in a group of its own.
//
// The progress board (runtime/comm/Progress.h). The launcher creates a small
// shared file with one record per rank and names it, and itself, in the
// environment that mpirun passes to the local ranks. Every rank maps its
// record: its PID, its step and op (the executor updates them per op) and
// how it ended (finished, failed, aborted, crashed, terminated). Every
// 100 ms the launcher looks at the records. A rank whose process is gone
// while its record says it is running ended without running any handler:
// only SIGKILL does that (a user, a scheduler, the kernel's OOM killer). If
// that happened before any other rank reported a failure of its own, the
// launcher names the rank, its PID, step and op once mpirun has ended (mpirun
// notices the death in about 1 s, ends the other ranks, and exits 137). A
// rank mpirun kills while ending the job is a consequence, not reported.
// Ranks still alive when mpirun has ended are killed and named. The file is
// removed by the last rank to map it (or by the launcher on its next look,
// or when it ends), so a launcher killed later leaves nothing behind.
//
// Under a direct `mpirun` or `srun` launch there is no launcher and no board:
// each rank still reports its own fatal signal with step and op, ends itself
// when its parent (mpirun, orted, slurmstepd) goes away, and the collective
// watchdog ends a job whose rank stopped. A SIGKILLed rank is then named by
// mpirun ("exited on signal 9"), or by srun; with `srun
// --kill-on-bad-exit=0` the survivors' watchdog names it as a rank that did
// not answer.
//
//===----------------------------------------------------------------------===//
#include "tools/shardrun/Launcher.h"

#include "runtime/comm/Progress.h"
#include "runtime/comm/RankGuard.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace shardc {

namespace progress = rt::progress;
using llvm::StringRef;
using Clock = std::chrono::steady_clock;

namespace {

/// How long mpirun gets to end the job after the launcher passed a signal on.
constexpr double kForwardGraceSeconds = 10.0;
/// How often the launcher looks at mpirun and the board.
constexpr long kTickNanos = 100 * 1000 * 1000;

llvm::raw_ostream &error() {
  return llvm::WithColor::error(llvm::errs(), "shardrun");
}

/// A rank's process is alive: its PID still names the process that attached
/// to the board (not a zombie, not a later process with the same PID).
bool rankAlive(const progress::RankRecord &r) {
  int pid = r.pid.load(std::memory_order_acquire);
  return pid > 0 && progress::processStartTicks(pid) ==
                        r.startTicks.load(std::memory_order_relaxed);
}

/// "step 3, op 57 (MatMul)" from a rank's record.
std::string describeRecord(const progress::RankRecord &r) {
  char type[sizeof(r.opType)];
  std::memcpy(type, r.opType, sizeof(type));
  type[sizeof(type) - 1] = '\0';
  progress::Position p;
  p.step = r.step.load(std::memory_order_relaxed);
  p.op = r.op.load(std::memory_order_relaxed);
  p.opType = type;
  std::string where = progress::describe(p);
  return p.step < 0 ? where : "at " + where;
}

/// Watches the board while the job runs; see the file comment.
class BoardWatch {
public:
  explicit BoardWatch(progress::Board *board)
      : board(board), silentCulprit(board ? board->ranks() : 0, false),
        seenDead(board ? board->ranks() : 0, false) {}

  /// One look at every record.
  void scan() {
    if (!board)
      return;
    bool allAttached = true;
    for (int r = 0; r < board->ranks(); ++r) {
      const progress::RankRecord &rec = board->rank(r);
      if (rec.pid.load(std::memory_order_acquire) <= 0) {
        allAttached = false;
        continue;
      }
      auto ending = static_cast<progress::Ending>(
          rec.ending.load(std::memory_order_acquire));
      if (ending == progress::Ending::Crashed ||
          ending == progress::Ending::Aborted ||
          ending == progress::Ending::Failed ||
          ending == progress::Ending::Exited)
        causeReported = true;
    }
    for (int r = 0; r < board->ranks(); ++r) {
      const progress::RankRecord &rec = board->rank(r);
      if (seenDead[r] || rec.pid.load(std::memory_order_acquire) <= 0 ||
          rankAlive(rec))
        continue;
      seenDead[r] = true;
      // Read the ending after the death: the rank wrote it before dying.
      auto ending = static_cast<progress::Ending>(
          rec.ending.load(std::memory_order_acquire));
      if (ending == progress::Ending::Running && !causeReported && !jobEnding)
        silentCulprit[r] = true;
    }
    if (allAttached)
      board->removeFile();
  }

  /// From now on deaths are the job ending (a signal to the launcher).
  void markJobEnding() { jobEnding = true; }

  /// SIGKILLs every rank still alive; returns how many.
  int killRanks() {
    int killed = 0;
    if (!board)
      return killed;
    for (int r = 0; r < board->ranks(); ++r) {
      const progress::RankRecord &rec = board->rank(r);
      if (!rankAlive(rec))
        continue;
      ::kill(rec.pid.load(), SIGKILL);
      ++killed;
    }
    return killed;
  }

  /// After mpirun ended: names silently killed ranks, kills and names ranks
  /// that outlived mpirun.
  void report() {
    if (!board)
      return;
    scan();
    for (int r = 0; r < board->ranks(); ++r) {
      const progress::RankRecord &rec = board->rank(r);
      if (!silentCulprit[r])
        continue;
      error() << "rank " << r << " (pid " << rec.pid.load() << ") died "
              << describeRecord(rec)
              << " without a word, which means signal 9 (SIGKILL): it comes "
                 "from a user, a scheduler or the kernel's out-of-memory "
                 "killer (see dmesg)\n";
    }
    for (int r = 0; r < board->ranks(); ++r) {
      const progress::RankRecord &rec = board->rank(r);
      if (!rankAlive(rec))
        continue;
      ::kill(rec.pid.load(), SIGKILL);
      error() << "rank " << r << " (pid " << rec.pid.load()
              << ") was still running " << describeRecord(rec)
              << " after mpirun had ended; killed it\n";
    }
  }

  /// The ranks that never reached the board (mpirun did not start them, or
  /// they failed before MPI was up).
  std::vector<int> unstarted() const {
    std::vector<int> ranks;
    if (board)
      for (int r = 0; r < board->ranks(); ++r)
        if (board->rank(r).pid.load(std::memory_order_acquire) <= 0)
          ranks.push_back(r);
    return ranks;
  }

  /// Where rank 0 is, for the launcher's own messages.
  std::string where() const {
    if (!board || board->rank(0).pid.load() <= 0)
      return "";
    return " (rank 0 is " + describeRecord(board->rank(0)) + ")";
  }

private:
  progress::Board *board;
  /// Died without a word before any rank reported a failure.
  std::vector<bool> silentCulprit;
  std::vector<bool> seenDead;
  bool causeReported = false;
  bool jobEnding = false;
};

const char *signalText(int sig) {
  static char buffer[16];
  return rt::signalName(sig, buffer);
}

/// "exit status 1" or "killed by SIGKILL", from waitpid's status.
std::string describeStatus(int status) {
  if (WIFSIGNALED(status))
    return std::string("killed by ") + signalText(WTERMSIG(status));
  return "exit status " + std::to_string(WEXITSTATUS(status));
}

} // namespace

int launchRanks(int ranks, int argc, char **argv) {
  llvm::ErrorOr<std::string> mpirun = llvm::sys::findProgramByName("mpirun");
  if (!mpirun) {
    error() << "running " << ranks
            << " ranks needs mpirun (Debian package openmpi-bin): not found on "
               "PATH\n";
    return 1;
  }
  static int anchor;
  std::string self = llvm::sys::fs::getMainExecutable(argv[0], &anchor);
  // Local ranks share the machine's cores (often more ranks than cores):
  // no binding, and MPI yields the core while it waits instead of spinning,
  // so the ranks' kernels and communication threads all progress (the GPT
  // example at ZeRO-3 on 2 ranks and 2 cores: 1255 -> 5654 samples/s).
  std::vector<std::string> args = {*mpirun,
                                   "-np",
                                   std::to_string(ranks),
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "--mca",
                                   "mpi_yield_when_idle",
                                   "1"};
  if (geteuid() == 0)
    args.push_back("--allow-run-as-root");
  args.push_back(self);
  for (int i = 1; i < argc; ++i) {
    StringRef a(argv[i]);
    if (a.starts_with("--nproc=") || a.starts_with("-nproc="))
      continue;
    if (a == "--nproc" || a == "-nproc") {
      ++i;
      continue;
    }
    args.push_back(a.str());
  }

  // The board, and the environment that hands it and the launcher to the
  // ranks. Without a board (no writable temporary directory) the job runs,
  // but a SIGKILLed rank is named by mpirun only.
  std::unique_ptr<progress::Board> board;
  if (auto created = progress::Board::create(ranks))
    board = std::move(*created);
  else
    llvm::WithColor::warning(llvm::errs(), "shardrun")
        << toString(created.takeError())
        << "; a rank killed by SIGKILL will not be named with its step\n";
  // The command as a user would type it, for when mpirun fails (below).
  std::string command;
  {
    llvm::raw_string_ostream os(command);
    for (const std::string &a : args) {
      bool plain = !a.empty() && llvm::all_of(a, [](char c) {
        return llvm::isAlnum(c) || StringRef("_./=:,+-@%").contains(c);
      });
      os << (command.empty() ? "" : " ");
      llvm::sys::printArg(os, a, /*Quote=*/!plain);
    }
  }
  if (board)
    args.insert(args.begin() + 1, "--quiet");
  std::vector<std::string> env;
  for (char **e = environ; e && *e; ++e) {
    StringRef var(*e);
    if (var.starts_with(std::string(progress::kBoardEnv) + "=") ||
        var.starts_with(std::string(progress::kLauncherEnv) + "="))
      continue;
    env.push_back(var.str());
  }
  if (board)
    env.push_back(std::string(progress::kBoardEnv) + "=" + board->path().str());
  env.push_back(std::string(progress::kLauncherEnv) + "=" +
                std::to_string(getpid()) + ":" +
                std::to_string(progress::processStartTicks(getpid())));
  std::vector<char *> argvExec, envExec;
  for (std::string &a : args)
    argvExec.push_back(a.data());
  argvExec.push_back(nullptr);
  for (std::string &e : env)
    envExec.push_back(e.data());
  envExec.push_back(nullptr);

  // Signals come to the wait loop (sigtimedwait), not to handlers.
  ::signal(SIGCHLD, SIG_DFL); // Ignored SIGCHLD would reap mpirun for us.
  sigset_t waited, oldMask;
  sigemptyset(&waited);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD})
    sigaddset(&waited, sig);
  sigprocmask(SIG_BLOCK, &waited, &oldMask);

  // The child tells an exec failure through a close-on-exec pipe.
  int execPipe[2];
  if (::pipe2(execPipe, O_CLOEXEC) != 0) {
    error() << "could not run mpirun: pipe: " << std::strerror(errno) << "\n";
    return 1;
  }
  pid_t launcher = getpid();
  pid_t child = ::fork();
  if (child == 0) {
    // Only async-signal-safe calls until exec.
    ::close(execPipe[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher)
      _exit(127); // The launcher died before prctl: no job.
    sigprocmask(SIG_SETMASK, &oldMask, nullptr);
    ::execve(argvExec[0], argvExec.data(), envExec.data());
    int err = errno;
    (void)!::write(execPipe[1], &err, sizeof(err));
    _exit(127);
  }
  ::close(execPipe[1]);
  if (child < 0) {
    int err = errno;
    ::close(execPipe[0]);
    sigprocmask(SIG_SETMASK, &oldMask, nullptr);
    error() << "could not run mpirun: fork: " << std::strerror(err) << "\n";
    return 1;
  }
  int execErr = 0;
  ssize_t got;
  do
    got = ::read(execPipe[0], &execErr, sizeof(execErr));
  while (got < 0 && errno == EINTR);
  ::close(execPipe[0]);
  if (got == sizeof(execErr)) {
    ::waitpid(child, nullptr, 0);
    sigprocmask(SIG_SETMASK, &oldMask, nullptr);
    error() << "could not run " << *mpirun << ": " << std::strerror(execErr)
            << "\n";
    return 1;
  }

  BoardWatch watch(board.get());
  int received = 0;
  bool escalated = false;
  Clock::time_point forwardedAt;
  int status = 0;
  for (;;) {
    pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child)
      break;
    if (done < 0 && errno != EINTR) {
      status = 1 << 8;
      break;
    }
    watch.scan();
    if (received && !escalated &&
        std::chrono::duration<double>(Clock::now() - forwardedAt).count() >
            kForwardGraceSeconds) {
      error() << "mpirun did not end the job within "
              << static_cast<int>(kForwardGraceSeconds)
              << " s; killing it and its ranks\n";
      ::kill(child, SIGKILL);
      watch.killRanks();
      escalated = true;
    }
    struct timespec tick = {0, kTickNanos};
    siginfo_t info;
    int sig = ::sigtimedwait(&waited, &info, &tick);
    if (sig != SIGINT && sig != SIGTERM && sig != SIGHUP)
      continue;
    if (!received) {
      received = sig;
      watch.markJobEnding();
      error() << "received " << signalText(sig) << "; ending the job's "
              << ranks << " ranks" << watch.where() << "\n";
      ::kill(child, SIGTERM);
      forwardedAt = Clock::now();
    } else if (!escalated) {
      error() << "received " << signalText(sig)
              << " again; killing mpirun and the ranks\n";
      ::kill(child, SIGKILL);
      watch.killRanks();
      escalated = true;
    }
  }
  watch.report();
  std::vector<int> unstarted = watch.unstarted();
  if (!received && !unstarted.empty() &&
      !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    std::string list;
    for (int r : unstarted)
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    error() << "mpirun ended (" << describeStatus(status) << ") and rank(s) "
            << list
            << " never started; unless a rank said why above, run mpirun "
               "yourself to see its message:\n  "
            << command << "\n";
  }
  board.reset();
  sigprocmask(SIG_SETMASK, &oldMask, nullptr);
  if (received) {
    // Die of the signal, as if it had not been caught.
    llvm::errs().flush();
    ::signal(received, SIG_DFL);
    ::raise(received);
    return 128 + received;
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    error() << "mpirun was killed by " << signalText(WTERMSIG(status)) << "\n";
    return 128 + WTERMSIG(status);
  }
  return 1;
}

} // namespace shardc
