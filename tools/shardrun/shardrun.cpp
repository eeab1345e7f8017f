//===- shardrun.cpp - Runs a Shard plan on .npy inputs --------------------===//
//
//   shardrun PLAN_DIR --input NAME=FILE.npy ... [--output-dir DIR]
//
// Loads and validates the plan, binds every graph input from a .npy file,
// runs one step on the chosen backend (--device), prints one line per graph
// output and writes each output to DIR/<output name>.npy (or, with --data,
// trains). Every error is one line
// "shardrun: error: ..." on stderr and exit code 1.
//
//===----------------------------------------------------------------------===//
#include "plan/PlanIO.h"
#include "runtime/Backend.h"
#include "runtime/Checkpoint.h"
#include "runtime/Device.h"
#include "runtime/Executor.h"
#include "runtime/Npy.h"
#include "runtime/TraceStats.h"
#include "runtime/Trainer.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Progress.h"
#include "runtime/comm/RankGuard.h"
#include "runtime/kernels/CastOps.h"
#include "tools/CommandLine.h"
#include "tools/shardrun/Launcher.h"

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VecMath.h"
#include <google/protobuf/stubs/common.h>
#include <google/protobuf/stubs/logging.h>

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace shardc;
namespace cl = llvm::cl;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

static cl::OptionCategory shardrunCategory("shardrun options");

static cl::opt<std::string> planDir(cl::Positional, cl::Optional,
                                    cl::desc("<plan directory>"),
                                    cl::cat(shardrunCategory));

static cl::list<std::string>
    inputSpecs("input", cl::desc("Bind graph input NAME to a .npy file"),
               cl::value_desc("NAME=FILE.npy"), cl::cat(shardrunCategory));
static cl::alias inputAlias("i", cl::desc("Alias for --input"),
                            cl::aliasopt(inputSpecs),
                            cl::cat(shardrunCategory));

static cl::opt<std::string>
    outputDir("output-dir",
              cl::desc("Write each graph output to DIR/<name>.npy (created "
                       "if needed); without it outputs are only printed"),
              cl::value_desc("DIR"), cl::cat(shardrunCategory));

static cl::opt<unsigned>
    printCount("print-values",
               cl::desc("How many leading values of each output to print"),
               cl::init(6), cl::cat(shardrunCategory));

static cl::opt<uint64_t>
    seed("seed",
         cl::desc("Seed of the dropout masks (default 0). A mask is a "
                  "function of the seed, the step, the sample and the "
                  "dropout site, whatever the number of ranks"),
         cl::init(0), cl::value_desc("S"), cl::cat(shardrunCategory));

static cl::opt<bool> profileOps("profile",
                                cl::desc("Print per-op wall time to stderr"),
                                cl::init(false), cl::cat(shardrunCategory));

static cl::OptionCategory
    trainCategory("training (for plans compiled with shardc --optimizer)");
static cl::opt<std::string>
    dataDir("data",
            cl::desc("Train on DIR/<input>.npy (first axis = samples); step "
                     "s on rank r of N uses samples [(s*N+r)*B, (s*N+r+1)*B), "
                     "wrapping around"),
            cl::value_desc("DIR"), cl::cat(trainCategory));
static cl::opt<int64_t>
    steps("steps",
          cl::desc("Train until global step S (default 1): S steps, or with "
                   "--resume the steps after the checkpoint's (none when S "
                   "is at or below it)"),
          cl::init(1), cl::value_desc("S"), cl::cat(trainCategory));

static cl::opt<std::string> offloadDir(
    "offload-dir",
    cl::desc("Where each rank keeps the buffers the plan offloads (shardc "
             "--offload) on the CPU: one file per rank, DIR/rank-R.offload, "
             "given its space before the first step and unlinked once open "
             "(it goes with the process); a directory on a fast local disk. "
             "On a GPU the tier is pinned host memory and DIR is not used"),
    cl::value_desc("DIR"), cl::cat(trainCategory));

static cl::OptionCategory
    checkpointCategory("checkpoints (docs/checkpoints.md)");
static cl::opt<std::string> checkpointDir(
    "checkpoint-dir",
    cl::desc("Save checkpoints as DIR/step-N: every rank its own shard, "
             "written in the background, complete once DIR/step-N/manifest "
             "exists; the last step is always saved"),
    cl::value_desc("DIR"), cl::cat(checkpointCategory));
static cl::opt<int64_t> checkpointEvery(
    "checkpoint-every",
    cl::desc("With --checkpoint-dir: save after every K-th step (default 0: "
             "only after the last)"),
    cl::init(0), cl::value_desc("K"), cl::cat(checkpointCategory));
static cl::opt<int64_t> keepLast(
    "keep-last",
    cl::desc("With --checkpoint-dir: keep only the newest M complete "
             "checkpoints (default 0: all); the newest is never deleted"),
    cl::init(0), cl::value_desc("M"), cl::cat(checkpointCategory));
static cl::opt<std::string> resumePath(
    "resume",
    cl::desc("Start from a checkpoint: DIR/step-N, or DIR for its newest "
             "complete one. It may come from any world size and ZeRO stage "
             "of the same model and optimizer; the step numbering, the data "
             "order and --log go on"),
    cl::value_desc("DIR"), cl::cat(checkpointCategory));
static cl::opt<bool> autoResume(
    "auto-resume",
    cl::desc("With --checkpoint-dir: resume from its newest complete "
             "checkpoint when it has one, else start at step 1 (a job that a "
             "scheduler restarts runs the same command line every time)"),
    cl::init(false), cl::cat(checkpointCategory));
static cl::opt<std::string>
    logPath("log", cl::desc("Write one JSON line per step to FILE"),
            cl::value_desc("FILE"), cl::cat(trainCategory));
static cl::opt<std::string> exportPath(
    "export",
    cl::desc("After training, write the source ONNX model with the trained "
             "parameters to FILE"),
    cl::value_desc("FILE.onnx"), cl::cat(trainCategory));
static cl::opt<rt::ExportData> exportData(
    "export-data",
    cl::desc("Where --export puts the initializers' data (default auto)"),
    cl::init(rt::ExportData::Auto),
    cl::values(
        clEnumValN(rt::ExportData::Auto, "auto",
                   "as the source model did: external data if it had any"),
        clEnumValN(rt::ExportData::Inline, "inline",
                   "in the ONNX file (which must stay under 2 GiB)"),
        clEnumValN(rt::ExportData::External, "external",
                   "ONNX external data: initializers of 1 KiB or more in "
                   "FILE.data beside FILE (models over 2 GiB)")),
    cl::cat(trainCategory));
enum class ProgressMode { Auto, On, Off };
static cl::opt<ProgressMode>
    progressMode("progress",
                 cl::desc("Progress line on stderr (default: on a terminal)"),
                 cl::init(ProgressMode::Auto),
                 cl::values(clEnumValN(ProgressMode::Auto, "auto",
                                       "when stderr is a terminal"),
                            clEnumValN(ProgressMode::On, "on", "always"),
                            clEnumValN(ProgressMode::Off, "off", "never")),
                 cl::cat(trainCategory));

static cl::opt<rt::DeviceKind> deviceKind(
    "device", cl::desc("Where every rank runs its kernels (default cpu)"),
    cl::init(rt::DeviceKind::Cpu),
    cl::values(clEnumValN(rt::DeviceKind::Cpu, "cpu", "the CPU"),
               clEnumValN(rt::DeviceKind::Cuda, "cuda",
                          "a CUDA GPU per rank (local rank modulo the visible "
                          "GPUs); an error when there is none"),
               clEnumValN(rt::DeviceKind::Auto, "auto",
                          "cuda when a GPU is visible, else cpu")),
    cl::cat(shardrunCategory));

static cl::opt<bool> tf32(
    "tf32",
    cl::desc("With --device cuda: float32 matrix products and convolutions "
             "on TF32 tensor cores (faster; inputs rounded to 10-bit "
             "mantissas, so results no longer match the CPU's to float32 "
             "rounding)"),
    cl::init(false), cl::cat(shardrunCategory));

static cl::opt<bool> cudnn(
    "cudnn",
    cl::desc("With --device cuda: Conv and BatchNorm through cuDNN where it "
             "takes their operands (default); --cudnn=false runs Shard's own "
             "kernels for them"),
    cl::init(true), cl::cat(shardrunCategory));

static rt::DeviceOptions deviceOptions() {
  rt::DeviceOptions options;
  options.tf32 = tf32;
  options.cudnn = cudnn;
  return options;
}

static cl::OptionCategory distCategory("ranks, memory and tracing");
static cl::opt<int> nproc(
    "nproc",
    cl::desc("Start N local ranks through mpirun (default: the plan's world "
             "size); under an existing mpirun or srun launch each process is "
             "one rank"),
    cl::init(0), cl::cat(distCategory));
/// More threads than any host has cores: beyond it a typo, not a choice.
static constexpr int kMaxCpuThreads = 4096;
static cl::opt<int> kernelThreads(
    "cpu-threads",
    cl::desc("Threads of each rank's CPU matrix products (default: the CPUs "
             "a rank may run on, divided among the ranks of its host that "
             "may run on them too; OMP_NUM_THREADS or OPENBLAS_NUM_THREADS "
             "when set)"),
    cl::init(0), cl::value_desc("N"), cl::cat(distCategory));
/// Ten minutes: longer than any wait a healthy job has at a collective (a
/// rank loading a large plan or writing an export while the others wait,
/// skew between ranks), the default of PyTorch's NCCL watchdog, and short
/// enough that a hung job gives its allocation back within a fraction of a
/// scheduler slot.
static constexpr double kDefaultCollectiveTimeout = 600;
static cl::opt<double> collectiveTimeout(
    "collective-timeout",
    cl::desc("End the job when a collective has waited this long for a rank "
             "that does not arrive (stopped, hung, its host down), with an "
             "error naming the rank and the step and op; 0 disables it "
             "(default 600)"),
    cl::init(kDefaultCollectiveTimeout), cl::value_desc("SECONDS"),
    cl::cat(distCategory));
static cl::opt<bool> showMemory(
    "report-memory",
    cl::desc("Print each rank's peak bytes of parameters, gradients, "
             "optimizer state, activations and communication buffers, "
             "measured and predicted"),
    cl::cat(distCategory));
static cl::opt<bool> noMemoryCheck(
    "no-memory-check",
    cl::desc("Start even when a host has less memory available than its "
             "ranks' predicted peak plus the data set"),
    cl::cat(distCategory));
static cl::opt<std::string> tracePath(
    "trace",
    cl::desc("Write a Chrome/Perfetto trace of every step, kernel and "
             "collective on every rank, and print the share of the steps' "
             "collective time that kernels hid"),
    cl::value_desc("trace.json"), cl::cat(distCategory));

/// Set once training steps begin (errors after it may be one rank's alone).
static bool stepsStarted = false;

static Error makeError(const Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// An output name as a file name: characters outside [A-Za-z0-9._-] become
/// '_'.
static std::string sanitizeFileName(StringRef name) {
  std::string s;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    s += ok ? c : '_';
  }
  return s;
}

/// Element `i` of `t` as a double.
static double elementAt(const rt::TensorView &t, int64_t i) {
  const char *p = static_cast<const char *>(t.data);
  auto load = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p + i * sizeof v, sizeof v);
    return v;
  };
  switch (t.dtype) {
  case rt::DType::F32:
    return load(float());
  case rt::DType::F64:
    return load(double());
  case rt::DType::F16:
    return rt::ops::halfToFloat(load(uint16_t()));
  case rt::DType::BF16:
    return rt::ops::bfloat16ToFloat(load(uint16_t()));
  case rt::DType::I64:
    return static_cast<double>(load(int64_t()));
  case rt::DType::I32:
    return load(int32_t());
  case rt::DType::I8:
    return load(int8_t());
  case rt::DType::U8:
  case rt::DType::Bool:
    return load(uint8_t());
  case rt::DType::Undefined:
    break;
  }
  return 0.0;
}

static bool isFloat(rt::DType t) {
  return t == rt::DType::F32 || t == rt::DType::F64 || t == rt::DType::F16 ||
         t == rt::DType::BF16;
}

static void printValue(llvm::raw_ostream &os, rt::DType dtype, double v) {
  if (dtype == rt::DType::Bool)
    os << (v != 0 ? "true" : "false");
  else if (isFloat(dtype))
    os << llvm::format("%.6g", v);
  else
    os << static_cast<int64_t>(v);
}

/// "logits: float32 [2, 3] [0.1, 0.2, ...] min -1 max 2 mean 0.5".
static void printSummary(llvm::raw_ostream &os, StringRef name,
                         const rt::TensorView &t) {
  os << name << ": " << rt::dtypeName(t.dtype) << " "
     << rt::shapeToString(t.shape);
  int64_t n = t.numel();
  if (n == 0 || !t.data) {
    os << " (empty)";
    return;
  }
  os << " [";
  int64_t shown = std::min<int64_t>(n, printCount);
  for (int64_t i = 0; i < shown; ++i) {
    if (i)
      os << ", ";
    printValue(os, t.dtype, elementAt(t, i));
  }
  if (shown < n)
    os << (shown ? ", ..." : "...");
  os << "]";
  if (n == 1 || t.dtype == rt::DType::Bool)
    return;
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = elementAt(t, i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  if (nans == n) {
    os << " all nan";
    return;
  }
  os << " min ";
  printValue(os, t.dtype, lo);
  os << " max ";
  printValue(os, t.dtype, hi);
  os << " mean " << llvm::format("%.6g", sum / double(n - nans));
  if (nans)
    os << " (" << nans << " nan)";
}

static std::string describeInputs(const rt::Executor &exec) {
  if (exec.numInputs() == 0)
    return "the plan has no inputs";
  std::string s = "the plan's inputs are: ";
  for (size_t i = 0; i < exec.numInputs(); ++i) {
    if (i)
      s += ", ";
    s += exec.inputInfo(i).name + " (" + exec.inputInfo(i).typeString() + ")";
  }
  return s;
}

static std::optional<int> readPlanWorldSize(StringRef dir);

/// Gathers one string from every rank (each capped at 1 KiB).
static Expected<std::vector<std::string>> gatherStrings(rt::Communicator &comm,
                                                        std::string mine) {
  mine.resize(std::min<size_t>(mine.size(), 1024));
  int64_t len = mine.size();
  std::vector<int64_t> lens(comm.worldSize());
  if (Error err = comm.allGather(&len, lens.data(), 1, rt::DType::I64))
    return std::move(err);
  int64_t maxLen = 0;
  for (int64_t l : lens)
    maxLen = std::max(maxLen, std::clamp<int64_t>(l, 0, 1024));
  std::vector<std::string> out(comm.worldSize());
  if (maxLen == 0)
    return out;
  mine.resize(maxLen, '\0');
  std::vector<char> all(maxLen * comm.worldSize());
  if (Error err =
          comm.allGather(mine.data(), all.data(), maxLen, rt::DType::U8))
    return std::move(err);
  for (int r = 0; r < comm.worldSize(); ++r)
    out[r].assign(&all[r * maxLen], std::clamp<int64_t>(lens[r], 0, maxLen));
  return out;
}

/// Every rank loads the plan, then all ranks compare what they loaded
/// (success, world size, and a digest of every part of the plan) before
/// anything else: a rank that failed or runs a plan that would compute
/// differently stops every rank with an error naming both ranks and what
/// differs, never a hang or a silently different run. Every rank decides
/// from the same gathered values, so all take the same collectives.
static Expected<std::unique_ptr<plan::LoadedPlan>>
loadAndAgree(rt::Communicator &comm) {
  std::vector<StringRef> knownOpTypes;
  for (const auto &entry : rt::cpu::kernelTable())
    knownOpTypes.push_back(entry.first);
  for (StringRef type : rt::Executor::collectiveOpTypes())
    knownOpTypes.push_back(type);
  if (comm.worldSize() > 1) {
    // First agree on the world size, before any rank reads its shard. A
    // rank that cannot read it (0) goes on to loading, which says why.
    int64_t planWorld = readPlanWorldSize(planDir).value_or(0);
    std::vector<int64_t> worlds(comm.worldSize());
    if (Error err =
            comm.allGather(&planWorld, worlds.data(), 1, rt::DType::I64))
      return std::move(err);
    for (int r = 0; r < comm.worldSize(); ++r)
      if (worlds[r] != 0 && worlds[r] != comm.worldSize())
        return makeError("the plan in " + planDir + " (on rank " + Twine(r) +
                         ") was compiled for " + Twine(worlds[r]) +
                         " rank(s), but " + Twine(comm.worldSize()) +
                         " are running; recompile with shardc --world-size " +
                         Twine(comm.worldSize()) + " or start " +
                         Twine(worlds[r]) + " ranks");
  }
  Expected<std::unique_ptr<plan::LoadedPlan>> loaded =
      plan::loadPlan(planDir, knownOpTypes, comm.rank());
  if (comm.worldSize() == 1)
    return loaded;
  constexpr int kParts = plan::PlanDigest::NumParts;
  constexpr int kInfo = 2 + kParts;
  std::string mine;
  int64_t info[kInfo] = {};
  if (loaded) {
    info[0] = 1;
    info[1] = std::max<int64_t>(1, (*loaded)->plan.world_size());
    plan::PlanDigest digest = plan::digestPlan(**loaded);
    std::memcpy(&info[2], digest.parts.data(), sizeof(int64_t) * kParts);
  } else {
    mine = toString(loaded.takeError());
  }
  std::vector<int64_t> all(kInfo * comm.worldSize());
  if (Error err = comm.allGather(info, all.data(), kInfo, rt::DType::I64))
    return std::move(err);
  if (!mine.empty())
    return makeError(mine); // the caller names the rank
  for (int r = 0; r < comm.worldSize(); ++r)
    if (all[kInfo * r] == 0)
      return makeError("rank " + Twine(r) +
                       " could not load the plan (see its error)");
  for (int r = 0; r < comm.worldSize(); ++r)
    if (all[kInfo * r + 1] != comm.worldSize())
      return makeError("the plan in " + planDir + " was compiled for " +
                       Twine(all[kInfo * r + 1]) + " rank(s), but " +
                       Twine(comm.worldSize()) +
                       " are running; recompile with shardc --world-size " +
                       Twine(comm.worldSize()) + " or start " +
                       Twine(all[kInfo * r + 1]) + " ranks");
  // Every rank against rank 0: the first that differs is named.
  auto part = [&](int r, int p) { return all[kInfo * r + 2 + p]; };
  for (int r = 1; r < comm.worldSize(); ++r) {
    std::vector<int> differing;
    for (int p = plan::PlanDigest::Whole + 1; p < kParts; ++p)
      if (part(r, p) != part(0, p))
        differing.push_back(p);
    if (differing.empty() &&
        part(r, plan::PlanDigest::Whole) == part(0, plan::PlanDigest::Whole))
      continue;
    if (differing.empty())
      differing.push_back(plan::PlanDigest::Whole);
    // The hyper-parameters themselves, from both ranks.
    std::string hyper;
    if (llvm::is_contained(differing, plan::PlanDigest::HyperParameters)) {
      Expected<std::vector<std::string>> all =
          gatherStrings(comm, plan::describeHyperParameters((*loaded)->plan));
      if (!all)
        return all.takeError();
      hyper = " (rank 0: " + (*all)[0] + "; rank " + std::to_string(r) + ": " +
              (*all)[r] + ")";
    }
    std::string what;
    for (int p : differing) {
      what += (what.empty() ? "" : ", ") +
              plan::planPartName(static_cast<plan::PlanDigest::Part>(p)).str();
      if (p == plan::PlanDigest::HyperParameters)
        what += hyper;
    }
    return makeError("ranks 0 and " + Twine(r) +
                     " run different plans: " + what +
                     " differ; every rank must run the same plan (compile "
                     "once and give every rank a copy of that plan "
                     "directory)");
  }
  return loaded;
}

/// Rank 0 prints, per rank, measured and predicted peak memory.
static Error reportMemory(rt::Communicator &comm, const rt::Executor &exec,
                          const plan::Plan &p) {
  const int n = plan::kNumCategories + 1;
  std::vector<int64_t> mine(2 * n);
  const rt::MemoryUsage &u = exec.memoryUsage();
  const plan::MemoryPrediction &pr = p.predicted_memory();
  int64_t predicted[n] = {pr.activations(), pr.params(), pr.grads(),
                          pr.opt_state(),   pr.comm(),   pr.total()};
  for (int c = 0; c < plan::kNumCategories; ++c)
    mine[c] = u.peak[c];
  mine[plan::kNumCategories] = u.peakTotal;
  for (int c = 0; c < n; ++c)
    mine[n + c] = predicted[c];
  std::vector<int64_t> all(mine.size() * comm.worldSize());
  if (Error err =
          comm.allGather(mine.data(), all.data(), mine.size(), rt::DType::I64))
    return err;
  if (comm.rank() != 0)
    return Error::success();
  auto &os = llvm::outs();
  os << "peak memory per rank in bytes, live buffers measured by the "
        "executor (predicted by shardc):\n";
  os << llvm::left_justify("rank", 5);
  for (int c = 0; c < plan::kNumCategories; ++c)
    os << " " << llvm::right_justify(plan::categoryName(c), 25);
  os << " " << llvm::right_justify("total", 25) << "\n";
  for (int r = 0; r < comm.worldSize(); ++r) {
    const int64_t *row = &all[r * mine.size()];
    os << llvm::left_justify(std::to_string(r), 5);
    for (int c = 0; c < n; ++c)
      os << llvm::format(" %11lld (%11lld)", (long long)row[c],
                         (long long)row[n + c]);
    os << "\n";
  }
  os << "arena: " << u.arenaBytes << " bytes per rank, allocated once on the "
     << exec.kernelBackend().name()
     << " backend (the peak total plus alignment and fragmentation)\n";
  os.flush();
  return Error::success();
}

/// Writes a Chrome/Perfetto trace of every rank's kernels (tid 0) and
/// collectives (tid 1: the communication thread), gathered on rank 0.
/// The trace's overlap line: the ranks' collective time in the training
/// steps, the share that kernels hid, and the rank that hid the least. `stats`
/// holds each rank's collective and exposed microseconds (rt::OverlapStats).
static void printOverlap(llvm::ArrayRef<double> stats) {
  int ranks = static_cast<int>(stats.size() / 2);
  rt::OverlapStats all;
  int worst = 0;
  double worstHidden = 2;
  for (int r = 0; r < ranks; ++r) {
    rt::OverlapStats one{stats[2 * r], stats[2 * r + 1]};
    all.collectiveUs += one.collectiveUs;
    all.exposedUs += one.exposedUs;
    if (one.hiddenFraction() < worstHidden) {
      worstHidden = one.hiddenFraction();
      worst = r;
    }
  }
  llvm::outs() << llvm::format(
      "trace: the steps' collectives in flight %.1f ms per rank, %.1f %% of "
      "it hidden behind kernels (%.1f ms exposed per rank)",
      all.collectiveUs / ranks / 1e3, 100 * all.hiddenFraction(),
      all.exposedUs / ranks / 1e3);
  if (ranks > 1)
    llvm::outs() << llvm::format("; least hidden: rank %d, %.1f %%", worst,
                                 100 * worstHidden);
  llvm::outs() << "\n";
}

static Error writeTrace(rt::Communicator &comm, const rt::Executor &exec,
                        StringRef path) {
  std::string json;
  llvm::raw_string_ostream os(json);
  int r = comm.rank();
  bool first = true;
  auto event = [&](StringRef name, StringRef cat, int tid, double ts,
                   double dur, StringRef args = "") {
    if (!first)
      os << ",\n";
    first = false;
    os << "{\"name\": \"";
    for (char c : name)
      os << (c == '"' || c == '\\' ? '\'' : c);
    os << "\", \"cat\": \"" << cat
       << "\", \"ph\": \"X\", \"ts\": " << llvm::format("%.3f", ts)
       << ", \"dur\": " << llvm::format("%.3f", dur) << ", \"pid\": " << r
       << ", \"tid\": " << tid;
    if (!args.empty())
      os << ", \"args\": {" << args << "}";
    os << "}";
  };
  std::vector<rt::Interval> kernels, collectives;
  // The overlap counts the collectives that the training steps started:
  // not the start-up checks before the first step, in which a rank waits
  // for the others to load the plan.
  double stepsFrom = HUGE_VAL, stepsTo = -HUGE_VAL;
  for (const rt::TraceEvent &e : exec.traceEvents()) {
    event(e.name, e.category, 0, e.startUs, e.durationUs);
    if (e.category == "kernel" || e.category == "recompute")
      kernels.push_back({e.startUs, e.startUs + e.durationUs});
    if (e.category == "step") {
      stepsFrom = std::min(stepsFrom, e.startUs);
      stepsTo = std::max(stepsTo, e.startUs + e.durationUs);
    }
  }
  if (stepsFrom > stepsTo) { // no steps (one forward): count them all
    stepsFrom = -HUGE_VAL;
    stepsTo = HUGE_VAL;
  }
  // A collective of a rank group (hybrid sharding) names its group; args
  // carry the bytes (nccl-tests' convention) and the ranks it spanned.
  for (const rt::CollectiveRecord &c : comm.takeRecords()) {
    if (c.startUs >= stepsFrom && c.startUs < stepsTo)
      collectives.push_back({c.startUs, c.endUs});
    std::string name = c.kind + " " + std::to_string(c.bytes) + " B";
    if (!c.group.empty())
      name += " (" + c.group + ")";
    std::string args = "\"bytes\": " + std::to_string(c.bytes) +
                       ", \"ranks\": " + std::to_string(c.ranks) +
                       ", \"group\": \"" + c.group + "\"";
    event(name, "communication", 1, c.startUs, c.endUs - c.startUs, args);
  }
  os.flush();
  rt::OverlapStats overlap = rt::overlapStats(kernels, collectives);
  double mine[2] = {overlap.collectiveUs, overlap.exposedUs};
  std::vector<double> everyone(2 * comm.worldSize());
  if (Error err = comm.allGather(mine, everyone.data(), 2, rt::DType::F64))
    return err;
  int64_t len = json.size();
  std::vector<int64_t> lens(comm.worldSize());
  if (Error err = comm.allGather(&len, lens.data(), 1, rt::DType::I64))
    return err;
  int64_t maxLen = *std::max_element(lens.begin(), lens.end());
  json.resize(maxLen, ' ');
  std::vector<char> all(maxLen * comm.worldSize());
  if (maxLen)
    if (Error err =
            comm.allGather(json.data(), all.data(), maxLen, rt::DType::U8))
      return err;
  if (r != 0)
    return Error::success();
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (ec)
    return makeError("cannot write --trace " + path + ": " + ec.message());
  out << "{\"traceEvents\": [\n";
  bool any = false;
  for (int k = 0; k < comm.worldSize(); ++k) {
    StringRef part(&all[k * maxLen], lens[k]);
    if (part.empty())
      continue;
    if (any)
      out << ",\n";
    out << part;
    any = true;
  }
  out << "\n], \"displayTimeUnit\": \"ms\"}\n";
  printOverlap(everyone);
  return Error::success();
}

/// Whether `a` and `b` name the same existing file or directory.
static bool sameFile(StringRef a, StringRef b) {
  bool same = false;
  return !llvm::sys::fs::equivalent(a, b, same) && same;
}

/// Outputs never overwrite inputs: no output file lands in the plan
/// directory or the data directory, on an --input file or on another
/// output, and --output-dir is neither the plan nor the data directory.
static Error checkOutputPaths() {
  // The directory an output file would be created in.
  auto parentOf = [](StringRef file) {
    StringRef parent = llvm::sys::path::parent_path(file);
    return parent.empty() ? std::string(".") : parent.str();
  };
  struct Output {
    const char *flag;
    std::string path;
  };
  std::vector<Output> files;
  if (!logPath.empty())
    files.push_back({"--log", logPath});
  if (!exportPath.empty()) {
    files.push_back({"--export", exportPath});
    files.push_back({"--export's external data", exportPath + ".data"});
  }
  if (exportData.getNumOccurrences() && exportPath.empty())
    return makeError("--export-data says how --export writes: give --export "
                     "FILE.onnx");
  if (!tracePath.empty())
    files.push_back({"--trace", tracePath});
  for (const Output &out : files) {
    // Found now, not after the last step.
    if (!llvm::sys::fs::is_directory(parentOf(out.path)))
      return makeError(Twine(out.flag) + " " + out.path + ": the directory " +
                       parentOf(out.path) + " does not exist; create it first");
    if (sameFile(out.path, planDir) || sameFile(parentOf(out.path), planDir))
      return makeError(Twine(out.flag) + " " + out.path +
                       " would write into the plan directory " + planDir +
                       "; write it elsewhere");
    if (!dataDir.empty() &&
        (sameFile(out.path, dataDir) || sameFile(parentOf(out.path), dataDir)))
      return makeError(Twine(out.flag) + " " + out.path +
                       " would write into the data directory " + dataDir +
                       "; write it elsewhere");
    for (const std::string &spec : inputSpecs) {
      StringRef file = StringRef(spec).split('=').second;
      if (!file.empty() && sameFile(out.path, file))
        return makeError(Twine(out.flag) + " " + out.path +
                         " would overwrite the input " + file);
    }
    for (const Output &other : files)
      if (&other != &out &&
          (other.path == out.path || sameFile(other.path, out.path)))
        return makeError(Twine(out.flag) + " and " + other.flag +
                         " name the same file " + out.path);
  }
  if (!outputDir.empty()) {
    if (sameFile(outputDir, planDir))
      return makeError("--output-dir " + outputDir +
                       " is the plan directory; write outputs elsewhere");
    if (!dataDir.empty() && sameFile(outputDir, dataDir))
      return makeError("--output-dir " + outputDir +
                       " is the data directory; write outputs elsewhere");
    for (const std::string &spec : inputSpecs) {
      StringRef file = StringRef(spec).split('=').second;
      if (!file.empty() && sameFile(parentOf(file), outputDir))
        return makeError("--output-dir " + outputDir + " holds the input " +
                         file +
                         ", which an output of the same name would "
                         "overwrite; write outputs elsewhere");
    }
  }
  return Error::success();
}

/// This machine's available memory (MemAvailable in /proc/meminfo), or 0
/// when it cannot be read.
static uint64_t availableMemoryBytes() {
  auto buf = llvm::MemoryBuffer::getFileAsStream("/proc/meminfo");
  if (!buf)
    return 0;
  llvm::SmallVector<StringRef> lines;
  (*buf)->getBuffer().split(lines, '\n');
  for (StringRef line : lines) {
    if (!line.consume_front("MemAvailable:"))
      continue;
    line = line.trim();
    uint64_t kib = 0;
    if (!line.consume_back("kB") || line.trim().getAsInteger(10, kib))
      return 0;
    return kib * 1024;
  }
  return 0;
}

/// Before the step allocates anything: the ranks on each host need their
/// predicted peak plus their copy of the data set, and the host must have
/// that much available. Every rank learns every host's numbers, so all stop
/// together with the same error naming the host's first rank.
static Error checkMemoryAvailable(rt::Communicator &comm, const plan::Plan &p) {
  if (noMemoryCheck || !p.has_predicted_memory())
    return Error::success();
  uint64_t need = p.predicted_memory().total();
  if (!dataDir.empty())
    for (const plan::Buffer &b : p.buffers())
      if (b.kind() == plan::INPUT) {
        llvm::SmallString<256> path(dataDir);
        llvm::sys::path::append(path, b.name() + ".npy");
        uint64_t size = 0;
        if (!llvm::sys::fs::file_size(path, size))
          need += size;
      }
  int64_t mine[3] = {static_cast<int64_t>(rt::hostKey()),
                     static_cast<int64_t>(need),
                     static_cast<int64_t>(availableMemoryBytes())};
  int n = comm.worldSize();
  std::vector<int64_t> all(mine, mine + 3);
  if (n > 1) {
    all.resize(3 * n);
    if (Error err = comm.allGather(mine, all.data(), 3, rt::DType::I64))
      return err;
  }
  for (int r = 0; r < n; ++r) {
    uint64_t available = static_cast<uint64_t>(all[3 * r + 2]);
    if (available == 0)
      continue;
    uint64_t hostNeed = 0;
    int local = 0, first = r;
    for (int q = 0; q < n; ++q)
      if (all[3 * q] == all[3 * r]) {
        hostNeed += static_cast<uint64_t>(all[3 * q + 1]);
        first = std::min(first, q);
        ++local;
      }
    if (hostNeed <= available)
      continue;
    auto gib = [](uint64_t b) {
      return llvm::formatv("{0:f2} GiB", double(b) / double(1ull << 30)).str();
    };
    return makeError(
        "not enough memory on the host of rank " + Twine(first) + ": its " +
        Twine(local) + " rank(s) need " + gib(hostNeed) +
        " (the plan's predicted peak per rank plus the data set) and " +
        gib(available) +
        " is available. Run fewer ranks per host, recompile with a smaller "
        "batch or a higher --zero-stage, or pass --no-memory-check to try "
        "anyway");
  }
  return Error::success();
}

/// The checkpoint flags make sense together.
static Error checkCheckpointFlags() {
  if (checkpointEvery < 0)
    return makeError("--checkpoint-every must be >= 0 (0: only after the "
                     "last step), got " +
                     Twine(checkpointEvery));
  if (keepLast < 0)
    return makeError("--keep-last must be >= 0 (0: keep all), got " +
                     Twine(keepLast));
  if (checkpointDir.empty() &&
      (checkpointEvery.getNumOccurrences() || keepLast.getNumOccurrences()))
    return makeError(Twine(checkpointEvery.getNumOccurrences()
                               ? "--checkpoint-every"
                               : "--keep-last") +
                     " needs --checkpoint-dir DIR");
  if (autoResume && checkpointDir.empty())
    return makeError("--auto-resume resumes from --checkpoint-dir: give "
                     "--checkpoint-dir DIR");
  if (autoResume && !resumePath.empty())
    return makeError("--auto-resume and --resume are exclusive: --auto-resume "
                     "takes the newest checkpoint in --checkpoint-dir");
  if (steps < 0)
    return makeError("--steps must be >= 0");
  if (!checkpointDir.empty() && dataDir.empty() && resumePath.empty())
    return makeError("--checkpoint-dir saves a training run: give --data DIR");
  if (!checkpointDir.empty()) {
    if (sameFile(checkpointDir, planDir))
      return makeError("--checkpoint-dir " + checkpointDir +
                       " is the plan directory; save checkpoints elsewhere");
    if (!dataDir.empty() && sameFile(checkpointDir, dataDir))
      return makeError("--checkpoint-dir " + checkpointDir +
                       " is the data directory; save checkpoints elsewhere");
  }
  return Error::success();
}

/// --auto-resume: --resume becomes the newest complete checkpoint in
/// --checkpoint-dir, if any. Ranks that see different directories (hosts
/// without a shared file system) stop together.
static Error resolveAutoResume(rt::Communicator &comm) {
  if (!autoResume)
    return Error::success();
  auto done = rt::completeCheckpoints(checkpointDir);
  int64_t mine = done.empty() ? -1 : static_cast<int64_t>(done.back().first);
  std::vector<int64_t> all(comm.worldSize(), mine);
  if (comm.worldSize() > 1)
    if (Error err = comm.allGather(&mine, all.data(), 1, rt::DType::I64))
      return err;
  auto name = [](int64_t step) {
    return step < 0 ? std::string("no checkpoint")
                    : "step-" + std::to_string(step);
  };
  for (int r = 1; r < comm.worldSize(); ++r)
    if (all[r] != all[0])
      return makeError("--auto-resume: rank 0 finds " + name(all[0]) + " in " +
                       checkpointDir + ", rank " + Twine(r) + " finds " +
                       name(all[r]) +
                       ": every rank must see the same --checkpoint-dir (on "
                       "several hosts, a file system they all mount)");
  if (mine >= 0)
    resumePath = done.back().second;
  else if (comm.rank() == 0)
    llvm::errs() << "shardrun: --auto-resume: no complete checkpoint in "
                 << checkpointDir << " yet; starting at step 1\n";
  return Error::success();
}

/// Sets the threads of this rank's CPU matrix products: --cpu-threads, else
/// OMP_NUM_THREADS or OPENBLAS_NUM_THREADS, else the CPUs the rank may run
/// on shared among the ranks of its host that may run on the same CPUs (so
/// that N unbound ranks on a host of C cores take C / N threads each, as
/// torchrun's OMP_NUM_THREADS=1 default avoids oversubscription). Collective:
/// every rank calls it. Returns the threads chosen.
static Expected<int> setKernelThreads(rt::Communicator &comm) {
  int threads = kernelThreads;
  for (const char *name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    const char *value = std::getenv(name);
    int fromEnv = 0;
    if (!threads && value && !StringRef(value).getAsInteger(10, fromEnv) &&
        fromEnv > 0)
      threads = std::min(fromEnv, kMaxCpuThreads);
  }
  // Every rank takes part in the gather, whatever it chose.
  rt::ProcessCpus cpus = rt::processCpus();
  std::vector<uint64_t> keys(comm.worldSize(), cpus.key);
  if (comm.worldSize() > 1)
    if (Error err = comm.allGather(&cpus.key, keys.data(), 1, rt::DType::I64))
      return std::move(err);
  if (!threads)
    threads = rt::defaultCpuThreads(cpus, keys);
  rt::setCpuKernelThreads(threads);
  return threads;
}

/// The flags that are wrong on every rank alike (checked before mpirun
/// starts the ranks, and by each rank under a direct mpirun or srun).
static Error checkRankFlags() {
  if (Error err = checkOutputPaths())
    return err;
  if (Error err = checkCheckpointFlags())
    return err;
  if (kernelThreads.getNumOccurrences() &&
      (kernelThreads < 1 || kernelThreads > kMaxCpuThreads))
    return makeError("--cpu-threads " + Twine(kernelThreads.getValue()) +
                     ": a rank takes 1 to " + Twine(kMaxCpuThreads) +
                     " threads");
  return Error::success();
}

static Error runMain(rt::Communicator &hostComm) {
  if (Error err = checkRankFlags())
    return err;
  if (tf32 && deviceKind == rt::DeviceKind::Cpu)
    return makeError("--tf32 is for GPUs: add --device cuda (or auto)");
  if (cudnn.getNumOccurrences() && deviceKind == rt::DeviceKind::Cpu)
    return makeError("--cudnn is for GPUs: add --device cuda (or auto)");
  Expected<int> threads = setKernelThreads(hostComm);
  if (!threads)
    return threads.takeError();
  // The device first: a missing GPU is reported before any plan is read.
  std::string cpuBecause;
  int localRank = rt::localRankFromEnvironment(hostComm.rank());
  Expected<std::unique_ptr<rt::KernelBackend>> backendOr =
      rt::createBackend(deviceKind, localRank, deviceOptions(), &cpuBecause);
  if (!backendOr)
    return backendOr.takeError();
  std::unique_ptr<rt::KernelBackend> backend = std::move(*backendOr);
  if (!cpuBecause.empty() && hostComm.rank() == 0)
    llvm::errs() << "shardrun: --device auto: running on the CPU: "
                 << cpuBecause << "\n";
  // On GPUs the collectives of device buffers go to NCCL; host ones (and
  // the NCCL bootstrap) stay on the host communicator.
  Expected<std::unique_ptr<rt::Communicator>> deviceComm =
      rt::createDeviceCommunicator(*backend, hostComm, localRank,
                                   collectiveTimeout);
  if (!deviceComm)
    return deviceComm.takeError();
  rt::Communicator &comm = *deviceComm ? **deviceComm : hostComm;
  Expected<std::unique_ptr<plan::LoadedPlan>> loaded = loadAndAgree(comm);
  if (!loaded)
    return loaded.takeError();
  if (Error err = checkMemoryAvailable(comm, (*loaded)->plan))
    return err;
  if (!offloadDir.empty() && backend->hasPinnedMemory() && hostComm.rank() == 0)
    llvm::errs() << "shardrun: --offload-dir is not used on the "
                 << backend->name()
                 << " backend: its offload tier is pinned host memory\n";
  Expected<std::unique_ptr<rt::Executor>> execOr = rt::Executor::create(
      **loaded, *backend, &comm, rt::ExecutorOptions{offloadDir.getValue()});
  // Setting up can fail on one rank alone (its offload disk is full): the
  // others must not go on into the first step's collectives.
  int32_t setupFailed = execOr ? 0 : 1, anySetupFailed = setupFailed;
  if (comm.worldSize() > 1)
    if (Error err = comm.allReduce(&setupFailed, &anySetupFailed, 1,
                                   rt::DType::I32, rt::ReduceOp::Max)) {
      if (!execOr)
        llvm::consumeError(execOr.takeError());
      return err;
    }
  if (!execOr)
    return execOr.takeError();
  if (anySetupFailed)
    return makeError("another rank could not set up the plan (its message "
                     "says why)");
  rt::Executor &exec = **execOr;
  exec.setTracing(!tracePath.empty());
  exec.setSeed(seed);
  if (Error err = resolveAutoResume(comm))
    return err;
  if (!dataDir.empty() || !resumePath.empty()) {
    if (!inputSpecs.empty())
      return makeError(Twine(dataDir.empty() ? "--resume" : "--data") +
                       " and --input are exclusive: a training run feeds "
                       "every graph input from the data set");
    rt::TrainOptions options;
    options.dataDir = dataDir;
    options.steps = steps;
    options.logPath = logPath;
    options.exportPath = exportPath;
    options.exportData = exportData;
    options.rank = comm.rank();
    options.worldSize = comm.worldSize();
    options.comm = &comm;
    options.seed = seed;
    options.progress = progressMode == ProgressMode::On ||
                       (progressMode == ProgressMode::Auto &&
                        llvm::sys::Process::StandardErrIsDisplayed());
    if (!resumePath.empty()) {
      Expected<std::unique_ptr<rt::CheckpointReader>> ck =
          rt::CheckpointReader::open(resumePath);
      // Every rank opens the same files; one that fails alone (a file
      // system that differs between hosts) must not leave the others
      // waiting in load's collective.
      int32_t failed = ck ? 0 : 1, anyFailed = failed;
      if (comm.worldSize() > 1)
        if (Error err = comm.allReduce(&failed, &anyFailed, 1, rt::DType::I32,
                                       rt::ReduceOp::Max))
          return err;
      if (!ck)
        return ck.takeError();
      if (anyFailed)
        return makeError("another rank could not open --resume " + resumePath +
                         " (its message says why)");
      const plan::Checkpoint &info = (*ck)->checkpoint();
      if (seed.getNumOccurrences() && seed != info.seed())
        return makeError("--seed " + Twine(seed) + ", but checkpoint " +
                         (*ck)->dir() + " was trained with --seed " +
                         Twine(info.seed()) +
                         ": another seed would change the dropout masks of "
                         "the steps to come. Leave --seed out to keep the "
                         "checkpoint's");
      if (Error err = (*ck)->load(exec, **loaded, &comm))
        return err;
      options.seed = info.seed();
      exec.setSeed(info.seed());
      options.firstStep = info.step();
      options.firstSample = info.samples_consumed();
      options.dataSamples = info.data_samples();
      options.continueLog = true;
      options.steps =
          std::max<int64_t>(0, steps - static_cast<int64_t>(info.step()));
      if (comm.rank() == 0) {
        llvm::errs() << "shardrun: resuming from " << (*ck)->dir() << " (step "
                     << info.step() << ", saved by " << info.world_size()
                     << " rank(s) at ZeRO stage " << info.zero_stage() << ")";
        if (options.steps == 0)
          llvm::errs() << "; --steps " << steps
                       << " is at or below it: no step runs";
        llvm::errs() << "\n";
      }
      if (options.steps > 0 && dataDir.empty())
        return makeError("--resume: training on to step " + Twine(steps) +
                         " needs --data DIR (the data set the run trained "
                         "on)");
    }
    std::unique_ptr<rt::CheckpointWriter> writer;
    if (!checkpointDir.empty()) {
      rt::CheckpointOptions ckOptions;
      ckOptions.dir = checkpointDir;
      ckOptions.keepLast = keepLast;
      Expected<std::unique_ptr<rt::CheckpointWriter>> w =
          rt::CheckpointWriter::create(ckOptions, **loaded, &comm);
      if (!w)
        return w.takeError();
      writer = std::move(*w);
      options.checkpoints = writer.get();
      options.checkpointEvery = checkpointEvery;
    }
    stepsStarted = true;
    if (Error err = rt::train(exec, (*loaded)->plan, planDir, options))
      return err;
    if (showMemory)
      if (Error err = reportMemory(comm, exec, (*loaded)->plan))
        return err;
    if (!tracePath.empty())
      return writeTrace(comm, exec, tracePath);
    return Error::success();
  }
  if (comm.worldSize() > 1)
    return makeError("a plan for several ranks trains: give --data DIR");
  if (!exportPath.empty())
    return makeError("--export needs a training run (--data DIR --steps N)");
  const plan::Plan planMsg = (*loaded)->plan;

  // Parameters now live in executor buffers.
  loaded->reset();

  // Check the names before reading any file.
  struct Binding {
    size_t input;
    std::string file;
  };
  std::vector<Binding> bindings;
  std::vector<bool> bound(exec.numInputs(), false);
  for (const std::string &spec : inputSpecs) {
    auto [name, file] = StringRef(spec).split('=');
    if (name.empty() || file.empty() || !StringRef(spec).contains('='))
      return makeError("--input expects NAME=FILE.npy, got '" + spec + "'");
    std::optional<size_t> index = exec.findInput(name);
    if (!index)
      return makeError("unknown input '" + name + "'; " + describeInputs(exec));
    if (bound[*index])
      return makeError("input '" + name + "' is given more than once");
    bound[*index] = true;
    bindings.push_back({*index, file.str()});
  }
  std::string missing;
  for (size_t i = 0; i < exec.numInputs(); ++i)
    if (!bound[i])
      missing += (missing.empty() ? "" : ", ") + exec.inputInfo(i).name + " (" +
                 exec.inputInfo(i).typeString() + ")";
  if (!missing.empty())
    return makeError("missing --input for: " + missing);

  for (const Binding &b : bindings) {
    Expected<rt::NpyArray> array = rt::readNpy(b.file);
    if (!array)
      return array.takeError();
    rt::adaptNpyToInput(*array, exec.inputInfo(b.input).dtype);
    if (Error err = exec.setInput(b.input, array->view()))
      return makeError(toString(std::move(err)) + " (from " + b.file + ")");
  }

  exec.setProfiling(profileOps);
  if (Error err = exec.run())
    return err;

  if (!outputDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return makeError("cannot create output directory " + outputDir + ": " +
                       ec.message());

  llvm::StringSet<> usedFiles;
  for (size_t i = 0; i < exec.numOutputs(); ++i) {
    const rt::ValueInfo &info = exec.outputInfo(i);
    // Outputs may live in device memory: print and write a host copy.
    std::vector<uint8_t> host(exec.output(i).bytes());
    if (Error err = exec.readOutput(i, host.data()))
      return err;
    rt::TensorView value = exec.output(i);
    value.data = host.data();
    printSummary(llvm::outs(), info.name, value);
    if (!outputDir.empty()) {
      std::string base = sanitizeFileName(info.name);
      if (base.empty())
        base = "output" + std::to_string(i);
      // Two outputs whose names sanitize alike get distinct files.
      if (usedFiles.contains(base + ".npy"))
        base += "_" + std::to_string(i);
      usedFiles.insert(base + ".npy");
      llvm::SmallString<256> path(outputDir);
      llvm::sys::path::append(path, base + ".npy");
      if (Error err = rt::writeNpy(path, value))
        return err;
      llvm::outs() << " -> " << path;
    }
    llvm::outs() << "\n";
  }
  llvm::outs().flush();
  if (showMemory)
    if (Error err = reportMemory(comm, exec, planMsg))
      return err;
  if (!tracePath.empty())
    if (Error err = writeTrace(comm, exec, tracePath))
      return err;

  if (profileOps) {
    double total = 0;
    for (const rt::OpProfile &p : exec.profile())
      total += p.seconds;
    llvm::errs() << "per-op time (total " << llvm::format("%.3f", total * 1e3)
                 << " ms; " << *threads
                 << " thread(s) for the CPU matrix products):\n";
    for (size_t j = 0; j < exec.profile().size(); ++j) {
      const rt::OpProfile &p = exec.profile()[j];
      llvm::errs() << llvm::format("  %4zu %9.3f ms  ", j, p.seconds * 1e3)
                   << p.type << " '" << p.name << "'\n";
    }
  }
  return Error::success();
}

/// The world size a plan was compiled for, or nothing when plan.pb cannot
/// be read or does not match its manifest (then loading it reports the
/// problem). Reads only a regular plan.pb of the size the manifest lists,
/// so a FIFO or a device in its place cannot block or exhaust memory.
static std::optional<int> readPlanWorldSize(StringRef dir) {
  Expected<std::vector<uint8_t>> raw =
      plan::readVerifiedPlanFile(dir, plan::kPlanFile);
  if (!raw) {
    llvm::consumeError(raw.takeError());
    return std::nullopt;
  }
  if (raw->size() > INT_MAX)
    return std::nullopt;
  plan::Plan p;
  {
#if GOOGLE_PROTOBUF_VERSION < 4022000
    google::protobuf::LogSilencer silence;
#endif
    if (!p.ParseFromArray(raw->data(), static_cast<int>(raw->size())))
      return std::nullopt;
  }
  return p.world_size() > 1 && p.world_size() <= INT_MAX
             ? static_cast<int>(p.world_size())
             : 1;
}

/// The world size a plan was compiled for (1 when it cannot be read).
static int planWorldSize(StringRef dir) {
  return readPlanWorldSize(dir).value_or(1);
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // A file over the size limit (ulimit -f), like the offload tier's, is an
  // error of the write (EFBIG) that says so, not a silent SIGXFSZ death.
  std::signal(SIGXFSZ, SIG_IGN);
  cl::HideUnrelatedOptions(
      {&shardrunCategory, &trainCategory, &checkpointCategory, &distCategory});
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "shardrun (Shard), reads plan version " << plan::kPlanVersion << "\n";
  });
  if (llvm::Error err = shardc::tools::checkSeparatedValues(argc, argv)) {
    llvm::WithColor::error(llvm::errs(), "shardrun")
        << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  // Collect command-line errors so they come out like every other error.
  std::string cmdErrors;
  llvm::raw_string_ostream cmdErrorStream(cmdErrors);
  bool parsed = cl::ParseCommandLineOptions(
      argc, argv,
      "shardrun: runs a Shard plan on CPUs (MPI) or GPUs (--device cuda: "
      "CUDA, NCCL)\n\n"
      "  shardrun PLAN_DIR --input NAME=FILE.npy ... --output-dir DIR\n"
      "  shardrun PLAN_DIR --data DIR --steps N [--log run.jsonl] "
      "[--export trained.onnx]\n\n"
      "A plan for N > 1 ranks runs as N local processes under mpirun, or\n"
      "as one rank per process under your own mpirun or srun. SIGINT,\n"
      "SIGTERM or SIGHUP to shardrun ends every rank; no rank outlives\n"
      "shardrun, even killed with SIGKILL. A rank that crashes or is\n"
      "killed is named with its step and op, and a rank that stops or\n"
      "hangs ends the job after --collective-timeout (docs/faults.md).\n",
      &cmdErrorStream);
  if (!parsed) {
    cmdErrorStream.flush();
    // cl prefixes each line with the program name; print one message with
    // one prefix. (Bad option values were already reported by cl itself.)
    llvm::SmallVector<StringRef, 4> lines;
    StringRef(cmdErrors).split(lines, '\n', -1, /*KeepEmpty=*/false);
    StringRef prog = llvm::sys::path::filename(argv[0]);
    std::string msg;
    for (StringRef line : lines) {
      line = line.trim();
      if (line.consume_front(prog))
        line.consume_front(":");
      if (!line.trim().empty())
        msg += (msg.empty() ? "" : " ") + line.trim().str();
    }
    if (!msg.empty())
      llvm::WithColor::error(llvm::errs(), "shardrun") << msg << "\n";
    return 1;
  }
  if (std::optional<std::string> err = rt::cpu::vec::pathChoiceError()) {
    llvm::WithColor::error(llvm::errs(), "shardrun") << *err << "\n";
    return 1;
  }
  if (planDir.empty()) {
    llvm::WithColor::error(llvm::errs(), "shardrun")
        << "no plan directory given; usage: shardrun PLAN_DIR --input "
           "NAME=FILE.npy ... [--output-dir DIR] (see --help)\n";
    return 1;
  }

  if (!(collectiveTimeout >= 0) || !std::isfinite(collectiveTimeout)) {
    llvm::WithColor::error(llvm::errs(), "shardrun")
        << "--collective-timeout must be a number of seconds >= 0 (0 "
           "disables the collective watchdog), got "
        << collectiveTimeout << "\n";
    return 1;
  }
  rt::progress::setProgramName("shardrun");

  // One rank of a job that mpirun or srun started.
  if (rt::launchedByMpi()) {
    rt::MpiCommunicatorOptions options;
    options.collectiveTimeoutSeconds = collectiveTimeout;
    Expected<std::unique_ptr<rt::Communicator>> comm =
        rt::createMpiCommunicator(options);
    if (!comm) {
      llvm::WithColor::error(llvm::errs(), "shardrun")
          << toString(comm.takeError()) << "\n";
      return 1;
    }
    rt::Communicator &c = **comm;
    // A crash names this rank, step and op; the rank never outlives its
    // launcher; the local launcher sees where the rank is.
    rt::installRankGuards(c.rank(), /*lifeline=*/c.worldSize() > 1);
    if (Error err = rt::progress::attachBoard(c.rank()))
      llvm::WithColor::warning(llvm::errs(), "shardrun")
          << "rank " << c.rank() << ": " << toString(std::move(err)) << "\n";
    if (nproc && nproc != c.worldSize()) {
      llvm::WithColor::error(llvm::errs(), "shardrun")
          << "--nproc " << nproc << " but the launcher started "
          << c.worldSize() << " ranks\n";
      return 1;
    }
    if (Error err = runMain(c)) {
      llvm::outs().flush();
      // One write per line: ranks share the terminal.
      std::string line = "shardrun: error: rank " + std::to_string(c.rank()) +
                         ": " + toString(std::move(err)) + "\n";
      llvm::errs() << line;
      // Errors found before the first step are the same on every rank, which
      // all stop; one found later may be this rank's alone while the others
      // wait in a collective: end the whole job.
      rt::progress::setEnding(rt::progress::Ending::Failed);
      if (stepsStarted && c.worldSize() > 1)
        c.abort(1);
      return 1;
    }
    rt::progress::setEnding(rt::progress::Ending::Finished);
    return 0;
  }

  // Started directly: run the plan's ranks as local processes.
  int ranks = nproc ? static_cast<int>(nproc) : planWorldSize(planDir);
  if (ranks < 1) {
    llvm::WithColor::error(llvm::errs(), "shardrun")
        << "--nproc must be >= 1\n";
    return 1;
  }
  // Local ranks share this machine's cores: past a few per core a job only
  // thrashes (and a plan compiled for a cluster would start thousands of
  // processes here).
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  int maxLocal = static_cast<int>(std::max(16u, 4 * cores));
  if (ranks > maxLocal) {
    llvm::WithColor::error(llvm::errs(), "shardrun")
        << (nproc ? "--nproc " + std::to_string(ranks)
                  : "the plan's world size, " + std::to_string(ranks) + ",")
        << " would start " << ranks << " ranks on this machine, which has "
        << cores << " cores (at most " << maxLocal
        << " local ranks); run a plan this large across hosts: mpirun -np "
        << ranks << " --hostfile HOSTS shardrun PLAN ..., or srun -n " << ranks
        << " shardrun PLAN ...\n";
    return 1;
  }
  if (ranks > 1) {
    // Flags that are wrong on every rank: said once, before mpirun starts.
    if (Error err = checkRankFlags()) {
      llvm::WithColor::error(llvm::errs(), "shardrun")
          << toString(std::move(err)) << "\n";
      return 1;
    }
    return launchRanks(ranks, argc, argv);
  }
  rt::installRankGuards(0, /*lifeline=*/false);
  std::unique_ptr<rt::Communicator> self = rt::createSelfCommunicator();
  if (Error err = runMain(*self)) {
    llvm::outs().flush();
    llvm::WithColor::error(llvm::errs(), "shardrun")
        << toString(std::move(err)) << "\n";
    return 1;
  }
  return 0;
}
