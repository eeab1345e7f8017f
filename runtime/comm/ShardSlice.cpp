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

#include <algorithm>
#include <cstring>

namespace shardc::rt::cpu {

llvm::Error checkShardSlice(const KernelContext &ctx, size_t &bytes) {
  if (ctx.outputs.size() != 1 || ctx.outputs[0].rank() != 1 ||
      ctx.inputs.empty())
    return ctx.error("expects 1-d inputs and one 1-d output of one type");
  const TensorView &out = ctx.outputs[0];
  int64_t total = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorView &in = ctx.input(i);
    if (in.rank() != 1 || in.dtype != out.dtype)
      return ctx.error("expects 1-d inputs and one 1-d output of one type");
    total += in.numel();
  }
  if (ctx.rank < 0 || ctx.worldSize < 1 || ctx.rank >= ctx.worldSize ||
      total != out.numel() * ctx.worldSize)
    return ctx.error("inputs of " + llvm::Twine(total) + " elements are not " +
                     llvm::Twine(ctx.worldSize) + " shards of " +
                     llvm::Twine(out.numel()));
  bytes = out.bytes();
  return llvm::Error::success();
}

void forEachShardPiece(
    const KernelContext &ctx, size_t bytes,
    llvm::function_ref<void(size_t outOffset, const void *src, size_t n)>
        copy) {
  size_t begin = static_cast<size_t>(ctx.rank) * bytes, end = begin + bytes;
  size_t at = 0;
  for (const TensorView &in : ctx.inputs) {
    size_t size = in.bytes();
    size_t lo = std::max(at, begin), hi = std::min(at + size, end);
    if (lo < hi)
      copy(lo - begin, static_cast<const char *>(in.data) + (lo - at), hi - lo);
    at += size;
  }
}

/// ShardSlice: this rank's chunk of its inputs laid end to end (ZeRO's
/// local partition).
llvm::Error shardSliceKernel(const KernelContext &ctx) {
  size_t bytes = 0;
  SHARDC_CPU_TRY(checkShardSlice(ctx, bytes));
  char *out = static_cast<char *>(ctx.outputs[0].data);
  forEachShardPiece(ctx, bytes, [&](size_t at, const void *src, size_t n) {
    std::memcpy(out + at, src, n);
  });
  return llvm::Error::success();
}

} // namespace shardc::rt::cpu
