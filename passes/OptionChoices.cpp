//===- OptionChoices.cpp - Enum-valued pass options -----------------------===//
#include "passes/OptionChoices.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/Format.h"

#include <cmath>

namespace shardc {

llvm::StringRef optimizerName(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::Sgd:
    return "sgd";
  case OptimizerKind::Adam:
    return "adam";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  llvm_unreachable("unknown optimizer");
}

bool LossScaleSpec::parse(llvm::StringRef text, LossScaleSpec &spec) {
  text = text.trim();
  if (text == "auto" || text == "none" || text == "dynamic") {
    spec.kind = text == "auto" ? Auto : text == "none" ? None : Dynamic;
    spec.value = 0;
    return true;
  }
  double v;
  if (text.getAsDouble(v) || !std::isfinite(v) || v <= 0)
    return false;
  spec.kind = Static;
  spec.value = v;
  return true;
}

llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const LossScaleSpec &s) {
  switch (s.kind) {
  case LossScaleSpec::Auto:
    return os << "auto";
  case LossScaleSpec::None:
    return os << "none";
  case LossScaleSpec::Dynamic:
    return os << "dynamic";
  case LossScaleSpec::Static:
    return os << llvm::format("%.17g", s.value);
  }
  llvm_unreachable("unknown loss scale");
}

bool parseOffloadKind(llvm::StringRef text, OffloadKind &kind) {
  if (text == "optimizer")
    kind = OffloadKind::Optimizer;
  else if (text == "params")
    kind = OffloadKind::Params;
  else if (text == "grads")
    kind = OffloadKind::Grads;
  else
    return false;
  return true;
}

llvm::raw_ostream &operator<<(llvm::raw_ostream &os, OffloadKind kind) {
  switch (kind) {
  case OffloadKind::Optimizer:
    return os << "optimizer";
  case OffloadKind::Params:
    return os << "params";
  case OffloadKind::Grads:
    return os << "grads";
  }
  llvm_unreachable("unknown offload kind");
}

bool ReshardSpec::parse(llvm::StringRef text, ReshardSpec &spec) {
  text = text.trim();
  if (text.empty() || text.equals_insensitive("true") ||
      text.equals_insensitive("false")) {
    spec.kind = text.equals_insensitive("false") ? Keep : Full;
    spec.group = 0;
    return true;
  }
  // "1" and "0" would read as booleans to some and as group sizes to
  // others: neither is accepted.
  int64_t g;
  if (text.getAsInteger(10, g) || g < 2)
    return false;
  spec.kind = Group;
  spec.group = g;
  return true;
}

llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const ReshardSpec &s) {
  switch (s.kind) {
  case ReshardSpec::Full:
    return os << "true";
  case ReshardSpec::Keep:
    return os << "false";
  case ReshardSpec::Group:
    return os << s.group;
  }
  llvm_unreachable("unknown reshard-after-forward");
}

} // namespace shardc
