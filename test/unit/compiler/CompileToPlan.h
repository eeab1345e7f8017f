//===- CompileToPlan.h - An ONNX text model compiled to a plan -*- C++ -*-===//
//
// For compiler tests that look at the plan shardc would write: the model is
// written into a fresh directory, imported, trained by the train pipeline
// with the given options and lowered; the plan is written (and so
// validated) to DIR/plan.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_TEST_UNIT_COMPILER_COMPILETOPLAN_H
#define SHARDC_TEST_UNIT_COMPILER_COMPILETOPLAN_H

#include "frontend/Importer.h"
#include "passes/LowerToPlan/PlanEmitter.h"
#include "passes/Passes.h"
#include "plan/PlanIO.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace shardc::test {

struct CompiledPlan {
  /// The fresh directory: the model as m.onnxtxt, the plan in plan/.
  std::string dir;
  plan::PlanWriter writer;
  /// The model's initializers' bytes, by name.
  std::map<std::string, std::vector<uint8_t>> initializers;

  std::string planDir() const { return dir + "/plan"; }
  plan::Plan &plan() { return writer.plan(); }
};

/// Compiles ONNX text `model` with `opts` into `out` (gtest failures on
/// any error; call it under ASSERT_NO_FATAL_FAILURE).
inline void compileToPlan(const char *model, const TrainPipelineOptions &opts,
                          CompiledPlan &out) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("shard-compile", dir));
  out.dir = dir.str().str();
  std::string path = out.dir + "/m.onnxtxt";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << model;
  }
  mlir::MLIRContext ctx;
  std::string diags;
  ctx.getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    diags += d.str() + "\n";
    return mlir::success();
  });
  auto imported = importOnnxFile(ctx, path, {});
  ASSERT_TRUE(mlir::succeeded(imported)) << diags;
  mlir::PassManager pm(&ctx);
  buildTrainPipeline(pm, opts);
  ASSERT_TRUE(mlir::succeeded(pm.run(*imported->module))) << diags;
  for (const auto &init : imported->model.graph().initializer()) {
    auto bytes = readTensorBytes(init, ".");
    ASSERT_TRUE(!!bytes);
    out.initializers[init.name()] = *bytes;
  }
  ParamReader reader =
      [&](llvm::StringRef name) -> llvm::Expected<std::vector<uint8_t>> {
    return out.initializers.at(name.str());
  };
  ASSERT_TRUE(mlir::succeeded(emitPlan(*imported->module, reader, out.writer)))
      << diags;
  if (llvm::Error err = out.writer.write(out.planDir()))
    FAIL() << llvm::toString(std::move(err));
}

} // namespace shardc::test

#endif // SHARDC_TEST_UNIT_COMPILER_COMPILETOPLAN_H
