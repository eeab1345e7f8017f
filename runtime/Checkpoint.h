//===- Checkpoint.h - Sharded checkpoints of a training run -----*- C++ -*-===//
//
// A checkpoint holds the whole state of a training run (parameters,
// optimizer state, BatchNorm statistics, the loss scale and its tracker, the
// optimizer and LR-schedule step counters) plus its position (the step, the
// data position, the dropout seed), so that a run can stop at any step and
// go on as if it never had.
//
// Logical tensors. A plan holds its state in PARAMETER and STATE buffers,
// some of them shards of a wrap unit's flat layout (plan.proto FlatUnit):
// at ZeRO stage 3 the parameters, at stages 1-3 the optimizer state. A
// checkpoint does not store buffers but the logical tensors behind them
// (each parameter, "<parameter>.exp_avg", "optimizer.step", ...), each cut
// into the pieces the saving ranks hold, padding left out. Any plan of the
// same model, at any world size and stage, maps its own buffers onto the
// same tensors (stateLayout) and reads the element ranges it needs: that is
// resharding, with no conversion step. A value every rank holds alike is
// saved by rank 0 only; a value each rank has of its own (BatchNorm running
// statistics) by every rank, and a rank of a run at another world size
// loads its own rank's or rank 0's.
//
// Saving (CheckpointWriter). At a save, each rank copies its pieces into one
// host buffer (the only time the step is held up) and a background thread
// writes it as `rank-R.data` into a partial directory `.step-N.partial-T-K`
// (T: this job's token, K: the save's number), through a temporary name, fsync
// and rename. After each later step the ranks ask each other (one small
// all-gather) whether every writer has finished; when all have, rank 0 writes
// `checkpoint.pb` and the `manifest` (every file's size and SHA-256) the same
// way, renames the directory to `step-N`, and prunes the oldest beyond
// --keep-last. A directory without its manifest is not a checkpoint, so a job
// killed at any moment leaves the previous checkpoints as they were.
//
// Loading (CheckpointReader). Every rank checks the manifest and
// checkpoint.pb, the checkpoint's model against the plan's, and that the
// checkpoint holds exactly the tensors the plan needs (none missing, none
// left over); the ranks share out checking the data files' SHA-256, and
// each piece read is checked against its own checksum. A rank that finds a
// problem names the file; the others stop with it.
//
// The format is documented for readers without Shard in docs/checkpoints.md.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CHECKPOINT_H
#define SHARDC_RUNTIME_CHECKPOINT_H

#include "plan/PlanIO.h"
#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace shardc::rt {

/// The version of checkpoint.pb and the manifest this build writes and
/// reads.
constexpr uint32_t kCheckpointVersion = 1;
/// File names inside a checkpoint directory.
constexpr const char *kCheckpointFile = "checkpoint.pb";
/// "shard-checkpoint 1", checkpoint.pb.
extern const plan::ManifestKind kCheckpointManifest;

/// One logical tensor of a training run's state.
struct StateTensor {
  std::string name;
  DType dtype = DType::Undefined;
  llvm::SmallVector<int64_t, 4> shape;
  /// Each rank has a value of its own (plan.proto CheckpointTensor).
  bool perRank = false;
  int64_t numel() const { return numElements(shape); }
};

/// Elements [tensorElement, tensorElement + elements) of `tensor` are
/// elements [bufferElement, bufferElement + elements) of plan buffer
/// `buffer` on one rank.
struct StateSlice {
  size_t tensor = 0; // index into StateLayout::tensors
  int32_t buffer = -1;
  int64_t bufferElement = 0, tensorElement = 0, elements = 0;
  /// Whether this rank saves the slice (a value every rank holds alike is
  /// saved by rank 0 only).
  bool saved = false;
};

/// The state of a training plan as logical tensors, and where one rank
/// holds them.
struct StateLayout {
  /// The same list on every rank, in plan order.
  std::vector<StateTensor> tensors;
  /// The rank's slices: every element of every tensor the rank holds.
  std::vector<StateSlice> slices;
};

/// The layout of every PARAMETER and STATE buffer of a validated plan on
/// rank `rank` of its world size.
llvm::Expected<StateLayout> stateLayout(const plan::Plan &plan, int rank);

/// Where a training run stands.
struct TrainingPosition {
  /// Optimizer steps done.
  uint64_t step = 0;
  /// The next step's first position in the sample stream (Trainer.h).
  uint64_t samplesConsumed = 0;
  /// shardrun --seed.
  uint64_t seed = 0;
  /// Samples in the data set (0: none given).
  int64_t dataSamples = 0;
};

/// The checkpoints `step-N` in `dir` that are complete (hold a manifest),
/// oldest first.
std::vector<std::pair<uint64_t, std::string>>
completeCheckpoints(llvm::StringRef dir);

struct CheckpointOptions {
  /// The directory the checkpoints `step-N` go to (created if needed).
  std::string dir;
  /// Keep the newest this many complete checkpoints (0: all).
  int64_t keepLast = 0;
};

/// Saves checkpoints of one rank's executor; every rank of the job has one
/// and calls its methods at the same points (they communicate).
class CheckpointWriter {
public:
  /// Creates `options.dir` and agrees on this job's token. `loaded` is the
  /// plan the executor runs; `comm` the job's communicator (nullptr: one
  /// rank).
  static llvm::Expected<std::unique_ptr<CheckpointWriter>>
  create(const CheckpointOptions &options, const plan::LoadedPlan &loaded,
         Communicator *comm);
  ~CheckpointWriter();

  /// Copies this rank's state out of `exec` and starts writing it in the
  /// background as checkpoint `step-<position.step>`. A save still pending
  /// is finished first.
  llvm::Error save(const Executor &exec, const TrainingPosition &position);
  /// Publishes the pending save once every rank has written its data;
  /// call after every step.
  llvm::Error poll();
  /// Waits for the pending save and publishes it.
  llvm::Error finish();

  /// Milliseconds the last save() held its caller up.
  double lastHoldMs() const { return holdMs; }
  /// The step of the last save() (pending or complete), or else of the
  /// newest complete checkpoint the directory held at create(), if any (the
  /// same on every rank).
  std::optional<uint64_t> savedStep() const { return saved; }

private:
  CheckpointWriter() = default;
  struct Pending;
  /// Every rank sees the files rank 0 writes in the directory (a shared
  /// file system across hosts), or all fail naming the ranks that do not.
  llvm::Error checkShared();
  /// Every rank's writer state: 0 writing, 1 written, 2 failed.
  llvm::Expected<bool> allWritten(bool wait);
  llvm::Error publish();
  llvm::Error prune();

  CheckpointOptions options;
  plan::Plan plan;
  std::string modelSha256, planDigest;
  Communicator *comm = nullptr;
  int rank = 0, world = 1;
  std::string token;
  std::unique_ptr<Pending> pending;
  double holdMs = 0;
  std::optional<uint64_t> saved;
  /// Saves started: part of each partial directory's name.
  uint64_t saves = 0;
};

/// A complete checkpoint, opened and checked.
class CheckpointReader {
public:
  /// `path` is a checkpoint directory (it has a manifest) or a directory
  /// of them `step-N`, of which the newest complete one is taken.
  static llvm::Expected<std::unique_ptr<CheckpointReader>>
  open(llvm::StringRef path);

  const plan::Checkpoint &checkpoint() const { return info; }
  /// The checkpoint directory opened.
  const std::string &dir() const { return path; }

  /// Loads the checkpoint into `exec`, which runs `loaded` as rank
  /// comm->rank() (comm nullptr: one rank). Every rank calls it; when one
  /// fails, all do.
  llvm::Error load(Executor &exec, const plan::LoadedPlan &loaded,
                   Communicator *comm);

private:
  CheckpointReader() = default;
  llvm::Error loadHere(Executor &exec, const plan::LoadedPlan &loaded, int rank,
                       int world);

  std::string path;
  plan::Manifest manifest;
  plan::Checkpoint info;
};

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_CHECKPOINT_H
