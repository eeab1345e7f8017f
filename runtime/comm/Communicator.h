//===- Communicator.h - Collectives across ranks ----------------*- C++ -*-===//
//
// The runtime's only view of other ranks. Collectives are split into start
// and wait so that a plan can overlap communication with computation: start
// hands the operation to the communicator and returns at once; wait blocks
// until it has completed. Implementations: MPI on CPU (a communication thread
// drives MPI, which only progresses when called), NCCL on GPU, and a
// single-rank communicator for world size 1.
//
// All ranks must issue the same collectives in the same order (the compiler
// guarantees it for plans and stamps a fingerprint that ranks compare before
// the first step).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_COMM_COMMUNICATOR_H
#define SHARDC_RUNTIME_COMM_COMMUNICATOR_H

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
  /// rank (the nccl-tests convention): count * worldSize * element size for
  /// allgather and reduce-scatter, count * element size for allreduce.
  int64_t bytes = 0;
  /// The start call queued it.
  double queuedUs = 0;
  /// Execution began (for MPI: the communication thread entered MPI).
  double startUs = 0;
  /// Execution finished; the output was valid from here on.
  double endUs = 0;
};

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  /// "mpi", "nccl", "self".
  virtual llvm::StringRef name() const = 0;

  /// Start calls check their arguments and return an error (no collective
  /// is started) for unsupported element types, negative counts, null or
  /// overlapping buffers. Reductions take float32, float64, int32 and int64;
  /// allgather takes every element type. The buffers must stay valid and
  /// untouched until wait() returns; destroying a communicator first
  /// completes the collectives it was given.
  ///
  /// out (count * worldSize elements) = concatenation over ranks of each
  /// rank's `in` (count elements), in rank order. `in` may be this rank's
  /// block of `out` (in place).
  virtual llvm::Expected<CollectiveHandle>
  allGatherStart(const void *in, void *out, int64_t count, DType dtype) = 0;
  /// out (count elements) = this rank's chunk of the elementwise reduction
  /// over ranks of `in` (count * worldSize elements): rank r receives chunk r.
  virtual llvm::Expected<CollectiveHandle>
  reduceScatterStart(const void *in, void *out, int64_t count, DType dtype,
                     ReduceOp op) = 0;
  /// out (count elements) = elementwise reduction over ranks of `in`;
  /// `in == out` is allowed.
  virtual llvm::Expected<CollectiveHandle>
  allReduceStart(const void *in, void *out, int64_t count, DType dtype,
                 ReduceOp op) = 0;
  /// Blocks until the collective has completed and its output is valid.
  virtual llvm::Error wait(CollectiveHandle handle) = 0;

  /// Blocking conveniences (start + wait).
  llvm::Error allGather(const void *in, void *out, int64_t count, DType dtype);
  llvm::Error allReduce(const void *in, void *out, int64_t count, DType dtype,
                        ReduceOp op);

  /// Blocks until every rank has arrived.
  virtual llvm::Error barrier() = 0;

  /// Aborts every rank (after a fatal error on this one), so that no rank is
  /// left waiting in a collective. Does not return: the job ends with `code`.
  virtual void abort(int code) = 0;

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
};

/// Initializes MPI (on the communicator's own thread) and returns a
/// communicator over MPI_COMM_WORLD. MPI can be initialized once per process,
/// so this succeeds at most once.
llvm::Expected<std::unique_ptr<Communicator>> createMpiCommunicator();
llvm::Expected<std::unique_ptr<Communicator>>
createMpiCommunicator(const MpiCommunicatorOptions &options);

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_COMM_COMMUNICATOR_H
