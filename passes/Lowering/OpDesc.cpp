//===- OpDesc.cpp - shardc ops as plan ops, and folding by kernels --------===//
#include "passes/Lowering/OpDesc.h"

#include "ir/ShardcDialect.h"
#include "runtime/Backend.h"
#include "runtime/cpu/Kernels.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace shardc {

rt::DType toRuntimeType(Type t) {
  int64_t code = onnxTypeCode(t);
  auto d = rt::dtypeFromCode(code);
  return d ? *d : rt::DType::Undefined;
}

FailureOr<OpDesc> describeOp(Operation *op) {
  OpDesc desc;
  desc.type = op->getName().stripDialect().str();
  for (NamedAttribute named : op->getAttrs()) {
    StringRef name = named.getName().getValue();
    Attribute attr = named.getValue();
    // Segment sizes and our discardable annotations are not kernel inputs.
    if (name == "operandSegmentSizes" || name == "resultSegmentSizes" ||
        name.starts_with("shardc."))
      continue;
    if (auto i = dyn_cast<IntegerAttr>(attr)) {
      desc.attrs.set(name.str(), rt::AttrValue::ofInt(i.getInt()));
    } else if (auto f = dyn_cast<FloatAttr>(attr)) {
      desc.attrs.set(name.str(),
                     rt::AttrValue::ofFloat(f.getValueAsDouble()));
    } else if (auto s = dyn_cast<StringAttr>(attr)) {
      desc.attrs.set(name.str(), rt::AttrValue::ofString(s.str()));
    } else if (auto a = dyn_cast<DenseI64ArrayAttr>(attr)) {
      desc.attrs.set(name.str(), rt::AttrValue::ofInts(
                                     std::vector<int64_t>(a.asArrayRef())));
    } else if (auto a = dyn_cast<DenseF64ArrayAttr>(attr)) {
      desc.attrs.set(name.str(), rt::AttrValue::ofFloats(
                                     std::vector<double>(a.asArrayRef())));
    } else {
      return op->emitOpError("attribute '")
             << name << "' cannot be carried by a plan op";
    }
  }
  return desc;
}

std::vector<uint8_t> constantBytes(DenseElementsAttr attr) {
  auto type = cast<RankedTensorType>(attr.getType());
  int64_t n = type.getNumElements();
  Type et = type.getElementType();
  if (et.isInteger(1)) {
    std::vector<uint8_t> out;
    out.reserve(n);
    for (bool b : attr.getValues<bool>())
      out.push_back(b ? 1 : 0);
    return out;
  }
  size_t elemBytes = rt::dtypeSize(toRuntimeType(et));
  ArrayRef<char> raw = attr.getRawData();
  std::vector<uint8_t> out(n * elemBytes);
  if (attr.isSplat()) {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out.data() + i * elemBytes, raw.data(), elemBytes);
  } else {
    std::memcpy(out.data(), raw.data(), out.size());
  }
  return out;
}

DenseElementsAttr constantFromBytes(RankedTensorType type,
                                    ArrayRef<uint8_t> bytes) {
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> bits;
    bits.reserve(bytes.size());
    for (uint8_t b : bytes)
      bits.push_back(b != 0);
    return DenseElementsAttr::get(type, bits);
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(reinterpret_cast<const char *>(bytes.data()),
                           bytes.size()));
}

/// Largest result, in bytes, that folding may create.
static constexpr int64_t kMaxFoldBytes = 16 << 20;

LogicalResult foldWithKernels(Operation *op,
                              SmallVectorImpl<Value> &replacements) {
  if (!isa<ShardcDialect>(op->getDialect()) || isa<ConstantOp>(op) ||
      op->getNumResults() == 0)
    return failure();
  // Operand values where known; null for non-constant operands.
  SmallVector<Attribute> operandAttrs;
  SmallVector<DenseElementsAttr> operands;
  bool allConstant = true;
  for (Value v : op->getOperands()) {
    DenseElementsAttr attr;
    if (matchPattern(v, m_Constant(&attr)))
      operands.push_back(attr);
    else
      allConstant = false;
    operandAttrs.push_back(attr);
  }
  // Ops with a folder of their own (Shape, Reshape) fold through it, even
  // with non-constant operands (a Shape needs only its operand's type).
  SmallVector<OpFoldResult> folded;
  if (succeeded(op->fold(operandAttrs, folded)) && !folded.empty()) {
    OpBuilder b(op);
    SmallVector<Value> repl;
    for (auto [res, f] : llvm::zip(op->getResults(), folded)) {
      if (auto v = dyn_cast<Value>(f)) {
        repl.push_back(v);
        continue;
      }
      auto attr = dyn_cast<DenseElementsAttr>(cast<Attribute>(f));
      if (!attr)
        return failure();
      repl.push_back(b.create<ConstantOp>(op->getLoc(), res.getType(), attr));
    }
    op->replaceAllUsesWith(repl);
    op->erase();
    replacements.assign(repl.begin(), repl.end());
    return success();
  }
  if (!allConstant)
    return failure();
  for (Value r : op->getResults()) {
    auto t = cast<RankedTensorType>(r.getType());
    if (toRuntimeType(t.getElementType()) == rt::DType::Undefined ||
        t.getNumElements() * 8 > kMaxFoldBytes)
      return failure();
  }

  FailureOr<OpDesc> desc = describeOp(op);
  if (failed(desc))
    return failure();
  std::vector<std::vector<uint8_t>> inBytes, outBytes;
  std::vector<rt::TensorView> ins, outs;
  inBytes.reserve(operands.size());
  for (DenseElementsAttr a : operands) {
    inBytes.push_back(constantBytes(a));
    auto t = cast<RankedTensorType>(a.getType());
    ins.emplace_back(toRuntimeType(t.getElementType()), t.getShape(),
                     inBytes.back().data());
  }
  outBytes.reserve(op->getNumResults());
  for (Value r : op->getResults()) {
    auto t = cast<RankedTensorType>(r.getType());
    auto dt = toRuntimeType(t.getElementType());
    outBytes.emplace_back(t.getNumElements() * rt::dtypeSize(dt));
    outs.emplace_back(dt, t.getShape(), outBytes.back().data());
  }
  // Views need non-null data even for empty tensors.
  static uint8_t dummy[8];
  for (auto &v : ins)
    if (!v.data)
      v.data = dummy;
  for (auto &v : outs)
    if (!v.data)
      v.data = dummy;
  std::string name = desc->type;
  rt::KernelContext ctx{desc->type, name, desc->attrs, ins, outs};
  if (llvm::Error err = rt::cpu::runKernel(ctx)) {
    // Not foldable here; the runtime will report the same error if it runs.
    llvm::consumeError(std::move(err));
    return failure();
  }
  OpBuilder b(op);
  SmallVector<Value> repl;
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    auto t = cast<RankedTensorType>(r.getType());
    repl.push_back(b.create<ConstantOp>(op->getLoc(), t,
                                        constantFromBytes(t, outBytes[i])));
  }
  op->replaceAllUsesWith(repl);
  op->erase();
  replacements.assign(repl.begin(), repl.end());
  return success();
}

} // namespace shardc
