//===- RankGuardTest.cpp - A rank's last line, record and lifeline --------===//
//
// Each case forks a process that attaches to a board, installs the guards and
// then meets its end; the test reads the process's stderr, its exit status
// and its record on the board.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/RankGuard.h"
#include "runtime/comm/Progress.h"

#include "gtest/gtest.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace shardc::rt;

namespace {

/// A fresh rank's position (other tests in this process moved it).
void resetPosition() {
  progress::setStep(-1);
  progress::leaveOps();
  progress::setEnding(progress::Ending::Running);
}

struct Ended {
  int status = 0;
  std::string stderrText;
};

/// Runs `body` in a child process that has attached rank 0 of `board` and
/// installed the guards (with a lifeline when `lifeline`); returns its exit
/// status and what it wrote to stderr.
Ended runChild(progress::Board &board, bool lifeline,
               const std::function<void()> &body) {
  int pipeFds[2];
  EXPECT_EQ(pipe(pipeFds), 0);
  pid_t child = fork();
  if (child == 0) {
    dup2(pipeFds[1], STDERR_FILENO);
    close(pipeFds[0]);
    close(pipeFds[1]);
    setenv(progress::kBoardEnv, board.path().str().c_str(), 1);
    if (progress::attachBoard(0))
      _exit(100);
    resetPosition();
    installRankGuards(0, lifeline);
    body();
    _exit(0);
  }
  close(pipeFds[1]);
  Ended ended;
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipeFds[0], buffer, sizeof(buffer))) > 0)
    ended.stderrText.append(buffer, static_cast<size_t>(n));
  close(pipeFds[0]);
  EXPECT_EQ(waitpid(child, &ended.status, 0), child);
  return ended;
}

std::unique_ptr<progress::Board> newBoard() {
  auto board = progress::Board::create(1);
  EXPECT_TRUE(bool(board));
  return board ? std::move(*board) : nullptr;
}

TEST(RankGuardTest, FatalSignalPrintsRankSignalStepAndOp) {
  auto board = newBoard();
  ASSERT_TRUE(board);
  Ended ended = runChild(*board, false, [] {
    progress::setStep(4);
    progress::enterOp(2, "Conv");
    raise(SIGSEGV);
  });
  ASSERT_TRUE(WIFSIGNALED(ended.status)) << ended.status;
  EXPECT_EQ(WTERMSIG(ended.status), SIGSEGV);
  EXPECT_EQ(ended.stderrText,
            "shard: error: rank 0 died of SIGSEGV at step 5, op 2 (Conv)\n");
  EXPECT_EQ(board->rank(0).ending.load(),
            static_cast<int>(progress::Ending::Crashed));
  EXPECT_EQ(board->rank(0).signal.load(), SIGSEGV);
  EXPECT_EQ(board->rank(0).op.load(), 2);
  EXPECT_STREQ(board->rank(0).opType, "Conv");
}

TEST(RankGuardTest, AbortBeforeTheFirstStep) {
  auto board = newBoard();
  ASSERT_TRUE(board);
  Ended ended = runChild(*board, false, [] { std::abort(); });
  ASSERT_TRUE(WIFSIGNALED(ended.status));
  EXPECT_EQ(WTERMSIG(ended.status), SIGABRT);
  EXPECT_EQ(ended.stderrText,
            "shard: error: rank 0 died of SIGABRT before the first step\n");
}

TEST(RankGuardTest, TerminationIsRecordedQuietly) {
  auto board = newBoard();
  ASSERT_TRUE(board);
  Ended ended = runChild(*board, false, [] { raise(SIGTERM); });
  ASSERT_TRUE(WIFSIGNALED(ended.status));
  EXPECT_EQ(WTERMSIG(ended.status), SIGTERM);
  EXPECT_EQ(ended.stderrText, "");
  EXPECT_EQ(board->rank(0).ending.load(),
            static_cast<int>(progress::Ending::Terminated));
  EXPECT_EQ(board->rank(0).signal.load(), SIGTERM);
}

TEST(RankGuardTest, IgnoredSignalStaysIgnored) {
  auto board = newBoard();
  ASSERT_TRUE(board);
  // nohup: SIGHUP ignored before the guards are installed.
  signal(SIGHUP, SIG_IGN);
  Ended ended = runChild(*board, false, [] {
    raise(SIGHUP);
    progress::setEnding(progress::Ending::Finished);
  });
  signal(SIGHUP, SIG_DFL);
  ASSERT_TRUE(WIFEXITED(ended.status));
  EXPECT_EQ(WEXITSTATUS(ended.status), 0);
  EXPECT_EQ(board->rank(0).ending.load(),
            static_cast<int>(progress::Ending::Finished));
}

TEST(RankGuardTest, ExitFromALibraryIsNotTakenForSigkill) {
  auto board = newBoard();
  ASSERT_TRUE(board);
  Ended ended = runChild(*board, false, [] { std::exit(3); });
  ASSERT_TRUE(WIFEXITED(ended.status));
  EXPECT_EQ(WEXITSTATUS(ended.status), 3);
  EXPECT_EQ(board->rank(0).ending.load(),
            static_cast<int>(progress::Ending::Exited));
}

TEST(RankGuardTest, LifelineEndsARankWhoseParentIsGone) {
  auto board = newBoard();
  ASSERT_TRUE(board);
  // The child starts the "rank" and exits at once: the rank's parent is gone.
  int pipeFds[2];
  ASSERT_EQ(pipe(pipeFds), 0);
  pid_t child = fork();
  if (child == 0) {
    pid_t rank = fork();
    if (rank == 0) {
      dup2(pipeFds[1], STDERR_FILENO);
      close(pipeFds[0]);
      close(pipeFds[1]);
      setenv(progress::kBoardEnv, board->path().str().c_str(), 1);
      if (progress::attachBoard(0))
        _exit(100);
      resetPosition();
      installRankGuards(0, /*lifeline=*/true);
      progress::setStep(6);
      // The parent exits once the rank is guarded; then the rank must end
      // itself well before this sleep does.
      write(STDERR_FILENO, "guarded\n", 8);
      std::this_thread::sleep_for(std::chrono::seconds(30));
      _exit(0);
    }
    char c;
    close(pipeFds[1]);
    (void)!read(pipeFds[0], &c, 1); // "guarded"
    _exit(0);
  }
  close(pipeFds[1]);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  auto start = std::chrono::steady_clock::now();
  std::string text = "g"; // The child consumed the first byte.
  char buffer[512];
  ssize_t n;
  struct pollfd pfd = {pipeFds[0], POLLIN, 0};
  while (poll(&pfd, 1, 5000) > 0 &&
         (n = read(pipeFds[0], buffer, sizeof(buffer))) > 0)
    text.append(buffer, static_cast<size_t>(n));
  close(pipeFds[0]);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // EOF: the rank has ended (its write end closed), within a second.
  EXPECT_LT(seconds, 2.0);
  EXPECT_NE(text.find("shard: error: rank 0: the process that started it "
                      "(pid " +
                      std::to_string(child) +
                      ", mpirun or its daemon) has exited; ending this rank, "
                      "which was at step 7, outside the plan's ops\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(board->rank(0).ending.load(),
            static_cast<int>(progress::Ending::Orphaned));
}

} // namespace
