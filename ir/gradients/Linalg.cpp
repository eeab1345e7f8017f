//===- Linalg.cpp - Gradient rules of Gemm and MatMul ---------------------===//
#include "ir/GradientEmitter.h"
#include "ir/gradients/Gradients.h"

using namespace mlir;

namespace shardc {
namespace {

struct GemmGradient
    : DifferentiableOpInterface::ExternalModel<GemmGradient, GemmOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto g = cast<GemmOp>(op);
    Value dy = e.grad(g.getOutput());
    float alpha = g.getAlpha().convertToFloat();
    float beta = g.getBeta().convertToFloat();
    bool tA = g.getTransA(), tB = g.getTransB();
    Value a = g.getA(), bm = g.getB();
    OpBuilder &b = e.getBuilder();
    auto gemm = [&](RankedTensorType t, Value x, Value y, bool tx, bool ty) {
      return e
          .create<GemmOp>(t, x, y, Value(), b.getF32FloatAttr(alpha),
                          b.getF32FloatAttr(1.0f), b.getBoolAttr(tx),
                          b.getBoolAttr(ty))
          .getResult();
    };
    if (e.isActive(a)) {
      Value da = tA ? gemm(tensorTy(a), bm, dy, tB, true)
                    : gemm(tensorTy(a), dy, bm, false, !tB);
      e.accumulate(a, da);
    }
    if (e.isActive(bm)) {
      Value db = tB ? gemm(tensorTy(bm), dy, a, true, tA)
                    : gemm(tensorTy(bm), a, dy, !tA, false);
      e.accumulate(bm, db);
    }
    if (Value c = g.getC(); c && e.isActive(c))
      e.accumulate(c, e.sumTo(e.scale(dy, beta), tensorTy(c)));
    return success();
  }
};

/// numpy.matmul: 1-d operands are promoted to matrices and the batch
/// dimensions broadcast.
struct MatMulGradient
    : DifferentiableOpInterface::ExternalModel<MatMulGradient, MatMulOp> {
  LogicalResult backprop(Operation *op, GradientEmitter &e) const {
    auto mm = cast<MatMulOp>(op);
    Value dy = e.grad(mm.getOutput());
    Value a = mm.getA(), bm = mm.getB();
    auto at = tensorTy(a), bt = tensorTy(bm);
    Type et = at.getElementType();
    // Promote 1-d operands to matrices, as numpy.matmul does.
    SmallVector<int64_t> a2(at.getShape()), b2(bt.getShape());
    bool aVec = a2.size() == 1, bVec = b2.size() == 1;
    if (aVec)
      a2.insert(a2.begin(), 1);
    if (bVec)
      b2.push_back(1);
    auto a2t = RankedTensorType::get(a2, et),
         b2t = RankedTensorType::get(b2, et);
    // The verifier checked that the batch dims broadcast.
    SmallVector<int64_t> batch =
        *broadcastShapes({ArrayRef<int64_t>(a2).drop_back(2),
                          ArrayRef<int64_t>(b2).drop_back(2)});
    int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
    SmallVector<int64_t> y2(batch);
    y2.push_back(m);
    y2.push_back(n);
    Value dy2 = e.reshape(dy, RankedTensorType::get(y2, et));
    if (e.isActive(a)) {
      // dA = dY . B^T, summed over broadcast batch dims.
      Value bT = e.transposeLast2(e.reshape(bm, b2t));
      SmallVector<int64_t> s(batch);
      s.push_back(m);
      s.push_back(k);
      Value da = e.create<MatMulOp>(RankedTensorType::get(s, et), dy2, bT);
      e.accumulate(a, e.reshape(e.sumTo(da, a2t), at));
    }
    if (e.isActive(bm)) {
      // dB = A^T . dY.
      Value aT = e.transposeLast2(e.reshape(a, a2t));
      SmallVector<int64_t> s(batch);
      s.push_back(k);
      s.push_back(n);
      Value db = e.create<MatMulOp>(RankedTensorType::get(s, et), aT, dy2);
      e.accumulate(bm, e.reshape(e.sumTo(db, b2t), bt));
    }
    return success();
  }
};

} // namespace

void registerLinearAlgebraGradients(MLIRContext *ctx) {
  GemmOp::attachInterface<GemmGradient>(*ctx);
  MatMulOp::attachInterface<MatMulGradient>(*ctx);
}

} // namespace shardc
