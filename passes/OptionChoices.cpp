//===- OptionChoices.cpp - Enum-valued pass options -----------------------===//
#include "passes/OptionChoices.h"

#include "llvm/Support/ErrorHandling.h"

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

} // namespace shardc
