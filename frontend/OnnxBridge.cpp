//===- OnnxBridge.cpp - Calls into ONNX's C++ library ---------------------===//
//
// Compiled with -fexceptions: every exception ONNX throws is caught here.
//
//===----------------------------------------------------------------------===//
#include "frontend/OnnxBridge.h"

#include "onnx/checker.h"
#include "onnx/defs/parser.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <limits>

namespace shardc::onnxbridge {

static llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// ONNX's messages span lines ("...\n\n==> Context: Bad node spec ..."):
/// one line, for a one-line diagnostic.
static std::string oneLine(llvm::StringRef text) {
  std::string out;
  for (llvm::StringRef line : llvm::split(text, '\n')) {
    line = line.trim();
    if (line.empty())
      continue;
    if (!out.empty())
      out += ' ';
    out += line.str();
  }
  return out;
}

llvm::Error parseTextModel(llvm::StringRef text, llvm::StringRef path,
                           onnx::ModelProto &model) {
  std::string copy = text.str();
  try {
    onnx::OnnxParser parser(copy.c_str());
    auto status = parser.Parse(model);
    if (!status.IsOK())
      return makeError(
          path + ": not a valid textual ONNX model: " + status.ErrorMessage());
  } catch (const std::exception &e) {
    return makeError(path + ": not a valid textual ONNX model: " + e.what());
  }
  return llvm::Error::success();
}

llvm::Error readModel(llvm::StringRef path, onnx::ModelProto &model) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return makeError("cannot read " + path + ": " +
                     buffer.getError().message());
  return parseModel((*buffer)->getBuffer(), path, model);
}

llvm::Error parseModel(llvm::StringRef bytes, llvm::StringRef path,
                       onnx::ModelProto &model) {
  if (path.ends_with(".onnxtxt"))
    return parseTextModel(bytes, path, model);
  if (bytes.size() >= static_cast<size_t>(std::numeric_limits<int>::max()))
    return makeError(path + " is " + llvm::Twine(bytes.size()) +
                     " bytes; an ONNX protobuf must be under 2 GiB: save the "
                     "model with external data (onnx.save(..., "
                     "save_as_external_data=True))");
  if (bytes.empty())
    return makeError(path + " is empty, not an ONNX model");
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return makeError(path + " is not a valid ONNX model (malformed or "
                            "truncated protobuf)");
  if (!model.has_graph())
    return makeError(path + " is not a valid ONNX model (it has no graph)");
  return llvm::Error::success();
}

/// The reason in a message of ONNX's version converter, without the
/// source locations and assertion text of its internal checks:
/// "./onnx/version_converter/BaseConverter.h:66: adapter_lookup: Assertion
/// `false` failed: No Adapter From Version $5 for Cast" becomes "No Adapter
/// From Version 5 for Cast".
static std::string converterReason(llvm::StringRef what) {
  std::string text = oneLine(what);
  static const llvm::Regex location(
      "[^ ]+\\.(cc|h|cpp):[0-9]+: [A-Za-z_0-9:]+: ");
  static const llvm::Regex assertion("Assertion `[^`]*` failed: ");
  for (const llvm::Regex *re : {&location, &assertion}) {
    std::string err;
    while (re->match(text, nullptr, &err))
      text = re->sub("", text);
  }
  llvm::StringRef rest = llvm::StringRef(text).trim();
  std::string out;
  for (char c : rest)
    if (c != '$')
      out += c;
  return out;
}

llvm::Error convertVersion(onnx::ModelProto &model, int targetVersion) {
  int from = 0;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      from = static_cast<int>(o.version());
  try {
    model = onnx::version_conversion::ConvertVersion(model, targetVersion);
  } catch (const std::exception &e) {
    return makeError(
        "ONNX's version converter cannot convert the model "
        "from opset " +
        llvm::Twine(from) + " to opset " + llvm::Twine(targetVersion) + ": " +
        converterReason(e.what()) + "; export the model with opset_version=" +
        llvm::Twine(targetVersion) + " or newer");
  }
  return llvm::Error::success();
}

/// Wraps the data propagation of Shape-15 in a check that its input has a
/// type: libonnx 1.12 dereferences the input's type unchecked, and a node
/// whose inference failed before leaves its outputs without one.
static void guardShapeDataPropagation() {
  static const bool done = [] {
    const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema("Shape", 15);
    if (!schema || schema->since_version() != 15 ||
        !schema->has_data_propagation_function())
      return true;
    onnx::DataPropagationFunction inner = schema->GetDataPropagationFunction();
    // The registry owns its schemas as mutable objects; it hands out const
    // pointers only.
    const_cast<onnx::OpSchema *>(schema)->PartialDataPropagationFunction(
        [inner](onnx::DataPropagationContext &ctx) {
          if (ctx.getNumInputs() < 1 || !ctx.getInputType(0))
            return;
          inner(ctx);
        });
    return true;
  }();
  (void)done;
}

/// Puts `check` in front of the type and shape inference of every version
/// of the default domain's operator `name`: it runs first, and may fail
/// inference (fail_shape_inference, as ONNX's own checks do, so the node is
/// reported) or return false to leave the node's outputs uninferred.
static void
guardInference(const std::string &name,
               const std::function<bool(onnx::InferenceContext &)> &check) {
  for (const onnx::OpSchema &copy :
       onnx::OpSchemaRegistry::get_all_schemas_with_history()) {
    if (copy.Name() != name || !copy.domain().empty())
      continue;
    const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
        copy.Name(), copy.since_version(), copy.domain());
    if (!schema || schema->since_version() != copy.since_version() ||
        !schema->has_type_and_shape_inference_function())
      continue;
    onnx::InferenceFunction inner = schema->GetTypeAndShapeInferenceFunction();
    // The registry owns its schemas as mutable objects; it hands out const
    // pointers only.
    const_cast<onnx::OpSchema *>(schema)->TypeAndShapeInferenceFunction(
        [inner, check](onnx::InferenceContext &ctx) {
          if (check(ctx))
            inner(ctx);
        });
  }
}

/// Guards the shape inference of libonnx 1.12 where it indexes unchecked
/// (each found by test/fuzz's importer fuzzer):
///  - convPoolShapeInference and convTransposeShapeInference take the
///    weight's dims 2.. as the kernel shape when there is no kernel_shape
///    attribute, and ConvTranspose its output channels from the weight's
///    dim 1 even with one: a weight of another rank than the input makes
///    them read and write past the end of their per-axis vectors (so the
///    ranks are checked whenever both are known);
///  - maxUnpoolShapeInference takes the output's channels from dim 1 of the
///    indices (input 1) without looking at their shape: indices without a
///    shape, or of rank < 2, make it copy from past the end of the dims;
///  - Einsum's inference of an implicit output (no "->") crashes when a
///    label is an upper-case letter (equation "i,G"): there only the element
///    type is inferred;
///  - LayerNormalization's inference writes the statistics' dims from its
///    axis on without checking that the axis is in [-rank, rank): an axis
///    below -rank, or any axis on a scalar input, wrote before their start;
///  - GatherND's inference takes a negative batch_dims as a count of
///    leading dimensions to copy (found by test/fuzz's importer fuzzer and
///    a scan of every operator's inference with out-of-range attributes and
///    scalar inputs).
static void guardIndexingInference() {
  static const bool done = [] {
    for (auto [op, weight] : {std::pair<const char *, int>{"Conv", 1},
                              {"ConvTranspose", 1},
                              {"ConvInteger", 1},
                              {"QLinearConv", 3}})
      guardInference(op, [weight = weight](onnx::InferenceContext &ctx) {
        constexpr int input = 0; // X
        if (ctx.getNumInputs() > static_cast<size_t>(weight) &&
            onnx::hasInputShape(ctx, input) &&
            onnx::hasInputShape(ctx, weight)) {
          int x = ctx.getInputType(input)->tensor_type().shape().dim_size();
          int w = ctx.getInputType(weight)->tensor_type().shape().dim_size();
          if (x != w)
            fail_shape_inference(
                "the input has rank ", x, " but the weight has rank ", w,
                "; a convolution's input (N, C, spatial...) and weight "
                "(M, C/group, kernel...) have one rank");
        }
        return true;
      });
    guardInference("Einsum", [](onnx::InferenceContext &ctx) {
      const onnx::AttributeProto *eq = ctx.getAttribute("equation");
      if (!eq || eq->s().find("->") != std::string::npos ||
          llvm::none_of(eq->s(), [](char c) { return c >= 'A' && c <= 'Z'; }))
        return true;
      if (ctx.getNumInputs() > 0 && ctx.getNumOutputs() > 0)
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
      return false;
    });
    guardInference("MaxUnpool", [](onnx::InferenceContext &ctx) {
      // With output_shape (input 2) the indices' shape is not used.
      if (ctx.getNumInputs() != 2 || !onnx::hasInputShape(ctx, 0))
        return true;
      if (!onnx::hasInputShape(ctx, 1)) {
        // No output shape without the indices' channels; the type still.
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        return false;
      }
      int rank = ctx.getInputType(1)->tensor_type().shape().dim_size();
      if (rank < 2)
        fail_shape_inference("the indices (input 1) have rank ", rank,
                             "; MaxUnpool's indices have the shape of its "
                             "input X (N, C, spatial...)");
      return true;
    });
    guardInference("LayerNormalization", [](onnx::InferenceContext &ctx) {
      if (ctx.getNumInputs() == 0 || !onnx::hasInputShape(ctx, 0))
        return true;
      int64_t rank = ctx.getInputType(0)->tensor_type().shape().dim_size();
      int64_t axis = -1;
      if (const onnx::AttributeProto *a = ctx.getAttribute("axis"))
        axis = a->i();
      if (axis < -rank || axis >= rank)
        fail_shape_inference("axis ", axis, " is out of range for an input ",
                             "of rank ", rank, "; LayerNormalization ",
                             "normalizes over the axes from axis, which is ",
                             "in [-rank, rank) (default -1, the last)");
      return true;
    });
    guardInference("GatherND", [](onnx::InferenceContext &ctx) {
      const onnx::AttributeProto *b = ctx.getAttribute("batch_dims");
      if (b && b->i() < 0)
        fail_shape_inference("batch_dims is ", b->i(), "; it counts the ",
                             "leading dimensions that the data and the ",
                             "indices share, 0 or more");
      return true;
    });
    return true;
  }();
  (void)done;
}

llvm::Error inferShapes(onnx::ModelProto &model, bool strict, bool dataProp) {
  try {
    guardShapeDataPropagation();
    guardIndexingInference();
    onnx::ShapeInferenceOptions options(/*check_type=*/true, strict ? 1 : 0,
                                        dataProp);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception &e) {
    return makeError(llvm::Twine("ONNX shape inference failed: ") +
                     oneLine(e.what()));
  }
  return llvm::Error::success();
}

int knownIrVersion() { return onnx::Version::IR_VERSION; }

llvm::Error checkModel(const onnx::ModelProto &model,
                       llvm::StringRef modelDir) {
  try {
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(
        std::min<int64_t>(model.ir_version(), onnx::Version::IR_VERSION)));
    std::unordered_map<std::string, int> opsets;
    for (const auto &o : model.opset_import())
      opsets[o.domain() == "ai.onnx" ? "" : o.domain()] =
          static_cast<int>(o.version());
    ctx.set_opset_imports(opsets);
    ctx.set_model_dir(modelDir.str());
    onnx::checker::LexicalScopeContext scope;
    onnx::checker::check_graph(model.graph(), ctx, scope);
  } catch (const std::exception &e) {
    return makeError(llvm::Twine("ONNX's checker rejects the model: ") +
                     oneLine(e.what()));
  }
  return llvm::Error::success();
}

std::optional<OpSchemaInfo> lookupSchema(llvm::StringRef opType, int opset) {
  const onnx::OpSchema *schema = nullptr;
  try {
    schema = onnx::OpSchemaRegistry::Schema(opType.str(), opset, "");
  } catch (const std::exception &) {
    return std::nullopt;
  }
  if (!schema)
    return std::nullopt;
  OpSchemaInfo info;
  info.sinceVersion = schema->since_version();
  info.deprecated = schema->Deprecated();
  info.minInputs = schema->min_input();
  info.maxInputs = schema->max_input();
  info.minOutputs = schema->min_output();
  info.maxOutputs = schema->max_output();
  for (const auto &[name, attr] : schema->attributes())
    info.attributes[name] = {attr.type, attr.required};
  return info;
}

} // namespace shardc::onnxbridge
