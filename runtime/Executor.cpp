//===- Executor.cpp - Runs a loaded plan on a kernel backend --------------===//
#include "runtime/Executor.h"

#include "runtime/OffloadTier.h"
#include "runtime/comm/Progress.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

#include <cassert>
#include <chrono>
#include <cstdlib>
#include <utility>

namespace shardc::rt {

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace {

Error makeError(const Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

} // namespace

std::string ValueInfo::typeString() const {
  return dtypeName(dtype).str() + " " + shapeToString(shape);
}

/// Whether `op` runs within a group of the rank mesh (hybrid sharding).
static bool namesMeshAxes(const plan::Op &op) {
  return llvm::any_of(op.attributes(), [](const plan::Attribute &a) {
    return a.name() == "mesh_axes";
  });
}

Expected<std::unique_ptr<Executor>>
Executor::create(const plan::LoadedPlan &loaded, KernelBackend &backend,
                 Communicator *comm, const ExecutorOptions &options) {
  const plan::Plan &plan = loaded.plan;
  // Plans from loadPlan are valid already; hand-built ones may not be, and
  // the executor indexes buffers without further checks.
  if (Error err = plan::validatePlan(plan))
    return makeError("cannot run the plan in " + Twine(loaded.dir) + ": " +
                     toString(std::move(err)));

  std::unique_ptr<Executor> exec(new Executor(backend));
  exec->computeStream = backend.createStream();
  if (!comm) {
    exec->ownComm = createSelfCommunicator();
    comm = exec->ownComm.get();
  }
  exec->comm = comm;
  int64_t planWorld = plan.world_size() > 1 ? plan.world_size() : 1;
  if (planWorld != comm->worldSize())
    return makeError(
        "the plan in " + Twine(loaded.dir) + " was compiled for " +
        Twine(planWorld) + " rank(s), but this run has " +
        Twine(comm->worldSize()) + "; recompile with shardc --world-size " +
        Twine(comm->worldSize()) + " or run with --nproc " + Twine(planWorld));
  exec->mesh = plan::RankMesh::of(plan);
  Expected<Communicator *> shards = exec->groupAlong(exec->mesh.shardAxes);
  if (!shards)
    return shards.takeError();
  exec->shardComm = *shards;
  // Every group the ops run in, made now: a split is collective, and every
  // rank must get here before anything that can fail on one rank alone.
  for (const plan::Op &op : plan.ops())
    if (namesMeshAxes(op))
      if (Expected<Communicator *> group =
              exec->groupAlong(plan::collectiveAxes(op, exec->mesh));
          !group)
        return group.takeError();
  exec->memoryPlan = plan::planMemory(plan);
  exec->aliases.resize(plan.buffers_size());
  // A view with a shard stride is this rank's shard's block: its rank in
  // the shard group, where the group's all-gathers put its block.
  const uint64_t shardIndex = static_cast<uint64_t>(exec->shardComm->rank());
  for (int i = 0; i < plan.buffers_size(); ++i)
    if (const plan::Buffer &b = plan.buffers(i); b.is_alias())
      exec->aliases[i] = {
          b.alias_of(),
          static_cast<size_t>(b.alias_offset() +
                              shardIndex * b.alias_shard_stride())};
  exec->tempAllocated.assign(plan.buffers_size(), false);
  for (const plan::Buffer &b : plan.buffers())
    exec->categories.push_back(
        b.category() >= 0 && b.category() < plan::kNumCategories ? b.category()
                                                                 : 0);
  if (uint64_t tierBytes = exec->memoryPlan.offloadBytes) {
    // A device backend keeps the tier in pinned host memory; the CPU
    // backend, whose memory is host memory, in a file.
    Expected<std::unique_ptr<OffloadTier>> tier =
        std::unique_ptr<OffloadTier>();
    if (backend.hasPinnedMemory()) {
      tier = createPinnedTier(backend, tierBytes);
    } else if (!backend.hostAccessible()) {
      return makeError("the plan in " + Twine(loaded.dir) +
                       " offloads buffers (shardc --offload), which the " +
                       backend.name() +
                       " backend cannot run: it has no pinned host memory; "
                       "run it on the cpu backend, or compile it without "
                       "--offload");
    } else if (options.offloadDir.empty()) {
      return makeError("the plan in " + Twine(loaded.dir) + " keeps " +
                       Twine(tierBytes) +
                       " bytes per rank in the offload tier (shardc "
                       "--offload): give shardrun --offload-dir DIR, a "
                       "directory on a disk with room for them");
    } else {
      tier = createFileTier(options.offloadDir, comm->rank(), tierBytes);
    }
    if (!tier)
      return tier.takeError();
    exec->tier = std::move(*tier);
    // Fault tests (docs/faults.md): rank 0 truncates its file before the
    // transfer with this number (1 = the first of the run).
    if (const char *v = std::getenv("SHARDRUN_FAULT_OFFLOAD_TRUNCATE_AT")) {
      uint64_t ticket = 0;
      if (!StringRef(v).getAsInteger(10, ticket) && comm->rank() == 0)
        exec->tier->truncateBefore(ticket);
    }
  }
  if (Error err = exec->allocateBuffers(loaded))
    return std::move(err);

  auto makePort = [&](int32_t index) {
    const plan::Buffer &b = plan.buffers(index);
    Port port;
    port.info.name = b.name();
    port.info.dtype = plan::toRuntime(b.dtype());
    port.info.shape.assign(b.shape().begin(), b.shape().end());
    port.buffer = index;
    return port;
  };
  for (int32_t index : plan.inputs())
    exec->inputs.push_back(makePort(index));
  for (int32_t index : plan.outputs())
    exec->outputs.push_back(makePort(index));

  exec->steps.reserve(plan.ops_size());
  for (int j = 0; j < plan.ops_size(); ++j) {
    exec->steps.emplace_back();
    if (Error err = exec->resolveStep(plan, j))
      return std::move(err);
  }
  if (Error err = exec->assignCollectiveSlots(plan))
    return std::move(err);
  exec->opProfiles.resize(exec->steps.size());
  for (size_t j = 0; j < exec->steps.size(); ++j) {
    exec->opProfiles[j].type = exec->steps[j].type;
    exec->opProfiles[j].name = exec->steps[j].name;
  }
  return std::move(exec);
}

AttrValue convertAttr(const plan::Attribute &attr) {
  switch (attr.value_case()) {
  case plan::Attribute::kI:
    return AttrValue::ofInt(attr.i());
  case plan::Attribute::kF:
    return AttrValue::ofFloat(attr.f());
  case plan::Attribute::kS:
    return AttrValue::ofString(attr.s());
  case plan::Attribute::kInts:
    return AttrValue::ofInts(
        {attr.ints().values().begin(), attr.ints().values().end()});
  case plan::Attribute::kFloats:
    return AttrValue::ofFloats(
        {attr.floats().values().begin(), attr.floats().values().end()});
  case plan::Attribute::VALUE_NOT_SET:
    break;
  }
  // validatePlan rejects attributes without a value.
  return AttrValue();
}

/// "op <index> (<type> '<name>')", how errors name an op of the plan.
static std::string opLabel(const plan::Plan &plan, int index) {
  const plan::Op &op = plan.ops(index);
  return "op " + std::to_string(index) + " (" + op.type() + " '" + op.name() +
         "')";
}

Expected<Communicator *>
Executor::groupAlong(const std::vector<int32_t> &axes) {
  if (axes == mesh.allAxes())
    return comm;
  std::unique_ptr<Communicator> &group = groups[axes];
  if (!group) {
    std::string label = axes.size() == 1 ? "axis " : "axes ";
    for (size_t k = 0; k < axes.size(); ++k)
      label += (k ? ", " : "") + std::to_string(axes[k]);
    Expected<std::unique_ptr<Communicator>> made =
        comm->split(static_cast<int>(mesh.groupOf(comm->rank(), axes)),
                    static_cast<int>(mesh.indexIn(comm->rank(), axes)), label);
    if (!made)
      return makeError("cannot make the rank groups along mesh " + label +
                       ": " + toString(made.takeError()));
    if ((*made)->worldSize() != mesh.groupSize(axes))
      return makeError("the rank group along mesh " + label + " has " +
                       Twine((*made)->worldSize()) + " ranks, not " +
                       Twine(mesh.groupSize(axes)));
    group = std::move(*made);
  }
  return group.get();
}

Error Executor::resolveStep(const plan::Plan &plan, int index) {
  const plan::Op &op = plan.ops(index);
  Step &step = steps.back();
  step.group = comm;
  if (namesMeshAxes(op)) {
    Expected<Communicator *> group = groupAlong(plan::collectiveAxes(op, mesh));
    if (!group)
      return makeError(opLabel(plan, index) + ": " +
                       toString(group.takeError()));
    step.group = *group;
  }
  step.type = op.type();
  step.name = op.name();
  step.label = step.type + " '" + step.name + "'";
  for (const plan::Attribute &attr : op.attributes())
    step.attrs.set(attr.name(), convertAttr(attr));
  step.inputBuffers.assign(op.inputs().begin(), op.inputs().end());
  step.outputBuffers.assign(op.outputs().begin(), op.outputs().end());
  bindStep(step);

  std::optional<CollectiveOpKind> collective = getCollectiveOpKind(op.type());
  if (!collective) {
    step.kind = StepKind::Kernel;
    step.category = op.recompute() ? "recompute" : "kernel";
    step.kernel = backend.lookup(op.type());
    if (!step.kernel)
      return makeError(opLabel(plan, index) + ": the " + backend.name() +
                       " backend has no kernel for op type '" + op.type() +
                       "'");
    return Error::success();
  }
  if (Error err = checkCollectiveOp(*collective, step.inputViews,
                                    step.outputViews, step.group->worldSize()))
    return makeError(opLabel(plan, index) + ": " + toString(std::move(err)));
  if (*collective == CollectiveOpKind::Wait) {
    step.kind = StepKind::CollectiveWait;
    step.category = "collective-wait";
    return Error::success();
  }
  step.kind = StepKind::CollectiveStart;
  step.category = "collective-start";
  step.collective = *collective;
  if (*collective == CollectiveOpKind::OffloadRead ||
      *collective == CollectiveOpKind::OffloadWrite) {
    step.category = "offload-start";
    if (!tier)
      return makeError(opLabel(plan, index) +
                       ": moves a buffer of the offload tier, but the plan "
                       "has none");
  }
  step.inputReady = backend.createEvent();
  return Error::success();
}

Error Executor::assignCollectiveSlots(const plan::Plan &plan) {
  // The start in flight on each buffer, by step index.
  llvm::DenseMap<int32_t, int> started;
  for (size_t j = 0; j < steps.size(); ++j) {
    Step &step = steps[j];
    if (step.kind == StepKind::CollectiveStart) {
      int32_t buffer = step.outputBuffers[0];
      auto [it, inserted] = started.try_emplace(buffer, j);
      if (!inserted)
        return makeError(opLabel(plan, j) + ": starts a collective into '" +
                         plan.buffers(buffer).name() + "' while " +
                         opLabel(plan, it->second) + " is still in flight");
      step.slot = static_cast<int32_t>(inFlight.size());
      inFlight.emplace_back();
      inFlightComm.push_back(step.group);
      inFlightTransfer.push_back(0);
    } else if (step.kind == StepKind::CollectiveWait) {
      auto it = started.find(step.inputBuffers[0]);
      if (it == started.end())
        return makeError(opLabel(plan, j) + ": waits on '" +
                         plan.buffers(step.inputBuffers[0]).name() +
                         "', which no collective in flight writes");
      step.slot = steps[it->second].slot;
      step.group = steps[it->second].group;
      CollectiveOpKind kind = steps[it->second].collective;
      if (kind == CollectiveOpKind::OffloadRead ||
          kind == CollectiveOpKind::OffloadWrite)
        step.category = "offload-wait";
      started.erase(it);
    }
  }
  if (!started.empty()) {
    int first = plan.ops_size();
    for (int j : llvm::make_second_range(started))
      first = std::min(first, j);
    return makeError(opLabel(plan, first) +
                     ": the collective it starts is never waited for");
  }
  return Error::success();
}

void Executor::drainInFlight() {
  for (size_t slot = 0; slot < inFlight.size(); ++slot) {
    if (inFlight[slot])
      llvm::consumeError(inFlightComm[slot]->wait(
          *std::exchange(inFlight[slot], std::nullopt)));
    if (uint64_t ticket = std::exchange(inFlightTransfer[slot], 0))
      llvm::consumeError(tier->wait(ticket, *computeStream).takeError());
  }
}

Error Executor::startTransfer(Step &step) {
  bool read = step.collective == CollectiveOpKind::OffloadRead;
  int32_t tierBuffer = read ? step.inputBuffers[0] : step.outputBuffers[0];
  TensorView memory = read ? step.outputViews[0] : step.inputViews[0];
  Expected<uint64_t> ticket = tier->start(
      read ? OffloadTier::Direction::Read : OffloadTier::Direction::Write,
      memoryPlan.buffers[tierBuffer].offset, memory.data, memory.bytes(),
      *computeStream, tracing);
  if (!ticket)
    return ticket.takeError();
  inFlightTransfer[step.slot] = *ticket;
  return Error::success();
}

void Executor::traceTransfer(const OffloadTier::Done &done) {
  bool write = done.direction == OffloadTier::Direction::Write;
  events.push_back({std::string(write ? "offload write " : "offload read ") +
                        std::to_string(done.bytes) + " B",
                    "offload", done.startUs, done.endUs - done.startUs});
}

Error Executor::waitTransfer(Step &step) {
  uint64_t ticket = std::exchange(inFlightTransfer[step.slot], 0);
  Expected<std::optional<OffloadTier::Done>> done =
      tier->wait(ticket, *computeStream);
  if (!done)
    return done.takeError();
  // A tier on a device knows the times once the step is done
  // (finishDeviceTrace).
  if (tracing && *done)
    traceTransfer(**done);
  return Error::success();
}

Executor::~Executor() {
  drainInFlight();
  for (size_t id = 0; id < tempAllocated.size(); ++id)
    freeTemp(id);
  for (void *p : allocations)
    backend.deallocate(p);
}

/// Fills `bytes` bytes of `host` with `v` in `dtype` (a state's initial
/// value, which validation found exact in its type).
static void fillValue(void *host, DType dtype, size_t bytes, double v) {
  size_t n = bytes / std::max<size_t>(dtypeSize(dtype), 1);
  for (size_t k = 0; k < n; ++k)
    switch (dtype) {
    case DType::F32:
      static_cast<float *>(host)[k] = static_cast<float>(v);
      break;
    case DType::F64:
      static_cast<double *>(host)[k] = v;
      break;
    case DType::I64:
      static_cast<int64_t *>(host)[k] = static_cast<int64_t>(v);
      break;
    case DType::I32:
      static_cast<int32_t *>(host)[k] = static_cast<int32_t>(v);
      break;
    default:
      break;
    }
}

Error Executor::allocateBuffers(const plan::LoadedPlan &loaded) {
  const plan::Plan &plan = loaded.plan;
  if (loaded.bytes.size() != static_cast<size_t>(plan.buffers_size()) &&
      !loaded.bytes.empty())
    return makeError("cannot run the plan in " + Twine(loaded.dir) +
                     ": it has " + Twine(plan.buffers_size()) +
                     " buffers but data for " + Twine(loaded.bytes.size()));
  // One allocation for the whole run: every buffer lives at its offset in
  // the arena the memory plan laid out.
  Expected<void *> mem = backend.allocate(memoryPlan.arenaBytes);
  if (!mem)
    return makeError("cannot allocate the plan's memory arena of " +
                     Twine(memoryPlan.arenaBytes) + " bytes on the " +
                     backend.name() + " backend: " + toString(mem.takeError()));
  allocations.push_back(*mem);
  arena = static_cast<char *>(*mem);
  usage.arenaBytes = memoryPlan.arenaBytes;
  bufferViews.reserve(plan.buffers_size());
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const plan::Buffer &b = plan.buffers(i);
    persistent.push_back(b.kind() == plan::PARAMETER ||
                         b.kind() == plan::STATE);
    llvm::SmallVector<int64_t, 6> shape(b.shape().begin(), b.shape().end());
    TensorView view(plan::toRuntime(b.dtype()), shape, nullptr);
    size_t bytes = view.bytes();
    if (b.offloaded()) {
      // In the tier, not in memory: parameters are written there; state
      // starts at zero (a new file reads as zeros) or its initial value.
      uint64_t at = memoryPlan.buffers[i].offset;
      Error err = Error::success();
      if (b.kind() == plan::PARAMETER) {
        size_t have = static_cast<size_t>(i) < loaded.bytes.size()
                          ? loaded.bytes[i].size()
                          : 0;
        if (have != bytes)
          return makeError("cannot run the plan in " + Twine(loaded.dir) +
                           ": buffer " + Twine(i) + " '" + b.name() +
                           "' needs " + Twine(bytes) +
                           " bytes of data, the plan has " + Twine(have));
        err = tier->write(at, loaded.bytes[i].data(), bytes);
      } else if (b.initial_value() != 0) {
        std::vector<uint8_t> host(bytes);
        fillValue(host.data(), view.dtype, bytes, b.initial_value());
        err = tier->write(at, host.data(), bytes);
      }
      if (err)
        return makeError("buffer " + Twine(i) + " '" + b.name() +
                         "': " + toString(std::move(err)));
      bufferViews.push_back(std::move(view));
      continue;
    }
    if (b.kind() == plan::TEMP) {
      // Allocated by run() when its first op comes, freed after its last;
      // a view lives in its root's memory.
      bufferViews.push_back(std::move(view));
      continue;
    }
    int category = b.category() >= 0 && b.category() < plan::kNumCategories
                       ? b.category()
                       : 0;
    live[category] += bytes;
    liveTotal += bytes;
    usage.peak[category] = std::max(usage.peak[category], live[category]);
    usage.peakTotal = std::max(usage.peakTotal, liveTotal);
    view.data = arena + memoryPlan.buffers[i].offset;
    if (b.kind() == plan::PARAMETER || b.kind() == plan::CONSTANT) {
      size_t have = static_cast<size_t>(i) < loaded.bytes.size()
                        ? loaded.bytes[i].size()
                        : 0;
      if (have != bytes)
        return makeError("cannot run the plan in " + Twine(loaded.dir) +
                         ": buffer " + Twine(i) + " '" + b.name() + "' needs " +
                         Twine(bytes) + " bytes of data, the plan has " +
                         Twine(have));
      if (Error err = backend.copyToDevice(view.data, loaded.bytes[i].data(),
                                           bytes, *computeStream))
        return makeError("buffer " + Twine(i) + " '" + b.name() +
                         "': " + toString(std::move(err)));
    } else if (b.kind() == plan::STATE) {
      // Optimizer state starts at zero; other state (the loss scale) at its
      // initial value, which the plan's validation found exact in its type.
      Error err = Error::success();
      if (b.initial_value() == 0) {
        err = backend.fillZero(view.data, bytes, *computeStream);
      } else {
        std::vector<uint8_t> host(bytes);
        fillValue(host.data(), view.dtype, bytes, b.initial_value());
        err =
            backend.copyToDevice(view.data, host.data(), bytes, *computeStream);
        // The host bytes must outlive an asynchronous copy.
        if (!err)
          err = computeStream->synchronize();
      }
      if (err)
        return makeError("buffer " + Twine(i) + " '" + b.name() +
                         "': " + toString(std::move(err)));
    }
    bufferViews.push_back(std::move(view));
  }
  return Error::success();
}

void Executor::bindStep(Step &step) const {
  auto bind = [&](llvm::ArrayRef<int32_t> buffers,
                  llvm::SmallVectorImpl<TensorView> &views) {
    views.clear();
    for (int32_t index : buffers)
      views.push_back(index < 0 ? TensorView() : view(index));
  };
  bind(step.inputBuffers, step.inputViews);
  bind(step.outputBuffers, step.outputViews);
}

std::optional<size_t> Executor::findInput(StringRef name) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].info.name == name)
      return i;
  return std::nullopt;
}

std::string Executor::inputList() const {
  if (inputs.empty())
    return "the plan has no inputs";
  std::string s = "the plan's inputs are: ";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i)
      s += ", ";
    s += "'" + inputs[i].info.name + "' (" + inputs[i].info.typeString() + ")";
  }
  return s;
}

Error Executor::setInput(size_t i, const TensorView &value) {
  if (i >= inputs.size())
    return makeError("input index " + Twine(i) + " is out of range; " +
                     inputList());
  Port &port = inputs[i];
  ValueInfo given;
  given.dtype = value.dtype;
  given.shape = value.shape;
  if (value.dtype != port.info.dtype ||
      llvm::ArrayRef<int64_t>(value.shape) !=
          llvm::ArrayRef<int64_t>(port.info.shape))
    return makeError("input '" + port.info.name + "' expects " +
                     port.info.typeString() + ", got " + given.typeString());
  const TensorView &dst = bufferViews[port.buffer];
  size_t bytes = dst.bytes();
  if (bytes && !value.data)
    return makeError("input '" + port.info.name + "': no data given");
  if (Error err =
          backend.copyToDevice(dst.data, value.data, bytes, *computeStream))
    return makeError("input '" + port.info.name +
                     "': " + toString(std::move(err)));
  port.bound = true;
  return Error::success();
}

Error Executor::setInput(StringRef name, const TensorView &value) {
  std::optional<size_t> i = findInput(name);
  if (!i)
    return makeError("the plan has no input '" + name + "'; " + inputList());
  return setInput(*i, value);
}

void Executor::setProfiling(bool enabled) {
  profiling = enabled;
  if (!enabled)
    return;
  for (OpProfile &p : opProfiles) {
    p.seconds = 0.0;
    p.calls = 0;
  }
}

Error Executor::readBuffer(size_t index, void *host) const {
  TensorView v = view(static_cast<int32_t>(index));
  if (tier && index < memoryPlan.buffers.size() &&
      memoryPlan.buffers[index].offloaded)
    return tier->read(memoryPlan.buffers[index].offset, host, v.bytes());
  if (!v.data)
    return makeError("buffer " + Twine(index) +
                     " holds no value now (a temporary not live after the "
                     "step)");
  return backend.copyToHost(host, v.data, v.bytes(), *computeStream);
}

Expected<std::vector<uint8_t>> Executor::readBuffer(size_t index) const {
  std::vector<uint8_t> host(view(static_cast<int32_t>(index)).bytes());
  if (Error err = readBuffer(index, host.data()))
    return std::move(err);
  return host;
}

Error Executor::writeBuffer(size_t index, const void *host) {
  if (index >= persistent.size() || !persistent[index])
    return makeError("buffer " + Twine(index) +
                     " is not a parameter or state buffer of the plan");
  TensorView v = view(static_cast<int32_t>(index));
  if (tier && memoryPlan.buffers[index].offloaded)
    return tier->write(memoryPlan.buffers[index].offset, host, v.bytes());
  if (Error err = backend.copyToDevice(v.data, host, v.bytes(), *computeStream))
    return err;
  return computeStream->synchronize();
}

TensorView Executor::view(int32_t index) const {
  TensorView v = bufferViews[index];
  const Alias &a = aliases[index];
  if (a.root >= 0)
    v.data = bufferViews[a.root].data
                 ? static_cast<char *>(bufferViews[a.root].data) + a.offset
                 : nullptr;
  return v;
}

Error Executor::allocateTemp(int32_t id) {
  if (tempAllocated[id])
    return Error::success();
  TensorView &view = bufferViews[id];
  size_t bytes = view.bytes();
  view.data = arena + memoryPlan.buffers[id].offset;
  tempAllocated[id] = true;
  int c = categories[id];
  live[c] += bytes;
  liveTotal += bytes;
  usage.peak[c] = std::max(usage.peak[c], live[c]);
  usage.peakTotal = std::max(usage.peakTotal, liveTotal);
  return Error::success();
}

void Executor::freeTemp(int32_t id) {
  if (!tempAllocated[id])
    return;
  TensorView &view = bufferViews[id];
  view.data = nullptr;
  tempAllocated[id] = false;
  live[categories[id]] -= view.bytes();
  liveTotal -= view.bytes();
}

Error Executor::runStep(Step &step) {
  switch (step.kind) {
  case StepKind::Kernel: {
    KernelContext ctx{step.type, step.name, step.attrs, step.inputViews,
                      step.outputViews};
    ctx.rank = step.group->rank();
    ctx.worldSize = step.group->worldSize();
    ctx.seed = randomSeed;
    ctx.step = globalStep;
    ctx.stream = computeStream.get();
    return backend.launch(step.kernel, ctx, *computeStream);
  }
  case StepKind::CollectiveStart: {
    if (step.collective == CollectiveOpKind::OffloadRead ||
        step.collective == CollectiveOpKind::OffloadWrite)
      return startTransfer(step);
    // The input is ready once the compute stream reaches this point.
    if (Error err = step.inputReady->record(*computeStream))
      return err;
    Expected<CollectiveHandle> h =
        startCollectiveOp(*step.group, step.collective, step.inputViews[0],
                          step.outputViews[0], *step.inputReady);
    if (!h)
      return h.takeError();
    inFlight[step.slot] = *h;
    return Error::success();
  }
  case StepKind::CollectiveWait: {
    if (inFlightTransfer[step.slot])
      return waitTransfer(step);
    std::optional<CollectiveHandle> h =
        std::exchange(inFlight[step.slot], std::nullopt);
    // create() paired every wait with an earlier start.
    assert(h && "collective wait without a start");
    return step.group->wait(*h, computeStream.get());
  }
  }
  llvm_unreachable("unknown step kind");
}

Error Executor::run() {
  std::string missing;
  for (const Port &port : inputs)
    if (!port.bound)
      missing += (missing.empty() ? "'" : ", '") + port.info.name + "' (" +
                 port.info.typeString() + ")";
  if (!missing.empty())
    return makeError("inputs not set: " + missing);

  // A run that failed may have left collectives in flight, into buffers
  // freed next. Graph outputs of the previous run were kept for the caller.
  drainInFlight();
  for (size_t id = 0; id < tempAllocated.size(); ++id)
    freeTemp(id);
  using Clock = std::chrono::steady_clock;
  // Where this rank is, for a crash report, the collective watchdog and the
  // launcher (runtime/comm/Progress.h); out of the ops on every return.
  progress::setStep(static_cast<int64_t>(globalStep));
  struct LeaveOps {
    ~LeaveOps() { progress::leaveOps(); }
  } leaveOps;
  if (tracing)
    if (Error err = startDeviceTrace())
      return err;
  for (size_t j = 0; j < steps.size(); ++j) {
    Step &step = steps[j];
    progress::enterOp(static_cast<int32_t>(j), step.type.c_str());
    for (int32_t id : memoryPlan.allocBefore[j])
      if (Error err = allocateTemp(id))
        return makeError("op " + Twine(j) + " (" + step.type + " '" +
                         step.name + "'): " + toString(std::move(err)));
    bindStep(step);
    Clock::time_point start;
    if (profiling)
      start = Clock::now();
    double traceStart = tracing ? nowMicros() : 0;
    bool deviceTrace = tracing && traceAnchor;
    if (deviceTrace)
      if (Error err = stepTimers[j].first->record(*computeStream))
        return err;
    if (Error err = runStep(step))
      return makeError("op " + Twine(j) + " of " + Twine(steps.size()) +
                       " failed: " + toString(std::move(err)));
    if (deviceTrace) {
      if (Error err = stepTimers[j].second->record(*computeStream))
        return err;
    } else if (tracing) {
      events.push_back(
          {step.label, step.category, traceStart, nowMicros() - traceStart});
    }
    for (int32_t id : memoryPlan.freeAfter[j])
      freeTemp(id);
    if (profiling) {
      // Time the kernel, not just its launch, on asynchronous backends.
      if (Error err = computeStream->synchronize())
        return makeError("op " + Twine(j) + " of " + Twine(steps.size()) +
                         " failed: " + toString(std::move(err)));
      opProfiles[j].seconds +=
          std::chrono::duration<double>(Clock::now() - start).count();
      ++opProfiles[j].calls;
    }
  }
  if (Error err = computeStream->synchronize())
    return err;
  return finishDeviceTrace();
}

Error Executor::startDeviceTrace() {
  if (!traceAnchor) {
    std::unique_ptr<Event> anchor = backend.createTimingEvent();
    if (!anchor)
      return Error::success(); // Host times are the kernels' times.
    std::vector<std::pair<std::unique_ptr<Event>, std::unique_ptr<Event>>>
        timers(steps.size());
    for (auto &[start, end] : timers) {
      start = backend.createTimingEvent();
      end = backend.createTimingEvent();
      if (!start || !end)
        return makeError("cannot create the trace's timing events");
    }
    traceAnchor = std::move(anchor);
    stepTimers = std::move(timers);
  }
  // The anchor: a point of the compute stream reached at a known host time.
  if (Error err = traceAnchor->record(*computeStream))
    return err;
  if (Error err = traceAnchor->synchronize())
    return err;
  traceAnchorUs = nowMicros();
  return Error::success();
}

Error Executor::finishDeviceTrace() {
  if (!tracing || !traceAnchor)
    return Error::success();
  for (size_t j = 0; j < steps.size(); ++j) {
    Expected<double> start = stepTimers[j].first->microsSince(*traceAnchor);
    if (!start)
      return start.takeError();
    Expected<double> length =
        stepTimers[j].second->microsSince(*stepTimers[j].first);
    if (!length)
      return length.takeError();
    events.push_back(
        {steps[j].label, steps[j].category, traceAnchorUs + *start, *length});
  }
  if (tier) {
    Expected<std::vector<OffloadTier::Done>> transfers =
        tier->timesSince(*traceAnchor, traceAnchorUs);
    if (!transfers)
      return transfers.takeError();
    for (const OffloadTier::Done &done : *transfers)
      traceTransfer(done);
  }
  return Error::success();
}

} // namespace shardc::rt
