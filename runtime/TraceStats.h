//===- TraceStats.h - How much communication compute hides ------*- C++ -*-===//
//
// What `shardrun --trace` reports beside the trace: of the time a rank's
// collectives were in flight, the part during which no kernel of that rank
// ran. That part is communication the schedule failed to hide behind
// compute; the rest overlapped it. Both are unions of intervals, so
// concurrent collectives (or a collective that several kernels cover) count
// once.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_TRACESTATS_H
#define SHARDC_RUNTIME_TRACESTATS_H

#include <vector>

namespace shardc::rt {

/// A span of time [start, end), in microseconds.
struct Interval {
  double start = 0, end = 0;
};

struct OverlapStats {
  /// The time at least one collective was in flight.
  double collectiveUs = 0;
  /// The part of it during which no kernel ran.
  double exposedUs = 0;
  /// The hidden share of collectiveUs (1 when there was none).
  double hiddenFraction() const {
    return collectiveUs > 0 ? 1.0 - exposedUs / collectiveUs : 1.0;
  }
};

/// The overlap of `collectives` with `kernels`, in any order; empty or
/// reversed intervals count as nothing.
OverlapStats overlapStats(std::vector<Interval> kernels,
                          std::vector<Interval> collectives);

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_TRACESTATS_H
