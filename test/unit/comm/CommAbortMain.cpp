//===- CommAbortMain.cpp - One rank fails, nobody hangs -------------------===//
//
// Run with 2 ranks. In the abort modes rank 1 calls abort(3) while rank 0 is
// stuck, and the whole job must end with exit code 3; in the watchdog modes
// rank 1 never joins a collective and rank 0's collective watchdog (a 2 s
// timeout) must end the job with exit code 1, naming rank 1
// (test/unit/comm/ExpectAbort.cmake checks code, time and output). Modes:
//
//   idle     Rank 0 waits in an allreduce that rank 1 never starts; rank 1's
//            communication thread is idle, so it is the one calling
//            MPI_Abort.
//   busy     Rank 1 waits in an allreduce that rank 0 (busy computing) has
//            not joined, so rank 1's communication thread is inside MPI and
//            abort() has to call MPI_Abort from the main thread.
//   stall    Rank 1 computes for 60 s instead of joining rank 0's allreduce:
//            its communication thread answers, "still computing".
//   stopped  Rank 1 stops itself (SIGSTOP) instead of joining: it answers
//            nothing, and must still be gone when the job ends.
//   final    Both ranks run an allreduce, then rank 1 stops itself: rank 0's
//            watched barrier before MPI_Finalize names it.
//   pause    Rank 0 waits in an allreduce; rank 1 stops rank 0 for 2.5 s,
//            then computes 0.9 s more before joining. Rank 0 waited 3.7 s
//            but ran only 1.2 s of them: time stopped does not count, the job
//            ends normally (exit 0).
//
// Reaching the end of main means abort did not end the job: exit 0, which the
// test treats as a failure.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Communicator.h"

#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <signal.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace shardc::rt;

int main(int argc, char **argv) {
  llvm::StringRef mode = argc > 1 ? argv[1] : "";
  bool watchdog = mode == "stall" || mode == "stopped" || mode == "final" ||
                  mode == "pause";
  if (mode != "idle" && mode != "busy" && !watchdog) {
    llvm::errs() << "usage: shard-comm-abort-test "
                    "idle|busy|stall|stopped|final|pause\n";
    return 1;
  }
  MpiCommunicatorOptions options;
  options.collectiveTimeoutSeconds = watchdog ? 2 : 0;
  llvm::Expected<std::unique_ptr<Communicator>> created =
      createMpiCommunicator(options);
  if (!created) {
    llvm::errs() << llvm::toString(created.takeError()) << "\n";
    return 1;
  }
  std::unique_ptr<Communicator> comm = std::move(*created);
  if (comm->worldSize() < 2) {
    llvm::errs() << "needs at least 2 ranks\n";
    return 1;
  }
  if (llvm::Error err = comm->barrier()) {
    llvm::errs() << llvm::toString(std::move(err)) << "\n";
    return 1;
  }

  std::vector<float> data(1024, 1.0f);
  auto sleepMs = [](int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  if (mode == "pause") {
    int64_t pid = getpid();
    std::vector<int64_t> pids(comm->worldSize());
    if (llvm::Error err = comm->allGather(&pid, pids.data(), 1, DType::I64)) {
      llvm::errs() << llvm::toString(std::move(err)) << "\n";
      return 1;
    }
    if (comm->rank() == 1) {
      sleepMs(300);
      kill(static_cast<pid_t>(pids[0]), SIGSTOP);
      sleepMs(2500);
      kill(static_cast<pid_t>(pids[0]), SIGCONT);
      sleepMs(900); // Computing, while rank 0 waits again.
    }
    if (llvm::Error err = comm->allReduce(data.data(), data.data(), data.size(),
                                          DType::F32, ReduceOp::Sum)) {
      llvm::errs() << llvm::toString(std::move(err)) << "\n";
      return 1;
    }
    std::fprintf(stderr, "rank %d: completed after the pause\n", comm->rank());
    return 0;
  }
  if (watchdog) {
    int rank = comm->rank();
    if (mode == "final")
      if (llvm::Error err =
              comm->allReduce(data.data(), data.data(), data.size(), DType::F32,
                              ReduceOp::Sum)) {
        llvm::errs() << llvm::toString(std::move(err)) << "\n";
        return 1;
      }
    if (rank == 1) {
      if (mode == "stall")
        sleepMs(60000);
      else
        raise(SIGSTOP);
    } else if (mode != "final") {
      if (llvm::Error err = comm->allReduce(
              data.data(), data.data(), data.size(), DType::F32, ReduceOp::Sum))
        llvm::errs() << llvm::toString(std::move(err)) << "\n";
    }
    // "final": destroying the communicator runs the watched barrier.
    comm.reset();
    std::fprintf(stderr, "rank %d: job was not aborted\n", rank);
    return 0;
  }
  if (comm->rank() == 1) {
    llvm::Expected<CollectiveHandle> pending =
        mode == "busy"
            ? comm->allReduceStart(data.data(), data.data(), data.size(),
                                   DType::F32, ReduceOp::Sum)
            : llvm::Expected<CollectiveHandle>(0);
    if (!pending) {
      llvm::errs() << llvm::toString(pending.takeError()) << "\n";
      return 1;
    }
    // Let rank 0 (idle) or our own thread (busy) get stuck; the busy thread
    // must have taken the queued all-reduce, which a loaded machine may delay.
    sleepMs(mode == "busy" ? 2000 : 300);
    std::fprintf(stderr, "rank 1: failing, abort(3) in %s mode\n",
                 mode.str().c_str());
    comm->abort(3);
    std::fprintf(stderr, "rank 1: abort returned\n");
    return 0;
  }

  if (comm->rank() == 0) {
    if (mode == "busy")
      sleepMs(20000); // "Computing"; killed by the abort long before.
    // idle: waits here forever unless the abort ends the job. busy: matches
    // rank 1's allreduce, so the job would finish normally without abort.
    if (llvm::Error err = comm->allReduce(data.data(), data.data(), data.size(),
                                          DType::F32, ReduceOp::Sum))
      llvm::errs() << llvm::toString(std::move(err)) << "\n";
  }
  std::fprintf(stderr, "rank %d: job was not aborted\n", comm->rank());
  return 0;
}
