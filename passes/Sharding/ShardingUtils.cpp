//===- ShardingUtils.cpp - Helpers shared by the ZeRO/FSDP passes ---------===//
#include "passes/Sharding/Sharding.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace shardc {

SmallVector<ParamUpdate> collectParamUpdates(func::FuncOp func) {
  SmallVector<ParamUpdate> out;
  func.walk([&](Operation *op) {
    if (!isa<SGDUpdateOp, AdamUpdateOp>(op))
      return;
    ParamUpdate u;
    u.op = op;
    u.param = dyn_cast<BlockArgument>(op->getOperand(0));
    u.grad = op->getOperand(1);
    for (unsigned i = 2; i + 1 < op->getNumOperands(); ++i)
      if (auto s = dyn_cast<BlockArgument>(op->getOperand(i)))
        u.states.push_back(s);
    u.step = op->getOperands().back();
    if (u.param)
      out.push_back(u);
  });
  return out;
}

StringRef paramName(func::FuncOp func, BlockArgument arg) {
  if (auto name =
          func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttrName))
    return name.getValue();
  return "";
}

StepResults readStepResults(func::FuncOp func) {
  StepResults r;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (auto target =
            func.getResultAttrOfType<IntegerAttr>(i, kUpdatesAttrName))
      r.updates.push_back({v, func.getArgument(target.getInt())});
    else
      r.outputs.push_back(v);
  }
  return r;
}

void writeStepResults(func::FuncOp func, const StepResults &results) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  OpBuilder b(ret);
  SmallVector<Value> values(results.outputs);
  SmallVector<DictionaryAttr> attrs(results.outputs.size(),
                                    b.getDictionaryAttr({}));
  for (auto &[v, arg] : results.updates) {
    values.push_back(v);
    attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        kUpdatesAttrName, b.getI64IntegerAttr(arg.getArgNumber()))));
  }
  b.create<func::ReturnOp>(ret.getLoc(), values);
  ret.erase();
  SmallVector<Type> types;
  for (Value v : values)
    types.push_back(v.getType());
  func.setFunctionType(
      b.getFunctionType(func.getFunctionType().getInputs(), types));
  func.setAllResultAttrs(attrs);
}

} // namespace shardc
