//===- OptionChoices.h - Enum-valued pass options ---------------*- C++ -*-===//
//
// The enumerations that pass options take (declared in Passes.td with
// `llvm::cl::values`), and the command-line parser they use: llvm::cl's
// enum parser, except that an unknown value is rejected with the list of
// choices. The parser is the one of every place an option is parsed: shardc's
// flags, pipeline options (`shardc-opt --shardc-train-pipeline='...'`) and
// pass options (`shardc-opt --shardc-schedule-collectives='...'`).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PASSES_OPTIONCHOICES_H
#define SHARDC_PASSES_OPTIONCHOICES_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace shardc {

/// The optimizer of a training step (`optimizer`).
enum class OptimizerKind { Sgd, Adam, AdamW };
/// When ZeRO-3 prefetches the next unit's parameters in backward
/// (`backward-prefetch`; FSDP's BackwardPrefetch).
enum class BackwardPrefetch { Pre, Post, None };
/// The learning-rate schedule (`lr-schedule`): the dialect's enumeration
/// (ir/ShardcAttrs.td), which the update ops carry.
enum class LrSchedule : uint32_t;
/// The norm gradient clipping bounds (`clip-norm-type`): the dialect's
/// enumeration (ir/ShardcAttrs.td), which PartialNorm and ClipCoefficient
/// carry.
enum class NormType : uint32_t;

/// What a training step keeps in the offload tier (`offload`; FSDP's
/// CPUOffload, DeepSpeed's offload_optimizer / offload_param): the optimizer
/// state, the parameters (their shards at stage 3), the gradients the
/// optimizer updates read (from their reduction to their update).
enum class OffloadKind { Optimizer, Params, Grads };
/// Parses "optimizer", "params" or "grads"; false for anything else.
bool parseOffloadKind(llvm::StringRef text, OffloadKind &kind);
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, OffloadKind kind);

/// A floating-point precision of mixed-precision training (`param-dtype`,
/// `reduce-dtype`, `buffer-dtype`); `Param` is "the param dtype's".
enum class Precision { Fp32, Bf16, Fp16, Param };

/// The loss scaling of a training step (`loss-scale`): `auto` (dynamic when
/// forward and backward compute in float16, else none), `none`, `dynamic`
/// (torch.cuda.amp.GradScaler's) or a static `value`. Parsed from "auto",
/// "none", "dynamic" or a positive number.
struct LossScaleSpec {
  enum Kind { Auto, None, Dynamic, Static };
  Kind kind = Auto;
  double value = 0; // Static only.

  bool operator==(const LossScaleSpec &o) const {
    return kind == o.kind && (kind != Static || value == o.value);
  }
  bool operator!=(const LossScaleSpec &o) const { return !(*this == o); }
  /// Parses `text`; false when it is none of the forms above.
  static bool parse(llvm::StringRef text, LossScaleSpec &spec);
};
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const LossScaleSpec &s);

/// What ZeRO-3 keeps of a unit's gathered parameters from forward to backward
/// (`reshard-after-forward`; FSDP's reshard_after_forward, with FSDP2's
/// integer form): `true` frees them, and backward gathers the unit again
/// from its shards (the default); `false` keeps them whole until backward;
/// a group size G keeps a copy sharded over G consecutive ranks (e.g. one
/// node), so that backward gathers within the G ranks. Parsed from "true",
/// "false" (or no value: true) or an integer G >= 2.
struct ReshardSpec {
  enum Kind { Full, Keep, Group };
  Kind kind = Full;
  int64_t group = 0; // Group only.

  bool operator==(const ReshardSpec &o) const {
    return kind == o.kind && (kind != Group || group == o.group);
  }
  bool operator!=(const ReshardSpec &o) const { return !(*this == o); }
  /// Parses `text`; false when it is none of the forms above.
  static bool parse(llvm::StringRef text, ReshardSpec &spec);
};
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const ReshardSpec &s);

/// PyTorch's name of an optimizer ("sgd", "adam", "adamw").
llvm::StringRef optimizerName(OptimizerKind kind);

namespace detail {
/// A cl parser over a fixed set of named values (what llvm::cl::parser does
/// for enums), whose error for an unknown value names every choice.
template <typename T>
class ChoiceParser : public llvm::cl::generic_parser_base {
protected:
  struct Choice : public GenericOptionInfo {
    Choice(llvm::StringRef name, T v, llvm::StringRef help)
        : GenericOptionInfo(name, help), V(v) {}
    llvm::cl::OptionValue<T> V;
  };
  /// `Values`, as llvm::cl::parser names it: MLIR's pass option printer
  /// reads it to print a value's name.
  llvm::SmallVector<Choice, 4> Values;

public:
  using parser_data_type = T;
  ChoiceParser(llvm::cl::Option &owner) : generic_parser_base(owner) {}

  unsigned getNumOptions() const override { return Values.size(); }
  llvm::StringRef getOption(unsigned n) const override {
    return Values[n].Name;
  }
  llvm::StringRef getDescription(unsigned n) const override {
    return Values[n].HelpStr;
  }
  const llvm::cl::GenericOptionValue &
  getOptionValue(unsigned n) const override {
    return Values[n].V;
  }

  /// Returns true (after reporting through `o`) on an unknown value.
  bool parse(llvm::cl::Option &o, llvm::StringRef argName, llvm::StringRef arg,
             T &value) {
    llvm::StringRef given = Owner.hasArgStr() ? arg : argName;
    for (const Choice &c : Values)
      if (c.Name == given) {
        value = c.V.getValue();
        return false;
      }
    std::string choices;
    for (const Choice &c : Values)
      choices += (choices.empty() ? "" : ", ") + c.Name.str();
    return o.error("'" + given + "' is not one of: " + choices);
  }

  template <typename DT>
  void addLiteralOption(llvm::StringRef name, const DT &v,
                        llvm::StringRef help) {
    Values.emplace_back(name, static_cast<T>(v), help);
    AddLiteralOption(Owner, name);
  }
  void removeLiteralOption(llvm::StringRef name) {
    Values.erase(Values.begin() + findOption(name));
  }
};
} // namespace detail
} // namespace shardc

namespace llvm::cl {
template <>
class parser<shardc::OptimizerKind>
    : public shardc::detail::ChoiceParser<shardc::OptimizerKind> {
public:
  using ChoiceParser::ChoiceParser;
};
template <>
class parser<shardc::BackwardPrefetch>
    : public shardc::detail::ChoiceParser<shardc::BackwardPrefetch> {
public:
  using ChoiceParser::ChoiceParser;
};
template <>
class parser<shardc::Precision>
    : public shardc::detail::ChoiceParser<shardc::Precision> {
public:
  using ChoiceParser::ChoiceParser;
};
template <>
class parser<shardc::LrSchedule>
    : public shardc::detail::ChoiceParser<shardc::LrSchedule> {
public:
  using ChoiceParser::ChoiceParser;
};
template <>
class parser<shardc::NormType>
    : public shardc::detail::ChoiceParser<shardc::NormType> {
public:
  using ChoiceParser::ChoiceParser;
};

/// LossScaleSpec holds a value, not one of a fixed set of names.
template <>
struct OptionValue<shardc::LossScaleSpec> final
    : OptionValueCopy<shardc::LossScaleSpec> {
  using WrapperType = shardc::LossScaleSpec;
  OptionValue() = default;
  OptionValue(const shardc::LossScaleSpec &v) { setValue(v); }
  OptionValue &operator=(const shardc::LossScaleSpec &v) {
    setValue(v);
    return *this;
  }

private:
  void anchor() override {}
};
template <>
class parser<shardc::LossScaleSpec>
    : public basic_parser<shardc::LossScaleSpec> {
public:
  parser(Option &o) : basic_parser(o) {}
  /// Returns true (after reporting through `o`) on a malformed value.
  bool parse(Option &o, StringRef argName, StringRef arg,
             shardc::LossScaleSpec &value) {
    if (shardc::LossScaleSpec::parse(arg, value))
      return false;
    return o.error("'" + arg +
                   "' is not auto, none, dynamic or a positive number");
  }
  StringRef getValueName() const override { return "auto|none|dynamic|VALUE"; }
  void printOptionDiff(const Option &o, const shardc::LossScaleSpec &v,
                       const OptionValue<shardc::LossScaleSpec> &,
                       size_t globalWidth) const {
    printOptionName(o, globalWidth);
    outs() << "= " << v << "\n";
  }
};

/// OffloadKind parses by itself (a list option's elements are parsed by a
/// parser of their own, which llvm::cl::values never reaches).
template <>
struct OptionValue<shardc::OffloadKind> final
    : OptionValueCopy<shardc::OffloadKind> {
  using WrapperType = shardc::OffloadKind;
  OptionValue() = default;
  OptionValue(const shardc::OffloadKind &v) { setValue(v); }
  OptionValue &operator=(const shardc::OffloadKind &v) {
    setValue(v);
    return *this;
  }

private:
  void anchor() override {}
};
template <>
class parser<shardc::OffloadKind> : public basic_parser<shardc::OffloadKind> {
public:
  parser(Option &o) : basic_parser(o) {}
  /// Returns true (after reporting through `o`) on an unknown value.
  bool parse(Option &o, StringRef argName, StringRef arg,
             shardc::OffloadKind &value) {
    if (shardc::parseOffloadKind(arg, value))
      return false;
    return o.error("'" + arg + "' is not one of: optimizer, params, grads");
  }
  StringRef getValueName() const override { return "optimizer|params|grads"; }
  void printOptionDiff(const Option &o, const shardc::OffloadKind &v,
                       const OptionValue<shardc::OffloadKind> &,
                       size_t globalWidth) const {
    printOptionName(o, globalWidth);
    outs() << "= " << v << "\n";
  }
};

/// ReshardSpec holds a value; with no value the flag means `true`, as a
/// boolean flag does.
template <>
struct OptionValue<shardc::ReshardSpec> final
    : OptionValueCopy<shardc::ReshardSpec> {
  using WrapperType = shardc::ReshardSpec;
  OptionValue() = default;
  OptionValue(const shardc::ReshardSpec &v) { setValue(v); }
  OptionValue &operator=(const shardc::ReshardSpec &v) {
    setValue(v);
    return *this;
  }

private:
  void anchor() override {}
};
template <>
class parser<shardc::ReshardSpec> : public basic_parser<shardc::ReshardSpec> {
public:
  parser(Option &o) : basic_parser(o) {}
  enum ValueExpected getValueExpectedFlagDefault() const {
    return ValueOptional;
  }
  /// Returns true (after reporting through `o`) on a malformed value.
  bool parse(Option &o, StringRef argName, StringRef arg,
             shardc::ReshardSpec &value) {
    if (shardc::ReshardSpec::parse(arg, value))
      return false;
    return o.error("'" + arg +
                   "' is not true, false or a group size G >= 2 (the ranks "
                   "a unit stays sharded over between forward and backward)");
  }
  StringRef getValueName() const override { return "true|false|G"; }
  void printOptionDiff(const Option &o, const shardc::ReshardSpec &v,
                       const OptionValue<shardc::ReshardSpec> &,
                       size_t globalWidth) const {
    printOptionName(o, globalWidth);
    outs() << "= " << v << "\n";
  }
};
} // namespace llvm::cl

#endif // SHARDC_PASSES_OPTIONCHOICES_H
