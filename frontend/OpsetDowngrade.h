//===- OpsetDowngrade.h - Opset 18-21 nodes into opset-17 forms -*- C++ -*-===//
//
// The importers read opset-17 forms: Debian's libonnx (1.12) knows schemas up
// to opset 17 only, so its shape inference cannot see newer nodes, and ONNX's
// version converter has no adapters down from 18+. A model at opsets 18 to
// kMaxOpset (what PyTorch 2.x exports by default) is therefore rewritten node
// by node into its opset-17 form before shape inference, with one small
// rewrite per operator whose schema changed after opset 17 (OpsetDowngrade.cpp
// holds the table): ReduceMean's `axes` input becomes the attribute, Gelu the
// Erf or Tanh formula, GroupNormalization an InstanceNormalization over the
// groups, and so on. A form without an opset-17 equivalent is an error that
// names the node, the operator, the opset and the attribute or input.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTEND_OPSETDOWNGRADE_H
#define SHARDC_FRONTEND_OPSETDOWNGRADE_H

#include "onnx/onnx_pb.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LogicalResult.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

namespace shardc {

/// The default-domain opsets Shard imports: older ones are converted up to
/// kMinOpset with ONNX's version converter, kImportOpset is the form the
/// importers read, and opsets above it up to kMaxOpset are rewritten into it.
constexpr int kMinOpset = 13;
constexpr int kImportOpset = 17;
constexpr int kMaxOpset = 21;

/// Starts an error at graph node `index` (`node`): the caller's location for
/// it and the "<OpType> (opset N): " prefix.
using NodeDiagnostic = llvm::function_ref<mlir::InFlightDiagnostic(
    const onnx::NodeProto &node, unsigned index)>;

/// The opset, above kImportOpset and at most `opset`, at which the schema of
/// `opType` last changed; 0 when its schema at `opset` is its
/// opset-kImportOpset one.
int schemaChangeAfterImportOpset(llvm::StringRef opType, int opset);

/// Rewrites every default-domain node of `model`, whose default opset is
/// `opset` (kImportOpset < opset <= kMaxOpset), into its opset-kImportOpset
/// form, and makes the model import opset kImportOpset. `hasImporter` tells
/// whether Shard imports an op type: a node of an operator that changed after
/// opset 17 and has no importer is reported as unsupported right away, before
/// ONNX's opset-17 shape inference misreads it.
mlir::LogicalResult
downgradeToImportOpset(onnx::ModelProto &model, int opset,
                       llvm::function_ref<bool(llvm::StringRef)> hasImporter,
                       NodeDiagnostic nodeError);

} // namespace shardc

#endif // SHARDC_FRONTEND_OPSETDOWNGRADE_H
