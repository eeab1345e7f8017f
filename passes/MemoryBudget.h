//===- MemoryBudget.h - Choosing options that fit a memory budget -*- C++
//-*-===//
//
// `shardc --memory-budget SIZE`: of the options that trade step time for
// memory, choose the cheapest setting whose predicted per-rank peak fits.
// Each such option is a knob with a ladder of settings, from the fastest to
// the one that saves the most memory:
//
//   stage      --zero-stage 0, 1, 2, 3
//   reshard    --reshard-after-forward false, G (divisors of the shard
//              group, small to large), true             (stage 3 only)
//   prefetch   --backward-prefetch pre, none            (stage 3 only)
//   recompute  off, --recompute
//   offload    none, optimizer, + grads, + params       (--offload)
//
// A knob the user set on the command line is held at the user's setting.
// The search is greedy over one-notch moves (and the move to stage 3 with a
// full reshard, where stage 3 first saves memory), each judged by compiling the
// candidate and reading its predicted peak (plan/MemoryPlan.h) and step time
// (plan/CostModel.h): from the fastest setting, while the peak is over the
// budget, take the fitting move with the least time, or else the move that
// saves the most bytes per second it adds, or else (no move saves any) the
// fastest move that keeps the peak, which may open moves that save. Once the
// plan fits, moves back that still fit and cost no more are taken (a move
// the model finds free, such as a hidden offload, is undone); the same is
// done from the setting of the smallest peak, and the faster end wins. Every
// decision is one line of the log. When the fastest setting does not fit, the
// one with every knob at its last notch is compiled next: when even it does not
// fit, the budget is refused with that smallest peak.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_MEMORYBUDGET_H
#define SHARDC_PASSES_MEMORYBUDGET_H

#include "passes/OptionChoices.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace shardc {

struct TrainPipelineOptions;

enum class BudgetKnob { Stage, Reshard, Prefetch, Recompute, Offload };
constexpr int kNumBudgetKnobs = 5;

/// The knobs' ladders: the settings the search may choose from, fastest
/// first; a knob the user set has one setting, the user's.
struct BudgetSpace {
  std::vector<int64_t> stages;
  std::vector<ReshardSpec> reshards;
  std::vector<BackwardPrefetch> prefetches;
  std::vector<bool> recomputes;
  /// Each entry: the kinds kept in the offload tier.
  std::vector<std::vector<OffloadKind>> offloads;
  /// A sharded step (--world-size or --zero-stage): the stage is a flag.
  bool sharded = true;

  /// The space of `options` as the command line left it: knobs the user
  /// gave are fixed; the stage is free only for a sharded step (--world-size)
  /// without --zero-stage; reshard and prefetch only where stage 3 is
  /// possible.
  static BudgetSpace of(const TrainPipelineOptions &options);

  /// The number of settings of `knob`.
  int size(BudgetKnob knob) const;
};

/// A point of the space: one index per knob into its ladder.
struct BudgetChoice {
  std::array<int, kNumBudgetKnobs> level{};

  int &operator[](BudgetKnob k) { return level[static_cast<int>(k)]; }
  int operator[](BudgetKnob k) const { return level[static_cast<int>(k)]; }
  bool operator==(const BudgetChoice &o) const { return level == o.level; }
  bool operator<(const BudgetChoice &o) const { return level < o.level; }

  /// Sets `options` to this choice's settings.
  void apply(const BudgetSpace &space, TrainPipelineOptions &options) const;
  /// The shardc flags that select it, beyond the command line's own (the
  /// knobs with one setting): "--zero-stage 3 --recompute".
  std::string flags(const BudgetSpace &space) const;
  /// The flag of one knob's setting ("--offload optimizer --offload grads").
  std::string flag(const BudgetSpace &space, BudgetKnob knob) const;
};

/// What compiling a choice predicts.
struct BudgetEstimate {
  uint64_t peakBytes = 0;
  double seconds = 0;
};

using BudgetEvaluator =
    llvm::function_ref<llvm::Expected<BudgetEstimate>(const BudgetChoice &)>;

/// Chooses the cheapest choice of `space` whose peak fits `budget` bytes,
/// logging one line per decision ("shardc: --memory-budget ...") to `log`;
/// an error naming the smallest reachable peak when none fits.
llvm::Expected<BudgetChoice> chooseForBudget(uint64_t budget,
                                             const BudgetSpace &space,
                                             BudgetEvaluator evaluate,
                                             llvm::raw_ostream &log);

/// "12.3 MiB".
std::string formatBytes(uint64_t bytes);

} // namespace shardc

#endif // SHARDC_PASSES_MEMORYBUDGET_H
