//===- ModelValidator.h - Checks of a model before ONNX reads it -*- C++
//-*-===//
//
// A model file is input from anywhere, and ONNX's own code (its version
// converter, shape inference and data propagation) trusts the models it is
// given: a zero stride divides by zero, a missing attribute is dereferenced.
// The import driver (Importer.cpp) therefore checks what it reads before
// ONNX does: the versions, every node against its ONNX schema (attribute
// names and types, required attributes, input and output counts, operators
// with subgraphs), the values ONNX's inference divides or allocates by
// (window attributes, group, hidden_size, blocksize), the order in which
// the graph defines its values, and the shapes of the graph's tensors; and
// every shape that ONNX infers goes through checkedElementCount on its way
// into the IR (tensorTypeFromOnnx). Each check reports where the problem
// is, what is wrong and how to fix it.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTEND_MODELVALIDATOR_H
#define SHARDC_FRONTEND_MODELVALIDATOR_H

#include "frontend/OpsetDowngrade.h"
#include "runtime/Tensor.h"

#include "onnx/onnx_pb.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>

namespace shardc {

/// The IR versions Shard reads: 3 (the first with opset imports) to 10 (the
/// version of opset 21, PyTorch 2.x's dynamo exports).
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 10;
/// The oldest default opset the version converter is asked to convert.
constexpr int kOldestOpset = 1;

/// Largest rank of a tensor: no model needs more, and it bounds the work
/// per dimension of shape inference and of the kernels.
constexpr int64_t kMaxRank = 64;
/// Largest element count of a tensor, and so of any of its dimensions: the
/// runtime's bound (rt::kMaxElements, 2^46), which the plan reader checks
/// again.
constexpr int64_t kMaxTensorElements = rt::kMaxElements;

/// The element count of a tensor of shape `dims`, computed without
/// overflow; none when a dimension is negative or the count exceeds
/// kMaxTensorElements. An empty tensor (a dimension 0) counts 0 only when its
/// other dimensions also multiply to at most kMaxTensorElements: then no
/// product of a tensor's dimensions (the rows of a flattening, the strides
/// of a loop) overflows, empty or not.
std::optional<int64_t> checkedElementCount(llvm::ArrayRef<int64_t> dims);

/// Why checkedElementCount refused `dims` (of sizes >= 0), for an error
/// message after "has shape [...], ".
std::string countLimitText(llvm::ArrayRef<int64_t> dims);

/// The byte count of `count` elements of `elementBytes` bytes each; none on
/// overflow of int64.
std::optional<int64_t> checkedByteCount(int64_t count, int64_t elementBytes);

/// How messages name an ONNX attribute type ("float", "ints", "graph").
const char *attributeTypeName(int type);

/// The attribute `name` of `node` when it has type `type`; null when the
/// node has no such attribute. An attribute of another type is never read as
/// a default: it is reported through `error` ("attribute 'beta' has type
/// string; Gemm reads it as float"), `failed` is set, and null returned.
const onnx::AttributeProto *
findAttribute(const onnx::NodeProto &node, llvm::StringRef name,
              onnx::AttributeProto::AttributeType type,
              llvm::function_ref<mlir::InFlightDiagnostic()> error,
              bool &failed);

/// Checks the model's IR version (kMinIrVersion to kMaxIrVersion) and its
/// opset imports (one version per domain, the default domain's within
/// kOldestOpset to kMaxOpset), before anything reads the graph.
mlir::LogicalResult checkVersions(const onnx::ModelProto &model,
                                  mlir::Location fileLoc);

/// Checks every node of `graph` (whose default opset is `opset`) against its
/// ONNX schema and the values that ONNX's inference relies on, and that the
/// graph defines each value once, before its uses. `hasImporter` tells
/// whether Shard imports an op type: from kMinOpset on, a node without an
/// importer is refused before ONNX's inference reads it (older models are
/// converted first, which may replace such nodes). For opsets above
/// kImportOpset, an operator whose schema changed after it is checked only
/// where its opset-kImportOpset schema applies (the types of the attributes
/// that schema has): its rewrite (OpsetDowngrade.h) reads the rest, and the
/// driver checks the rewritten graph again at kImportOpset.
mlir::LogicalResult
validateNodes(const onnx::GraphProto &graph, int opset,
              llvm::function_ref<bool(llvm::StringRef)> hasImporter,
              NodeDiagnostic nodeError);

/// Checks the shapes of the graph's inputs, outputs, value_info and
/// initializers: ranks up to kMaxRank, dimensions non-negative, element
/// counts up to kMaxTensorElements.
mlir::LogicalResult validateGraphTensors(const onnx::GraphProto &graph,
                                         mlir::Location fileLoc);

} // namespace shardc

#endif // SHARDC_FRONTEND_MODELVALIDATOR_H
