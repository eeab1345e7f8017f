//===- Indexing.cu - Gather(Elements), ScatterElements, Trilu, Range ------===//
//
// Ops that place elements by an index: one thread per output element for
// Gather, GatherElements, Trilu and Range; one thread per (outer, inner)
// column for GatherGrad, which walks the indices in order and so adds
// repeated rows in the CPU kernel's order (no atomics: the embedding
// gradient does not depend on scheduling); one thread per data element for
// GatherElementsGrad and ScatterElements, which walk the indices along the
// axis in order and add those that point at it (or keep the last), again in
// the CPU kernel's order. An index out of range is recorded by position and
// read back before the kernel returns (CudaKernels.h), giving the CPU
// kernel's error. Range reads its three scalars back to check the element
// count the output was planned with. Operand checks are the CPU kernels'.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"
#include "runtime/kernels/LossOps.h"

namespace shardc::rt::cuda {

namespace {

#define GRID_STRIDE_LOOP(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

/// Index `i` normalized into [0, axisDim), or -1 (recorded) when outside
/// [-axisDim, axisDim).
__device__ int64_t normalizedIndex(const void *indices,
                                   const cpu::GatherGeometry &g, int64_t i,
                                   unsigned long long *badPosition) {
  int64_t v = ops::loadIndex(indices, g.wideIndices, i);
  if (v < -g.axisDim || v >= g.axisDim) {
    atomicMin(badPosition, static_cast<unsigned long long>(i));
    return -1;
  }
  return v < 0 ? v + g.axisDim : v;
}

template <typename T>
__global__ void gatherElements(const T *data, const void *indices, T *out,
                               int64_t n, cpu::GatherGeometry g,
                               unsigned long long *badPosition) {
  GRID_STRIDE_LOOP(e, n) {
    int64_t j = e % g.inner;
    int64_t i = (e / g.inner) % g.count;
    int64_t o = e / (g.inner * g.count);
    int64_t v = normalizedIndex(indices, g, i, badPosition);
    out[e] = v < 0 ? T(0) : data[(o * g.axisDim + v) * g.inner + j];
  }
}

template <typename T>
__global__ void gatherGradColumns(const T *dy, const void *indices, T *dData,
                                  cpu::GatherGeometry g,
                                  unsigned long long *badPosition) {
  GRID_STRIDE_LOOP(c, g.outer * g.inner) {
    int64_t o = c / g.inner, j = c % g.inner;
    const T *src = dy + o * g.count * g.inner + j;
    T *block = dData + o * g.axisDim * g.inner + j;
    for (int64_t i = 0; i < g.count; ++i) {
      int64_t v = normalizedIndex(indices, g, i, badPosition);
      if (v >= 0)
        block[v * g.inner] += src[i * g.inner];
    }
  }
}

template <typename T>
__global__ void gatherElementsOut(const T *data, const void *indices, T *out,
                                  cpu::GatherElementsGeometry g,
                                  unsigned long long *badPosition) {
  GRID_STRIDE_LOOP(e, g.index.count) {
    int64_t v = normalizedIndex(indices, g.index, e, badPosition);
    out[e] = v < 0 ? T(0) : data[g.offset(e, v)];
  }
}

/// The line of indices elements that may point at data element `f`: false
/// when the indices do not reach f's coordinates off the axis; else the
/// indices element at f's coordinates with axis coordinate 0 (`base`), the
/// step along the axis, and f's own axis coordinate (`target`).
__device__ bool indicesLineOf(const cpu::GatherElementsGeometry &g, int64_t f,
                              int64_t &base, int64_t &step, int64_t &target) {
  int64_t coord[cpu::GatherElementsGeometry::kMaxRank];
  for (int d = 0; d < g.rank; ++d) {
    coord[d] = (f / g.dataStride[d]) % g.dataShape[d];
    if (d != g.index.axis && coord[d] >= g.shape[d])
      return false;
  }
  base = 0;
  step = 1;
  int64_t stride = 1;
  for (int d = g.rank - 1; d >= 0; --d) {
    if (d == g.index.axis)
      step = stride;
    else
      base += coord[d] * stride;
    stride *= g.shape[d];
  }
  target = coord[g.index.axis];
  return true;
}

/// dData[f] = the dY elements whose index points at f, added in the order of
/// the indices along the axis (the CPU kernel's order for f).
template <typename T>
__global__ void gatherElementsGradData(const T *dy, const void *indices,
                                       T *dData, int64_t n,
                                       cpu::GatherElementsGeometry g,
                                       unsigned long long *badPosition) {
  GRID_STRIDE_LOOP(f, n) {
    T acc = T(0);
    int64_t base, step, target;
    if (indicesLineOf(g, f, base, step, target))
      for (int64_t k = 0; k < g.shape[g.index.axis]; ++k) {
        int64_t e = base + k * step;
        if (normalizedIndex(indices, g.index, e, badPosition) == target)
          acc += dy[e];
      }
    dData[f] = acc;
  }
}

/// out[f] = the last update (in the indices' order along the axis, the CPU
/// kernel's order) whose index points at f, else data[f].
template <typename T>
__global__ void scatterElementsOut(const T *data, const void *indices,
                                   const T *updates, T *out, int64_t n,
                                   cpu::GatherElementsGeometry g,
                                   unsigned long long *badPosition) {
  GRID_STRIDE_LOOP(f, n) {
    T v = data[f];
    int64_t base, step, target;
    if (indicesLineOf(g, f, base, step, target))
      for (int64_t k = 0; k < g.shape[g.index.axis]; ++k) {
        int64_t e = base + k * step;
        if (normalizedIndex(indices, g.index, e, badPosition) == target)
          v = updates[e];
      }
    out[f] = v;
  }
}

template <typename T>
__global__ void triluElements(const T *x, T *y, int64_t n,
                              cpu::TriluGeometry g) {
  GRID_STRIDE_LOOP(at, n) { y[at] = g.keeps(at) ? x[at] : T(0); }
}

template <typename T>
__global__ void rangeElements(T *y, int64_t n, T start, T delta) {
  GRID_STRIDE_LOOP(i, n) {
    y[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  }
}

__global__ void indexChecks(const void *indices, cpu::GatherGeometry g,
                            unsigned long long *badPosition) {
  GRID_STRIDE_LOOP(i, g.count) { normalizedIndex(indices, g, i, badPosition); }
}

/// Records a bad index without moving anything.
llvm::Error checkIndices(const KernelContext &ctx, const cpu::GatherGeometry &g,
                         unsigned long long *bad) {
  indexChecks<<<blocksFor(g.count), kBlock, 0, cudaStreamOf(ctx)>>>(
      ctx.inputs[1].data, g, bad);
  return checkLaunch(ctx);
}

/// Scratch for one bad-position word, reset.
llvm::Error badPositionWord(const KernelContext &ctx,
                            unsigned long long *&word) {
  llvm::Expected<void *> base = streamOf(ctx).scratch(sizeof *word);
  if (!base)
    return base.takeError();
  word = static_cast<unsigned long long *>(*base);
  return resetBadPosition(ctx, word);
}

/// The CPU kernel's error when a thread recorded a bad index.
llvm::Error reportBadIndex(const KernelContext &ctx,
                           const cpu::GatherGeometry &g,
                           const unsigned long long *word) {
  int64_t position, value;
  SHARDC_CPU_TRY(readBadPosition(ctx, word, ctx.inputs[1].data, g.wideIndices,
                                 position, value));
  if (position < 0)
    return llvm::Error::success();
  return cpu::indexOutOfRange(ctx, value, g);
}

} // namespace

llvm::Error gatherKernel(const KernelContext &ctx) {
  cpu::GatherGeometry g;
  SHARDC_CPU_TRY(cpu::checkGather(ctx, g));
  const TensorView &data = ctx.inputs[0];
  int64_t n = ctx.outputs[0].numel();
  unsigned long long *bad = nullptr;
  SHARDC_CPU_TRY(badPositionWord(ctx, bad));
  if (n > 0) {
    SHARDC_CPU_TRY(cpu::dispatchBySize(
        ctx, data.dtype, "data", [&](auto tag) -> llvm::Error {
          using T = typename decltype(tag)::type;
          gatherElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
              data.as<T>(), ctx.inputs[1].data, ctx.outputs[0].as<T>(), n, g,
              bad);
          return checkLaunch(ctx);
        }));
  } else if (g.count > 0) {
    // Nothing to move, but the indices are still checked, as on the CPU.
    SHARDC_CPU_TRY(checkIndices(ctx, g, bad));
  }
  return reportBadIndex(ctx, g, bad);
}

llvm::Error gatherGradKernel(const KernelContext &ctx) {
  cpu::GatherGeometry g;
  SHARDC_CPU_TRY(cpu::checkGatherGrad(ctx, g));
  const TensorView &dData = ctx.outputs[0];
  unsigned long long *bad = nullptr;
  SHARDC_CPU_TRY(badPositionWord(ctx, bad));
  if (dData.bytes() > 0)
    SHARDC_CPU_TRY(
        check(cudaMemsetAsync(dData.data, 0, dData.bytes(), cudaStreamOf(ctx)),
              "cudaMemsetAsync (GatherGrad)"));
  int64_t columns = g.outer * g.inner;
  if (columns == 0 && g.count > 0)
    SHARDC_CPU_TRY(checkIndices(ctx, g, bad));
  if (columns > 0)
    SHARDC_CPU_TRY(cpu::dispatchIn(
        cpu::FloatTypes{}, ctx, dData.dtype, "dY",
        [&](auto tag) -> llvm::Error {
          using T = typename decltype(tag)::type;
          gatherGradColumns<<<blocksFor(columns), kBlock, 0,
                              cudaStreamOf(ctx)>>>(
              ctx.inputs[0].as<T>(), ctx.inputs[1].data, dData.as<T>(), g, bad);
          return checkLaunch(ctx);
        }));
  return reportBadIndex(ctx, g, bad);
}

llvm::Error gatherElementsKernel(const KernelContext &ctx) {
  cpu::GatherElementsGeometry g;
  SHARDC_CPU_TRY(cpu::checkGatherElements(ctx, g));
  unsigned long long *bad = nullptr;
  SHARDC_CPU_TRY(badPositionWord(ctx, bad));
  if (g.index.count > 0)
    SHARDC_CPU_TRY(cpu::dispatchBySize(
        ctx, ctx.inputs[0].dtype, "data", [&](auto tag) -> llvm::Error {
          using T = typename decltype(tag)::type;
          gatherElementsOut<<<blocksFor(g.index.count), kBlock, 0,
                              cudaStreamOf(ctx)>>>(
              ctx.inputs[0].as<T>(), ctx.inputs[1].data, ctx.outputs[0].as<T>(),
              g, bad);
          return checkLaunch(ctx);
        }));
  return reportBadIndex(ctx, g.index, bad);
}

/// Runs `launch(badPosition)`, one thread per data element of a
/// GatherElementsGrad or ScatterElements, when there are `n` > 0 of them
/// (else only checks the indices), and reports an index out of range.
template <typename Launch>
static llvm::Error perDataElement(const KernelContext &ctx,
                                  const cpu::GatherElementsGeometry &g,
                                  int64_t n, Launch launch) {
  unsigned long long *bad = nullptr;
  SHARDC_CPU_TRY(badPositionWord(ctx, bad));
  if (n == 0 && g.index.count > 0)
    SHARDC_CPU_TRY(checkIndices(ctx, g.index, bad));
  if (n > 0)
    SHARDC_CPU_TRY(launch(bad));
  return reportBadIndex(ctx, g.index, bad);
}

llvm::Error gatherElementsGradKernel(const KernelContext &ctx) {
  cpu::GatherElementsGeometry g;
  SHARDC_CPU_TRY(cpu::checkGatherElementsGrad(ctx, g));
  const TensorView &dData = ctx.outputs[0];
  int64_t n = dData.numel();
  return perDataElement(ctx, g, n, [&](unsigned long long *bad) {
    return cpu::dispatchIn(cpu::FloatTypes{}, ctx, dData.dtype, "dY",
                           [&](auto tag) -> llvm::Error {
                             using T = typename decltype(tag)::type;
                             gatherElementsGradData<<<blocksFor(n), kBlock, 0,
                                                      cudaStreamOf(ctx)>>>(
                                 ctx.inputs[0].as<T>(), ctx.inputs[1].data,
                                 dData.as<T>(), n, g, bad);
                             return checkLaunch(ctx);
                           });
  });
}

llvm::Error scatterElementsKernel(const KernelContext &ctx) {
  cpu::GatherElementsGeometry g;
  SHARDC_CPU_TRY(cpu::checkScatterElements(ctx, g));
  const TensorView &out = ctx.outputs[0];
  int64_t n = out.numel();
  return perDataElement(ctx, g, n, [&](unsigned long long *bad) {
    return cpu::dispatchBySize(
        ctx, out.dtype, "data", [&](auto tag) -> llvm::Error {
          using T = typename decltype(tag)::type;
          scatterElementsOut<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
              ctx.inputs[0].as<T>(), ctx.inputs[1].data, ctx.inputs[2].as<T>(),
              out.as<T>(), n, g, bad);
          return checkLaunch(ctx);
        });
  });
}

llvm::Error triluKernel(const KernelContext &ctx) {
  cpu::TriluGeometry g;
  SHARDC_CPU_TRY(cpu::checkTrilu(ctx, g));
  const TensorView &x = ctx.inputs[0];
  int64_t n = x.numel();
  if (n == 0)
    return llvm::Error::success();
  return cpu::dispatchBySize(
      ctx, x.dtype, "input", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        triluElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
            x.as<T>(), ctx.outputs[0].as<T>(), n, g);
        return checkLaunch(ctx);
      });
}

llvm::Error rangeKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::checkRange(ctx));
  const TensorView &y = ctx.outputs[0];
  return cpu::dispatchIn(
      cpu::RangeTypes{}, ctx, y.dtype, "output", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        T scalars[3];
        CudaStream &stream = streamOf(ctx);
        for (int i = 0; i < 3; ++i)
          SHARDC_CPU_TRY(
              stream.readBack(&scalars[i], ctx.inputs[i].data, sizeof(T)));
        SHARDC_CPU_TRY(
            cpu::checkRangeCount(ctx, scalars[0], scalars[1], scalars[2]));
        int64_t n = y.shape[0];
        if (n == 0)
          return llvm::Error::success();
        rangeElements<<<blocksFor(n), kBlock, 0, cudaStreamOf(ctx)>>>(
            y.as<T>(), n, scalars[0], scalars[2]);
        return checkLaunch(ctx);
      });
}

llvm::Error shardSliceKernel(const KernelContext &ctx) {
  size_t bytes = 0;
  SHARDC_CPU_TRY(cpu::checkShardSlice(ctx, bytes));
  char *out = static_cast<char *>(ctx.outputs[0].data);
  llvm::Error err = llvm::Error::success();
  cpu::forEachShardPiece(ctx, bytes, [&](size_t at, const void *src, size_t n) {
    if (!err) // Error's operator= is [[nodiscard]].
      static_cast<void>(err = check(cudaMemcpyAsync(out + at, src, n,
                                                    cudaMemcpyDeviceToDevice,
                                                    cudaStreamOf(ctx)),
                                    "cudaMemcpyAsync (ShardSlice)"));
  });
  return err;
}

} // namespace shardc::rt::cuda
