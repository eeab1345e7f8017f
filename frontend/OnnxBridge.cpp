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

#include "llvm/Support/MemoryBuffer.h"

#include <exception>
#include <limits>

namespace shardc::onnxbridge {

static llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
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
  llvm::StringRef bytes = (*buffer)->getBuffer();
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

llvm::Error convertVersion(onnx::ModelProto &model, int targetVersion) {
  try {
    model = onnx::version_conversion::ConvertVersion(model, targetVersion);
  } catch (const std::exception &e) {
    return makeError("cannot convert the model to opset " +
                     llvm::Twine(targetVersion) + ": " + e.what());
  }
  return llvm::Error::success();
}

llvm::Error inferShapes(onnx::ModelProto &model, bool strict) {
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/true, strict ? 1 : 0,
                                        /*data_prop=*/true);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception &e) {
    return makeError(llvm::Twine("ONNX shape inference failed: ") + e.what());
  }
  return llvm::Error::success();
}

llvm::Error checkModel(const onnx::ModelProto &model) {
  try {
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(model.ir_version());
    std::unordered_map<std::string, int> opsets;
    for (const auto &o : model.opset_import())
      opsets[o.domain()] = static_cast<int>(o.version());
    ctx.set_opset_imports(opsets);
    onnx::checker::LexicalScopeContext scope;
    for (const auto &in : model.graph().input())
      scope.add(in.name());
    for (const auto &init : model.graph().initializer())
      scope.add(init.name());
    for (const auto &node : model.graph().node()) {
      onnx::checker::check_node(node, ctx, scope);
      for (const auto &out : node.output())
        scope.add(out);
    }
  } catch (const std::exception &e) {
    return makeError(llvm::Twine("invalid ONNX model: ") + e.what());
  }
  return llvm::Error::success();
}

} // namespace shardc::onnxbridge
