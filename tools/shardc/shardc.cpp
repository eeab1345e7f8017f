//===- shardc.cpp - The Shard compiler driver -----------------------------===//
//
//   shardc model.onnx -o PLAN            compile to a plan directory
//   shardc model.onnx --emit=mlir        print the IR after the pipeline
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "frontend/ModelValidator.h"
#include "frontend/OnnxBridge.h"
#include "ir/ShardcDialect.h"
#include "passes/LowerToPlan/PlanEmitter.h"
#include "passes/MemoryBudget.h"
#include "passes/Passes.h"
#include "plan/CostModel.h"
#include "plan/MemoryPlan.h"
#include "runtime/Npy.h"
#include "tools/CommandLine.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <unistd.h>

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
/// An unknown --emit value is rejected with the choices, as every enum
/// option of Shard's passes is.
template <>
class llvm::cl::parser<EmitKind>
    : public shardc::detail::ChoiceParser<EmitKind> {
public:
  using ChoiceParser::ChoiceParser;
};
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

static cl::list<std::string> dimSizes(
    "dim", cl::value_desc("NAME=SIZE"),
    cl::desc("Give the symbolic dimension NAME (a dynamic axis of the "
             "export) the size SIZE everywhere; with --world-size N, a batch "
             "dimension's SIZE is one rank's micro-batch"),
    cl::cat(shardcCategory));

static cl::opt<bool> printIrAfterAll(
    "print-ir-after-all",
    cl::desc("Print the IR after import and after every pass (to stderr)"),
    cl::cat(shardcCategory));

// Training and sharding flags are the train pipeline's options (declared
// once, with the passes, in passes/Passes.td); main() registers them here.
static cl::OptionCategory trainCategory(
    "training (a training step is compiled when --optimizer or --loss is "
    "given)");
static cl::OptionCategory shardCategory(
    "sharded data parallel (applied when --world-size or --zero-stage is "
    "given)");
static cl::opt<bool> printMemory(
    "print-memory",
    cl::desc("Print the predicted per-rank peak memory of the plan, by "
             "category, and the bytes a rank sends per step"),
    cl::cat(shardCategory));

static cl::opt<std::string> memoryLimit(
    "memory-limit",
    cl::desc("Refuse a plan whose predicted per-rank peak memory exceeds "
             "SIZE bytes (suffixes K, M, G, T: powers of 1024; 0: no "
             "check). Default: this machine's physical memory; give the "
             "memory of one rank of the machine that will run the plan"),
    cl::value_desc("SIZE"), cl::cat(shardCategory));

static cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("Choose the fastest plan whose predicted per-rank peak memory "
             "fits SIZE bytes (suffixes K, M, G, T: powers of 1024): the "
             "ZeRO stage, --reshard-after-forward, --backward-prefetch, "
             "--recompute and --offload that the command line leaves open, "
             "judged by the cost model (--print-cost); prints one line per "
             "decision"),
    cl::value_desc("SIZE"), cl::cat(shardCategory));

static cl::opt<bool> printCost(
    "print-cost",
    cl::desc("Print the cost model's predicted step time per rank: compute "
             "(and recomputation), collectives and offload transfers, and "
             "how much of those the compute timeline waits for"),
    cl::cat(shardCategory));

// The machine the cost model assumes, and the step it predicts without a
// run. These are shardc's own: the one pass that reads the machine
// (shardc-bucket-gradients) gets it as its cost-model option, written from
// the MachineModel these build.
static cl::OptionCategory simulateCategory(
    "step-time model (--print-cost, --simulate, --memory-budget and "
    "gradient buckets read the machine)");

static cl::opt<bool> simulate(
    "simulate",
    cl::desc("Predict one step at --world-size N on the machine of "
             "--hardware (default: one rank of this CPU backend) and print "
             "its time, the communication it exposes and the per-rank peak "
             "memory. Parameters are read by shape only, so a model of any "
             "size compiles for any N; no plan is written"),
    cl::cat(simulateCategory));

static cl::opt<std::string> hardwarePath(
    "hardware",
    cl::desc("The machine, from a hardware file: one 'key = value' per "
             "line, the keys of --cost-model, '#' starting a comment. "
             "bench/hardware/ has this CPU's fitted file and an A100 "
             "cluster's. --cost-model, --flops, --bandwidth and --latency "
             "override it"),
    cl::value_desc("FILE"), cl::cat(simulateCategory));

static cl::opt<double>
    flopsRate("flops",
              cl::desc("Matrix-product and convolution rate of one rank, in "
                       "flop/s (the hardware file's flops)"),
              cl::value_desc("F"), cl::cat(simulateCategory));

static cl::opt<double> bandwidth(
    "bandwidth",
    cl::desc("Bytes per second one rank sends in a collective (the hardware "
             "file's link; host-link, where a file sets it, stays)"),
    cl::value_desc("B"), cl::cat(simulateCategory));

static cl::opt<double>
    latency("latency",
            cl::desc("Seconds per step of a collective's ring or tree (the "
                     "hardware file's link-latency; host-link-latency, "
                     "where a file sets it, stays)"),
            cl::value_desc("L"), cl::cat(simulateCategory));

static cl::opt<bool> printTrainable(
    "print-trainable",
    cl::desc("List every parameter with whether it is trained (trained, "
             "frozen, no_gradient, statistic), its shape and size"),
    cl::cat(trainCategory));

static cl::opt<bool>
    noCleanup("no-fold", cl::desc("Skip constant folding and canonicalization"),
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
/// The source model's external data, when it has any.
static constexpr const char *kSourceDataFile = "model.onnx.data";

/// The source model as the plan keeps it.
struct SourceModel {
  std::vector<uint8_t> model;
  /// The initializers' data when the model keeps it outside (empty: inline).
  std::optional<std::vector<uint8_t>> data;
};

/// The model as the user gave it (original opset, graph and names): PLAN/
/// model.onnx, a file of the plan (listed in its manifest). A model that
/// keeps initializer data outside its protobuf (PyTorch's exports over
/// 2 GiB, onnx.save(..., save_as_external_data=True)) keeps it outside in
/// the plan too, in PLAN/model.onnx.data: every raw initializer of 1 KiB or
/// more (ONNX's threshold), at offsets aligned to 64 bytes. Otherwise the
/// data is inline.
static llvm::Expected<SourceModel>
serializeSourceModel(llvm::StringRef path, llvm::StringRef modelDir) {
  onnx::ModelProto model;
  if (llvm::Error err = shardc::onnxbridge::readModel(path, model))
    return std::move(err);
  bool external = llvm::any_of(
      model.graph().initializer(), [](const onnx::TensorProto &init) {
        return init.data_location() == onnx::TensorProto::EXTERNAL;
      });
  SourceModel out;
  if (external)
    out.data.emplace();
  for (onnx::TensorProto &init :
       *model.mutable_graph()->mutable_initializer()) {
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      auto bytes = shardc::readTensorBytes(init, modelDir);
      if (!bytes)
        return bytes.takeError();
      init.clear_external_data();
      init.set_data_location(onnx::TensorProto::DEFAULT);
      init.set_raw_data(bytes->data(), bytes->size());
    }
    if (!external || !init.has_raw_data() || init.raw_data().size() < 1024)
      continue;
    std::vector<uint8_t> &data = *out.data;
    data.resize(llvm::alignTo(data.size(), 64), 0);
    uint64_t offset = data.size();
    data.insert(data.end(), init.raw_data().begin(), init.raw_data().end());
    uint64_t length = init.raw_data().size();
    init.clear_raw_data();
    init.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char *key, const std::string &value) {
      onnx::StringStringEntryProto *e = init.add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    add("location", kSourceDataFile);
    add("offset", std::to_string(offset));
    add("length", std::to_string(length));
  }
  if (model.ByteSizeLong() >= (size_t(1) << 31))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the model is over 2 GiB with its initializers inline; save it with "
        "external data (onnx.save(..., save_as_external_data=True))");
  std::string bytes;
  model.SerializeToString(&bytes);
  out.model.assign(bytes.begin(), bytes.end());
  return std::move(out);
}

static const char *roleName(shardc::plan::ParamRole role) {
  switch (role) {
  case shardc::plan::TRAINED:
    return "trained";
  case shardc::plan::FROZEN:
    return "frozen";
  case shardc::plan::NO_GRADIENT:
    return "no_gradient";
  case shardc::plan::RUNNING_STATISTIC:
    return "statistic";
  default:
    return "-";
  }
}

/// Bytes per rank of the parameters a step does not train (frozen ones are
/// sharded at ZeRO-3 like the trained ones; the others are whole on every
/// rank).
static uint64_t untrainedParamBytes(const shardc::plan::Plan &plan) {
  uint64_t bytes = 0;
  for (const auto &b : plan.buffers())
    if (b.kind() == shardc::plan::PARAMETER &&
        b.role() != shardc::plan::TRAINED)
      bytes += b.data_bytes() / std::max<int64_t>(b.shard_count(), 1);
  return bytes;
}

/// The byte count of a --memory-limit or --memory-budget value: digits with an
/// optional K, M, G or T suffix (powers of 1024, optionally followed by "iB" or
/// "B").
static std::optional<uint64_t> parseByteSize(llvm::StringRef text) {
  text = text.trim();
  uint64_t scale = 1;
  llvm::StringRef number = text;
  for (auto [suffix, factor] :
       {std::pair<const char *, uint64_t>{"K", 1ull << 10},
        {"M", 1ull << 20},
        {"G", 1ull << 30},
        {"T", 1ull << 40}}) {
    for (llvm::StringRef tail : {"", "B", "iB"}) {
      std::string full = std::string(suffix) + tail.str();
      if (text.ends_with_insensitive(full)) {
        number = text.drop_back(full.size());
        scale = factor;
      }
    }
  }
  if (scale == 1 && text.ends_with_insensitive("B"))
    number = text.drop_back();
  uint64_t value = 0;
  if (number.empty() || number.getAsInteger(10, value))
    return std::nullopt;
  if (value > UINT64_MAX / scale)
    return std::nullopt;
  return value * scale;
}

/// Refuses a plan whose predicted per-rank peak does not fit --memory-limit
/// (default: this machine's physical memory).
static llvm::Error checkMemoryLimit(const shardc::plan::MemoryPlan &memory) {
  uint64_t limit = 0;
  std::string source;
  if (memoryLimit.getNumOccurrences()) {
    std::optional<uint64_t> parsed = parseByteSize(memoryLimit);
    if (!parsed)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "--memory-limit expects a size in bytes with an optional K, M, G "
          "or T suffix (e.g. 80G), or 0 for no check; got '" +
              memoryLimit + "'");
    limit = *parsed;
    source = "--memory-limit " + memoryLimit;
  } else {
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || pageSize <= 0)
      return llvm::Error::success();
    limit = static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
    source = "this machine's physical memory, " + shardc::formatBytes(limit);
  }
  if (limit == 0 || memory.peakTotal <= limit)
    return llvm::Error::success();
  std::string parts;
  for (int c = 0; c < shardc::plan::kNumCategories; ++c)
    parts += std::string(c ? ", " : "") + shardc::plan::categoryName(c) + " " +
             shardc::formatBytes(memory.peak[c]);
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "the plan needs " + shardc::formatBytes(memory.peakTotal) +
          " per rank at its predicted peak (" + parts + "), more than " +
          source +
          ". Lower the batch size (--dim), raise --zero-stage or "
          "--world-size, or give --memory-limit SIZE: the memory of one rank "
          "of the machine that will run the plan (0: no check)");
}

/// --print-trainable: one line per parameter (ZeRO-3 flat units listed by
/// their parameters), then the totals per role.
static void printParameterRoles(const shardc::plan::Plan &plan,
                                llvm::raw_ostream &os) {
  struct Row {
    std::string role, name, shape;
    int64_t elements;
  };
  std::vector<Row> rows;
  auto shapeText = [](const auto &dims, int64_t &elements) {
    std::string text = "[";
    elements = 1;
    for (auto [i, d] : llvm::enumerate(dims)) {
      text += (i ? ", " : "") + std::to_string(d);
      elements *= d;
    }
    return text + "]";
  };
  llvm::DenseSet<int32_t> flatBuffers;
  for (const auto &unit : plan.units()) {
    if (unit.buffer() < 0) // stages 1-2: whole parameter buffers
      continue;
    flatBuffers.insert(unit.buffer());
    std::string role = roleName(plan.buffers(unit.buffer()).role());
    for (const auto &p : unit.params()) {
      Row r{role, p.name(), "", 0};
      r.shape = shapeText(p.shape(), r.elements);
      rows.push_back(r);
    }
  }
  for (auto [i, b] : llvm::enumerate(plan.buffers())) {
    if (b.kind() != shardc::plan::PARAMETER || flatBuffers.count(i))
      continue;
    Row r{roleName(b.role()), b.name(), "", 0};
    r.shape = shapeText(b.shape(), r.elements);
    rows.push_back(r);
  }
  size_t nameWidth = 4, shapeWidth = 5;
  for (const Row &r : rows) {
    nameWidth = std::max(nameWidth, r.name.size());
    shapeWidth = std::max(shapeWidth, r.shape.size());
  }
  auto pad = [](const std::string &text, size_t width) {
    return text + std::string(width - std::min(width, text.size()), ' ');
  };
  os << llvm::formatv("{0,-12} {1} {2} {3,12}\n", "role",
                      pad("name", nameWidth), pad("shape", shapeWidth),
                      "elements");
  std::map<std::string, std::pair<int64_t, int64_t>> totals;
  for (const Row &r : rows) {
    os << llvm::formatv("{0,-12} {1} {2} {3,12}\n", r.role,
                        pad(r.name, nameWidth), pad(r.shape, shapeWidth),
                        r.elements);
    totals[r.role].first += 1;
    totals[r.role].second += r.elements;
  }
  for (const char *role : {"trained", "frozen", "no_gradient", "statistic"})
    if (totals.count(role))
      os << role << ": " << totals[role].first << " tensors, "
         << totals[role].second << " elements\n";
}

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "shardc: error: " << msg << "\n";
  return 1;
}

/// Whether `a` and `b` name the same existing file.
static bool sameFile(const llvm::Twine &a, const llvm::Twine &b) {
  bool same = false;
  return !llvm::sys::fs::equivalent(a, b, same) && same;
}

/// Checks where -o writes before anything is compiled. A plan goes into a
/// new or empty directory, or replaces a previous plan (a directory holding
/// only the files a plan has); nothing else is overwritten, and
/// neither is the input model (-o model.onnx --emit=mlir, or a plan's own
/// model.onnx compiled into that plan).
static llvm::Error checkOutputPath(llvm::StringRef out, llvm::StringRef input,
                                   bool plan) {
  auto error = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "-o " + out + ": " + msg);
  };
  if (!plan) {
    if (out != "-" && sameFile(out, input))
      return error("that is the input model; give another output file");
    return llvm::Error::success();
  }
  const char *planFiles[] = {shardc::plan::kPlanFile,
                             shardc::plan::kParamsFile,
                             shardc::plan::kConstantsFile,
                             shardc::plan::kManifestFile,
                             kSourceModelFile,
                             kSourceDataFile};
  for (const char *name : planFiles) {
    llvm::SmallString<256> path(out);
    llvm::sys::path::append(path, name);
    if (sameFile(path, input))
      return error(llvm::Twine("the plan would overwrite the input model (") +
                   path + "); give another output directory");
  }
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(out, status))
    return llvm::Error::success(); // a new directory
  if (status.type() != llvm::sys::fs::file_type::directory_file)
    return error("exists and is not a directory; a plan is a directory");
  std::error_code ec;
  std::string foreign;
  for (llvm::sys::fs::directory_iterator it(out, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    // A plan's files, and the temporaries an interrupted write leaves.
    bool ours = llvm::any_of(planFiles, [&](const char *f) {
      return name == f || name.starts_with((llvm::Twine(f) + ".tmp-").str());
    });
    if (!ours && foreign.empty())
      foreign = name.str();
  }
  if (ec)
    return error("cannot list the directory: " + ec.message());
  if (!foreign.empty())
    return error("the directory holds '" + foreign +
                 "', which is not part of a plan; give a new or empty "
                 "directory, or a previous plan's, to write the plan into");
  return llvm::Error::success();
}

/// The bytes of the model's initializer `name` (a plan's parameter).
static llvm::Expected<std::vector<uint8_t>>
readInitializer(const onnx::ModelProto &model, llvm::StringRef modelDir,
                llvm::StringRef name) {
  for (const auto &init : model.graph().initializer())
    if (init.name() == name)
      return shardc::readTensorBytes(init, modelDir);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "no initializer named '" + name + "'");
}

/// --memory-budget: compiles candidate settings of the options the command
/// line leaves open on copies of `module` (passes/MemoryBudget.h), logs
/// each decision to stderr and sets `pipeline` to the chosen one.
static llvm::Error chooseForBudget(ModuleOp module,
                                   shardc::TrainPipelineOptions &pipeline,
                                   const shardc::plan::MachineModel &machine,
                                   uint64_t budget) {
  shardc::BudgetSpace space = shardc::BudgetSpace::of(pipeline);
  auto evaluate = [&](const shardc::BudgetChoice &choice)
      -> llvm::Expected<shardc::BudgetEstimate> {
    choice.apply(space, pipeline);
    // A candidate's warnings would repeat the final compile's; its errors
    // go into the search's error.
    std::string errors;
    ScopedDiagnosticHandler quiet(module.getContext(), [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        errors += (errors.empty() ? "" : "; ") + diag.str();
      return success();
    });
    OwningOpRef<ModuleOp> copy = module.clone();
    PassManager pm(module.getContext());
    shardc::buildTrainPipeline(pm, pipeline);
    // A candidate is only measured: its parameters are never read.
    shardc::plan::PlanWriter writer;
    writer.setShapesOnly();
    if (failed(pm.run(*copy)) ||
        failed(shardc::emitPlan(*copy, /*params=*/{}, writer)))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     errors.empty() ? "the pipeline failed"
                                                    : errors);
    if (llvm::Error err = writer.validate())
      return err;
    shardc::plan::MemoryPlan memory = shardc::plan::planMemory(writer.plan());
    return shardc::BudgetEstimate{
        memory.peakTotal,
        shardc::plan::estimateStep(writer.plan(), machine).seconds};
  };
  llvm::errs() << "shardc: --memory-budget: cost model " << machine.describe()
               << "\n";
  llvm::Expected<shardc::BudgetChoice> chosen =
      shardc::chooseForBudget(budget, space, evaluate, llvm::errs());
  if (!chosen)
    return chosen.takeError();
  chosen->apply(space, pipeline);
  return llvm::Error::success();
}

/// The cost model's machine: the CPU backend's defaults, then --hardware,
/// then --cost-model (`overrides`), then --flops, --bandwidth, --latency.
static llvm::Expected<shardc::plan::MachineModel>
configureMachine(llvm::StringRef overrides) {
  shardc::plan::MachineModel machine = shardc::plan::MachineModel::cpu();
  if (hardwarePath.getNumOccurrences())
    if (llvm::Error err = machine.parseFile(hardwarePath))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--hardware: " +
                                         llvm::toString(std::move(err)));
  if (llvm::Error err = machine.parseOverrides(overrides))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--cost-model: " +
                                       llvm::toString(std::move(err)));
  // Each flag is one key of the model.
  struct Flag {
    cl::opt<double> &flag;
    const char *key;
  };
  const Flag flags[] = {
      {flopsRate, "flops"}, {bandwidth, "link"}, {latency, "link-latency"}};
  for (const Flag &f : flags) {
    if (!f.flag.getNumOccurrences())
      continue;
    double v = f.flag;
    if (!std::isfinite(v) || v <= 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("--{0} takes a positive number, got {1}", f.flag.ArgStr,
                        llvm::format("%g", v))
              .str());
    if (llvm::Error err = machine.parseOverrides(
            llvm::formatv("{0}={1}", f.key, llvm::format("%.17g", v)).str()))
      return err;
  }
  return machine;
}

/// --simulate's report: the predicted step of `plan` on `machine`.
static void printSimulation(const shardc::plan::Plan &plan,
                            const shardc::plan::StepCost &cost,
                            const shardc::plan::MemoryPlan &memory,
                            const shardc::plan::MachineModel &machine,
                            llvm::raw_ostream &os) {
  int64_t ranks = std::max<int64_t>(plan.world_size(), 1);
  os << "simulated step of " << inputPath << " at " << ranks
     << (ranks == 1 ? " rank" : " ranks");
  if (plan.zero_stage() > 0 || ranks > 1)
    os << ", ZeRO stage " << plan.zero_stage();
  os << "\n  machine:       " << machine.describe()
     << (hardwarePath.empty() ? std::string()
                              : " (" + hardwarePath.getValue() + ")")
     << "\n";
  double hidden = cost.commSeconds > 0
                      ? 100.0 * (1.0 - cost.commWaitSeconds / cost.commSeconds)
                      : 100.0;
  os << llvm::formatv("  step:          {0:e3} s per rank\n", cost.seconds);
  os << llvm::formatv("  compute:       {0:e3} s in {1} kernels (recompute "
                      "{2:e3} s; {3:f2}x for sharing a host",
                      cost.computeSeconds, cost.kernels, cost.recomputeSeconds,
                      cost.computeSlowdown);
  if (cost.commCpuSeconds > 0)
    os << llvm::formatv("; {0:e3} s of collectives' copies",
                        cost.commCpuSeconds);
  os << ")\n";
  os << llvm::formatv("  collectives:   {0:e3} s on the links, {1:e3} s "
                      "exposed ({2:f1}% hidden), {3} sent per rank\n",
                      cost.commSeconds, cost.commWaitSeconds, hidden,
                      shardc::formatBytes(cost.sentBytes));
  if (cost.tierBytes)
    os << llvm::formatv("  offload tier:  {0:e3} s, {1:e3} s exposed, {2} "
                        "moved\n",
                        cost.tierSeconds, cost.tierWaitSeconds,
                        shardc::formatBytes(cost.tierBytes));
  // The waits that held compute longest: what to overlap, shrink or
  // prefetch first.
  std::vector<shardc::plan::StepCost::Exposed> exposed = cost.exposed;
  llvm::stable_sort(exposed, [](const auto &a, const auto &b) {
    return a.seconds > b.seconds;
  });
  for (const auto &e : llvm::ArrayRef(exposed).take_front(5)) {
    const shardc::plan::Op &start = plan.ops(e.startOp);
    std::string what = start.type();
    if (start.inputs_size() && start.inputs(0) >= 0 &&
        start.inputs(0) < plan.buffers_size())
      what += " of '" + plan.buffers(start.inputs(0)).name() + "' (" +
              shardc::formatBytes(
                  shardc::plan::bufferBytes(plan, start.inputs(0))) +
              ")";
    os << llvm::formatv("  exposed:       {0:e3} s waiting for {1}, started "
                        "at op {2} '{3}'\n",
                        e.seconds, what, e.startOp, start.name());
  }
  std::string parts;
  for (int c = 0; c < shardc::plan::kNumCategories; ++c)
    parts += std::string(c ? ", " : "") + shardc::plan::categoryName(c) + " " +
             shardc::formatBytes(memory.peak[c]);
  os << "  peak memory:   " << shardc::formatBytes(memory.peakTotal)
     << " per rank (" << parts << ")\n";
  os << llvm::formatv("  work:          {0:e3} flop per rank per step in "
                      "matrix products and convolutions: {1:e3} flop/s "
                      "per rank\n",
                      static_cast<double>(cost.flops),
                      cost.seconds > 0 ? cost.flops / cost.seconds : 0.0);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  shardc::TrainPipelineOptions pipeline;
  using Args = llvm::ArrayRef<const char *>;
  const Args trainArgs[] = {shardc::kAutodiffOptionArgs,
                            shardc::kRecomputeOptionArgs,
                            shardc::kAccumulateGradientsOptionArgs,
                            shardc::kOptimizerOptionArgs,
                            shardc::kClipGradientsOptionArgs,
                            shardc::kMixedPrecisionOptionArgs,
                            shardc::kLossScaleOptionArgs,
                            shardc::kOffloadOptionArgs,
                            shardc::kFuseElementwiseOptionArgs};
  const Args shardArgs[] = {shardc::kZeroConfigOptionArgs,
                            shardc::kBucketGradientsOptionArgs,
                            shardc::kReduceScatterGradientsOptionArgs,
                            shardc::kWrapUnitsOptionArgs,
                            shardc::kScheduleCollectivesOptionArgs,
                            shardc::kSyncBatchNormOptionArgs};
  pipeline.addAsToolFlags(shardc::kFoldConstantsOptionArgs, shardcCategory);
  for (Args args : trainArgs)
    pipeline.addAsToolFlags(args, trainCategory);
  for (Args args : shardArgs)
    pipeline.addAsToolFlags(args, shardCategory);
  cl::HideUnrelatedOptions(
      {&shardcCategory, &trainCategory, &shardCategory, &simulateCategory});
  if (llvm::Error err = shardc::tools::checkSeparatedValues(argc, argv))
    return fail(llvm::toString(std::move(err)));
  cl::ParseCommandLineOptions(
      argc, argv,
      "shardc: compile an ONNX model into a Shard plan\n\n"
      "  shardc model.onnx -o PLAN                      forward pass\n"
      "  shardc model.onnx -o PLAN --optimizer adamw    training step\n"
      "  shardc model.onnx --emit=mlir                  show the IR\n"
      "  shardc model.onnx --optimizer adam --world-size 1024 --simulate \\\n"
      "      --hardware bench/hardware/a100-80gb-roce.hw  predict a step\n");
  if (simulate &&
      (emitKind != EmitKind::Plan || outputPath.getNumOccurrences()))
    return fail("--simulate predicts a step without writing it: drop -o and "
                "--emit (compile again without --simulate for the plan)");
  if (!simulate)
    if (llvm::Error err = checkOutputPath(
            outputPath.empty() ? (emitKind == EmitKind::Plan ? "plan" : "-")
                               : outputPath.getValue(),
            inputPath, emitKind == EmitKind::Plan))
      return fail(llvm::toString(std::move(err)));
  bool training = pipeline.optimizer.hasValue() || pipeline.loss.hasValue();
  if (!training) {
    if (printTrainable)
      return fail("--print-trainable lists what a training step trains: give "
                  "--optimizer");
    // Without a training step these flags would do nothing: say so.
    auto &flags = cl::getRegisteredOptions();
    for (Args args : llvm::concat<const Args>(trainArgs, shardArgs))
      for (const char *arg : args)
        if (flags.lookup(arg)->getNumOccurrences())
          return fail(llvm::Twine("--") + arg +
                      " configures a training step: give --optimizer (and "
                      "--loss if the model has several scalar outputs)");
  }

  llvm::Expected<shardc::plan::MachineModel> configured =
      configureMachine(pipeline.costModel);
  if (!configured)
    return fail(llvm::toString(configured.takeError()));
  shardc::plan::MachineModel machine = *configured;
  // Every reader of the machine sees the same one.
  pipeline.costModel = machine.toOverrides();
  std::optional<uint64_t> budget;
  if (memoryBudget.getNumOccurrences()) {
    if (!training)
      return fail("--memory-budget chooses how a training step is sharded "
                  "and where its state lives: give --optimizer (and "
                  "--world-size N for a sharded step)");
    budget = parseByteSize(memoryBudget);
    if (!budget || *budget == 0)
      return fail("--memory-budget expects a size in bytes with an optional "
                  "K, M, G or T suffix (e.g. 6GiB), got '" +
                  memoryBudget + "'");
  }

  if (pipeline.accumulateUnsharded &&
      (pipeline.gradAccum <= 1 || pipeline.stage < 2 || !pipeline.shards()))
    return fail("--accumulate-unsharded chooses how --zero-stage 2 or 3 "
                "accumulates gradients (stage 1 always accumulates them "
                "whole): give --grad-accum K (K > 1) and a sharded step at "
                "stage 2 or 3");
  if (pipeline.hybridShard > 0 && !pipeline.shards())
    return fail("--hybrid-shard G shards within groups of G of the job's "
                "ranks: give --world-size N (a multiple of G) and "
                "--zero-stage 1, 2 or 3");
  if (pipeline.reshardAfterForward.getValue().kind ==
          shardc::ReshardSpec::Group &&
      !pipeline.shards())
    return fail("--reshard-after-forward G keeps each unit sharded over G of "
                "the job's ranks between forward and backward: give "
                "--world-size N and --zero-stage 3");
  if (pipeline.reshardAfterForward.hasValue() && pipeline.stage.hasValue() &&
      pipeline.stage < 3)
    return fail("--reshard-after-forward decides what a --zero-stage 3 unit "
                "keeps between forward and backward; stage " +
                llvm::Twine(pipeline.stage.getValue()) +
                (pipeline.stage == 0
                     ? " keeps whole parameters on every rank"
                     : " keeps each unit gathered from forward through "
                       "backward (SHARD_GRAD_OP)") +
                ": drop it, or use --zero-stage 3");
  if (pipeline.bucketCapMb.hasValue() && pipeline.stage.hasValue() &&
      pipeline.stage > 0 && pipeline.shards())
    return fail("--bucket-cap-mb sizes the gradient all-reduce buckets of "
                "--zero-stage 0 (DDP); stage " +
                llvm::Twine(pipeline.stage.getValue()) +
                " reduce-scatters each wrap unit's gradients instead: drop "
                "it, or use --zero-stage 0");
  if (pipeline.syncBatchnorm && !pipeline.shards())
    llvm::errs() << "shardc: warning: --sync-batchnorm synchronizes BatchNorm "
                    "statistics across ranks; without --world-size the step "
                    "runs on one process, whose batch is the global batch\n";
  if (pipeline.paramDtype == shardc::Precision::Fp16 &&
      pipeline.lossScale.getValue().kind == shardc::LossScaleSpec::None)
    llvm::errs() << "shardc: warning: --param-dtype fp16 with --loss-scale "
                    "none: gradients below float16's range (6e-8) flush "
                    "to zero and large ones overflow; drop --loss-scale none "
                    "(dynamic loss scaling is fp16's default) or prefer bf16, "
                    "which has float32's range\n";
  if (pipeline.normType.hasValue() && !pipeline.maxNorm.hasValue())
    return fail("--clip-norm-type chooses the norm that --clip-grad-norm "
                "bounds: give --clip-grad-norm MAX too");

  shardc::ImportOptions options;
  options.foldLimit = pipeline.foldLimit;
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

  for (const std::string &dim : dimSizes) {
    auto [name, value] = llvm::StringRef(dim).split('=');
    int64_t size = 0;
    if (name.empty() || value.getAsInteger(10, size) || size <= 0 ||
        size > shardc::kMaxTensorElements)
      return fail("--dim expects NAME=SIZE with SIZE in [1, 2^46], got '" +
                  dim + "'");
    auto [it, inserted] = options.dims.try_emplace(name.str(), size);
    if (!inserted && it->second != size)
      return fail("--dim " + name + " is given twice, with sizes " +
                  llvm::Twine(it->second) + " and " + llvm::Twine(size));
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

  if (budget) {
    if (llvm::Error err = chooseForBudget(module, pipeline, machine, *budget))
      return fail(llvm::toString(std::move(err)));
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
    shardc::buildTrainPipeline(pm, pipeline);
  } else if (!noCleanup) {
    shardc::buildImportCleanupPipeline(
        pm, shardc::getFoldConstantsOptions(pipeline));
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
  shardc::ParamReader reader = [&](llvm::StringRef name) {
    return readInitializer(model, modelDir, name);
  };
  if (simulate) {
    // Measured only: parameters by shape, never read.
    writer.setShapesOnly();
    reader = nullptr;
  }
  if (failed(shardc::emitPlan(module, reader, writer)))
    return 1;
  // A written plan is checked by write; a simulated one here, the same way.
  if (simulate)
    if (llvm::Error err = writer.validate())
      return fail("the plan --simulate measures is invalid: " +
                  llvm::toString(std::move(err)));
  shardc::plan::MemoryPlan memory = shardc::plan::planMemory(writer.plan());
  *writer.plan().mutable_predicted_memory() =
      shardc::plan::toPrediction(memory);
  // A simulated plan runs elsewhere: only an explicit --memory-limit
  // judges it.
  if (!simulate || memoryLimit.getNumOccurrences())
    if (llvm::Error err = checkMemoryLimit(memory))
      return fail(llvm::toString(std::move(err)));
  shardc::plan::StepCost cost =
      shardc::plan::estimateStep(writer.plan(), machine);
  if (printCost)
    llvm::outs() << llvm::formatv(
        "predicted step time per rank (seconds): total={0:e3} "
        "compute={1:e3} recompute={2:e3} comm={3:e3} comm_wait={4:e3} "
        "tier={5:e3} tier_wait={6:e3} kernels={7} flops={8} "
        "kernel_bytes={9} sent_bytes={10} tier_bytes={11} machine: {12}\n",
        cost.seconds, cost.computeSeconds, cost.recomputeSeconds,
        cost.commSeconds, cost.commWaitSeconds, cost.tierSeconds,
        cost.tierWaitSeconds, cost.kernels, cost.flops, cost.kernelBytes,
        cost.sentBytes, cost.tierBytes, machine.describe());
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
                 << " largest_unit_elements=" << largest
                 << " untrained_params=" << untrainedParamBytes(writer.plan())
                 << " sent_per_step=" << cost.sentBytes
                 << " offloaded=" << memory.offloadBytes << "\n";
  }
  if (printTrainable) {
    printParameterRoles(writer.plan(), llvm::outs());
  }
  if (simulate) {
    printSimulation(writer.plan(), cost, memory, machine, llvm::outs());
    return 0;
  }
  if (training)
    for (const auto &bind : options.binds)
      writer.plan().mutable_training()->add_bound_inputs(bind.first);
  if (training) {
    // The source model rides along so shardrun --export can write it back
    // with trained initializers.
    llvm::Expected<SourceModel> source =
        serializeSourceModel(inputPath, modelDir);
    if (!source) {
      llvm::errs() << "shardc: warning: " << llvm::toString(source.takeError())
                   << "; shardrun --export will not be available\n";
    } else {
      if (llvm::Error err =
              writer.addFile(kSourceModelFile, std::move(source->model)))
        return fail(llvm::toString(std::move(err)));
      if (source->data)
        if (llvm::Error err =
                writer.addFile(kSourceDataFile, std::move(*source->data)))
          return fail(llvm::toString(std::move(err)));
      writer.plan().mutable_training()->set_source_model(kSourceModelFile);
    }
  }
  if (llvm::Error err = writer.write(planDir))
    return fail(llvm::toString(std::move(err)));
  // A previous plan's external data that this plan does not list.
  if (!writer.hasFile(kSourceDataFile)) {
    llvm::SmallString<256> stale(planDir);
    llvm::sys::path::append(stale, kSourceDataFile);
    llvm::sys::fs::remove(stale);
  }
  return 0;
}
