//===- ModelValidator.cpp - Checks of a model before ONNX reads it --------===//
//
// The checks of ModelValidator.h. Schemas come from ONNX's registry through
// OnnxBridge; everything else reads the protobuf messages directly.
//
//===----------------------------------------------------------------------===//
#include "frontend/ModelValidator.h"

#include "frontend/OnnxBridge.h"

#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>
#include <string>

using namespace mlir;

namespace shardc {

std::optional<int64_t> checkedElementCount(llvm::ArrayRef<int64_t> dims) {
  int64_t count = 1;
  for (int64_t d : dims)
    if (d < 0 || d > kMaxTensorElements)
      return std::nullopt;
  // The product of the non-zero dimensions is bounded, then a zero makes
  // the count 0.
  for (int64_t d : dims)
    if (d && (llvm::MulOverflow(count, d, count) || count > kMaxTensorElements))
      return std::nullopt;
  return llvm::is_contained(dims, 0) ? 0 : count;
}

std::string countLimitText(llvm::ArrayRef<int64_t> dims) {
  return llvm::is_contained(dims, 0)
             ? "empty, but its other dimensions multiply to more than 2^46; "
               "Shard's limit for them is 2^46"
             : "more than 2^46 elements; Shard's limit for one tensor is "
               "2^46 (256 TiB of float32)";
}

std::optional<int64_t> checkedByteCount(int64_t count, int64_t elementBytes) {
  int64_t bytes;
  if (count < 0 || elementBytes < 0 ||
      llvm::MulOverflow(count, elementBytes, bytes))
    return std::nullopt;
  return bytes;
}

//===----------------------------------------------------------------------===//
// Versions
//===----------------------------------------------------------------------===//

LogicalResult checkVersions(const onnx::ModelProto &model, Location fileLoc) {
  int64_t ir = model.ir_version();
  if (ir < kMinIrVersion || ir > kMaxIrVersion)
    return emitError(fileLoc)
           << "the model has IR version " << ir << "; Shard reads IR versions "
           << kMinIrVersion << " to " << kMaxIrVersion << " (opsets "
           << kOldestOpset << " to " << kMaxOpset
           << "): re-export the model, e.g. with torch.onnx.export(..., "
              "opset_version="
           << kMaxOpset << ")";
  llvm::StringMap<int64_t> versions;
  for (const auto &o : model.opset_import()) {
    std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    auto [it, inserted] = versions.try_emplace(domain, o.version());
    if (!inserted)
      return emitError(fileLoc)
             << "the model imports "
             << (domain.empty() ? std::string("the default ONNX opset")
                                : "opset domain '" + domain + "'")
             << " twice (versions " << it->second << " and " << o.version()
             << "); a model imports one version of each domain";
  }
  auto it = versions.find("");
  if (it == versions.end())
    return emitError(fileLoc) << "the model imports no version of the "
                                 "default ONNX opset";
  int64_t opset = it->second;
  if (opset < kOldestOpset || opset > kMaxOpset)
    return emitError(fileLoc)
           << "the model uses opset " << opset << "; Shard supports opsets "
           << kOldestOpset << " to " << kMaxOpset << " (" << kMinOpset << " to "
           << kMaxOpset
           << " directly, older ones through ONNX's version converter): "
              "export with opset_version="
           << kMaxOpset << " or lower";
  return success();
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

const char *attributeTypeName(int type) {
  switch (type) {
  case onnx::AttributeProto::FLOAT:
    return "float";
  case onnx::AttributeProto::INT:
    return "int";
  case onnx::AttributeProto::STRING:
    return "string";
  case onnx::AttributeProto::TENSOR:
    return "tensor";
  case onnx::AttributeProto::GRAPH:
    return "graph";
  case onnx::AttributeProto::SPARSE_TENSOR:
    return "sparse tensor";
  case onnx::AttributeProto::TYPE_PROTO:
    return "type";
  case onnx::AttributeProto::FLOATS:
    return "floats";
  case onnx::AttributeProto::INTS:
    return "ints";
  case onnx::AttributeProto::STRINGS:
    return "strings";
  case onnx::AttributeProto::TENSORS:
    return "tensors";
  case onnx::AttributeProto::GRAPHS:
    return "graphs";
  case onnx::AttributeProto::SPARSE_TENSORS:
    return "sparse tensors";
  case onnx::AttributeProto::TYPE_PROTOS:
    return "types";
  default:
    return "undefined";
  }
}

const onnx::AttributeProto *
findAttribute(const onnx::NodeProto &node, llvm::StringRef name,
              onnx::AttributeProto::AttributeType type,
              llvm::function_ref<InFlightDiagnostic()> error, bool &failed) {
  for (const auto &a : node.attribute()) {
    if (a.name() != name)
      continue;
    if (a.type() == type)
      return &a;
    error() << "attribute '" << name << "' has type "
            << attributeTypeName(a.type()) << "; " << node.op_type()
            << " reads it as " << attributeTypeName(type);
    failed = true;
    return nullptr;
  }
  return nullptr;
}

/// The types of the value fields that `a` sets.
static llvm::SmallVector<int> valueFieldTypes(const onnx::AttributeProto &a) {
  llvm::SmallVector<int> types;
  if (a.has_f())
    types.push_back(onnx::AttributeProto::FLOAT);
  if (a.has_i())
    types.push_back(onnx::AttributeProto::INT);
  if (a.has_s())
    types.push_back(onnx::AttributeProto::STRING);
  if (a.has_t())
    types.push_back(onnx::AttributeProto::TENSOR);
  if (a.has_g())
    types.push_back(onnx::AttributeProto::GRAPH);
  if (a.has_sparse_tensor())
    types.push_back(onnx::AttributeProto::SPARSE_TENSOR);
  if (a.has_tp())
    types.push_back(onnx::AttributeProto::TYPE_PROTO);
  if (a.floats_size())
    types.push_back(onnx::AttributeProto::FLOATS);
  if (a.ints_size())
    types.push_back(onnx::AttributeProto::INTS);
  if (a.strings_size())
    types.push_back(onnx::AttributeProto::STRINGS);
  if (a.tensors_size())
    types.push_back(onnx::AttributeProto::TENSORS);
  if (a.graphs_size())
    types.push_back(onnx::AttributeProto::GRAPHS);
  if (a.sparse_tensors_size())
    types.push_back(onnx::AttributeProto::SPARSE_TENSORS);
  if (a.type_protos_size())
    types.push_back(onnx::AttributeProto::TYPE_PROTOS);
  return types;
}

static bool holdsGraph(const onnx::AttributeProto &a) {
  return a.type() == onnx::AttributeProto::GRAPH ||
         a.type() == onnx::AttributeProto::GRAPHS || a.has_g() ||
         a.graphs_size();
}

/// The operators whose window attributes (kernel_shape, strides, dilations,
/// pads) ONNX's shape inference divides and allocates by.
static bool hasWindow(llvm::StringRef op) {
  return llvm::is_contained({"Conv", "ConvTranspose", "ConvInteger",
                             "QLinearConv", "MaxPool", "AveragePool", "LpPool",
                             "MaxUnpool"},
                            op);
}

/// Checks the values of the attributes that ONNX's inference divides or
/// allocates by; every other attribute value is checked by the operator's
/// inference or its importer, with the input shapes at hand.
static LogicalResult checkAttributeValues(const onnx::NodeProto &node,
                                          unsigned index,
                                          NodeDiagnostic nodeError) {
  auto ints = [&](llvm::StringRef name) -> const onnx::AttributeProto * {
    for (const auto &a : node.attribute())
      if (a.name() == name && a.type() == onnx::AttributeProto::INTS)
        return &a;
    return nullptr;
  };
  auto intAttr = [&](llvm::StringRef name) -> const onnx::AttributeProto * {
    for (const auto &a : node.attribute())
      if (a.name() == name && a.type() == onnx::AttributeProto::INT)
        return &a;
    return nullptr;
  };
  // Every entry of ints attribute `name` within [lo, kMaxTensorElements].
  auto checkEntries = [&](llvm::StringRef name, int64_t lo,
                          llvm::StringRef what) -> LogicalResult {
    const auto *a = ints(name);
    if (!a)
      return success();
    for (auto [i, v] : llvm::enumerate(a->ints()))
      if (v < lo || v > kMaxTensorElements)
        return nodeError(node, index)
               << name << "[" << i << "] is " << v << "; " << what
               << (lo == 0 ? " must be >= 0" : " must be >= 1")
               << " and at most 2^46";
    return success();
  };
  // Int attribute `name` within [lo, 2^log2Hi].
  auto checkScalar = [&](llvm::StringRef name, int64_t lo,
                         int log2Hi = 46) -> LogicalResult {
    const auto *a = intAttr(name);
    if (a && (a->i() < lo || a->i() > (int64_t(1) << log2Hi)))
      return nodeError(node, index)
             << name << " is " << a->i() << "; it must be >= " << lo
             << " and at most 2^" << log2Hi;
    return success();
  };

  llvm::StringRef op = node.op_type();
  if (hasWindow(op)) {
    if (failed(checkEntries("kernel_shape", 1, "a kernel size")) ||
        failed(checkEntries("strides", 1, "a stride")) ||
        failed(checkEntries("dilations", 1, "a dilation")) ||
        failed(checkEntries("pads", 0, "a padding")) ||
        failed(checkEntries("output_padding", 0, "an output padding")) ||
        failed(checkEntries("output_shape", 0, "an output size")) ||
        failed(checkScalar("group", 1)))
      return failure();
    // With a kernel_shape, the other window attributes have one entry per
    // spatial axis (pads two).
    if (const auto *kernel = ints("kernel_shape")) {
      int n = kernel->ints_size();
      for (auto [name, size] : {std::pair<const char *, int>{"strides", n},
                                {"dilations", n},
                                {"pads", 2 * n},
                                {"output_padding", n}})
        if (const auto *a = ints(name); a && a->ints_size() != size)
          return nodeError(node, index)
                 << name << " has " << a->ints_size() << " entries; the " << n
                 << "-d kernel_shape needs " << size;
    }
  }
  if (op == "RNN" || op == "LSTM" || op == "GRU")
    if (failed(checkScalar("hidden_size", 1)))
      return failure();
  // blocksize^2 divides the channels (shape inference divides by it).
  if (op == "DepthToSpace" || op == "SpaceToDepth")
    if (failed(checkScalar("blocksize", 1, 23)))
      return failure();
  // A NaN parameter (Gemm's alpha, an epsilon) makes every result NaN;
  // only a Constant's own values may be NaN.
  if (op != "Constant")
    for (const auto &a : node.attribute()) {
      bool nan = a.type() == onnx::AttributeProto::FLOAT && std::isnan(a.f());
      if (a.type() == onnx::AttributeProto::FLOATS)
        nan = llvm::any_of(a.floats(), [](float v) { return std::isnan(v); });
      if (nan)
        return nodeError(node, index)
               << "attribute '" << a.name() << "' is NaN; " << op
               << "'s parameters must be numbers";
    }
  // Tensor attributes (Constant's value, ConstantOfShape's) with sane
  // shapes; their data is checked where it is read (readTensorBytes).
  for (const auto &a : node.attribute()) {
    if (a.type() != onnx::AttributeProto::TENSOR)
      continue;
    const auto &dims = a.t().dims();
    if (dims.size() > kMaxRank)
      return nodeError(node, index)
             << "attribute '" << a.name() << "' holds a tensor of rank "
             << dims.size() << "; at most " << kMaxRank << " is supported";
    if (!checkedElementCount(llvm::ArrayRef<int64_t>(dims.data(), dims.size())))
      return nodeError(node, index)
             << "attribute '" << a.name()
             << "' holds a tensor with a negative dimension or more than "
                "2^46 elements";
  }
  return success();
}

/// Checks the attributes of `node` against its schema (when it has one that
/// applies to them) and refuses subgraphs.
static LogicalResult
checkAttributes(const onnx::NodeProto &node, unsigned index,
                const std::optional<onnxbridge::OpSchemaInfo> &schema,
                bool schemaIsNodes, NodeDiagnostic nodeError) {
  llvm::StringSet<> seen;
  for (const auto &a : node.attribute()) {
    if (holdsGraph(a))
      return nodeError(node, index)
             << "attribute '" << a.name()
             << "' holds a graph: operators with subgraphs (If, Loop, Scan) "
                "are not supported; Shard compiles one static graph "
                "(export the model without data-dependent control flow)";
    if (!seen.insert(a.name()).second)
      return nodeError(node, index)
             << "attribute '" << a.name() << "' is given twice";
    if (!a.ref_attr_name().empty())
      return nodeError(node, index)
             << "attribute '" << a.name() << "' refers to attribute '"
             << a.ref_attr_name()
             << "' of a function, but the node is not in a function body";
    if (a.type() == onnx::AttributeProto::UNDEFINED)
      return nodeError(node, index)
             << "attribute '" << a.name() << "' has no type (its "
             << "AttributeProto.type is unset)";
    for (int held : valueFieldTypes(a))
      if (held != a.type())
        return nodeError(node, index)
               << "attribute '" << a.name() << "' has type "
               << attributeTypeName(a.type()) << " but holds a "
               << attributeTypeName(held) << " value";
    if (!schema)
      continue;
    auto it = schema->attributes.find(a.name());
    if (it == schema->attributes.end()) {
      // LayerNormalization's schema accepts attributes it does not declare.
      if (!schemaIsNodes || node.op_type() == "LayerNormalization")
        continue;
      std::string known;
      for (const auto &[name, attr] : schema->attributes)
        known += (known.empty() ? "" : ", ") + name;
      auto diag = nodeError(node, index)
                  << "unknown attribute '" << a.name() << "'";
      if (known.empty())
        return diag << "; " << node.op_type() << " has no attributes";
      return diag << "; " << node.op_type() << " has " << known;
    }
    if (it->second.type != a.type())
      return nodeError(node, index)
             << "attribute '" << a.name() << "' has type "
             << attributeTypeName(a.type()) << "; " << node.op_type()
             << " expects " << attributeTypeName(it->second.type);
  }
  if (schema && schemaIsNodes)
    for (const auto &[name, attr] : schema->attributes)
      if (attr.required && !seen.count(name))
        return nodeError(node, index)
               << "required attribute '" << name << "' is missing";
  return success();
}

LogicalResult
validateNodes(const onnx::GraphProto &graph, int opset,
              llvm::function_ref<bool(llvm::StringRef)> hasImporter,
              NodeDiagnostic nodeError) {
  llvm::StringMap<std::optional<onnxbridge::OpSchemaInfo>> schemas;
  auto schemaOf =
      [&](llvm::StringRef op,
          int at) -> const std::optional<onnxbridge::OpSchemaInfo> & {
    auto [it, inserted] =
        schemas.try_emplace((op + "@" + llvm::Twine(at)).str());
    if (inserted)
      it->second = onnxbridge::lookupSchema(op, at);
    return it->second;
  };

  // Values defined so far: graph inputs and initializers, then each node's
  // outputs.
  llvm::StringSet<> defined;
  for (const auto &in : graph.input())
    defined.insert(in.name());
  for (const auto &init : graph.initializer())
    defined.insert(init.name());

  for (auto [index, node] : llvm::enumerate(graph.node())) {
    llvm::StringRef op = node.op_type();
    bool isDefault = node.domain().empty() || node.domain() == "ai.onnx";
    if (isDefault) {
      if (op == "If" || op == "Loop" || op == "Scan" || op == "SequenceMap")
        return nodeError(node, index)
               << "operators with subgraphs (If, Loop, Scan) are not "
                  "supported; Shard compiles one static graph (export the "
                  "model without data-dependent control flow)";
      int change =
          opset > kImportOpset ? schemaChangeAfterImportOpset(op, opset) : 0;
      int schemaOpset = std::min(opset, kImportOpset);
      const std::optional<onnxbridge::OpSchemaInfo> &schema =
          schemaOf(op, schemaOpset);
      // Whether `schema` is the node's own: for an operator that changed
      // after kImportOpset it only gives the types of its older attributes.
      bool schemaIsNodes = schema && !change;
      if (!schema && !change) {
        if (!schemaOf(op, kImportOpset))
          return nodeError(node, index)
                 << "unsupported operator '" << op << "'";
        return nodeError(node, index)
               << op << " is not an operator of opset " << opset
               << " (it was added later): export with a newer opset_version";
      }
      if (schemaIsNodes && schema->deprecated)
        return nodeError(node, index)
               << op << " is deprecated in opset " << opset
               << "; export with an opset_version that has its replacement";
      if (!change && opset >= kMinOpset && !hasImporter(op))
        return nodeError(node, index) << "unsupported operator '" << op << "'";
      if (failed(
              checkAttributes(node, index, schema, schemaIsNodes, nodeError)))
        return failure();
      if (schemaIsNodes) {
        auto range = [](int lo, int hi) {
          if (lo == hi)
            return std::to_string(lo);
          if (hi == std::numeric_limits<int>::max())
            return std::to_string(lo) + " or more";
          return std::to_string(lo) + " to " + std::to_string(hi);
        };
        if (node.input_size() < schema->minInputs ||
            node.input_size() > schema->maxInputs)
          return nodeError(node, index)
                 << "expects " << range(schema->minInputs, schema->maxInputs)
                 << (schema->maxInputs == 1 ? " input" : " inputs") << ", got "
                 << node.input_size();
        if (node.output_size() < schema->minOutputs ||
            node.output_size() > schema->maxOutputs)
          return nodeError(node, index)
                 << "expects " << range(schema->minOutputs, schema->maxOutputs)
                 << (schema->maxOutputs == 1 ? " output" : " outputs")
                 << ", got " << node.output_size();
      }
      if (failed(checkAttributeValues(node, index, nodeError)))
        return failure();
    }
    for (const std::string &in : node.input())
      if (!in.empty() && !defined.count(in))
        return nodeError(node, index)
               << "input '" << in
               << "' is not defined before this node (missing initializer "
                  "or graph input, or nodes out of topological order?)";
    for (const std::string &out : node.output())
      if (!out.empty() && !defined.insert(out).second)
        return nodeError(node, index)
               << "output '" << out
               << "' is already defined (by a graph input, an initializer or "
                  "an earlier node); every value of a graph has one "
                  "definition";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

/// "[2, 3, 4]".
static std::string shapeText(llvm::ArrayRef<int64_t> dims) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(dims))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

/// Checks one shape: rank, dimension sizes, element count. `what` names the
/// tensor ("graph input 'x'").
static LogicalResult checkShape(llvm::ArrayRef<int64_t> dims,
                                const std::string &what, Location loc) {
  if ((int64_t)dims.size() > kMaxRank)
    return emitError(loc) << what << " has rank " << dims.size()
                          << "; Shard supports ranks up to " << kMaxRank;
  for (auto [i, d] : llvm::enumerate(dims))
    if (d < 0)
      return emitError(loc) << what << " has dimension " << i << " of size "
                            << d << "; sizes must be >= 0";
  if (!checkedElementCount(dims))
    return emitError(loc) << what << " has shape " << shapeText(dims) << ", "
                          << countLimitText(dims);
  return success();
}

LogicalResult validateGraphTensors(const onnx::GraphProto &graph,
                                   Location fileLoc) {
  auto checkValueInfo = [&](const onnx::ValueInfoProto &vi,
                            const char *kind) -> LogicalResult {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape())
      return success();
    const auto &shape = vi.type().tensor_type().shape();
    // Named and unknown dimensions count as 1 here: --dim sizes them later,
    // and tensorTypeFromOnnx checks the static shape.
    llvm::SmallVector<int64_t> dims;
    for (const auto &d : shape.dim())
      dims.push_back(d.has_dim_value() ? d.dim_value() : 1);
    return checkShape(dims, std::string(kind) + " '" + vi.name() + "'",
                      fileLoc);
  };
  for (const auto &vi : graph.input())
    if (failed(checkValueInfo(vi, "graph input")))
      return failure();
  for (const auto &vi : graph.output())
    if (failed(checkValueInfo(vi, "graph output")))
      return failure();
  for (const auto &vi : graph.value_info())
    if (failed(checkValueInfo(vi, "value")))
      return failure();
  for (const auto &init : graph.initializer())
    if (failed(checkShape(
            llvm::ArrayRef<int64_t>(init.dims().data(), init.dims().size()),
            "initializer '" + init.name() + "'", fileLoc)))
      return failure();
  return success();
}

} // namespace shardc
