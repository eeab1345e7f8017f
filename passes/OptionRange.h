//===- OptionRange.h - Ranges of numeric pass options -----------*- C++ -*-===//
//
// A numeric pass option is declared in Passes.td as a BoundedOption, with
// the interval its values must lie in ("[0, inf)", "(0, 1048576]").
// gen_pipeline_options.py turns the interval into an OptionRange, which is
// checked at both places an option gets a value: where it is parsed as a
// pipeline option (shardc's flags, `shardc-opt --shardc-train-pipeline=...`),
// by ShardcPipelineOptions::BoundedOption, and where a pass runs (its
// generated checkOptions(), for values given to the pass itself). A value
// outside is an error naming the option, its range and the value; a
// floating-point value must also be finite (no nan, no inf).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_OPTIONRANGE_H
#define SHARDC_PASSES_OPTIONRANGE_H

#include "llvm/ADT/StringRef.h"

#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>

namespace shardc {

/// The values a numeric option may take: an interval, open or closed at
/// either end.
template <typename T> struct OptionRange {
  T lo, hi;
  bool loOpen, hiOpen;
  /// The interval in words: "finite and >= 0", "in [0, 1)".
  const char *description;

  bool contains(T v) const {
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(v))
        return false;
    if (loOpen ? !(v > lo) : !(v >= lo))
      return false;
    return hiOpen ? v < hi : v <= hi;
  }
};

/// How option values are written in messages ("-1", "1e+30", "nan").
template <typename T> std::string optionValueText(T v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// The error of option `arg` holding `value`, or none when `value` lies in
/// `range` or is the option's default `def` (a default outside the range
/// means "not given", e.g. weight-decay's -1).
template <typename T>
std::optional<std::string> checkOptionRange(llvm::StringRef arg, T value, T def,
                                            const OptionRange<T> &range) {
  if (value == def || range.contains(value))
    return std::nullopt;
  return arg.str() + " must be " + range.description + ", got " +
         optionValueText(value);
}

} // namespace shardc

#endif // SHARDC_PASSES_OPTIONRANGE_H
