//===- Kernels.h - CPU kernels ----------------------------------*- C++ -*-===//
//
// The CPU kernel table. The contract every kernel follows (what the compiler
// guarantees about a plan op) is documented in docs/ops.md.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CPU_KERNELS_H
#define SHARDC_RUNTIME_CPU_KERNELS_H

#include "runtime/Backend.h"

#include <utility>
#include <vector>

namespace shardc::rt::cpu {

/// Every (op type, kernel) pair the CPU backend provides.
const std::vector<std::pair<llvm::StringRef, KernelFn>> &kernelTable();

/// Runs one op on the calling thread; the op type is looked up in
/// kernelTable(). Used by the CPU backend and by the compiler's constant
/// folder, so folding and execution share one implementation.
llvm::Error runKernel(const KernelContext &ctx);

} // namespace shardc::rt::cpu

#endif // SHARDC_RUNTIME_CPU_KERNELS_H
