//===- Linalg.cpp - Import of ONNX matrix products ------------------------===//
//
// Gemm, which keeps alpha, beta, transA and transB, and MatMul, whose
// batched, broadcast and 1-D forms all take their result type from shape
// inference. Einsum (torch.einsum) as a composition of ops with gradient
// rules: labels only one operand has and the output lacks are summed out
// (ReduceSum), each further operand is contracted with the running result
// by one batched MatMul (or, with no label to contract, one broadcast Mul),
// and a Transpose puts the output's labels in order. Tested by
// test/lit/import/linalg.onnxtxt and einsum.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace mlir;

namespace shardc {

static LogicalResult importGemm(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 3)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  OpBuilder &b = ctx.builder();
  return ctx.finish(b.create<GemmOp>(
      ctx.loc(), *type, ctx.operand(0), ctx.operand(1), ctx.operand(2),
      b.getF32FloatAttr(ctx.floatAttr("alpha", 1.0f)),
      b.getF32FloatAttr(ctx.floatAttr("beta", 1.0f)),
      b.getBoolAttr(ctx.intAttr("transA", 0) != 0),
      b.getBoolAttr(ctx.intAttr("transB", 0) != 0)));
}

static LogicalResult importMatMul(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  return ctx.finish(ctx.builder().create<MatMulOp>(
      ctx.loc(), *type, ctx.operand(0), ctx.operand(1)));
}

namespace {

/// A value of an Einsum import and the label of each of its axes: a letter,
/// or for the axes of an ellipsis 256 + their position among the
/// ellipsis's axes, right-aligned (NumPy's broadcasting order).
struct Labeled {
  Value value;
  SmallVector<int> labels;
};

/// Builds the composition at the node, in the operands' element type.
class EinsumBuilder {
public:
  EinsumBuilder(ImportContext &ctx, Type elem)
      : ctx(ctx), b(ctx.builder()), elem(elem) {}

  static ArrayRef<int64_t> shape(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }
  RankedTensorType type(ArrayRef<int64_t> s) const {
    return RankedTensorType::get(s, elem);
  }
  Value reshape(Value v, ArrayRef<int64_t> s) {
    if (shape(v) == s)
      return v;
    return b.create<ReshapeOp>(ctx.loc(), type(s), v);
  }
  /// `x` with its labels in the order `order` (a permutation of them).
  Value transpose(const Labeled &x, ArrayRef<int> order) {
    SmallVector<int64_t> perm, s;
    for (int l : order) {
      int64_t axis = llvm::find(x.labels, l) - x.labels.begin();
      perm.push_back(axis);
      s.push_back(shape(x.value)[axis]);
    }
    if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      return x.value;
    return b.create<TransposeOp>(ctx.loc(), type(s), x.value, perm);
  }
  /// `x` summed over the labels `keep` lacks.
  Labeled sumOut(const Labeled &x, ArrayRef<int> keep) {
    SmallVector<int64_t> axes, s;
    Labeled out;
    for (auto [axis, l] : llvm::enumerate(x.labels)) {
      if (llvm::is_contained(keep, l)) {
        out.labels.push_back(l);
        s.push_back(shape(x.value)[axis]);
      } else {
        axes.push_back(axis);
      }
    }
    out.value = axes.empty() ? x.value
                             : b.create<ReduceSumOp>(ctx.loc(), type(s),
                                                     x.value, axes, false)
                                   .getResult();
    return out;
  }
  /// The product of `x` and `y` over the labels they share and `keep`
  /// lacks; the result has the shared labels `keep` has, then `x`'s own,
  /// then `y`'s own.
  Labeled contract(Labeled x, Labeled y, ArrayRef<int> keep) {
    // Labels only one side has and the result does not keep go first.
    SmallVector<int> keepX(keep), keepY(keep);
    keepX.append(y.labels);
    keepY.append(x.labels);
    x = sumOut(x, keepX);
    y = sumOut(y, keepY);
    SmallVector<int> batch, summed, left, right;
    for (int l : x.labels) {
      if (!llvm::is_contained(y.labels, l))
        left.push_back(l);
      else if (llvm::is_contained(keep, l))
        batch.push_back(l);
      else
        summed.push_back(l);
    }
    for (int l : y.labels)
      if (!llvm::is_contained(x.labels, l))
        right.push_back(l);
    auto sizeOf = [&](int l) {
      const Labeled &src = llvm::is_contained(x.labels, l) ? x : y;
      int64_t axis = llvm::find(src.labels, l) - src.labels.begin();
      return shape(src.value)[axis];
    };
    auto sizes = [&](ArrayRef<int> ls) {
      SmallVector<int64_t> s;
      for (int l : ls)
        s.push_back(sizeOf(l));
      return s;
    };
    auto product = [&](ArrayRef<int> ls) {
      SmallVector<int64_t> s = sizes(ls);
      return std::accumulate(s.begin(), s.end(), int64_t(1),
                             std::multiplies<int64_t>());
    };
    Labeled out;
    out.labels = batch;
    out.labels.append(left);
    out.labels.append(right);
    SmallVector<int64_t> outShape = sizes(out.labels);
    if (summed.empty()) {
      // Nothing to add up: a broadcast Mul, x as (batch, left, 1...) and y as
      // (batch, 1..., right).
      SmallVector<int> xOrder(batch), yOrder(batch);
      xOrder.append(left);
      yOrder.append(right);
      SmallVector<int64_t> xs = sizes(batch), ys = sizes(batch);
      xs.append(sizes(left));
      xs.append(right.size(), 1);
      ys.append(left.size(), 1);
      ys.append(sizes(right));
      Value xv = reshape(transpose(x, xOrder), xs);
      Value yv = reshape(transpose(y, yOrder), ys);
      out.value = b.create<MulOp>(ctx.loc(), xv, yv);
      return out;
    }
    // (B, M, K) times (B, K, N), the batch dims flattened into one.
    int64_t B = product(batch), M = product(left), K = product(summed),
            N = product(right);
    SmallVector<int> xOrder(batch), yOrder(batch);
    xOrder.append(left);
    xOrder.append(summed);
    yOrder.append(summed);
    yOrder.append(right);
    SmallVector<int64_t> xs = {M, K}, ys = {K, N}, ps = {M, N};
    if (!batch.empty()) {
      xs.insert(xs.begin(), B);
      ys.insert(ys.begin(), B);
      ps.insert(ps.begin(), B);
    }
    Value xv = reshape(transpose(x, xOrder), xs);
    Value yv = reshape(transpose(y, yOrder), ys);
    Value p = b.create<MatMulOp>(ctx.loc(), type(ps), xv, yv);
    out.value = reshape(p, outShape);
    return out;
  }

private:
  ImportContext &ctx;
  OpBuilder &b;
  Type elem;
};

} // namespace

/// Parses one side of an Einsum equation: letters, at most one "...";
/// `labels` gets a letter per axis, `ellipsisAt` the position of the
/// ellipsis (-1: none).
static LogicalResult parseEinsumTerm(ImportContext &ctx, StringRef term,
                                     SmallVector<int> &labels,
                                     int &ellipsisAt) {
  ellipsisAt = -1;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (term.substr(i).starts_with("...")) {
      if (ellipsisAt >= 0)
        return ctx.nodeError()
               << "equation term '" << term << "' has more than one ellipsis";
      ellipsisAt = labels.size();
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      labels.push_back(c);
    } else {
      return ctx.nodeError()
             << "equation term '" << term << "' has the character '" << c
             << "'; labels are letters";
    }
  }
  return success();
}

static std::string labelName(int l) {
  return l < 256 ? std::string(1, char(l)) : "...";
}

static LogicalResult importEinsum(ImportContext &ctx) {
  int n = ctx.node().input_size();
  if (n == 0 || failed(ctx.requireOperands(n, n)))
    return n == 0 ? LogicalResult(ctx.nodeError() << "has no inputs")
                  : failure();
  std::string equation = ctx.stringAttr("equation", "");
  llvm::erase_if(equation, [](char c) { return c == ' '; });
  StringRef eq(equation);
  auto [lhs, rhs] = eq.split("->");
  bool explicitOut = eq.contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (int(terms.size()) != n)
    return ctx.nodeError() << "equation '" << equation << "' has "
                           << terms.size() << " input term(s) for " << n
                           << " input(s)";
  Type elem = cast<RankedTensorType>(ctx.operand(0).getType()).getElementType();
  if (!isa<FloatType>(elem))
    return ctx.nodeError() << "needs float inputs, got " << elem;
  // Each operand's labels, the ellipsis's axes right-aligned.
  SmallVector<Labeled> operands;
  int64_t ellipsisRank = 0;
  SmallVector<int> ellipsisAt(n);
  SmallVector<SmallVector<int>> letters(n);
  for (int i = 0; i < n; ++i) {
    Value v = ctx.operand(i);
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getElementType() != elem)
      return ctx.nodeError() << "input " << i << " has element type "
                             << t.getElementType() << ", input 0 " << elem;
    if (failed(parseEinsumTerm(ctx, terms[i], letters[i], ellipsisAt[i])))
      return failure();
    int64_t extra = t.getRank() - int64_t(letters[i].size());
    if (extra < 0 || (extra > 0 && ellipsisAt[i] < 0))
      return ctx.nodeError()
             << "equation term '" << terms[i] << "' has " << letters[i].size()
             << " label(s) for input " << i << " of rank " << t.getRank();
    if (ellipsisAt[i] >= 0)
      ellipsisRank = std::max(ellipsisRank, extra);
  }
  llvm::DenseMap<int, int64_t> sizes;
  for (int i = 0; i < n; ++i) {
    Labeled x{ctx.operand(i), {}};
    int64_t extra = EinsumBuilder::shape(x.value).size() - letters[i].size();
    for (int j = 0; j <= int(letters[i].size()); ++j) {
      if (j == ellipsisAt[i])
        for (int64_t e = 0; e < extra; ++e)
          x.labels.push_back(256 + int(ellipsisRank - extra + e));
      if (j < int(letters[i].size()))
        x.labels.push_back(letters[i][j]);
    }
    for (auto [axis, l] : llvm::enumerate(x.labels)) {
      if (llvm::count(x.labels, l) > 1)
        return ctx.nodeError()
               << "label '" << labelName(l) << "' repeats in term '" << terms[i]
               << "' (a diagonal); that is not supported";
      int64_t size = EinsumBuilder::shape(x.value)[axis];
      auto [it, inserted] = sizes.try_emplace(l, size);
      if (!inserted && it->second != size)
        return ctx.nodeError()
               << "label '" << labelName(l) << "' has size " << size
               << " in input " << i << " but " << it->second
               << " before; broadcasting a size-1 axis is not supported";
    }
    operands.push_back(x);
  }
  // The output's labels: as written, or NumPy's implicit order (the
  // ellipsis, then the letters used once, sorted).
  SmallVector<int> outLabels;
  if (explicitOut) {
    SmallVector<int> outLetters;
    int outEllipsis;
    if (failed(parseEinsumTerm(ctx, rhs, outLetters, outEllipsis)))
      return failure();
    for (int j = 0; j <= int(outLetters.size()); ++j) {
      if (j == outEllipsis)
        for (int64_t e = 0; e < ellipsisRank; ++e)
          outLabels.push_back(256 + int(e));
      if (j < int(outLetters.size()))
        outLabels.push_back(outLetters[j]);
    }
    for (int l : outLabels) {
      if (!sizes.count(l))
        return ctx.nodeError()
               << "output label '" << labelName(l) << "' is in no input term";
      if (llvm::count(outLabels, l) > 1)
        return ctx.nodeError()
               << "output label '" << labelName(l) << "' repeats";
    }
  } else {
    for (int64_t e = 0; e < ellipsisRank; ++e)
      outLabels.push_back(256 + int(e));
    SmallVector<int> once;
    for (int i = 0; i < n; ++i)
      for (int l : letters[i]) {
        int uses = 0;
        for (int k = 0; k < n; ++k)
          uses += llvm::count(letters[k], l);
        if (uses == 1)
          once.push_back(l);
      }
    llvm::sort(once);
    outLabels.append(once);
  }
  EinsumBuilder eb(ctx, elem);
  // Left to right: each step keeps the labels the later operands or the
  // output use.
  Labeled acc = operands[0];
  for (int i = 1; i < n; ++i) {
    SmallVector<int> keep(outLabels);
    for (int k = i + 1; k < n; ++k)
      keep.append(operands[k].labels);
    acc = eb.contract(acc, operands[i], keep);
  }
  acc = eb.sumOut(acc, outLabels);
  Value y = eb.transpose(acc, outLabels);
  SmallVector<int64_t> outShape;
  for (int l : outLabels)
    outShape.push_back(sizes[l]);
  // ONNX's inference gives Einsum a shape of symbolic sizes at times; the
  // equation's is static, and where inference's is too, the two agree.
  if (ctx.hasStaticInferredShape(0)) {
    auto type = ctx.outType(0);
    if (failed(type))
      return failure();
    if (type->getShape() != ArrayRef<int64_t>(outShape))
      return ctx.nodeError() << "shape inference gave " << *type
                             << ", the equation " << eb.type(outShape);
  }
  // An equation that changes nothing ("ij->ij") still defines a value of
  // its own.
  if (llvm::any_of(operands, [&](const Labeled &x) { return x.value == y; }))
    y = ctx.builder().create<IdentityOp>(ctx.loc(), y.getType(), y);
  ctx.define(0, y);
  return success();
}

void registerLinalgImporters(OpImporterTable &table) {
  table.add("Einsum", importEinsum);
  table.add("Gemm", importGemm);
  table.add("MatMul", importMatMul);
}

} // namespace shardc
