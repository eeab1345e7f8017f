//===- OpDesc.cpp - shardc ops as plan ops --------------------------------===//
#include "passes/LowerToPlan/OpDesc.h"

#include "ir/ShardcDialect.h"
#include "runtime/Backend.h"
#include "runtime/kernels/FusedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace shardc {

rt::DType toRuntimeType(Type t) {
  int64_t code = onnxTypeCode(t);
  auto d = rt::dtypeFromCode(code);
  return d ? *d : rt::DType::Undefined;
}

/// A FusedElementwise's body as its plan op's `program` and `results`
/// (runtime/kernels/FusedOps.h): block arguments are values 0 .. n-1, the
/// body's ops the values after them.
static void describeFused(FusedElementwiseOp fused, OpDesc &desc) {
  namespace ops = rt::ops;
  Block &body = fused.getBody().front();
  llvm::DenseMap<Value, int64_t> number;
  for (BlockArgument arg : body.getArguments())
    number[arg] = arg.getArgNumber();
  std::vector<int64_t> program;
  for (Operation &op : body.without_terminator()) {
    // The verifier has checked that FusedOps.h lists every body op.
    const ops::FusedOpInfo *info =
        ops::findFusedOp(op.getName().stripDialect().str());
    program.push_back(static_cast<int64_t>(info->code));
    for (unsigned a = 0; a < static_cast<unsigned>(ops::kFusedArgs); ++a)
      program.push_back(a < op.getNumOperands()
                            ? number.lookup(op.getOperand(a))
                            : int64_t(-1));
    int64_t next = static_cast<int64_t>(number.size());
    number[op.getResult(0)] = next;
  }
  std::vector<int64_t> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(number.lookup(v));
  desc.attrs.set("program", rt::AttrValue::ofInts(std::move(program)));
  desc.attrs.set("results", rt::AttrValue::ofInts(std::move(results)));
}

FailureOr<OpDesc> describeOp(Operation *op) {
  OpDesc desc;
  desc.type = op->getName().stripDialect().str();
  if (auto fused = dyn_cast<FusedElementwiseOp>(op))
    describeFused(fused, desc);
  for (NamedAttribute named : op->getAttrs()) {
    StringRef name = named.getName().getValue();
    Attribute attr = named.getValue();
    // Segment sizes and our discardable annotations are not kernel inputs.
    if (name == "operandSegmentSizes" || name == "resultSegmentSizes" ||
        name.starts_with("shardc."))
      continue;
    if (auto flag = dyn_cast<BoolAttr>(attr)) {
      desc.attrs.set(name.str(), rt::AttrValue::ofInt(flag.getValue() ? 1 : 0));
    } else if (auto reduction = dyn_cast<LossReductionAttr>(attr)) {
      desc.attrs.set(name.str(),
                     rt::AttrValue::ofString(
                         stringifyLossReduction(reduction.getValue()).str()));
    } else if (auto norm = dyn_cast<NormTypeAttr>(attr)) {
      desc.attrs.set(name.str(), rt::AttrValue::ofString(
                                     stringifyNormType(norm.getValue()).str()));
    } else if (auto schedule = dyn_cast<LrScheduleAttr>(attr)) {
      desc.attrs.set(name.str(),
                     rt::AttrValue::ofString(
                         stringifyLrSchedule(schedule.getValue()).str()));
    } else if (auto scaling = dyn_cast<LossScalingAttr>(attr)) {
      // LossScale's kernel reads the factors as attributes of their own.
      desc.attrs.set(
          "growth_factor",
          rt::AttrValue::ofFloat(scaling.getGrowthFactor().convertToDouble()));
      desc.attrs.set(
          "backoff_factor",
          rt::AttrValue::ofFloat(scaling.getBackoffFactor().convertToDouble()));
      desc.attrs.set("growth_interval",
                     rt::AttrValue::ofInt(scaling.getGrowthInterval()));
    } else if (auto i = dyn_cast<IntegerAttr>(attr)) {
      desc.attrs.set(name.str(), rt::AttrValue::ofInt(i.getInt()));
    } else if (auto f = dyn_cast<FloatAttr>(attr)) {
      desc.attrs.set(name.str(), rt::AttrValue::ofFloat(f.getValueAsDouble()));
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

} // namespace shardc
