//===- ShardSlice.cpp - This rank's shard of a buffer ---------------------===//
//
// ShardSlice is the rank-local part of sharded data parallelism: this rank's
// chunk of a buffer, without communication. It lives under comm/ with the
// rest of the collective ops' runtime code, and is built into the CPU
// backend, which registers it (runtime/cpu/CMakeLists.txt), so that the
// executor and the compiler's constant folder run the same code.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"

#include <cstring>

namespace shardc::rt::cpu {

llvm::Error checkShardSlice(const KernelContext &ctx, size_t &bytes) {
  const TensorView &in = ctx.input(0);
  if (ctx.outputs.size() != 1 || in.rank() != 1 || ctx.outputs[0].rank() != 1 ||
      in.dtype != ctx.outputs[0].dtype)
    return ctx.error("expects one 1-d input and one 1-d output of one type");
  const TensorView &out = ctx.outputs[0];
  if (ctx.rank < 0 || ctx.worldSize < 1 || ctx.rank >= ctx.worldSize ||
      in.numel() != out.numel() * ctx.worldSize)
    return ctx.error("input of " + llvm::Twine(in.numel()) +
                     " elements is not " + llvm::Twine(ctx.worldSize) +
                     " shards of " + llvm::Twine(out.numel()));
  bytes = out.bytes();
  return llvm::Error::success();
}

/// ShardSlice: this rank's chunk of a 1-d buffer (ZeRO's local partition).
llvm::Error shardSliceKernel(const KernelContext &ctx) {
  size_t bytes = 0;
  SHARDC_CPU_TRY(checkShardSlice(ctx, bytes));
  if (bytes)
    std::memcpy(ctx.outputs[0].data,
                static_cast<const char *>(ctx.inputs[0].data) +
                    ctx.rank * bytes,
                bytes);
  return llvm::Error::success();
}

} // namespace shardc::rt::cpu
