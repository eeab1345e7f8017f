//===- Importer.h - ONNX model to shardc IR ---------------------*- C++ -*-===//
//
// Imports an ONNX ModelProto (opsets 13-21; older models are first converted
// with ONNX's version converter, opsets 18-21 rewritten into opset-17 forms,
// and model-local functions inlined) into a module with one `func.func @main`:
// graph inputs and parameters (float initializers) are its arguments, graph
// outputs its results. Shapes come from ONNX shape inference and must be
// static: symbolic dimensions get their sizes from ImportOptions::dims.
// Integer and bool initializers, Constant nodes and everything computed from
// constants only (the Shape -> Gather -> Div -> Slice chains that
// torch.onnx.export emits for its attention modules) fold to
// `shardc.Constant` during import; when a node's output shape depends on
// values folded so far, shape inference runs again with them as
// initializers, so shapes and values propagate to a fixed point.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTEND_IMPORTER_H
#define SHARDC_FRONTEND_IMPORTER_H

#include "passes/FoldConstants.h"

#include "onnx/onnx_pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"

#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace shardc {

/// A tensor given on the command line (e.g. `--bind NAME=FILE.npy`).
struct HostTensor {
  int64_t onnxType = 0; // onnx.TensorProto.DataType
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct ImportOptions {
  /// Graph inputs to freeze as compile-time constants: a static-shape
  /// compiler needs the values of inputs that determine shapes (a Reshape
  /// target, Slice bounds, ...).
  std::map<std::string, HostTensor> binds;
  /// Sizes of named symbolic dimensions (`--dim NAME=SIZE`): every
  /// `dim_param` NAME of the graph's inputs and outputs becomes SIZE before
  /// shape inference.
  std::map<std::string, int64_t> dims;
  /// Largest tensor, in bytes, that import-time folding creates or reads
  /// (shardc --fold-limit); larger ones are computed at execution time.
  int64_t foldLimit = kDefaultFoldLimit;
};

/// An imported model: the IR and what the plan writer needs besides it.
struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The model after opset conversion and shape inference; its initializers
  /// are the parameters' data.
  onnx::ModelProto model;
  /// The model file's directory: external data must stay inside it.
  std::string modelDir;
};

/// Reads and imports the model at `path`. Every problem is reported as an
/// MLIR diagnostic at the offending node's location.
mlir::FailureOr<ImportedModel> importOnnxFile(mlir::MLIRContext &ctx,
                                              llvm::StringRef path,
                                              const ImportOptions &options);

/// Imports a model from the contents of a model file named `path`: the
/// name in messages, and the directory that holds its external data.
mlir::FailureOr<ImportedModel> importOnnxBuffer(mlir::MLIRContext &ctx,
                                                llvm::StringRef contents,
                                                llvm::StringRef path,
                                                const ImportOptions &options);

/// The bytes of an initializer in the runtime's layout (row-major, little
/// endian, one byte per bool): raw_data, the typed repeated fields, or
/// external data, which must lie inside `modelDir` and within its file.
llvm::Expected<std::vector<uint8_t>>
readTensorBytes(const onnx::TensorProto &tensor, llvm::StringRef modelDir);

} // namespace shardc

#endif // SHARDC_FRONTEND_IMPORTER_H
