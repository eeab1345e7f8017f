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
/// kernelTable(). Used by the compiler's constant
/// folder, so folding and execution share one implementation.
/// An op with float16 or bfloat16 operands runs its float32 kernel (every
/// kernel but Cast, which converts them itself): each 16-bit float input is
/// widened into scratch, and each 16-bit float output is computed in
/// float32 and rounded to nearest even, as PyTorch's CPU kernels load,
/// compute and store these types. Only one op's operands are widened at a
/// time: the plan's buffers keep their 16-bit sizes.
llvm::Error runKernel(const KernelContext &ctx);
/// Runs `fn`, one of kernelTable()'s, with that widening where it takes or
/// makes 16-bit floats (the CPU backend launches kernels through it).
llvm::Error launchKernel(KernelFn fn, const KernelContext &ctx);
/// That widening around `fn` (launchKernel applies it).
llvm::Error runWidened(const KernelContext &ctx, KernelFn fn);

} // namespace shardc::rt::cpu

#endif // SHARDC_RUNTIME_CPU_KERNELS_H
