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

#include <map>
#include <optional>
#include <string>

namespace shardc::onnxbridge {

/// Reads a model: binary ModelProto, or ONNX's textual syntax when the file
/// name ends in `.onnxtxt`. Rejects files over 2 GiB (protobuf's limit).
llvm::Error readModel(llvm::StringRef path, onnx::ModelProto &model);

/// Parses the contents of a model file named `path` (for messages; the
/// syntax follows its extension as for readModel).
llvm::Error parseModel(llvm::StringRef bytes, llvm::StringRef path,
                       onnx::ModelProto &model);

/// Parses ONNX's textual model syntax.
llvm::Error parseTextModel(llvm::StringRef text, llvm::StringRef path,
                           onnx::ModelProto &model);

/// Converts the default-domain opset of `model` to `targetVersion` with
/// ONNX's version converter.
llvm::Error convertVersion(onnx::ModelProto &model, int targetVersion);

/// Runs ONNX shape inference with data propagation, so that shape arithmetic
/// like Shape -> Gather -> Concat -> Reshape gets static shapes. `strict`
/// makes a node whose inference fails an error. libonnx 1.12's data
/// propagation of Shape (opset 15) reads its input's type without checking
/// that inference gave it one, and crashes when a node before it failed;
/// the first call wraps that function in the check (ONNX 1.15 has it,
/// onnx/onnx#5219). `dataProp` false runs inference without data
/// propagation, whose Concat of an empty constant with another throws in
/// libonnx 1.12 ("axis must be in [-rank, rank-1]").
llvm::Error inferShapes(onnx::ModelProto &model, bool strict,
                        bool dataProp = true);

/// The IR version libonnx knows (8 for 1.12): its checker refuses newer ones.
int knownIrVersion();

/// Runs ONNX's checker over the model's graph, as `onnx::checker::
/// check_model` does after its version checks (the caller checks versions;
/// the model must have no local functions left): every node against its
/// schema at the model's opsets, every tensor, value names defined once and
/// before use. The checker reads IR versions above knownIrVersion() as that
/// version (IR 9 and 10 only add fields and element types it ignores) and
/// finds external data in `modelDir`. The error holds the checker's message.
llvm::Error checkModel(const onnx::ModelProto &model, llvm::StringRef modelDir);

/// What ONNX's schema of an operator at an opset says a node may hold.
struct OpSchemaInfo {
  /// The opset that introduced this form of the operator.
  int sinceVersion = 0;
  bool deprecated = false;
  int minInputs = 0, maxInputs = 0, minOutputs = 0, maxOutputs = 0;
  struct Attribute {
    onnx::AttributeProto::AttributeType type;
    bool required;
  };
  /// The attributes by name.
  std::map<std::string, Attribute> attributes;
};

/// The default-domain schema of `opType` at `opset` (the newest one not
/// newer than it), or none when the operator does not exist there.
std::optional<OpSchemaInfo> lookupSchema(llvm::StringRef opType, int opset);

} // namespace shardc::onnxbridge

#endif // SHARDC_FRONTEND_ONNXBRIDGE_H
