//===- TraceStats.cpp - How much communication compute hides --------------===//
#include "runtime/TraceStats.h"

#include <algorithm>

namespace shardc::rt {

/// The union of `spans` as sorted, disjoint intervals.
static std::vector<Interval> unite(std::vector<Interval> spans) {
  spans.erase(
      std::remove_if(spans.begin(), spans.end(),
                     [](const Interval &i) { return i.end <= i.start; }),
      spans.end());
  std::sort(
      spans.begin(), spans.end(),
      [](const Interval &a, const Interval &b) { return a.start < b.start; });
  std::vector<Interval> out;
  for (const Interval &i : spans) {
    if (!out.empty() && i.start <= out.back().end)
      out.back().end = std::max(out.back().end, i.end);
    else
      out.push_back(i);
  }
  return out;
}

OverlapStats overlapStats(std::vector<Interval> kernels,
                          std::vector<Interval> collectives) {
  std::vector<Interval> k = unite(std::move(kernels));
  std::vector<Interval> c = unite(std::move(collectives));
  OverlapStats s;
  double covered = 0;
  size_t j = 0;
  for (const Interval &ci : c) {
    s.collectiveUs += ci.end - ci.start;
    // Kernel spans that end before this collective cannot meet a later one.
    while (j < k.size() && k[j].end <= ci.start)
      ++j;
    for (size_t m = j; m < k.size() && k[m].start < ci.end; ++m)
      covered += std::min(ci.end, k[m].end) - std::max(ci.start, k[m].start);
  }
  s.exposedUs = s.collectiveUs - covered;
  return s;
}

} // namespace shardc::rt
