//===- StepFunction.cpp - Finding the step function of a module -----------===//
//
// Every pass works on the step function `func.func @main` that the importer
// creates. A pass run on a module without it reports that, naming itself,
// instead of silently doing nothing.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

using namespace mlir;

namespace shardc {

FailureOr<func::FuncOp> getStepFunction(ModuleOp module, StringRef pass) {
  if (auto func = module.lookupSymbol<func::FuncOp>("main"))
    return func;
  return module.emitError() << pass << ": the module has no func.func @main";
}

} // namespace shardc
