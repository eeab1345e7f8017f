//===- FuseElementwise.cpp - Chains of elementwise ops as one kernel ------===//
//
// shardc-fuse-elementwise (Passes.td). One walk over each function body in
// order: an op that FusedOps.h can compute joins the chain (group) of one
// of its operands' producers when
//
//   - it has the chain's shape, memory category and recompute mark, and the
//     chain stays within FusedOps.h's limits;
//   - no op outside the chain reads a chain value before it: the fused op
//     replaces the chain at its last op, so every outside reader must come
//     after that. This also rules out cycles: an outside op between two
//     chain ops that reads the first would be such a reader.
//
// Otherwise it starts a chain of its own. Chains of two or more ops become
// a shardc.FusedElementwise whose body is a copy of the chain; values read
// outside the chain are its results.
//
// Then each optimizer update whose gradient is `Mul(g, s)` with s an f32
// scalar, read by nothing else, takes s as its grad_scale instead: the
// update multiplies the gradient by it first, in f32, as the Mul did. So
// does an update of a ZeRO gradient shard (a ShardSlice) whose every part
// is such a product by one s, or zero padding.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "runtime/kernels/FusedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace shardc {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"

namespace {

namespace ops = rt::ops;

/// The discardable attributes a fusible op may carry: they describe how its
/// result is accounted and traced, and the fused op carries them on.
bool onlyAccountingAttrs(Operation *op) {
  return llvm::all_of(op->getAttrs(), [](NamedAttribute a) {
    StringRef name = a.getName().getValue();
    return name == kBackwardAttrName || name == kCategoryAttrName ||
           name == kRecomputeAttrName;
  });
}

/// The result type of `op` when FusedElementwise can compute it: an op of
/// FusedOps.h's list on f32 values (a Where's condition i1) whose operands
/// broadcast to its result as one run of dimensions.
RankedTensorType fusibleType(Operation *op) {
  if (!isa_and_nonnull<ShardcDialect>(op->getDialect()) ||
      op->getNumResults() != 1 || op->getNumRegions() != 0 ||
      !onlyAccountingAttrs(op))
    return {};
  const ops::FusedOpInfo *info =
      ops::findFusedOp(op->getName().stripDialect().str());
  if (!info || op->getNumOperands() != static_cast<unsigned>(info->arity))
    return {};
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
    return {};
  for (OpOperand &operand : op->getOpOperands()) {
    auto t = dyn_cast<RankedTensorType>(operand.get().getType());
    bool wantsBool = ops::readsBool(info->code, operand.getOperandNumber());
    if (!t || !t.hasStaticShape() ||
        !(wantsBool ? t.getElementType().isInteger(1)
                    : t.getElementType().isF32()))
      return {};
    ops::BroadcastPattern pattern;
    if (!ops::broadcastPattern(t.getShape(), type.getShape(), pattern))
      return {};
  }
  return type;
}

/// Most ops a value saved for backward may take to recompute there.
constexpr int kMaxRecomputeOps = 8;

/// Recomputes in backward the forward elementwise values that backward
/// reads only in elementwise ops of their shape, when they follow within
/// kMaxRecomputeOps fusible ops from values backward keeps anyway
/// (arguments, constants, values a matrix product or a normalization's
/// gradient reads): GELU's x / sqrt(2) and 1 + erf(...) from its x. The
/// copies go before their first backward reader, marked as it is, so that
/// they fuse into its chain: forward writes, and the step keeps, one tensor
/// instead of three, and backward reads one. The same ops on the same
/// inputs give the same bits.
class Rematerializer {
public:
  explicit Rematerializer(Block &block) : block(block) {}

  void run() {
    for (Operation &op : block)
      if (isForward(&op) && readsInBackward(op.getResult(0)))
        decide(op.getResult(0));
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (!isBackwardElementwise(&op))
        continue;
      for (OpOperand &operand : op.getOpOperands())
        if (recomputed.lookup(operand.get()))
          operand.set(copyOf(operand.get(), &op));
    }
  }

private:
  Block &block;
  /// Decided forward values: recomputed (true) or kept (false).
  llvm::DenseMap<Value, bool> recomputed;
  /// Each recomputed value's copy, made before its first backward reader.
  IRMapping copies;

  bool isForward(Operation *op) const {
    return op && op->getBlock() == &block && fusibleType(op) &&
           !op->hasAttr(kBackwardAttrName) && !op->hasAttr(kRecomputeAttrName);
  }

  static bool isBackwardElementwise(Operation *op) {
    return op->hasAttr(kBackwardAttrName) && !op->hasAttr(kRecomputeAttrName) &&
           fusibleType(op);
  }

  /// Whether backward reads `v`, every time in an elementwise op of its
  /// shape (which the copy can fuse into).
  static bool readsInBackward(Value v) {
    bool read = false;
    for (Operation *user : v.getUsers()) {
      if (!user->hasAttr(kBackwardAttrName))
        continue;
      if (!isBackwardElementwise(user) ||
          user->getResult(0).getType() != v.getType())
        return false;
      read = true;
    }
    return read;
  }

  /// Whether backward has `v` without it being recomputed: an argument, a
  /// constant, or a value backward reads and keeps.
  bool available(Value v) const {
    Operation *def = v.getDefiningOp();
    if (!def || isa<ConstantOp>(def))
      return true;
    if (isForward(def)) {
      auto it = recomputed.find(v);
      if (it != recomputed.end())
        return !it->second;
    }
    return llvm::any_of(v.getUsers(), [](Operation *user) {
      return user->hasAttr(kBackwardAttrName);
    });
  }

  /// Whether `v` follows from available values in forward elementwise ops,
  /// adding those ops to `ops` (at most kMaxRecomputeOps).
  bool recomputable(Value v, llvm::SmallPtrSetImpl<Operation *> &ops) const {
    if (available(v))
      return true;
    Operation *def = v.getDefiningOp();
    if (!isForward(def))
      return false;
    if (!ops.insert(def).second)
      return true;
    if (ops.size() > static_cast<size_t>(kMaxRecomputeOps))
      return false;
    return llvm::all_of(def->getOperands(),
                        [&](Value u) { return recomputable(u, ops); });
  }

  void decide(Value v) {
    llvm::SmallPtrSet<Operation *, 8> ops;
    Operation *def = v.getDefiningOp();
    ops.insert(def);
    recomputed[v] = llvm::all_of(def->getOperands(),
                                 [&](Value u) { return recomputable(u, ops); });
  }

  /// The copy of `v` (recomputed or an op on its way) before `reader`.
  Value copyOf(Value v, Operation *reader) {
    if (available(v))
      return v;
    if (Value copy = copies.lookupOrNull(v))
      return copy;
    Operation *def = v.getDefiningOp();
    for (Value u : def->getOperands())
      copyOf(u, reader);
    OpBuilder builder(reader);
    Operation *copy = builder.clone(*def, copies);
    for (NamedAttribute a : llvm::to_vector(copy->getAttrs()))
      copy->removeAttr(a.getName());
    for (StringRef mark :
         {StringRef(kBackwardAttrName), StringRef(kCategoryAttrName)})
      if (Attribute a = reader->getAttr(mark))
        copy->setAttr(mark, a);
    return copy->getResult(0);
  }
};

struct Group {
  SmallVector<Operation *> ops;
  RankedTensorType type;
  Attribute category;
  bool recompute = false;
};

class Fuser {
public:
  explicit Fuser(Block &block) : block(block) {}

  void run() {
    for (Operation &op : block)
      if (RankedTensorType type = fusibleType(&op))
        place(&op, type);
    for (Group &group : groups)
      if (group.ops.size() >= 2)
        fuse(group);
  }

private:
  Block &block;
  std::vector<Group> groups;
  llvm::DenseMap<Operation *, size_t> groupOf;

  bool inGroup(Operation *op, size_t g) const {
    auto it = groupOf.find(op);
    return it != groupOf.end() && it->second == g;
  }

  /// Puts `op` into the chain of an operand's producer, or a new chain;
  /// the chains of its other operands' producers join that chain too where
  /// they may (two chains that meet at `op` become one kernel).
  void place(Operation *op, RankedTensorType type) {
    Attribute category = op->getAttr(kCategoryAttrName);
    bool recompute = op->hasAttr(kRecomputeAttrName);
    SmallVector<size_t, 4> chosen;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      auto it = def ? groupOf.find(def) : groupOf.end();
      if (it == groupOf.end() || llvm::is_contained(chosen, it->second))
        continue;
      const Group &group = groups[it->second];
      if (group.type != type || group.category != category ||
          group.recompute != recompute)
        continue;
      chosen.push_back(it->second);
      if (!canJoin(chosen, op))
        chosen.pop_back();
    }
    if (chosen.empty()) {
      groups.push_back(Group{{op}, type, category, recompute});
      groupOf[op] = groups.size() - 1;
      return;
    }
    Group &into = groups[chosen.front()];
    for (size_t g : llvm::drop_begin(chosen)) {
      for (Operation *member : groups[g].ops) {
        into.ops.push_back(member);
        groupOf[member] = chosen.front();
      }
      groups[g].ops.clear();
    }
    into.ops.push_back(op);
    groupOf[op] = chosen.front();
  }

  bool inAny(Operation *op, llvm::ArrayRef<size_t> gs) const {
    auto it = groupOf.find(op);
    return it != groupOf.end() && llvm::is_contained(gs, it->second);
  }

  /// Whether `op` may join chains `gs` (as one chain): nothing outside
  /// reads a chain value before `op`, and the chain stays within the limits
  /// (counting `op` as a result).
  bool canJoin(llvm::ArrayRef<size_t> gs, Operation *op) const {
    size_t size = 1;
    for (size_t g : gs)
      size += groups[g].ops.size();
    if (size > static_cast<size_t>(ops::kMaxFusedInstrs))
      return false;
    int64_t results = 1;
    llvm::SmallPtrSet<Value, 16> inputs;
    auto countInputs = [&](Operation *member) {
      for (Value v : member->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!(def && (def == op || inAny(def, gs))))
          inputs.insert(v);
      }
    };
    for (size_t g : gs)
      for (Operation *member : groups[g].ops) {
        bool read = false;
        for (Operation *user : member->getResult(0).getUsers()) {
          if (user == op || inAny(user, gs))
            continue;
          if (user->getBlock() != &block || !op->isBeforeInBlock(user))
            return false;
          read = true;
        }
        results += read;
        countInputs(member);
      }
    if (results > ops::kMaxFusedOutputs)
      return false;
    countInputs(op);
    return inputs.size() <= static_cast<size_t>(ops::kMaxFusedInputs);
  }

  void fuse(Group &group) {
    // Merged chains interleave: the body follows the block's order.
    llvm::sort(group.ops, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    size_t g = groupOf.lookup(group.ops.front());
    llvm::SetVector<Value> inputs;
    SmallVector<Value> results;
    for (Operation *op : group.ops) {
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!(def && inGroup(def, g)))
          inputs.insert(v);
      }
      Value r = op->getResult(0);
      if (llvm::any_of(r.getUsers(),
                       [&](Operation *user) { return !inGroup(user, g); }))
        results.push_back(r);
    }
    // A chain nothing reads is dead code: it stays as it is.
    if (results.empty())
      return;
    Operation *last = group.ops.back();
    OpBuilder builder(last);
    auto fused = builder.create<FusedElementwiseOp>(
        group.ops.front()->getLoc(), ValueRange(results).getTypes(),
        inputs.getArrayRef());
    if (group.category)
      fused->setAttr(kCategoryAttrName, group.category);
    if (group.recompute)
      fused->setAttr(kRecomputeAttrName, builder.getUnitAttr());
    if (llvm::any_of(group.ops, [](Operation *op) {
          return op->hasAttr(kBackwardAttrName);
        }))
      fused->setAttr(kBackwardAttrName, builder.getUnitAttr());

    Block *body = builder.createBlock(&fused.getBody());
    IRMapping map;
    for (Value in : inputs)
      map.map(in, body->addArgument(in.getType(), in.getLoc()));
    for (Operation *op : group.ops) {
      Operation *copy = builder.clone(*op, map);
      for (NamedAttribute a : llvm::to_vector(copy->getAttrs()))
        copy->removeAttr(a.getName());
    }
    SmallVector<Value> yielded;
    for (Value r : results)
      yielded.push_back(map.lookup(r));
    builder.create<YieldOp>(last->getLoc(), yielded);

    for (auto [r, f] : llvm::zip(results, fused.getResults()))
      r.replaceUsesWithIf(f, [&](OpOperand &use) {
        return !inGroup(use.getOwner(), g) && use.getOwner() != fused;
      });
    for (Operation *op : llvm::reverse(group.ops)) {
      groupOf.erase(op);
      op->erase();
    }
  }
};

/// The f32 scalar that `mul` multiplies `grad`-shaped f32 values by, and
/// those values, when it is such a product.
std::optional<std::pair<Value, Value>> scaledGradient(MulOp mul) {
  for (auto [scale, value] : {std::pair(mul.getRhs(), mul.getLhs()),
                              std::pair(mul.getLhs(), mul.getRhs())}) {
    auto st = cast<RankedTensorType>(scale.getType());
    if (st.getRank() == 0 && st.getElementType().isF32() &&
        value.getType() == mul.getType())
      return std::pair(scale, value);
  }
  return std::nullopt;
}

/// Whether every element of `v` is the constant 0 (ZeRO's padding).
bool isConstantZero(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return false;
  return attr.getSplatValue<APFloat>().isZero();
}

/// The scale s and the products Mul(g, s) of a gradient shard (ZeRO stages
/// 1 and 2: each rank's chunk of the averaged gradients, each read by
/// nothing else, flattened, and its zero padding) when one s scales them
/// all.
std::optional<std::pair<Value, SmallVector<MulOp>>>
scaledShard(ShardSliceOp slice) {
  Value scale;
  SmallVector<MulOp> muls;
  for (Value in : slice.getInputs()) {
    if (isConstantZero(in))
      continue; // 0 * s = 0 for the finite scales these are.
    Value v = in;
    while (v.hasOneUse() && v.getDefiningOp<ReshapeOp>())
      v = v.getDefiningOp<ReshapeOp>().getInput();
    auto mul = v.getDefiningOp<MulOp>();
    if (!mul || !v.hasOneUse())
      return std::nullopt;
    auto parts = scaledGradient(mul);
    if (!parts || (scale && parts->first != scale) ||
        !cast<RankedTensorType>(mul.getType()).getElementType().isF32())
      return std::nullopt;
    scale = parts->first;
    muls.push_back(mul);
  }
  if (!scale)
    return std::nullopt;
  return std::pair(scale, std::move(muls));
}

/// Folds a scaled gradient into the update that alone reads it.
void foldGradScales(func::FuncOp func) {
  func.walk([](OptimizerUpdate update) {
    if (update.getGradScale())
      return;
    Value grad = update.getGrad();
    Operation *op = update.getOperation();
    auto paramType = cast<RankedTensorType>(op->getOperand(0).getType());
    if (!grad.hasOneUse() || !paramType.getElementType().isF32() ||
        !cast<RankedTensorType>(grad.getType()).getElementType().isF32() ||
        op->getOperand(1) != grad)
      return;
    if (auto slice = grad.getDefiningOp<ShardSliceOp>()) {
      auto shard = scaledShard(slice);
      if (!shard)
        return;
      update.getGradScaleMutable().assign(shard->first);
      for (MulOp mul : shard->second) {
        mul.getResult().replaceAllUsesWith(scaledGradient(mul)->second);
        mul->erase();
      }
      return;
    }
    auto mul = grad.getDefiningOp<MulOp>();
    if (!mul)
      return;
    auto parts = scaledGradient(mul);
    if (!parts)
      return;
    update.getGradScaleMutable().assign(parts->first);
    op->setOperand(1, parts->second);
    mul->erase();
  });
}

/// Whether every element of `v` is the constant 1.
bool isConstantOne(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return false;
  return attr.getSplatValue<APFloat>().isExactlyValue(1.0);
}

/// A softmax cross-entropy loss whose scores gradient backward computes
/// becomes SoftmaxCrossEntropyLossWithGrad: one pass over the scores gives
/// the loss and the gradient for a loss gradient of 1, and backward scales
/// that by the loss's gradient (nothing to do when that is the constant 1)
/// instead of reading the scores again. The scores then die in forward and
/// the gradient is kept in their place, of their size.
void fuseLossGradients(func::FuncOp func) {
  SmallVector<SoftmaxCrossEntropyLossGradOp> grads;
  func.walk([&](SoftmaxCrossEntropyLossGradOp g) { grads.push_back(g); });
  for (SoftmaxCrossEntropyLossGradOp grad : grads) {
    if (grad.getReduction() == LossReduction::None ||
        grad->hasAttr(kRecomputeAttrName))
      continue;
    SoftmaxCrossEntropyLossOp loss;
    for (Operation *user : grad.getScores().getUsers()) {
      auto sce = dyn_cast<SoftmaxCrossEntropyLossOp>(user);
      if (sce && sce.getScores() == grad.getScores() &&
          sce.getLabels() == grad.getLabels() &&
          sce.getWeights() == grad.getWeights() &&
          sce.getReduction() == grad.getReduction() &&
          sce.getIgnoreIndexAttr() == grad.getIgnoreIndexAttr() &&
          !sce.getLogProb() && !sce->hasAttr(kRecomputeAttrName) &&
          sce->getBlock() == grad->getBlock() && sce->isBeforeInBlock(grad))
        loss = sce;
    }
    if (!loss)
      continue;
    Value dLoss = grad.getGrad();
    OpBuilder builder(loss);
    auto fused = builder.create<SoftmaxCrossEntropyLossWithGradOp>(
        loss.getLoc(),
        TypeRange{loss.getLoss().getType(), grad.getScoresGrad().getType()},
        loss.getScores(), loss.getLabels(), loss.getWeights(),
        loss.getReductionAttr(), loss.getIgnoreIndexAttr());
    for (NamedAttribute a : loss->getDiscardableAttrs())
      fused->setAttr(a.getName(), a.getValue());
    loss.getLoss().replaceAllUsesWith(fused.getLoss());
    loss->erase();
    Value scoresGrad = fused.getScoresGrad();
    if (!isConstantOne(dLoss)) {
      builder.setInsertionPoint(grad);
      auto mul = builder.create<MulOp>(grad.getLoc(), scoresGrad.getType(),
                                       scoresGrad, dLoss);
      for (NamedAttribute a : grad->getDiscardableAttrs())
        mul->setAttr(a.getName(), a.getValue());
      scoresGrad = mul;
    }
    grad.getScoresGrad().replaceAllUsesWith(scoresGrad);
    grad->erase();
  }
}

/// Whether a matrix product can read a transposed operand in place: the
/// operand's innermost dimension is one of the permuted matrix's two.
bool keepsUnitStride(ArrayRef<int64_t> perm) {
  int64_t last = static_cast<int64_t>(perm.size()) - 1;
  return perm[last] == last || perm[last - 1] == last;
}

/// A batched f32 or f64 MatMul PermutedMatMul can compute: equal ranks of
/// at least 3, static nonempty shapes, equal batch dimensions.
bool foldableProduct(MatMulOp m) {
  auto at = dyn_cast<RankedTensorType>(m.getA().getType());
  auto bt = dyn_cast<RankedTensorType>(m.getB().getType());
  return at && bt && at.hasStaticShape() && bt.hasStaticShape() &&
         at.getRank() >= 3 && bt.getRank() == at.getRank() &&
         (at.getElementType().isF32() || at.getElementType().isF64()) &&
         at.getNumElements() > 0 && bt.getNumElements() > 0 &&
         at.getShape().drop_back(2) == bt.getShape().drop_back(2);
}

/// Attention's transposes, read through strides instead of copied: first a
/// transpose of a transpose becomes one transpose of the source (so that
/// backward's K^T and V^T read the stored key and value, not forward's
/// transposed copies); then a batched MatMul whose operand is a transpose
/// that only such products read, or whose result only a transpose reads
/// (one that keeps the product's rows or columns innermost), becomes a
/// PermutedMatMul of the untransposed tensors. The products are the same
/// dot products, each summed in the same order.
void foldTransposesIntoMatMuls(func::FuncOp func) {
  // A transpose that only an elementwise op with scalar other operands
  // reads (nn.MultiheadAttention's q / sqrt(d)), whose result only matrix
  // products and transposes read, moves after it: the op runs on the
  // untransposed tensor, element for element the same.
  SmallVector<TransposeOp> sinking;
  func.walk([&](TransposeOp t) { sinking.push_back(t); });
  while (!sinking.empty()) {
    TransposeOp t = sinking.pop_back_val();
    if (!t->hasOneUse())
      continue;
    Operation *user = *t->user_begin();
    if (!fusibleType(user) ||
        llvm::any_of(user->getOperands(),
                     [&](Value v) {
                       return v != t.getResult() &&
                              cast<RankedTensorType>(v.getType()).getRank() !=
                                  0;
                     }) ||
        !llvm::all_of(user->getUsers(), [](Operation *u) {
          return isa<MatMulOp, TransposeOp>(u);
        }))
      continue;
    OpBuilder builder(user);
    Operation *moved = builder.clone(*user);
    for (OpOperand &operand : moved->getOpOperands())
      if (operand.get() == t.getResult())
        operand.set(t.getInput());
    // The op's result keeps its element type (a Where of a transposed i1
    // mask gives floats) in the untransposed shape.
    auto resultType = cast<RankedTensorType>(user->getResult(0).getType());
    moved->getResult(0).setType(resultType.clone(
        cast<RankedTensorType>(t.getInput().getType()).getShape()));
    // The transpose takes the op's place, and its marks.
    Operation *after = builder.clone(*t);
    after->setOperand(0, moved->getResult(0));
    after->getResult(0).setType(resultType);
    after->setDiscardableAttrs(user->getDiscardableAttrDictionary());
    user->getResult(0).replaceAllUsesWith(after->getResult(0));
    user->erase();
    t->erase();
    sinking.push_back(cast<TransposeOp>(after));
  }

  SmallVector<TransposeOp> transposes;
  func.walk([&](TransposeOp t) { transposes.push_back(t); });
  SmallVector<Operation *> dead;
  for (TransposeOp t : transposes) {
    auto inner = t.getInput().getDefiningOp<TransposeOp>();
    if (!inner)
      continue;
    SmallVector<int64_t> perm;
    for (int64_t p : t.getPerm())
      perm.push_back(inner.getPerm()[p]);
    t.getInputMutable().assign(inner.getInput());
    t.setPerm(perm);
    if (inner->use_empty())
      dead.push_back(inner);
  }
  for (Operation *op : dead)
    op->erase();

  SmallVector<MatMulOp> products;
  func.walk([&](MatMulOp m) {
    if (foldableProduct(m))
      products.push_back(m);
  });
  for (MatMulOp m : products) {
    int64_t rank = cast<RankedTensorType>(m.getA().getType()).getRank();
    SmallVector<int64_t> identity =
        llvm::to_vector(llvm::seq<int64_t>(0, rank));
    // A transpose every reader of which is such a product: each reads the
    // source, and the transpose dies with the last.
    auto operand = [&](Value v, SmallVector<int64_t> &perm) -> Value {
      perm = identity;
      auto t = v.getDefiningOp<TransposeOp>();
      if (!t || !keepsUnitStride(t.getPerm()) ||
          !llvm::all_of(t->getUsers(), [](Operation *user) {
            auto product = dyn_cast<MatMulOp>(user);
            return product && foldableProduct(product);
          }))
        return v;
      perm = llvm::to_vector(t.getPerm());
      return t.getInput();
    };
    SmallVector<int64_t> aPerm, bPerm, yPerm = identity;
    Value a = operand(m.getA(), aPerm), b = operand(m.getB(), bPerm);
    // A result only a transpose reads: written through it when the
    // product's columns stay innermost, else as Y^T = B^T A^T (the
    // product's rows innermost).
    TransposeOp out;
    bool swap = false;
    if (m->hasOneUse())
      if (auto t = dyn_cast<TransposeOp>(*m->user_begin());
          t && t.getPerm().back() >= rank - 2) {
        out = t;
        yPerm = llvm::to_vector(t.getPerm());
        swap = yPerm.back() == rank - 2;
      }
    if (a == m.getA() && b == m.getB() && !out)
      continue;
    if (swap) {
      std::swap(a, b);
      std::swap(aPerm, bPerm);
      std::swap(aPerm[rank - 1], aPerm[rank - 2]);
      std::swap(bPerm[rank - 1], bPerm[rank - 2]);
      for (int64_t &d : yPerm)
        d = d == rank - 1 ? rank - 2 : d == rank - 2 ? rank - 1 : d;
    }
    OpBuilder builder(m);
    auto fused = builder.create<PermutedMatMulOp>(
        m.getLoc(), out ? out.getOutput().getType() : m.getOutput().getType(),
        a, b, builder.getDenseI64ArrayAttr(aPerm),
        builder.getDenseI64ArrayAttr(bPerm),
        builder.getDenseI64ArrayAttr(yPerm));
    for (NamedAttribute attr : m->getDiscardableAttrs())
      fused->setAttr(attr.getName(), attr.getValue());
    Operation *readA = m.getA().getDefiningOp(),
              *readB = m.getB().getDefiningOp();
    if (out) {
      out.getOutput().replaceAllUsesWith(fused.getOutput());
      out->erase();
    } else {
      m.getOutput().replaceAllUsesWith(fused.getOutput());
    }
    m->erase();
    if (readB == readA)
      readB = nullptr;
    for (Operation *t : {readA, readB})
      if (t && isa<TransposeOp>(t) && t->use_empty())
        t->erase();
  }
}

/// Split(Gemm(a, w, c; transB)) along the product's columns, the Gemm seen
/// through a Reshape that keeps its last dimension (attention's q, k, v out
/// of one projection) -> one Gemm per piece, over the rows of w and the
/// elements of c that piece takes: contiguous slices, which the plan makes
/// views, so each piece is written where it is read instead of copied out
/// of the whole product.
void splitProductsAtTheirSplit(func::FuncOp func) {
  SmallVector<SplitOp> splits;
  func.walk([&](SplitOp s) { splits.push_back(s); });
  for (SplitOp split : splits) {
    auto inType = cast<RankedTensorType>(split.getInput().getType());
    int64_t rank = inType.getRank();
    if (static_cast<int64_t>(split.getAxis()) != rank - 1 ||
        !split.getInput().hasOneUse())
      continue;
    auto reshape = split.getInput().getDefiningOp<ReshapeOp>();
    Value product = reshape ? reshape.getInput() : split.getInput();
    auto gemm = product.getDefiningOp<GemmOp>();
    if (!gemm || !gemm.getTransB() || !product.hasOneUse())
      continue;
    auto outType = cast<RankedTensorType>(gemm.getType());
    int64_t n = outType.getDimSize(1);
    if (inType.getShape().back() != n)
      continue;
    Value c = gemm.getC();
    auto cType = c ? cast<RankedTensorType>(c.getType()) : RankedTensorType();
    // A bias row: [N] (a C of any other shape is left alone).
    if (c && (cType.getRank() != 1 || cType.getDimSize(0) != n))
      continue;
    OpBuilder builder(split);
    auto attrs = gemm->getDiscardableAttrs();
    auto keep = [&](Operation *op) {
      for (NamedAttribute attr : attrs)
        op->setAttr(attr.getName(), attr.getValue());
      return op;
    };
    Value w = gemm.getB();
    auto wType = cast<RankedTensorType>(w.getType());
    int64_t offset = 0;
    SmallVector<Value> pieces;
    for (Value piece : split.getOutputs()) {
      auto pieceType = cast<RankedTensorType>(piece.getType());
      int64_t size = pieceType.getShape().back();
      Location loc = split.getLoc();
      Value wi = keep(builder.create<SliceOp>(
                          loc,
                          RankedTensorType::get({size, wType.getDimSize(1)},
                                                wType.getElementType()),
                          w, builder.getDenseI64ArrayAttr({offset, 0}),
                          builder.getDenseI64ArrayAttr({1, 1})))
                     ->getResult(0);
      Value ci;
      if (c)
        ci =
            keep(builder.create<SliceOp>(
                     loc, RankedTensorType::get({size}, cType.getElementType()),
                     c, builder.getDenseI64ArrayAttr({offset}),
                     builder.getDenseI64ArrayAttr({1})))
                ->getResult(0);
      Value gi =
          keep(builder.create<GemmOp>(
                   gemm.getLoc(),
                   RankedTensorType::get({outType.getDimSize(0), size},
                                         outType.getElementType()),
                   gemm.getA(), wi, ci, gemm.getAlphaAttr(), gemm.getBetaAttr(),
                   gemm.getTransAAttr(), gemm.getTransBAttr()))
              ->getResult(0);
      if (gi.getType() != pieceType)
        gi = keep(builder.create<ReshapeOp>(loc, pieceType, gi))->getResult(0);
      pieces.push_back(gi);
      offset += size;
    }
    for (auto [old, now] : llvm::zip(split.getOutputs(), pieces))
      old.replaceAllUsesWith(now);
    split->erase();
    if (reshape)
      reshape->erase();
    gemm->erase();
  }
}

struct FuseElementwisePass : impl::FuseElementwiseBase<FuseElementwisePass> {
  using FuseElementwiseBase::FuseElementwiseBase;

  void runOnOperation() override {
    if (!fuseElementwise)
      return;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      foldGradScales(func);
      fuseLossGradients(func);
      foldTransposesIntoMatMuls(func);
      splitProductsAtTheirSplit(func);
      Rematerializer(func.getBody().front()).run();
      Fuser(func.getBody().front()).run();
    }
  }
};

} // namespace
} // namespace shardc
