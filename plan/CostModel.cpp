//===- CostModel.cpp - The predicted time of a plan's step ----------------===//
#include "plan/CostModel.h"
#include "plan/AsyncOps.h"
#include "plan/PlanIO.h"

#include "runtime/Tensor.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>

namespace shardc::plan {

namespace {
struct Field {
  const char *key;
  double MachineModel::*member;
  /// A value the error messages give as an example.
  const char *example;
  /// 0 is allowed (and is the default): "as the link", "all".
  bool zeroAllowed = false;
  /// A count: a whole number.
  bool integer = false;
};
constexpr Field kFields[] = {
    {"flops", &MachineModel::flopsPerSecond, "2.5e14"},
    {"memory", &MachineModel::memoryBytesPerSecond, "1.6e12"},
    {"kernel", &MachineModel::kernelSeconds, "5e-6"},
    {"link", &MachineModel::linkBytesPerSecond, "2.3e11"},
    {"link-latency", &MachineModel::linkSeconds, "3e-6"},
    {"host-link", &MachineModel::hostLinkBytesPerSecond, "2e11", true},
    {"host-link-latency", &MachineModel::hostLinkSeconds, "1e-5", true},
    {"host-ranks", &MachineModel::hostRanks, "8", true, true},
    {"host-slots", &MachineModel::hostSlots, "8", true, true},
    {"link-cpu", &MachineModel::linkCpuBytesPerSecond, "3e9", true},
    {"tier", &MachineModel::tierBytesPerSecond, "2e10"},
    {"tier-latency", &MachineModel::tierSeconds, "1e-5"},
};

std::string fieldKeys() {
  std::string keys;
  for (const Field &f : kFields)
    keys += std::string(keys.empty() ? "" : ", ") + f.key;
  return keys;
}

/// Sets `key` of `machine` from `value`.
llvm::Error setField(MachineModel &machine, llvm::StringRef key,
                     llvm::StringRef value) {
  const Field *field =
      llvm::find_if(kFields, [&](const Field &f) { return key == f.key; });
  if (field == std::end(kFields))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "unknown cost model key '" + key +
                                       "' (keys: " + fieldKeys() + ")");
  double v = 0;
  if (value.getAsDouble(v) || !std::isfinite(v) || v < 0 ||
      (v == 0 && !field->zeroAllowed) ||
      (field->integer && (std::trunc(v) != v || v > 1e15)))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "cost model key '" + key + "' takes a " +
            (field->integer       ? "whole number >= 0"
             : field->zeroAllowed ? "number >= 0"
                                  : "positive number") +
            " (e.g. " + field->key + "=" + field->example + "), got '" + value +
            "'");
  machine.*(field->member) = v;
  return llvm::Error::success();
}
} // namespace

llvm::Error MachineModel::parseOverrides(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    std::pair<llvm::StringRef, llvm::StringRef> kv = item.trim().split('=');
    if (llvm::Error err = setField(*this, kv.first.trim(), kv.second.trim()))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error MachineModel::parseFile(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot read hardware file '" + path +
                                       "': " + file.getError().message());
  llvm::SmallVector<llvm::StringRef> lines;
  (*file)->getBuffer().split(lines, '\n');
  llvm::StringMap<size_t> seen; // key -> the line that set it
  for (auto [index, raw] : llvm::enumerate(lines)) {
    llvm::StringRef line = raw.split('#').first.trim();
    if (line.empty())
      continue;
    std::string where = (path + ":" + llvm::Twine(index + 1) + ": ").str();
    if (!line.contains('='))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     where + "expected 'key = value', got '" +
                                         line + "'");
    std::pair<llvm::StringRef, llvm::StringRef> kv = line.split('=');
    llvm::StringRef key = kv.first.trim();
    if (llvm::Error err = setField(*this, key, kv.second.trim()))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     where + llvm::toString(std::move(err)));
    auto [it, first] = seen.try_emplace(key, index + 1);
    if (!first)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          where + "'" + key + "' is set again (line " +
              llvm::Twine(it->second) + " set it first)");
  }
  return llvm::Error::success();
}

std::string MachineModel::toOverrides() const {
  std::string text;
  for (const Field &f : kFields)
    text += llvm::formatv("{0}{1}={2}", text.empty() ? "" : ",", f.key,
                          llvm::format("%.17g", this->*(f.member)))
                .str();
  return text;
}

std::string MachineModel::describe() const {
  std::string text;
  for (const Field &f : kFields)
    if (!f.zeroAllowed || this->*(f.member) != 0)
      text += llvm::formatv("{0}{1}={2:e1}", text.empty() ? "" : " ", f.key,
                            this->*(f.member))
                  .str();
  return text;
}

double MachineModel::ranksOnHost(uint64_t ranks) const {
  double onHost = static_cast<double>(std::max<uint64_t>(ranks, 1));
  if (hostRanks > 0)
    onHost = std::min(onHost, std::max(std::floor(hostRanks), 1.0));
  return onHost;
}

double MachineModel::computeSlowdown(uint64_t ranks) const {
  if (hostSlots <= 0)
    return 1;
  return std::max(1.0, ranksOnHost(ranks) / hostSlots);
}

double MachineModel::collectiveCpuSeconds(uint64_t sentBytes,
                                          uint64_t ranks) const {
  if (linkCpuBytesPerSecond <= 0 || hostSlots <= 0 ||
      ranksOnHost(ranks) < hostSlots)
    return 0;
  return static_cast<double>(sentBytes) / linkCpuBytesPerSecond *
         computeSlowdown(ranks);
}

double MachineModel::collectiveTime(CollectiveOpKind kind, uint64_t bytes,
                                    uint64_t ranks, uint64_t span) const {
  uint64_t n = std::max<uint64_t>(ranks, 1);
  if (n == 1)
    return 0;
  span = std::max(span, n);
  bool acrossHosts = hostRanks > 0 && static_cast<double>(span) > hostRanks;
  double bandwidth = linkBytesPerSecond, latency = linkSeconds;
  if (acrossHosts) {
    if (hostLinkBytesPerSecond > 0)
      bandwidth = std::min(bandwidth, hostLinkBytesPerSecond);
    latency = std::max(latency, hostLinkSeconds);
  }
  double ring = static_cast<double>(ringSentBytes(kind, bytes, n)) / bandwidth;
  if (kind != CollectiveOpKind::AllReduceStart)
    return static_cast<double>(n - 1) * latency + ring;
  ring += 2.0 * static_cast<double>(n - 1) * latency;
  double tree = 2.0 * std::ceil(std::log2(static_cast<double>(n))) * latency +
                2.0 * static_cast<double>(bytes) / bandwidth;
  return std::min(ring, tree);
}

uint64_t bufferBytes(const Plan &plan, int32_t index) {
  if (index < 0 || index >= plan.buffers_size())
    return 0;
  const Buffer &b = plan.buffers(index);
  uint64_t bytes = rt::dtypeSize(toRuntime(b.dtype()));
  for (int64_t d : b.shape())
    bytes *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return bytes;
}

/// The ranks collective `op` spans: its `world_size` attribute, or the
/// plan's.
static uint64_t collectiveRanks(const Plan &plan, const Op &op) {
  uint64_t n = static_cast<uint64_t>(std::max<int64_t>(plan.world_size(), 1));
  for (const Attribute &attr : op.attributes())
    if (attr.name() == "world_size" && attr.i() >= 1)
      n = static_cast<uint64_t>(attr.i());
  return n;
}

/// How far apart in rank numbers the first and last rank of `op`'s group
/// are, plus one: a group along the mesh's last axis is consecutive ranks,
/// one along an outer axis (hybrid sharding's replicas) strides across
/// them. Ranks fill hosts in order.
static uint64_t collectiveSpan(const RankMesh &mesh, const Op &op) {
  uint64_t span = 1;
  for (int32_t a : collectiveAxes(op, mesh)) {
    if (a < 0 || static_cast<size_t>(a) >= mesh.shape.size())
      continue;
    uint64_t stride = 1;
    for (size_t b = static_cast<size_t>(a) + 1; b < mesh.shape.size(); ++b)
      stride *= static_cast<uint64_t>(std::max<int64_t>(mesh.shape[b], 1));
    span +=
        static_cast<uint64_t>(std::max<int64_t>(mesh.shape[a] - 1, 0)) * stride;
  }
  return span;
}

uint64_t sentBytes(const Plan &plan, const Op &op) {
  std::optional<CollectiveOpKind> kind = getCollectiveOpKind(op.type());
  if (!kind || !isRankCollective(*kind) || op.inputs_size() < 1)
    return 0;
  return ringSentBytes(*kind, bufferBytes(plan, op.inputs(0)),
                       collectiveRanks(plan, op));
}

uint64_t ringSentBytes(CollectiveOpKind kind, uint64_t bytes, uint64_t n) {
  n = std::max<uint64_t>(n, 1);
  switch (kind) {
  case CollectiveOpKind::AllGatherStart:
    return bytes * (n - 1);
  case CollectiveOpKind::ReduceScatterStart:
    return bytes * (n - 1) / n;
  default:
    return 2 * bytes * (n - 1) / n;
  }
}

StepCost estimateStep(const Plan &plan, const MachineModel &machine) {
  StepCost cost;
  uint64_t worldSize =
      static_cast<uint64_t>(std::max<int64_t>(plan.world_size(), 1));
  cost.computeSlowdown = machine.computeSlowdown(worldSize);
  RankMesh mesh = RankMesh::of(plan);
  double now = 0, linksFree = 0, tierFree = 0;
  // When each start's output is complete, by its output buffer.
  struct Done {
    double time;
    bool tier;
    int startOp;
  };
  llvm::DenseMap<int32_t, Done> done;
  for (const auto &[index, op] : llvm::enumerate(plan.ops())) {
    std::optional<CollectiveOpKind> kind = getCollectiveOpKind(op.type());
    if (!kind) {
      uint64_t bytes = 0;
      for (int32_t in : op.inputs())
        bytes += bufferBytes(plan, in);
      for (int32_t out : op.outputs())
        bytes += bufferBytes(plan, out);
      double t = machine.kernelTime(op.flops(), bytes) * cost.computeSlowdown;
      now += t;
      cost.computeSeconds += t;
      ++cost.kernels;
      cost.flops += op.flops();
      if (!op.flops())
        cost.kernelBytes += bytes;
      if (op.recompute())
        cost.recomputeSeconds += t;
      continue;
    }
    if (*kind == CollectiveOpKind::Wait) {
      if (op.inputs_size() < 1)
        continue;
      auto it = done.find(op.inputs(0));
      if (it == done.end() || it->second.time <= now)
        continue;
      (it->second.tier ? cost.tierWaitSeconds : cost.commWaitSeconds) +=
          it->second.time - now;
      cost.exposed.push_back({it->second.startOp, it->second.time - now});
      now = it->second.time;
      continue;
    }
    if (op.outputs_size() < 1)
      continue;
    bool tier = !isRankCollective(*kind);
    double &free = tier ? tierFree : linksFree;
    double t;
    if (tier) {
      uint64_t bytes = bufferBytes(plan, op.inputs_size() ? op.inputs(0) : -1);
      cost.tierBytes += bytes;
      t = machine.tierSeconds +
          static_cast<double>(bytes) / machine.tierBytesPerSecond;
      cost.tierSeconds += t;
    } else {
      uint64_t sent = sentBytes(plan, op);
      cost.sentBytes += sent;
      // The copies run on this rank's cores while its kernels do.
      double cpu = machine.collectiveCpuSeconds(sent, worldSize);
      now += cpu;
      cost.computeSeconds += cpu;
      cost.commCpuSeconds += cpu;
      t = machine.collectiveTime(
          *kind, bufferBytes(plan, op.inputs_size() ? op.inputs(0) : -1),
          collectiveRanks(plan, op), collectiveSpan(mesh, op));
      cost.commSeconds += t;
    }
    free = std::max(free, now) + t;
    done[op.outputs(0)] = {free, tier, static_cast<int>(index)};
  }
  cost.seconds = std::max({now, linksFree, tierFree});
  return cost;
}

} // namespace shardc::plan
