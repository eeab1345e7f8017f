//===- shardrun.cpp - Runs a Shard plan on .npy inputs --------------------===//
//
//   shardrun PLAN_DIR --input NAME=FILE.npy ... [--output-dir DIR]
//
// Loads and validates the plan, binds every graph input from a .npy file,
// runs one step on the CPU backend, prints one line per graph output and
// writes each output to DIR/<output name>.npy. Every error is one line
// "shardrun: error: ..." on stderr and exit code 1.
//
//===----------------------------------------------------------------------===//
#include "plan/PlanIO.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Npy.h"
#include "runtime/Trainer.h"
#include "runtime/cpu/Kernels.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <string>
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

static cl::opt<bool> profileOps("profile",
                                cl::desc("Print per-op wall time to stderr"),
                                cl::init(false), cl::cat(shardrunCategory));

static cl::OptionCategory trainCategory(
    "training (for plans compiled with shardc --optimizer)");
static cl::opt<std::string>
    dataDir("data",
            cl::desc("Train on DIR/<input>.npy (first axis = samples); "
                     "step s uses samples [s*B, (s+1)*B), wrapping around"),
            cl::value_desc("DIR"), cl::cat(trainCategory));
static cl::opt<int64_t> steps("steps", cl::desc("Training steps (default 1)"),
                              cl::init(1), cl::cat(trainCategory));
static cl::opt<std::string>
    logPath("log", cl::desc("Write one JSON line per step to FILE"),
            cl::value_desc("FILE"), cl::cat(trainCategory));
static cl::opt<std::string> exportPath(
    "export",
    cl::desc("After training, write the source ONNX model with the trained "
             "parameters to FILE"),
    cl::value_desc("FILE.onnx"), cl::cat(trainCategory));
enum class ProgressMode { Auto, On, Off };
static cl::opt<ProgressMode> progressMode(
    "progress", cl::desc("Progress line on stderr (default: on a terminal)"),
    cl::init(ProgressMode::Auto),
    cl::values(clEnumValN(ProgressMode::Auto, "auto", "when stderr is a terminal"),
               clEnumValN(ProgressMode::On, "on", "always"),
               clEnumValN(ProgressMode::Off, "off", "never")),
    cl::cat(trainCategory));

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

/// IEEE half to float.
static float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else if (exp != 0) {
    bits = sign | (uint32_t(exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: normalize.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while (!(mant & 0x400));
    bits = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
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
    return halfToFloat(load(uint16_t()));
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
  return t == rt::DType::F32 || t == rt::DType::F64 || t == rt::DType::F16;
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

static Error runMain() {
  std::vector<StringRef> knownOpTypes;
  for (const auto &entry : rt::cpu::kernelTable())
    knownOpTypes.push_back(entry.first);

  Expected<std::unique_ptr<plan::LoadedPlan>> loaded =
      plan::loadPlan(planDir, knownOpTypes);
  if (!loaded)
    return loaded.takeError();
  std::unique_ptr<rt::KernelBackend> backend = rt::createCpuBackend();
  Expected<std::unique_ptr<rt::Executor>> execOr =
      rt::Executor::create(**loaded, *backend);
  if (!execOr)
    return execOr.takeError();
  rt::Executor &exec = **execOr;
  if (!dataDir.empty()) {
    if (!inputSpecs.empty())
      return makeError("--input and --data are exclusive: --data feeds every "
                       "graph input from the data set");
    rt::TrainOptions options;
    options.dataDir = dataDir;
    options.steps = steps;
    options.logPath = logPath;
    options.exportPath = exportPath;
    options.progress =
        progressMode == ProgressMode::On ||
        (progressMode == ProgressMode::Auto && llvm::sys::Process::StandardErrIsDisplayed());
    return rt::train(exec, (*loaded)->plan, planDir, options);
  }
  if (!exportPath.empty())
    return makeError("--export needs a training run (--data DIR --steps N)");

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
    rt::TensorView value = exec.output(i);
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

  if (profileOps) {
    double total = 0;
    for (const rt::OpProfile &p : exec.profile())
      total += p.seconds;
    llvm::errs() << "per-op time (total " << llvm::format("%.3f", total * 1e3)
                 << " ms):\n";
    for (size_t j = 0; j < exec.profile().size(); ++j) {
      const rt::OpProfile &p = exec.profile()[j];
      llvm::errs() << llvm::format("  %4zu %9.3f ms  ", j, p.seconds * 1e3)
                   << p.type << " '" << p.name << "'\n";
    }
  }
  return Error::success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions({&shardrunCategory, &trainCategory});
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "shardrun (Shard), reads plan version " << plan::kPlanVersion << "\n";
  });
  // Collect command-line errors so they come out like every other error.
  std::string cmdErrors;
  llvm::raw_string_ostream cmdErrorStream(cmdErrors);
  bool parsed = cl::ParseCommandLineOptions(
      argc, argv,
      "shardrun: runs a Shard plan on the CPU\n\n"
      "  shardrun PLAN_DIR --input NAME=FILE.npy ... --output-dir DIR\n"
      "  shardrun PLAN_DIR --data DIR --steps N [--log run.jsonl] "
      "[--export trained.onnx]\n",
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
  if (planDir.empty()) {
    llvm::WithColor::error(llvm::errs(), "shardrun")
        << "no plan directory given; usage: shardrun PLAN_DIR --input "
           "NAME=FILE.npy ... [--output-dir DIR] (see --help)\n";
    return 1;
  }

  if (Error err = runMain()) {
    llvm::outs().flush();
    llvm::WithColor::error(llvm::errs(), "shardrun")
        << toString(std::move(err)) << "\n";
    return 1;
  }
  return 0;
}
