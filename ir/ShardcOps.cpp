//===- ShardcOps.cpp - Verifiers and folders of shardc ops ----------------===//
//
// Verifiers check what the ODS type constraints cannot: that the static
// result shapes are the ones the op's semantics produce from its operands and
// attributes. The importer builds result types from ONNX shape inference, so
// these checks catch both importer bugs and inconsistent models.
//
//===----------------------------------------------------------------------===//
#include "ir/ShardcDialect.h"
#include "runtime/kernels/FusedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>
#include <optional>

using namespace mlir;

namespace shardc {
namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
Type elemOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

std::string fmt(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace

std::optional<SmallVector<int64_t>>
broadcastShapes(ArrayRef<ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (auto s : shapes)
    rank = std::max(rank, s.size());
  SmallVector<int64_t> out(rank, 1);
  for (auto s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1)
        continue;
      if (o != 1)
        return std::nullopt;
      o = d;
    }
  }
  return out;
}

namespace {

LogicalResult verifyBroadcastResult(Operation *op,
                                    ArrayRef<ArrayRef<int64_t>> shapes,
                                    ArrayRef<int64_t> result) {
  auto expected = broadcastShapes(shapes);
  if (!expected) {
    std::string list;
    for (auto s : shapes)
      list += (list.empty() ? "" : " and ") + fmt(s);
    return op->emitOpError("operand shapes ") << list << " do not broadcast";
  }
  if (ArrayRef<int64_t>(*expected) != result)
    return op->emitOpError("result shape ")
           << fmt(result) << " is not the broadcast shape " << fmt(*expected);
  return success();
}

LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank,
                         StringRef what = "axis") {
  if (axis < 0 || axis >= std::max<int64_t>(rank, 1))
    return op->emitOpError()
           << what << " " << axis << " is out of range for rank " << rank;
  return success();
}

/// Output size of a pooling/convolution window along one spatial dim.
int64_t windowOut(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                  int64_t padBegin, int64_t padEnd, bool ceil) {
  int64_t eff = dilation * (k - 1) + 1;
  int64_t num = in + padBegin + padEnd - eff;
  if (num < 0)
    return 0;
  int64_t out = (ceil ? (num + stride - 1) / stride : num / stride) + 1;
  // With ceil_mode a window must start inside the input or the begin pad.
  if (ceil && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

LogicalResult verifyWindow(Operation *op, ArrayRef<int64_t> inShape,
                           ArrayRef<int64_t> outShape, ArrayRef<int64_t> kernel,
                           ArrayRef<int64_t> strides,
                           ArrayRef<int64_t> dilations, ArrayRef<int64_t> pads,
                           bool ceil) {
  size_t n = kernel.size();
  if (inShape.size() != n + 2 || outShape.size() != n + 2)
    return op->emitOpError("expects input and result of rank ")
           << n + 2 << " for a " << n << "-d window";
  if (strides.size() != n || dilations.size() != n || pads.size() != 2 * n)
    return op->emitOpError("kernel_shape, strides, dilations and pads have ")
           << "inconsistent lengths";
  for (size_t i = 0; i < n; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 ||
        pads[n + i] < 0)
      return op->emitOpError("window sizes, strides and dilations must be ")
             << "positive and pads non-negative";
    int64_t expected = windowOut(inShape[i + 2], kernel[i], strides[i],
                                 dilations[i], pads[i], pads[n + i], ceil);
    if (outShape[i + 2] != expected)
      return op->emitOpError("spatial dim ")
             << i << " of the result is " << outShape[i + 2] << ", expected "
             << expected;
  }
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from result type " << getType();
  return success();
}

LogicalResult RangeOp::verify() {
  for (Value v : {getStart(), getLimit(), getDelta()})
    if (!shapeOf(v).empty())
      return emitOpError("start, limit and delta must be scalars (rank 0)");
  Type t = elemOf(getOutput());
  if (!t.isF32() && !t.isF64() && !t.isInteger(32) && !t.isInteger(64))
    return emitOpError("element type must be f32, f64, i32 or i64, got ") << t;
  if (shapeOf(getOutput()).size() != 1)
    return emitOpError("result must have rank 1");
  return success();
}

LogicalResult ShapeOp::verify() {
  int64_t rank = cast<RankedTensorType>(getInput().getType()).getRank();
  int64_t start = getStart(), end = getEnd().value_or(rank);
  if (start < 0 || end > rank || start > end)
    return emitOpError("start/end out of range for rank ") << rank;
  if (shapeOf(getOutput()) != ArrayRef<int64_t>{end - start})
    return emitOpError("result must be a 1-d tensor of ")
           << end - start << " elements";
  return success();
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> shape = shapeOf(getInput());
  int64_t end = getEnd().value_or(shape.size());
  return DenseElementsAttr::get(
      cast<ShapedType>(getType()),
      ArrayRef<int64_t>(shape).slice(getStart(), end - getStart()));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// The result type of a broadcasting elementwise op: the numpy broadcast of
/// the operand shapes, with the element type of operand `elementOperand`.
static LogicalResult inferBroadcastResult(std::optional<Location> loc,
                                          ValueRange operands,
                                          unsigned elementOperand,
                                          SmallVectorImpl<Type> &inferred) {
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value v : operands) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      return emitOptionalError(loc, "operands must be ranked tensors");
    shapes.push_back(t.getShape());
  }
  std::optional<SmallVector<int64_t>> shape = broadcastShapes(shapes);
  if (!shape) {
    std::string list;
    for (ArrayRef<int64_t> s : shapes)
      list += (list.empty() ? "" : " and ") + fmt(s);
    return emitOptionalError(loc, "operand shapes ", list, " do not broadcast");
  }
  inferred.push_back(
      RankedTensorType::get(*shape, elemOf(operands[elementOperand])));
  return success();
}

/// The verifier's side of the same rule: one error naming the shapes.
static LogicalResult verifyBroadcastOp(Operation *op, unsigned elementOperand) {
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value v : op->getOperands())
    shapes.push_back(shapeOf(v));
  if (failed(verifyBroadcastResult(op, shapes, shapeOf(op->getResult(0)))))
    return failure();
  Type elem = elemOf(op->getOperand(elementOperand));
  if (elemOf(op->getResult(0)) != elem)
    return op->emitOpError("result element type must be ") << elem;
  return success();
}

#define SHARDC_BROADCAST_RESULT(OpT, elementOperand)                           \
  LogicalResult OpT::inferReturnTypes(                                         \
      MLIRContext *, std::optional<Location> loc, ValueRange operands,         \
      DictionaryAttr, OpaqueProperties, RegionRange,                           \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferBroadcastResult(loc, operands, elementOperand, inferred);      \
  }                                                                            \
  LogicalResult OpT::refineReturnTypes(                                        \
      MLIRContext *, std::optional<Location>, ValueRange, DictionaryAttr,      \
      OpaqueProperties, RegionRange, SmallVectorImpl<Type> &) {                \
    return success();                                                          \
  }                                                                            \
  LogicalResult OpT::verify() {                                                \
    return verifyBroadcastOp(*this, elementOperand);                           \
  }
SHARDC_BROADCAST_RESULT(AddOp, 0)
SHARDC_BROADCAST_RESULT(SubOp, 0)
SHARDC_BROADCAST_RESULT(MulOp, 0)
SHARDC_BROADCAST_RESULT(DivOp, 0)
SHARDC_BROADCAST_RESULT(MaxOp, 0)
SHARDC_BROADCAST_RESULT(MinOp, 0)
// Pow's result has the base's element type; the exponent's may differ.
SHARDC_BROADCAST_RESULT(PowOp, 0)
// Where(condition, x, y) has x's (and y's) element type.
SHARDC_BROADCAST_RESULT(WhereOp, 1)
#undef SHARDC_BROADCAST_RESULT

LogicalResult EqualOp::verify() {
  if (elemOf(getLhs()) != elemOf(getRhs()))
    return emitOpError("operands must have one element type, got ")
           << elemOf(getLhs()) << " and " << elemOf(getRhs());
  return verifyBroadcastResult(*this, {shapeOf(getLhs()), shapeOf(getRhs())},
                               shapeOf(getOutput()));
}

/// Comparisons and logic: operands of one element type, an i1 result of
/// their broadcast shape.
#define SHARDC_COMPARE_RESULT(OpT)                                             \
  LogicalResult OpT::inferReturnTypes(                                         \
      MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,      \
      DictionaryAttr, OpaqueProperties, RegionRange,                           \
      SmallVectorImpl<Type> &inferred) {                                       \
    if (failed(inferBroadcastResult(loc, operands, 0, inferred)))              \
      return failure();                                                        \
    inferred.back() = RankedTensorType::get(                                   \
        cast<RankedTensorType>(inferred.back()).getShape(),                    \
        IntegerType::get(ctx, 1));                                             \
    return success();                                                          \
  }                                                                            \
  LogicalResult OpT::refineReturnTypes(                                        \
      MLIRContext *, std::optional<Location>, ValueRange, DictionaryAttr,      \
      OpaqueProperties, RegionRange, SmallVectorImpl<Type> &) {                \
    return success();                                                          \
  }                                                                            \
  LogicalResult OpT::verify() {                                                \
    if (elemOf(getLhs()) != elemOf(getRhs()))                                  \
      return emitOpError("operands must have one element type, got ")          \
             << elemOf(getLhs()) << " and " << elemOf(getRhs());               \
    return verifyBroadcastResult(                                              \
        *this, {shapeOf(getLhs()), shapeOf(getRhs())}, shapeOf(getOutput()));  \
  }
SHARDC_COMPARE_RESULT(GreaterOp)
SHARDC_COMPARE_RESULT(LessOp)
SHARDC_COMPARE_RESULT(GreaterOrEqualOp)
SHARDC_COMPARE_RESULT(LessOrEqualOp)
SHARDC_COMPARE_RESULT(AndOp)
SHARDC_COMPARE_RESULT(OrOp)
SHARDC_COMPARE_RESULT(XorOp)
#undef SHARDC_COMPARE_RESULT

LogicalResult CastOp::verify() {
  if (shapeOf(getInput()) != shapeOf(getOutput()))
    return emitOpError("result shape must equal the input shape");
  if (onnxTypeCode(elemOf(getOutput())) < 0)
    return emitOpError("unsupported target element type ")
           << elemOf(getOutput());
  return success();
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0.0 && ratio < 1.0))
    return emitOpError("ratio must be in [0, 1), got ") << ratio;
  // I64Attr getters are unsigned; the attributes are signed.
  auto site = static_cast<int64_t>(getSite());
  auto axis = static_cast<int64_t>(getBatchAxis());
  if (site < 0 || site > int64_t(UINT32_MAX))
    return emitOpError("site must be in [0, 2^32), got ") << site;
  ArrayRef<int64_t> shape = shapeOf(getInput());
  int64_t rank = shape.size();
  if (axis < -1 || axis >= rank)
    return emitOpError("batch_axis must be -1 or an axis of the input, got ")
           << axis;
  auto outer = static_cast<int64_t>(getBatchOuter());
  if (outer < 1)
    return emitOpError("batch_outer must be at least 1, got ") << outer;
  if (axis == -1 && outer != 1)
    return emitOpError("batch_outer must be 1 without a batch axis, got ")
           << outer;
  if (axis >= 0 && !ShapedType::isDynamic(shape[axis]) &&
      shape[axis] % outer != 0)
    return emitOpError("batch_outer ")
           << outer << " does not divide the batch axis's size " << shape[axis];
  auto micro = static_cast<int64_t>(getMicroBatch());
  auto micros = static_cast<int64_t>(getMicroBatches());
  if (micros < 1 || micro < 0 || micro >= micros)
    return emitOpError("micro_batch must be in [0, micro_batches), got ")
           << micro << " of " << micros;
  if (getMask() && shapeOf(getMask()) != shapeOf(getInput()))
    return emitOpError("mask must have the input's shape");
  return success();
}

namespace {
/// An unused mask result is dropped: the kernel then writes no mask.
struct DropUnusedDropoutMask : OpRewritePattern<DropoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DropoutOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getMask() || !op.getMask().use_empty())
      return failure();
    auto lean = rewriter.create<DropoutOp>(
        op.getLoc(), op.getOutput().getType(), Type(), op.getInput(),
        op.getRatioAttr(), op.getSiteAttr(), op.getBatchAxisAttr(),
        op.getBatchOuterAttr());
    lean->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceAllUsesWith(op.getOutput(), lean.getOutput());
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void DropoutOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<DropUnusedDropoutMask>(context);
}

//===----------------------------------------------------------------------===//
// Linear algebra, normalization
//===----------------------------------------------------------------------===//

/// Every present value of `values` has `values[0]`'s element type.
static LogicalResult verifyOneElementType(Operation *op, ArrayRef<Value> values,
                                          StringRef what) {
  Type first = elemOf(values[0]);
  for (Value v : values.drop_front())
    if (v && elemOf(v) != first)
      return op->emitOpError() << what << " must have one element type, got "
                               << first << " and " << elemOf(v);
  return success();
}

LogicalResult GemmOp::verify() {
  if (failed(verifyOneElementType(*this, {getA(), getB(), getC(), getOutput()},
                                  "A, B, C and result")))
    return failure();
  auto a = shapeOf(getA()), b = shapeOf(getB());
  if (a.size() != 2 || b.size() != 2)
    return emitOpError("A and B must be 2-d");
  int64_t m = getTransA() ? a[1] : a[0], k = getTransA() ? a[0] : a[1];
  int64_t kb = getTransB() ? b[1] : b[0], n = getTransB() ? b[0] : b[1];
  if (k != kb)
    return emitOpError("inner dimensions differ: ") << k << " vs " << kb;
  if (shapeOf(getOutput()) != ArrayRef<int64_t>{m, n})
    return emitOpError("result must be ") << fmt({m, n});
  if (getC() && !broadcastShapes({shapeOf(getC()), ArrayRef<int64_t>{m, n}}))
    return emitOpError("C of shape ")
           << fmt(shapeOf(getC())) << " does not broadcast to " << fmt({m, n});
  return success();
}

LogicalResult MatMulOp::verify() {
  SmallVector<int64_t> a(shapeOf(getA())), b(shapeOf(getB()));
  if (a.empty() || b.empty())
    return emitOpError("operands must have rank >= 1");
  if (elemOf(getA()) != elemOf(getB()) || elemOf(getA()) != elemOf(getOutput()))
    return emitOpError("operands and result must have one element type");
  bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec)
    a.insert(a.begin(), 1);
  if (bVec)
    b.push_back(1);
  if (a.back() != b[b.size() - 2])
    return emitOpError("inner dimensions differ: ")
           << a.back() << " vs " << b[b.size() - 2];
  auto batch = broadcastShapes(
      {ArrayRef<int64_t>(a).drop_back(2), ArrayRef<int64_t>(b).drop_back(2)});
  if (!batch)
    return emitOpError("batch dimensions do not broadcast");
  SmallVector<int64_t> expected = *batch;
  if (!aVec)
    expected.push_back(a[a.size() - 2]);
  if (!bVec)
    expected.push_back(b.back());
  if (shapeOf(getOutput()) != ArrayRef<int64_t>(expected))
    return emitOpError("result shape ")
           << fmt(shapeOf(getOutput())) << ", expected " << fmt(expected);
  return success();
}

/// Whether `perm` is a permutation of [0, rank).
static bool isPermutation(ArrayRef<int64_t> perm, size_t rank) {
  if (perm.size() != rank)
    return false;
  SmallVector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p])
      return false;
    seen[p] = true;
  }
  return true;
}

LogicalResult PermutedMatMulOp::verify() {
  ArrayRef<int64_t> a = shapeOf(getA()), b = shapeOf(getB());
  size_t rank = a.size();
  if (rank < 3 || b.size() != rank || shapeOf(getOutput()).size() != rank)
    return emitOpError("operands and result must have one rank, at least 3");
  if (elemOf(getA()) != elemOf(getB()) || elemOf(getA()) != elemOf(getOutput()))
    return emitOpError("operands and result must have one element type");
  int64_t last = static_cast<int64_t>(rank) - 1;
  for (auto [name, perm] :
       {std::pair<StringRef, ArrayRef<int64_t>>("a_perm", getAPerm()),
        {"b_perm", getBPerm()},
        {"output_perm", getOutputPerm()}}) {
    if (!isPermutation(perm, rank))
      return emitOpError(name) << " must be a permutation of the " << rank
                               << " dimensions, got " << fmt(perm);
    if (name == "output_perm" ? perm[last] != last
                              : perm[last] != last && perm[last - 1] != last)
      return emitOpError(name)
             << " " << fmt(perm)
             << (name == "output_perm"
                     ? " must keep the last dimension last"
                     : " must keep the last dimension among the matrix's two");
  }
  SmallVector<int64_t> pa, pb;
  for (size_t i = 0; i < rank; ++i) {
    pa.push_back(a[getAPerm()[i]]);
    pb.push_back(b[getBPerm()[i]]);
  }
  if (pa[last] != pb[last - 1])
    return emitOpError("inner dimensions differ: ")
           << pa[last] << " vs " << pb[last - 1];
  if (ArrayRef<int64_t>(pa).drop_back(2) != ArrayRef<int64_t>(pb).drop_back(2))
    return emitOpError("permuted batch dimensions differ: ")
           << fmt(ArrayRef<int64_t>(pa).drop_back(2)) << " vs "
           << fmt(ArrayRef<int64_t>(pb).drop_back(2));
  SmallVector<int64_t> product(pa.begin(), pa.end() - 1);
  product.push_back(pb[last]);
  SmallVector<int64_t> expected;
  for (int64_t p : getOutputPerm())
    expected.push_back(product[p]);
  if (shapeOf(getOutput()) != ArrayRef<int64_t>(expected))
    return emitOpError("result shape ")
           << fmt(shapeOf(getOutput())) << ", expected " << fmt(expected);
  return success();
}

namespace {
/// MatMul(x, Transpose(w)) with 2-d w -> Reshape(Gemm(Reshape(x), w, transB)).
struct MatMulOfTransposedWeight : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getB().getDefiningOp<TransposeOp>();
    if (!t || t.getPerm() != ArrayRef<int64_t>{1, 0})
      return failure();
    auto x = cast<RankedTensorType>(op.getA().getType());
    auto w = cast<RankedTensorType>(t.getInput().getType());
    auto out = cast<RankedTensorType>(op.getType());
    if (x.getRank() < 2 || !isa<FloatType>(x.getElementType()) ||
        x.getElementType() != w.getElementType())
      return failure();
    int64_t k = x.getShape().back(),
            rows = x.getNumElements() / std::max<int64_t>(k, 1);
    if (k == 0 || rows * k != x.getNumElements())
      return failure();
    Location loc = op.getLoc();
    // The new ops keep the MatMul's discardable attributes: which side of
    // the step it is on (ZeRO-3 gathers a unit again for backward's uses),
    // its micro-batch, recomputation and memory category.
    DictionaryAttr attrs = op->getDiscardableAttrDictionary();
    auto keep = [&](Value v) {
      v.getDefiningOp()->setDiscardableAttrs(attrs);
      return v;
    };
    auto x2 = RankedTensorType::get({rows, k}, x.getElementType());
    auto y2 =
        RankedTensorType::get({rows, w.getDimSize(0)}, x.getElementType());
    if (y2.getNumElements() != out.getNumElements())
      return failure();
    Value a = op.getA();
    if (x != x2)
      a = keep(rewriter.create<ReshapeOp>(loc, x2, a));
    Value g = keep(rewriter.create<GemmOp>(
        loc, y2, a, t.getInput(), Value(), rewriter.getF32FloatAttr(1.0f),
        rewriter.getF32FloatAttr(1.0f), rewriter.getBoolAttr(false),
        rewriter.getBoolAttr(true)));
    if (y2 != out)
      g = keep(rewriter.create<ReshapeOp>(loc, out, g));
    rewriter.replaceOp(op, g);
    return success();
  }
};
} // namespace

void MatMulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<MatMulOfTransposedWeight>(context);
}

namespace {
/// Add(Gemm(a, b), bias), the Gemm seen through a Reshape, where the Gemm
/// has no C and is used only there and the bias is a row of the Gemm's
/// columns (shape [N], or [1, ..., 1, N]) -> Gemm(a, b, C = bias) (through
/// the Reshape): a linear layer's bias added as the product is written
/// (BLAS's beta = 1 on the bias rows, which costs what its zero fill did)
/// instead of in another pass over the result. Both ops must carry the same
/// discardable attributes (one side of the step, one micro-batch).
struct BiasIntoGemm : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (int side = 0; side < 2; ++side) {
      Value product = side ? add.getRhs() : add.getLhs();
      Value bias = side ? add.getLhs() : add.getRhs();
      auto reshape = product.getDefiningOp<ReshapeOp>();
      auto gemm =
          (reshape ? reshape.getInput() : product).getDefiningOp<GemmOp>();
      if (!gemm || gemm.getC() || !gemm->hasOneUse() ||
          (reshape && !reshape->hasOneUse()) || !product.hasOneUse())
        continue;
      if (gemm->getDiscardableAttrDictionary() !=
              add->getDiscardableAttrDictionary() ||
          (reshape && reshape->getDiscardableAttrDictionary() !=
                          add->getDiscardableAttrDictionary()))
        continue;
      auto out = cast<RankedTensorType>(gemm.getType());
      auto biasType = dyn_cast<RankedTensorType>(bias.getType());
      int64_t n = out.getDimSize(1);
      if (!biasType || biasType.getElementType() != out.getElementType() ||
          biasType.getRank() == 0 || biasType.getShape().back() != n ||
          biasType.getNumElements() != n ||
          shapeOf(add.getOutput()) != shapeOf(product))
        continue;
      // The bias must exist before the product does.
      if (Operation *def = bias.getDefiningOp())
        if (def->getBlock() != gemm->getBlock() || !def->isBeforeInBlock(gemm))
          continue;
      DictionaryAttr attrs = add->getDiscardableAttrDictionary();
      rewriter.setInsertionPoint(gemm);
      Value c = bias;
      if (biasType.getRank() != 1) {
        c = rewriter.create<ReshapeOp>(
            add.getLoc(), RankedTensorType::get({n}, out.getElementType()),
            bias);
        c.getDefiningOp()->setDiscardableAttrs(attrs);
      }
      auto withBias = rewriter.create<GemmOp>(
          gemm.getLoc(), out, gemm.getA(), gemm.getB(), c, gemm.getAlphaAttr(),
          rewriter.getF32FloatAttr(1.0f), gemm.getTransAAttr(),
          gemm.getTransBAttr());
      withBias->setDiscardableAttrs(attrs);
      Value result = withBias;
      if (reshape) {
        rewriter.setInsertionPoint(reshape);
        result = rewriter.create<ReshapeOp>(reshape.getLoc(), reshape.getType(),
                                            withBias);
        result.getDefiningOp()->setDiscardableAttrs(attrs);
      }
      rewriter.replaceOp(add, result);
      return success();
    }
    return failure();
  }
};
} // namespace

void GemmOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                         MLIRContext *context) {
  // Rooted at the Add that consumes the product.
  patterns.add<BiasIntoGemm>(context);
}

static LogicalResult verifySoftmaxLike(Operation *op, int64_t axis) {
  return verifyAxis(op, axis, shapeOf(op->getOperand(0)).size());
}
LogicalResult SoftmaxOp::verify() {
  return verifySoftmaxLike(*this, getAxis());
}
LogicalResult LogSoftmaxOp::verify() {
  return verifySoftmaxLike(*this, getAxis());
}

LogicalResult LayerNormalizationOp::verify() {
  if (failed(verifyOneElementType(
          *this, {getInput(), getScale(), getBias(), getOutput()},
          "input, scale, bias and result")))
    return failure();
  auto x = shapeOf(getInput());
  int64_t axis = getAxis();
  if (failed(verifyAxis(*this, axis, x.size())))
    return failure();
  if (shapeOf(getOutput()) != x)
    return emitOpError("result shape must equal the input shape");
  auto normShape = x.drop_front(axis);
  if (!broadcastShapes({shapeOf(getScale()), normShape}) ||
      (getBias() && !broadcastShapes({shapeOf(getBias()), normShape})))
    return emitOpError("scale and bias must broadcast to the normalized shape ")
           << fmt(normShape);
  SmallVector<int64_t> stat(x.take_front(axis));
  stat.append(x.size() - axis, 1);
  if (shapeOf(getMean()) != ArrayRef<int64_t>(stat) ||
      shapeOf(getInvStdDev()) != ArrayRef<int64_t>(stat))
    return emitOpError("mean and inv_std_dev must have shape ") << fmt(stat);
  return success();
}

/// A BatchNormalization's `moments` and `batch_count`: both or neither, in
/// training mode, (2 * channels) moments and at least one value per channel.
static LogicalResult verifyGlobalMoments(Operation *op, int64_t channels,
                                         Value moments,
                                         std::optional<uint64_t> count,
                                         bool training) {
  if (!moments || !count)
    return op->emitOpError("takes moments and batch_count together");
  if (!training)
    return op->emitOpError("moments need training_mode");
  if (shapeOf(moments) != ArrayRef<int64_t>{2 * channels})
    return op->emitOpError("moments must have shape [")
           << 2 * channels << "] (two per channel)";
  if (static_cast<int64_t>(*count) < 1)
    return op->emitOpError("batch_count must be positive");
  return success();
}

/// The (2 * C) moments `result` of an (N, C, ...) input `x` over a global
/// batch of `count` values per channel, a multiple of this input's.
static LogicalResult verifyMomentsOf(Operation *op, ArrayRef<int64_t> x,
                                     Value result, StringRef name,
                                     uint64_t count) {
  if (shapeOf(result) != ArrayRef<int64_t>{2 * x[1]})
    return op->emitOpError()
           << name << " must have shape [" << 2 * x[1] << "] (two per channel)";
  int64_t local = x[0];
  for (int64_t d : x.drop_front(2))
    local *= d;
  auto global = static_cast<int64_t>(count);
  if (global < 1 || local < 1 || global % local != 0)
    return op->emitOpError("count ")
           << global << " must be a positive multiple of the input's " << local
           << " values per channel";
  return success();
}

LogicalResult BatchNormalizationOp::verify() {
  if (failed(verifyOneElementType(
          *this, {getInput(), getScale(), getBias(), getOutput()},
          "input, scale, bias and result")))
    return failure();
  // The statistics may be in another float type (ONNX's T2: buffers kept in
  // float32 under mixed precision).
  if (failed(verifyOneElementType(
          *this, {getMean(), getVar(), getRunningMean(), getRunningVar()},
          "mean, var and running statistics")))
    return failure();
  auto x = shapeOf(getInput());
  if (x.size() < 2)
    return emitOpError("input must have rank >= 2 (N, C, ...)");
  SmallVector<int64_t, 1> c{x[1]};
  for (Value v : {getScale(), getBias(), getMean(), getVar(), getRunningMean(),
                  getRunningVar()})
    if (shapeOf(v) != ArrayRef<int64_t>(c))
      return emitOpError("scale, bias, mean, var and running statistics must ")
             << "have shape " << fmt(c);
  if (shapeOf(getOutput()) != x)
    return emitOpError("result shape must equal the input shape");
  if (getMoments() || getBatchCount())
    return verifyGlobalMoments(*this, c[0], getMoments(), getBatchCount(),
                               getTrainingMode());
  return success();
}

LogicalResult BatchNormStatsOp::verify() {
  auto x = shapeOf(getInput());
  if (x.size() < 2)
    return emitOpError("input must have rank >= 2 (N, C, ...)");
  return verifyMomentsOf(*this, x, getResult(), "result", getCount());
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

LogicalResult ConvOp::verify() {
  if (failed(verifyOneElementType(
          *this, {getInput(), getWeight(), getBias(), getOutput()},
          "input, weight, bias and result")))
    return failure();
  auto x = shapeOf(getInput()), w = shapeOf(getWeight()),
       y = shapeOf(getOutput());
  if (x.size() < 3)
    return emitOpError("input must have shape [N, C, spatial...] (rank >= 3)");
  if (w.size() != x.size())
    return emitOpError("weight rank must equal input rank");
  int64_t g = getGroup();
  if (g < 1 || x[1] % g != 0 || w[0] % g != 0)
    return emitOpError("group ") << g << " must divide input channels " << x[1]
                                 << " and output channels " << w[0];
  if (w[1] * g != x[1])
    return emitOpError("weight has ")
           << w[1] << " input channels per group, expected " << x[1] / g;
  if (getKernelShape() != w.drop_front(2))
    return emitOpError("kernel_shape must equal the weight's spatial dims");
  if (y.size() >= 2 && (y[0] != x[0] || y[1] != w[0]))
    return emitOpError("result must have shape [N, M, ...] = [")
           << x[0] << ", " << w[0] << ", ...]";
  if (getBias() && shapeOf(getBias()) != ArrayRef<int64_t>{w[0]})
    return emitOpError("bias must have shape [") << w[0] << "]";
  return verifyWindow(*this, x, y, getKernelShape(), getStrides(),
                      getDilations(), getPads(), false);
}

LogicalResult MaxPoolOp::verify() {
  auto x = shapeOf(getInput()), y = shapeOf(getOutput());
  if (x.size() >= 2 && (y.size() < 2 || y[0] != x[0] || y[1] != x[1]))
    return emitOpError("result must keep N and C of the input");
  if (getIndices() && shapeOf(getIndices()) != y)
    return emitOpError("indices must have the result's shape");
  return verifyWindow(*this, x, y, getKernelShape(), getStrides(),
                      getDilations(), getPads(), getCeilMode() != 0);
}

LogicalResult AveragePoolOp::verify() {
  auto x = shapeOf(getInput()), y = shapeOf(getOutput());
  if (x.size() >= 2 && (y.size() < 2 || y[0] != x[0] || y[1] != x[1]))
    return emitOpError("result must keep N and C of the input");
  SmallVector<int64_t> ones(getKernelShape().size(), 1);
  return verifyWindow(*this, x, y, getKernelShape(), getStrides(), ones,
                      getPads(), getCeilMode() != 0);
}

LogicalResult GlobalAveragePoolOp::verify() {
  auto x = shapeOf(getInput());
  if (x.size() < 2)
    return emitOpError("input must have rank >= 2");
  SmallVector<int64_t> expected{x[0], x[1]};
  expected.append(x.size() - 2, 1);
  if (shapeOf(getOutput()) != ArrayRef<int64_t>(expected))
    return emitOpError("result must have shape ") << fmt(expected);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type must not change");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << fmt(in.getShape()) << " (" << in.getNumElements()
           << " elements) to " << fmt(out.getShape()) << " ("
           << out.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto c = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    return c.reshape(cast<ShapedType>(getType()));
  return {};
}

LogicalResult TriluOp::verify() {
  if (shapeOf(getInput()).size() < 2)
    return emitOpError("input must have rank >= 2");
  return success();
}

LogicalResult TransposeOp::verify() {
  auto in = shapeOf(getInput());
  ArrayRef<int64_t> perm = getPerm();
  if (perm.size() != in.size())
    return emitOpError("perm must have ") << in.size() << " entries";
  SmallVector<bool> seen(in.size(), false);
  SmallVector<int64_t> expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= (int64_t)in.size() || seen[p])
      return emitOpError("perm is not a permutation");
    seen[p] = true;
    expected.push_back(in[p]);
  }
  if (shapeOf(getOutput()) != ArrayRef<int64_t>(expected))
    return emitOpError("result must have shape ") << fmt(expected);
  return success();
}

LogicalResult GatherOp::verify() {
  auto data = shapeOf(getData()), idx = shapeOf(getIndices());
  int64_t axis = getAxis();
  if (data.empty())
    return emitOpError("data must have rank >= 1");
  if (failed(verifyAxis(*this, axis, data.size())))
    return failure();
  SmallVector<int64_t> expected(data.take_front(axis));
  expected.append(idx.begin(), idx.end());
  expected.append(data.begin() + axis + 1, data.end());
  if (shapeOf(getOutput()) != ArrayRef<int64_t>(expected))
    return emitOpError("result must have shape ") << fmt(expected);
  return success();
}

/// GatherElements' operands: indices of data's rank (at most 8), no larger
/// than data off the axis, and the result (or gradient) of the indices'
/// shape.
static LogicalResult verifyGatherElements(Operation *op, ArrayRef<int64_t> data,
                                          ArrayRef<int64_t> idx,
                                          ArrayRef<int64_t> result,
                                          int64_t axis, StringRef resultName) {
  if (data.empty() || data.size() > 8)
    return op->emitOpError("data must have rank 1 to 8, got ") << data.size();
  if (failed(verifyAxis(op, axis, data.size())))
    return failure();
  if (idx.size() != data.size())
    return op->emitOpError("indices must have the data's rank ")
           << data.size() << ", got " << idx.size();
  for (size_t d = 0; d < data.size(); ++d)
    if ((int64_t)d != axis && idx[d] > data[d])
      return op->emitOpError("indices dimension ")
             << d << " (" << idx[d] << ") exceeds the data's (" << data[d]
             << ")";
  if (result != idx)
    return op->emitOpError()
           << resultName << " must have the indices' shape " << fmt(idx);
  return success();
}

LogicalResult GatherElementsOp::verify() {
  return verifyGatherElements(*this, shapeOf(getData()), shapeOf(getIndices()),
                              shapeOf(getOutput()), getAxis(), "result");
}

LogicalResult ScatterElementsOp::verify() {
  if (failed(verifyGatherElements(*this, shapeOf(getData()),
                                  shapeOf(getIndices()), shapeOf(getUpdates()),
                                  getAxis(), "updates")))
    return failure();
  if (shapeOf(getOutput()) != shapeOf(getData()))
    return emitOpError("result must have the data's shape ")
           << fmt(shapeOf(getData()));
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  auto first = shapeOf(getInputs()[0]);
  int64_t axis = getAxis();
  if (first.empty())
    return emitOpError("inputs must have rank >= 1");
  if (failed(verifyAxis(*this, axis, first.size())))
    return failure();
  SmallVector<int64_t> expected(first);
  expected[axis] = 0;
  for (Value v : getInputs()) {
    auto s = shapeOf(v);
    if (s.size() != first.size() || elemOf(v) != elemOf(getOutput()))
      return emitOpError("inputs must share rank and element type");
    for (size_t i = 0; i < s.size(); ++i)
      if ((int64_t)i != axis && s[i] != first[i])
        return emitOpError("inputs differ outside the concat axis");
    expected[axis] += s[axis];
  }
  if (shapeOf(getOutput()) != ArrayRef<int64_t>(expected))
    return emitOpError("result must have shape ") << fmt(expected);
  return success();
}

LogicalResult SplitOp::verify() {
  auto in = shapeOf(getInput());
  int64_t axis = getAxis();
  if (in.empty())
    return emitOpError("input must have rank >= 1");
  if (failed(verifyAxis(*this, axis, in.size())))
    return failure();
  int64_t total = 0;
  for (Value v : getOutputs()) {
    auto s = shapeOf(v);
    if (s.size() != in.size())
      return emitOpError("outputs must have the input's rank");
    if (elemOf(v) != elemOf(getInput()))
      return emitOpError("outputs must have the input's element type");
    for (size_t i = 0; i < s.size(); ++i)
      if ((int64_t)i != axis && s[i] != in[i])
        return emitOpError("outputs differ from the input outside the axis");
    total += s[axis];
  }
  if (total != in[axis])
    return emitOpError("output sizes along axis sum to ")
           << total << ", expected " << in[axis];
  return success();
}

/// `out` is the slice of `in` with one start and step per dimension.
static LogicalResult verifySliceShapes(Operation *op, ArrayRef<int64_t> in,
                                       ArrayRef<int64_t> out,
                                       ArrayRef<int64_t> starts,
                                       ArrayRef<int64_t> steps) {
  if (starts.size() != in.size() || steps.size() != in.size() ||
      out.size() != in.size())
    return op->emitOpError("starts, steps and the sliced shape need one entry "
                           "per dim");
  for (size_t i = 0; i < in.size(); ++i) {
    if (steps[i] == 0)
      return op->emitOpError("step of dim ") << i << " is zero";
    if (out[i] == 0)
      continue;
    int64_t last = starts[i] + (out[i] - 1) * steps[i];
    if (starts[i] < 0 || starts[i] >= in[i] || last < 0 || last >= in[i])
      return op->emitOpError("slice of dim ") << i << " leaves the input";
  }
  return success();
}

LogicalResult SliceOp::verify() {
  return verifySliceShapes(*this, shapeOf(getInput()), shapeOf(getOutput()),
                           getStarts(), getSteps());
}

LogicalResult ExpandOp::verify() {
  if (elemOf(getInput()) != elemOf(getOutput()))
    return emitOpError("element type must not change");
  return verifyBroadcastResult(
      *this, {shapeOf(getInput()), shapeOf(getOutput())}, shapeOf(getOutput()));
}

static LogicalResult verifyReduce(Operation *op, ArrayRef<int64_t> axes,
                                  bool keepdims) {
  auto in = shapeOf(op->getOperand(0));
  SmallVector<int64_t> expected;
  for (size_t i = 0, j = 0; i < in.size(); ++i) {
    bool reduced = j < axes.size() && axes[j] == (int64_t)i;
    if (reduced)
      ++j;
    if (!reduced)
      expected.push_back(in[i]);
    else if (keepdims)
      expected.push_back(1);
  }
  for (size_t j = 0; j < axes.size(); ++j)
    if (axes[j] < 0 || axes[j] >= (int64_t)in.size() ||
        (j && axes[j] <= axes[j - 1]))
      return op->emitOpError("axes must be sorted, unique and in range");
  if (shapeOf(op->getResult(0)) != ArrayRef<int64_t>(expected))
    return op->emitOpError("result must have shape ") << fmt(expected);
  return success();
}
LogicalResult ReduceMeanOp::verify() {
  return verifyReduce(*this, getAxes(), getKeepdims() != 0);
}
LogicalResult ReduceSumOp::verify() {
  return verifyReduce(*this, getAxes(), getKeepdims() != 0);
}
LogicalResult ReduceMaxOp::verify() {
  return verifyReduce(*this, getAxes(), getKeepdims() != 0);
}
LogicalResult ReduceMinOp::verify() {
  return verifyReduce(*this, getAxes(), getKeepdims() != 0);
}

LogicalResult ArgMaxOp::verify() {
  auto in = shapeOf(getInput());
  int64_t axis = getAxis();
  if (in.empty())
    return emitOpError("input must have rank >= 1");
  if (failed(verifyAxis(*this, axis, in.size())))
    return failure();
  SmallVector<int64_t> expected(in.begin(), in.end());
  if (getKeepdims())
    expected[axis] = 1;
  else
    expected.erase(expected.begin() + axis);
  if (shapeOf(getOutput()) != ArrayRef<int64_t>(expected))
    return emitOpError("result must have shape ") << fmt(expected);
  return success();
}

LogicalResult TopKIndicesOp::verify() {
  auto in = shapeOf(getInput());
  int64_t axis = getAxis(), k = getK();
  if (in.empty())
    return emitOpError("input must have rank >= 1");
  if (failed(verifyAxis(*this, axis, in.size())))
    return failure();
  if (k < 0 || k > in[axis])
    return emitOpError("k ")
           << k << " is out of range [0, " << in[axis] << "] for axis " << axis;
  SmallVector<int64_t> expected(in.begin(), in.end());
  expected[axis] = k;
  if (shapeOf(getOutput()) != ArrayRef<int64_t>(expected))
    return emitOpError("result must have shape ") << fmt(expected);
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

static LogicalResult verifyLoss(Operation *op, Value scores, Value labels,
                                Value weights, Value loss,
                                LossReduction reduction) {
  auto s = shapeOf(scores), l = shapeOf(labels);
  if (s.size() < 2)
    return op->emitOpError("scores must have shape [N, C, ...]");
  SmallVector<int64_t> expectedLabels{s[0]};
  expectedLabels.append(s.begin() + 2, s.end());
  if (l != ArrayRef<int64_t>(expectedLabels))
    return op->emitOpError("labels must have shape ") << fmt(expectedLabels);
  if (weights && shapeOf(weights) != ArrayRef<int64_t>{s[1]})
    return op->emitOpError("weights must have shape [") << s[1] << "]";
  ArrayRef<int64_t> expectedLoss = reduction == LossReduction::None
                                       ? ArrayRef<int64_t>(expectedLabels)
                                       : ArrayRef<int64_t>{};
  if (shapeOf(loss) != expectedLoss)
    return op->emitOpError("loss must have shape ") << fmt(expectedLoss);
  return success();
}

LogicalResult SoftmaxCrossEntropyLossOp::verify() {
  if (failed(verifyOneElementType(
          *this, {getScores(), getLoss(), getWeights(), getLogProb()},
          "scores, loss, weights and log_prob")))
    return failure();
  if (getLogProb() && shapeOf(getLogProb()) != shapeOf(getScores()))
    return emitOpError("log_prob must have the scores' shape");
  return verifyLoss(*this, getScores(), getLabels(), getWeights(), getLoss(),
                    getReduction());
}

LogicalResult NegativeLogLikelihoodLossOp::verify() {
  if (failed(verifyOneElementType(*this, {getInput(), getLoss(), getWeight()},
                                  "input, loss and weight")))
    return failure();
  return verifyLoss(*this, getInput(), getTarget(), getWeight(), getLoss(),
                    getReduction());
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

LogicalResult ConvGradInputOp::verify() {
  auto x = shapeOf(getInputGrad()), w = shapeOf(getWeight()),
       y = shapeOf(getGrad());
  if (x.size() < 3 || x.size() != w.size() || y.size() != x.size())
    return emitOpError("gradient, weight and input gradient must share a "
                       "rank >= 3");
  if (y[1] != w[0] || x[1] != w[1] * static_cast<int64_t>(getGroup()))
    return emitOpError("channels do not match the weight");
  return verifyWindow(*this, x, y, getKernelShape(), getStrides(),
                      getDilations(), getPads(), false);
}

LogicalResult ConvGradWeightOp::verify() {
  auto x = shapeOf(getInput()), w = shapeOf(getWeightGrad()),
       y = shapeOf(getGrad());
  if (x.size() < 3 || x.size() != w.size() || y.size() != x.size())
    return emitOpError("gradient, input and weight gradient must share a "
                       "rank >= 3");
  if (y[1] != w[0] || x[1] != w[1] * static_cast<int64_t>(getGroup()) ||
      getKernelShape() != w.drop_front(2))
    return emitOpError("weight gradient shape does not match the convolution");
  return verifyWindow(*this, x, y, getKernelShape(), getStrides(),
                      getDilations(), getPads(), false);
}

LogicalResult MaxPoolGradOp::verify() {
  if (shapeOf(getIndices()) != shapeOf(getGrad()))
    return emitOpError("indices must have the gradient's shape");
  if (shapeOf(getInputGrad()).size() != shapeOf(getGrad()).size())
    return emitOpError("input gradient must have the gradient's rank");
  return success();
}

LogicalResult AveragePoolGradOp::verify() {
  SmallVector<int64_t> ones(getKernelShape().size(), 1);
  return verifyWindow(*this, shapeOf(getInputGrad()), shapeOf(getGrad()),
                      getKernelShape(), getStrides(), ones, getPads(),
                      getCeilMode() != 0);
}

LogicalResult LayerNormGradOp::verify() {
  if (shapeOf(getInputGrad()) != shapeOf(getInput()) ||
      shapeOf(getGrad()) != shapeOf(getInput()))
    return emitOpError("gradients must have the input's shape");
  if (shapeOf(getScaleGrad()) != shapeOf(getScale()) ||
      shapeOf(getBiasGrad()) != shapeOf(getScale()))
    return emitOpError("scale and bias gradients must have the scale's shape");
  return verifyAxis(*this, getAxis(), shapeOf(getInput()).size());
}

LogicalResult BatchNormGradOp::verify() {
  auto x = shapeOf(getInput());
  if (x.size() < 2 || shapeOf(getInputGrad()) != x || shapeOf(getGrad()) != x)
    return emitOpError("gradients must have the input's shape [N, C, ...]");
  SmallVector<int64_t, 1> c{x[1]};
  for (Value v :
       {getScale(), getMean(), getVar(), getScaleGrad(), getBiasGrad()})
    if (shapeOf(v) != ArrayRef<int64_t>(c))
      return emitOpError("per-channel values must have shape ") << fmt(c);
  if (!getMoments() != !getGradMoments())
    return emitOpError("takes moments and grad_moments together");
  if (getMoments()) {
    if (!getTrainingMode())
      return emitOpError("moments need training_mode");
    for (Value v : {getMoments(), getGradMoments()})
      if (shapeOf(v) != ArrayRef<int64_t>{2 * c[0]})
        return emitOpError("moments and grad_moments must have shape [")
               << 2 * c[0] << "] (two per channel)";
  }
  return success();
}

LogicalResult BatchNormGradStatsOp::verify() {
  auto x = shapeOf(getInput());
  if (x.size() < 2)
    return emitOpError("input must have rank >= 2 (N, C, ...)");
  if (shapeOf(getMoments()) != ArrayRef<int64_t>{2 * x[1]})
    return emitOpError("moments must have shape [")
           << 2 * x[1] << "] (two per channel)";
  return verifyMomentsOf(*this, x, getResult(), "result", getCount());
}

LogicalResult SoftmaxCrossEntropyLossGradOp::verify() {
  if (failed(verifyOneElementType(
          *this, {getScores(), getGrad(), getWeights(), getScoresGrad()},
          "scores, gradients and weights")))
    return failure();
  if (shapeOf(getScoresGrad()) != shapeOf(getScores()))
    return emitOpError("scores gradient must have the scores' shape");
  return verifyLoss(*this, getScores(), getLabels(), getWeights(), getGrad(),
                    getReduction());
}

LogicalResult SoftmaxCrossEntropyLossWithGradOp::verify() {
  if (failed(verifyOneElementType(
          *this, {getScores(), getLoss(), getWeights(), getScoresGrad()},
          "scores, loss, weights and scores gradient")))
    return failure();
  if (getReduction() == LossReduction::None)
    return emitOpError("takes reduction sum or mean (a scalar loss)");
  if (shapeOf(getScoresGrad()) != shapeOf(getScores()))
    return emitOpError("scores gradient must have the scores' shape");
  return verifyLoss(*this, getScores(), getLabels(), getWeights(), getLoss(),
                    getReduction());
}

LogicalResult NegativeLogLikelihoodLossGradOp::verify() {
  if (failed(verifyOneElementType(
          *this, {getInput(), getGrad(), getWeight(), getInputGrad()},
          "input, gradients and weight")))
    return failure();
  if (shapeOf(getInputGrad()) != shapeOf(getInput()))
    return emitOpError("input gradient must have the input's shape");
  return verifyLoss(*this, getInput(), getTarget(), getWeight(), getGrad(),
                    getReduction());
}

LogicalResult GatherGradOp::verify() {
  auto data = shapeOf(getDataGrad()), idx = shapeOf(getIndices());
  int64_t axis = getAxis();
  if (data.empty())
    return emitOpError("data gradient must have rank >= 1");
  if (failed(verifyAxis(*this, axis, data.size())))
    return failure();
  SmallVector<int64_t> expected(data.take_front(axis));
  expected.append(idx.begin(), idx.end());
  expected.append(data.begin() + axis + 1, data.end());
  if (shapeOf(getGrad()) != ArrayRef<int64_t>(expected))
    return emitOpError("gradient must have shape ") << fmt(expected);
  return success();
}

LogicalResult GatherElementsGradOp::verify() {
  return verifyGatherElements(*this, shapeOf(getDataGrad()),
                              shapeOf(getIndices()), shapeOf(getGrad()),
                              getAxis(), "gradient");
}

LogicalResult SliceGradOp::verify() {
  return verifySliceShapes(*this, shapeOf(getInputGrad()), shapeOf(getGrad()),
                           getStarts(), getSteps());
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// `full` is 1-d with `worldSize` times the elements of the 1-d `shard`.
static LogicalResult verifyShardPair(Operation *op, RankedTensorType shard,
                                     RankedTensorType full, int64_t worldSize) {
  auto s = shard.getShape(), f = full.getShape();
  if (worldSize < 1)
    return op->emitOpError("world_size must be positive");
  if (s.size() != 1 || f.size() != 1)
    return op->emitOpError("operates on 1-d buffers");
  if (f[0] != s[0] * worldSize)
    return op->emitOpError("full buffer of ")
           << f[0] << " elements is not " << worldSize << " shards of " << s[0];
  if (shard.getElementType() != full.getElementType())
    return op->emitOpError("element types differ");
  return success();
}

static RankedTensorType tensorTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// `mesh_axes`, when present, lists increasing mesh axes.
static LogicalResult verifyMeshAxes(Operation *op,
                                    std::optional<ArrayRef<int64_t>> axes) {
  if (!axes)
    return success();
  if (axes->empty())
    return op->emitOpError("mesh_axes must list at least one axis");
  for (size_t k = 0; k < axes->size(); ++k)
    if ((*axes)[k] < 0 || (k > 0 && (*axes)[k] <= (*axes)[k - 1]))
      return op->emitOpError("mesh_axes must be increasing axes >= 0");
  return success();
}

LogicalResult AllGatherStartOp::verify() {
  if (failed(verifyMeshAxes(*this, getMeshAxes())))
    return failure();
  return verifyShardPair(*this, tensorTypeOf(getInput()), getResultTensorType(),
                         getWorldSize());
}
/// A sum over ranks needs numbers: booleans cannot be reduced.
static LogicalResult verifySummable(Operation *op, Type elementType) {
  if (elementType.isInteger(1))
    return op->emitOpError("cannot sum ") << elementType << " over ranks";
  return success();
}

LogicalResult ReduceScatterStartOp::verify() {
  if (failed(verifySummable(*this, elemOf(getInput()))) ||
      failed(verifyMeshAxes(*this, getMeshAxes())))
    return failure();
  return verifyShardPair(*this, getResultTensorType(), tensorTypeOf(getInput()),
                         getWorldSize());
}
LogicalResult ShardSliceOp::verify() {
  if (failed(verifyMeshAxes(*this, getMeshAxes())))
    return failure();
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  // The inputs laid end to end are the full buffer.
  RankedTensorType out = tensorTypeOf(getOutput());
  int64_t total = 0;
  for (Value in : getInputs()) {
    RankedTensorType t = tensorTypeOf(in);
    if (t.getRank() != 1)
      return emitOpError("operates on 1-d buffers");
    if (t.getElementType() != out.getElementType())
      return emitOpError("element types differ");
    total += t.getDimSize(0);
  }
  return verifyShardPair(*this, out,
                         RankedTensorType::get({total}, out.getElementType()),
                         getWorldSize());
}
LogicalResult AllReduceStartOp::verify() {
  if (failed(verifySummable(*this, elemOf(getInput()))) ||
      failed(verifyMeshAxes(*this, getMeshAxes())))
    return failure();
  if (getWorldSize() < 1)
    return emitOpError("world_size must be positive");
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

/// The learning-rate schedule attributes of SGDUpdate and AdamUpdate (see
/// LrScheduleAttr): counts are not negative, a decaying schedule ends after
/// its warmup, and the decay's parameters belong to a decaying schedule.
template <typename UpdateOp>
static LogicalResult verifyLrSchedule(UpdateOp op) {
  LrSchedule kind = op.getLrSchedule().value_or(LrSchedule::Constant);
  // Signed values: ODS reads I64Attr as uint64_t.
  int64_t warmup =
      op.getWarmupStepsAttr() ? op.getWarmupStepsAttr().getInt() : 0;
  if (warmup < 0)
    return op.emitOpError("warmup_steps must be >= 0, got ") << warmup;
  if (kind == LrSchedule::Constant) {
    if (op.getDecayStepsAttr() || op.getMinLrRatioAttr())
      return op.emitOpError("decay_steps and min_lr_ratio need a linear or "
                            "cosine lr_schedule");
    return success();
  }
  if (!op.getDecayStepsAttr() || op.getDecayStepsAttr().getInt() <= warmup)
    return op.emitOpError("a ")
           << stringifyLrSchedule(kind)
           << " lr_schedule needs decay_steps greater than warmup_steps ("
           << warmup << ")";
  double ratio =
      op.getMinLrRatioAttr() ? op.getMinLrRatioAttr().getValueAsDouble() : 0.0;
  if (!(ratio >= 0.0 && ratio <= 1.0))
    return op.emitOpError("min_lr_ratio must be in [0, 1], got ") << ratio;
  return success();
}

LogicalResult SGDUpdateOp::verify() { return verifyLrSchedule(*this); }
LogicalResult AdamUpdateOp::verify() { return verifyLrSchedule(*this); }

//===----------------------------------------------------------------------===//
// ComputeCost: 2 flops per multiply-add, from static shapes (0 when a shape
// is dynamic: the op is then timed by its bytes).
//===----------------------------------------------------------------------===//

/// Elements of a statically shaped value; nullopt otherwise.
static std::optional<uint64_t> staticElements(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  return static_cast<uint64_t>(type.getNumElements());
}

/// 2 * (elements of `out`) * `reduced`: the flops of an op whose every
/// output element is a dot product of length `reduced`.
static uint64_t dotFlops(Value out, int64_t reduced) {
  std::optional<uint64_t> n = staticElements(out);
  if (!n || reduced < 0 || ShapedType::isDynamic(reduced))
    return 0;
  return 2 * *n * static_cast<uint64_t>(reduced);
}

uint64_t GemmOp::getFlops() {
  ArrayRef<int64_t> a = shapeOf(getA());
  return a.size() == 2 ? dotFlops(getOutput(), getTransA() ? a[0] : a[1]) : 0;
}

uint64_t MatMulOp::getFlops() {
  ArrayRef<int64_t> a = shapeOf(getA());
  return a.empty() ? 0 : dotFlops(getOutput(), a.back());
}

uint64_t PermutedMatMulOp::getFlops() {
  ArrayRef<int64_t> a = shapeOf(getA());
  return a.empty() ? 0 : dotFlops(getOutput(), a[getAPerm().back()]);
}

/// A convolution's dot products run over one group's input channels and the
/// kernel window: the weight's elements per output channel.
static uint64_t convFlops(Value out, Value weight) {
  ArrayRef<int64_t> w = shapeOf(weight);
  if (w.empty())
    return 0;
  int64_t window = 1;
  for (int64_t d : w.drop_front()) {
    if (ShapedType::isDynamic(d))
      return 0;
    window *= d;
  }
  return dotFlops(out, window);
}

uint64_t ConvOp::getFlops() { return convFlops(getOutput(), getWeight()); }
// The gradients do the forward's multiply-adds again, each once.
uint64_t ConvGradInputOp::getFlops() {
  return convFlops(getGrad(), getWeight());
}
uint64_t ConvGradWeightOp::getFlops() {
  return convFlops(getGrad(), getWeightGrad());
}

LogicalResult ClipCoefficientOp::verify() {
  double maxNorm = getMaxNorm().convertToDouble();
  if (!(std::isfinite(maxNorm) && maxNorm > 0))
    return emitOpError("max_norm must be finite and positive, got ") << maxNorm;
  return success();
}

//===----------------------------------------------------------------------===//
// FusedElementwise
//===----------------------------------------------------------------------===//

LogicalResult FusedElementwiseOp::verify() {
  namespace ops = rt::ops;
  if (getOutputs().empty())
    return emitOpError("has no results");
  if (getInputs().size() > static_cast<size_t>(ops::kMaxFusedInputs) ||
      getOutputs().size() > static_cast<size_t>(ops::kMaxFusedOutputs))
    return emitOpError("has ")
           << getInputs().size() << " inputs and " << getOutputs().size()
           << " results; at most " << ops::kMaxFusedInputs << " and "
           << ops::kMaxFusedOutputs << " are allowed";
  auto shapeType = cast<RankedTensorType>(getOutputs()[0].getType());
  ArrayRef<int64_t> shape = shapeType.getShape();
  for (Value r : getOutputs()) {
    auto t = cast<RankedTensorType>(r.getType());
    if (!t.getElementType().isF32() || t.getShape() != shape)
      return emitOpError("results must all be f32 of one shape; result ")
             << cast<OpResult>(r).getResultNumber() << " is " << t;
  }
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body has ")
           << body.getNumArguments() << " arguments for " << getInputs().size()
           << " inputs";
  for (auto [i, in] : llvm::enumerate(getInputs())) {
    auto t = cast<RankedTensorType>(in.getType());
    if (body.getArgument(i).getType() != t)
      return emitOpError("body argument ")
             << i << " has type " << body.getArgument(i).getType() << ", input "
             << i << " " << t;
    if (!t.getElementType().isF32() && !t.getElementType().isInteger(1))
      return emitOpError("input ") << i << " must be f32 or i1, not " << t;
    ops::BroadcastPattern pattern;
    if (!ops::broadcastPattern(t.getShape(), shape, pattern))
      return emitOpError("input ")
             << i << " of type " << t << " does not broadcast to " << shapeType
             << " as (i / inner) % size (one run of the result's dimensions)";
  }
  return success();
}

LogicalResult FusedElementwiseOp::verifyRegions() {
  namespace ops = rt::ops;
  Block &body = getBody().front();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end with shardc.Yield");
  if (yield.getValues().getTypes() != getOutputs().getTypes())
    return emitOpError("yields ")
           << yield.getValues().size()
           << " values whose types are not the results' types";
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(getOutputs()[0].getType()).getShape();
  int64_t count = 0;
  for (Operation &op : body.without_terminator()) {
    ++count;
    const ops::FusedOpInfo *info =
        isa_and_nonnull<ShardcDialect>(op.getDialect())
            ? ops::findFusedOp(op.getName().stripDialect().str())
            : nullptr;
    if (!info)
      return op.emitOpError("cannot be part of a shardc.FusedElementwise "
                            "(runtime/kernels/FusedOps.h lists the ops that "
                            "can)");
    auto t = op.getNumResults() == 1
                 ? dyn_cast<RankedTensorType>(op.getResult(0).getType())
                 : RankedTensorType();
    if (!t || !t.getElementType().isF32() || t.getShape() != shape ||
        op.getNumOperands() != static_cast<unsigned>(info->arity))
      return op.emitOpError("in a shardc.FusedElementwise must have ")
             << info->arity << " operands and one f32 result of the op's "
             << "result shape";
    for (OpOperand &operand : op.getOpOperands()) {
      bool wantsBool = ops::readsBool(info->code, operand.getOperandNumber());
      Type et = getElementTypeOrSelf(operand.get().getType());
      if (wantsBool ? !(et.isInteger(1) && isa<BlockArgument>(operand.get()))
                    : !et.isF32())
        return op.emitOpError("operand ")
               << operand.getOperandNumber()
               << (wantsBool ? " must be an i1 input of the fused op"
                             : " must be f32");
    }
  }
  if (count > ops::kMaxFusedInstrs)
    return emitOpError("has ") << count << " body ops; at most "
                               << ops::kMaxFusedInstrs << " are allowed";
  return success();
}

} // namespace shardc

#define GET_OP_CLASSES
#include "ir/ShardcOps.cpp.inc"
