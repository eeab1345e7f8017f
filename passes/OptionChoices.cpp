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

} // namespace shardc
