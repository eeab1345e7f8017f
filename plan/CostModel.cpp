//===- CostModel.cpp - The predicted time of a plan's step ----------------===//
#include "plan/CostModel.h"
#include "plan/AsyncOps.h"
#include "plan/PlanIO.h"

#include "runtime/Tensor.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

namespace shardc::plan {

namespace {
struct Field {
  const char *key;
  double MachineModel::*member;
};
constexpr Field kFields[] = {
    {"flops", &MachineModel::flopsPerSecond},
    {"memory", &MachineModel::memoryBytesPerSecond},
    {"kernel", &MachineModel::kernelSeconds},
    {"link", &MachineModel::linkBytesPerSecond},
    {"link-latency", &MachineModel::linkSeconds},
    {"tier", &MachineModel::tierBytesPerSecond},
    {"tier-latency", &MachineModel::tierSeconds},
};
} // namespace

llvm::Error MachineModel::parseOverrides(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',', -1, /*KeepEmpty=*/false);
  std::string keys;
  for (const Field &f : kFields)
    keys += std::string(keys.empty() ? "" : ", ") + f.key;
  for (llvm::StringRef item : items) {
    std::pair<llvm::StringRef, llvm::StringRef> kv = item.trim().split('=');
    llvm::StringRef key = kv.first, value = kv.second;
    const Field *field = llvm::find_if(
        kFields, [&](const Field &f) { return key.trim() == f.key; });
    if (field == std::end(kFields))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "unknown cost model key '" + key.trim() +
                                         "' (keys: " + keys + ")");
    double v = 0;
    if (value.trim().getAsDouble(v) || !std::isfinite(v) || v <= 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "cost model key '" + key.trim() + "' takes a positive number (e.g. " +
              field->key + "=2e9), got '" + value.trim() + "'");
    this->*(field->member) = v;
  }
  return llvm::Error::success();
}

std::string MachineModel::describe() const {
  return llvm::formatv("flops={0:e1} memory={1:e1} kernel={2:e1} link={3:e1} "
                       "link-latency={4:e1} tier={5:e1} tier-latency={6:e1}",
                       flopsPerSecond, memoryBytesPerSecond, kernelSeconds,
                       linkBytesPerSecond, linkSeconds, tierBytesPerSecond,
                       tierSeconds)
      .str();
}

static uint64_t bufferBytes(const Plan &plan, int32_t index) {
  if (index < 0 || index >= plan.buffers_size())
    return 0;
  const Buffer &b = plan.buffers(index);
  uint64_t bytes = rt::dtypeSize(toRuntime(b.dtype()));
  for (int64_t d : b.shape())
    bytes *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return bytes;
}

uint64_t sentBytes(const Plan &plan, const Op &op) {
  std::optional<CollectiveOpKind> kind = getCollectiveOpKind(op.type());
  if (!kind || !isRankCollective(*kind) || op.inputs_size() < 1)
    return 0;
  uint64_t n = static_cast<uint64_t>(std::max<int64_t>(plan.world_size(), 1));
  for (const Attribute &attr : op.attributes())
    if (attr.name() == "world_size" && attr.i() >= 1)
      n = static_cast<uint64_t>(attr.i());
  return ringSentBytes(*kind, bufferBytes(plan, op.inputs(0)), n);
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
  double now = 0, linksFree = 0, tierFree = 0;
  // When each start's output is complete, by its output buffer.
  llvm::DenseMap<int32_t, std::pair<double, bool>> done; // time, on the tier
  for (const Op &op : plan.ops()) {
    std::optional<CollectiveOpKind> kind = getCollectiveOpKind(op.type());
    if (!kind) {
      uint64_t bytes = 0;
      for (int32_t in : op.inputs())
        bytes += bufferBytes(plan, in);
      for (int32_t out : op.outputs())
        bytes += bufferBytes(plan, out);
      double t = machine.kernelTime(op.flops(), bytes);
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
      if (it == done.end() || it->second.first <= now)
        continue;
      (it->second.second ? cost.tierWaitSeconds : cost.commWaitSeconds) +=
          it->second.first - now;
      now = it->second.first;
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
      uint64_t bytes = sentBytes(plan, op);
      cost.sentBytes += bytes;
      t = machine.collectiveTime(bytes);
      cost.commSeconds += t;
    }
    free = std::max(free, now) + t;
    done[op.outputs(0)] = {free, tier};
  }
  cost.seconds = std::max({now, linksFree, tierFree});
  return cost;
}

} // namespace shardc::plan
