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

#include "plan/AsyncOps.h"
#include "runtime/Stream.h"
#include "runtime/Tensor.h"
#include "runtime/comm/Communicator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>

namespace shardc::rt {

// The kinds and op types are the plan's (plan/AsyncOps.h).
using plan::CollectiveOpKind;
using plan::collectiveOpTypes;
using plan::getCollectiveOpKind;

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
