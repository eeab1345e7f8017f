//===- Trainer.h - The training loop of shardrun ----------------*- C++ -*-===//
//
// Runs a training plan for a number of steps over a data set of .npy files,
// logs one JSON line per step, shows progress on a terminal, and writes the
// trained parameters back into the source ONNX model.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_TRAINER_H
#define SHARDC_RUNTIME_TRAINER_H

#include "plan/PlanIO.h"
#include "runtime/Executor.h"
#include "runtime/Npy.h"
#include "runtime/comm/Communicator.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace shardc::rt {

class CheckpointWriter;

/// A data set: one array per graph input of the plan, first axis = samples.
class Dataset {
public:
  /// Reads DIR/<input name>.npy for every graph input of `exec` and checks
  /// element type and per-sample shape against the plan (an error names the
  /// file, what it holds and what the model needs), and that all arrays hold
  /// the same number of samples.
  static llvm::Expected<Dataset> load(llvm::StringRef dir,
                                      const Executor &exec);

  int64_t numSamples() const { return samples; }
  /// Total bytes of the loaded arrays.
  uint64_t bytes() const;

  /// The first NaN or infinity in a floating-point array, if any.
  struct NonFinite {
    size_t input;    // executor input index
    int64_t sample;  // index along the first axis
    int64_t element; // flat index within the sample
    double value;
  };
  std::optional<NonFinite> firstNonFinite() const;

  /// Binds the executor's inputs, split into `firsts.size()` equal chunks
  /// (the micro-batches of gradient accumulation; one without), chunk c
  /// holding samples [firsts[c], firsts[c] + rows per chunk), wrapping
  /// around at the end of the data.
  llvm::Error bind(Executor &exec, llvm::ArrayRef<int64_t> firsts);

private:
  std::vector<NpyArray> arrays; // indexed like the executor's inputs
  std::vector<std::vector<uint8_t>> staging;
  int64_t samples = 0;
  int64_t batch = 0;
};

/// Where --export writes the initializers' data.
enum class ExportData {
  /// External when the plan's source model keeps its data outside.
  Auto,
  /// In the ONNX file (a protobuf: the model must stay under 2 GiB).
  Inline,
  /// ONNX external data: every initializer of 1 KiB or more in FILE.data
  /// beside FILE, at offsets aligned to 64 bytes.
  External,
};

struct TrainOptions {
  std::string dataDir;
  int64_t steps = 1;
  /// JSON-lines log, one line per step (empty: none).
  std::string logPath;
  /// Write the trained model here after the last step (empty: none).
  std::string exportPath;
  ExportData exportData = ExportData::Auto;
  /// Draw a progress line on stderr.
  bool progress = false;
  /// Data parallel rank and world size: at global step s, rank r takes the
  /// r-th micro-batch of the global batch starting at s * worldSize * B
  /// (with K micro-batches per step, micro-batch m is chunk m * worldSize + r
  /// of the step's worldSize * K * B samples).
  int rank = 0;
  int worldSize = 1;
  /// Averages the logged loss over ranks; nullptr for a single rank.
  Communicator *comm = nullptr;
  /// The seed of the random ops (Dropout masks), the same on every rank.
  uint64_t seed = 0;
  /// The global training step of the first step run, counted from 0: the
  /// s-th step of this run is global step firstStep + s, which picks its
  /// micro-batches and its dropout masks (KernelContext::step), so a run
  /// resumed after k steps continues an uninterrupted one by starting at k.
  uint64_t firstStep = 0;
  /// The first position of the sample stream this run reads (0, or the
  /// data position of the checkpoint it resumes): step s of this run (from
  /// 0) reads positions firstSample + ((s * K + m) * worldSize + rank) * B
  /// + k, k < B, of micro-batch m, sample (position mod samples).
  uint64_t firstSample = 0;
  /// Samples of the data set the resumed run trained on, recorded again
  /// when a run with no step (and no data) saves.
  int64_t dataSamples = 0;
  /// Keep the log lines of steps up to firstStep in --log (a resumed run
  /// continues the log of the run it resumes).
  bool continueLog = false;
  /// Saves a checkpoint after every checkpointEvery-th global step (0:
  /// none) and after the last step; nullptr: no checkpoints.
  CheckpointWriter *checkpoints = nullptr;
  int64_t checkpointEvery = 0;
};

/// Peak resident set size of this process so far, in bytes.
int64_t peakRssBytes();

/// Trains `exec` (built from `plan`, a training plan) for options.steps.
/// `planDir` holds the source model for --export.
llvm::Error train(Executor &exec, const plan::Plan &plan,
                  llvm::StringRef planDir, const TrainOptions &options);

/// Writes the plan's source model (PLAN/model.onnx) to `path` with every
/// initializer that is a parameter of the plan replaced by its current value
/// in `exec`. Sharded (ZeRO-3) parameters are all-gathered over `comm` one
/// wrap unit at a time, so every rank must call this; only rank 0 writes.
/// With external data (`data`), each unit's parameters go to `path`.data as
/// they arrive: rank 0 holds one unit's full parameters at a time.
llvm::Error exportModel(const Executor &exec, const plan::Plan &plan,
                        llvm::StringRef planDir, llvm::StringRef path,
                        Communicator *comm = nullptr,
                        ExportData data = ExportData::Auto);

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_TRAINER_H
