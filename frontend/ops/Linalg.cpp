//===- Linalg.cpp - Import of ONNX matrix products ------------------------===//
//
// Gemm, which keeps alpha, beta, transA and transB, and MatMul, whose
// batched, broadcast and 1-D forms all take their result type from shape
// inference. Tested by test/lit/import/linalg.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

using namespace mlir;

namespace shardc {

static LogicalResult importGemm(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 3)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  OpBuilder &b = ctx.builder();
  return ctx.finish(b.create<GemmOp>(
      ctx.loc(), *type, ctx.operand(0), ctx.operand(1), ctx.operand(2),
      b.getF32FloatAttr(ctx.floatAttr("alpha", 1.0f)),
      b.getF32FloatAttr(ctx.floatAttr("beta", 1.0f)),
      b.getBoolAttr(ctx.intAttr("transA", 0) != 0),
      b.getBoolAttr(ctx.intAttr("transB", 0) != 0)));
}

static LogicalResult importMatMul(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 2)))
    return failure();
  auto type = ctx.outType(0);
  if (failed(type))
    return failure();
  return ctx.finish(ctx.builder().create<MatMulOp>(
      ctx.loc(), *type, ctx.operand(0), ctx.operand(1)));
}

void registerLinalgImporters(OpImporterTable &table) {
  table.add("Gemm", importGemm);
  table.add("MatMul", importMatMul);
}

} // namespace shardc
