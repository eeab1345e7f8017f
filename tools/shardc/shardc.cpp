//===- shardc.cpp - The Shard compiler driver -----------------------------===//
//
//   shardc model.onnx -o PLAN            compile to a plan directory
//   shardc model.onnx --emit=mlir        print the IR after the pipeline
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "ir/ShardcDialect.h"
#include "passes/Lowering/PlanEmitter.h"
#include "passes/Passes.h"
#include "runtime/Npy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory shardcCategory("shardc options");

static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx | model.onnxtxt>"),
                                      cl::cat(shardcCategory));
static cl::opt<std::string>
    outputPath("o", cl::value_desc("path"),
               cl::desc("Output: the plan directory (--emit=plan, default "
                        "'plan'), or a file for --emit=mlir (default stdout)"),
               cl::cat(shardcCategory));

enum class EmitKind { Plan, Mlir };
static cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to produce"), cl::init(EmitKind::Plan),
    cl::values(clEnumValN(EmitKind::Plan, "plan", "a plan directory (default)"),
               clEnumValN(EmitKind::Mlir, "mlir",
                          "the shardc IR after the pipeline")),
    cl::cat(shardcCategory));

static cl::list<std::string>
    binds("bind", cl::value_desc("NAME=FILE.npy"),
          cl::desc("Freeze graph input NAME to the tensor in FILE.npy at "
                   "compile time (for inputs that determine shapes)"),
          cl::cat(shardcCategory));

static cl::opt<bool> printIrAfterAll(
    "print-ir-after-all",
    cl::desc("Print the IR after import and after every pass (to stderr)"),
    cl::cat(shardcCategory));

static cl::opt<bool> noCleanup(
    "no-fold", cl::desc("Skip constant folding and canonicalization"),
    cl::cat(shardcCategory));

/// "file: node 'name': error: message" for diagnostics at importer
/// locations; plain "file:line:col: error: message" otherwise.
static void printDiagnostic(Diagnostic &diag) {
  llvm::raw_ostream &os = llvm::errs();
  Location loc = diag.getLocation();
  std::string where;
  if (auto name = dyn_cast<NameLoc>(loc)) {
    std::string file;
    if (auto fl = dyn_cast<FileLineColLoc>(name.getChildLoc()))
      file = fl.getFilename().str();
    where = (file.empty() ? "" : file + ": ") + "node '" +
            name.getName().str() + "'";
  } else if (auto fl = dyn_cast<FileLineColLoc>(loc)) {
    where = fl.getFilename().str();
    if (fl.getLine())
      where += ":" + std::to_string(fl.getLine()) + ":" +
               std::to_string(fl.getColumn());
  } else {
    llvm::raw_string_ostream s(where);
    loc.print(s);
  }
  const char *sev = diag.getSeverity() == DiagnosticSeverity::Error ? "error"
                    : diag.getSeverity() == DiagnosticSeverity::Warning
                        ? "warning"
                        : "note";
  os << "shardc: " << where << ": " << sev << ": " << diag << "\n";
  for (Diagnostic &note : diag.getNotes())
    printDiagnostic(note);
}

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "shardc: error: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(shardcCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "shardc: compile an ONNX model into a Shard plan\n\n"
      "  shardc model.onnx -o PLAN\n"
      "  shardc model.onnx --emit=mlir\n");

  shardc::ImportOptions options;
  for (const std::string &bind : binds) {
    auto [name, file] = llvm::StringRef(bind).split('=');
    if (name.empty() || file.empty())
      return fail("--bind expects NAME=FILE.npy, got '" + bind + "'");
    auto arr = shardc::rt::readNpy(file);
    if (!arr)
      return fail("--bind " + name + ": " + llvm::toString(arr.takeError()));
    shardc::HostTensor t;
    t.onnxType = static_cast<int64_t>(arr->dtype);
    t.shape = arr->shape;
    t.bytes = std::move(arr->data);
    options.binds[name.str()] = std::move(t);
  }

  MLIRContext ctx;
  ctx.getOrLoadDialect<shardc::ShardcDialect>();
  ctx.getOrLoadDialect<func::FuncDialect>();
  ctx.getDiagEngine().registerHandler([](Diagnostic &diag) {
    printDiagnostic(diag);
    return success();
  });

  auto imported = shardc::importOnnxFile(ctx, inputPath, options);
  if (failed(imported))
    return 1;
  ModuleOp module = *imported->module;
  if (printIrAfterAll) {
    llvm::errs() << "// -----// IR Dump After Import (shardc) //----- //\n";
    module.print(llvm::errs());
    llvm::errs() << "\n";
  }

  PassManager pm(&ctx);
  if (printIrAfterAll) {
    ctx.disableMultithreading();
    pm.enableIRPrinting(
        /*shouldPrintBeforePass=*/[](Pass *, Operation *) { return false; },
        /*shouldPrintAfterPass=*/[](Pass *, Operation *) { return true; },
        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
  }
  if (!noCleanup)
    shardc::buildImportCleanupPipeline(pm);
  if (failed(pm.run(module)))
    return 1;

  if (emitKind == EmitKind::Mlir) {
    std::string out = outputPath.empty() ? "-" : outputPath.getValue();
    std::string err;
    auto file = openOutputFile(out, &err);
    if (!file)
      return fail(err);
    module.print(file->os());
    file->os() << "\n";
    file->keep();
    return 0;
  }

  std::string planDir = outputPath.empty() ? "plan" : outputPath.getValue();
  shardc::plan::PlanWriter writer;
  writer.plan().set_producer("shardc 0.1");
  const onnx::ModelProto &model = imported->model;
  std::string modelDir = imported->modelDir;
  shardc::ParamReader reader =
      [&](llvm::StringRef name) -> llvm::Expected<std::vector<uint8_t>> {
    for (const auto &init : model.graph().initializer())
      if (init.name() == name)
        return shardc::readTensorBytes(init, modelDir);
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no initializer named '" + name + "'");
  };
  if (failed(shardc::emitPlan(module, reader, writer)))
    return 1;
  if (llvm::Error err = writer.write(planDir))
    return fail(llvm::toString(std::move(err)));
  return 0;
}
