//===- Importer.cpp - ONNX model to shardc IR -----------------------------===//
//
// The import driver: reads the model through OnnxBridge, inlines its local
// functions (FunctionInliner.h), checks its domains and graph outputs,
// converts opsets before 13 to 13 and rewrites opsets 18-21 into opset-17
// forms (OpsetDowngrade.h), freezes --bind inputs
// into initializers, and runs ONNX shape inference. It then builds @main
// (graph inputs and float initializers as arguments, other initializers as
// constants) and walks the graph, importing each node with the importer its
// op type has in the table that frontend/ops/ fills (OpImporters.h); a node
// whose op type has none is an "unsupported operator" error. Also reads
// initializer data (readTensorBytes), including external data confined to
// the model's directory.
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"

#include "frontend/FunctionInliner.h"
#include "frontend/ModelValidator.h"
#include "frontend/OnnxBridge.h"
#include "frontend/OpImporters.h"
#include "frontend/OpsetDowngrade.h"
#include "ir/ShardcDialect.h"
#include "passes/LowerToPlan/OpDesc.h"
#include "runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"

#include "google/protobuf/unknown_field_set.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <limits>
#include <optional>

using namespace mlir;

namespace shardc {

static llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

//===----------------------------------------------------------------------===//
// Tensor data
//===----------------------------------------------------------------------===//

namespace {
/// Where a tensor's external data lies: a file inside the model's directory
/// and a range within it.
struct ExternalData {
  std::string file;
  uint64_t offset = 0, bytes = 0;
};
} // namespace

/// Resolves external data, confined to `modelDir` and to the file's size.
static llvm::Expected<ExternalData> resolveExternal(const onnx::TensorProto &t,
                                                    llvm::StringRef modelDir,
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
    return makeError("initializer '" + t.name() +
                     "': external data location '" + location +
                     "' is absolute; it must be relative to the "
                     "model's directory");
  llvm::SmallString<256> path(modelDir);
  llvm::sys::path::append(path, location);
  llvm::SmallString<256> realDir, realFile;
  if (llvm::sys::fs::real_path(modelDir, realDir))
    return makeError("cannot resolve the model directory '" + modelDir + "'");
  if (std::error_code ec = llvm::sys::fs::real_path(path, realFile))
    return makeError("initializer '" + t.name() +
                     "': cannot open external "
                     "data file '" +
                     location + "': " + ec.message());
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
  return ExternalData{std::string(realFile), offset, bytes};
}

/// Reads external data (resolveExternal).
static llvm::Expected<std::vector<uint8_t>>
readExternal(const onnx::TensorProto &t, llvm::StringRef modelDir,
             uint64_t expectedBytes) {
  auto where = resolveExternal(t, modelDir, expectedBytes);
  if (!where)
    return where.takeError();
  std::vector<uint8_t> out(where->bytes);
  if (where->bytes == 0)
    return out;
  auto buf = llvm::MemoryBuffer::getFileSlice(where->file, where->bytes,
                                              where->offset);
  if (!buf)
    return makeError("initializer '" + t.name() + "': cannot read '" +
                     where->file + "': " + buf.getError().message());
  std::memcpy(out.data(), (*buf)->getBufferStart(), where->bytes);
  return out;
}

llvm::Expected<std::vector<uint8_t>> readTensorBytes(const onnx::TensorProto &t,
                                                     llvm::StringRef modelDir) {
  auto dtype = rt::dtypeFromCode(t.data_type());
  if (!dtype)
    return makeError("tensor '" + t.name() + "' has element type code " +
                     llvm::Twine(t.data_type()) +
                     ", which Shard does not "
                     "support (float32, float64, float16, bfloat16, "
                     "int64, int32, int8, uint8, bool)");
  std::optional<int64_t> count = checkedElementCount(
      llvm::ArrayRef<int64_t>(t.dims().data(), t.dims().size()));
  if (!count)
    return makeError("tensor '" + t.name() +
                     "' has a negative dimension or more than 2^46 elements");
  uint64_t n = *count;
  size_t elem = rt::dtypeSize(*dtype);
  uint64_t expected = n * elem;
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return readExternal(t, modelDir, expected);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != expected)
      return makeError(
          "tensor '" + t.name() + "' has " + llvm::Twine(t.raw_data().size()) +
          " bytes of raw data; its shape needs " + llvm::Twine(expected));
    std::vector<uint8_t> out(expected);
    std::memcpy(out.data(), t.raw_data().data(), expected);
    if (*dtype == rt::DType::Bool)
      for (uint8_t &b : out)
        b = b != 0;
    return out;
  }
  // The typed fields hold what they hold: their count is checked before
  // the shape's bytes are allocated (a declared shape costs nothing).
  size_t have = 0;
  switch (*dtype) {
  case rt::DType::F32:
    have = t.float_data_size();
    break;
  case rt::DType::F64:
    have = t.double_data_size();
    break;
  case rt::DType::I64:
    have = t.int64_data_size();
    break;
  case rt::DType::Undefined:
    break;
  default: // I32, I8, U8, Bool, F16, BF16
    have = t.int32_data_size();
    break;
  }
  if (have != n)
    return makeError("tensor '" + t.name() + "' has " + llvm::Twine(have) +
                     " values; its shape needs " + llvm::Twine(n));
  std::vector<uint8_t> out(expected);
  switch (*dtype) {
  case rt::DType::F32:
    std::memcpy(out.data(), t.float_data().data(), expected);
    break;
  case rt::DType::F64:
    std::memcpy(out.data(), t.double_data().data(), expected);
    break;
  case rt::DType::I64:
    std::memcpy(out.data(), t.int64_data().data(), expected);
    break;
  case rt::DType::I32:
  case rt::DType::I8:
  case rt::DType::U8:
  case rt::DType::Bool:
  case rt::DType::F16:
  case rt::DType::BF16:
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

/// Checks where the external data of initializer `t` lies, without reading
/// it (readTensorBytes reads it when it is needed).
static llvm::Error checkExternalData(const onnx::TensorProto &t,
                                     llvm::StringRef modelDir) {
  auto dtype = rt::dtypeFromCode(t.data_type());
  std::optional<int64_t> count = checkedElementCount(
      llvm::ArrayRef<int64_t>(t.dims().data(), t.dims().size()));
  if (!dtype || !count)
    return llvm::Error::success(); // reported where the tensor is read
  auto where = resolveExternal(t, modelDir, *count * rt::dtypeSize(*dtype));
  return where ? llvm::Error::success() : where.takeError();
}

/// The input kinds that PyTorch's dynamo exporter records for the graph's
/// inputs and initializers ("PARAMETER", "BUFFER", "USER_INPUT",
/// "CONSTANT_TENSOR", ...), from ValueInfoProto.metadata_props (field 4 of IR
/// version 10, an unknown field to libonnx 1.12); empty for other exporters.
static llvm::StringMap<std::string>
torchInputKinds(const onnx::GraphProto &graph) {
  llvm::StringMap<std::string> kinds;
  auto read = [&](const onnx::ValueInfoProto &vi) {
    const auto &unknown = vi.unknown_fields();
    for (int i = 0; i < unknown.field_count(); ++i) {
      const auto &field = unknown.field(i);
      onnx::StringStringEntryProto entry;
      if (field.number() == 4 &&
          field.type() ==
              google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
          entry.ParseFromString(field.length_delimited()) &&
          entry.key() == "pkg.torch.export.graph_signature.InputSpec.kind")
        kinds[vi.name()] = entry.value();
    }
  };
  for (const auto &vi : graph.input())
    read(vi);
  for (const auto &vi : graph.value_info())
    read(vi);
  return kinds;
}

//===----------------------------------------------------------------------===//
// The importer
//===----------------------------------------------------------------------===//

static const OpImporterTable &opImporters();

namespace {

class Importer {
public:
  /// `contents`, when given, are the model file's bytes: `path` is then
  /// only read for external data.
  Importer(MLIRContext &ctx, ImportedModel &result, llvm::StringRef path,
           std::optional<llvm::StringRef> contents = std::nullopt)
      : ctx(ctx), b(&ctx), result(result), path(path.str()),
        contents(contents) {}

  LogicalResult run(const ImportOptions &options);

private:
  LogicalResult prepareModel(const ImportOptions &options);
  /// Runs ONNX's checker (onnxbridge::checkModel) on the model.
  LogicalResult runChecker();
  LogicalResult buildFunction();
  LogicalResult importNode(const onnx::NodeProto &node);
  /// Gives the symbolic dimensions of the graph's inputs and outputs their
  /// --dim sizes; an input dimension left without a size is an error that
  /// names it, the inputs that carry it and the flag.
  LogicalResult applyDims(onnx::GraphProto &graph,
                          const std::map<std::string, int64_t> &dims);
  /// Records the types shape inference wrote into `graph`.
  void recordInferredTypes(const onnx::GraphProto &graph);
  /// Runs shape inference again on `shapeModel` with every value folded so
  /// far as an initializer and every type an importer computed where
  /// inference had none as value_info.
  void refineTypes();
  /// Whether shape inference gave the value `name` a static type.
  bool hasStaticType(llvm::StringRef name) const;
  /// Whether every output of `node` has a static inferred type.
  bool hasStaticOutputs(const onnx::NodeProto &node) const;

  Location nodeLoc(const onnx::NodeProto &node);
  void define(const std::string &name, Value v) { values[name] = v; }

  MLIRContext &ctx;
  OpBuilder b;
  ImportedModel &result;
  std::string path;
  std::optional<llvm::StringRef> contents;
  /// The default opset of the forms the importers read (after conversion).
  int opset = 0;
  /// The opset error messages name: the model's own where its nodes were
  /// rewritten from a newer one, else `opset`.
  int reportedOpset = 0;
  ValueTable values;
  TypeTable valueTypes;
  /// The model as later rounds of shape inference see it: nodes, inputs,
  /// non-parameter initializers, parameters as typed inputs.
  onnx::ModelProto shapeModel;
  /// ImportOptions::foldLimit.
  int64_t foldLimit = kDefaultFoldLimit;
  /// Graph inputs frozen by --bind: constants, never parameters.
  llvm::StringSet<> boundNames;
  /// The dynamo exporter's kind of each input and initializer
  /// (torchInputKinds); empty for other exporters.
  llvm::StringMap<std::string> torchKinds;
  /// Whether a float initializer is a constant, not a parameter: bound by
  /// --bind, or a constant the dynamo exporter lifted out of forward.
  bool isConstantInitializer(const onnx::TensorProto &init) const {
    return boundNames.count(init.name()) ||
           torchKinds.lookup(init.name()) == "CONSTANT_TENSOR";
  }
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

//===----------------------------------------------------------------------===//
// Model preparation
//===----------------------------------------------------------------------===//

LogicalResult Importer::prepareModel(const ImportOptions &options) {
  onnx::ModelProto &model = result.model;
  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  auto fail = [&](llvm::Error err) {
    return emitError(fileLoc) << llvm::toString(std::move(err));
  };
  if (llvm::Error err = contents
                            ? onnxbridge::parseModel(*contents, path, model)
                            : onnxbridge::readModel(path, model))
    return fail(std::move(err));

  // Versions first: ONNX's converter and checker trust them.
  if (failed(checkVersions(model, fileLoc)))
    return failure();
  opset = 0;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = static_cast<int>(o.version());
  reportedOpset = opset;
  // Errors about graph node `index`, before the graph walk.
  auto nodeErrorAt = [&](const onnx::NodeProto &node,
                         unsigned index) -> InFlightDiagnostic {
    nodeIndex = index;
    Location loc = nodeLoc(node);
    nodeIndex = 0;
    return emitError(loc) << node.op_type() << " (opset " << reportedOpset
                          << "): ";
  };
  if (failed(inlineLocalFunctions(model, nodeErrorAt)))
    return failure();
  // Shard trains every float initializer. PyTorch's dynamo exporter marks
  // the module's parameters and buffers; its graph optimizer (on by default)
  // adds initializers of its own: constants, and parameters it folded (a
  // transposed weight), or merged when their values were equal.
  // Its buffers are frozen parameters (kBufferAttrName) and its lifted
  // constants constants (isConstantInitializer); initializers of no kind are
  // the optimizer's, which Shard cannot tell from parameters.
  // Some exporter versions (PyTorch 2.5 with onnxscript 0.1) record the
  // kinds of the user inputs only: then nothing is known of the
  // initializers.
  torchKinds = torchInputKinds(model.graph());
  if (llvm::none_of(model.graph().initializer(),
                    [&](const onnx::TensorProto &init) {
                      return torchKinds.contains(init.name());
                    }))
    torchKinds.clear();
  if (!torchKinds.empty()) {
    SmallVector<std::string> others;
    for (const auto &init : model.graph().initializer()) {
      Type elem = elementTypeFromOnnxCode(&ctx, init.data_type());
      std::string kind = torchKinds.lookup(init.name());
      if (elem && isa<FloatType>(elem) && kind != "PARAMETER" &&
          kind != "BUFFER" && kind != "CONSTANT_TENSOR")
        others.push_back(init.name());
    }
    if (!others.empty()) {
      auto diag = emitWarning(fileLoc)
                  << "float initializer" << (others.size() > 1 ? "s " : " ");
      for (auto [i, name] : llvm::enumerate(others)) {
        if (i == 3) {
          diag << " and " << others.size() - 3 << " more";
          break;
        }
        diag << (i ? ", '" : "'") << name << "'";
      }
      diag << (others.size() > 1 ? " are" : " is")
           << " not among the exported PyTorch module's parameters and "
              "buffers, but a training step trains every float initializer: "
              "PyTorch's dynamo exporter makes such initializers when it "
              "optimizes the graph for inference (constants, folded or "
              "merged parameters); export with torch.onnx.export(..., "
              "dynamo=True, optimize=False) to train the module's own "
              "parameters";
    }
  }
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
        return emitError(fileLoc)
               << "graph output '" << out.name() << "' is produced by no node";
  }

  // The graph's shapes and nodes, before any of ONNX's code reads them.
  auto hasImporter = [](llvm::StringRef op) {
    return (bool)opImporters().lookup(op);
  };
  if (failed(validateGraphTensors(model.graph(), fileLoc)) ||
      failed(validateNodes(model.graph(), opset, hasImporter, nodeErrorAt)))
    return failure();

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
  if (opset > kImportOpset) {
    // libonnx 1.12 knows schemas up to opset 17: newer forms are rewritten
    // into those before shape inference reads them, and checked again.
    if (failed(
            downgradeToImportOpset(model, opset, hasImporter, nodeErrorAt)) ||
        failed(validateNodes(model.graph(), kImportOpset, hasImporter,
                             nodeErrorAt)))
      return failure();
    opset = kImportOpset;
  }
  // ONNX's own checker, on the form its schemas know (opset 17 at most).
  // Shard's checks of external data are stricter than the checker's (it
  // only looks for the file): they run first, with their messages.
  for (const onnx::TensorProto &init : model.graph().initializer())
    if (init.data_location() == onnx::TensorProto::EXTERNAL)
      if (llvm::Error err = checkExternalData(init, result.modelDir))
        return fail(std::move(err));
  if (failed(runChecker()))
    return failure();
  if (opset < kMinOpset) {
    // The version converter's adapters need the shapes of their inputs; a
    // failure here is reported by the strict inference after conversion.
    llvm::consumeError(onnxbridge::inferShapes(model, /*strict=*/false));
    if (llvm::Error err = onnxbridge::convertVersion(model, kMinOpset))
      return fail(std::move(err));
    opset = reportedOpset = kMinOpset;
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
      return emitError(fileLoc)
             << "--bind " << name
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

  if (failed(applyDims(*graph, options.dims)))
    return failure();

  // Declared output shapes stay out of shape inference: buildFunction
  // compares them with the computed ones and names the output that differs.
  SmallVector<onnx::TypeProto> declaredOutputs;
  for (auto &out : *graph->mutable_output()) {
    declaredOutputs.push_back(out.type());
    if (out.type().has_tensor_type())
      out.mutable_type()->mutable_tensor_type()->clear_shape();
  }
  if (llvm::Error err = onnxbridge::inferShapes(model, /*strict=*/true))
    return fail(std::move(err));

  for (const auto &vi : graph->input())
    valueTypes[vi.name()] = vi.type();
  recordInferredTypes(*graph);
  for (auto [out, type] : llvm::zip(*graph->mutable_output(), declaredOutputs))
    *out.mutable_type() = type;

  // What later rounds of shape inference see: the graph with parameters as
  // typed inputs (their values never fix a shape, and copying them each
  // round would cost as much as the model).
  onnx::GraphProto *shapes = shapeModel.mutable_graph();
  *shapeModel.mutable_opset_import() = model.opset_import();
  shapeModel.set_ir_version(model.ir_version());
  *shapes->mutable_node() = graph->node();
  *shapes->mutable_input() = graph->input();
  *shapes->mutable_output() = graph->output();
  for (auto &out : *shapes->mutable_output())
    if (out.type().has_tensor_type())
      out.mutable_type()->mutable_tensor_type()->clear_shape();
  llvm::StringSet<> inputNames;
  for (const auto &in : graph->input())
    inputNames.insert(in.name());
  for (const auto &init : graph->initializer()) {
    Type elem = elementTypeFromOnnxCode(&ctx, init.data_type());
    if (!elem || !isa<FloatType>(elem) || isConstantInitializer(init)) {
      *shapes->add_initializer() = init;
      continue;
    }
    if (inputNames.count(init.name()))
      continue;
    onnx::ValueInfoProto *in = shapes->add_input();
    in->set_name(init.name());
    auto *tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(init.data_type());
    auto *shape = tt->mutable_shape();
    for (int64_t d : init.dims())
      shape->add_dim()->set_dim_value(d);
  }
  return success();
}

LogicalResult Importer::runChecker() {
  // The checker wants a shape on every graph input and output. Shard infers
  // the outputs' shapes itself and reports an input without one (it needs
  // static shapes), so a value that declares none gets an empty shape for
  // the check only.
  onnx::GraphProto *graph = result.model.mutable_graph();
  SmallVector<onnx::TypeProto::Tensor *> unshaped;
  for (auto *values : {graph->mutable_input(), graph->mutable_output()})
    for (onnx::ValueInfoProto &vi : *values)
      if (vi.type().has_tensor_type() && !vi.type().tensor_type().has_shape())
        unshaped.push_back(vi.mutable_type()->mutable_tensor_type());
  for (onnx::TypeProto::Tensor *t : unshaped)
    t->mutable_shape();
  llvm::Error err = onnxbridge::checkModel(result.model, result.modelDir);
  for (onnx::TypeProto::Tensor *t : unshaped)
    t->clear_shape();
  if (err)
    return emitError(FileLineColLoc::get(&ctx, path, 0, 0))
           << llvm::toString(std::move(err));
  return success();
}

void Importer::recordInferredTypes(const onnx::GraphProto &graph) {
  for (const auto &vi : graph.value_info())
    valueTypes[vi.name()] = vi.type();
  for (const auto &vi : graph.output())
    if (vi.type().has_tensor_type() && vi.type().tensor_type().has_shape())
      valueTypes[vi.name()] = vi.type();
}

LogicalResult Importer::applyDims(onnx::GraphProto &graph,
                                  const std::map<std::string, int64_t> &dims) {
  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  llvm::StringSet<> initNames;
  for (const auto &init : graph.initializer())
    initNames.insert(init.name());
  llvm::StringSet<> used;
  // Symbolic dimensions of graph inputs that --dim does not size, in order
  // of appearance, with the inputs that carry them.
  SmallVector<std::pair<std::string, SmallVector<std::string>>> unbound;
  auto specialize = [&](onnx::ValueInfoProto &vi, bool isInput) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape())
      return;
    auto *shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int i = 0; i < shape->dim_size(); ++i) {
      onnx::TensorShapeProto::Dimension *d = shape->mutable_dim(i);
      if (d->has_dim_value())
        continue;
      std::string name = d->has_dim_param() ? d->dim_param() : "";
      if (auto it = dims.find(name); !name.empty() && it != dims.end()) {
        used.insert(name);
        d->set_dim_value(it->second);
        continue;
      }
      if (!isInput)
        continue;
      if (name.empty())
        name = "?" + vi.name() + "[" + std::to_string(i) + "]";
      auto *entry = llvm::find_if(
          unbound, [&](const auto &e) { return e.first == name; });
      if (entry == unbound.end()) {
        unbound.push_back({name, {}});
        entry = &unbound.back();
      }
      if (!llvm::is_contained(entry->second, vi.name()))
        entry->second.push_back(vi.name());
    }
  };
  for (auto &vi : *graph.mutable_input())
    specialize(vi, !initNames.count(vi.name()));
  for (auto &vi : *graph.mutable_output())
    specialize(vi, false);
  for (auto &vi : *graph.mutable_value_info())
    specialize(vi, false);

  for (const auto &[name, size] : dims)
    if (!used.count(name)) {
      std::string known;
      for (const auto &[u, inputs] : unbound)
        if (u[0] != '?')
          known += (known.empty() ? "'" : ", '") + u + "'";
      return emitError(fileLoc)
             << "--dim " << name << "=" << size
             << ": the model has no symbolic dimension '" << name << "'"
             << (known.empty() ? std::string(" (its inputs have none left)")
                               : "; its inputs have " + known);
    }
  for (const auto &[name, inputs] : unbound) {
    if (name[0] == '?') {
      auto [input, index] = llvm::StringRef(name).drop_front().rsplit('[');
      emitError(fileLoc) << "dimension " << index.drop_back() << " of input '"
                         << input
                         << "' has no size and no name; Shard compiles static "
                            "shapes: export it with a fixed size, or as a "
                            "named dynamic axis and give its size with --dim "
                            "NAME=SIZE";
      continue;
    }
    auto diag = emitError(fileLoc);
    diag << "dimension '" << name << "' of input"
         << (inputs.size() > 1 ? "s " : " ");
    for (auto [j, in] : llvm::enumerate(inputs))
      diag << (j ? ", '" : "'") << in << "'";
    diag << " has no size; Shard compiles static shapes: give it with --dim "
         << name
         << "=SIZE (for a batch dimension with --world-size N, SIZE is one "
            "rank's micro-batch)";
  }
  return failure(!unbound.empty());
}

void Importer::refineTypes() {
  onnx::ModelProto m = shapeModel;
  onnx::GraphProto *graph = m.mutable_graph();
  graph->clear_node();
  for (const onnx::NodeProto &node : shapeModel.graph().node()) {
    SmallVector<std::pair<const std::string *, DenseElementsAttr>> folded;
    for (const std::string &out : node.output()) {
      if (out.empty())
        continue;
      Value v = values.lookup(out);
      DenseElementsAttr attr;
      if (!v || !matchPattern(v, m_Constant(&attr)) ||
          onnxTypeCode(attr.getElementType()) < 0) {
        folded.clear();
        break;
      }
      folded.push_back({&out, attr});
    }
    if (folded.empty()) {
      *graph->add_node() = node;
      for (const std::string &out : node.output()) {
        Value v = out.empty() ? Value() : values.lookup(out);
        if (!v || hasStaticType(out))
          continue;
        auto type = cast<RankedTensorType>(v.getType());
        onnx::ValueInfoProto *vi = graph->add_value_info();
        vi->set_name(out);
        auto *tt = vi->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(
            static_cast<int32_t>(onnxTypeCode(type.getElementType())));
        for (int64_t d : type.getShape())
          tt->mutable_shape()->add_dim()->set_dim_value(d);
      }
      continue;
    }
    for (auto [name, attr] : folded) {
      onnx::TensorProto *init = graph->add_initializer();
      init->set_name(*name);
      init->set_data_type(
          static_cast<int32_t>(onnxTypeCode(attr.getElementType())));
      for (int64_t d : cast<RankedTensorType>(attr.getType()).getShape())
        init->add_dims(d);
      std::vector<uint8_t> bytes = constantBytes(attr);
      init->set_raw_data(bytes.data(), bytes.size());
    }
  }
  // A node that shape inference finds inconsistent now (a Reshape to two
  // -1s) is reported by its importer, which names the node; so is a value
  // that still has no shape. The folded constants are initializers here,
  // so inference without data propagation still learns from them, where
  // libonnx's data propagation throws (an empty shape constant).
  onnx::ModelProto inferred = m;
  if (llvm::Error err = onnxbridge::inferShapes(inferred, /*strict=*/false)) {
    llvm::consumeError(std::move(err));
    inferred = m;
    if (llvm::Error again = onnxbridge::inferShapes(inferred, /*strict=*/false,
                                                    /*dataProp=*/false)) {
      llvm::consumeError(std::move(again));
      return;
    }
  }
  recordInferredTypes(inferred.graph());
}

bool Importer::hasStaticType(llvm::StringRef name) const {
  auto it = valueTypes.find(name);
  if (it == valueTypes.end() || !it->second.has_tensor_type() ||
      !it->second.tensor_type().has_shape())
    return false;
  for (const auto &d : it->second.tensor_type().shape().dim())
    if (!d.has_dim_value())
      return false;
  return true;
}

bool Importer::hasStaticOutputs(const onnx::NodeProto &node) const {
  return llvm::all_of(node.output(), [&](const std::string &out) {
    return out.empty() || hasStaticType(out);
  });
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
    auto type = tensorTypeFromOnnx(&ctx, vi.type(), vi.name(), fileLoc);
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
      return emitError(fileLoc)
             << "initializer '" << init.name()
             << "' has unsupported element type code " << init.data_type();
    if (!isa<FloatType>(elem) || isConstantInitializer(init)) {
      constInits.push_back(&init);
      continue;
    }
    argTypes.push_back(RankedTensorType::get(
        SmallVector<int64_t>(init.dims().begin(), init.dims().end()), elem));
    argNames.push_back(init.name());
    SmallVector<NamedAttribute> attrs = {
        b.getNamedAttr(kParamAttrName, b.getStringAttr(init.name()))};
    if (torchKinds.lookup(init.name()) == "BUFFER")
      attrs.push_back(b.getNamedAttr(kBufferAttrName, b.getUnitAttr()));
    argDicts.push_back(b.getDictionaryAttr(attrs));
  }

  SmallVector<Type> resultTypes;
  SmallVector<Attribute> outputNames;
  for (const auto &vi : graph.output())
    outputNames.push_back(b.getStringAttr(vi.name()));

  b.setInsertionPointToEnd(module.getBody());
  auto func =
      b.create<func::FuncOp>(fileLoc, "main", b.getFunctionType(argTypes, {}));
  func->setAttr(kOutputNamesAttrName, b.getArrayAttr(outputNames));
  Block *entry = func.addEntryBlock();
  for (auto [i, dict] : llvm::enumerate(argDicts)) {
    func.setArgAttrs(i, dict);
    define(argNames[i], entry->getArgument(i));
  }
  b.setInsertionPointToEnd(entry);
  for (const onnx::TensorProto *init : constInits) {
    DenseElementsAttr attr =
        tensorAttrFromOnnx(&ctx, *init, result.modelDir, fileLoc);
    if (!attr)
      return failure();
    Location loc = NameLoc::get(b.getStringAttr(init->name()), fileLoc);
    define(init->name(), b.create<ConstantOp>(loc, attr.getType(), attr));
  }

  // Shape inference saw the values of initializers only. When a node's
  // output shape is still open and import has learnt something since
  // inference last ran, it runs again with what it learnt: the constants it
  // folded (a Shape -> Gather -> Div chain) and the static types importers
  // computed where inference had none (a Resize whose scales the graph
  // computes).
  unsigned newFacts = 0;
  for (const auto &node : graph.node()) {
    if (newFacts && !hasStaticOutputs(node)) {
      refineTypes();
      newFacts = 0;
    }
    if (failed(importNode(node)))
      return failure();
    for (const std::string &out : node.output()) {
      Value v = out.empty() ? Value() : values.lookup(out);
      if (v && (matchPattern(v, m_Constant()) || !hasStaticType(out)))
        ++newFacts;
    }
    ++nodeIndex;
  }

  SmallVector<Value> results;
  for (const auto &vi : graph.output()) {
    Value v = values.lookup(vi.name());
    if (!v)
      return emitError(fileLoc)
             << "graph output '" << vi.name() << "' is produced by no node";
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
               << "shape the model does not compute (computed " << v.getType()
               << ")";
    }
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  b.create<func::ReturnOp>(fileLoc, results);
  func.setFunctionType(b.getFunctionType(argTypes, resultTypes));
  return success();
}

LogicalResult Importer::run(const ImportOptions &options) {
  foldLimit = options.foldLimit;
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
// Node dispatch
//===----------------------------------------------------------------------===//

/// The importers of every supported operator, built on first use.
static const OpImporterTable &opImporters() {
  static const OpImporterTable table = [] {
    OpImporterTable t;
    registerAllOpImporters(t);
    return t;
  }();
  return table;
}

LogicalResult Importer::importNode(const onnx::NodeProto &node) {
  ImportContext nodeCtx(node, nodeLoc(node), opset, reportedOpset, b, values,
                        valueTypes, result.modelDir, foldLimit);
  OpImporter importer = opImporters().lookup(node.op_type());
  if (!importer)
    return nodeCtx.nodeError()
           << "unsupported operator '" << node.op_type() << "'";
  for (const auto &in : node.input())
    if (!in.empty() && !values.count(in))
      return nodeCtx.nodeError()
             << "input '" << in
             << "' is not defined before this node (missing "
                "initializer or graph input?)";
  LogicalResult imported = importer(nodeCtx);
  // A reader that met a wrong-typed attribute reported it and handed the
  // importer a default: the node fails even if the importer went on.
  if (nodeCtx.attributeErrors())
    return failure();
  return imported;
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

FailureOr<ImportedModel> importOnnxBuffer(MLIRContext &ctx,
                                          llvm::StringRef contents,
                                          llvm::StringRef path,
                                          const ImportOptions &options) {
  ctx.loadDialect<ShardcDialect, func::FuncDialect>();
  ImportedModel result;
  Importer importer(ctx, result, path, contents);
  if (failed(importer.run(options)))
    return failure();
  return result;
}

} // namespace shardc
