//===- Elementwise.cpp - Gradient rules of the elementwise ops ------------===//
//
// Broadcasting binary ops sum their gradient back to each operand's shape
// (GradientEmitter::sumTo).
//
//===----------------------------------------------------------------------===//
#include "ir/GradientEmitter.h"
#include "ir/gradients/Gradients.h"

#include <cmath>

using namespace mlir;

namespace shardc {
namespace {

struct AddGradient
    : DifferentiableOpInterface::ExternalModel<AddGradient, AddOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto add = cast<AddOp>(op);
    Value dy = e.grad(add.getOutput());
    e.accumulate(add.getLhs(), e.sumTo(dy, tensorTy(add.getLhs())));
    e.accumulate(add.getRhs(), e.sumTo(dy, tensorTy(add.getRhs())));
    return success();
  }
};

struct SubGradient
    : DifferentiableOpInterface::ExternalModel<SubGradient, SubOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto sub = cast<SubOp>(op);
    Value dy = e.grad(sub.getOutput());
    e.accumulate(sub.getLhs(), e.sumTo(dy, tensorTy(sub.getLhs())));
    if (e.isActive(sub.getRhs()))
      e.accumulate(sub.getRhs(), e.sumTo(e.neg(dy), tensorTy(sub.getRhs())));
    return success();
  }
};

struct MulGradient
    : DifferentiableOpInterface::ExternalModel<MulGradient, MulOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto m = cast<MulOp>(op);
    Value dy = e.grad(m.getOutput());
    if (e.isActive(m.getLhs()))
      e.accumulate(m.getLhs(),
                   e.sumTo(e.mul(dy, m.getRhs()), tensorTy(m.getLhs())));
    if (e.isActive(m.getRhs()))
      e.accumulate(m.getRhs(),
                   e.sumTo(e.mul(dy, m.getLhs()), tensorTy(m.getRhs())));
    return success();
  }
};

struct DivGradient
    : DifferentiableOpInterface::ExternalModel<DivGradient, DivOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto d = cast<DivOp>(op);
    Value dy = e.grad(d.getOutput());
    if (e.isActive(d.getLhs()))
      e.accumulate(d.getLhs(),
                   e.sumTo(e.div(dy, d.getRhs()), tensorTy(d.getLhs())));
    if (e.isActive(d.getRhs())) {
      // d(a/b)/db = -(a/b)/b.
      Value g = e.neg(e.div(e.mul(dy, d.getOutput()), d.getRhs()));
      e.accumulate(d.getRhs(), e.sumTo(g, tensorTy(d.getRhs())));
    }
    return success();
  }
};

struct PowGradient
    : DifferentiableOpInterface::ExternalModel<PowGradient, PowOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto p = cast<PowOp>(op);
    Value dy = e.grad(p.getOutput());
    Value x = p.getLhs(), ex = p.getRhs();
    if (!isa<FloatType>(tensorTy(x).getElementType()))
      return success();
    if (e.isActive(x)) {
      // d(x^e)/dx = e * x^(e-1).
      Value eF = ex;
      if (tensorTy(ex).getElementType() != tensorTy(x).getElementType())
        eF = e.create<CastOp>(
            RankedTensorType::get(tensorTy(ex).getShape(),
                                  tensorTy(x).getElementType()),
            ex);
      Value em1 = e.create<SubOp>(
          eF.getType(), eF, e.constant(tensorTy(eF).getElementType(), 1.0));
      Value xp = e.create<PowOp>(x, em1);
      e.accumulate(x, e.sumTo(e.mul(e.mul(dy, eF), xp), tensorTy(x)));
    }
    if (e.isActive(ex)) {
      // d(x^e)/de = x^e * ln(x).
      Value lx = e.create<LogOp>(x.getType(), x);
      e.accumulate(ex,
                   e.sumTo(e.mul(e.mul(dy, p.getOutput()), lx), tensorTy(ex)));
    }
    return success();
  }
};

/// torch.maximum/minimum's rule: the gradient goes to the selected operand,
/// half of it to each on ties. `Lose` is the comparison under which the
/// left operand is not selected (Less for Max, Greater for Min).
template <typename OpTy, typename Lose>
struct ExtremeGradient
    : DifferentiableOpInterface::ExternalModel<ExtremeGradient<OpTy, Lose>,
                                               OpTy> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto m = cast<OpTy>(op);
    Value a = m.getLhs(), b = m.getRhs();
    Value dy = e.grad(m.getOutput());
    auto boolType = RankedTensorType::get(tensorTy(dy).getShape(),
                                          e.getBuilder().getI1Type());
    Value zero = e.constant(tensorTy(dy).getElementType(), 0.0);
    Value tie = e.create<EqualOp>(boolType, a, b);
    Value half = e.scale(dy, 0.5);
    auto part = [&](Value lost) {
      Value g = e.create<WhereOp>(dy.getType(), lost, zero, dy);
      return e.create<WhereOp>(dy.getType(), tie, half, g).getResult();
    };
    if (e.isActive(a))
      e.accumulate(a, e.sumTo(part(e.create<Lose>(a, b)), tensorTy(a)));
    if (e.isActive(b))
      e.accumulate(b, e.sumTo(part(e.create<Lose>(b, a)), tensorTy(b)));
    return success();
  }
};

struct SinGradient
    : DifferentiableOpInterface::ExternalModel<SinGradient, SinOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto s = cast<SinOp>(op);
    Value x = s.getInput();
    e.accumulate(x,
                 e.mul(e.grad(s.getOutput()), e.create<CosOp>(x.getType(), x)));
    return success();
  }
};

struct CosGradient
    : DifferentiableOpInterface::ExternalModel<CosGradient, CosOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto c = cast<CosOp>(op);
    Value x = c.getInput();
    e.accumulate(x, e.neg(e.mul(e.grad(c.getOutput()),
                                e.create<SinOp>(x.getType(), x))));
    return success();
  }
};

/// Sign, Floor and Ceil are piecewise constant: their gradient is zero
/// (PyTorch's too), so the rule adds nothing to the input's gradient.
template <typename OpTy>
struct ZeroGradient
    : DifferentiableOpInterface::ExternalModel<ZeroGradient<OpTy>, OpTy> {
  LogicalResult backprop(Operation *, GradientEmitter &) const {
    return success();
  }
};

struct WhereGradient
    : DifferentiableOpInterface::ExternalModel<WhereGradient, WhereOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto w = cast<WhereOp>(op);
    Value dy = e.grad(w.getOutput());
    Value zero = e.constant(tensorTy(dy).getElementType(), 0.0);
    if (e.isActive(w.getX()))
      e.accumulate(
          w.getX(),
          e.sumTo(e.create<WhereOp>(dy.getType(), w.getCondition(), dy, zero),
                  tensorTy(w.getX())));
    if (e.isActive(w.getY()))
      e.accumulate(
          w.getY(),
          e.sumTo(e.create<WhereOp>(dy.getType(), w.getCondition(), zero, dy),
                  tensorTy(w.getY())));
    return success();
  }
};

struct SqrtGradient
    : DifferentiableOpInterface::ExternalModel<SqrtGradient, SqrtOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto s = cast<SqrtOp>(op);
    Value dy = e.grad(s.getOutput());
    e.accumulate(s.getInput(), e.div(dy, e.scale(s.getOutput(), 2.0)));
    return success();
  }
};

struct ExpGradient
    : DifferentiableOpInterface::ExternalModel<ExpGradient, ExpOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto ex = cast<ExpOp>(op);
    Value dy = e.grad(ex.getOutput());
    e.accumulate(ex.getInput(), e.mul(dy, ex.getOutput()));
    return success();
  }
};

struct LogGradient
    : DifferentiableOpInterface::ExternalModel<LogGradient, LogOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto l = cast<LogOp>(op);
    Value dy = e.grad(l.getOutput());
    e.accumulate(l.getInput(), e.div(dy, l.getInput()));
    return success();
  }
};

struct SoftplusGradient
    : DifferentiableOpInterface::ExternalModel<SoftplusGradient, SoftplusOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    // d softplus(x)/dx = sigmoid(x).
    auto sp = cast<SoftplusOp>(op);
    Value x = sp.getInput();
    e.accumulate(
        x, e.mul(e.grad(sp.getOutput()), e.create<SigmoidOp>(x.getType(), x)));
    return success();
  }
};

struct NegGradient
    : DifferentiableOpInterface::ExternalModel<NegGradient, NegOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto n = cast<NegOp>(op);
    e.accumulate(n.getInput(), e.neg(e.grad(n.getOutput())));
    return success();
  }
};

struct IdentityGradient
    : DifferentiableOpInterface::ExternalModel<IdentityGradient, IdentityOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto id = cast<IdentityOp>(op);
    e.accumulate(id.getInput(), e.grad(id.getOutput()));
    return success();
  }
};

struct ErfGradient
    : DifferentiableOpInterface::ExternalModel<ErfGradient, ErfOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    // d erf(x)/dx = 2/sqrt(pi) * exp(-x^2).
    auto erf = cast<ErfOp>(op);
    Value dy = e.grad(erf.getOutput());
    Value x = erf.getInput();
    Value x2 = e.mul(x, x);
    Value ex = e.create<ExpOp>(x.getType(), e.neg(x2));
    e.accumulate(x, e.mul(dy, e.scale(ex, 2.0 / std::sqrt(M_PI))));
    return success();
  }
};

/// d|x|/dx = sign(x), 0 at x = 0 (PyTorch's subgradient), built from two
/// ReluGrads: dy where x > 0, minus dy where -x > 0.
struct AbsGradient
    : DifferentiableOpInterface::ExternalModel<AbsGradient, AbsOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto a = cast<AbsOp>(op);
    Value dy = e.grad(a.getOutput());
    Value x = a.getInput();
    Value pos = e.create<ReluGradOp>(dy.getType(), dy, x);
    Value neg = e.create<ReluGradOp>(dy.getType(), dy, e.neg(x));
    e.accumulate(x, e.create<SubOp>(pos, neg));
    return success();
  }
};

struct ReluGradient
    : DifferentiableOpInterface::ExternalModel<ReluGradient, ReluOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto r = cast<ReluOp>(op);
    Value dy = e.grad(r.getOutput());
    e.accumulate(r.getInput(),
                 e.create<ReluGradOp>(dy.getType(), dy, r.getInput()));
    return success();
  }
};

/// Tan: `grad * (1 + y * y)`, from the output.
struct TanGradient
    : DifferentiableOpInterface::ExternalModel<TanGradient, TanOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto t = cast<TanOp>(op);
    Value y = t.getOutput();
    Type elem = tensorTy(y).getElementType();
    Value slope =
        e.create<AddOp>(y.getType(), e.mul(y, y), e.constant(elem, 1.0));
    e.accumulate(t.getInput(), e.mul(e.grad(y), slope));
    return success();
  }
};

/// Sinh and Cosh: `grad` times the other one of x.
template <typename OpTy, typename OtherTy>
struct HyperbolicGradient : DifferentiableOpInterface::ExternalModel<
                                HyperbolicGradient<OpTy, OtherTy>, OpTy> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    Value x = op->getOperand(0);
    e.accumulate(
        x, e.mul(e.grad(op->getResult(0)), e.create<OtherTy>(x.getType(), x)));
    return success();
  }
};

/// The inverse trigonometric and hyperbolic functions: `grad / q` (negated
/// for Acos) with `q = square * x * x + constant`, or its square root.
template <typename OpTy, typename Rule>
struct InverseFunctionGradient
    : DifferentiableOpInterface::ExternalModel<
          InverseFunctionGradient<OpTy, Rule>, OpTy> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    Value x = op->getOperand(0);
    Type elem = tensorTy(x).getElementType();
    Value q = e.create<AddOp>(x.getType(), e.scale(e.mul(x, x), Rule::square),
                              e.constant(elem, Rule::constant));
    if (Rule::root)
      q = e.create<SqrtOp>(x.getType(), q);
    Value g = e.div(e.grad(op->getResult(0)), q);
    e.accumulate(x, Rule::negate ? e.neg(g) : g);
    return success();
  }
};
struct AsinRule {
  static constexpr double square = -1, constant = 1;
  static constexpr bool root = true, negate = false;
};
struct AcosRule {
  static constexpr double square = -1, constant = 1;
  static constexpr bool root = true, negate = true;
};
struct AtanRule {
  static constexpr double square = 1, constant = 1;
  static constexpr bool root = false, negate = false;
};
struct AsinhRule {
  static constexpr double square = 1, constant = 1;
  static constexpr bool root = true, negate = false;
};
struct AcoshRule {
  static constexpr double square = 1, constant = -1;
  static constexpr bool root = true, negate = false;
};
struct AtanhRule {
  static constexpr double square = -1, constant = 1;
  static constexpr bool root = false, negate = false;
};

struct TanhGradient
    : DifferentiableOpInterface::ExternalModel<TanhGradient, TanhOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto t = cast<TanhOp>(op);
    Value dy = e.grad(t.getOutput());
    e.accumulate(t.getInput(),
                 e.create<TanhGradOp>(dy.getType(), dy, t.getOutput()));
    return success();
  }
};

struct SigmoidGradient
    : DifferentiableOpInterface::ExternalModel<SigmoidGradient, SigmoidOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto sg = cast<SigmoidOp>(op);
    Value dy = e.grad(sg.getOutput());
    e.accumulate(sg.getInput(),
                 e.create<SigmoidGradOp>(dy.getType(), dy, sg.getOutput()));
    return success();
  }
};

/// Only float-to-float casts pass a gradient (casting it back).
struct CastGradient
    : DifferentiableOpInterface::ExternalModel<CastGradient, CastOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto c = cast<CastOp>(op);
    Value dy = e.grad(c.getOutput());
    auto inType = tensorTy(c.getInput());
    if (isa<FloatType>(inType.getElementType()) &&
        isa<FloatType>(tensorTy(dy).getElementType()))
      e.accumulate(c.getInput(), e.create<CastOp>(inType, dy));
    return success();
  }
};

/// d dropout(x)/dx = mask / (1 - ratio): the same Dropout (ratio, site,
/// batch axis and outer factor) applied to the gradient. Its kernel draws the
/// mask from (seed, step, site, element) again, so the backward pass uses
/// exactly the forward's mask without keeping it alive from forward to
/// backward.
struct DropoutGradient
    : DifferentiableOpInterface::ExternalModel<DropoutGradient, DropoutOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto d = cast<DropoutOp>(op);
    FailureOr<Value> dy = e.firstResultGrad(op);
    if (failed(dy))
      return failure();
    auto grad = e.create<DropoutOp>(
        dy->getType(), Type(), *dy, d.getRatioAttr(), d.getSiteAttr(),
        d.getBatchAxisAttr(), d.getBatchOuterAttr(), d.getMicroBatchAttr(),
        d.getMicroBatchesAttr());
    e.accumulate(d.getInput(), grad.getOutput());
    return success();
  }
};

} // namespace

void registerElementwiseGradients(MLIRContext *ctx) {
  AddOp::attachInterface<AddGradient>(*ctx);
  SubOp::attachInterface<SubGradient>(*ctx);
  MulOp::attachInterface<MulGradient>(*ctx);
  DivOp::attachInterface<DivGradient>(*ctx);
  PowOp::attachInterface<PowGradient>(*ctx);
  WhereOp::attachInterface<WhereGradient>(*ctx);
  MaxOp::attachInterface<ExtremeGradient<MaxOp, LessOp>>(*ctx);
  MinOp::attachInterface<ExtremeGradient<MinOp, GreaterOp>>(*ctx);
  SinOp::attachInterface<SinGradient>(*ctx);
  TanOp::attachInterface<TanGradient>(*ctx);
  SinhOp::attachInterface<HyperbolicGradient<SinhOp, CoshOp>>(*ctx);
  CoshOp::attachInterface<HyperbolicGradient<CoshOp, SinhOp>>(*ctx);
  AsinOp::attachInterface<InverseFunctionGradient<AsinOp, AsinRule>>(*ctx);
  AcosOp::attachInterface<InverseFunctionGradient<AcosOp, AcosRule>>(*ctx);
  AtanOp::attachInterface<InverseFunctionGradient<AtanOp, AtanRule>>(*ctx);
  AsinhOp::attachInterface<InverseFunctionGradient<AsinhOp, AsinhRule>>(*ctx);
  AcoshOp::attachInterface<InverseFunctionGradient<AcoshOp, AcoshRule>>(*ctx);
  AtanhOp::attachInterface<InverseFunctionGradient<AtanhOp, AtanhRule>>(*ctx);
  CosOp::attachInterface<CosGradient>(*ctx);
  SignOp::attachInterface<ZeroGradient<SignOp>>(*ctx);
  FloorOp::attachInterface<ZeroGradient<FloorOp>>(*ctx);
  CeilOp::attachInterface<ZeroGradient<CeilOp>>(*ctx);
  SqrtOp::attachInterface<SqrtGradient>(*ctx);
  ExpOp::attachInterface<ExpGradient>(*ctx);
  LogOp::attachInterface<LogGradient>(*ctx);
  ErfOp::attachInterface<ErfGradient>(*ctx);
  TanhOp::attachInterface<TanhGradient>(*ctx);
  SigmoidOp::attachInterface<SigmoidGradient>(*ctx);
  SoftplusOp::attachInterface<SoftplusGradient>(*ctx);
  NegOp::attachInterface<NegGradient>(*ctx);
  ReluOp::attachInterface<ReluGradient>(*ctx);
  AbsOp::attachInterface<AbsGradient>(*ctx);
  IdentityOp::attachInterface<IdentityGradient>(*ctx);
  CastOp::attachInterface<CastGradient>(*ctx);
  DropoutOp::attachInterface<DropoutGradient>(*ctx);
}

} // namespace shardc
