//===- OpImporters.cpp - Helpers for per-operator importers ---------------===//
//
// ImportContext's operand, result and attribute helpers, the conversions
// from ONNX types and tensors that both the driver and the importers use,
// and the table of importers with the list of families in it.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "frontend/Importer.h"
#include "frontend/ModelValidator.h"
#include "ir/ShardcDialect.h"
#include "passes/FoldConstants.h"
#include "passes/LowerToPlan/OpDesc.h"

#include "mlir/IR/Matchers.h"

#include <cassert>
#include <cmath>

using namespace mlir;

namespace shardc {

//===----------------------------------------------------------------------===//
// ONNX types and tensors
//===----------------------------------------------------------------------===//

FailureOr<RankedTensorType> tensorTypeFromOnnx(MLIRContext *ctx,
                                               const onnx::TypeProto &type,
                                               llvm::StringRef name,
                                               Location loc) {
  if (!type.has_tensor_type())
    return emitError(loc) << "value '" << name
                          << "' is not a tensor (sequences, maps and optionals "
                             "are not supported)";
  const auto &tt = type.tensor_type();
  Type elem = elementTypeFromOnnxCode(ctx, tt.elem_type());
  if (!elem)
    return emitError(loc) << "value '" << name << "' has element type code "
                          << tt.elem_type() << ", which Shard does not support";
  if (!tt.has_shape())
    return emitError(loc) << "value '" << name
                          << "' has no inferred shape; Shard compiles static "
                             "shapes";
  SmallVector<int64_t> dims;
  for (const auto &d : tt.shape().dim()) {
    if (!d.has_dim_value())
      return emitError(loc)
             << "value '" << name << "' has a dynamic dimension"
             << (d.has_dim_param() ? " '" + d.dim_param() + "'" : std::string())
             << "; Shard compiles static shapes: give symbolic dimensions "
                "their sizes with --dim NAME=SIZE, bind the inputs whose "
                "values determine shapes with --bind NAME=FILE.npy, or "
                "export with fixed sizes";
    if (d.dim_value() < 0)
      return emitError(loc)
             << "value '" << name << "' has a negative dimension";
    dims.push_back(d.dim_value());
  }
  // Shapes that ONNX inferred from the model's values (an Expand or a
  // ConstantOfShape to a huge shape) are bounded here, where they enter the
  // IR: element counts never overflow past this point.
  if ((int64_t)dims.size() > kMaxRank)
    return emitError(loc) << "value '" << name << "' has rank " << dims.size()
                          << "; Shard supports ranks up to " << kMaxRank;
  if (!checkedElementCount(dims)) {
    std::string shape;
    for (auto [i, d] : llvm::enumerate(dims))
      shape += (i ? ", " : "") + std::to_string(d);
    return emitError(loc) << "value '" << name << "' has shape [" << shape
                          << "], " << countLimitText(dims);
  }
  return RankedTensorType::get(dims, elem);
}

DenseElementsAttr tensorAttrFromOnnx(MLIRContext *ctx,
                                     const onnx::TensorProto &t,
                                     llvm::StringRef modelDir, Location loc) {
  auto bytes = readTensorBytes(t, modelDir);
  if (!bytes) {
    emitError(loc) << llvm::toString(bytes.takeError());
    return nullptr;
  }
  Type elem = elementTypeFromOnnxCode(ctx, t.data_type());
  auto type = RankedTensorType::get(
      SmallVector<int64_t>(t.dims().begin(), t.dims().end()), elem);
  return constantFromBytes(type, *bytes);
}

//===----------------------------------------------------------------------===//
// ImportContext
//===----------------------------------------------------------------------===//

InFlightDiagnostic ImportContext::nodeError() {
  return emitError(nodeLoc)
         << onnxNode.op_type() << " (opset " << reportedOpset << "): ";
}

InFlightDiagnostic ImportContext::nodeWarning() {
  return emitWarning(nodeLoc)
         << onnxNode.op_type() << " (opset " << reportedOpset << "): ";
}

LogicalResult ImportContext::requireOperands(int min, int max) {
  const onnx::NodeProto &node = onnxNode;
  if (node.input_size() < min || node.input_size() > max)
    return nodeError() << "expects " << min
                       << (min == max ? "" : " to " + std::to_string(max))
                       << " inputs, got " << node.input_size();
  for (int i = 0; i < min; ++i)
    if (node.input(i).empty())
      return nodeError() << "required input " << i << " is missing";
  for (int i = 0; i < node.input_size(); ++i)
    if (!node.input(i).empty() && !values.count(node.input(i)))
      return nodeError() << "input '" << node.input(i)
                         << "' is not defined before this node";
  return success();
}

Value ImportContext::operand(int i) const {
  if (i >= onnxNode.input_size() || onnxNode.input(i).empty())
    return nullptr;
  return values.lookup(onnxNode.input(i));
}

FailureOr<SmallVector<int64_t>> ImportContext::constInts(int i,
                                                         llvm::StringRef what) {
  Value v = operand(i);
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr))) {
    auto diag = nodeError() << what << " (input '" << onnxNode.input(i)
                            << "') must be a compile-time constant";
    if (v && isa<BlockArgument>(v))
      diag << "; bind it with --bind " << onnxNode.input(i) << "=FILE.npy";
    return diag;
  }
  SmallVector<int64_t> out;
  if (isa<IntegerType>(attr.getElementType())) {
    for (APInt x : attr.getValues<APInt>())
      out.push_back(x.getSExtValue());
    return out;
  }
  // Some operands may be of any numeric type (OneHot's depth): float values
  // are taken when they are whole numbers.
  if (isa<FloatType>(attr.getElementType())) {
    for (APFloat x : attr.getValues<APFloat>()) {
      double d = x.convertToDouble();
      if (!(std::trunc(d) == d && std::fabs(d) < 9.0e18))
        return nodeError() << what << " (input '" << onnxNode.input(i)
                           << "') must hold whole numbers, got " << d;
      out.push_back(static_cast<int64_t>(d));
    }
    return out;
  }
  return nodeError() << what << " (input '" << onnxNode.input(i)
                     << "') must be integers, got " << attr.getType();
}

FailureOr<SmallVector<int64_t>> linearNdIndices(ImportContext &ctx,
                                                DenseElementsAttr indices,
                                                ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> idxShape = indices.getType().getShape();
  if (idxShape.empty() || idxShape.back() < 1 ||
      idxShape.back() > int64_t(shape.size()))
    return ctx.nodeError() << "indices " << indices.getType()
                           << " must end in a size from 1 to the data's rank "
                           << shape.size();
  int64_t k = idxShape.back();
  SmallVector<int64_t> idx, linear;
  for (const APInt &v : indices.getValues<APInt>())
    idx.push_back(v.getSExtValue());
  for (size_t t = 0; t < idx.size(); t += k) {
    int64_t at = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t i = idx[t + d];
      if (i < -shape[d] || i >= shape[d])
        return ctx.nodeError() << "index " << i << " is out of range for "
                               << "axis " << d << " of size " << shape[d];
      at = at * shape[d] + (i < 0 ? i + shape[d] : i);
    }
    linear.push_back(at);
  }
  return linear;
}

FailureOr<RankedTensorType> ImportContext::outType(int i) {
  if (i >= onnxNode.output_size() || onnxNode.output(i).empty())
    return nodeError() << "output " << i << " is missing";
  auto it = types.find(onnxNode.output(i));
  if (it == types.end()) {
    // Name the graph inputs whose values (not only shapes) the output's
    // shape may depend on: integer inputs other than the data input.
    SmallVector<std::string> bindable;
    for (int j = 1; j < onnxNode.input_size(); ++j)
      if (Value v = operand(j);
          v && isa<BlockArgument>(v) &&
          !isa<FloatType>(cast<ShapedType>(v.getType()).getElementType()))
        bindable.push_back(onnxNode.input(j));
    auto diag = nodeError() << "no shape could be inferred for output '"
                            << onnxNode.output(i) << "'";
    if (bindable.empty())
      return diag << "; Shard compiles static shapes, and this one depends "
                     "on values known only at run time";
    diag << ": it depends on the value of graph input"
         << (bindable.size() > 1 ? "s " : " ");
    for (auto [j, name] : llvm::enumerate(bindable))
      diag << (j ? ", '" : "'") << name << "'";
    if (bindable.size() > 1)
      return diag << "; Shard compiles static shapes: bind them with --bind "
                     "NAME=FILE.npy";
    return diag << "; Shard compiles static shapes: bind it with --bind "
                << bindable[0] << "=FILE.npy";
  }
  return tensorTypeFromOnnx(b.getContext(), it->second, onnxNode.output(i),
                            nodeLoc);
}

bool ImportContext::hasInferredShape(int i) const {
  if (i >= onnxNode.output_size())
    return false;
  auto it = types.find(onnxNode.output(i));
  return it != types.end() && it->second.has_tensor_type() &&
         it->second.tensor_type().has_shape();
}

bool ImportContext::hasStaticInferredShape(int i) const {
  if (!hasInferredShape(i))
    return false;
  const auto &shape =
      types.find(onnxNode.output(i))->second.tensor_type().shape();
  return llvm::all_of(shape.dim(),
                      [](const auto &d) { return d.has_dim_value(); });
}

LogicalResult ImportContext::finish(Operation *op, ArrayRef<int> outputIndex) {
  SmallVector<Value> results(op->getResults());
  SmallVector<Value> folded;
  if (succeeded(foldWithKernels(op, folded, foldLimitBytes)))
    results = folded;
  for (auto [i, v] : llvm::enumerate(results)) {
    int out = outputIndex.empty() ? (int)i : outputIndex[i];
    if (out >= 0 && out < onnxNode.output_size() &&
        !onnxNode.output(out).empty())
      define(out, v);
  }
  return success();
}

void ImportContext::define(int i, Value v) { values[onnxNode.output(i)] = v; }

Value ImportContext::splat(RankedTensorType type, Attribute elem) {
  std::optional<int64_t> bytes = tensorBytes(type);
  if (bytes && *bytes <= foldLimitBytes)
    return b.create<ConstantOp>(
        nodeLoc, type, cast<ElementsAttr>(DenseElementsAttr::get(type, elem)));
  auto scalarType = RankedTensorType::get({}, type.getElementType());
  Value scalar = b.create<ConstantOp>(
      nodeLoc, scalarType,
      cast<ElementsAttr>(DenseElementsAttr::get(scalarType, elem)));
  return b.create<ExpandOp>(nodeLoc, type, scalar);
}

LogicalResult ImportContext::checkIndexTable(int64_t count,
                                             llvm::StringRef what) {
  if (count >= 0 && count <= foldLimitBytes / 8)
    return success();
  return nodeError() << what << " needs an index constant of " << count
                     << " entries of 8 bytes, more than --fold-limit ("
                     << foldLimitBytes
                     << " bytes) allows; raise --fold-limit "
                        "to compile it";
}

FailureOr<RankedTensorType> ImportContext::checkedType(ArrayRef<int64_t> shape,
                                                       Type elem) {
  if ((int64_t)shape.size() <= kMaxRank && checkedElementCount(shape))
    return RankedTensorType::get(shape, elem);
  std::string dims;
  for (auto [i, d] : llvm::enumerate(shape))
    dims += (i ? ", " : "") + std::to_string(d);
  return nodeError() << "the result's shape [" << dims
                     << "] has a negative dimension, more than " << kMaxRank
                     << " dimensions or more than 2^46 elements";
}

bool ImportContext::hasAttr(llvm::StringRef name) const {
  return llvm::any_of(onnxNode.attribute(),
                      [&](const auto &a) { return a.name() == name; });
}

const onnx::AttributeProto *
ImportContext::attr(llvm::StringRef name,
                    onnx::AttributeProto::AttributeType type) {
  return findAttribute(
      onnxNode, name, type, [&] { return nodeError(); }, attrErrors);
}

int64_t ImportContext::intAttr(llvm::StringRef name, int64_t def) {
  const auto *a = attr(name, onnx::AttributeProto::INT);
  return a ? a->i() : def;
}

float ImportContext::floatAttr(llvm::StringRef name, float def) {
  const auto *a = attr(name, onnx::AttributeProto::FLOAT);
  return a ? a->f() : def;
}

std::string ImportContext::stringAttr(llvm::StringRef name,
                                      llvm::StringRef def) {
  const auto *a = attr(name, onnx::AttributeProto::STRING);
  return a ? a->s() : def.str();
}

SmallVector<int64_t> ImportContext::intsAttr(llvm::StringRef name) {
  SmallVector<int64_t> out;
  if (const auto *a = attr(name, onnx::AttributeProto::INTS))
    out.assign(a->ints().begin(), a->ints().end());
  return out;
}

DenseElementsAttr ImportContext::tensorAttr(const onnx::TensorProto &tensor) {
  return tensorAttrFromOnnx(b.getContext(), tensor, modelDir, nodeLoc);
}

FailureOr<int64_t> ImportContext::normAxis(int64_t axis, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (axis < -r || axis >= r)
    return nodeError() << "axis " << axis << " is out of range for rank "
                       << rank;
  return axis < 0 ? axis + r : axis;
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

void OpImporterTable::add(llvm::StringRef opType, OpImporter importer) {
  bool inserted = importers.try_emplace(opType, importer).second;
  assert(inserted && "two importers registered for one op type");
  (void)inserted;
}

void registerAllOpImporters(OpImporterTable &table) {
  registerElementwiseImporters(table);
  registerLinalgImporters(table);
  registerNormalizationImporters(table);
  registerReduceImporters(table);
  registerConvPoolImporters(table);
  registerDataMovementImporters(table);
  registerConstantsImporters(table);
  registerLossImporters(table);
  registerRecurrentImporters(table);
}

} // namespace shardc
