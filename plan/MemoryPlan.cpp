//===- MemoryPlan.cpp - When each buffer of a plan is live ----------------===//
#include "plan/MemoryPlan.h"
#include "plan/AsyncOps.h"

#include "runtime/Tensor.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <utility>

namespace shardc::plan {

const char *categoryName(int category) {
  switch (category) {
  case PARAMS:
    return "params";
  case GRADS:
    return "grads";
  case OPT_STATE:
    return "opt_state";
  case COMM:
    return "comm";
  default:
    return "activations";
  }
}

static uint64_t alignUp(uint64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

/// Lays out the arena: persistent buffers in plan order, then TEMP buffers,
/// largest first, each at the lowest aligned offset where it overlaps no
/// buffer already placed whose lifetime ([first, last], inclusive) overlaps
/// its own. Two buffers that meet at one op never share bytes, so an op's
/// inputs and outputs are always disjoint.
static void assignArenaOffsets(const Plan &plan, MemoryPlan &mp) {
  uint64_t cursor = 0;
  std::vector<int32_t> temps;
  for (int i = 0; i < plan.buffers_size(); ++i) {
    if (plan.buffers(i).is_alias())
      continue;
    BufferLifetime &life = mp.buffers[i];
    if (life.offloaded) {
      // In the offload tier, laid out there in plan order.
      life.offset = mp.offloadBytes;
      mp.offloadBytes += alignUp(life.bytes);
    } else if (life.persistent) {
      life.offset = cursor;
      cursor += alignUp(life.bytes);
    } else if (life.first >= 0) {
      temps.push_back(i);
    }
  }
  mp.persistentBytes = cursor;
  std::sort(temps.begin(), temps.end(), [&](int32_t a, int32_t b) {
    if (mp.buffers[a].bytes != mp.buffers[b].bytes)
      return mp.buffers[a].bytes > mp.buffers[b].bytes;
    return a < b;
  });
  struct Placed {
    uint64_t begin, end;
    int first, last;
  };
  std::vector<Placed> placed;
  std::vector<std::pair<uint64_t, uint64_t>> taken;
  uint64_t tempEnd = 0;
  for (int32_t id : temps) {
    BufferLifetime &life = mp.buffers[id];
    uint64_t size = alignUp(life.bytes);
    taken.clear();
    for (const Placed &p : placed)
      if (p.first <= life.last && life.first <= p.last)
        taken.emplace_back(p.begin, p.end);
    std::sort(taken.begin(), taken.end());
    // The lowest gap that fits: below every range taken, or between two.
    uint64_t offset = 0;
    for (const auto &[begin, end] : taken) {
      if (begin >= offset && begin - offset >= size)
        break;
      offset = std::max(offset, end);
    }
    life.offset = cursor + offset;
    placed.push_back({offset, offset + size, life.first, life.last});
    tempEnd = std::max(tempEnd, offset + size);
  }
  mp.arenaBytes = cursor + tempEnd;
}

MemoryPlan planMemory(const Plan &plan) {
  MemoryPlan mp;
  int numOps = plan.ops_size();
  mp.buffers.resize(plan.buffers_size());
  mp.allocBefore.resize(numOps);
  mp.freeAfter.resize(numOps);
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const Buffer &b = plan.buffers(i);
    BufferLifetime &life = mp.buffers[i];
    life.persistent = b.kind() != TEMP;
    life.offloaded = b.offloaded();
    uint64_t n = 1;
    for (int64_t d : b.shape())
      n *= static_cast<uint64_t>(d);
    life.bytes = n * rt::dtypeSize(static_cast<rt::DType>(b.dtype()));
  }
  auto touch = [&](int32_t id, int op) {
    if (id < 0)
      return;
    // A view keeps its root alive and costs nothing itself.
    if (plan.buffers(id).is_alias())
      id = plan.buffers(id).alias_of();
    BufferLifetime &life = mp.buffers[id];
    if (life.first < 0 || op < life.first)
      life.first = op;
    life.last = std::max(life.last, op);
  };
  for (int j = 0; j < numOps; ++j) {
    for (int32_t id : plan.ops(j).inputs())
      touch(id, j);
    for (int32_t id : plan.ops(j).outputs())
      touch(id, j);
  }
  // A collective reads its input on the communication thread until its wait
  // completes: the input stays live until then.
  for (int j = 0; j < numOps; ++j) {
    const Op &start = plan.ops(j);
    std::optional<CollectiveOpKind> kind = getCollectiveOpKind(start.type());
    if (!kind || !isStart(*kind) || start.outputs_size() != 1)
      continue;
    for (int k = j + 1; k < numOps; ++k) {
      const Op &wait = plan.ops(k);
      if (getCollectiveOpKind(wait.type()) == CollectiveOpKind::Wait &&
          wait.inputs_size() == 1 && wait.inputs(0) == start.outputs(0)) {
        for (int32_t id : start.inputs())
          touch(id, k);
        break;
      }
    }
  }
  for (int32_t id : plan.outputs()) {
    if (id < 0)
      continue;
    if (plan.buffers(id).is_alias())
      id = plan.buffers(id).alias_of();
    if (mp.buffers[id].first >= 0)
      mp.buffers[id].last = numOps; // read by the caller after the step
  }

  std::array<uint64_t, kNumCategories> live{};
  uint64_t liveTotal = 0;
  auto note = [&] {
    for (int c = 0; c < kNumCategories; ++c)
      mp.peak[c] = std::max(mp.peak[c], live[c]);
    mp.peakTotal = std::max(mp.peakTotal, liveTotal);
  };
  auto category = [&](int32_t id) {
    int c = plan.buffers(id).category();
    return c >= 0 && c < kNumCategories ? c : 0;
  };
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const BufferLifetime &life = mp.buffers[i];
    if (plan.buffers(i).is_alias() || life.offloaded)
      continue;
    if (life.persistent) {
      live[category(i)] += life.bytes;
      liveTotal += life.bytes;
    } else if (life.first >= 0) {
      mp.allocBefore[life.first].push_back(i);
      if (life.last < numOps)
        mp.freeAfter[life.last].push_back(i);
    }
  }
  note();
  for (int j = 0; j < numOps; ++j) {
    for (int32_t id : mp.allocBefore[j]) {
      live[category(id)] += mp.buffers[id].bytes;
      liveTotal += mp.buffers[id].bytes;
    }
    note();
    for (int32_t id : mp.freeAfter[j]) {
      live[category(id)] -= mp.buffers[id].bytes;
      liveTotal -= mp.buffers[id].bytes;
    }
  }
  assignArenaOffsets(plan, mp);
  return mp;
}

MemoryPrediction toPrediction(const MemoryPlan &mp) {
  MemoryPrediction p;
  p.set_activations(mp.peak[ACTIVATIONS]);
  p.set_params(mp.peak[PARAMS]);
  p.set_grads(mp.peak[GRADS]);
  p.set_opt_state(mp.peak[OPT_STATE]);
  p.set_comm(mp.peak[COMM]);
  p.set_total(mp.peakTotal);
  p.set_offloaded(mp.offloadBytes);
  return p;
}

} // namespace shardc::plan
