//===- RankGuard.cpp - A rank that says how it ended ----------------------===//
#include "runtime/comm/RankGuard.h"
#include "runtime/comm/Progress.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>

namespace shardc::rt {

namespace {

int guardedRank = 0;
std::atomic<bool> installed{false};
struct sigaction previousActions[NSIG];

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};

void writeAll(const char *text, size_t length) {
  while (length) {
    ssize_t n = ::write(STDERR_FILENO, text, length);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    text += n;
    length -= static_cast<size_t>(n);
  }
}

/// Async-signal-safe line building into a fixed buffer.
struct Line {
  char text[512];
  size_t length = 0;
  void add(const char *s) {
    for (; s && *s && length + 2 < sizeof(text); ++s)
      text[length++] = *s;
  }
  void add(int64_t value) {
    char digits[24];
    int n = 0;
    bool negative = value < 0;
    uint64_t v = negative ? 0 - static_cast<uint64_t>(value)
                          : static_cast<uint64_t>(value);
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    if (negative)
      digits[n++] = '-';
    char s[24];
    for (int i = 0; i < n; ++i)
      s[i] = digits[n - 1 - i];
    s[n] = '\0';
    add(s);
  }
  /// " at step S, op K (TYPE)" or " before the first step".
  void addPosition() {
    progress::Position p = progress::position();
    char where[160];
    progress::describe(p, where, sizeof(where));
    add(p.step < 0 ? " " : " at ");
    add(where);
  }
  void emit() {
    text[length++] = '\n';
    writeAll(text, length);
  }
};

/// Runs the handler that was installed before ours, then makes sure the
/// process dies of `sig` (its exit status names the signal).
void chainAndDie(int sig, siginfo_t *info, void *context) {
  const struct sigaction &old = previousActions[sig];
  if (old.sa_flags & SA_SIGINFO) {
    if (old.sa_sigaction)
      old.sa_sigaction(sig, info, context);
  } else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
    old.sa_handler(sig);
  }
  struct sigaction fallback;
  std::memset(&fallback, 0, sizeof(fallback));
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(sig, &fallback, nullptr);
  // Pending while this handler runs (the signal is blocked in it), delivered
  // with the default action when it returns; a fault re-faults on return.
  raise(sig);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, sig);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
}

void onFatalSignal(int sig, siginfo_t *info, void *context) {
  int savedErrno = errno;
  progress::setEnding(progress::Ending::Crashed, sig);
  char name[16];
  Line line;
  line.add(progress::programName());
  line.add(": error: rank ");
  line.add(static_cast<int64_t>(guardedRank));
  line.add(" died of ");
  line.add(signalName(sig, name));
  line.addPosition();
  line.emit();
  errno = savedErrno;
  chainAndDie(sig, info, context);
}

void onStopSignal(int sig, siginfo_t *info, void *context) {
  progress::setEnding(progress::Ending::Terminated, sig);
  chainAndDie(sig, info, context);
}

void install(int sig, void (*handler)(int, siginfo_t *, void *)) {
  // A signal the process was started ignoring (SIGHUP under nohup, SIGINT in
  // a shell's background job) stays ignored.
  struct sigaction old;
  if (sigaction(sig, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
      old.sa_handler == SIG_IGN)
    return;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = handler;
  // SA_ONSTACK: a stack overflow is reported on the alternate stack that
  // LLVM's InitLLVM sets up for the main thread.
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(sig, &action, &previousActions[sig]);
}

[[noreturn]] void endOrphaned(const std::string &why) {
  progress::setEnding(progress::Ending::Orphaned);
  Line line;
  line.add(progress::programName());
  line.add(": error: rank ");
  line.add(static_cast<int64_t>(guardedRank));
  line.add(": ");
  line.add(why.c_str());
  line.add("; ending this rank, which was");
  line.addPosition();
  line.emit();
  std::_Exit(1);
}

/// The lifeline thread: ends the rank once its parent or the launcher is
/// gone.
void lifeline(pid_t parent, int launcherPid, int64_t launcherStart) {
  // Writing to a pipe whose reader died must not kill the rank before it
  // has recorded why it ends: take EPIPE instead of SIGPIPE on this thread.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (getppid() != parent)
      endOrphaned("the process that started it (pid " + std::to_string(parent) +
                  ", mpirun or its daemon) has exited");
    if (launcherPid > 0 &&
        progress::processStartTicks(launcherPid) != launcherStart)
      endOrphaned("its launcher (shardrun, pid " + std::to_string(launcherPid) +
                  ") has exited");
  }
}

} // namespace

const char *signalName(int signal, char (&buffer)[16]) {
  switch (signal) {
  case SIGSEGV:
    return "SIGSEGV";
  case SIGBUS:
    return "SIGBUS";
  case SIGFPE:
    return "SIGFPE";
  case SIGILL:
    return "SIGILL";
  case SIGABRT:
    return "SIGABRT";
  case SIGTERM:
    return "SIGTERM";
  case SIGINT:
    return "SIGINT";
  case SIGHUP:
    return "SIGHUP";
  case SIGKILL:
    return "SIGKILL";
  case SIGQUIT:
    return "SIGQUIT";
  case SIGPIPE:
    return "SIGPIPE";
  case SIGSTOP:
    return "SIGSTOP";
  }
  Line line;
  line.add("signal ");
  line.add(static_cast<int64_t>(signal));
  size_t n = std::min(line.length, sizeof(buffer) - 1);
  std::memcpy(buffer, line.text, n);
  buffer[n] = '\0';
  return buffer;
}

void installRankGuards(int rank, bool withLifeline) {
  if (installed.exchange(true))
    return;
  guardedRank = rank;
  for (int sig : kFatalSignals)
    install(sig, onFatalSignal);
  for (int sig : kStopSignals)
    install(sig, onStopSignal);
  std::atexit([] {
    if (progress::record().ending.load() ==
        static_cast<int32_t>(progress::Ending::Running))
      progress::setEnding(progress::Ending::Exited);
  });
  if (!withLifeline)
    return;
  int launcherPid = 0;
  int64_t launcherStart = -1;
  if (const char *launcher = std::getenv(progress::kLauncherEnv)) {
    char *end = nullptr;
    launcherPid = static_cast<int>(std::strtol(launcher, &end, 10));
    if (end && *end == ':')
      launcherStart = std::strtoll(end + 1, nullptr, 10);
    else
      launcherPid = 0;
  }
  std::thread(lifeline, getppid(), launcherPid, launcherStart).detach();
}

} // namespace shardc::rt
