//===- BatchAxis.cpp - Where a value's samples run ------------------------===//
//
// A forward walk over @main's ops in order (the importer builds them in
// topological order), keeping for every value its batch position (axis and
// outer factor, BatchAxis.h), no batch, or unknown. Every rule keeps the
// invariant that a batched value's flat layout is [O, B, I]: O outer rows
// (the axes before the batch axis and its outer factor), the micro-batch's B
// samples in order, and I elements per sample and row, so that the global
// batch's value is [O, N * B, I] with rank r's samples at [r * B, (r+1) * B).
//
//===----------------------------------------------------------------------===//
#include "frontend/BatchAxis.h"

#include "ir/ShardcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace shardc {

namespace {

using Pos = BatchPosition;

constexpr int64_t kUnknownAxis = -2;
/// Unknown because a reshape could put the one sample of a micro-batch of 1
/// on several axes (or a value computed from such a reshape).
constexpr int64_t kAmbiguousAxis = -3;
constexpr Pos kNone{kNoBatchAxis, 1};
constexpr Pos kUnknown{kUnknownAxis, 1};
constexpr Pos kAmbiguous{kAmbiguousAxis, 1};

ArrayRef<int64_t> dims(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

int64_t product(ArrayRef<int64_t> d) {
  int64_t p = 1;
  for (int64_t x : d)
    p *= x;
  return p;
}

class BatchPositionWalk {
public:
  BatchPositionWalk(func::FuncOp func) {
    for (BlockArgument arg : func.getArguments()) {
      bool input = func.getArgAttr(arg.getArgNumber(), kInputAttrName) &&
                   !dims(arg).empty();
      // The micro-batch, as the plan records it: the first input's axis 0.
      if (input && samples == 0)
        samples = dims(arg)[0];
      pos[arg] = kNone;
      if (input)
        pos[arg] =
            samples > 0 && dims(arg)[0] % samples == 0 ? Pos{0, 1} : kUnknown;
    }
  }

  Pos posOf(Value v) const {
    auto it = pos.find(v);
    return it == pos.end() ? kUnknown : it->second;
  }

  void visit(Operation *op) {
    bool anyBatch = false, anyUnknown = false, anyAmbiguous = false;
    for (Value v : op->getOperands()) {
      int64_t a = posOf(v).axis;
      anyBatch |= a >= 0;
      anyUnknown |= a < kNoBatchAxis;
      anyAmbiguous |= a == kAmbiguousAxis;
    }
    if (!anyBatch && !anyUnknown) {
      setAll(op, kNone);
      return;
    }
    // Results the rules below do not set stay unknown.
    setAll(op, anyAmbiguous ? kAmbiguous : kUnknown);
    if (anyUnknown)
      return;
    for (Value v : op->getOperands())
      if (!cast<RankedTensorType>(v.getType()).hasStaticShape())
        return;
    for (Value v : op->getResults())
      if (!cast<RankedTensorType>(v.getType()).hasStaticShape())
        return;
    llvm::TypeSwitch<Operation *>(op)
        .Case<AddOp, SubOp, MulOp, DivOp, PowOp, WhereOp, EqualOp, GreaterOp,
              LessOp, GreaterOrEqualOp, LessOrEqualOp, AndOp, OrOp, XorOp,
              MaxOp, MinOp>([&](Operation *op) {
          setAll(op, broadcast(op->getOperands(), op->getResult(0)));
        })
        .Case<SqrtOp, ExpOp, LogOp, ErfOp, TanhOp, SigmoidOp, SoftplusOp, NegOp,
              AbsOp, ReluOp, IdentityOp, CastOp, SoftmaxOp, LogSoftmaxOp,
              TriluOp, DropoutOp, NotOp, SignOp, FloorOp, CeilOp, SinOp, CosOp,
              TanOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp, AsinhOp, AcoshOp,
              AtanhOp>(
            [&](Operation *op) { setAll(op, posOf(op->getOperand(0))); })
        .Case<LayerNormalizationOp, BatchNormalizationOp>([&](Operation *op) {
          // The normalized result has the input's layout; the statistics
          // are left unknown.
          if (onlyFirstOperandBatched(op))
            pos[op->getResult(0)] = posOf(op->getOperand(0));
        })
        .Case<ConvOp>([&](ConvOp op) {
          if (onlyFirstOperandBatched(op) && posOf(op.getInput()).axis == 0)
            pos[op.getOutput()] = posOf(op.getInput());
        })
        .Case<MaxPoolOp, AveragePoolOp, GlobalAveragePoolOp>(
            [&](Operation *op) {
              // Pooling keeps N and C.
              Pos p = posOf(op->getOperand(0));
              if (p.axis == 0 || p.axis == 1)
                setAll(op, p);
            })
        .Case<TransposeOp>([&](TransposeOp op) {
          Pos p = posOf(op.getInput());
          for (auto [i, q] : llvm::enumerate(op.getPerm()))
            if (static_cast<int64_t>(q) == p.axis)
              pos[op.getOutput()] = {static_cast<int64_t>(i), p.outer};
        })
        .Case<ReshapeOp>([&](ReshapeOp op) {
          pos[op.getOutput()] = reshape(
              dims(op.getInput()), posOf(op.getInput()), dims(op.getOutput()));
        })
        .Case<MatMulOp>([&](MatMulOp op) { matmul(op); })
        .Case<GemmOp>([&](GemmOp op) { gemm(op); })
        .Case<GatherOp>([&](GatherOp op) { gather(op); })
        .Case<GatherElementsOp>([&](GatherElementsOp op) {
          // The output has the indices' layout when they carry the samples
          // off the gather axis and the data carries them alike or not.
          Pos d = posOf(op.getData()), i = posOf(op.getIndices());
          if (i.axis >= 0 && i.axis != static_cast<int64_t>(op.getAxis()) &&
              (d.axis == kNoBatchAxis || d == i))
            pos[op.getOutput()] = i;
        })
        .Case<ScatterElementsOp>([&](ScatterElementsOp op) {
          // The output has the data's layout, or the indices' and updates'
          // when they carry the samples off the scatter axis and the data
          // (zeros of a static shape, for a one-hot) carries none.
          Pos d = posOf(op.getData()), i = posOf(op.getIndices()),
              u = posOf(op.getUpdates());
          auto axis = static_cast<int64_t>(op.getAxis());
          if (d.axis >= 0 && d.axis != axis &&
              (i.axis == kNoBatchAxis || i == d) &&
              (u.axis == kNoBatchAxis || u == d))
            pos[op.getOutput()] = d;
          else if (d.axis == kNoBatchAxis && i.axis >= 0 && i.axis != axis &&
                   (u.axis == kNoBatchAxis || u == i))
            pos[op.getOutput()] = i;
        })
        .Case<ConcatOp>([&](ConcatOp op) {
          Pos p = broadcast(op.getInputs(), op.getOutput());
          if (p.axis != static_cast<int64_t>(op.getAxis()))
            pos[op.getOutput()] = p;
        })
        .Case<SplitOp>([&](SplitOp op) {
          Pos p = posOf(op.getInput());
          if (p.axis != static_cast<int64_t>(op.getAxis()))
            setAll(op, p);
        })
        .Case<SliceOp>([&](SliceOp op) {
          Pos p = posOf(op.getInput());
          int64_t a = p.axis;
          if (dims(op.getInput())[a] == dims(op.getOutput())[a] &&
              op.getStarts()[a] == 0 && op.getSteps()[a] == 1)
            pos[op.getOutput()] = p;
        })
        .Case<ExpandOp>([&](ExpandOp op) {
          pos[op.getOutput()] = broadcast(op->getOperands(), op.getOutput());
        })
        .Case<ReduceMeanOp, ReduceSumOp, ReduceMaxOp, ReduceMinOp>(
            [&](auto op) {
              Pos p = posOf(op.getInput());
              SmallVector<int64_t> axes;
              for (int64_t r : op.getAxes())
                axes.push_back(r);
              pos[op.getOutput()] = reduce(p, axes, op.getKeepdims());
            })
        .Case<ArgMaxOp>([&](ArgMaxOp op) {
          pos[op.getOutput()] =
              reduce(posOf(op.getInput()), {static_cast<int64_t>(op.getAxis())},
                     op.getKeepdims());
        })
        .Case<TopKIndicesOp>([&](TopKIndicesOp op) {
          // The k best along another axis than the samples' keep their
          // layout.
          Pos p = posOf(op.getInput());
          if (p.axis != static_cast<int64_t>(op.getAxis()))
            pos[op.getOutput()] = p;
        });
  }

private:
  void setAll(Operation *op, Pos p) {
    for (Value r : op->getResults())
      pos[r] = p;
  }

  bool onlyFirstOperandBatched(Operation *op) const {
    for (Value v : op->getOperands().drop_front())
      if (posOf(v).axis != kNoBatchAxis)
        return false;
    return true;
  }

  /// The position in `out` that the positions of `operands`, broadcast
  /// numpy-style (aligned at the last axis) to `out`, agree on; unknown
  /// when they disagree or the batch axis itself is broadcast.
  Pos broadcast(ValueRange operands, Value out) const {
    Pos k = kNone;
    int64_t rank = dims(out).size();
    for (Value v : operands) {
      Pos p = posOf(v);
      if (p.axis == kNoBatchAxis)
        continue;
      Pos at{p.axis + rank - static_cast<int64_t>(dims(v).size()), p.outer};
      if (at.axis < 0 || dims(v)[p.axis] != dims(out)[at.axis] ||
          (k.axis >= 0 && k != at))
        return kUnknown;
      k = at;
    }
    return k;
  }

  /// A reshape keeps the flat layout [O, B, I]. The samples land on output
  /// axis k when the axes before k hold a divisor of O elements (the rest,
  /// O / prefix, is k's outer factor) and out[k] holds the whole batch after
  /// that factor. Where the samples would straddle output axes, no axis
  /// qualifies; with B = 1 several may (an axis of size 1 can hold the one
  /// sample anywhere), and which one the global batch's reshape scales is
  /// not in the shapes: both are unknown. With B > 1 at most one axis
  /// qualifies: prefix(k + 1) >= O * B > O for the first that does, so no
  /// later prefix divides O.
  Pos reshape(ArrayRef<int64_t> in, Pos p, ArrayRef<int64_t> out) const {
    if (samples <= 0)
      return kUnknown;
    int64_t outerElems = product(in.take_front(p.axis)) * p.outer;
    // An empty tensor has no layout to follow.
    if (outerElems <= 0)
      return kUnknown;
    Pos found = kUnknown;
    int64_t prefix = 1;
    for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
      if (prefix <= 0 || prefix > outerElems)
        break;
      if (outerElems % prefix == 0) {
        int64_t outer = outerElems / prefix, block;
        if (!llvm::MulOverflow(outer, samples, block) && out[k] % block == 0) {
          if (found.axis >= 0)
            return kAmbiguous;
          found = {k, outer};
        }
      }
      prefix *= out[k];
    }
    return found;
  }

  /// A reduction over `axes` (non-negative) keeps the position unless it
  /// reduces the batch axis; without keepdims the axes before it shift.
  static Pos reduce(Pos p, ArrayRef<int64_t> axes, bool keepdims) {
    int64_t removed = 0;
    for (int64_t r : axes) {
      if (r == p.axis)
        return kUnknown;
      removed += r < p.axis;
    }
    return {keepdims ? p.axis : p.axis - removed, p.outer};
  }

  /// Numpy matmul of ranks >= 2: the batch may run along a's rows or batch
  /// axes, or along b's columns or batch axes, not along the contraction.
  void matmul(MatMulOp op) {
    int64_t ra = dims(op.getA()).size(), rb = dims(op.getB()).size();
    int64_t rank = dims(op.getOutput()).size();
    if (ra < 2 || rb < 2)
      return;
    Pos k = kNone;
    auto agree = [&](Pos at) {
      if (k.axis >= 0 && k != at)
        return false;
      k = at;
      return true;
    };
    if (Pos a = posOf(op.getA()); a.axis >= 0) {
      Pos at{a.axis + rank - ra, a.outer};
      if (a.axis == ra - 1 ||
          dims(op.getA())[a.axis] != dims(op.getOutput())[at.axis] ||
          !agree(at))
        return;
    }
    if (Pos b = posOf(op.getB()); b.axis >= 0) {
      Pos at{b.axis + rank - rb, b.outer};
      if (b.axis == rb - 2 ||
          dims(op.getB())[b.axis] != dims(op.getOutput())[at.axis] ||
          !agree(at))
        return;
    }
    pos[op.getOutput()] = k;
  }

  /// Gemm: (M, K) x (K, N) + C; the batch may run along M (A's rows) or N.
  void gemm(GemmOp op) {
    Pos k = kNone;
    if (Pos a = posOf(op.getA()); a.axis >= 0) {
      if (a.axis != (op.getTransA() ? 1 : 0))
        return;
      k = {0, a.outer};
    }
    if (Pos b = posOf(op.getB()); b.axis >= 0) {
      if (b.axis != (op.getTransB() ? 0 : 1) || k.axis == 0)
        return;
      k = {1, b.outer};
    }
    if (Value c = op.getC(); c && posOf(c).axis >= 0) {
      Pos kc = broadcast(c, op.getOutput());
      if (kc.axis < 0 || (k.axis >= 0 && kc != k))
        return;
      k = kc;
    }
    pos[op.getOutput()] = k;
  }

  /// Gather along `axis`: the output is data[:axis] + indices + data[axis+1:].
  void gather(GatherOp op) {
    auto g = static_cast<int64_t>(op.getAxis());
    Pos d = posOf(op.getData()), i = posOf(op.getIndices());
    if (d.axis >= 0 && i.axis >= 0)
      return;
    if (i.axis >= 0)
      pos[op.getOutput()] = {g + i.axis, i.outer};
    else if (d.axis >= 0 && d.axis != g)
      pos[op.getOutput()] = {
          d.axis < g
              ? d.axis
              : d.axis - 1 + static_cast<int64_t>(dims(op.getIndices()).size()),
          d.outer};
  }

  llvm::DenseMap<Value, Pos> pos;
  /// Samples per step on one rank; 0 when @main has no graph input.
  int64_t samples = 0;
};

} // namespace

std::optional<BatchPosition> inferBatchPosition(Value v,
                                                bool *singleSampleReshape) {
  if (singleSampleReshape)
    *singleSampleReshape = false;
  Block *block = isa<BlockArgument>(v) ? cast<BlockArgument>(v).getOwner()
                                       : v.getDefiningOp()->getBlock();
  auto func = dyn_cast_or_null<func::FuncOp>(block->getParentOp());
  if (!func)
    return std::nullopt;
  BatchPositionWalk walk(func);
  if (Operation *def = v.getDefiningOp()) {
    for (Operation &op : *block) {
      walk.visit(&op);
      if (&op == def)
        break;
    }
  }
  Pos p = walk.posOf(v);
  if (singleSampleReshape)
    *singleSampleReshape = p.axis == kAmbiguousAxis;
  if (p.axis < kNoBatchAxis)
    return std::nullopt;
  return p;
}

} // namespace shardc
