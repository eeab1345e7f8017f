//===- FoldConstants.cpp - Evaluate ops with constant operands ------------===//
//
// shardc-fold-constants, and the folding it and the importer share: an op
// whose operands are all constants is evaluated by its own folder or by the
// runtime's CPU kernel for it (through the op's plan description, OpDesc).
//
//===----------------------------------------------------------------------===//
#include "passes/FoldConstants.h"
#include "passes/LowerToPlan/OpDesc.h"
#include "passes/Passes.h"
#include "runtime/Backend.h"
#include "runtime/cpu/Kernels.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_FOLDCONSTANTS
#include "passes/Passes.h.inc"

std::optional<int64_t> tensorBytes(RankedTensorType type) {
  rt::DType dt = toRuntimeType(type.getElementType());
  if (dt == rt::DType::Undefined)
    return std::nullopt;
  int64_t bytes = rt::dtypeSize(dt);
  for (int64_t d : type.getShape())
    if (d < 0 || llvm::MulOverflow(bytes, d, bytes))
      return std::nullopt;
  return bytes;
}

/// Whether a tensor of `type` fits the fold budget. An empty tensor is
/// measured by its other dimensions: the kernels loop over them (2^40 x 0
/// has no data and 2^40 iterations).
static bool fitsBudget(Type type, int64_t limitBytes) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return false;
  SmallVector<int64_t> loops(t.getShape());
  for (int64_t &d : loops)
    d = d == 0 ? 1 : d;
  std::optional<int64_t> bytes = tensorBytes(t.clone(loops));
  return bytes && *bytes <= limitBytes;
}

/// The work of evaluating `op` beyond reading and writing its tensors: a
/// matrix product's or convolution's flops, a pooling op's window elements
/// times its largest tensor's elements (saturating at 2^64 - 1); 0 for the
/// others, whose work their bytes bound.
static uint64_t foldWork(Operation *op) {
  if (auto cost = dyn_cast<ComputeCost>(op))
    return cost.getFlops();
  auto kernel = op->getAttrOfType<DenseI64ArrayAttr>("kernel_shape");
  if (!kernel)
    return 0;
  uint64_t work = 1;
  for (int64_t k : kernel.asArrayRef())
    work = llvm::SaturatingMultiply(work, uint64_t(std::max<int64_t>(k, 1)));
  uint64_t largest = 0;
  auto measure = [&](Type t) {
    largest = std::max<uint64_t>(
        largest, uint64_t(cast<RankedTensorType>(t).getNumElements()));
  };
  llvm::for_each(op->getOperandTypes(), measure);
  llvm::for_each(op->getResultTypes(), measure);
  return llvm::SaturatingMultiply(work, largest);
}

LogicalResult foldWithKernels(Operation *op,
                              SmallVectorImpl<Value> &replacements,
                              int64_t limitBytes) {
  // Dropout's value depends on the seed and step of the run, not only on its
  // operands: it never folds.
  if (!isa<ShardcDialect>(op->getDialect()) || isa<ConstantOp, DropoutOp>(op) ||
      op->getNumResults() == 0)
    return failure();
  // Operand values where known; null for non-constant operands.
  SmallVector<Attribute> operandAttrs;
  SmallVector<DenseElementsAttr> operands;
  bool allConstant = true;
  for (Value v : op->getOperands()) {
    DenseElementsAttr attr;
    if (matchPattern(v, m_Constant(&attr)))
      operands.push_back(attr);
    else
      allConstant = false;
    operandAttrs.push_back(attr);
  }
  // Ops with a folder of their own (Shape, Reshape) fold through it, even
  // with non-constant operands (a Shape needs only its operand's type).
  SmallVector<OpFoldResult> folded;
  if (succeeded(op->fold(operandAttrs, folded)) && !folded.empty()) {
    OpBuilder b(op);
    SmallVector<Value> repl;
    for (auto [res, f] : llvm::zip(op->getResults(), folded)) {
      if (auto v = dyn_cast<Value>(f)) {
        repl.push_back(v);
        continue;
      }
      auto attr = dyn_cast<DenseElementsAttr>(cast<Attribute>(f));
      // A constant is written out whole (plan emission, later folds), even
      // when the folder made a splat of it.
      if (!attr || !fitsBudget(res.getType(), limitBytes))
        return failure();
      repl.push_back(b.create<ConstantOp>(op->getLoc(), res.getType(), attr));
    }
    op->replaceAllUsesWith(repl);
    op->erase();
    replacements.assign(repl.begin(), repl.end());
    return success();
  }
  if (!allConstant)
    return failure();
  // Empty results need no kernel, however large their operands.
  auto empty = [](Type t) {
    return cast<RankedTensorType>(t).getNumElements() == 0;
  };
  if (llvm::all_of(op->getResultTypes(), empty)) {
    OpBuilder b(op);
    SmallVector<Value> repl;
    for (Value r : op->getResults()) {
      auto t = cast<RankedTensorType>(r.getType());
      repl.push_back(b.create<ConstantOp>(
          op->getLoc(), t, DenseElementsAttr::get(t, ArrayRef<Attribute>())));
    }
    op->replaceAllUsesWith(repl);
    op->erase();
    replacements.assign(repl.begin(), repl.end());
    return success();
  }

  // Evaluating materializes every operand and result (a splat operand
  // too): each must fit the budget, or the op runs at execution time.
  auto fits = [&](Type t) { return fitsBudget(t, limitBytes); };
  if (!llvm::all_of(op->getOperandTypes(), fits) ||
      !llvm::all_of(op->getResultTypes(), fits))
    return failure();
  // Small tensors can still take long: a 2048 x 2048 image convolved with a
  // 1024 x 1024 kernel is 2 * 10^12 flops (and a 4 TB im2col).
  if (foldWork(op) > 16 * uint64_t(limitBytes))
    return failure();

  FailureOr<OpDesc> desc = describeOp(op);
  if (failed(desc))
    return failure();
  std::vector<std::vector<uint8_t>> inBytes, outBytes;
  std::vector<rt::TensorView> ins, outs;
  inBytes.reserve(operands.size());
  for (DenseElementsAttr a : operands) {
    inBytes.push_back(constantBytes(a));
    auto t = cast<RankedTensorType>(a.getType());
    ins.emplace_back(toRuntimeType(t.getElementType()), t.getShape(),
                     inBytes.back().data());
  }
  outBytes.reserve(op->getNumResults());
  for (Value r : op->getResults()) {
    auto t = cast<RankedTensorType>(r.getType());
    auto dt = toRuntimeType(t.getElementType());
    outBytes.emplace_back(t.getNumElements() * rt::dtypeSize(dt));
    outs.emplace_back(dt, t.getShape(), outBytes.back().data());
  }
  // Views need non-null data even for empty tensors.
  static uint8_t dummy[8];
  for (auto &v : ins)
    if (!v.data)
      v.data = dummy;
  for (auto &v : outs)
    if (!v.data)
      v.data = dummy;
  std::string name = desc->type;
  rt::KernelContext ctx{desc->type, name, desc->attrs, ins, outs};
  if (llvm::Error err = rt::cpu::runKernel(ctx)) {
    // Not foldable here; the runtime will report the same error if it runs.
    llvm::consumeError(std::move(err));
    return failure();
  }
  OpBuilder b(op);
  SmallVector<Value> repl;
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    auto t = cast<RankedTensorType>(r.getType());
    repl.push_back(b.create<ConstantOp>(op->getLoc(), t,
                                        constantFromBytes(t, outBytes[i])));
  }
  op->replaceAllUsesWith(repl);
  op->erase();
  replacements.assign(repl.begin(), repl.end());
  return success();
}

namespace {
struct FoldConstantsPass : impl::FoldConstantsBase<FoldConstantsPass> {
  using FoldConstantsBase::FoldConstantsBase;
  SHARDC_CHECK_OPTIONS_FoldConstants;

  void runOnOperation() override {
    if (std::optional<std::string> err = checkOptions()) {
      getOperation().emitError("fold-constants: ") << *err;
      return signalPassFailure();
    }
    // Ops are visited in order, so a chain of constant ops folds in one walk.
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      SmallVector<Value> replacements;
      (void)foldWithKernels(op, replacements, foldLimit);
    }
  }
};
} // namespace
} // namespace shardc
