//===- CollectiveOps.cpp - The plan's collective ops ----------------------===//
#include "runtime/comm/CollectiveOps.h"

#include "llvm/ADT/Twine.h"

namespace shardc::rt {

static llvm::Error opError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

llvm::Error checkCollectiveOp(CollectiveOpKind kind,
                              llvm::ArrayRef<TensorView> inputs,
                              llvm::ArrayRef<TensorView> outputs,
                              int worldSize) {
  if (inputs.size() != 1 || !inputs[0].present())
    return opError("expects one input buffer, got " +
                   llvm::Twine(inputs.size()));
  if (kind == CollectiveOpKind::Wait)
    return llvm::Error::success();
  if (outputs.size() != 1 || !outputs[0].present())
    return opError("expects one output buffer, got " +
                   llvm::Twine(outputs.size()));
  const TensorView &in = inputs[0], &out = outputs[0];
  if (in.dtype != out.dtype)
    return opError("input is " + dtypeName(in.dtype) + " but output is " +
                   dtypeName(out.dtype));
  int64_t n = in.numel(), m = out.numel();
  bool fits = kind == CollectiveOpKind::AllGatherStart ? m == n * worldSize
              : kind == CollectiveOpKind::ReduceScatterStart
                  ? n == m * worldSize
                  : n == m;
  if (!fits)
    return opError("input of " + llvm::Twine(n) + " and output of " +
                   llvm::Twine(m) + " elements do not fit on " +
                   llvm::Twine(worldSize) + " rank(s)");
  return llvm::Error::success();
}

llvm::Expected<CollectiveHandle> startCollectiveOp(Communicator &comm,
                                                   CollectiveOpKind kind,
                                                   const TensorView &in,
                                                   const TensorView &out,
                                                   Event &inputReady) {
  switch (kind) {
  case CollectiveOpKind::AllGatherStart:
    return comm.allGatherStart(in.data, out.data, in.numel(), in.dtype,
                               &inputReady);
  case CollectiveOpKind::ReduceScatterStart:
    return comm.reduceScatterStart(in.data, out.data, out.numel(), in.dtype,
                                   ReduceOp::Sum, &inputReady);
  case CollectiveOpKind::AllReduceStart:
    return comm.allReduceStart(in.data, out.data, in.numel(), in.dtype,
                               ReduceOp::Sum, &inputReady);
  case CollectiveOpKind::Wait:
  case CollectiveOpKind::OffloadRead:
  case CollectiveOpKind::OffloadWrite:
    break;
  }
  return opError("not a collective over ranks");
}

} // namespace shardc::rt
