//===- CollectiveOps.h - The plan's collective ops --------------*- C++ -*-===//
//
// How the plan ops AllGatherStart, ReduceScatterStart, AllReduceStart and
// CollectiveWait run on a Communicator (their contract is in docs/ops.md).
// The executor resolves each op's kind and checks its operands once, when it
// loads a plan; running a step is then one start or wait call.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_COMM_COLLECTIVEOPS_H
#define SHARDC_RUNTIME_COMM_COLLECTIVEOPS_H

#include "runtime/Stream.h"
#include "runtime/Tensor.h"
#include "runtime/comm/Communicator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>

namespace shardc::rt {

enum class CollectiveOpKind : uint8_t {
  AllGatherStart,
  ReduceScatterStart,
  AllReduceStart,
  Wait,
  /// Transfers between memory and the offload tier (runtime/OffloadTier.h),
  /// run by the executor itself and finished by the same wait.
  OffloadRead,
  OffloadWrite,
};

/// The op types of the collective plan ops, in CollectiveOpKind order.
llvm::ArrayRef<llvm::StringRef> collectiveOpTypes();

/// The collective op of plan op type `opType`; std::nullopt for other types.
std::optional<CollectiveOpKind> getCollectiveOpKind(llvm::StringRef opType);

/// Checks the operands of a collective op on `worldSize` ranks. A start has
/// one input and one output of one element type, with element counts that
/// fit the collective: allgather out = in * worldSize, reduce-scatter
/// in = out * worldSize, allreduce in = out. A wait has one input (the buffer
/// its start writes).
llvm::Error checkCollectiveOp(CollectiveOpKind kind,
                              llvm::ArrayRef<TensorView> inputs,
                              llvm::ArrayRef<TensorView> outputs,
                              int worldSize);

/// Starts the collective of a start op (checked by checkCollectiveOp) from
/// `in` into `out`, reductions summing, once `inputReady` is reached.
llvm::Expected<CollectiveHandle> startCollectiveOp(Communicator &comm,
                                                   CollectiveOpKind kind,
                                                   const TensorView &in,
                                                   const TensorView &out,
                                                   Event &inputReady);

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_COMM_COLLECTIVEOPS_H
