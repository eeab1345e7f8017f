//===- BatchAxis.cpp - Which axis of a value runs over the samples --------===//
//
// A forward walk over @main's ops in order (the importer builds them in
// topological order), keeping for every value its batch axis: an axis >= 0,
// kNoBatchAxis, or kUnknown. Every rule keeps the invariant that the samples
// run along the axis in equal groups of consecutive indices, in sample order
// (for a graph input: one index per sample).
//
//===----------------------------------------------------------------------===//
#include "frontend/BatchAxis.h"

#include "ir/ShardcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace shardc {

namespace {

constexpr int64_t kUnknown = -2;

ArrayRef<int64_t> dims(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

class BatchAxisWalk {
public:
  BatchAxisWalk(func::FuncOp func) {
    for (BlockArgument arg : func.getArguments()) {
      bool input = func.getArgAttr(arg.getArgNumber(), kInputAttrName) &&
                   !dims(arg).empty();
      axes[arg] = input ? 0 : kNoBatchAxis;
      // The micro-batch, as the plan records it: the first input's axis 0.
      if (input && samples == 0)
        samples = dims(arg)[0];
    }
  }

  int64_t axisOf(Value v) const {
    auto it = axes.find(v);
    return it == axes.end() ? kUnknown : it->second;
  }

  void visit(Operation *op) {
    bool anyBatch = false, anyUnknown = false;
    for (Value v : op->getOperands()) {
      int64_t a = axisOf(v);
      anyBatch |= a >= 0;
      anyUnknown |= a == kUnknown;
    }
    if (!anyBatch && !anyUnknown) {
      for (Value r : op->getResults())
        axes[r] = kNoBatchAxis;
      return;
    }
    // Results the rules below do not set stay unknown.
    for (Value r : op->getResults())
      axes[r] = kUnknown;
    if (anyUnknown)
      return;
    llvm::TypeSwitch<Operation *>(op)
        .Case<AddOp, SubOp, MulOp, DivOp, PowOp, WhereOp, EqualOp, GreaterOp,
              LessOp, GreaterOrEqualOp, LessOrEqualOp, AndOp, OrOp, XorOp,
              MaxOp, MinOp>([&](Operation *op) {
          setAll(op, broadcast(op->getOperands(), op->getResult(0)));
        })
        .Case<SqrtOp, ExpOp, LogOp, ErfOp, TanhOp, SigmoidOp, SoftplusOp, NegOp,
              ReluOp, NotOp, SignOp, FloorOp, CeilOp, SinOp, CosOp, IdentityOp,
              CastOp, SoftmaxOp, LogSoftmaxOp, TriluOp, DropoutOp>(
            [&](Operation *op) { setAll(op, axisOf(op->getOperand(0))); })
        .Case<LayerNormalizationOp, BatchNormalizationOp>([&](Operation *op) {
          // The normalized result has the input's layout; the statistics
          // are left unknown.
          if (onlyFirstOperandBatched(op))
            axes[op->getResult(0)] = axisOf(op->getOperand(0));
        })
        .Case<ConvOp>([&](ConvOp op) {
          if (onlyFirstOperandBatched(op) && axisOf(op.getInput()) == 0)
            axes[op.getOutput()] = 0;
        })
        .Case<MaxPoolOp, AveragePoolOp, GlobalAveragePoolOp>(
            [&](Operation *op) {
              // Pooling keeps N and C.
              int64_t a = axisOf(op->getOperand(0));
              if (a == 0 || a == 1)
                setAll(op, a);
            })
        .Case<TransposeOp>([&](TransposeOp op) {
          int64_t a = axisOf(op.getInput());
          for (auto [i, p] : llvm::enumerate(op.getPerm()))
            if (p == a)
              axes[op.getOutput()] = i;
        })
        .Case<ReshapeOp>([&](ReshapeOp op) {
          axes[op.getOutput()] = reshape(
              dims(op.getInput()), axisOf(op.getInput()), dims(op.getOutput()));
        })
        .Case<MatMulOp>([&](MatMulOp op) { matmul(op); })
        .Case<GemmOp>([&](GemmOp op) { gemm(op); })
        .Case<GatherOp>([&](GatherOp op) { gather(op); })
        .Case<ConcatOp>([&](ConcatOp op) {
          int64_t k = broadcast(op.getInputs(), op.getOutput());
          if (k != static_cast<int64_t>(op.getAxis()))
            axes[op.getOutput()] = k;
        })
        .Case<SplitOp>([&](SplitOp op) {
          int64_t a = axisOf(op.getInput());
          if (a != static_cast<int64_t>(op.getAxis()))
            setAll(op, a);
        })
        .Case<SliceOp>([&](SliceOp op) {
          int64_t a = axisOf(op.getInput());
          if (dims(op.getInput())[a] == dims(op.getOutput())[a] &&
              op.getStarts()[a] == 0 && op.getSteps()[a] == 1)
            axes[op.getOutput()] = a;
        })
        .Case<ExpandOp>([&](ExpandOp op) {
          axes[op.getOutput()] = broadcast(op->getOperands(), op.getOutput());
        })
        .Case<ReduceMeanOp, ReduceSumOp, ReduceMaxOp, ReduceMinOp>(
            [&](auto op) {
              int64_t a = axisOf(op.getInput());
              int64_t removed = 0;
              for (int64_t r : op.getAxes()) {
                if (r == a)
                  return;
                removed += r < a;
              }
              axes[op.getOutput()] = op.getKeepdims() ? a : a - removed;
            });
  }

private:
  void setAll(Operation *op, int64_t a) {
    for (Value r : op->getResults())
      axes[r] = a;
  }

  bool onlyFirstOperandBatched(Operation *op) const {
    for (Value v : op->getOperands().drop_front())
      if (axisOf(v) != kNoBatchAxis)
        return false;
    return true;
  }

  /// The axis of `out` that the batch axes of `operands`, broadcast
  /// numpy-style (aligned at the last axis) to `out`, agree on; unknown
  /// when they disagree or the batch axis itself is broadcast.
  int64_t broadcast(ValueRange operands, Value out) const {
    int64_t k = kNoBatchAxis;
    int64_t rank = dims(out).size();
    for (Value v : operands) {
      int64_t a = axisOf(v);
      if (a == kNoBatchAxis)
        continue;
      int64_t at = a + rank - static_cast<int64_t>(dims(v).size());
      if (at < 0 || dims(v)[a] != dims(out)[at] || (k >= 0 && k != at))
        return kUnknown;
      k = at;
    }
    return k;
  }

  /// A reshape keeps the samples as groups along output axis k when the
  /// axes before k hold exactly the elements of the input's axes before the
  /// batch axis (so every output row of the axes before k is one input row)
  /// and out[k] splits into one equal group per sample.
  int64_t reshape(ArrayRef<int64_t> in, int64_t a,
                  ArrayRef<int64_t> out) const {
    int64_t outer = 1;
    for (int64_t i = 0; i < a; ++i)
      outer *= in[i];
    int64_t prefix = 1;
    for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
      if (prefix == outer && samples > 0 && out[k] > 0 && out[k] % samples == 0)
        return k;
      prefix *= out[k];
      if (prefix > outer)
        break;
    }
    return kUnknown;
  }

  /// Numpy matmul of ranks >= 2: the batch may run along a's rows or batch
  /// axes, or along b's columns or batch axes, not along the contraction.
  void matmul(MatMulOp op) {
    int64_t ra = dims(op.getA()).size(), rb = dims(op.getB()).size();
    int64_t rank = dims(op.getOutput()).size();
    if (ra < 2 || rb < 2)
      return;
    int64_t k = kNoBatchAxis;
    auto agree = [&](int64_t at) {
      if (k >= 0 && k != at)
        return false;
      k = at;
      return true;
    };
    if (int64_t a = axisOf(op.getA()); a >= 0) {
      int64_t at = a + rank - ra;
      if (a == ra - 1 || dims(op.getA())[a] != dims(op.getOutput())[at] ||
          !agree(at))
        return;
    }
    if (int64_t b = axisOf(op.getB()); b >= 0) {
      int64_t at = b + rank - rb;
      if (b == rb - 2 || dims(op.getB())[b] != dims(op.getOutput())[at] ||
          !agree(at))
        return;
    }
    axes[op.getOutput()] = k;
  }

  /// Gemm: (M, K) x (K, N) + C; the batch may run along M (A's rows) or N.
  void gemm(GemmOp op) {
    int64_t k = kNoBatchAxis;
    if (int64_t a = axisOf(op.getA()); a >= 0) {
      if (a != (op.getTransA() ? 1 : 0))
        return;
      k = 0;
    }
    if (int64_t b = axisOf(op.getB()); b >= 0) {
      if (b != (op.getTransB() ? 0 : 1) || k == 0)
        return;
      k = 1;
    }
    if (Value c = op.getC(); c && axisOf(c) >= 0) {
      int64_t kc = broadcast(c, op.getOutput());
      if (kc < 0 || (k >= 0 && kc != k))
        return;
      k = kc;
    }
    axes[op.getOutput()] = k;
  }

  /// Gather along `axis`: the output is data[:axis] + indices + data[axis+1:].
  void gather(GatherOp op) {
    auto g = static_cast<int64_t>(op.getAxis());
    int64_t d = axisOf(op.getData()), i = axisOf(op.getIndices());
    if (d >= 0 && i >= 0)
      return;
    if (i >= 0)
      axes[op.getOutput()] = g + i;
    else if (d >= 0 && d != g)
      axes[op.getOutput()] =
          d < g ? d
                : d - 1 + static_cast<int64_t>(dims(op.getIndices()).size());
  }

  llvm::DenseMap<Value, int64_t> axes;
  /// Samples per step on one rank; 0 when @main has no graph input.
  int64_t samples = 0;
};

} // namespace

std::optional<int64_t> inferBatchAxis(Value v) {
  Block *block = isa<BlockArgument>(v) ? cast<BlockArgument>(v).getOwner()
                                       : v.getDefiningOp()->getBlock();
  auto func = dyn_cast_or_null<func::FuncOp>(block->getParentOp());
  if (!func)
    return std::nullopt;
  BatchAxisWalk walk(func);
  if (Operation *def = v.getDefiningOp()) {
    for (Operation &op : *block) {
      walk.visit(&op);
      if (&op == def)
        break;
    }
  }
  int64_t a = walk.axisOf(v);
  if (a == kUnknown)
    return std::nullopt;
  return a;
}

} // namespace shardc
