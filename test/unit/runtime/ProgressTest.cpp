//===- ProgressTest.cpp - A rank's published position and the board -------===//
#include "runtime/comm/Progress.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace shardc::rt;

namespace {

TEST(ProgressTest, DescribesPositions) {
  EXPECT_EQ(progress::describe({-1, -1, nullptr}), "before the first step");
  EXPECT_EQ(progress::describe({0, -1, nullptr}),
            "step 1, outside the plan's ops");
  EXPECT_EQ(progress::describe({4, 57, "MatMul"}), "step 5, op 57 (MatMul)");
  EXPECT_EQ(progress::describe({4, 57, nullptr}), "step 5, op 57");
  // Truncated, NUL-terminated, never past the buffer.
  char small[8];
  size_t n = progress::describe({123456, 7, "Conv"}, small, sizeof(small));
  EXPECT_EQ(n, 7u);
  EXPECT_STREQ(small, "step 12");
}

TEST(ProgressTest, StartTicksTellLiveFromEndedProcesses) {
  EXPECT_GT(progress::processStartTicks(getpid()), 0);
  pid_t child = fork();
  if (child == 0)
    _exit(0);
  ASSERT_GT(child, 0);
  // A zombie has ended.
  siginfo_t info;
  ASSERT_EQ(waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(progress::processStartTicks(child), -1);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(progress::processStartTicks(child), -1);
}

TEST(ProgressTest, RankRecordsReachTheLaunchersBoard) {
  auto board = progress::Board::create(3);
  ASSERT_TRUE(bool(board)) << llvm::toString(board.takeError());
  const progress::RankRecord &rec = (*board)->rank(2);
  EXPECT_EQ(rec.pid.load(), 0);
  EXPECT_EQ(rec.op.load(), -1);
  EXPECT_EQ(rec.step.load(), -1);

  // No board in the environment: nothing to attach, not an error.
  unsetenv(progress::kBoardEnv);
  EXPECT_FALSE(bool(progress::attachBoard(2)));

  // A rank beyond the board is an error naming the file.
  setenv(progress::kBoardEnv, (*board)->path().str().c_str(), 1);
  llvm::Error tooFar = progress::attachBoard(3);
  ASSERT_TRUE(bool(tooFar));
  EXPECT_NE(llvm::toString(std::move(tooFar)).find("no record for rank 3"),
            std::string::npos);

  progress::setStep(9);
  ASSERT_FALSE(bool(progress::attachBoard(2)));
  // Ranks 0 and 1 have not attached: the file stays for them.
  EXPECT_EQ(access((*board)->path().str().c_str(), F_OK), 0);
  unsetenv(progress::kBoardEnv);
  EXPECT_EQ(rec.pid.load(), getpid());
  EXPECT_EQ(rec.startTicks.load(), progress::processStartTicks(getpid()));
  EXPECT_EQ(rec.step.load(), 9); // Carried over from the local record.
  progress::enterOp(12, "LayerNormalizationWithAVeryLongTypeName");
  EXPECT_EQ(rec.op.load(), 12);
  EXPECT_STREQ(rec.opType, "LayerNormalizationWithAVeryLong");
  progress::leaveOps();
  EXPECT_EQ(rec.op.load(), -1);
  progress::setEnding(progress::Ending::Crashed, SIGSEGV);
  EXPECT_EQ(rec.ending.load(), static_cast<int>(progress::Ending::Crashed));
  EXPECT_EQ(rec.signal.load(), SIGSEGV);
  progress::setEnding(progress::Ending::Running);

  // The file goes, the mappings stay.
  std::string path = (*board)->path().str();
  (*board)->removeFile();
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  progress::setStep(10);
  EXPECT_EQ(rec.step.load(), 10);
}

TEST(ProgressTest, LastRankToAttachRemovesTheFile) {
  // Each "rank" attaches in a child process; the file goes with the last.
  auto board = progress::Board::create(2);
  ASSERT_TRUE(bool(board)) << llvm::toString(board.takeError());
  std::string path = (*board)->path().str();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(access(path.c_str(), F_OK), 0) << rank;
    pid_t child = fork();
    if (child == 0) {
      setenv(progress::kBoardEnv, path.c_str(), 1);
      _exit(progress::attachBoard(rank) ? 1 : 0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_EQ((*board)->rank(rank).pid.load(), child);
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

} // namespace
