//===- PlanEmitter.cpp - Lowering the final IR to a plan ------------------===//
#include "passes/Lowering/PlanEmitter.h"

#include "ir/ShardcDialect.h"
#include "passes/Lowering/OpDesc.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace shardc {

/// A name for the values an op defines: its ONNX node name when it has one.
static std::string locName(Location loc, llvm::StringRef fallback) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  return fallback.str();
}

static plan::Attribute toPlanAttr(const std::string &name,
                                  const rt::AttrValue &v) {
  plan::Attribute a;
  a.set_name(name);
  switch (v.kind) {
  case rt::AttrValue::Kind::Int:
    a.set_i(v.i);
    break;
  case rt::AttrValue::Kind::Float:
    a.set_f(v.f);
    break;
  case rt::AttrValue::Kind::String:
    a.set_s(v.s);
    break;
  case rt::AttrValue::Kind::Ints:
    for (int64_t x : v.ints)
      a.mutable_ints()->add_values(x);
    break;
  case rt::AttrValue::Kind::Floats:
    for (double x : v.floats)
      a.mutable_floats()->add_values(x);
    break;
  }
  return a;
}

LogicalResult emitPlan(ModuleOp module, const ParamReader &params,
                       plan::PlanWriter &writer) {
  auto func = module.lookupSymbol<func::FuncOp>("main");
  if (!func)
    return module.emitError("the module has no func.func @main");
  plan::Plan &p = writer.plan();
  if (auto name = module->getAttrOfType<StringAttr>("shardc.model_name"))
    p.set_model_name(name.str());

  DenseMap<Value, int32_t> buffers;
  auto bufferType = [](Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return std::make_pair(toRuntimeType(t.getElementType()), t.getShape());
  };

  for (BlockArgument arg : func.getArguments()) {
    auto [dtype, shape] = bufferType(arg);
    if (dtype == rt::DType::Undefined)
      return func.emitError("argument ")
             << arg.getArgNumber() << " has an element type plans cannot hold";
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      kInputAttrName)) {
      int32_t id = writer.addBuffer(name.getValue(), dtype, shape,
                                    plan::INPUT);
      p.add_inputs(id);
      buffers[arg] = id;
      continue;
    }
    auto name =
        func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttrName);
    if (!name)
      return func.emitError("argument ")
             << arg.getArgNumber() << " is neither an input nor a parameter";
    auto bytes = params(name.getValue());
    if (!bytes)
      return func.emitError("parameter '")
             << name.getValue() << "': " << llvm::toString(bytes.takeError());
    auto id = writer.addDataBuffer(name.getValue(), dtype, shape,
                                   plan::PARAMETER, *bytes);
    if (!id)
      return func.emitError("parameter '")
             << name.getValue() << "': " << llvm::toString(id.takeError());
    buffers[arg] = *id;
  }

  unsigned counter = 0;
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      auto names = func->getAttrOfType<ArrayAttr>(kOutputNamesAttrName);
      if (!names || names.size() != ret.getNumOperands())
        return func.emitError("output names do not match the results");
      llvm::DenseSet<int32_t> claimed;
      for (auto [value, nameAttr] : llvm::zip(ret.getOperands(), names)) {
        std::string name = cast<StringAttr>(nameAttr).str();
        int32_t id = buffers.lookup(value);
        plan::Buffer *buf = p.mutable_buffers(id);
        if (buf->kind() == plan::TEMP && !claimed.count(id)) {
          // The producing op writes the graph output directly.
          buf->set_name(name);
          claimed.insert(id);
          p.add_outputs(id);
          continue;
        }
        // An input, parameter, constant or repeated output: copy it.
        auto [dtype, shape] = bufferType(value);
        int32_t out = writer.addBuffer(name, dtype, shape, plan::TEMP);
        plan::Op *copy = p.add_ops();
        copy->set_type("Identity");
        copy->set_name("output:" + name);
        copy->add_inputs(id);
        copy->add_outputs(out);
        claimed.insert(out);
        p.add_outputs(out);
      }
      continue;
    }
    if (auto cst = dyn_cast<ConstantOp>(op)) {
      auto attr = dyn_cast<DenseElementsAttr>(cst.getValue());
      auto [dtype, shape] = bufferType(cst.getResult());
      if (!attr || dtype == rt::DType::Undefined)
        return cst.emitOpError("constant cannot be stored in a plan");
      std::string name =
          locName(cst.getLoc(), "const") + "#" + std::to_string(counter++);
      auto id = writer.addDataBuffer(name, dtype, shape, plan::CONSTANT,
                                     constantBytes(attr));
      if (!id)
        return cst.emitOpError() << llvm::toString(id.takeError());
      buffers[cst.getResult()] = *id;
      continue;
    }
    if (!isa<ShardcDialect>(op.getDialect()))
      return op.emitOpError("cannot be lowered to a plan op");
    FailureOr<OpDesc> desc = describeOp(&op);
    if (failed(desc))
      return failure();
    plan::Op *pop = p.add_ops();
    pop->set_type(desc->type);
    std::string opName = locName(op.getLoc(), desc->type + "#" +
                                                  std::to_string(counter++));
    pop->set_name(opName);
    for (Value v : op.getOperands())
      pop->add_inputs(buffers.lookup(v));
    for (OpResult r : op.getResults()) {
      auto [dtype, shape] = bufferType(r);
      if (dtype == rt::DType::Undefined)
        return op.emitOpError("result ")
               << r.getResultNumber() << " has an element type plans cannot hold";
      int32_t id = writer.addBuffer(opName + ":" +
                                        std::to_string(r.getResultNumber()),
                                    dtype, shape, plan::TEMP);
      pop->add_outputs(id);
      buffers[r] = id;
    }
    for (const auto &[name, value] : desc->attrs.all())
      *pop->add_attributes() = toPlanAttr(name, value);
  }
  return success();
}

} // namespace shardc
