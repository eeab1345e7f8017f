//===- Importer.cpp - ONNX model to shardc IR -----------------------------===//
#include "frontend/Importer.h"

#include "frontend/OnnxBridge.h"
#include "ir/ShardcDialect.h"
#include "passes/Lowering/OpDesc.h"
#include "runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <limits>

using namespace mlir;

namespace shardc {

static constexpr int kMinOpset = 13;
static constexpr int kMaxOpset = 17;

static llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

//===----------------------------------------------------------------------===//
// Tensor data
//===----------------------------------------------------------------------===//

/// Reads external data, confined to `modelDir` and to the file's size.
static llvm::Expected<std::vector<uint8_t>>
readExternal(const onnx::TensorProto &t, llvm::StringRef modelDir,
             uint64_t expectedBytes) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      uint64_t v;
      if (llvm::StringRef(kv.value()).getAsInteger(10, v))
        return makeError("initializer '" + t.name() + "': external data " +
                         kv.key() + " '" + kv.value() + "' is not a number");
      if (kv.key() == "offset")
        offset = v;
      else
        length = v;
    }
  }
  if (location.empty())
    return makeError("initializer '" + t.name() +
                     "': external data has no location");
  if (llvm::sys::path::is_absolute(location))
    return makeError("initializer '" + t.name() + "': external data location '" +
                     location + "' is absolute; it must be relative to the "
                     "model's directory");
  llvm::SmallString<256> path(modelDir);
  llvm::sys::path::append(path, location);
  llvm::SmallString<256> realDir, realFile;
  if (llvm::sys::fs::real_path(modelDir, realDir))
    return makeError("cannot resolve the model directory '" + modelDir + "'");
  if (std::error_code ec = llvm::sys::fs::real_path(path, realFile))
    return makeError("initializer '" + t.name() + "': cannot open external "
                     "data file '" + location + "': " + ec.message());
  llvm::SmallString<256> prefix(realDir);
  llvm::sys::path::append(prefix, "");
  if (!llvm::StringRef(realFile).starts_with(prefix))
    return makeError("initializer '" + t.name() + "': external data file '" +
                     location + "' lies outside the model's directory " +
                     realDir);
  uint64_t fileSize = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(realFile, fileSize))
    return makeError("initializer '" + t.name() + "': cannot stat '" +
                     location + "': " + ec.message());
  uint64_t bytes = length.value_or(expectedBytes);
  if (bytes != expectedBytes)
    return makeError("initializer '" + t.name() + "': external data length " +
                     llvm::Twine(bytes) + " differs from the " +
                     llvm::Twine(expectedBytes) + " bytes its shape needs");
  if (offset > fileSize || bytes > fileSize - offset)
    return makeError("initializer '" + t.name() + "': external data [" +
                     llvm::Twine(offset) + ", " + llvm::Twine(offset + bytes) +
                     ") runs past the end of '" + location + "' (" +
                     llvm::Twine(fileSize) + " bytes)");
  std::vector<uint8_t> out(bytes);
  if (bytes == 0)
    return out;
  auto buf = llvm::MemoryBuffer::getFileSlice(realFile, bytes, offset);
  if (!buf)
    return makeError("initializer '" + t.name() + "': cannot read '" +
                     location + "': " + buf.getError().message());
  std::memcpy(out.data(), (*buf)->getBufferStart(), bytes);
  return out;
}

llvm::Expected<std::vector<uint8_t>>
readTensorBytes(const onnx::TensorProto &t, llvm::StringRef modelDir) {
  auto dtype = rt::dtypeFromCode(t.data_type());
  if (!dtype)
    return makeError("tensor '" + t.name() + "' has element type code " +
                     llvm::Twine(t.data_type()) + ", which Shard does not "
                     "support (float32, float64, float16, int64, int32, "
                     "int8, uint8, bool)");
  uint64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      return makeError("tensor '" + t.name() + "' has a negative dimension");
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / 8 / d)
      return makeError("tensor '" + t.name() + "' is too large");
    n *= d;
  }
  size_t elem = rt::dtypeSize(*dtype);
  uint64_t expected = n * elem;
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return readExternal(t, modelDir, expected);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != expected)
      return makeError("tensor '" + t.name() + "' has " +
                       llvm::Twine(t.raw_data().size()) +
                       " bytes of raw data; its shape needs " +
                       llvm::Twine(expected));
    std::vector<uint8_t> out(expected);
    std::memcpy(out.data(), t.raw_data().data(), expected);
    if (*dtype == rt::DType::Bool)
      for (uint8_t &b : out)
        b = b != 0;
    return out;
  }
  std::vector<uint8_t> out(expected);
  auto countError = [&](size_t have) {
    return makeError("tensor '" + t.name() + "' has " + llvm::Twine(have) +
                     " values; its shape needs " + llvm::Twine(n));
  };
  switch (*dtype) {
  case rt::DType::F32:
    if ((uint64_t)t.float_data_size() != n)
      return countError(t.float_data_size());
    std::memcpy(out.data(), t.float_data().data(), expected);
    break;
  case rt::DType::F64:
    if ((uint64_t)t.double_data_size() != n)
      return countError(t.double_data_size());
    std::memcpy(out.data(), t.double_data().data(), expected);
    break;
  case rt::DType::I64:
    if ((uint64_t)t.int64_data_size() != n)
      return countError(t.int64_data_size());
    std::memcpy(out.data(), t.int64_data().data(), expected);
    break;
  case rt::DType::I32:
  case rt::DType::I8:
  case rt::DType::U8:
  case rt::DType::Bool:
  case rt::DType::F16:
    if ((uint64_t)t.int32_data_size() != n)
      return countError(t.int32_data_size());
    for (uint64_t i = 0; i < n; ++i) {
      int32_t v = t.int32_data(i);
      if (*dtype == rt::DType::Bool)
        v = v != 0;
      std::memcpy(out.data() + i * elem, &v, elem); // little endian
    }
    break;
  case rt::DType::Undefined:
    break;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

namespace {

class Importer {
public:
  Importer(MLIRContext &ctx, ImportedModel &result, llvm::StringRef path)
      : ctx(ctx), b(&ctx), result(result), path(path.str()) {}

  LogicalResult run(const ImportOptions &options);

private:
  using NodeFn = LogicalResult (Importer::*)(const onnx::NodeProto &);

  // Set-up.
  LogicalResult prepareModel(const ImportOptions &options);
  LogicalResult buildFunction();
  LogicalResult importNode(const onnx::NodeProto &node);

  // Helpers.
  Location nodeLoc(const onnx::NodeProto &node);
  InFlightDiagnostic nodeError(const onnx::NodeProto &node);
  FailureOr<RankedTensorType> tensorType(const onnx::TypeProto &type,
                                         llvm::StringRef name, Location loc);
  FailureOr<RankedTensorType> outType(const onnx::NodeProto &node, int i);
  Value operand(const onnx::NodeProto &node, int i);
  LogicalResult requireOperands(const onnx::NodeProto &node, int min, int max);
  const onnx::AttributeProto *attr(const onnx::NodeProto &node,
                                   llvm::StringRef name);
  int64_t intAttr(const onnx::NodeProto &node, llvm::StringRef name,
                  int64_t def);
  float floatAttr(const onnx::NodeProto &node, llvm::StringRef name,
                  float def);
  std::string stringAttr(const onnx::NodeProto &node, llvm::StringRef name,
                         llvm::StringRef def);
  SmallVector<int64_t> intsAttr(const onnx::NodeProto &node,
                                llvm::StringRef name);
  FailureOr<int64_t> normAxis(const onnx::NodeProto &node, int64_t axis,
                              int64_t rank);
  /// Values of a constant integer operand; failure (with an error naming
  /// what) if the operand is not a compile-time constant.
  FailureOr<SmallVector<int64_t>> constInts(const onnx::NodeProto &node,
                                            int i, llvm::StringRef what);
  /// Maps the results of `op` to the node's outputs, then folds it if all of
  /// its operands are constants.
  LogicalResult finish(const onnx::NodeProto &node, Operation *op,
                       ArrayRef<int> outputIndex = {});
  void define(const std::string &name, Value v) { values[name] = v; }
  DenseElementsAttr tensorAttr(const onnx::TensorProto &t, Location loc);

  // Node importers.
  template <typename OpT> LogicalResult binary(const onnx::NodeProto &);
  template <typename OpT> LogicalResult unary(const onnx::NodeProto &);
  template <typename OpT> LogicalResult softmaxLike(const onnx::NodeProto &);
  template <typename OpT> LogicalResult reduce(const onnx::NodeProto &);
  LogicalResult importWhere(const onnx::NodeProto &);
  LogicalResult importCast(const onnx::NodeProto &);
  LogicalResult importGemm(const onnx::NodeProto &);
  LogicalResult importMatMul(const onnx::NodeProto &);
  LogicalResult importLayerNorm(const onnx::NodeProto &);
  LogicalResult importBatchNorm(const onnx::NodeProto &);
  LogicalResult importConv(const onnx::NodeProto &);
  LogicalResult importMaxPool(const onnx::NodeProto &);
  LogicalResult importAveragePool(const onnx::NodeProto &);
  LogicalResult importGlobalAveragePool(const onnx::NodeProto &);
  LogicalResult importReshapeLike(const onnx::NodeProto &);
  LogicalResult importTranspose(const onnx::NodeProto &);
  LogicalResult importGather(const onnx::NodeProto &);
  LogicalResult importConcat(const onnx::NodeProto &);
  LogicalResult importSplit(const onnx::NodeProto &);
  LogicalResult importSlice(const onnx::NodeProto &);
  LogicalResult importExpand(const onnx::NodeProto &);
  LogicalResult importShape(const onnx::NodeProto &);
  LogicalResult importConstant(const onnx::NodeProto &);
  LogicalResult importConstantOfShape(const onnx::NodeProto &);
  LogicalResult importDropout(const onnx::NodeProto &);
  LogicalResult importSoftmaxCrossEntropy(const onnx::NodeProto &);
  LogicalResult importNllLoss(const onnx::NodeProto &);

  /// Window attributes shared by Conv and the pools, with auto_pad resolved.
  struct Window {
    SmallVector<int64_t> kernel, strides, dilations, pads;
  };
  FailureOr<Window> window(const onnx::NodeProto &node, RankedTensorType in,
                           ArrayRef<int64_t> kernel, bool hasDilations,
                           bool ceil);

  MLIRContext &ctx;
  OpBuilder b;
  ImportedModel &result;
  std::string path;
  int opset = 0;
  llvm::StringMap<Value> values;
  llvm::StringMap<onnx::TypeProto> valueTypes;
  /// Graph inputs frozen by --bind: constants, never parameters.
  llvm::StringSet<> boundNames;
  unsigned nodeIndex = 0;
};

} // namespace

Location Importer::nodeLoc(const onnx::NodeProto &node) {
  std::string name = node.name().empty()
                         ? node.op_type() + "#" + std::to_string(nodeIndex)
                         : node.name();
  return NameLoc::get(StringAttr::get(&ctx, name),
                      FileLineColLoc::get(&ctx, path, 0, 0));
}

InFlightDiagnostic Importer::nodeError(const onnx::NodeProto &node) {
  return emitError(nodeLoc(node))
         << node.op_type() << " (opset " << opset << "): ";
}

FailureOr<RankedTensorType> Importer::tensorType(const onnx::TypeProto &type,
                                                 llvm::StringRef name,
                                                 Location loc) {
  if (!type.has_tensor_type())
    return emitError(loc) << "value '" << name
                          << "' is not a tensor (sequences, maps and optionals "
                             "are not supported)";
  const auto &tt = type.tensor_type();
  Type elem = elementTypeFromOnnxCode(&ctx, tt.elem_type());
  if (!elem)
    return emitError(loc) << "value '" << name << "' has element type code "
                          << tt.elem_type()
                          << ", which Shard does not support";
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
             << "; Shard compiles static shapes: export with fixed sizes, or "
                "bind the inputs that determine shapes with --bind";
    if (d.dim_value() < 0)
      return emitError(loc) << "value '" << name << "' has a negative dimension";
    dims.push_back(d.dim_value());
  }
  return RankedTensorType::get(dims, elem);
}

FailureOr<RankedTensorType> Importer::outType(const onnx::NodeProto &node,
                                              int i) {
  if (i >= node.output_size() || node.output(i).empty())
    return nodeError(node) << "output " << i << " is missing";
  auto it = valueTypes.find(node.output(i));
  if (it == valueTypes.end())
    return nodeError(node) << "no shape could be inferred for output '"
                           << node.output(i)
                           << "'; Shard compiles static shapes: bind the "
                              "inputs that determine it with --bind";
  return tensorType(it->second, node.output(i), nodeLoc(node));
}

Value Importer::operand(const onnx::NodeProto &node, int i) {
  if (i >= node.input_size() || node.input(i).empty())
    return nullptr;
  return values.lookup(node.input(i));
}

LogicalResult Importer::requireOperands(const onnx::NodeProto &node, int min,
                                        int max) {
  if (node.input_size() < min || node.input_size() > max)
    return nodeError(node) << "expects " << min
                           << (min == max ? "" : " to " + std::to_string(max))
                           << " inputs, got " << node.input_size();
  for (int i = 0; i < min; ++i)
    if (node.input(i).empty())
      return nodeError(node) << "required input " << i << " is missing";
  for (int i = 0; i < node.input_size(); ++i)
    if (!node.input(i).empty() && !values.count(node.input(i)))
      return nodeError(node) << "input '" << node.input(i)
                             << "' is not defined before this node";
  return success();
}

const onnx::AttributeProto *Importer::attr(const onnx::NodeProto &node,
                                           llvm::StringRef name) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t Importer::intAttr(const onnx::NodeProto &node, llvm::StringRef name,
                          int64_t def) {
  const auto *a = attr(node, name);
  return a ? a->i() : def;
}

float Importer::floatAttr(const onnx::NodeProto &node, llvm::StringRef name,
                          float def) {
  const auto *a = attr(node, name);
  return a ? a->f() : def;
}

std::string Importer::stringAttr(const onnx::NodeProto &node,
                                 llvm::StringRef name, llvm::StringRef def) {
  const auto *a = attr(node, name);
  return a ? a->s() : def.str();
}

SmallVector<int64_t> Importer::intsAttr(const onnx::NodeProto &node,
                                        llvm::StringRef name) {
  SmallVector<int64_t> out;
  if (const auto *a = attr(node, name))
    out.assign(a->ints().begin(), a->ints().end());
  return out;
}

FailureOr<int64_t> Importer::normAxis(const onnx::NodeProto &node,
                                      int64_t axis, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (axis < -r || axis >= r)
    return nodeError(node) << "axis " << axis << " is out of range for rank "
                           << rank;
  return axis < 0 ? axis + r : axis;
}

FailureOr<SmallVector<int64_t>>
Importer::constInts(const onnx::NodeProto &node, int i, llvm::StringRef what) {
  Value v = operand(node, i);
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr))) {
    auto diag = nodeError(node) << what << " (input '" << node.input(i)
                                << "') must be a compile-time constant";
    if (v && isa<BlockArgument>(v))
      diag << "; bind it with --bind " << node.input(i) << "=FILE.npy";
    return diag;
  }
  SmallVector<int64_t> out;
  for (APInt x : attr.getValues<APInt>())
    out.push_back(x.getSExtValue());
  return out;
}

LogicalResult Importer::finish(const onnx::NodeProto &node, Operation *op,
                               ArrayRef<int> outputIndex) {
  SmallVector<Value> results(op->getResults());
  SmallVector<Value> folded;
  if (succeeded(foldWithKernels(op, folded)))
    results = folded;
  for (auto [i, v] : llvm::enumerate(results)) {
    int out = outputIndex.empty() ? (int)i : outputIndex[i];
    if (out >= 0 && out < node.output_size() && !node.output(out).empty())
      define(node.output(out), v);
  }
  return success();
}

DenseElementsAttr Importer::tensorAttr(const onnx::TensorProto &t,
                                       Location loc) {
  auto bytes = readTensorBytes(t, result.modelDir);
  if (!bytes) {
    emitError(loc) << llvm::toString(bytes.takeError());
    return nullptr;
  }
  Type elem = elementTypeFromOnnxCode(&ctx, t.data_type());
  auto type = RankedTensorType::get(
      SmallVector<int64_t>(t.dims().begin(), t.dims().end()), elem);
  return constantFromBytes(type, *bytes);
}

//===----------------------------------------------------------------------===//
// Model preparation
//===----------------------------------------------------------------------===//

LogicalResult Importer::prepareModel(const ImportOptions &options) {
  onnx::ModelProto &model = result.model;
  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  auto fail = [&](llvm::Error err) {
    return emitError(fileLoc) << llvm::toString(std::move(err));
  };
  if (llvm::Error err = onnxbridge::readModel(path, model))
    return fail(std::move(err));

  opset = 0;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = static_cast<int>(o.version());
  if (opset == 0)
    return emitError(fileLoc) << "the model imports no version of the "
                                 "default ONNX opset";
  for (const auto &node : model.graph().node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return emitError(nodeLoc(node))
             << node.op_type() << " is in domain '" << node.domain()
             << "'; Shard supports the default ONNX domain only";
    ++nodeIndex;
  }
  nodeIndex = 0;

  // Every graph output must come from somewhere before ONNX's converter or
  // shape inference sees the graph (the converter crashes otherwise).
  {
    llvm::StringSet<> defined;
    for (const auto &in : model.graph().input())
      defined.insert(in.name());
    for (const auto &init : model.graph().initializer())
      defined.insert(init.name());
    for (const auto &node : model.graph().node())
      for (const auto &out : node.output())
        defined.insert(out);
    for (const auto &out : model.graph().output())
      if (!defined.count(out.name()))
        return emitError(fileLoc) << "graph output '" << out.name()
                                  << "' is produced by no node";
  }

  // Integer and bool initializers may fix shapes (a Reshape target):
  // shape inference needs their values, so external ones are read now,
  // with the same confinement to the model's directory.
  for (onnx::TensorProto &init :
       *model.mutable_graph()->mutable_initializer()) {
    if (init.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    Type elem = elementTypeFromOnnxCode(&ctx, init.data_type());
    if (!elem || isa<FloatType>(elem))
      continue;
    auto bytes = readTensorBytes(init, result.modelDir);
    if (!bytes)
      return fail(bytes.takeError());
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.set_raw_data(bytes->data(), bytes->size());
  }
  if (opset > kMaxOpset)
    return emitError(fileLoc) << "the model uses opset " << opset
                              << "; Shard supports opsets " << kMinOpset
                              << "-" << kMaxOpset
                              << " (export with opset_version=" << kMaxOpset
                              << ")";
  if (opset < kMinOpset) {
    // The version converter's adapters need the shapes of their inputs; a
    // failure here is reported by the strict inference after conversion.
    llvm::consumeError(onnxbridge::inferShapes(model, /*strict=*/false));
    if (llvm::Error err = onnxbridge::convertVersion(model, kMinOpset))
      return fail(std::move(err));
    opset = kMinOpset;
  }

  // Bound inputs become initializers, so shape inference sees their values.
  onnx::GraphProto *graph = model.mutable_graph();
  llvm::StringSet<> initNames;
  for (const auto &init : graph->initializer())
    initNames.insert(init.name());
  for (const auto &[name, tensor] : options.binds) {
    int idx = -1;
    for (int i = 0; i < graph->input_size(); ++i)
      if (graph->input(i).name() == name)
        idx = i;
    if (idx < 0 || initNames.count(name))
      return emitError(fileLoc) << "--bind " << name
                                << ": the model has no graph input of that name";
    const auto &tt = graph->input(idx).type().tensor_type();
    if (tt.elem_type() != tensor.onnxType)
      return emitError(fileLoc)
             << "--bind " << name << ": the input has element type code "
             << tt.elem_type() << ", the bound data " << tensor.onnxType;
    if (tt.has_shape()) {
      bool ok = tt.shape().dim_size() == (int)tensor.shape.size();
      for (int i = 0; ok && i < tt.shape().dim_size(); ++i)
        ok = !tt.shape().dim(i).has_dim_value() ||
             tt.shape().dim(i).dim_value() == tensor.shape[i];
      if (!ok)
        return emitError(fileLoc) << "--bind " << name
                                  << ": the bound data's shape does not match "
                                     "the input's";
    }
    onnx::TensorProto *init = graph->add_initializer();
    init->set_name(name);
    init->set_data_type(static_cast<int32_t>(tensor.onnxType));
    for (int64_t d : tensor.shape)
      init->add_dims(d);
    init->set_raw_data(tensor.bytes.data(), tensor.bytes.size());
    graph->mutable_input()->DeleteSubrange(idx, 1);
    boundNames.insert(name);
  }

  if (llvm::Error err = onnxbridge::inferShapes(model, /*strict=*/true))
    return fail(std::move(err));

  for (const auto &vi : graph->input())
    valueTypes[vi.name()] = vi.type();
  for (const auto &vi : graph->value_info())
    valueTypes[vi.name()] = vi.type();
  for (const auto &vi : graph->output())
    if (vi.type().has_tensor_type() && vi.type().tensor_type().has_shape())
      valueTypes[vi.name()] = vi.type();
  return success();
}

LogicalResult Importer::buildFunction() {
  const onnx::GraphProto &graph = result.model.graph();
  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  ModuleOp module = ModuleOp::create(fileLoc);
  result.module = OwningOpRef<ModuleOp>(module);
  if (!graph.name().empty())
    module->setAttr("shardc.model_name", b.getStringAttr(graph.name()));

  // Arguments: graph inputs (without initializers), then float initializers.
  llvm::StringSet<> initNames;
  for (const auto &init : graph.initializer())
    initNames.insert(init.name());
  SmallVector<Type> argTypes;
  SmallVector<NamedAttribute> argAttrs;
  SmallVector<std::string> argNames;
  SmallVector<DictionaryAttr> argDicts;
  for (const auto &vi : graph.input()) {
    if (initNames.count(vi.name()))
      continue;
    auto type = tensorType(vi.type(), vi.name(), fileLoc);
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    argNames.push_back(vi.name());
    argDicts.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kInputAttrName, b.getStringAttr(vi.name()))));
  }
  SmallVector<const onnx::TensorProto *> constInits;
  for (const auto &init : graph.initializer()) {
    Type elem = elementTypeFromOnnxCode(&ctx, init.data_type());
    if (!elem)
      return emitError(fileLoc) << "initializer '" << init.name()
                                << "' has unsupported element type code "
                                << init.data_type();
    if (!isa<FloatType>(elem) || boundNames.count(init.name())) {
      constInits.push_back(&init);
      continue;
    }
    argTypes.push_back(RankedTensorType::get(
        SmallVector<int64_t>(init.dims().begin(), init.dims().end()), elem));
    argNames.push_back(init.name());
    argDicts.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kParamAttrName, b.getStringAttr(init.name()))));
  }

  SmallVector<Type> resultTypes;
  SmallVector<Attribute> outputNames;
  for (const auto &vi : graph.output()) {
    auto it = valueTypes.find(vi.name());
    if (it == valueTypes.end() && initNames.count(vi.name()) == 0) {
      bool isInput = false;
      for (const auto &in : graph.input())
        isInput |= in.name() == vi.name();
      if (!isInput)
        return emitError(fileLoc) << "no static shape could be inferred for "
                                     "graph output '"
                                  << vi.name() << "'";
    }
    outputNames.push_back(b.getStringAttr(vi.name()));
  }

  b.setInsertionPointToEnd(module.getBody());
  auto func = b.create<func::FuncOp>(
      fileLoc, "main", b.getFunctionType(argTypes, {}));
  func->setAttr(kOutputNamesAttrName, b.getArrayAttr(outputNames));
  Block *entry = func.addEntryBlock();
  for (auto [i, dict] : llvm::enumerate(argDicts)) {
    func.setArgAttrs(i, dict);
    define(argNames[i], entry->getArgument(i));
  }
  b.setInsertionPointToEnd(entry);
  for (const onnx::TensorProto *init : constInits) {
    DenseElementsAttr attr = tensorAttr(*init, fileLoc);
    if (!attr)
      return failure();
    Location loc = NameLoc::get(b.getStringAttr(init->name()), fileLoc);
    define(init->name(), b.create<ConstantOp>(loc, attr.getType(), attr));
  }

  for (const auto &node : graph.node()) {
    if (failed(importNode(node)))
      return failure();
    ++nodeIndex;
  }

  SmallVector<Value> results;
  for (const auto &vi : graph.output()) {
    Value v = values.lookup(vi.name());
    if (!v)
      return emitError(fileLoc) << "graph output '" << vi.name()
                                << "' is produced by no node";
    // A declared static output shape must agree with the computed one.
    const auto &tt = vi.type().tensor_type();
    if (tt.has_shape()) {
      auto computed = cast<RankedTensorType>(v.getType()).getShape();
      bool same = tt.shape().dim_size() == (int)computed.size();
      for (int i = 0; same && i < tt.shape().dim_size(); ++i)
        same = !tt.shape().dim(i).has_dim_value() ||
               tt.shape().dim(i).dim_value() == computed[i];
      if (!same)
        return emitError(fileLoc)
               << "graph output '" << vi.name() << "' is declared with a "
               << "shape the model does not compute (computed "
               << v.getType() << ")";
    }
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  b.create<func::ReturnOp>(fileLoc, results);
  func.setFunctionType(b.getFunctionType(argTypes, resultTypes));
  return success();
}

LogicalResult Importer::run(const ImportOptions &options) {
  result.modelDir = llvm::sys::path::parent_path(path).str();
  if (result.modelDir.empty())
    result.modelDir = ".";
  if (failed(prepareModel(options)) || failed(buildFunction()))
    return failure();
  if (failed(verify(*result.module)))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Node importers
//===----------------------------------------------------------------------===//

LogicalResult Importer::importNode(const onnx::NodeProto &node) {
  static const llvm::StringMap<NodeFn> table = {
      {"Add", &Importer::binary<AddOp>},
      {"Sub", &Importer::binary<SubOp>},
      {"Mul", &Importer::binary<MulOp>},
      {"Div", &Importer::binary<DivOp>},
      {"Pow", &Importer::binary<PowOp>},
      {"Where", &Importer::importWhere},
      {"Sqrt", &Importer::unary<SqrtOp>},
      {"Exp", &Importer::unary<ExpOp>},
      {"Log", &Importer::unary<LogOp>},
      {"Erf", &Importer::unary<ErfOp>},
      {"Tanh", &Importer::unary<TanhOp>},
      {"Sigmoid", &Importer::unary<SigmoidOp>},
      {"Neg", &Importer::unary<NegOp>},
      {"Relu", &Importer::unary<ReluOp>},
      {"Identity", &Importer::unary<IdentityOp>},
      {"Cast", &Importer::importCast},
      {"Softmax", &Importer::softmaxLike<SoftmaxOp>},
      {"LogSoftmax", &Importer::softmaxLike<LogSoftmaxOp>},
      {"Gemm", &Importer::importGemm},
      {"MatMul", &Importer::importMatMul},
      {"LayerNormalization", &Importer::importLayerNorm},
      {"BatchNormalization", &Importer::importBatchNorm},
      {"Conv", &Importer::importConv},
      {"MaxPool", &Importer::importMaxPool},
      {"AveragePool", &Importer::importAveragePool},
      {"GlobalAveragePool", &Importer::importGlobalAveragePool},
      {"Flatten", &Importer::importReshapeLike},
      {"Reshape", &Importer::importReshapeLike},
      {"Squeeze", &Importer::importReshapeLike},
      {"Unsqueeze", &Importer::importReshapeLike},
      {"Transpose", &Importer::importTranspose},
      {"Gather", &Importer::importGather},
      {"Concat", &Importer::importConcat},
      {"Split", &Importer::importSplit},
      {"Slice", &Importer::importSlice},
      {"Expand", &Importer::importExpand},
      {"Shape", &Importer::importShape},
      {"Constant", &Importer::importConstant},
      {"ConstantOfShape", &Importer::importConstantOfShape},
      {"Dropout", &Importer::importDropout},
      {"ReduceMean", &Importer::reduce<ReduceMeanOp>},
      {"ReduceSum", &Importer::reduce<ReduceSumOp>},
      {"SoftmaxCrossEntropyLoss", &Importer::importSoftmaxCrossEntropy},
      {"NegativeLogLikelihoodLoss", &Importer::importNllLoss},
  };
  auto it = table.find(node.op_type());
  if (it == table.end())
    return nodeError(node) << "unsupported operator '" << node.op_type()
                           << "'";
  for (const auto &in : node.input())
    if (!in.empty() && !values.count(in))
      return nodeError(node) << "input '" << in
                             << "' is not defined before this node (missing "
                                "initializer or graph input?)";
  return (this->*(it->second))(node);
}

template <typename OpT>
LogicalResult Importer::binary(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 2, 2)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  Value lhs = operand(node, 0), rhs = operand(node, 1);
  if (!std::is_same<OpT, PowOp>::value &&
      cast<RankedTensorType>(lhs.getType()).getElementType() !=
          cast<RankedTensorType>(rhs.getType()).getElementType())
    return nodeError(node) << "operands have different element types";
  return finish(node, b.create<OpT>(nodeLoc(node), *type, lhs, rhs));
}

template <typename OpT>
LogicalResult Importer::unary(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 1)))
    return failure();
  Value in = operand(node, 0);
  return finish(node, b.create<OpT>(nodeLoc(node), in.getType(), in));
}

LogicalResult Importer::importWhere(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 3, 3)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  return finish(node, b.create<WhereOp>(nodeLoc(node), *type, operand(node, 0),
                                        operand(node, 1), operand(node, 2)));
}

LogicalResult Importer::importCast(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 1)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  return finish(node, b.create<CastOp>(nodeLoc(node), *type, operand(node, 0),
                                       intAttr(node, "to", 0)));
}

template <typename OpT>
LogicalResult Importer::softmaxLike(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 1)))
    return failure();
  Value in = operand(node, 0);
  auto axis = normAxis(node, intAttr(node, "axis", -1),
                       cast<RankedTensorType>(in.getType()).getRank());
  if (failed(axis))
    return failure();
  return finish(node, b.create<OpT>(nodeLoc(node), in.getType(), in, *axis));
}

LogicalResult Importer::importGemm(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 2, 3)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  return finish(node, b.create<GemmOp>(
                          nodeLoc(node), *type, operand(node, 0),
                          operand(node, 1), operand(node, 2),
                          b.getF32FloatAttr(floatAttr(node, "alpha", 1.0f)),
                          b.getF32FloatAttr(floatAttr(node, "beta", 1.0f)),
                          b.getI64IntegerAttr(intAttr(node, "transA", 0)),
                          b.getI64IntegerAttr(intAttr(node, "transB", 0))));
}

LogicalResult Importer::importMatMul(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 2, 2)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  return finish(node, b.create<MatMulOp>(nodeLoc(node), *type, operand(node, 0),
                                         operand(node, 1)));
}

LogicalResult Importer::importLayerNorm(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 2, 3)))
    return failure();
  Value x = operand(node, 0);
  auto xt = cast<RankedTensorType>(x.getType());
  auto axis = normAxis(node, intAttr(node, "axis", -1), xt.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> stat(xt.getShape().take_front(*axis));
  stat.append(xt.getRank() - *axis, 1);
  auto statType = RankedTensorType::get(stat, b.getF32Type());
  auto op = b.create<LayerNormalizationOp>(
      nodeLoc(node), TypeRange{xt, statType, statType}, x, operand(node, 1),
      operand(node, 2), b.getI64IntegerAttr(*axis),
      b.getF32FloatAttr(floatAttr(node, "epsilon", 1e-5f)));
  return finish(node, op);
}

LogicalResult Importer::importBatchNorm(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 5, 5)))
    return failure();
  int64_t training = intAttr(node, "training_mode", 0);
  if (opset < 14 && node.output_size() > 1)
    return nodeError(node) << "training outputs (saved mean/variance) before "
                              "opset 14 are not supported; export with "
                              "opset_version >= 14";
  Value x = operand(node, 0);
  Type statType = operand(node, 3).getType();
  auto op = b.create<BatchNormalizationOp>(
      nodeLoc(node), TypeRange{x.getType(), statType, statType}, x,
      operand(node, 1), operand(node, 2), operand(node, 3), operand(node, 4),
      b.getF32FloatAttr(floatAttr(node, "epsilon", 1e-5f)),
      b.getF32FloatAttr(floatAttr(node, "momentum", 0.9f)),
      b.getI64IntegerAttr(training), /*unbiased_var=*/b.getI64IntegerAttr(0));
  return finish(node, op);
}

FailureOr<Importer::Window>
Importer::window(const onnx::NodeProto &node, RankedTensorType in,
                 ArrayRef<int64_t> kernel, bool hasDilations, bool ceil) {
  Window w;
  size_t n = kernel.size();
  if (in.getRank() != (int64_t)n + 2)
    return nodeError(node) << "input of rank " << in.getRank() << " needs a "
                           << in.getRank() - 2 << "-d kernel_shape";
  w.kernel.assign(kernel.begin(), kernel.end());
  w.strides = intsAttr(node, "strides");
  if (w.strides.empty())
    w.strides.assign(n, 1);
  w.dilations = hasDilations ? intsAttr(node, "dilations") : SmallVector<int64_t>();
  if (w.dilations.empty())
    w.dilations.assign(n, 1);
  w.pads = intsAttr(node, "pads");
  if (w.pads.empty())
    w.pads.assign(2 * n, 0);
  if (w.strides.size() != n || w.dilations.size() != n || w.pads.size() != 2 * n)
    return nodeError(node) << "strides, dilations and pads do not match the "
                           << n << "-d kernel";
  std::string autoPad = stringAttr(node, "auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    w.pads.assign(2 * n, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t size = in.getDimSize(i + 2);
      int64_t out = (size + w.strides[i] - 1) / w.strides[i];
      int64_t eff = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + eff - size);
      int64_t small = total / 2, large = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : large;
      w.pads[i + n] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad != "NOTSET") {
    return nodeError(node) << "unknown auto_pad '" << autoPad << "'";
  }
  (void)ceil;
  return w;
}

LogicalResult Importer::importConv(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 2, 3)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  auto in = cast<RankedTensorType>(operand(node, 0).getType());
  auto wt = cast<RankedTensorType>(operand(node, 1).getType());
  SmallVector<int64_t> kernel = intsAttr(node, "kernel_shape");
  if (kernel.empty())
    kernel.assign(wt.getShape().begin() + std::min<int64_t>(2, wt.getRank()),
                  wt.getShape().end());
  auto w = window(node, in, kernel, true, false);
  if (failed(w))
    return failure();
  return finish(node, b.create<ConvOp>(
                          nodeLoc(node), *type, operand(node, 0),
                          operand(node, 1), operand(node, 2), w->kernel,
                          w->strides, w->dilations, w->pads,
                          intAttr(node, "group", 1)));
}

LogicalResult Importer::importMaxPool(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 1)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  auto in = cast<RankedTensorType>(operand(node, 0).getType());
  int64_t ceil = intAttr(node, "ceil_mode", 0);
  auto w = window(node, in, intsAttr(node, "kernel_shape"), true, ceil);
  if (failed(w))
    return failure();
  Type indicesType;
  if (node.output_size() > 1 && !node.output(1).empty()) {
    auto it = outType(node, 1);
    if (failed(it))
      return failure();
    indicesType = *it;
  }
  auto op = b.create<MaxPoolOp>(nodeLoc(node), *type, indicesType,
                                operand(node, 0), w->kernel, w->strides,
                                w->dilations, w->pads, ceil,
                                intAttr(node, "storage_order", 0));
  return finish(node, op);
}

LogicalResult Importer::importAveragePool(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 1)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  auto in = cast<RankedTensorType>(operand(node, 0).getType());
  int64_t ceil = intAttr(node, "ceil_mode", 0);
  auto w = window(node, in, intsAttr(node, "kernel_shape"), false, ceil);
  if (failed(w))
    return failure();
  return finish(node, b.create<AveragePoolOp>(
                          nodeLoc(node), *type, operand(node, 0), w->kernel,
                          w->strides, w->pads, ceil,
                          intAttr(node, "count_include_pad", 0)));
}

LogicalResult Importer::importGlobalAveragePool(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 1)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  return finish(node, b.create<GlobalAveragePoolOp>(nodeLoc(node), *type,
                                                    operand(node, 0)));
}

LogicalResult Importer::importReshapeLike(const onnx::NodeProto &node) {
  // Reshape(data, shape), Squeeze/Unsqueeze(data, axes?), Flatten(data):
  // with static shapes the inferred result type is the whole story.
  if (failed(requireOperands(node, 1, 2)))
    return failure();
  auto in = cast<RankedTensorType>(operand(node, 0).getType());
  auto known = valueTypes.find(node.output(0));
  DenseElementsAttr target;
  bool targetKnown = node.op_type() == "Reshape" && operand(node, 1) &&
                     matchPattern(operand(node, 1), m_Constant(&target));
  bool typeKnown = known != valueTypes.end() &&
                   known->second.has_tensor_type() &&
                   known->second.tensor_type().has_shape();
  if (node.op_type() == "Reshape" && (targetKnown || !typeKnown)) {
    // ONNX's data propagation gives up on some shape chains; our folded
    // constants do not.
    auto shape = constInts(node, 1, "shape");
    if (failed(shape))
      return failure();
    SmallVector<int64_t> dims(*shape);
    bool allowZero = intAttr(node, "allowzero", 0);
    int64_t product = 1, inferred = -1;
    for (auto [i, d] : llvm::enumerate(dims)) {
      if (d == 0 && !allowZero) {
        if ((int64_t)i >= in.getRank())
          return nodeError(node) << "shape entry 0 at " << i
                                 << " has no input dim to copy";
        d = in.getDimSize(i);
      }
      if (d == -1) {
        if (inferred >= 0)
          return nodeError(node) << "shape has more than one -1";
        inferred = i;
      } else if (d < 0) {
        return nodeError(node) << "shape entry " << d << " is invalid";
      } else {
        product *= d;
      }
    }
    if (inferred >= 0) {
      if (product == 0 || in.getNumElements() % product)
        return nodeError(node) << "cannot infer the -1 entry of the shape";
      dims[inferred] = in.getNumElements() / product;
    }
    auto type = RankedTensorType::get(dims, in.getElementType());
    if (type.getNumElements() != in.getNumElements())
      return nodeError(node) << "cannot reshape " << in << " to " << type;
    if (typeKnown) {
      auto declared = outType(node, 0);
      if (failed(declared))
        return failure();
      if (*declared != type)
        return nodeError(node) << "the shape input gives " << type
                               << " but the model declares " << *declared;
    }
    return finish(node,
                  b.create<ReshapeOp>(nodeLoc(node), type, operand(node, 0)));
  }
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  return finish(node,
                b.create<ReshapeOp>(nodeLoc(node), *type, operand(node, 0)));
}

LogicalResult Importer::importTranspose(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 1)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  int64_t rank = cast<RankedTensorType>(operand(node, 0).getType()).getRank();
  SmallVector<int64_t> perm = intsAttr(node, "perm");
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  return finish(node, b.create<TransposeOp>(nodeLoc(node), *type,
                                            operand(node, 0), perm));
}

LogicalResult Importer::importGather(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 2, 2)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  auto rank = cast<RankedTensorType>(operand(node, 0).getType()).getRank();
  auto axis = normAxis(node, intAttr(node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  return finish(node, b.create<GatherOp>(nodeLoc(node), *type, operand(node, 0),
                                         operand(node, 1), *axis));
}

LogicalResult Importer::importConcat(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, std::max(1, node.input_size()))))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  SmallVector<Value> inputs;
  for (int i = 0; i < node.input_size(); ++i)
    if (Value v = operand(node, i))
      inputs.push_back(v);
  auto axis = normAxis(node, intAttr(node, "axis", 0), type->getRank());
  if (failed(axis))
    return failure();
  return finish(node,
                b.create<ConcatOp>(nodeLoc(node), *type, inputs, *axis));
}

LogicalResult Importer::importSplit(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 2)))
    return failure();
  SmallVector<Type> types;
  for (int i = 0; i < node.output_size(); ++i) {
    auto t = outType(node, i);
    if (failed(t))
      return failure();
    types.push_back(*t);
  }
  auto rank = cast<RankedTensorType>(operand(node, 0).getType()).getRank();
  auto axis = normAxis(node, intAttr(node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  return finish(node, b.create<SplitOp>(nodeLoc(node), types, operand(node, 0),
                                        *axis));
}

LogicalResult Importer::importSlice(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 3, 5)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  auto in = cast<RankedTensorType>(operand(node, 0).getType());
  int64_t rank = in.getRank();
  auto starts = constInts(node, 1, "starts");
  if (failed(starts))
    return failure();
  auto ends = constInts(node, 2, "ends");
  if (failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (operand(node, 3)) {
    auto a = constInts(node, 3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (operand(node, 4)) {
    auto s = constInts(node, 4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return nodeError(node) << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> fullStart(rank, 0), fullStep(rank, 1);
  SmallVector<int64_t> shape(in.getShape());
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = normAxis(node, axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t dim = in.getDimSize(*axis), step = steps[i];
    if (step == 0)
      return nodeError(node) << "slice step is zero";
    int64_t start = (*starts)[i], end = (*ends)[i];
    if (start < 0)
      start += dim;
    if (end < 0 && end > std::numeric_limits<int64_t>::min() + dim)
      end += dim;
    else if (end < 0)
      end = -1;
    int64_t count;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    }
    fullStart[*axis] = count ? start : 0;
    fullStep[*axis] = step;
    shape[*axis] = count;
  }
  if (ArrayRef<int64_t>(shape) != type->getShape())
    return nodeError(node) << "inferred slice shape disagrees with ONNX shape "
                              "inference";
  return finish(node, b.create<SliceOp>(nodeLoc(node), *type, operand(node, 0),
                                        fullStart, fullStep));
}

LogicalResult Importer::importExpand(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 2, 2)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  return finish(node,
                b.create<ExpandOp>(nodeLoc(node), *type, operand(node, 0)));
}

LogicalResult Importer::importShape(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 1)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  int64_t rank = cast<RankedTensorType>(operand(node, 0).getType()).getRank();
  int64_t start = intAttr(node, "start", 0);
  int64_t end = intAttr(node, "end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  auto op = b.create<ShapeOp>(nodeLoc(node), *type, operand(node, 0),
                              b.getI64IntegerAttr(start),
                              b.getI64IntegerAttr(end));
  return finish(node, op);
}

LogicalResult Importer::importConstant(const onnx::NodeProto &node) {
  if (node.attribute_size() != 1)
    return nodeError(node) << "expects exactly one value attribute";
  const onnx::AttributeProto &a = node.attribute(0);
  Location loc = nodeLoc(node);
  DenseElementsAttr value;
  if (a.name() == "value") {
    value = tensorAttr(a.t(), loc);
    if (!value)
      return failure();
  } else if (a.name() == "value_float") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                   a.f());
  } else if (a.name() == "value_floats") {
    SmallVector<float> v(a.floats().begin(), a.floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({(int64_t)v.size()}, b.getF32Type()),
        ArrayRef<float>(v));
  } else if (a.name() == "value_int") {
    value = DenseElementsAttr::get(
        RankedTensorType::get({}, b.getI64Type()), a.i());
  } else if (a.name() == "value_ints") {
    SmallVector<int64_t> v(a.ints().begin(), a.ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({(int64_t)v.size()}, b.getI64Type()),
        ArrayRef<int64_t>(v));
  } else {
    return nodeError(node) << "constant attribute '" << a.name()
                           << "' is not supported";
  }
  define(node.output(0), b.create<ConstantOp>(loc, value.getType(), value));
  return success();
}

LogicalResult Importer::importConstantOfShape(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 1)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  Attribute elem;
  if (const auto *a = attr(node, "value")) {
    DenseElementsAttr v = tensorAttr(a->t(), nodeLoc(node));
    if (!v)
      return failure();
    if (v.getNumElements() != 1)
      return nodeError(node) << "value must hold one element";
    elem = *v.value_begin<Attribute>();
  } else {
    elem = b.getF32FloatAttr(0.0f);
  }
  auto splat = DenseElementsAttr::get(*type, elem);
  define(node.output(0), b.create<ConstantOp>(nodeLoc(node), *type, splat));
  return success();
}

LogicalResult Importer::importDropout(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 3)))
    return failure();
  bool training = false;
  if (operand(node, 2)) {
    auto t = constInts(node, 2, "training_mode");
    if (failed(t))
      return failure();
    training = !t->empty() && (*t)[0] != 0;
  }
  double ratio = 0.5;
  if (Value r = operand(node, 1)) {
    DenseElementsAttr attr;
    if (!matchPattern(r, m_Constant(&attr)))
      return nodeError(node) << "ratio must be a compile-time constant";
    ratio = (*attr.value_begin<APFloat>()).convertToDouble();
  }
  if (training && ratio != 0.0)
    return nodeError(node) << "dropout with ratio " << ratio
                           << " in training mode is not supported; export "
                              "the model in eval mode or with p=0";
  Value x = operand(node, 0);
  auto id = b.create<IdentityOp>(nodeLoc(node), x.getType(), x);
  if (failed(finish(node, id)))
    return failure();
  if (node.output_size() > 1 && !node.output(1).empty()) {
    auto maskType = outType(node, 1);
    if (failed(maskType))
      return failure();
    auto ones = DenseElementsAttr::get(*maskType, true);
    define(node.output(1), b.create<ConstantOp>(nodeLoc(node), *maskType, ones));
  }
  return success();
}

template <typename OpT>
LogicalResult Importer::reduce(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 1, 2)))
    return failure();
  auto type = outType(node, 0);
  if (failed(type))
    return failure();
  Value in = operand(node, 0);
  int64_t rank = cast<RankedTensorType>(in.getType()).getRank();
  SmallVector<int64_t> axes;
  if (operand(node, 1)) {
    auto a = constInts(node, 1, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    axes = intsAttr(node, "axes");
  }
  if (axes.empty() && intAttr(node, "noop_with_empty_axes", 0)) {
    return finish(node, b.create<IdentityOp>(nodeLoc(node), in.getType(), in));
  }
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  for (int64_t &a : axes) {
    auto n = normAxis(node, a, rank);
    if (failed(n))
      return failure();
    a = *n;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return finish(node, b.create<OpT>(nodeLoc(node), *type, in, axes,
                                    intAttr(node, "keepdims", 1)));
}

LogicalResult Importer::importSoftmaxCrossEntropy(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 2, 3)))
    return failure();
  auto lossType = outType(node, 0);
  if (failed(lossType))
    return failure();
  Type logProbType;
  if (node.output_size() > 1 && !node.output(1).empty())
    logProbType = operand(node, 0).getType();
  const auto *ignore = attr(node, "ignore_index");
  auto op = b.create<SoftmaxCrossEntropyLossOp>(
      nodeLoc(node), *lossType, logProbType, operand(node, 0), operand(node, 1),
      operand(node, 2), stringAttr(node, "reduction", "mean"),
      ignore ? b.getI64IntegerAttr(ignore->i()) : IntegerAttr());
  return finish(node, op);
}

LogicalResult Importer::importNllLoss(const onnx::NodeProto &node) {
  if (failed(requireOperands(node, 2, 3)))
    return failure();
  auto lossType = outType(node, 0);
  if (failed(lossType))
    return failure();
  const auto *ignore = attr(node, "ignore_index");
  auto op = b.create<NegativeLogLikelihoodLossOp>(
      nodeLoc(node), *lossType, operand(node, 0), operand(node, 1),
      operand(node, 2), stringAttr(node, "reduction", "mean"),
      ignore ? b.getI64IntegerAttr(ignore->i()) : IntegerAttr());
  return finish(node, op);
}

FailureOr<ImportedModel> importOnnxFile(MLIRContext &ctx, llvm::StringRef path,
                                        const ImportOptions &options) {
  ctx.loadDialect<ShardcDialect, func::FuncDialect>();
  ImportedModel result;
  Importer importer(ctx, result, path);
  if (failed(importer.run(options)))
    return failure();
  return result;
}

} // namespace shardc
