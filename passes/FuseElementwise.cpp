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
// update multiplies the gradient by it first, in f32, as the Mul did.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "runtime/kernels/FusedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

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

  /// Puts `op` into the chain of an operand's producer, or a new chain.
  void place(Operation *op, RankedTensorType type) {
    Attribute category = op->getAttr(kCategoryAttrName);
    bool recompute = op->hasAttr(kRecomputeAttrName);
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      auto it = def ? groupOf.find(def) : groupOf.end();
      if (it == groupOf.end())
        continue;
      Group &group = groups[it->second];
      if (group.type != type || group.category != category ||
          group.recompute != recompute || !canJoin(it->second, op))
        continue;
      group.ops.push_back(op);
      groupOf[op] = it->second;
      return;
    }
    groups.push_back(Group{{op}, type, category, recompute});
    groupOf[op] = groups.size() - 1;
  }

  /// Whether `op` may join chain `g`: nothing outside reads a chain value
  /// before `op`, and the chain stays within the limits (counting `op` as
  /// a result).
  bool canJoin(size_t g, Operation *op) const {
    const Group &group = groups[g];
    if (group.ops.size() + 1 > static_cast<size_t>(ops::kMaxFusedInstrs))
      return false;
    int64_t results = 1;
    for (Operation *member : group.ops) {
      bool read = false;
      for (Operation *user : member->getResult(0).getUsers()) {
        if (user == op || inGroup(user, g))
          continue;
        if (user->getBlock() != &block || !op->isBeforeInBlock(user))
          return false;
        read = true;
      }
      results += read;
    }
    if (results > ops::kMaxFusedOutputs)
      return false;
    llvm::SmallPtrSet<Value, 16> inputs;
    auto countInputs = [&](Operation *member) {
      for (Value v : member->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!(def && (def == op || inGroup(def, g))))
          inputs.insert(v);
      }
    };
    for (Operation *member : group.ops)
      countInputs(member);
    countInputs(op);
    return inputs.size() <= static_cast<size_t>(ops::kMaxFusedInputs);
  }

  void fuse(Group &group) {
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

/// Folds a scaled gradient into the update that alone reads it.
void foldGradScales(func::FuncOp func) {
  func.walk([](OptimizerUpdate update) {
    if (update.getGradScale())
      return;
    Value grad = update.getGrad();
    auto mul = grad.getDefiningOp<MulOp>();
    Operation *op = update.getOperation();
    auto paramType = cast<RankedTensorType>(op->getOperand(0).getType());
    if (!mul || !grad.hasOneUse() || !paramType.getElementType().isF32() ||
        !cast<RankedTensorType>(grad.getType()).getElementType().isF32() ||
        op->getOperand(1) != grad)
      return;
    auto parts = scaledGradient(mul);
    if (!parts)
      return;
    update.getGradScaleMutable().assign(parts->first);
    op->setOperand(1, parts->second);
    mul->erase();
  });
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
      Fuser(func.getBody().front()).run();
    }
  }
};

} // namespace
} // namespace shardc
