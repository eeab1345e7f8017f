//===- Trainer.cpp - The training loop of shardrun ------------------------===//
#include "runtime/Trainer.h"
#include "plan/PlanIO.h"
#include "plan/SafeFile.h"
#include "runtime/Checkpoint.h"
#include "runtime/cpu/KernelUtil.h"
#include "runtime/kernels/OptimizerOps.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <sys/resource.h>

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace shardc::rt {

static Error makeError(const Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

int64_t peakRssBytes() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return -1;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024; // Linux: kilobytes
}

//===----------------------------------------------------------------------===//
// Dataset
//===----------------------------------------------------------------------===//

Expected<Dataset> Dataset::load(StringRef dir, const Executor &exec) {
  if (!llvm::sys::fs::is_directory(dir))
    return makeError("--data " + dir + " is not a directory");
  Dataset ds;
  for (size_t i = 0; i < exec.numInputs(); ++i) {
    const ValueInfo &info = exec.inputInfo(i);
    // The file is DIR/<name>.npy, always inside DIR: a name that is a path
    // ('../x', 'a/b') or a dot name never leaves it.
    StringRef name = info.name;
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of("/\\") != StringRef::npos ||
        name.find('\0') != StringRef::npos)
      return makeError("graph input '" + name +
                       "' cannot name a file in --data " + dir +
                       ": its name is empty, a dot name or contains a path "
                       "separator. Rename the input when exporting the "
                       "model (input_names=[...] in torch.onnx.export)");
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, info.name + ".npy");
    if (!llvm::sys::fs::exists(path))
      return makeError("data set " + dir + " has no " + info.name +
                       ".npy for graph input '" + info.name + "' (" +
                       info.typeString() + ")");
    Expected<NpyArray> arr = readNpy(path);
    if (!arr)
      return arr.takeError();
    adaptNpyToInput(*arr, info.dtype);
    auto perSample = llvm::ArrayRef<int64_t>(info.shape);
    if (perSample.empty())
      return makeError("graph input '" + info.name +
                       "' is a scalar; it has no batch axis to feed samples "
                       "through");
    bool ok = arr->dtype == info.dtype && arr->shape.size() == perSample.size();
    for (size_t d = 1; ok && d < perSample.size(); ++d)
      ok = arr->shape[d] == perSample[d];
    if (!ok) {
      std::vector<int64_t> want(perSample.begin(), perSample.end());
      want[0] = -1;
      return makeError(Twine(path) + " holds " + dtypeName(arr->dtype) + " " +
                       shapeToString(arr->shape) + "; the model needs " +
                       dtypeName(info.dtype) + " [N" +
                       StringRef(shapeToString(want)).drop_front(3) +
                       " (N samples of input '" + info.name + "', " +
                       info.typeString() + " per step)");
    }
    if (arr->shape[0] == 0)
      return makeError(Twine(path) + " holds no samples");
    if (i == 0) {
      ds.samples = arr->shape[0];
      ds.batch = perSample[0];
    } else if (arr->shape[0] != ds.samples) {
      return makeError(Twine(path) + " holds " + Twine(arr->shape[0]) +
                       " samples, but " + exec.inputInfo(0).name +
                       ".npy holds " + Twine(ds.samples));
    }
    ds.staging.emplace_back(static_cast<size_t>(numElements(perSample)) *
                            dtypeSize(info.dtype));
    ds.arrays.push_back(std::move(*arr));
  }
  return ds;
}

uint64_t Dataset::bytes() const {
  uint64_t total = 0;
  for (const NpyArray &a : arrays)
    total += a.data.size();
  return total;
}

template <typename T>
static std::optional<int64_t> firstNonFiniteOf(const NpyArray &a) {
  const T *v = reinterpret_cast<const T *>(a.data.data());
  size_t n = a.data.size() / sizeof(T);
  for (size_t k = 0; k < n; ++k)
    if (!std::isfinite(v[k]))
      return static_cast<int64_t>(k);
  return std::nullopt;
}

std::optional<Dataset::NonFinite> Dataset::firstNonFinite() const {
  for (size_t i = 0; i < arrays.size(); ++i) {
    const NpyArray &a = arrays[i];
    std::optional<int64_t> k;
    double value = 0;
    if (a.dtype == DType::F32) {
      k = firstNonFiniteOf<float>(a);
      if (k)
        value = reinterpret_cast<const float *>(a.data.data())[*k];
    } else if (a.dtype == DType::F64) {
      k = firstNonFiniteOf<double>(a);
      if (k)
        value = reinterpret_cast<const double *>(a.data.data())[*k];
    }
    if (!k)
      continue;
    int64_t perSample = static_cast<int64_t>(numElements(a.shape) / samples);
    return NonFinite{i, *k / perSample, *k % perSample, value};
  }
  return std::nullopt;
}

Error Dataset::bind(Executor &exec, llvm::ArrayRef<int64_t> firsts) {
  int64_t chunks = static_cast<int64_t>(firsts.size());
  int64_t rows = chunks > 0 ? batch / chunks : 0;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const NpyArray &arr = arrays[i];
    size_t sampleBytes = staging[i].size() / batch;
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t k = 0; k < rows; ++k) {
        int64_t s = (firsts[c] + k) % samples;
        std::memcpy(staging[i].data() + (c * rows + k) * sampleBytes,
                    arr.data.data() + s * sampleBytes, sampleBytes);
      }
    const ValueInfo &info = exec.inputInfo(i);
    if (Error err = exec.setInput(
            i, TensorView(info.dtype, info.shape, staging[i].data())))
      return err;
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

/// `text` as the inside of a JSON string.
static std::string jsonEscape(StringRef text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      out += llvm::formatv("\\u{0:x-4}", unsigned(c)).str();
    else
      out += c;
  }
  return out;
}

/// The plan's source model: a file of the plan directory that the manifest
/// lists, checked against its size and SHA-256.
static Expected<onnx::ModelProto> readSourceModel(const plan::Plan &plan,
                                                  StringRef planDir) {
  if (!plan.has_training() || plan.training().source_model().empty())
    return makeError("--export: the plan in " + planDir +
                     " carries no source model");
  Expected<std::vector<uint8_t>> source =
      plan::readVerifiedPlanFile(planDir, plan.training().source_model());
  if (!source)
    return makeError("--export: cannot read the source model: " +
                     toString(source.takeError()));
  llvm::SmallString<256> src(planDir);
  llvm::sys::path::append(src, plan.training().source_model());
  onnx::ModelProto model;
  if (source->size() > INT_MAX ||
      !model.ParseFromArray(source->data(), static_cast<int>(source->size())))
    return makeError("--export: " + src + " is not a valid ONNX model");
  return std::move(model);
}

/// Every parameter that --export writes back (each ZeRO-3 unit's
/// parameters, every other PARAMETER buffer) is an initializer of the
/// source model with the same element type and shape: otherwise the export
/// would leave a trained parameter out or write bytes of another shape.
static Error checkParametersMatch(const plan::Plan &plan,
                                  const onnx::ModelProto &model,
                                  StringRef planDir) {
  llvm::StringMap<const onnx::TensorProto *> inits;
  for (const onnx::TensorProto &init : model.graph().initializer())
    inits[init.name()] = &init;
  auto check = [&](const std::string &name, int dtype,
                   llvm::ArrayRef<int64_t> shape) -> Error {
    const onnx::TensorProto *init = inits.lookup(name);
    std::string where = "--export: parameter '" + name + "' of the plan in " +
                        planDir.str() + " ";
    if (!init)
      return makeError(where + "is not an initializer of its source model " +
                       plan.training().source_model() +
                       " (the plan and the model do not belong together; "
                       "recompile the model with shardc)");
    bool same = init->data_type() == dtype &&
                init->dims_size() == static_cast<int>(shape.size());
    for (int d = 0; same && d < init->dims_size(); ++d)
      same = init->dims(d) == shape[d];
    if (!same)
      return makeError(
          where + "(" +
          dtypeName(dtypeFromCode(dtype).value_or(DType::Undefined)) + " " +
          shapeToString(shape) +
          ") does not match the source model's initializer; "
          "recompile the model with shardc");
    return Error::success();
  };
  std::vector<bool> unitBuffer(plan.buffers_size(), false);
  for (const plan::FlatUnit &unit : plan.units()) {
    if (unit.buffer() == -1) // stages 1-2: whole parameter buffers
      continue;
    if (unit.buffer() < 0 || unit.buffer() >= plan.buffers_size())
      return makeError("--export: unit '" + unit.name() +
                       "' has no buffer of the plan");
    unitBuffer[unit.buffer()] = true;
    int dtype = plan.buffers(unit.buffer()).dtype();
    for (const plan::FlatParam &p : unit.params())
      if (Error err =
              check(p.name(), dtype,
                    std::vector<int64_t>(p.shape().begin(), p.shape().end())))
        return err;
  }
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const plan::Buffer &b = plan.buffers(i);
    if (b.kind() != plan::PARAMETER || unitBuffer[i])
      continue;
    if (Error err =
            check(b.name(), b.dtype(),
                  std::vector<int64_t>(b.shape().begin(), b.shape().end())))
      return err;
  }
  return Error::success();
}

namespace {
/// The learning rate the plan's optimizer updates apply, read from the
/// first update's attributes by the kernels' own reader: what the log
/// reports as "lr".
struct LearningRate {
  bool present = false;
  double lr = 0;
  ops::LrSchedule schedule;
  /// At global step `step` (from 0), whose incremented counter is step + 1.
  double at(uint64_t step) const {
    return schedule.lrAt(lr, static_cast<double>(step + 1));
  }
};
} // namespace

static Expected<LearningRate> learningRateOf(const plan::Plan &plan) {
  LearningRate rate;
  for (const plan::Op &op : plan.ops()) {
    bool sgd = op.type() == "SGDUpdate", adam = op.type() == "AdamUpdate";
    if (!sgd && !adam)
      continue;
    AttrMap attrs;
    for (const plan::Attribute &attr : op.attributes())
      attrs.set(attr.name(), convertAttr(attr));
    KernelContext ctx{op.type(), op.name(), attrs, {}, {}};
    if (sgd) {
      ops::SgdHyper h;
      if (Error err = cpu::sgdHyper(ctx, h))
        return std::move(err);
      rate.lr = h.lr;
      rate.schedule = h.schedule;
    } else {
      ops::AdamHyper h;
      if (Error err = cpu::adamHyper(ctx, h))
        return std::move(err);
      rate.lr = h.lr;
      rate.schedule = h.schedule;
    }
    rate.present = true;
    break;
  }
  return rate;
}

Error train(Executor &exec, const plan::Plan &plan, StringRef planDir,
            const TrainOptions &options) {
  if (!plan.has_training())
    return makeError("the plan in " + planDir +
                     " is not a training step; compile it with shardc "
                     "--optimizer sgd|adam|adamw");
  if (options.steps < 0)
    return makeError("--steps must be >= 0");
  // A graph input frozen by --bind is a constant of the step: data for it
  // would be silently ignored, and every step would train on the bound value.
  for (const std::string &name : plan.training().bound_inputs()) {
    if (options.dataDir.empty()) // a run with no step and no data
      break;
    llvm::SmallString<256> path(options.dataDir);
    llvm::sys::path::append(path, name + ".npy");
    if (llvm::sys::fs::exists(path))
      return makeError("graph input '" + name +
                       "' was frozen at compile time (shardc --bind " + name +
                       "=...), but the data set has " + path +
                       ": every step would use the bound value, not the "
                       "data. Compile without --bind " +
                       name + " to train on the data");
  }
  // A plan that cannot be exported fails now, not after the last step
  // (every rank reads the same plan, so all fail alike).
  if (!options.exportPath.empty()) {
    Expected<onnx::ModelProto> model = readSourceModel(plan, planDir);
    if (!model)
      return model.takeError();
    if (Error err = checkParametersMatch(plan, *model, planDir))
      return err;
  }
  // A run with no step to take (a resumed run loaded to export or to save
  // in another layout) needs no data.
  std::optional<Dataset> data;
  if (options.steps > 0 || !options.dataDir.empty()) {
    Expected<Dataset> loaded = Dataset::load(options.dataDir, exec);
    if (!loaded)
      return loaded.takeError();
    data = std::move(*loaded);
  }
  Expected<LearningRate> rate = learningRateOf(plan);
  if (!rate)
    return rate.takeError();
  int64_t batch = plan.training().micro_batch();
  int64_t accum = std::max<int64_t>(plan.training().grad_accum(), 1);
  size_t lossOutput = plan.training().loss_output();
  if (lossOutput >= exec.numOutputs() ||
      exec.outputInfo(lossOutput).dtype != DType::F32 ||
      numElements(exec.outputInfo(lossOutput).shape) != 1)
    return makeError("the plan's loss output " + Twine(lossOutput) +
                     " is not a float32 scalar graph output");
  int64_t globalBatch = batch * accum * std::max(options.worldSize, 1);
  if (data && options.steps > 0 && data->numSamples() < globalBatch &&
      options.rank == 0)
    llvm::errs() << "shardrun: warning: the data set in " << options.dataDir
                 << " holds " << data->numSamples()
                 << " samples, fewer than one step takes (" << batch
                 << " per rank x "
                 << (accum > 1 ? std::to_string(accum) + " micro-batches x "
                               : std::string())
                 << std::max(options.worldSize, 1) << " ranks = " << globalBatch
                 << "): every step uses each sample about "
                 << llvm::format("%.1f", double(globalBatch) /
                                             double(data->numSamples()))
                 << " times\n";
  // Non-finite input data is refused before step 1, naming where it is and
  // the first step that would read it, so that it is never mistaken for a
  // diverging run.
  std::optional<Dataset::NonFinite> bad;
  if (data)
    bad = data->firstNonFinite();
  if (bad) {
    // Position p of the sample stream (step s of this run, micro-batch m,
    // rank r, slot k) is p = firstSample + ((s * K + m) * world + r) *
    // batch + k and reads sample p mod N.
    int64_t world = std::max(options.worldSize, 1);
    int64_t n = data->numSamples();
    int64_t p0 = static_cast<int64_t>(options.firstSample);
    int64_t p = p0 + (((bad->sample - p0) % n) + n) % n;
    int64_t step = (p - p0) / globalBatch;
    int64_t rank = ((p - p0) % globalBatch) / batch % world;
    std::string what = (std::isnan(bad->value) ? "NaN" : "infinite") +
                       std::string(" input data: ") + options.dataDir + "/" +
                       exec.inputInfo(bad->input).name + ".npy, sample " +
                       std::to_string(bad->sample) + ", element " +
                       std::to_string(bad->element) + " of the sample";
    if (step < options.steps)
      return makeError(what + " (read by rank " + Twine(rank) + " at step " +
                       Twine(options.firstStep + step + 1) +
                       "); clean the data set: every loss it reaches would "
                       "be non-finite");
    if (options.rank == 0)
      llvm::errs() << "shardrun: warning: " << what
                   << "; this run does not read it\n";
  }

  // Scalar graph outputs besides the loss are metrics (an accuracy from
  // ArgMax, a count of correct predictions): each step logs them, float
  // ones as the mean over ranks like the loss, integer ones as the sum.
  struct Metric {
    size_t output;
    std::string name;
    bool isFloat;
  };
  std::vector<Metric> metrics;
  // With gradient clipping the step's total gradient norm is an output of
  // its own (the same on every rank), logged as "grad_norm".
  std::optional<size_t> gradNormOutput;
  if (plan.training().has_grad_norm_output())
    gradNormOutput = plan.training().grad_norm_output();
  // With loss scaling: the scale the step used, logged as "loss_scale", and
  // whether it skipped its update ("skipped": true; the same on every rank).
  std::optional<size_t> lossScaleOutput, skippedOutput;
  if (plan.training().has_loss_scale_output()) {
    lossScaleOutput = plan.training().loss_scale_output();
    skippedOutput = plan.training().skipped_output();
  }
  int64_t skippedSteps = 0;
  for (size_t i = 0; i < exec.numOutputs(); ++i) {
    TensorView v = exec.output(i);
    if (i == lossOutput || i == gradNormOutput || i == lossScaleOutput ||
        i == skippedOutput || v.numel() != 1)
      continue;
    if (v.dtype == DType::F32 || v.dtype == DType::F64 ||
        v.dtype == DType::I64 || v.dtype == DType::I32)
      metrics.push_back({i, plan.buffers(plan.outputs(i)).name(),
                         v.dtype == DType::F32 || v.dtype == DType::F64});
  }

  std::unique_ptr<llvm::raw_fd_ostream> log;
  if (!options.logPath.empty() && options.rank == 0) {
    // A resumed run continues the log of the run it resumes: the lines of
    // steps after the checkpoint (that run went on past it) are dropped.
    std::string kept;
    if (options.continueLog) {
      if (auto old = llvm::MemoryBuffer::getFile(options.logPath)) {
        llvm::SmallVector<StringRef> lines;
        (*old)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
        for (StringRef line : lines) {
          StringRef rest = line;
          uint64_t step = 0;
          if (!rest.consume_front("{\"step\": ") ||
              rest.consumeInteger(10, step) || step > options.firstStep)
            continue;
          kept += line.str() + "\n";
        }
      }
    }
    std::error_code ec;
    log = std::make_unique<llvm::raw_fd_ostream>(options.logPath, ec);
    if (ec)
      return makeError("cannot write --log " + options.logPath + ": " +
                       ec.message());
    *log << kept;
  }

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  exec.setSeed(options.seed);
  // Where the run stands after `done` steps of this run: what a checkpoint
  // records.
  auto positionAfter = [&](int64_t done) {
    TrainingPosition pos;
    pos.step = options.firstStep + static_cast<uint64_t>(done);
    pos.samplesConsumed =
        options.firstSample + static_cast<uint64_t>(done * globalBatch);
    pos.seed = options.seed;
    pos.dataSamples = data ? data->numSamples() : options.dataSamples;
    return pos;
  };
  uint64_t lastStep = options.firstStep + static_cast<uint64_t>(options.steps);
  // What a step logs: its loss and metrics (means over ranks; integer
  // metrics are sums), its time and rates. The ranks' all-reduce of the loss
  // and metrics starts when the step ends and completes after the next step
  // has run, and the step's line is logged then: the ranks do not meet
  // between steps (a blocking reduction there made the faster rank wait for
  // the slower one every step, before it could start the next). A step that
  // saves a checkpoint, and the last step, complete theirs at once, so that
  // a diverged step is never saved and the log ends with the last step; so
  // does every step of a single rank, which has nothing to reduce.
  struct StepReport {
    uint64_t global = 0;
    int64_t step = 0;
    float loss = 0, lossSum = 0;
    std::vector<double> metricValues, metricSums;
    std::optional<CollectiveHandle> lossHandle, metricHandle;
    float gradNorm = 0, lossScale = 0;
    uint8_t skipped = 0;
    std::optional<double> checkpointMs;
    double ms = 0, samplesPerSec = 0, meanSamplesPerSec = 0;
  };
  bool reduces = options.comm && options.worldSize > 1;
  auto startReport = [&](StepReport &r) -> Error {
    if (!reduces)
      return Error::success();
    Expected<CollectiveHandle> h = options.comm->allReduceStart(
        &r.loss, &r.lossSum, 1, DType::F32, ReduceOp::Sum);
    if (!h)
      return h.takeError();
    r.lossHandle = *h;
    if (r.metricValues.empty())
      return Error::success();
    h = options.comm->allReduceStart(
        r.metricValues.data(), r.metricSums.data(),
        static_cast<int64_t>(r.metricValues.size()), DType::F64, ReduceOp::Sum);
    if (!h)
      return h.takeError();
    r.metricHandle = *h;
    return Error::success();
  };
  // Waits for both reductions, also when the first fails: the report's
  // buffers must outlive its collectives.
  auto completeReport = [&](StepReport &r) -> Error {
    Error lossErr = Error::success(), metricErr = Error::success();
    if (r.lossHandle) {
      lossErr = options.comm->wait(*std::exchange(r.lossHandle, {}));
      r.loss = r.lossSum / options.worldSize;
    }
    if (r.metricHandle) {
      metricErr = options.comm->wait(*std::exchange(r.metricHandle, {}));
      for (size_t i = 0; i < metrics.size(); ++i)
        r.metricValues[i] = metrics[i].isFloat
                                ? r.metricSums[i] / options.worldSize
                                : r.metricSums[i];
    }
    return llvm::joinErrors(std::move(lossErr), std::move(metricErr));
  };
  auto diverged = [](const StepReport &r) {
    return !std::isfinite(r.loss) && !r.skipped;
  };
  // Writes a completed report's log line and progress; a diverged step ends
  // the run.
  auto logReport = [&](const StepReport &r) -> Error {
    if (log && options.rank == 0) {
      // JSON has no NaN or infinity: such a value is written as null and
      // named under "nonfinite".
      std::vector<std::string> nonFinite;
      auto number = [&](StringRef name, double v) -> std::string {
        if (std::isfinite(v))
          return llvm::formatv("{0}", llvm::format("%.9g", v)).str();
        nonFinite.push_back("\"" + jsonEscape(name) + "\": \"" +
                            (std::isnan(v) ? "nan"
                             : v > 0       ? "inf"
                                           : "-inf") +
                            "\"");
        return "null";
      };
      *log << "{\"step\": " << r.global + 1
           << ", \"loss\": " << number("loss", r.loss);
      if (rate->present)
        *log << ", \"lr\": " << number("lr", rate->at(r.global));
      if (gradNormOutput)
        *log << ", \"grad_norm\": " << number("grad_norm", r.gradNorm);
      if (lossScaleOutput) {
        *log << ", \"loss_scale\": " << number("loss_scale", r.lossScale);
        if (r.skipped)
          *log << ", \"skipped\": true";
      }
      if (r.checkpointMs)
        *log << ", \"checkpoint_ms\": "
             << llvm::format("%.3f", *r.checkpointMs);
      *log << ", \"step_ms\": " << llvm::format("%.3f", r.ms)
           << ", \"samples_per_s\": " << llvm::format("%.1f", r.samplesPerSec)
           << ", \"samples_per_s_mean\": "
           << llvm::format("%.1f", r.meanSamplesPerSec)
           << ", \"peak_rss_bytes\": " << peakRssBytes();
      if (!metrics.empty()) {
        *log << ", \"metrics\": {";
        for (size_t i = 0; i < metrics.size(); ++i)
          *log << (i ? ", " : "") << "\"" << jsonEscape(metrics[i].name)
               << "\": " << number(metrics[i].name, r.metricValues[i]);
        *log << "}";
      }
      if (!nonFinite.empty()) {
        *log << ", \"nonfinite\": {";
        for (size_t i = 0; i < nonFinite.size(); ++i)
          *log << (i ? ", " : "") << nonFinite[i];
        *log << "}";
      }
      *log << "}\n";
      log->flush();
    }
    if (options.progress && options.rank == 0) {
      int width = 24;
      int filled =
          options.steps ? int(width * (r.step + 1) / options.steps) : width;
      llvm::errs() << "\r[" << std::string(filled, '#')
                   << std::string(width - filled, ' ') << "] step "
                   << r.global + 1 << "/" << lastStep << "  loss "
                   << llvm::format("%.5f", r.loss) << "  "
                   << llvm::format("%.0f", r.meanSamplesPerSec)
                   << " samples/s (mean) ";
    }
    // A step that loss scaling skipped changed nothing: float16's forward
    // overflowed, and the next step tries again with a smaller scale.
    if (diverged(r)) {
      if (options.progress)
        llvm::errs() << "\n";
      return makeError("step " + Twine(r.global + 1) + ": the loss is " +
                       (std::isnan(r.loss) ? "nan" : "inf") +
                       " although every input of the data set is finite: "
                       "training diverged; lower the learning rate");
    }
    return Error::success();
  };
  // The previous step's report, its reduction in flight. On every return its
  // buffers outlive the collective, as the executor's do (drainInFlight).
  std::unique_ptr<StepReport> pending;
  auto finishPending = [&]() -> Error {
    if (!pending)
      return Error::success();
    std::unique_ptr<StepReport> r = std::move(pending);
    if (Error err = completeReport(*r))
      return err;
    return logReport(*r);
  };
  auto drainPending = llvm::make_scope_exit([&] {
    if (pending)
      llvm::consumeError(completeReport(*pending));
  });

  for (int64_t step = 0; step < options.steps; ++step) {
    auto t0 = Clock::now();
    double t0Us = nowMicros();
    // The global step: data and dropout masks continue where a resumed
    // run's checkpoint left them.
    uint64_t global = options.firstStep + static_cast<uint64_t>(step);
    llvm::SmallVector<int64_t, 4> firsts;
    for (int64_t m = 0; m < accum; ++m)
      firsts.push_back(static_cast<int64_t>(options.firstSample) +
                       ((step * accum + m) * options.worldSize + options.rank) *
                           batch);
    if (Error err = data->bind(exec, firsts))
      return err;
    exec.setStep(global);
    if (Error err = exec.run())
      return makeError("step " + Twine(global + 1) + ": " +
                       toString(std::move(err)));
    if (Error err = finishPending())
      return err;
    auto report = std::make_unique<StepReport>();
    report->global = global;
    report->step = step;
    if (Error err = exec.readOutput(lossOutput, &report->loss))
      return err;
    if (gradNormOutput)
      if (Error err = exec.readOutput(*gradNormOutput, &report->gradNorm))
        return err;
    if (lossScaleOutput) {
      if (Error err = exec.readOutput(*lossScaleOutput, &report->lossScale))
        return err;
      if (Error err = exec.readOutput(*skippedOutput, &report->skipped))
        return err;
      skippedSteps += report->skipped ? 1 : 0;
    }
    for (const Metric &m : metrics) {
      TensorView v = exec.output(m.output);
      // The metric's first element, read from wherever the backend keeps it.
      union {
        float f32;
        double f64;
        int64_t i64;
        int32_t i32;
      } first{};
      if (Error err = exec.readOutput(m.output, &first))
        return err;
      report->metricValues.push_back(v.dtype == DType::F32   ? first.f32
                                     : v.dtype == DType::F64 ? first.f64
                                     : v.dtype == DType::I64
                                         ? double(first.i64)
                                         : double(first.i32));
    }
    report->metricSums.resize(report->metricValues.size());
    pending = std::move(report);
    if (Error err = startReport(*pending))
      return err;
    // Checkpoints: a save every K steps (the copy out of the executor holds
    // this step up; the writing overlaps the next steps), else a check
    // whether the pending one can be published.
    uint64_t done = global + 1;
    bool saves = options.checkpoints && options.checkpointEvery > 0 &&
                 done % static_cast<uint64_t>(options.checkpointEvery) == 0;
    std::unique_ptr<StepReport> now;
    if (saves || step + 1 == options.steps || !reduces) {
      now = std::move(pending);
      if (Error err = completeReport(*now))
        return err;
    }
    if (saves && !diverged(*now)) {
      if (Error err = options.checkpoints->save(exec, positionAfter(step + 1)))
        return err;
      now->checkpointMs = options.checkpoints->lastHoldMs();
    } else if (options.checkpoints && !saves) {
      if (Error err = options.checkpoints->poll())
        return err;
    }
    StepReport &r = now ? *now : *pending;
    r.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    double elapsed =
        std::chrono::duration<double>(Clock::now() - start).count();
    // This step's rate, and the mean rate since the first step.
    r.samplesPerSec = r.ms > 0 ? globalBatch * 1000.0 / r.ms : 0;
    r.meanSamplesPerSec = elapsed > 0 ? (step + 1) * globalBatch / elapsed : 0;
    exec.addTraceEvent({"step " + std::to_string(global + 1), "step", t0Us,
                        nowMicros() - t0Us});
    if (now)
      if (Error err = logReport(*now))
        return err;
  }
  if (options.progress && options.rank == 0)
    llvm::errs() << "\n";
  if (skippedSteps > 0 && options.rank == 0)
    llvm::errs() << "shardrun: loss scaling skipped " << skippedSteps << " of "
                 << options.steps
                 << " steps (a gradient was inf or NaN; the scale backed "
                    "off)\n";
  // The last step is always saved (unless it is saved already), and the
  // run ends only once its checkpoint is complete.
  if (options.checkpoints) {
    if (options.checkpoints->savedStep() != lastStep)
      if (Error err =
              options.checkpoints->save(exec, positionAfter(options.steps)))
        return err;
    if (Error err = options.checkpoints->finish())
      return err;
  }
  if (!options.exportPath.empty())
    return exportModel(exec, plan, planDir, options.exportPath, options.comm,
                       options.exportData);
  return Error::success();
}

/// Replaces an initializer's data by `bytes` (raw, little-endian).
static void setInitializerData(onnx::TensorProto &init,
                               llvm::ArrayRef<uint8_t> bytes) {
  init.clear_float_data();
  init.clear_double_data();
  init.clear_int32_data();
  init.clear_int64_data();
  init.clear_external_data();
  init.set_data_location(onnx::TensorProto::DEFAULT);
  init.set_raw_data(bytes.data(), bytes.size());
}

static bool sameShape(const onnx::TensorProto &init,
                      llvm::ArrayRef<int64_t> shape) {
  if (init.dims_size() != static_cast<int>(shape.size()))
    return false;
  for (int d = 0; d < init.dims_size(); ++d)
    if (init.dims(d) != shape[d])
      return false;
  return true;
}

namespace {
/// Where the exported model's initializer data goes: inline, or appended to
/// FILE.data (written under a temporary name until commit()).
class InitializerData {
public:
  static Expected<std::unique_ptr<InitializerData>> open(StringRef modelPath,
                                                         bool external) {
    std::unique_ptr<InitializerData> d(new InitializerData());
    if (!external)
      return std::move(d);
    d->finalPath = (modelPath + ".data").str();
    d->location = llvm::sys::path::filename(d->finalPath).str();
    d->tmpPath = d->finalPath + ".tmp";
    std::error_code ec;
    d->out = std::make_unique<llvm::raw_fd_ostream>(d->tmpPath, ec);
    if (ec)
      return makeError("--export: cannot write " + d->tmpPath + ": " +
                       ec.message());
    return std::move(d);
  }
  ~InitializerData() {
    if (out && !committed) {
      out->close();
      out->clear_error();
      llvm::sys::fs::remove(tmpPath);
    }
  }

  bool external() const { return out != nullptr; }

  /// Makes `bytes` the data of `init`.
  Error put(onnx::TensorProto &init, llvm::ArrayRef<uint8_t> bytes) {
    if (!out || bytes.size() < kExternalMinBytes) {
      setInitializerData(init, bytes);
      return Error::success();
    }
    uint64_t offset = llvm::alignTo(size, kAlign);
    out->write_zeros(offset - size);
    out->write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    if (out->has_error())
      return makeError("--export: writing " + tmpPath +
                       " failed: " + out->error().message());
    size = offset + bytes.size();
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.clear_raw_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char *key, const std::string &value) {
      onnx::StringStringEntryProto *e = init.add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(bytes.size()));
    return Error::success();
  }

  /// Puts FILE.data in place (before the model that refers to it).
  Error commit() {
    if (!out)
      return Error::success();
    out->close();
    if (out->has_error())
      return makeError("--export: writing " + tmpPath +
                       " failed: " + out->error().message());
    if (std::error_code ec = llvm::sys::fs::rename(tmpPath, finalPath))
      return makeError("--export: cannot write " + finalPath + ": " +
                       ec.message());
    committed = true;
    return Error::success();
  }

private:
  InitializerData() = default;
  /// ONNX's own threshold (onnx.save's size_threshold) and an alignment
  /// that lets readers map each tensor.
  static constexpr size_t kExternalMinBytes = 1024;
  static constexpr uint64_t kAlign = 64;
  std::string finalPath, tmpPath, location;
  std::unique_ptr<llvm::raw_fd_ostream> out;
  uint64_t size = 0;
  bool committed = false;
};
} // namespace

/// The data of a source-model initializer that the plan keeps as external
/// data: a file of the plan directory listed in its manifest (checked
/// against its SHA-256 when the plan was loaded), within its bounds.
static Expected<std::vector<uint8_t>>
readPlanExternalData(const onnx::TensorProto &init, StringRef planDir,
                     const plan::Manifest &manifest) {
  std::string what =
      "--export: initializer '" + init.name() + "' of the plan's source model";
  std::string location;
  uint64_t offset = 0, length = 0;
  bool hasLength = false;
  for (const onnx::StringStringEntryProto &e : init.external_data()) {
    if (e.key() == "location") {
      location = e.value();
      continue;
    }
    if (e.key() != "offset" && e.key() != "length")
      continue;
    uint64_t &value = e.key() == "offset" ? offset : length;
    hasLength |= e.key() == "length";
    if (StringRef(e.value()).getAsInteger(10, value))
      return makeError(what + ": external data " + e.key() + " '" + e.value() +
                       "' is not a number");
  }
  std::optional<DType> dtype = dtypeFromCode(init.data_type());
  std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
  int64_t n = 1;
  bool sized = dtype.has_value();
  for (int64_t d : dims)
    sized = sized && d >= 0 && !llvm::MulOverflow(n, d, n);
  if (!sized ||
      (hasLength && length != static_cast<uint64_t>(n) * dtypeSize(*dtype)))
    return makeError(what + " has external data of another size than its "
                            "type and shape");
  length = static_cast<uint64_t>(n) * dtypeSize(*dtype);
  if (!plan::isPlainFileName(location) || !manifest.find(location))
    return makeError(what + ": its external data '" + location +
                     "' is not a file of the plan");
  Expected<std::unique_ptr<plan::ReadOnlyFile>> file =
      plan::ReadOnlyFile::open(planDir, location);
  if (!file)
    return file.takeError();
  if (offset > (*file)->size() || length > (*file)->size() - offset)
    return makeError(what + ": its external data [" + Twine(offset) + ", " +
                     Twine(offset + length) + ") runs past the end of " +
                     (*file)->path());
  std::vector<uint8_t> bytes(length);
  if (Error err = (*file)->read(offset, bytes))
    return std::move(err);
  return std::move(bytes);
}

Error exportModel(const Executor &exec, const plan::Plan &plan,
                  StringRef planDir, StringRef path, Communicator *comm,
                  ExportData dataMode) {
  if (!plan.has_training() || plan.training().source_model().empty())
    return makeError("--export: the plan in " + planDir +
                     " carries no source model");
  int rank = comm ? comm->rank() : 0;
  // Units are gathered within the shard group (every rank, unless hybrid
  // sharding replicates the shards across groups; rank 0's group holds one
  // whole copy).
  Communicator *shards = comm ? &exec.shardGroup() : nullptr;
  int world = shards ? shards->worldSize() : 1;
  // The units' layout, checked before any collective: the checks depend on
  // the plan alone, so every rank fails alike. (The loader validated them.)
  for (const plan::FlatUnit &unit : plan.units()) {
    if (unit.buffer() == -1) // stages 1-2: whole parameter buffers
      continue;
    std::string what = "--export: unit '" + unit.name() + "'";
    if (unit.buffer() < 0 || unit.buffer() >= plan.buffers_size())
      return makeError(what + ": buffer index " + Twine(unit.buffer()) +
                       " is out of range");
    // (An offloaded shard has no data in memory: readBuffer reads it.)
    TensorView shard = exec.buffer(unit.buffer());
    int64_t held = shard.numel() * (unit.whole() ? 1 : world);
    if (held != unit.padded_elements() ||
        unit.padded_elements() % std::max(world, 1) != 0)
      return makeError(what + ": " + Twine(world) + " shards of " +
                       Twine(shard.numel()) + " elements are not its " +
                       Twine(unit.padded_elements()) + " padded elements");
    int64_t fullElems = unit.padded_elements();
    for (const plan::FlatParam &p : unit.params()) {
      int64_t n = 1;
      bool ok = p.offset() >= 0;
      for (int64_t d : p.shape())
        ok = ok && d >= 0 && !llvm::MulOverflow(n, d, n);
      ok = ok && n <= fullElems && p.offset() <= fullElems - n;
      if (!ok)
        return makeError(what + ": parameter '" + p.name() + "' (offset " +
                         Twine(p.offset()) + ", shape " +
                         shapeToString(std::vector<int64_t>(p.shape().begin(),
                                                            p.shape().end())) +
                         ") lies outside the unit's " + Twine(fullElems) +
                         " elements");
    }
  }
  // Rank 0 writes the model; every rank takes part in gathering the ZeRO-3
  // shards, so all learn whether rank 0 could read the source model before
  // the first gather.
  onnx::ModelProto model;
  llvm::StringMap<onnx::TensorProto *> inits;
  Error readError = Error::success();
  if (rank == 0) {
    Expected<onnx::ModelProto> modelOr = readSourceModel(plan, planDir);
    if (!modelOr)
      readError = modelOr.takeError();
    else if (Error err = checkParametersMatch(plan, *modelOr, planDir))
      readError = std::move(err);
    else
      model = std::move(*modelOr);
    for (onnx::TensorProto &init :
         *model.mutable_graph()->mutable_initializer())
      inits[init.name()] = &init;
  }
  if (comm && comm->worldSize() > 1) {
    int32_t failed = readError ? 1 : 0, any = failed;
    if (Error err =
            comm->allReduce(&failed, &any, 1, DType::I32, ReduceOp::Max)) {
      llvm::consumeError(std::move(readError));
      return err;
    }
    if (any && !readError)
      return makeError("--export: rank 0 could not read the source model of "
                       "the plan in " +
                       planDir + " (its message says why)");
  }
  if (readError)
    return readError;
  std::unique_ptr<InitializerData> data;
  if (rank == 0) {
    bool external = dataMode == ExportData::External ||
                    (dataMode == ExportData::Auto &&
                     llvm::any_of(model.graph().initializer(),
                                  [](const onnx::TensorProto &init) {
                                    return init.data_location() ==
                                           onnx::TensorProto::EXTERNAL;
                                  }));
    Expected<std::unique_ptr<InitializerData>> d =
        InitializerData::open(path, external);
    if (!d)
      return d.takeError(); // before any gather: the others fail in it
    data = std::move(*d);
  }
  llvm::StringSet<> written;

  // ZeRO-3 flat parameters, one unit at a time: gathered, copied into the
  // model (rank 0), released.
  for (const plan::FlatUnit &unit : plan.units()) {
    if (unit.buffer() == -1) // stages 1-2: whole parameter buffers
      continue;
    TensorView buffer = exec.buffer(unit.buffer());
    size_t elem = dtypeSize(buffer.dtype);
    Expected<std::vector<uint8_t>> held = exec.readBuffer(unit.buffer());
    if (!held)
      return held.takeError();
    // A whole unit's buffer is current in this rank's shard only (the
    // step gathers the rest before it reads it).
    size_t shardBytes = unit.padded_elements() / world * elem;
    const uint8_t *mine = held->data();
    if (unit.whole())
      mine += shardBytes * static_cast<size_t>(shards ? shards->rank() : 0);
    std::vector<uint8_t> full(shardBytes * world);
    if (shards) {
      if (Error err = shards->allGather(
              mine, full.data(), unit.padded_elements() / world, buffer.dtype))
        return err;
    } else {
      std::memcpy(full.data(), mine, shardBytes);
    }
    if (rank != 0)
      continue;
    for (const plan::FlatParam &p : unit.params()) {
      std::vector<int64_t> shape(p.shape().begin(), p.shape().end());
      onnx::TensorProto *init = inits.lookup(p.name());
      if (!init || !sameShape(*init, shape) ||
          init->data_type() != static_cast<int32_t>(buffer.dtype))
        return makeError("--export: initializer '" + p.name() +
                         "' of the source model does not match the plan's "
                         "sharded parameter of shape " +
                         shapeToString(shape));
      size_t begin = static_cast<size_t>(p.offset()) * elem;
      size_t bytes = static_cast<size_t>(numElements(shape)) * elem;
      if (Error err = data->put(
              *init, llvm::ArrayRef<uint8_t>(full.data() + begin, bytes)))
        return err;
      written.insert(p.name());
    }
  }
  if (rank != 0)
    return Error::success();
  std::vector<bool> flat(plan.buffers_size(), false);
  for (const plan::FlatUnit &unit : plan.units())
    if (unit.buffer() >= 0)
      flat[unit.buffer()] = true;
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const plan::Buffer &b = plan.buffers(i);
    if (b.kind() != plan::PARAMETER || flat[i])
      continue;
    onnx::TensorProto *init = inits.lookup(b.name());
    if (!init)
      continue; // checkParametersMatch found every one
    TensorView v = exec.buffer(i);
    if (static_cast<int64_t>(init->data_type()) !=
            static_cast<int64_t>(v.dtype) ||
        init->dims_size() != v.rank())
      return makeError("--export: initializer '" + init->name() +
                       "' of the source model does not match the plan");
    Expected<std::vector<uint8_t>> bytes = exec.readBuffer(i);
    if (!bytes)
      return bytes.takeError();
    if (Error err = data->put(*init, *bytes))
      return err;
    written.insert(init->name());
  }
  // The initializers that are not parameters: data the plan keeps outside
  // its model.onnx comes along, and with external data every large one
  // moves to FILE.data.
  std::optional<plan::Manifest> manifest;
  for (onnx::TensorProto &init :
       *model.mutable_graph()->mutable_initializer()) {
    if (written.contains(init.name()))
      continue;
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      if (!manifest) {
        Expected<plan::Manifest> m = plan::readManifest(planDir);
        if (!m)
          return m.takeError();
        manifest = std::move(*m);
      }
      Expected<std::vector<uint8_t>> bytes =
          readPlanExternalData(init, planDir, *manifest);
      if (!bytes)
        return bytes.takeError();
      if (Error err = data->put(init, *bytes))
        return err;
    } else if (data->external() && init.has_raw_data()) {
      std::string raw = std::move(*init.mutable_raw_data());
      if (Error err =
              data->put(init, llvm::ArrayRef<uint8_t>(
                                  reinterpret_cast<const uint8_t *>(raw.data()),
                                  raw.size())))
        return err;
    }
  }
  if (model.ByteSizeLong() >= (size_t(1) << 31))
    return makeError("--export: the trained model is over 2 GiB with its "
                     "initializers inline, the limit of an ONNX file; export "
                     "it with --export-data external (" +
                     path + " and " + path + ".data)");
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return makeError("--export: the trained model cannot be serialized");
  if (Error err = data->commit())
    return err;
  std::string tmp = path.str() + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      return makeError("--export: cannot write " + tmp + ": " + ec.message());
    os << bytes;
    os.close();
    if (os.has_error())
      return makeError("--export: writing " + tmp + " failed");
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path))
    return makeError("--export: cannot write " + path + ": " + ec.message());
  return Error::success();
}

} // namespace shardc::rt
