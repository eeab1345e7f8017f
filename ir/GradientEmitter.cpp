//===- GradientEmitter.cpp - Ops shared by the gradient rules -------------===//
#include "ir/GradientEmitter.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace shardc {

FailureOr<Value> GradientEmitter::firstResultGrad(Operation *op) const {
  Value dy = grad(op->getResult(0));
  if (!dy)
    return op->emitOpError("autodiff: the gradient reaches only a secondary "
                           "result of this op, which has no gradient rule");
  return dy;
}

Value GradientEmitter::constant(Type elemType, double v) {
  auto type = RankedTensorType::get({}, elemType);
  Attribute value;
  if (auto ft = dyn_cast<FloatType>(elemType))
    value = DenseElementsAttr::get(type, builder.getFloatAttr(ft, v));
  else
    value = DenseElementsAttr::get(
        type, builder.getIntegerAttr(elemType, (int64_t)v));
  return create<ConstantOp>(type, cast<ElementsAttr>(value));
}

Value GradientEmitter::mul(Value a, Value c) { return create<MulOp>(a, c); }

Value GradientEmitter::div(Value a, Value c) { return create<DivOp>(a, c); }

Value GradientEmitter::neg(Value a) { return create<NegOp>(a.getType(), a); }

Value GradientEmitter::scale(Value a, double s) {
  if (s == 1.0)
    return a;
  return mul(a, constant(tensorTy(a).getElementType(), s));
}

Value GradientEmitter::reshape(Value v, RankedTensorType type) {
  if (v.getType() == type)
    return v;
  return create<ReshapeOp>(type, v);
}

Value GradientEmitter::sumTo(Value grad, RankedTensorType target) {
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
    r = create<ReduceSumOp>(RankedTensorType::get(kept, gt.getElementType()),
                            grad, axes, /*keepdims=*/true);
  return reshape(r, target);
}

Value GradientEmitter::transposeLast2(Value v) {
  auto t = tensorTy(v);
  int64_t r = t.getRank();
  SmallVector<int64_t> perm, shape(t.getShape());
  for (int64_t i = 0; i < r; ++i)
    perm.push_back(i);
  std::swap(perm[r - 1], perm[r - 2]);
  std::swap(shape[r - 1], shape[r - 2]);
  return create<TransposeOp>(RankedTensorType::get(shape, t.getElementType()),
                             v, perm);
}

Value GradientEmitter::zerosLike(RankedTensorType type) {
  Attribute zero =
      isa<FloatType>(type.getElementType())
          ? Attribute(builder.getFloatAttr(type.getElementType(), 0.0))
          : Attribute(builder.getIntegerAttr(type.getElementType(), 0));
  return create<ConstantOp>(
      type, cast<ElementsAttr>(DenseElementsAttr::get(type, zero)));
}

} // namespace shardc
