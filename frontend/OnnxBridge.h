//===- OnnxBridge.h - Calls into ONNX's C++ library -------------*- C++ -*-===//
//
// ONNX's library reports errors by throwing; Shard is built without
// exceptions. Everything that calls into libonnx lives in OnnxBridge.cpp, the
// one file compiled with -fexceptions, and comes back as llvm::Error.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTEND_ONNXBRIDGE_H
#define SHARDC_FRONTEND_ONNXBRIDGE_H

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace shardc::onnxbridge {

/// Reads a model: binary ModelProto, or ONNX's textual syntax when the file
/// name ends in `.onnxtxt`. Rejects files over 2 GiB (protobuf's limit).
llvm::Error readModel(llvm::StringRef path, onnx::ModelProto &model);

/// Parses ONNX's textual model syntax.
llvm::Error parseTextModel(llvm::StringRef text, llvm::StringRef path,
                           onnx::ModelProto &model);

/// Converts the default-domain opset of `model` to `targetVersion` with
/// ONNX's version converter.
llvm::Error convertVersion(onnx::ModelProto &model, int targetVersion);

/// Runs ONNX shape inference with data propagation, so that shape arithmetic
/// like Shape -> Gather -> Concat -> Reshape gets static shapes. `strict`
/// makes a node whose inference fails an error.
llvm::Error inferShapes(onnx::ModelProto &model, bool strict);

/// Checks the model against the ONNX schema of each node.
llvm::Error checkModel(const onnx::ModelProto &model);

} // namespace shardc::onnxbridge

#endif // SHARDC_FRONTEND_ONNXBRIDGE_H
