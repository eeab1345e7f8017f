//===- OpImporters.h - Per-operator ONNX importers --------------*- C++ -*-===//
//
// The interface between the import driver (Importer.cpp) and the files under
// frontend/ops/ that import ONNX operators, one family per file. The driver
// walks the graph and, for each node, calls the importer registered for its
// op type with an ImportContext: the node, its operands (the values defined
// so far), the result types from ONNX shape inference, a builder positioned
// in @main, and the helpers that report errors at the node's location. An
// importer creates shardc ops and hands them to ImportContext::finish, which
// folds them when all of their operands are constants.
//
// Each family registers its importers in one register*Importers function;
// the families mirror the tests in test/lit/import/:
//
//   ops/Elementwise.cpp   elementwise.onnxtxt, dropout.onnxtxt
//   ops/Linalg.cpp        linalg.onnxtxt, einsum.onnxtxt
//   ops/Normalization.cpp normalization.onnxtxt, batchnorm.onnxtxt
//   ops/Reduce.cpp        reduce.onnxtxt, reduce-composed.onnxtxt
//   ops/ConvPool.cpp      conv-pool.onnxtxt
//   ops/DataMovement.cpp  data-movement.onnxtxt
//   ops/Constants.cpp     constants.onnxtxt, mod.onnxtxt, scatternd.onnxtxt
//   ops/Loss.cpp          loss.onnxtxt
//   ops/Recurrent.cpp     recurrent.onnxtxt, rnn.onnxtxt
//
// (op-errors.test holds the errors of all of them that ONNX's own checks do
// not catch first). Adding an operator touches one of these files, and its
// test, only.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTEND_OPIMPORTERS_H
#define SHARDC_FRONTEND_OPIMPORTERS_H

#include "onnx/onnx_pb.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LogicalResult.h"

#include "llvm/ADT/StringMap.h"

#include <string>

namespace shardc {

/// The values of the graph imported so far, by ONNX name.
using ValueTable = llvm::StringMap<mlir::Value>;
/// The types ONNX shape inference gave the graph's values, by ONNX name.
using TypeTable = llvm::StringMap<onnx::TypeProto>;

/// The static tensor type of an ONNX value; errors (not a tensor, element
/// type Shard does not support, dynamic or missing shape) are reported at
/// `loc` and name the value `name`.
mlir::FailureOr<mlir::RankedTensorType>
tensorTypeFromOnnx(mlir::MLIRContext *ctx, const onnx::TypeProto &type,
                   llvm::StringRef name, mlir::Location loc);

/// The value of an ONNX tensor (initializer or attribute), read with
/// readTensorBytes; null after reporting an error at `loc`.
mlir::DenseElementsAttr tensorAttrFromOnnx(mlir::MLIRContext *ctx,
                                           const onnx::TensorProto &tensor,
                                           llvm::StringRef modelDir,
                                           mlir::Location loc);

/// One node's import: what an operator importer reads and extends. The
/// driver builds one per node; every error reported through it is located at
/// the node (a NameLoc with the node's name) and starts with the op type and
/// the model's opset, e.g. "Slice (opset 13): slice step is zero".
class ImportContext {
public:
  ImportContext(const onnx::NodeProto &node, mlir::Location loc, int opset,
                int reportedOpset, mlir::OpBuilder &builder, ValueTable &values,
                const TypeTable &types, llvm::StringRef modelDir,
                int64_t foldLimit)
      : onnxNode(node), nodeLoc(loc), opsetVersion(opset),
        reportedOpset(reportedOpset), b(builder), values(values), types(types),
        modelDir(modelDir), foldLimitBytes(foldLimit) {}

  /// The node being imported.
  const onnx::NodeProto &node() const { return onnxNode; }
  /// The default-domain opset of the node's form: the model's after
  /// conversion up to 13, or 17 for a model of opsets 18-21, whose nodes the
  /// driver rewrote into their opset-17 forms (OpsetDowngrade.h).
  int opset() const { return opsetVersion; }
  /// The builder, positioned at the end of @main's body.
  mlir::OpBuilder &builder() { return b; }
  /// The node's location: its name (or `OpType#index`) in the model file.
  mlir::Location loc() const { return nodeLoc; }
  /// Starts an error at the node: "<OpType> (opset N): ".
  mlir::InFlightDiagnostic nodeError();
  /// Starts a warning at the node, with the same prefix.
  mlir::InFlightDiagnostic nodeWarning();

  //===--------------------------------------------------------------------===//
  // Operands
  //===--------------------------------------------------------------------===//

  /// Checks that the node has `min` to `max` inputs, that the first `min`
  /// are present, and that every present one is defined.
  mlir::LogicalResult requireOperands(int min, int max);
  /// Input `i`, or null when it is absent (past the end or empty).
  mlir::Value operand(int i) const;
  /// The values of constant integer input `i`; `what` names it in the error
  /// when it is not a compile-time constant.
  mlir::FailureOr<llvm::SmallVector<int64_t>> constInts(int i,
                                                        llvm::StringRef what);

  //===--------------------------------------------------------------------===//
  // Results
  //===--------------------------------------------------------------------===//

  /// The static type ONNX shape inference gave output `i`.
  mlir::FailureOr<mlir::RankedTensorType> outType(int i);
  /// Whether shape inference gave output `i` a tensor type with a shape
  /// (outType may still reject it, e.g. for a dynamic dimension).
  bool hasInferredShape(int i) const;
  /// Whether that shape is also static (every dimension a size): then
  /// outType(i) gives it without an error.
  bool hasStaticInferredShape(int i) const;
  /// Maps the results of `op` to the node's outputs (result j to output
  /// `outputIndex[j]`, or to output j when `outputIndex` is empty), after
  /// folding `op` if all of its operands are constants.
  mlir::LogicalResult finish(mlir::Operation *op,
                             llvm::ArrayRef<int> outputIndex = {});
  /// Makes `v` the value of output `i`.
  void define(int i, mlir::Value v);
  /// A tensor of `type` with every element `elem`: a constant when it fits
  /// the fold budget, else a scalar constant broadcast by shardc.Expand at
  /// execution time (a constant is written out whole, however it is held).
  mlir::Value splat(mlir::RankedTensorType type, mlir::Attribute elem);
  /// The fold budget in bytes per tensor (ImportOptions::foldLimit).
  int64_t foldLimit() const { return foldLimitBytes; }
  /// Checks, before it is built, that a constant an importer derives from a
  /// declared shape (an index table of `count` int64 entries: a Gather's
  /// taps, a row pick) fits the fold budget; else an error naming `what`.
  mlir::LogicalResult checkIndexTable(int64_t count, llvm::StringRef what);
  /// The type `shape` x `elem` of a result whose shape the importer
  /// computes itself (from sizes, scales, a depth), after the element-count
  /// check every inferred type passes (checkedElementCount); else an error.
  mlir::FailureOr<mlir::RankedTensorType>
  checkedType(llvm::ArrayRef<int64_t> shape, mlir::Type elem);

  //===--------------------------------------------------------------------===//
  // Attributes
  //===--------------------------------------------------------------------===//

  // The readers check the attribute's type: one of another type is an error
  // at the node ("attribute 'beta' has type string; Gemm reads it as
  // float"), the reader returns the default, and the node's import fails
  // whatever the importer does next (the driver checks attributeErrors()).
  // No importer can read a wrong-typed attribute as a default.

  /// Whether the node has an attribute `name` (of any type).
  bool hasAttr(llvm::StringRef name) const;
  /// The attribute `name` if it has type `type`; null when absent or after
  /// reporting a wrong type.
  const onnx::AttributeProto *attr(llvm::StringRef name,
                                   onnx::AttributeProto::AttributeType type);
  int64_t intAttr(llvm::StringRef name, int64_t def);
  float floatAttr(llvm::StringRef name, float def);
  std::string stringAttr(llvm::StringRef name, llvm::StringRef def);
  /// The ints attribute `name`; empty when absent.
  llvm::SmallVector<int64_t> intsAttr(llvm::StringRef name);
  /// Whether a reader reported an attribute of the wrong type.
  bool attributeErrors() const { return attrErrors; }
  /// A tensor attribute's value; null after reporting an error.
  mlir::DenseElementsAttr tensorAttr(const onnx::TensorProto &tensor);
  /// `axis` in [-rank, rank) made non-negative (a scalar counts as rank 1).
  mlir::FailureOr<int64_t> normAxis(int64_t axis, int64_t rank);

private:
  const onnx::NodeProto &onnxNode;
  mlir::Location nodeLoc;
  int opsetVersion;
  /// The opset errors name: the model's own.
  int reportedOpset;
  mlir::OpBuilder &b;
  ValueTable &values;
  const TypeTable &types;
  llvm::StringRef modelDir;
  int64_t foldLimitBytes;
  bool attrErrors = false;
};

/// The tuples of an ND index tensor (GatherND's, ScatterND's: shape [...,
/// k], k from 1 to the rank of `shape`) as linear indices into the first k
/// axes of a tensor of `shape` flattened, negative entries counting from the
/// end; an error at the node for a bad last size or an entry out of range.
mlir::FailureOr<llvm::SmallVector<int64_t>>
linearNdIndices(ImportContext &ctx, mlir::DenseElementsAttr indices,
                llvm::ArrayRef<int64_t> shape);

/// Imports the node of an ImportContext.
using OpImporter = mlir::LogicalResult (*)(ImportContext &);

/// The operators Shard imports, by ONNX op type (default domain: the driver
/// rejects nodes of other domains before import).
class OpImporterTable {
public:
  /// Registers `importer` for `opType`, which must not have one yet.
  void add(llvm::StringRef opType, OpImporter importer);
  /// The importer for `opType`, or null.
  OpImporter lookup(llvm::StringRef opType) const {
    return importers.lookup(opType);
  }

private:
  llvm::StringMap<OpImporter> importers;
};

/// The operator families, one per file under frontend/ops/.
void registerElementwiseImporters(OpImporterTable &table);
void registerLinalgImporters(OpImporterTable &table);
void registerNormalizationImporters(OpImporterTable &table);
void registerReduceImporters(OpImporterTable &table);
void registerConvPoolImporters(OpImporterTable &table);
void registerDataMovementImporters(OpImporterTable &table);
void registerConstantsImporters(OpImporterTable &table);
void registerLossImporters(OpImporterTable &table);
void registerRecurrentImporters(OpImporterTable &table);

/// Every family above.
void registerAllOpImporters(OpImporterTable &table);

} // namespace shardc

#endif // SHARDC_FRONTEND_OPIMPORTERS_H
