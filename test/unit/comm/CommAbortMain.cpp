//===- CommAbortMain.cpp - One rank fails, nobody hangs -------------------===//
//
// Run with 2 ranks: rank 1 calls abort(3) while rank 0 is stuck, and the
// whole job must end with exit code 3 (test/unit/comm/ExpectAbort.cmake
// checks it). Modes:
//
//   idle  Rank 0 waits in an allreduce that rank 1 never starts; rank 1's
//         communication thread is idle, so it is the one calling MPI_Abort.
//   busy  Rank 1 waits in an allreduce that rank 0 (busy computing) has not
//         joined, so rank 1's communication thread is blocked inside MPI and
//         abort() has to call MPI_Abort from the main thread.
//
// Reaching the end of main means abort did not end the job: exit 0, which the
// test treats as a failure.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Communicator.h"

#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

using namespace shardc::rt;

int main(int argc, char **argv) {
  llvm::StringRef mode = argc > 1 ? argv[1] : "";
  if (mode != "idle" && mode != "busy") {
    llvm::errs() << "usage: shard-comm-abort-test idle|busy\n";
    return 1;
  }
  llvm::Expected<std::unique_ptr<Communicator>> created =
      createMpiCommunicator();
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
    sleepMs(300); // Let rank 0 (idle) or our own thread (busy) get stuck.
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
