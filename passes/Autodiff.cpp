//===- Autodiff.cpp - Reverse-mode differentiation of the loss ------------===//
//
// Builds the backward graph of `func.func @main` for its scalar loss output
// and returns the gradient of every trainable parameter as an extra result
// marked `shardc.grad_of = "<param>"`.
//
// Trainable parameters are the float `shardc.param` arguments, except the
// running statistics of BatchNormalization (its mean/var operands). Only
// values that depend on a trainable parameter get gradients (activity
// analysis), so integer inputs, constants and shape-only subgraphs carry none.
// A value used several times (a tied embedding and head) accumulates the
// gradients of all its uses.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

namespace {

RankedTensorType tensorTy(Value v) {
  return cast<RankedTensorType>(v.getType());
}

SmallVector<int64_t> broadcastShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// Emits the backward ops. One instance per function.
class Differentiator {
public:
  Differentiator(func::FuncOp func) : func(func), b(func.getContext()) {}

  LogicalResult run(StringRef lossName);

private:
  // Helpers that build ops at the current insertion point.
  Value constant(Type elemType, double v);
  Value mul(Value a, Value c);
  Value div(Value a, Value c);
  Value neg(Value a);
  Value scale(Value a, double s);
  /// Sums a broadcast gradient down to `target`'s shape.
  Value sumTo(Value grad, RankedTensorType target);
  Value reshape(Value v, RankedTensorType type);
  Value transposeLast2(Value v);
  Value zerosLike(RankedTensorType type);

  void accumulate(Value v, Value grad);
  LogicalResult backprop(Operation *op);
  LogicalResult backpropMatMul(MatMulOp op, Value dy);
  LogicalResult backpropGemm(GemmOp op, Value dy);

  bool active(Value v) const { return activeValues.contains(v); }
  Location loc() const { return currentLoc; }

  func::FuncOp func;
  OpBuilder b;
  Location currentLoc = UnknownLoc::get(func.getContext());
  DenseMap<Value, Value> grads;
  llvm::DenseSet<Value> activeValues;
};

Value Differentiator::constant(Type elemType, double v) {
  auto type = RankedTensorType::get({}, elemType);
  Attribute value;
  if (auto ft = dyn_cast<FloatType>(elemType))
    value = DenseElementsAttr::get(type, b.getFloatAttr(ft, v));
  else
    value = DenseElementsAttr::get(type, b.getIntegerAttr(elemType, (int64_t)v));
  return b.create<ConstantOp>(loc(), type, cast<ElementsAttr>(value));
}

Value Differentiator::mul(Value a, Value c) {
  auto t = RankedTensorType::get(
      broadcastShape(tensorTy(a).getShape(), tensorTy(c).getShape()),
      tensorTy(a).getElementType());
  return b.create<MulOp>(loc(), t, a, c);
}

Value Differentiator::div(Value a, Value c) {
  auto t = RankedTensorType::get(
      broadcastShape(tensorTy(a).getShape(), tensorTy(c).getShape()),
      tensorTy(a).getElementType());
  return b.create<DivOp>(loc(), t, a, c);
}

Value Differentiator::neg(Value a) {
  return b.create<NegOp>(loc(), a.getType(), a);
}

Value Differentiator::scale(Value a, double s) {
  if (s == 1.0)
    return a;
  return mul(a, constant(tensorTy(a).getElementType(), s));
}

Value Differentiator::reshape(Value v, RankedTensorType type) {
  if (v.getType() == type)
    return v;
  return b.create<ReshapeOp>(loc(), type, v);
}

Value Differentiator::sumTo(Value grad, RankedTensorType target) {
  auto gt = tensorTy(grad);
  if (gt.getShape() == target.getShape())
    return grad;
  ArrayRef<int64_t> g = gt.getShape(), t = target.getShape();
  size_t lead = g.size() - t.size();
  SmallVector<int64_t> axes, kept;
  for (size_t i = 0; i < g.size(); ++i) {
    bool reduce = i < lead || (t[i - lead] == 1 && g[i] != 1);
    if (reduce)
      axes.push_back(i);
    kept.push_back(reduce ? 1 : g[i]);
  }
  Value r = grad;
  if (!axes.empty())
    r = b.create<ReduceSumOp>(
        loc(), RankedTensorType::get(kept, gt.getElementType()), grad, axes,
        /*keepdims=*/1);
  return reshape(r, target);
}

Value Differentiator::transposeLast2(Value v) {
  auto t = tensorTy(v);
  int64_t r = t.getRank();
  SmallVector<int64_t> perm, shape(t.getShape());
  for (int64_t i = 0; i < r; ++i)
    perm.push_back(i);
  std::swap(perm[r - 1], perm[r - 2]);
  std::swap(shape[r - 1], shape[r - 2]);
  return b.create<TransposeOp>(
      loc(), RankedTensorType::get(shape, t.getElementType()), v, perm);
}

Value Differentiator::zerosLike(RankedTensorType type) {
  Attribute zero = isa<FloatType>(type.getElementType())
                       ? Attribute(b.getFloatAttr(type.getElementType(), 0.0))
                       : Attribute(b.getIntegerAttr(type.getElementType(), 0));
  return b.create<ConstantOp>(loc(), type,
                              cast<ElementsAttr>(DenseElementsAttr::get(type, zero)));
}

void Differentiator::accumulate(Value v, Value grad) {
  if (!grad || !active(v))
    return;
  assert(grad.getType() == v.getType() && "gradient type mismatch");
  auto it = grads.find(v);
  if (it == grads.end()) {
    grads[v] = grad;
    return;
  }
  it->second = b.create<AddOp>(loc(), v.getType(), it->second, grad);
}

LogicalResult Differentiator::backpropMatMul(MatMulOp op, Value dy) {
  Value a = op.getA(), bm = op.getB();
  auto at = tensorTy(a), bt = tensorTy(bm);
  Type et = at.getElementType();
  // Promote 1-d operands to matrices, as numpy.matmul does.
  SmallVector<int64_t> a2(at.getShape()), b2(bt.getShape());
  bool aVec = a2.size() == 1, bVec = b2.size() == 1;
  if (aVec)
    a2.insert(a2.begin(), 1);
  if (bVec)
    b2.push_back(1);
  auto a2t = RankedTensorType::get(a2, et), b2t = RankedTensorType::get(b2, et);
  SmallVector<int64_t> batch = broadcastShape(ArrayRef<int64_t>(a2).drop_back(2),
                                              ArrayRef<int64_t>(b2).drop_back(2));
  int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
  SmallVector<int64_t> y2(batch);
  y2.push_back(m);
  y2.push_back(n);
  Value dy2 = reshape(dy, RankedTensorType::get(y2, et));
  if (active(a)) {
    // dA = dY . B^T, summed over broadcast batch dims.
    Value bT = transposeLast2(reshape(bm, b2t));
    SmallVector<int64_t> s(batch);
    s.push_back(m);
    s.push_back(k);
    Value da = b.create<MatMulOp>(loc(), RankedTensorType::get(s, et), dy2, bT);
    accumulate(a, reshape(sumTo(da, a2t), at));
  }
  if (active(bm)) {
    // dB = A^T . dY.
    Value aT = transposeLast2(reshape(a, a2t));
    SmallVector<int64_t> s(batch);
    s.push_back(k);
    s.push_back(n);
    Value db = b.create<MatMulOp>(loc(), RankedTensorType::get(s, et), aT, dy2);
    accumulate(bm, reshape(sumTo(db, b2t), bt));
  }
  return success();
}

LogicalResult Differentiator::backpropGemm(GemmOp op, Value dy) {
  float alpha = op.getAlpha().convertToFloat();
  float beta = op.getBeta().convertToFloat();
  bool tA = op.getTransA(), tB = op.getTransB();
  Value a = op.getA(), bm = op.getB();
  auto gemm = [&](RankedTensorType t, Value x, Value y, bool tx, bool ty) {
    return b.create<GemmOp>(loc(), t, x, y, Value(), b.getF32FloatAttr(alpha),
                            b.getF32FloatAttr(1.0f), b.getI64IntegerAttr(tx),
                            b.getI64IntegerAttr(ty))
        .getResult();
  };
  if (active(a)) {
    Value da = tA ? gemm(tensorTy(a), bm, dy, tB, true)
                  : gemm(tensorTy(a), dy, bm, false, !tB);
    accumulate(a, da);
  }
  if (active(bm)) {
    Value db = tB ? gemm(tensorTy(bm), dy, a, true, tA)
                  : gemm(tensorTy(bm), a, dy, !tA, false);
    accumulate(bm, db);
  }
  if (Value c = op.getC(); c && active(c))
    accumulate(c, sumTo(scale(dy, beta), tensorTy(c)));
  return success();
}

LogicalResult Differentiator::backprop(Operation *op) {
  currentLoc = op->getLoc();
  SmallVector<Value> dys;
  bool any = false;
  for (Value r : op->getResults()) {
    Value g = grads.lookup(r);
    dys.push_back(g);
    any |= static_cast<bool>(g);
  }
  if (!any)
    return success();
  Value dy = dys[0];
  auto needsDy = [&]() -> LogicalResult {
    if (!dy)
      return op->emitOpError("autodiff: the gradient reaches only a secondary "
                             "result of this op, which has no gradient rule");
    return success();
  };

  if (isa<ConstantOp, ShapeOp>(op))
    return success();
  if (auto add = dyn_cast<AddOp>(op)) {
    accumulate(add.getLhs(), sumTo(dy, tensorTy(add.getLhs())));
    accumulate(add.getRhs(), sumTo(dy, tensorTy(add.getRhs())));
    return success();
  }
  if (auto sub = dyn_cast<SubOp>(op)) {
    accumulate(sub.getLhs(), sumTo(dy, tensorTy(sub.getLhs())));
    if (active(sub.getRhs()))
      accumulate(sub.getRhs(), sumTo(neg(dy), tensorTy(sub.getRhs())));
    return success();
  }
  if (auto m = dyn_cast<MulOp>(op)) {
    if (active(m.getLhs()))
      accumulate(m.getLhs(), sumTo(mul(dy, m.getRhs()), tensorTy(m.getLhs())));
    if (active(m.getRhs()))
      accumulate(m.getRhs(), sumTo(mul(dy, m.getLhs()), tensorTy(m.getRhs())));
    return success();
  }
  if (auto d = dyn_cast<DivOp>(op)) {
    if (active(d.getLhs()))
      accumulate(d.getLhs(), sumTo(div(dy, d.getRhs()), tensorTy(d.getLhs())));
    if (active(d.getRhs())) {
      // d(a/b)/db = -(a/b)/b.
      Value g = neg(div(mul(dy, d.getOutput()), d.getRhs()));
      accumulate(d.getRhs(), sumTo(g, tensorTy(d.getRhs())));
    }
    return success();
  }
  if (auto p = dyn_cast<PowOp>(op)) {
    Value x = p.getLhs(), e = p.getRhs();
    if (!isa<FloatType>(tensorTy(x).getElementType()))
      return success();
    if (active(x)) {
      // d(x^e)/dx = e * x^(e-1).
      Value eF = e;
      if (tensorTy(e).getElementType() != tensorTy(x).getElementType())
        eF = b.create<CastOp>(
            loc(),
            RankedTensorType::get(tensorTy(e).getShape(),
                                  tensorTy(x).getElementType()),
            e, onnxTypeCode(tensorTy(x).getElementType()));
      Value em1 = b.create<SubOp>(loc(), eF.getType(), eF,
                                  constant(tensorTy(eF).getElementType(), 1.0));
      Value xp = b.create<PowOp>(
          loc(),
          RankedTensorType::get(
              broadcastShape(tensorTy(x).getShape(), tensorTy(em1).getShape()),
              tensorTy(x).getElementType()),
          x, em1);
      accumulate(x, sumTo(mul(mul(dy, eF), xp), tensorTy(x)));
    }
    if (active(e)) {
      // d(x^e)/de = x^e * ln(x).
      Value lx = b.create<LogOp>(loc(), x.getType(), x);
      accumulate(e, sumTo(mul(mul(dy, p.getOutput()), lx), tensorTy(e)));
    }
    return success();
  }
  if (auto s = dyn_cast<SqrtOp>(op)) {
    accumulate(s.getInput(), div(dy, scale(s.getOutput(), 2.0)));
    return success();
  }
  if (auto e = dyn_cast<ExpOp>(op)) {
    accumulate(e.getInput(), mul(dy, e.getOutput()));
    return success();
  }
  if (auto l = dyn_cast<LogOp>(op)) {
    accumulate(l.getInput(), div(dy, l.getInput()));
    return success();
  }
  if (auto n = dyn_cast<NegOp>(op)) {
    accumulate(n.getInput(), neg(dy));
    return success();
  }
  if (auto id = dyn_cast<IdentityOp>(op)) {
    accumulate(id.getInput(), dy);
    return success();
  }
  if (auto erf = dyn_cast<ErfOp>(op)) {
    // d erf(x)/dx = 2/sqrt(pi) * exp(-x^2).
    Value x = erf.getInput();
    Value x2 = mul(x, x);
    Value ex = b.create<ExpOp>(loc(), x.getType(), neg(x2));
    accumulate(x, mul(dy, scale(ex, 2.0 / std::sqrt(M_PI))));
    return success();
  }
  if (auto r = dyn_cast<ReluOp>(op)) {
    accumulate(r.getInput(),
               b.create<ReluGradOp>(loc(), dy.getType(), dy, r.getInput()));
    return success();
  }
  if (auto t = dyn_cast<TanhOp>(op)) {
    accumulate(t.getInput(),
               b.create<TanhGradOp>(loc(), dy.getType(), dy, t.getOutput()));
    return success();
  }
  if (auto sg = dyn_cast<SigmoidOp>(op)) {
    accumulate(sg.getInput(), b.create<SigmoidGradOp>(loc(), dy.getType(), dy,
                                                      sg.getOutput()));
    return success();
  }
  if (auto sm = dyn_cast<SoftmaxOp>(op)) {
    accumulate(sm.getInput(),
               b.create<SoftmaxGradOp>(loc(), dy.getType(), dy, sm.getOutput(),
                                       sm.getAxis()));
    return success();
  }
  if (auto lsm = dyn_cast<LogSoftmaxOp>(op)) {
    accumulate(lsm.getInput(),
               b.create<LogSoftmaxGradOp>(loc(), dy.getType(), dy,
                                          lsm.getOutput(), lsm.getAxis()));
    return success();
  }
  if (auto c = dyn_cast<CastOp>(op)) {
    auto inType = tensorTy(c.getInput());
    if (isa<FloatType>(inType.getElementType()) &&
        isa<FloatType>(tensorTy(dy).getElementType()))
      accumulate(c.getInput(),
                 b.create<CastOp>(loc(), inType, dy,
                                  onnxTypeCode(inType.getElementType())));
    return success();
  }
  if (auto mm = dyn_cast<MatMulOp>(op))
    return backpropMatMul(mm, dy);
  if (auto g = dyn_cast<GemmOp>(op))
    return backpropGemm(g, dy);
  if (auto conv = dyn_cast<ConvOp>(op)) {
    if (active(conv.getInput()))
      accumulate(conv.getInput(),
                 b.create<ConvGradInputOp>(
                     loc(), conv.getInput().getType(), dy, conv.getWeight(),
                     conv.getKernelShape(), conv.getStrides(),
                     conv.getDilations(), conv.getPads(), conv.getGroup()));
    if (active(conv.getWeight()))
      accumulate(conv.getWeight(),
                 b.create<ConvGradWeightOp>(
                     loc(), conv.getWeight().getType(), dy, conv.getInput(),
                     conv.getKernelShape(), conv.getStrides(),
                     conv.getDilations(), conv.getPads(), conv.getGroup()));
    if (Value bias = conv.getBias(); bias && active(bias)) {
      SmallVector<int64_t> axes{0};
      for (int64_t i = 2; i < tensorTy(dy).getRank(); ++i)
        axes.push_back(i);
      accumulate(bias, b.create<ReduceSumOp>(loc(), bias.getType(), dy, axes,
                                             /*keepdims=*/0));
    }
    return success();
  }
  if (auto mp = dyn_cast<MaxPoolOp>(op)) {
    if (failed(needsDy()))
      return failure();
    if (!mp.getIndices())
      return mp.emitOpError("autodiff: MaxPool needs its indices result");
    accumulate(mp.getInput(),
               b.create<MaxPoolGradOp>(loc(), mp.getInput().getType(), dy,
                                       mp.getIndices()));
    return success();
  }
  if (auto ap = dyn_cast<AveragePoolOp>(op)) {
    accumulate(ap.getInput(),
               b.create<AveragePoolGradOp>(
                   loc(), ap.getInput().getType(), dy, ap.getKernelShape(),
                   ap.getStrides(), ap.getPads(), ap.getCeilMode(),
                   ap.getCountIncludePad()));
    return success();
  }
  if (auto gap = dyn_cast<GlobalAveragePoolOp>(op)) {
    auto xt = tensorTy(gap.getInput());
    int64_t n = 1;
    for (int64_t i = 2; i < xt.getRank(); ++i)
      n *= xt.getDimSize(i);
    Value scaled = scale(dy, 1.0 / n);
    accumulate(gap.getInput(), b.create<ExpandOp>(loc(), xt, scaled));
    return success();
  }
  if (auto ln = dyn_cast<LayerNormalizationOp>(op)) {
    if (failed(needsDy()))
      return failure();
    auto xt = tensorTy(ln.getInput());
    if (tensorTy(ln.getScale()).getShape() !=
        xt.getShape().drop_front(ln.getAxis()))
      return ln.emitOpError("autodiff: the scale must have the normalized "
                            "shape exactly");
    auto st = tensorTy(ln.getScale());
    auto g = b.create<LayerNormGradOp>(
        loc(), TypeRange{xt, st, st}, dy, ln.getInput(), ln.getScale(),
        ln.getMean(), ln.getInvStdDev(), ln.getAxis());
    accumulate(ln.getInput(), g.getInputGrad());
    accumulate(ln.getScale(), g.getScaleGrad());
    if (Value bias = ln.getBias()) {
      if (tensorTy(bias).getShape() != st.getShape())
        return ln.emitOpError("autodiff: the bias must have the scale's shape");
      accumulate(bias, g.getBiasGrad());
    }
    return success();
  }
  if (auto bn = dyn_cast<BatchNormalizationOp>(op)) {
    if (!dy)
      return success(); // only the running statistics are used
    auto ct = tensorTy(bn.getScale());
    auto g = b.create<BatchNormGradOp>(
        loc(), TypeRange{bn.getInput().getType(), ct, ct}, dy, bn.getInput(),
        bn.getScale(), bn.getMean(), bn.getVar(), bn.getEpsilonAttr(),
        bn.getTrainingModeAttr());
    accumulate(bn.getInput(), g.getInputGrad());
    accumulate(bn.getScale(), g.getScaleGrad());
    accumulate(bn.getBias(), g.getBiasGrad());
    return success();
  }
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    accumulate(r.getInput(), reshape(dy, tensorTy(r.getInput())));
    return success();
  }
  if (auto t = dyn_cast<TransposeOp>(op)) {
    ArrayRef<int64_t> perm = t.getPerm();
    SmallVector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      inv[perm[i]] = i;
    accumulate(t.getInput(), b.create<TransposeOp>(
                                 loc(), t.getInput().getType(), dy, inv));
    return success();
  }
  if (auto e = dyn_cast<ExpandOp>(op)) {
    accumulate(e.getInput(), sumTo(dy, tensorTy(e.getInput())));
    return success();
  }
  if (auto g = dyn_cast<GatherOp>(op)) {
    if (isa<FloatType>(tensorTy(g.getData()).getElementType()))
      accumulate(g.getData(),
                 b.create<GatherGradOp>(loc(), g.getData().getType(), dy,
                                        g.getIndices(), g.getAxis()));
    return success();
  }
  if (auto c = dyn_cast<ConcatOp>(op)) {
    int64_t axis = c.getAxis(), offset = 0;
    auto yt = tensorTy(dy);
    for (Value in : c.getInputs()) {
      auto it = tensorTy(in);
      if (active(in)) {
        SmallVector<int64_t> starts(yt.getRank(), 0), steps(yt.getRank(), 1);
        starts[axis] = offset;
        accumulate(in, b.create<SliceOp>(loc(), it, dy, starts, steps));
      }
      offset += it.getDimSize(axis);
    }
    return success();
  }
  if (auto s = dyn_cast<SplitOp>(op)) {
    SmallVector<Value> parts;
    for (auto [r, g] : llvm::zip(s.getOutputs(), dys))
      parts.push_back(g ? g : zerosLike(tensorTy(r)));
    accumulate(s.getInput(), b.create<ConcatOp>(loc(), s.getInput().getType(),
                                                parts, s.getAxis()));
    return success();
  }
  if (auto sl = dyn_cast<SliceOp>(op)) {
    accumulate(sl.getInput(),
               b.create<SliceGradOp>(loc(), sl.getInput().getType(), dy,
                                     sl.getStarts(), sl.getSteps()));
    return success();
  }
  if (auto w = dyn_cast<WhereOp>(op)) {
    Value zero = constant(tensorTy(dy).getElementType(), 0.0);
    if (active(w.getX()))
      accumulate(w.getX(), sumTo(b.create<WhereOp>(loc(), dy.getType(),
                                                   w.getCondition(), dy, zero),
                                 tensorTy(w.getX())));
    if (active(w.getY()))
      accumulate(w.getY(), sumTo(b.create<WhereOp>(loc(), dy.getType(),
                                                   w.getCondition(), zero, dy),
                                 tensorTy(w.getY())));
    return success();
  }
  if (isa<ReduceSumOp, ReduceMeanOp>(op)) {
    Value in = op->getOperand(0);
    auto it = tensorTy(in);
    ArrayRef<int64_t> axes = isa<ReduceSumOp>(op)
                                 ? cast<ReduceSumOp>(op).getAxes()
                                 : cast<ReduceMeanOp>(op).getAxes();
    SmallVector<int64_t> kept(it.getShape());
    int64_t n = 1;
    for (int64_t a : axes) {
      n *= kept[a];
      kept[a] = 1;
    }
    Value g = reshape(dy, RankedTensorType::get(kept, it.getElementType()));
    if (isa<ReduceMeanOp>(op))
      g = scale(g, 1.0 / n);
    accumulate(in, b.create<ExpandOp>(loc(), it, g));
    return success();
  }
  if (auto sce = dyn_cast<SoftmaxCrossEntropyLossOp>(op)) {
    Value total;
    if (dy)
      total = b.create<SoftmaxCrossEntropyLossGradOp>(
          loc(), sce.getScores().getType(), dy, sce.getScores(),
          sce.getLabels(), sce.getWeights(), sce.getReductionAttr(),
          sce.getIgnoreIndexAttr());
    if (dys.size() > 1 && dys[1]) {
      Value g = b.create<LogSoftmaxGradOp>(loc(), sce.getScores().getType(),
                                           dys[1], sce.getLogProb(), 1);
      total = total ? b.create<AddOp>(loc(), g.getType(), total, g) : g;
    }
    accumulate(sce.getScores(), total);
    return success();
  }
  if (auto nll = dyn_cast<NegativeLogLikelihoodLossOp>(op)) {
    accumulate(nll.getInput(), b.create<NegativeLogLikelihoodLossGradOp>(
                                   loc(), nll.getInput().getType(), dy,
                                   nll.getInput(), nll.getTarget(),
                                   nll.getWeight(), nll.getReductionAttr(),
                                   nll.getIgnoreIndexAttr()));
    return success();
  }
  return op->emitOpError("autodiff: no gradient rule for this op");
}

LogicalResult Differentiator::run(StringRef lossName) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto names = func->getAttrOfType<ArrayAttr>(kOutputNamesAttrName);
  if (!names || names.size() != ret.getNumOperands())
    return func.emitError("autodiff: @main has no output names");

  // The loss: the named output, or the only scalar float output.
  int lossIndex = -1;
  if (!lossName.empty()) {
    for (auto [i, n] : llvm::enumerate(names))
      if (cast<StringAttr>(n).getValue() == lossName)
        lossIndex = i;
    if (lossIndex < 0) {
      std::string list;
      for (Attribute n : names)
        list += (list.empty() ? "" : ", ") + cast<StringAttr>(n).str();
      return func.emitError("autodiff: the model has no output named '")
             << lossName << "' (outputs: " << list << ")";
    }
  } else {
    int count = 0;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto t = tensorTy(v);
      if (t.getNumElements() == 1 && isa<FloatType>(t.getElementType())) {
        lossIndex = i;
        ++count;
      }
    }
    if (count != 1)
      return func.emitError("autodiff: the model has ")
             << count << " scalar float outputs; name the loss with --loss";
  }
  Value loss = ret.getOperand(lossIndex);
  auto lossType = tensorTy(loss);
  if (lossType.getNumElements() != 1 ||
      !isa<FloatType>(lossType.getElementType()))
    return func.emitError("autodiff: the loss '")
           << cast<StringAttr>(names[lossIndex]).getValue()
           << "' must be a scalar float, but has type " << lossType;
  func->setAttr("shardc.loss", b.getStringAttr(
                                   cast<StringAttr>(names[lossIndex]).getValue()));

  // Trainable parameters: float params that are not BatchNorm statistics.
  llvm::DenseSet<Value> statistics;
  func.walk([&](BatchNormalizationOp bn) {
    statistics.insert(bn.getMean());
    statistics.insert(bn.getVar());
  });
  SmallVector<BlockArgument> params;
  for (BlockArgument arg : func.getArguments()) {
    if (!func.getArgAttr(arg.getArgNumber(), kParamAttrName))
      continue;
    if (!isa<FloatType>(tensorTy(arg).getElementType()) ||
        statistics.contains(arg))
      continue;
    bool onlyStatistic = true;
    for (Operation *user : arg.getUsers())
      onlyStatistic &= isa<BatchNormalizationOp>(user) &&
                       (cast<BatchNormalizationOp>(user).getMean() == arg ||
                        cast<BatchNormalizationOp>(user).getVar() == arg);
    if (arg.use_empty() || !onlyStatistic)
      params.push_back(arg);
  }

  // MaxPool needs its argmax indices for the backward pass.
  SmallVector<MaxPoolOp> pools;
  func.walk([&](MaxPoolOp mp) {
    if (!mp.getIndices())
      pools.push_back(mp);
  });
  for (MaxPoolOp mp : pools) {
    b.setInsertionPoint(mp);
    auto withIdx = b.create<MaxPoolOp>(
        mp.getLoc(), mp.getOutput().getType(),
        RankedTensorType::get(tensorTy(mp.getOutput()).getShape(),
                              b.getI64Type()),
        mp.getInput(), mp.getKernelShapeAttr(), mp.getStridesAttr(),
        mp.getDilationsAttr(), mp.getPadsAttr(), mp.getCeilModeAttr(),
        b.getI64IntegerAttr(0));
    mp.getOutput().replaceAllUsesWith(withIdx.getOutput());
    mp.erase();
  }

  // Activity: values that depend on a trainable parameter.
  for (BlockArgument p : params)
    activeValues.insert(p);
  for (Operation &op : body.without_terminator()) {
    bool in = llvm::any_of(op.getOperands(),
                           [&](Value v) { return activeValues.contains(v); });
    if (!in)
      continue;
    for (Value r : op.getResults())
      if (isa<FloatType>(tensorTy(r).getElementType()))
        activeValues.insert(r);
  }

  // Reverse sweep.
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  b.setInsertionPoint(ret);
  currentLoc = loss.getLoc();
  if (active(loss))
    grads[loss] = b.create<ConstantOp>(
        loss.getLoc(), lossType,
        cast<ElementsAttr>(DenseElementsAttr::get(
            lossType, b.getFloatAttr(lossType.getElementType(), 1.0))));
  for (Operation *op : llvm::reverse(forward))
    if (failed(backprop(op)))
      return failure();
  // Mark the backward ops: sharding passes schedule parameter use windows
  // (forward, backward) from it.
  for (Operation *op = forward.empty() ? &body.front()
                                       : forward.back()->getNextNode();
       op && op != ret.getOperation(); op = op->getNextNode())
    op->setAttr(kBackwardAttrName, UnitAttr::get(func.getContext()));

  // Return the parameter gradients.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<std::string> gradOf;
  for (BlockArgument p : params) {
    Value g = grads.lookup(p);
    if (!g)
      continue; // PyTorch leaves .grad None: the optimizer skips it.
    results.push_back(g);
    gradOf.push_back(
        func.getArgAttrOfType<StringAttr>(p.getArgNumber(), kParamAttrName)
            .str());
  }
  unsigned firstGrad = ret.getNumOperands();
  b.setInsertionPoint(ret);
  b.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  SmallVector<Type> types;
  for (Value v : results)
    types.push_back(v.getType());
  func.setFunctionType(
      b.getFunctionType(func.getFunctionType().getInputs(), types));
  for (auto [i, name] : llvm::enumerate(gradOf))
    func.setResultAttr(firstGrad + i, kGradOfAttrName, b.getStringAttr(name));
  return success();
}

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;
  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!func) {
      getOperation().emitError("autodiff: the module has no func.func @main");
      return signalPassFailure();
    }
    Differentiator d(func);
    if (failed(d.run(loss)))
      signalPassFailure();
  }
};

} // namespace
} // namespace shardc
