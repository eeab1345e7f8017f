//===- shardc.cpp - The Shard compiler driver -----------------------------===//
//
//   shardc model.onnx -o PLAN            compile to a plan directory
//   shardc model.onnx --emit=mlir        print the IR after the pipeline
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "frontend/OnnxBridge.h"
#include "ir/ShardcDialect.h"
#include "passes/Lowering/PlanEmitter.h"
#include "passes/Passes.h"
#include "plan/MemoryPlan.h"
#include "runtime/Npy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
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

static cl::OptionCategory trainCategory(
    "training (a training step is compiled when --optimizer or --loss is "
    "given)");
static cl::opt<std::string>
    lossName("loss", cl::value_desc("NAME"),
             cl::desc("The output to minimize (default: the model's only "
                      "scalar float output)"),
             cl::cat(trainCategory));
static cl::opt<std::string>
    optimizerName("optimizer", cl::value_desc("sgd|adam|adamw"),
                  cl::desc("Optimizer of the training step"),
                  cl::cat(trainCategory));
static cl::opt<double> lr("lr", cl::desc("Learning rate (default 1e-3)"),
                          cl::init(1e-3), cl::cat(trainCategory));
static cl::opt<double> momentum("momentum", cl::desc("SGD momentum"),
                                cl::init(0.0), cl::cat(trainCategory));
static cl::opt<double> dampening("dampening", cl::desc("SGD dampening"),
                                 cl::init(0.0), cl::cat(trainCategory));
static cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"),
                              cl::cat(trainCategory));
static cl::opt<double>
    weightDecay("weight-decay",
                cl::desc("Weight decay (default 0; 0.01 for adamw)"),
                cl::init(-1.0), cl::cat(trainCategory));
static cl::opt<double> beta1("beta1", cl::desc("Adam beta1 (default 0.9)"),
                             cl::init(0.9), cl::cat(trainCategory));
static cl::opt<double> beta2("beta2", cl::desc("Adam beta2 (default 0.999)"),
                             cl::init(0.999), cl::cat(trainCategory));
static cl::opt<double> eps("eps", cl::desc("Adam epsilon (default 1e-8)"),
                           cl::init(1e-8), cl::cat(trainCategory));

static cl::OptionCategory shardCategory(
    "sharded data parallel (applied when --world-size is given)");
static cl::opt<int64_t>
    worldSize("world-size", cl::desc("Number of ranks the plan runs on"),
              cl::init(0), cl::cat(shardCategory));
static cl::opt<int64_t> zeroStage(
    "zero-stage",
    cl::desc("0: DDP (all-reduce), 1: shard optimizer state (OSS), 2: also "
             "gradients (SHARD_GRAD_OP), 3: also parameters (FULL_SHARD); "
             "default 3"),
    cl::init(3), cl::cat(shardCategory));
static cl::opt<double>
    bucketCapMb("bucket-cap-mb",
                cl::desc("Gradient all-reduce bucket size in MiB (stages 0, "
                         "1; default 25)"),
                cl::init(25.0), cl::cat(shardCategory));
static cl::opt<int64_t> minNumParams(
    "min-num-params",
    cl::desc("Auto-wrap: merge parameters into units of at least this many "
             "elements (default: one unit per layer)"),
    cl::init(0), cl::cat(shardCategory));
static cl::opt<bool> reshardAfterForward(
    "reshard-after-forward",
    cl::desc("Stage 3: free gathered parameters after forward, gather again "
             "in backward (default on)"),
    cl::init(true), cl::cat(shardCategory));
static cl::opt<std::string> backwardPrefetch(
    "backward-prefetch",
    cl::desc("pre|post|none: when to prefetch the next unit's parameters in "
             "backward (default pre)"),
    cl::init("pre"), cl::cat(shardCategory));
static cl::opt<bool>
    forwardPrefetch("forward-prefetch",
                    cl::desc("Prefetch the next unit's parameters in forward"),
                    cl::cat(shardCategory));
static cl::opt<bool> limitAllGathers(
    "limit-all-gathers",
    cl::desc("At most two parameter all-gathers in flight (default on)"),
    cl::init(true), cl::cat(shardCategory));
static cl::opt<bool> printMemory(
    "print-memory",
    cl::desc("Print the predicted per-rank peak memory of the plan"),
    cl::cat(shardCategory));

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

static constexpr const char *kSourceModelFile = "model.onnx";

/// Writes the model as the user gave it (original opset, graph and names) to
/// PLAN/model.onnx, with external initializer data pulled inline.
static llvm::Error saveSourceModel(llvm::StringRef path,
                                   llvm::StringRef modelDir,
                                   llvm::StringRef planDir) {
  onnx::ModelProto model;
  if (llvm::Error err = shardc::onnxbridge::readModel(path, model))
    return err;
  for (onnx::TensorProto &init : *model.mutable_graph()->mutable_initializer()) {
    if (init.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    auto bytes = shardc::readTensorBytes(init, modelDir);
    if (!bytes)
      return bytes.takeError();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.set_raw_data(bytes->data(), bytes->size());
  }
  if (model.ByteSizeLong() >= (size_t(1) << 31))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the model is over 2 GiB");
  llvm::SmallString<256> out(planDir);
  llvm::sys::path::append(out, kSourceModelFile);
  std::string bytes;
  model.SerializeToString(&bytes);
  std::error_code ec;
  llvm::raw_fd_ostream os(out, ec);
  if (ec)
    return llvm::createStringError(ec, "cannot write " + out);
  os << bytes;
  return llvm::Error::success();
}

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "shardc: error: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&shardcCategory, &trainCategory, &shardCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "shardc: compile an ONNX model into a Shard plan\n\n"
      "  shardc model.onnx -o PLAN                      forward pass\n"
      "  shardc model.onnx -o PLAN --optimizer adamw    training step\n"
      "  shardc model.onnx --emit=mlir                  show the IR\n");
  bool training = !optimizerName.empty() || !lossName.empty();
  if (worldSize.getNumOccurrences() && !training)
    return fail("--world-size shards a training step: give --optimizer");
  if (worldSize.getNumOccurrences() && worldSize < 1)
    return fail("--world-size must be at least 1");
  if (zeroStage < 0 || zeroStage > 3)
    return fail("--zero-stage must be 0, 1, 2 or 3");
  if (bucketCapMb <= 0)
    return fail("--bucket-cap-mb must be positive");
  if (backwardPrefetch != "pre" && backwardPrefetch != "post" &&
      backwardPrefetch != "none")
    return fail("--backward-prefetch must be pre, post or none");

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
  // One message per error: no IR dump after it.
  ctx.printOpOnDiagnostic(false);
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
  if (training) {
    shardc::TrainPipelineOptions opts;
    opts.loss = lossName.getValue();
    opts.optimizer = optimizerName.empty() ? "sgd" : optimizerName.getValue();
    opts.lr = lr.getValue();
    opts.momentum = momentum.getValue();
    opts.dampening = dampening.getValue();
    opts.nesterov = nesterov.getValue();
    opts.weightDecay = weightDecay.getValue();
    opts.beta1 = beta1.getValue();
    opts.beta2 = beta2.getValue();
    opts.eps = eps.getValue();
    if (worldSize.getNumOccurrences()) {
      opts.worldSize = worldSize.getValue();
      opts.zeroStage = zeroStage.getValue();
      opts.bucketCapMb = bucketCapMb.getValue();
      opts.minNumParams = minNumParams.getValue();
      opts.reshardAfterForward = reshardAfterForward.getValue();
      opts.backwardPrefetch = backwardPrefetch.getValue();
      opts.forwardPrefetch = forwardPrefetch.getValue();
      opts.limitAllGathers = limitAllGathers.getValue();
    }
    shardc::buildTrainPipeline(pm, opts);
  } else if (!noCleanup) {
    shardc::buildImportCleanupPipeline(pm);
  }
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
  shardc::plan::MemoryPlan memory = shardc::plan::planMemory(writer.plan());
  *writer.plan().mutable_predicted_memory() = shardc::plan::toPrediction(memory);
  if (printMemory) {
    llvm::outs() << "predicted per-rank peak memory (bytes):";
    for (int c = 0; c < shardc::plan::kNumCategories; ++c)
      llvm::outs() << " " << shardc::plan::categoryName(c) << "="
                   << memory.peak[c];
    llvm::outs() << " total=" << memory.peakTotal;
    int64_t largest = 0;
    for (const auto &unit : writer.plan().units())
      largest = std::max<int64_t>(largest, unit.padded_elements());
    llvm::outs() << " units=" << writer.plan().units_size()
                 << " largest_unit_elements=" << largest << "\n";
  }
  if (llvm::Error err = writer.write(planDir))
    return fail(llvm::toString(std::move(err)));
  if (training) {
    // The source model rides along so shardrun --export can write it back
    // with trained initializers.
    if (llvm::Error err = saveSourceModel(inputPath, modelDir, planDir)) {
      writer.plan().mutable_training()->clear_source_model();
      llvm::errs() << "shardc: warning: " << llvm::toString(std::move(err))
                   << "; shardrun --export will not be available\n";
    } else {
      writer.plan().mutable_training()->set_source_model(kSourceModelFile);
    }
    if (llvm::Error err = writer.write(planDir))
      return fail(llvm::toString(std::move(err)));
  }
  return 0;
}
