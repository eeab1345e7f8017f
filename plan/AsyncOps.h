//===- AsyncOps.h - The plan's asynchronous ops -----------------*- C++ -*-===//
//
// The plan ops that start work off the compute stream and the one op that
// finishes it: collectives over the ranks (AllGatherStart,
// ReduceScatterStart, AllReduceStart), transfers between memory and the
// offload tier (OffloadReadStart, OffloadWriteStart), and CollectiveWait.
// Their contracts are in docs/ops.md. The memory planner, the plan's
// validation and digest, the cost model and the runtime name them through
// this one table. Header-only: the runtime's communicators use it without
// linking the plan library.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PLAN_ASYNCOPS_H
#define SHARDC_PLAN_ASYNCOPS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace shardc::plan {

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

/// The op types of the asynchronous plan ops, in CollectiveOpKind order.
inline llvm::ArrayRef<llvm::StringRef> collectiveOpTypes() {
  static const llvm::StringRef types[] = {
      "AllGatherStart", "ReduceScatterStart", "AllReduceStart",
      "CollectiveWait", "OffloadReadStart",   "OffloadWriteStart"};
  return types;
}

/// The asynchronous op of plan op type `opType`; std::nullopt for a kernel.
inline std::optional<CollectiveOpKind>
getCollectiveOpKind(llvm::StringRef opType) {
  llvm::ArrayRef<llvm::StringRef> types = collectiveOpTypes();
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i] == opType)
      return static_cast<CollectiveOpKind>(i);
  return std::nullopt;
}

/// A collective over ranks (not a tier transfer, not the wait).
inline bool isRankCollective(CollectiveOpKind kind) {
  return kind == CollectiveOpKind::AllGatherStart ||
         kind == CollectiveOpKind::ReduceScatterStart ||
         kind == CollectiveOpKind::AllReduceStart;
}

/// A start: an op whose output a CollectiveWait finishes.
inline bool isStart(CollectiveOpKind kind) {
  return kind != CollectiveOpKind::Wait;
}

} // namespace shardc::plan

#endif // SHARDC_PLAN_ASYNCOPS_H
