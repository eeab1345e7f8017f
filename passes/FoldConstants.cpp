//===- FoldConstants.cpp - Evaluate ops with constant operands ------------===//
#include "passes/Lowering/OpDesc.h"
#include "passes/Passes.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "passes/Passes.h.inc"

namespace {
struct FoldConstantsPass : impl::FoldConstantsBase<FoldConstantsPass> {
  void runOnOperation() override {
    // Ops are visited in order, so a chain of constant ops folds in one walk.
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      SmallVector<Value> replacements;
      (void)foldWithKernels(op, replacements);
    }
  }
};
} // namespace
} // namespace shardc
