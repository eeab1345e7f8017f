//===- FuzzImport.cpp - libFuzzer target: the ONNX importer ---------------===//
//
// Input: the bytes of a model file (binary ModelProto). The importer runs as
// `shardc` runs it (validation, ONNX's checker, version conversion, shape
// inference, constant folding, the op importers, the IR verifier) and must
// accept the model or report an error, never crash, abort, allocate without
// bound or hang. The model's directory does not exist, so external data
// always fails to resolve.
//
// Diagnostics are dropped (a fuzzer prints nothing per input). The MLIR
// context is recreated now and then: it keeps every type and attribute it
// ever uniqued, which would look like a leak over millions of inputs.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>
#include <memory>

using namespace shardc;

namespace {
constexpr unsigned kInputsPerContext = 256;
} // namespace

// LLVM's headers poison the unused part of a BumpPtrAllocator slab when they
// are compiled with AddressSanitizer; Debian's MLIR libraries are not, and
// hand out that memory without unpoisoning it. Manual poisoning is therefore
// meaningless in this mixed build: ignore it (real out-of-bounds accesses,
// use-after-free and leaks are still reported).
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<mlir::MLIRContext> ctx;
  static unsigned uses = 0;
  if (!ctx || ++uses >= kInputsPerContext) {
    ctx = std::make_unique<mlir::MLIRContext>(
        mlir::MLIRContext::Threading::DISABLED);
    uses = 0;
  }
  mlir::ScopedDiagnosticHandler drop(ctx.get(), [](mlir::Diagnostic &) {
    return mlir::success();
  });
  ImportOptions options;
  mlir::FailureOr<ImportedModel> imported = importOnnxBuffer(
      *ctx, llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "/nonexistent-shard-fuzz/model.onnx", options);
  (void)imported;
  return 0;
}
