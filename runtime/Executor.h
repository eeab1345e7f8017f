//===- Executor.h - Runs a loaded plan on a kernel backend ------*- C++ -*-===//
//
// The executor turns a validated plan into device buffers and a list of
// steps, then runs the steps in plan order on one compute stream:
//
//   auto backend = rt::createCpuBackend();
//   auto exec = rt::Executor::create(*loadedPlan, *backend);
//   (*exec)->setInput("x", view);       // dtype and shape are checked
//   (*exec)->run();
//   rt::TensorView y = (*exec)->output(0);
//
// Steps: create() resolves every op once: a kernel (the backend's function,
// looked up by op type), a collective start or a collective wait
// (runtime/comm/CollectiveOps.h), with its buffer indices and attributes.
// run() then does no lookups by op type.
// Memory: create() allocates one arena on the backend, laid out by the
// memory plan (plan/MemoryPlan.h), and copies parameters and constants in;
// no allocator runs during a step. A TEMP buffer's view points at its arena
// slot from before the first op that touches it until after the last (null
// otherwise), and other TEMP buffers reuse the slot when it is dead; a view
// (alias) buffer lives in its root's memory. Buffers reach kernels only
// through `bufferViews`.
// Communication: before a collective start, the executor records the start's
// event on the compute stream and hands it to the communicator with the
// buffers; the matching wait makes the compute stream wait for the
// collective (the contract is in runtime/comm/Communicator.h).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_EXECUTOR_H
#define SHARDC_RUNTIME_EXECUTOR_H

#include "plan/MemoryPlan.h"
#include "plan/PlanIO.h"
#include "runtime/Attrs.h"
#include "runtime/Backend.h"
#include "runtime/OffloadTier.h"
#include "runtime/Tensor.h"
#include "runtime/comm/CollectiveOps.h"
#include "runtime/comm/Communicator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardc::rt {

/// A plan op's attribute as kernels read it (KernelContext::attrs).
AttrValue convertAttr(const plan::Attribute &attr);

/// Name, element type and shape of a graph input or output.
struct ValueInfo {
  std::string name;
  DType dtype = DType::Undefined;
  llvm::SmallVector<int64_t, 6> shape;

  /// "float32 [2, 3]".
  std::string typeString() const;
};

/// One kernel or collective step for a Chrome trace (microseconds on the
/// nowMicros() axis).
struct TraceEvent {
  std::string name;
  /// "kernel", "recompute" (a kernel that recomputes an activation),
  /// "collective-start", "collective-wait", "offload-start", "offload-wait",
  /// "offload" (a transfer), "step" (the trainer's).
  std::string category;
  double startUs = 0, durationUs = 0;
};

/// Bytes the executor had allocated, peak per memory category and in total.
struct MemoryUsage {
  std::array<uint64_t, plan::kNumCategories> peak{};
  uint64_t peakTotal = 0;
  /// The one allocation the buffers live in (plan::MemoryPlan::arenaBytes).
  uint64_t arenaBytes = 0;
};

/// Wall-clock time of one op over all runs since profiling was enabled.
struct OpProfile {
  std::string type;
  std::string name;
  double seconds = 0.0;
  uint64_t calls = 0;
};

/// How an executor runs, beyond the plan.
struct ExecutorOptions {
  /// Where the offload tier's file goes (shardrun --offload-dir); needed
  /// when the plan offloads buffers (shardc --offload).
  std::string offloadDir;
};

class Executor {
public:
  /// Allocates every buffer of `plan` on `backend` and copies parameter and
  /// constant bytes in. Checks that the plan is valid (a plan from
  /// plan::loadPlan always is), that `backend` has a kernel for every op type
  /// that is not a collective, and that every collective start has operands
  /// that fit it and exactly one later wait.
  /// `plan` may be destroyed afterwards; `backend` must outlive the executor.
  /// `comm` runs the plan's collectives (nullptr: a single rank); it must
  /// outlive the executor.
  static llvm::Expected<std::unique_ptr<Executor>>
  create(const plan::LoadedPlan &plan, KernelBackend &backend,
         Communicator *comm = nullptr, const ExecutorOptions &options = {});

  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Graph inputs, in plan order.
  size_t numInputs() const { return inputs.size(); }
  const ValueInfo &inputInfo(size_t i) const { return inputs[i].info; }
  /// The position of the graph input called `name`.
  std::optional<size_t> findInput(llvm::StringRef name) const;

  /// Copies `value` into graph input `i` (< numInputs()). Its dtype and shape
  /// must equal the input's, else an error naming the input and both types.
  /// Inputs keep their values across runs.
  llvm::Error setInput(size_t i, const TensorView &value);
  /// Same, by name; an unknown name is an error listing the inputs.
  llvm::Error setInput(llvm::StringRef name, const TensorView &value);

  /// Runs every op once, in plan order, and waits for the result. Every
  /// graph input must have been set.
  llvm::Error run();

  /// The random state kernels see (KernelContext::seed and step): Dropout's
  /// masks are a function of the seed, the step and the element. Both are 0
  /// until set; the trainer sets the step before every run.
  void setSeed(uint64_t value) { randomSeed = value; }
  void setStep(uint64_t value) { globalStep = value; }

  /// Graph outputs, in plan order.
  size_t numOutputs() const { return outputs.size(); }
  const ValueInfo &outputInfo(size_t i) const { return outputs[i].info; }
  /// A view of graph output `i` (< numOutputs()); the memory belongs to the
  /// executor and holds the result of the last run() until the next one.
  TensorView output(size_t i) const { return view(outputs[i].buffer); }

  /// Every buffer of the plan (parameters, state, activations), by plan
  /// index, as kernels see it. Parameters and state persist across runs.
  size_t numBuffers() const { return bufferViews.size(); }
  TensorView buffer(size_t i) const { return view(i); }
  /// Copies buffer `i` (< numBuffers()) into `host` (buffer(i).bytes()
  /// bytes): how the host reads results on a backend whose memory it cannot
  /// read directly (KernelBackend::hostAccessible()).
  llvm::Error readBuffer(size_t i, void *host) const;
  /// The same for graph output `i` (< numOutputs()).
  llvm::Error readOutput(size_t i, void *host) const {
    return readBuffer(static_cast<size_t>(outputs[i].buffer), host);
  }
  /// Buffer `i`'s bytes, copied to the host.
  llvm::Expected<std::vector<uint8_t>> readBuffer(size_t i) const;
  /// Copies `host` (buffer(i).bytes() bytes) into PARAMETER or STATE buffer
  /// `i` (< numBuffers()): how a checkpoint is loaded. The value persists
  /// until a step updates it.
  llvm::Error writeBuffer(size_t i, const void *host);
  /// The backend the buffers live on.
  const KernelBackend &kernelBackend() const { return backend; }

  /// Peak bytes allocated so far, by category (measured, not predicted).
  const MemoryUsage &memoryUsage() const { return usage; }

  /// Records a trace event per op from now on.
  void setTracing(bool enabled) { tracing = enabled; }
  /// Adds the caller's event to the trace (the trainer's steps, category
  /// "step"), when tracing.
  void addTraceEvent(TraceEvent event) {
    if (tracing)
      events.push_back(std::move(event));
  }
  llvm::ArrayRef<TraceEvent> traceEvents() const { return events; }

  /// The ranks that hold the shards of one copy of the sharded state (the
  /// plan's shard axes): every rank without hybrid sharding.
  Communicator &shardGroup() const { return *shardComm; }
  const plan::RankMesh &rankMesh() const { return mesh; }

  /// Op types the executor runs itself (collectives), besides kernels.
  static llvm::ArrayRef<llvm::StringRef> collectiveOpTypes() {
    return rt::collectiveOpTypes();
  }

  /// Turns per-op timing on or off (off by default); enabling it clears
  /// earlier measurements.
  void setProfiling(bool enabled);
  /// One entry per op of the plan, in plan order.
  llvm::ArrayRef<OpProfile> profile() const { return opProfiles; }

private:
  enum class StepKind : uint8_t { Kernel, CollectiveStart, CollectiveWait };
  /// One op of the plan, resolved by create().
  struct Step {
    StepKind kind = StepKind::Kernel;
    /// Kernel steps: the backend's kernel for the op type.
    KernelFn kernel = nullptr;
    /// Collective starts: which collective.
    CollectiveOpKind collective = CollectiveOpKind::Wait;
    /// Collective steps: the slot of `inFlight` that the start fills and
    /// its wait empties.
    int32_t slot = -1;
    /// Collectives and kernels that take the rank (ShardSlice): the ranks
    /// the op spans (its mesh_axes), as a communicator.
    Communicator *group = nullptr;
    /// Collective starts: recorded on the compute stream right before the
    /// start; the communicator touches the buffers only after it.
    std::unique_ptr<Event> inputReady;
    std::string type;
    std::string name;
    /// Trace event name ("<type> '<name>'") and category.
    std::string label;
    const char *category = "kernel";
    AttrMap attrs;
    /// Buffer indices; -1 for an absent optional operand.
    llvm::SmallVector<int32_t, 4> inputBuffers, outputBuffers;
    /// Views handed to the kernel, rebuilt from bufferViews by bindStep().
    llvm::SmallVector<TensorView, 4> inputViews, outputViews;
  };
  struct Port {
    ValueInfo info;
    int32_t buffer = -1;
    bool bound = false;
  };

  explicit Executor(KernelBackend &backend) : backend(backend) {}
  llvm::Error allocateBuffers(const plan::LoadedPlan &plan);
  llvm::Error allocateTemp(int32_t buffer);
  void freeTemp(int32_t buffer);
  /// Resolves op `index` of `plan` into steps.back() (already pushed).
  llvm::Error resolveStep(const plan::Plan &plan, int index);
  /// The communicator of the ranks along mesh `axes`: `comm`, or a group
  /// split from it (made the first time; every rank makes the same groups
  /// in the same order, from the same plan).
  llvm::Expected<Communicator *> groupAlong(const std::vector<int32_t> &axes);
  /// Pairs every collective start with its wait.
  llvm::Error assignCollectiveSlots(const plan::Plan &plan);
  llvm::Error runStep(Step &step);
  /// Waits for the collectives a failed run left in flight.
  void drainInFlight();
  /// Buffer `index` as kernels see it (a view resolves into its root).
  TensorView view(int32_t index) const;
  struct Alias {
    int32_t root = -1;
    size_t offset = 0;
  };
  std::vector<Alias> aliases;
  void bindStep(Step &step) const;
  std::string inputList() const;

  KernelBackend &backend;
  std::unique_ptr<Stream> computeStream;
  /// Backend allocations owned by the executor (freed in the destructor).
  std::vector<void *> allocations;
  /// The arena every buffer lives in (allocations[0]).
  char *arena = nullptr;
  /// Buffer i of the plan as kernels see it.
  std::vector<TensorView> bufferViews;
  /// Whether buffer i is a PARAMETER or STATE (writeBuffer may fill it).
  std::vector<bool> persistent;
  std::vector<Step> steps;
  std::vector<Port> inputs, outputs;
  bool profiling = false;
  std::vector<OpProfile> opProfiles;

  Communicator *comm = nullptr;
  std::unique_ptr<Communicator> ownComm;
  /// The plan's rank mesh, and the groups of it its ops run over, by axes
  /// (destroyed before the communicator they were split from).
  plan::RankMesh mesh;
  std::map<std::vector<int32_t>, std::unique_ptr<Communicator>> groups;
  Communicator *shardComm = nullptr;
  /// Buffer categories and when TEMP buffers are allocated and freed.
  std::vector<int> categories;
  plan::MemoryPlan memoryPlan;
  std::vector<bool> tempAllocated;
  std::array<uint64_t, plan::kNumCategories> live{};
  uint64_t liveTotal = 0;
  MemoryUsage usage;
  /// In-flight collectives, by the slot of their start and wait steps, and
  /// the communicator each was started on.
  std::vector<std::optional<CollectiveHandle>> inFlight;
  std::vector<Communicator *> inFlightComm;
  /// The offload tier (plans with offloaded buffers), and the transfer in
  /// flight in each slot of a transfer's start and wait (0: none).
  std::unique_ptr<OffloadTier> tier;
  std::vector<uint64_t> inFlightTransfer;
  llvm::Error startTransfer(Step &step);
  llvm::Error waitTransfer(Step &step);
  void traceTransfer(const OffloadTier::Done &done);
  bool tracing = false;
  std::vector<TraceEvent> events;
  /// On a backend whose kernels run after their launch, the trace's times
  /// come from events recorded around each step (start, end), measured from
  /// `traceAnchor`, reached at `traceAnchorUs`.
  std::unique_ptr<Event> traceAnchor;
  double traceAnchorUs = 0;
  std::vector<std::pair<std::unique_ptr<Event>, std::unique_ptr<Event>>>
      stepTimers;
  llvm::Error startDeviceTrace();
  llvm::Error finishDeviceTrace();
  uint64_t randomSeed = 0;
  uint64_t globalStep = 0;
};

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_EXECUTOR_H
