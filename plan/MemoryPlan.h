//===- MemoryPlan.h - When each buffer of a plan is live --------*- C++ -*-===//
//
// Memory planning over the final schedule: a TEMP buffer is allocated just
// before the first op that writes it and freed right after the last op that
// reads or writes it (graph outputs live to the end of the step); parameters,
// optimizer state, inputs and constants live for the whole run. The compiler
// uses it to predict each rank's peak memory per category before a run; the
// executor allocates and frees by the same plan and measures what it
// actually allocated.
//
// Every buffer also gets an offset in one arena per rank (BufferLifetime::
// offset): the executor allocates the arena once, on any backend, and no
// allocator runs during a step.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PLAN_MEMORYPLAN_H
#define SHARDC_PLAN_MEMORYPLAN_H

#include "plan.pb.h"

#include <array>
#include <cstdint>
#include <vector>

namespace shardc::plan {

constexpr int kNumCategories = 5; // plan::Category values 0..4

struct BufferLifetime {
  bool persistent = false;
  /// In the offload tier (Buffer.offloaded): not in the arena, not counted
  /// in the peaks; `offset` is its place in the tier.
  bool offloaded = false;
  /// For TEMP buffers: the first and last op (indices) touching it; -1 if
  /// no op touches it.
  int first = -1, last = -1;
  uint64_t bytes = 0;
  /// Where the buffer lives in the rank's arena (bytes from its start, a
  /// multiple of kArenaAlignment); meaningless for views and for TEMP
  /// buffers no op touches.
  uint64_t offset = 0;
};

/// Alignment of every buffer in the arena: what cudaMalloc guarantees, and
/// enough for any vector load of the CPU kernels.
constexpr uint64_t kArenaAlignment = 256;

struct MemoryPlan {
  std::vector<BufferLifetime> buffers;
  /// Buffers to allocate before op i / free after op i.
  std::vector<std::vector<int32_t>> allocBefore, freeAfter;
  /// Peak live bytes of each category (indexed by plan::Category) and of
  /// all buffers together.
  std::array<uint64_t, kNumCategories> peak{};
  uint64_t peakTotal = 0;
  /// The arena every backend allocates once per rank: persistent buffers
  /// first, one after another, then TEMP buffers at offsets that no two
  /// buffers live at the same op share (largest first, each at the lowest
  /// offset that fits).
  /// arenaBytes >= peakTotal; the difference is alignment and fragmentation.
  uint64_t persistentBytes = 0;
  uint64_t arenaBytes = 0;
  /// Bytes of the offload tier per rank (offloaded buffers, each aligned).
  uint64_t offloadBytes = 0;
};

/// Plans a validated plan.
MemoryPlan planMemory(const Plan &plan);

/// The prediction in the plan's own message form.
MemoryPrediction toPrediction(const MemoryPlan &mp);

/// "activations", "params", "grads", "opt_state", "comm".
const char *categoryName(int category);

} // namespace shardc::plan

#endif // SHARDC_PLAN_MEMORYPLAN_H
