//===- FunctionInliner.h - Inlining of ONNX model-local functions -*- C++
//-*-===//
//
// A model may define functions (ModelProto.functions, IR version 8 on) and
// call them as nodes of the function's domain; PyTorch's dynamo exporter does
// this for modules and for torchlib helpers. Shard imports only the default
// domain, so every call is replaced by the function's body before anything
// else reads the graph. Debian's libonnx 1.12 has no inliner; this one
// substitutes the call's inputs and outputs for the formal ones, resolves
// attribute references (`ref_attr_name`) from the call's attributes or the
// function's defaults, and gives every value internal to the body a name
// unique in the graph. Calls inside a body are inlined too; a function that
// calls itself, directly or through others, is an error.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTEND_FUNCTIONINLINER_H
#define SHARDC_FRONTEND_FUNCTIONINLINER_H

#include "frontend/OpsetDowngrade.h"

#include "onnx/onnx_pb.h"

#include "mlir/Support/LogicalResult.h"

namespace shardc {

/// Inlines every call of a function of `model.functions` in the main graph,
/// recursively, then drops the functions. A call's error names the graph node
/// that (directly or through other functions) made it. The functions' default
/// opset must be the model's.
mlir::LogicalResult inlineLocalFunctions(onnx::ModelProto &model,
                                         NodeDiagnostic nodeError);

} // namespace shardc

#endif // SHARDC_FRONTEND_FUNCTIONINLINER_H
