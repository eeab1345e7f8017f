//===- MemoryBudget.cpp - Choosing options that fit a memory budget -------===//
#include "passes/MemoryBudget.h"
#include "passes/Passes.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

namespace shardc {

static constexpr BudgetKnob kKnobs[] = {
    BudgetKnob::Stage, BudgetKnob::Reshard, BudgetKnob::Prefetch,
    BudgetKnob::Recompute, BudgetKnob::Offload};

std::string formatBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return llvm::formatv("{0:f1} {1}", v, units[u]).str();
}

BudgetSpace BudgetSpace::of(const TrainPipelineOptions &options) {
  BudgetSpace s;
  bool sharded = options.shards();
  s.sharded = sharded;
  if (options.stage.hasValue() || !sharded) {
    s.stages = {sharded ? options.stage.getValue() : 0};
  } else {
    // Hybrid sharding needs a stage that shards; accumulating whole
    // gradients and a reshard group mean stages 2-3 and 3.
    int64_t lowest = options.hybridShard > 0 ? 1 : 0;
    if (options.accumulateUnsharded)
      lowest = 2;
    if (options.reshardAfterForward.hasValue())
      lowest = 3;
    for (int64_t st = lowest; st <= 3; ++st)
      s.stages.push_back(st);
  }
  if (options.reshardAfterForward.hasValue()) {
    s.reshards = {options.reshardAfterForward.getValue()};
  } else {
    // Keep the gathered parameters, keep a 1/G slice of them (more memory
    // for a smaller G), free them.
    s.reshards.push_back(ReshardSpec{ReshardSpec::Keep, 0});
    int64_t group = options.hybridShard > 0 ? options.hybridShard.getValue()
                                            : options.worldSize.getValue();
    for (int64_t g = 2; g <= group / 2; ++g)
      if (group % g == 0)
        s.reshards.push_back(ReshardSpec{ReshardSpec::Group, g});
    s.reshards.push_back(ReshardSpec{ReshardSpec::Full, 0});
  }
  if (options.backwardPrefetch.hasValue())
    s.prefetches = {options.backwardPrefetch.getValue()};
  else
    s.prefetches = {BackwardPrefetch::Pre, BackwardPrefetch::None};
  if (options.recompute.hasValue() || options.recomputeUnits.hasValue())
    s.recomputes = {options.recompute || !options.recomputeUnits.empty()};
  else
    s.recomputes = {false, true};
  if (options.offload.hasValue()) {
    s.offloads = {std::vector<OffloadKind>(options.offload.begin(),
                                           options.offload.end())};
  } else {
    s.offloads = {
        {},
        {OffloadKind::Optimizer},
        {OffloadKind::Optimizer, OffloadKind::Grads},
        {OffloadKind::Optimizer, OffloadKind::Grads, OffloadKind::Params}};
  }
  return s;
}

int BudgetSpace::size(BudgetKnob knob) const {
  switch (knob) {
  case BudgetKnob::Stage:
    return stages.size();
  case BudgetKnob::Reshard:
    return reshards.size();
  case BudgetKnob::Prefetch:
    return prefetches.size();
  case BudgetKnob::Recompute:
    return recomputes.size();
  case BudgetKnob::Offload:
    return offloads.size();
  }
  return 1;
}

/// Whether `knob` means anything at `choice`: reshard and prefetch only at
/// stage 3.
static bool applies(const BudgetSpace &space, const BudgetChoice &choice,
                    BudgetKnob knob) {
  if (knob == BudgetKnob::Reshard || knob == BudgetKnob::Prefetch)
    return space.stages[choice[BudgetKnob::Stage]] == 3;
  return true;
}

void BudgetChoice::apply(const BudgetSpace &space,
                         TrainPipelineOptions &options) const {
  // Setting an option marks it given: the stage only where the step is
  // sharded anyway (a given stage shards a step).
  if (space.sharded)
    options.stage = space.stages[(*this)[BudgetKnob::Stage]];
  options.reshardAfterForward = space.reshards[(*this)[BudgetKnob::Reshard]];
  options.backwardPrefetch = space.prefetches[(*this)[BudgetKnob::Prefetch]];
  options.recompute = space.recomputes[(*this)[BudgetKnob::Recompute]];
  options.offload =
      llvm::ArrayRef<OffloadKind>(space.offloads[(*this)[BudgetKnob::Offload]]);
}

std::string BudgetChoice::flag(const BudgetSpace &space,
                               BudgetKnob knob) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  int i = (*this)[knob];
  switch (knob) {
  case BudgetKnob::Stage:
    os << "--zero-stage " << space.stages[i];
    break;
  case BudgetKnob::Reshard:
    os << "--reshard-after-forward=" << space.reshards[i];
    break;
  case BudgetKnob::Prefetch:
    os << "--backward-prefetch "
       << (space.prefetches[i] == BackwardPrefetch::Pre    ? "pre"
           : space.prefetches[i] == BackwardPrefetch::Post ? "post"
                                                           : "none");
    break;
  case BudgetKnob::Recompute:
    os << (space.recomputes[i] ? "--recompute" : "no --recompute");
    break;
  case BudgetKnob::Offload:
    if (space.offloads[i].empty())
      os << "no --offload";
    for (auto [k, kind] : llvm::enumerate(space.offloads[i]))
      os << (k ? " " : "") << "--offload " << kind;
    break;
  }
  return text;
}

std::string BudgetChoice::flags(const BudgetSpace &space) const {
  std::string text;
  for (BudgetKnob knob : kKnobs) {
    // The command line's own flags are not repeated.
    if (!applies(space, *this, knob) || space.size(knob) < 2)
      continue;
    std::string f = flag(space, knob);
    if (llvm::StringRef(f).starts_with("no "))
      continue;
    text += (text.empty() ? "" : " ") + f;
  }
  return text.empty() ? "the command line's flags" : text;
}

namespace {
/// Compiles each choice once.
class Search {
public:
  Search(const BudgetSpace &space, BudgetEvaluator evaluate)
      : space(space), evaluate(evaluate) {}

  llvm::Expected<BudgetEstimate> operator()(const BudgetChoice &c) {
    auto it = seen.find(c);
    if (it != seen.end())
      return it->second;
    llvm::Expected<BudgetEstimate> e = evaluate(c);
    if (!e)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "compiling the candidate " +
                                         c.flags(space) + ": " +
                                         llvm::toString(e.takeError()));
    seen[c] = *e;
    return *e;
  }

  /// `c` with `knob` moved by `step` notches, where that is a setting that
  /// means something; nullopt otherwise. Leaving stage 3 resets the
  /// stage-3 knobs.
  std::optional<BudgetChoice> move(const BudgetChoice &c, BudgetKnob knob,
                                   int step) const {
    if (!applies(space, c, knob))
      return std::nullopt;
    int to = c[knob] + step;
    if (to < 0 || to >= space.size(knob))
      return std::nullopt;
    BudgetChoice n = c;
    n[knob] = to;
    if (!applies(space, n, BudgetKnob::Reshard)) {
      n[BudgetKnob::Reshard] = 0;
      n[BudgetKnob::Prefetch] = 0;
    }
    return n;
  }

  const BudgetSpace &space;

private:
  BudgetEvaluator evaluate;
  std::map<BudgetChoice, BudgetEstimate> seen;
};
} // namespace

static std::string describe(const BudgetEstimate &e) {
  std::string step = e.seconds < 1
                         ? llvm::formatv("{0:f2} ms", e.seconds * 1e3).str()
                         : llvm::formatv("{0:f3} s", e.seconds).str();
  return "peak " + formatBytes(e.peakBytes) + ", step " + step;
}

llvm::Expected<BudgetChoice> chooseForBudget(uint64_t budget,
                                             const BudgetSpace &space,
                                             BudgetEvaluator evaluate,
                                             llvm::raw_ostream &log) {
  Search search(space, evaluate);
  std::string head = "shardc: --memory-budget " + formatBytes(budget) + ": ";

  BudgetChoice cur;
  llvm::Expected<BudgetEstimate> now = search(cur);
  if (!now)
    return now.takeError();
  log << head << "start from " << cur.flags(space) << ": " << describe(*now)
      << "\n";
  // Every knob at its last notch: the smallest peak within reach.
  BudgetChoice least;
  for (BudgetKnob knob : kKnobs)
    least[knob] = space.size(knob) - 1;
  if (!applies(space, least, BudgetKnob::Reshard))
    least[BudgetKnob::Reshard] = least[BudgetKnob::Prefetch] = 0;
  llvm::Expected<BudgetEstimate> floor =
      now->peakBytes <= budget ? llvm::Expected<BudgetEstimate>(*now)
                               : search(least);
  if (!floor)
    return floor.takeError();
  if (floor->peakBytes > budget)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--memory-budget " + formatBytes(budget) + " (" +
            std::to_string(budget) +
            " bytes) is below the smallest predicted per-rank peak within "
            "reach, " +
            formatBytes(floor->peakBytes) + " (" +
            std::to_string(floor->peakBytes) + " bytes, with " +
            least.flags(space) +
            "). Give a budget of at least that, more ranks (--world-size), "
            "or a smaller batch (--dim)");
  // Whether the search runs (the fastest setting does not fit), and whether
  // it ended at the floor.
  const bool searched = now->peakBytes > budget;
  bool tookFloor = false;
  while (now->peakBytes > budget) {
    // One notch of one knob; and stage 3 also with its reshard at the last
    // notch (FULL_SHARD), where stage 3 first saves its memory.
    std::vector<std::pair<BudgetChoice, std::string>> moves;
    for (BudgetKnob knob : kKnobs) {
      std::optional<BudgetChoice> n = search.move(cur, knob, +1);
      if (!n)
        continue;
      moves.push_back({*n, n->flag(space, knob)});
      if (knob == BudgetKnob::Stage &&
          applies(space, *n, BudgetKnob::Reshard) &&
          space.size(BudgetKnob::Reshard) > 1) {
        BudgetChoice full = *n;
        full[BudgetKnob::Reshard] = space.size(BudgetKnob::Reshard) - 1;
        moves.push_back({full, full.flag(space, BudgetKnob::Stage) + " " +
                                   full.flag(space, BudgetKnob::Reshard)});
      }
    }
    std::optional<BudgetChoice> best, level;
    BudgetEstimate bestEst, levelEst;
    std::string bestFlag, levelFlag;
    bool bestFits = false;
    double bestRate = -1;
    for (auto &[n, label] : moves) {
      llvm::Expected<BudgetEstimate> e = search(n);
      if (!e)
        return e.takeError();
      // A move that keeps the peak may open others that lower it (stage 1
      // once the optimizer state is offloaded): the fastest such move is
      // taken when no move lowers the peak.
      if (e->peakBytes == now->peakBytes &&
          (!level || e->seconds < levelEst.seconds)) {
        level = n;
        levelEst = *e;
        levelFlag = label;
      }
      if (e->peakBytes >= now->peakBytes)
        continue;
      bool fits = e->peakBytes <= budget;
      // Bytes saved per second added (a move that adds no time is best).
      double added = std::max(e->seconds - now->seconds, 1e-12);
      double rate = static_cast<double>(now->peakBytes - e->peakBytes) / added;
      bool better = !best || (fits && !bestFits) ||
                    (fits && bestFits && e->seconds < bestEst.seconds) ||
                    (!fits && !bestFits && rate > bestRate);
      if (better) {
        best = n;
        bestEst = *e;
        bestFlag = label;
        bestFits = fits;
        bestRate = rate;
      }
    }
    if (!best && level) {
      log << head << levelFlag << ": " << describe(*now) << " -> "
          << describe(levelEst) << " (the same peak; opens other moves)\n";
      cur = *level;
      *now = levelEst;
      continue;
    }
    if (!best) {
      // No move keeps or lowers the peak here: the floor does.
      log << head << "no one change lowers the peak further; take "
          << least.flags(space) << ": " << describe(*floor) << "\n";
      cur = least;
      *now = *floor;
      tookFloor = true;
      break;
    }
    log << head << bestFlag << ": " << describe(*now) << " -> "
        << describe(bestEst)
        << (bestFits ? " (fits)"
                     : llvm::formatv(" ({0} saved per second added)",
                                     formatBytes(static_cast<uint64_t>(
                                         std::min(bestRate, 1e18))))
                           .str())
        << "\n";
    cur = *best;
    *now = bestEst;
  }
  // Undo what is no longer needed: of the moves back that fit and are no
  // slower by the model, the fastest, until none is left. (A move the model
  // finds free, an offload whose transfers it expects to hide, still costs
  // a run bandwidth: without it the plan is simpler and no slower.)
  auto relax = [&](BudgetChoice &c, BudgetEstimate &est,
                   llvm::StringRef from) -> llvm::Error {
    while (true) {
      std::optional<BudgetChoice> best;
      BudgetEstimate bestEst;
      BudgetKnob bestKnob = BudgetKnob::Stage;
      for (BudgetKnob knob : kKnobs) {
        std::optional<BudgetChoice> n = search.move(c, knob, -1);
        if (!n)
          continue;
        llvm::Expected<BudgetEstimate> e = search(*n);
        if (!e)
          return e.takeError();
        if (e->peakBytes <= budget &&
            (best ? e->seconds < bestEst.seconds : e->seconds <= est.seconds)) {
          best = n;
          bestEst = *e;
          bestKnob = knob;
        }
      }
      if (!best)
        return llvm::Error::success();
      log << head << from << "back to " << best->flag(space, bestKnob) << ": "
          << describe(est) << " -> " << describe(bestEst) << " (still fits)\n";
      c = *best;
      est = bestEst;
    }
  };
  if (llvm::Error err = relax(cur, *now, ""))
    return std::move(err);
  // The way back from the smallest peak may end faster than the way down
  // from the fastest setting: take the faster of the two.
  if (searched && !tookFloor) {
    BudgetChoice alt = least;
    BudgetEstimate altEst = *floor;
    if (llvm::Error err = relax(alt, altEst, "from the smallest peak, "))
      return std::move(err);
    if (altEst.seconds < now->seconds) {
      log << head << "the way back from the smallest peak is faster: "
          << describe(altEst) << " against " << describe(*now) << "\n";
      cur = alt;
      *now = altEst;
    }
  }
  log << head << "chose " << cur.flags(space) << ": " << describe(*now) << "\n";
  return cur;
}

} // namespace shardc
