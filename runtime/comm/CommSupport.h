//===- CommSupport.h - Shared pieces of the communicators -------*- C++ -*-===//
//
// Internal to runtime/comm: argument validation shared by every communicator,
// and the error macro family that turns MPI (and NCCL) result codes
// into llvm::Error with the failing call and its file:line.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_COMM_COMMSUPPORT_H
#define SHARDC_RUNTIME_COMM_COMMSUPPORT_H

#include "runtime/comm/Communicator.h"

#include "llvm/Support/Error.h"

#include <cstdint>

namespace shardc::rt::detail {

/// Split is Communicator::split's MPI_Comm_split (collective over the
/// ranks, but moving no data).
enum class CollectiveKind {
  AllGather,
  ReduceScatter,
  AllReduce,
  Barrier,
  Split
};

/// "allgather", "reduce_scatter", "allreduce", "barrier", "split".
const char *collectiveKindName(CollectiveKind kind);

/// Checks the arguments of a collective start call on a communicator of
/// `worldSize` ranks, for the element types that `kind` supports: a
/// non-negative count, non-null buffers when count > 0, sizes that fit in
/// int64, and buffers that do not overlap except where the interface allows
/// (allreduce with in == out; allgather with `in` equal to this rank's block
/// of `out`). On success sets `bytes` to the record's byte count.
llvm::Error checkCollectiveArgs(CollectiveKind kind, const void *in,
                                const void *out, int64_t count, DType dtype,
                                int rank, int worldSize, int64_t &bytes);

/// The error for a failed library call: "<lib> error in <call> at
/// <file>:<line>: <message>".
llvm::Error makeCallError(llvm::StringRef lib, llvm::StringRef call,
                          const char *file, int line, llvm::StringRef message);

/// Success for MPI_SUCCESS, otherwise the error of makeCallError with the
/// text of MPI_Error_string. Must run on the thread that owns MPI. Defined in
/// MpiCommunicator.cpp.
llvm::Error mpiCallError(int code, const char *call, const char *file,
                         int line);

} // namespace shardc::rt::detail

/// The llvm::Error of an MPI call: success, or the failure with the call's
/// text, file:line and MPI's message. The communicator must have the
/// MPI_ERRORS_RETURN handler for errors to come back as codes.
#define SHARD_MPI_ERROR(call)                                                  \
  ::shardc::rt::detail::mpiCallError((call), #call, __FILE__, __LINE__)

/// Runs an MPI call and returns its error from the enclosing function (which
/// returns llvm::Error or llvm::Expected<T>) if it failed. (Stringizes the
/// call itself rather than going through SHARD_MPI_ERROR, which would expand
/// MPI's macros such as MPI_IN_PLACE in the text.)
#define SHARD_MPI_CHECK(call)                                                  \
  do {                                                                         \
    if (::llvm::Error shardMpiErr = ::shardc::rt::detail::mpiCallError(        \
            (call), #call, __FILE__, __LINE__))                                \
      return ::llvm::Error(std::move(shardMpiErr));                            \
  } while (false)

#endif // SHARDC_RUNTIME_COMM_COMMSUPPORT_H
