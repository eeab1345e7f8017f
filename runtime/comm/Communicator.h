//===- Communicator.h - Collectives across ranks ----------------*- C++ -*-===//
//
// The runtime's only view of other ranks. Collectives are split into start
// and wait so that a plan can overlap communication with computation: start
// hands the operation to the communicator and returns at once; wait orders
// what comes after it behind the collective's completion. Implementations:
// MPI on CPU (a communication thread drives MPI, which only progresses when
// called), a single-rank communicator for world size 1, and on GPUs an NCCL
// communicator in the CUDA plugin (runtime/cuda/NcclCommunicator.cpp) that
// hands host-memory collectives to one of the other two.
//
// Ordering against the compute stream (runtime/Stream.h). The executor's
// kernels write a collective's input and read its output on a compute
// stream, which on a GPU runs behind the host. The contract is the one NCCL
// needs:
//
//   start(in, out, ..., inputReady)
//       The caller has recorded `inputReady` on the compute stream after all
//       work that writes `in` or still uses `out`. The collective touches the
//       buffers only once that point is reached: NCCL makes its own stream
//       wait for the event (cudaStreamWaitEvent); the MPI communication
//       thread synchronizes the event before it calls MPI; the self
//       communicator synchronizes it before its copy. The event must stay
//       alive, and not be recorded again, until wait() for the handle has
//       returned.
//   wait(handle, computeStream)
//       Work queued on `computeStream` after this call runs after the
//       collective has completed. NCCL records an event on its stream and
//       makes the compute stream wait for it, without blocking the host; the
//       MPI and self communicators block the calling thread until the
//       collective has completed, which orders every later launch.
//
// On the CPU backend streams run work as it is queued, so recording an event
// costs nothing, synchronizing it returns at once, and wait is a host wait.
// Host callers (the blocking conveniences, the trainer, tests) pass no event
// (the input is memory the host has finished writing) and no stream (wait
// blocks the calling thread until the output is valid). The executor
// (runtime/Executor.h) keeps one event per collective start of its plan,
// records it on its compute stream right before the start, and waits with
// its compute stream.
//
// All ranks must issue the same collectives in the same order (the compiler
// guarantees it for plans and stamps a fingerprint that ranks compare before
// the first step).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_COMM_COMMUNICATOR_H
#define SHARDC_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/Stream.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardc::rt {

/// An in-flight collective. Obtained from a start call, finished by wait().
using CollectiveHandle = int64_t;

enum class ReduceOp { Sum, Max };

/// Microseconds on a process-wide steady clock. The origin is fixed by the
/// first call in the process (the communicators call it when created), so
/// collective records and the executor's trace events share one time axis.
double nowMicros();

/// When one collective was queued, started executing and finished, in
/// nowMicros() time, for the executor's Chrome trace.
struct CollectiveRecord {
  /// "allgather", "reduce_scatter", "allreduce" or "barrier".
  std::string kind;
  /// The handle start returned (0 for barrier()).
  CollectiveHandle handle = 0;
  /// Size of the larger of the collective's input and output buffers on this
  /// rank (the nccl-tests convention): count * ranks * element size for
  /// allgather and reduce-scatter, count * element size for allreduce.
  int64_t bytes = 0;
  /// The start call queued it.
  double queuedUs = 0;
  /// Execution began (for MPI: the communication thread entered MPI).
  double startUs = 0;
  /// Execution finished; the output was valid from here on.
  double endUs = 0;
  /// The group it ran in: "" for the whole communicator, else the label
  /// given to split() ("axis 1").
  std::string group;
  /// Ranks it ran across (the group's size).
  int ranks = 1;
};

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  /// "mpi", "self" or "nccl".
  virtual llvm::StringRef name() const = 0;

  /// Start calls check their arguments and return an error (no collective
  /// is started) for unsupported element types, negative counts, null or
  /// overlapping buffers. Reductions take float32, float64, int32 and int64;
  /// allgather takes every element type. The buffers must stay valid and
  /// untouched until the collective has completed (see wait()); destroying a
  /// communicator first completes the collectives it was given.
  /// `inputReady`: the point on the compute stream after which the
  /// collective may read `in` and write `out` (see the file comment); null
  /// when the host has finished writing them.
  ///
  /// out (count * worldSize elements) = concatenation over ranks of each
  /// rank's `in` (count elements), in rank order. `in` may be this rank's
  /// block of `out` (in place).
  virtual llvm::Expected<CollectiveHandle>
  allGatherStart(const void *in, void *out, int64_t count, DType dtype,
                 Event *inputReady = nullptr) = 0;
  /// out (count elements) = this rank's chunk of the elementwise reduction
  /// over ranks of `in` (count * worldSize elements): rank r receives chunk r.
  virtual llvm::Expected<CollectiveHandle>
  reduceScatterStart(const void *in, void *out, int64_t count, DType dtype,
                     ReduceOp op, Event *inputReady = nullptr) = 0;
  /// out (count elements) = elementwise reduction over ranks of `in`;
  /// `in == out` is allowed.
  virtual llvm::Expected<CollectiveHandle>
  allReduceStart(const void *in, void *out, int64_t count, DType dtype,
                 ReduceOp op, Event *inputReady = nullptr) = 0;
  /// Retires `handle`. Work queued on `computeStream` afterwards runs after
  /// the collective has completed; with no stream, returns once the output
  /// is valid. Returns the collective's error, if it failed.
  virtual llvm::Error wait(CollectiveHandle handle,
                           Stream *computeStream = nullptr) = 0;

  /// Blocking conveniences (start + wait, on host memory).
  llvm::Error allGather(const void *in, void *out, int64_t count, DType dtype);
  llvm::Error allReduce(const void *in, void *out, int64_t count, DType dtype,
                        ReduceOp op);

  /// Blocks until every rank has arrived.
  virtual llvm::Error barrier() = 0;

  /// Splits the ranks into groups (MPI_Comm_split, ncclCommSplit). Every
  /// rank calls it, at the same point of its sequence of collectives; ranks
  /// that pass the same `color` (>= 0) form one group, ordered by `key`
  /// (then by rank). The result runs collectives among its group only, and
  /// shares this communicator's order: the collectives of every group made
  /// from it and its own run in the order they were started and count in
  /// one sequence (so every rank must start the same sequence of
  /// collectives, each on its own group, as the plan's ops do). Errors,
  /// abort() and the records of its collectives are this communicator's
  /// (takeRecords() here returns them, `group` set to `label`, e.g.
  /// "axis 1"). It must be destroyed before this communicator.
  virtual llvm::Expected<std::unique_ptr<Communicator>>
  split(int color, int key, llvm::StringRef label);

  /// Aborts every rank (after a fatal error on this one), so that no rank is
  /// left waiting in a collective. Never returns: the job ends with `code`,
  /// also when collectives are in flight.
  [[noreturn]] virtual void abort(int code) = 0;

  /// The first error a collective reported asynchronously, if any. Sticky:
  /// once a collective has failed, every later call reports it again.
  virtual llvm::Error asyncError() = 0;

  /// Returns, and forgets, the records of the collectives that have finished
  /// since the last call, in completion order. A communicator keeps at most
  /// kMaxRecords records between two calls and drops later ones.
  virtual std::vector<CollectiveRecord> takeRecords() { return {}; }
  static constexpr size_t kMaxRecords = size_t(1) << 18;
};

/// World size 1: collectives are copies.
std::unique_ptr<Communicator> createSelfCommunicator();

/// True when this process was started by an MPI launcher (mpirun, srun).
bool launchedByMpi();

/// Options of the MPI communicator.
struct MpiCommunicatorOptions {
  /// Upper bound on the bytes one MPI call moves per rank. Collectives larger
  /// than this (or than INT_MAX elements, MPI's count limit) are split into
  /// several MPI calls. Tests lower it to exercise the split.
  int64_t maxChunkBytes = int64_t(1) << 30;
  /// The collective watchdog: when one MPI call of a collective has not
  /// completed after this many seconds on this rank, the rank asks the others
  /// where they are, and the job ends with one error naming the ranks that
  /// did not arrive and the collective's step and op (MpiCommunicator.cpp
  /// has the protocol). Time the process spends stopped does not count.
  /// 0 disables the watchdog; every rank should use the same value.
  double collectiveTimeoutSeconds = 0;
};

/// Initializes MPI (on the communicator's own thread) and returns a
/// communicator over MPI_COMM_WORLD. MPI can be initialized once per process,
/// so this succeeds at most once.
llvm::Expected<std::unique_ptr<Communicator>> createMpiCommunicator();
llvm::Expected<std::unique_ptr<Communicator>>
createMpiCommunicator(const MpiCommunicatorOptions &options);

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_COMM_COMMUNICATOR_H
