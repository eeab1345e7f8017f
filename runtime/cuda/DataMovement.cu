//===- DataMovement.cu - Transpose, Expand, Slice, Concat, Split ----------===//
//
// Every op here moves elements between a dense tensor and a strided view of
// another: a gather (dense output, strided input: Transpose, Expand, Slice,
// Split) or a scatter (strided output: SliceGrad, Concat), one thread per
// element, moving bytes of the element's width so any element type works.
// Operand checks and the strides are the CPU kernels' (runtime/cpu).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaKernels.h"

namespace shardc::rt::cuda {

namespace {

template <typename T>
__global__ void gatherStrided(const T *src, T *dst, int64_t n, Indexer<1> ix) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    int64_t off[1];
    ix.offsets(i, off);
    dst[i] = src[off[0]];
  }
}

template <typename T>
__global__ void scatterStrided(const T *src, T *dst, int64_t n, Indexer<1> ix) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x) {
    int64_t off[1];
    ix.offsets(i, off);
    dst[off[0]] = src[i];
  }
}

/// dense[i] = strided[base + offset(i)] for every element of the dense
/// tensor of `shape` (gather), or the other way round (scatter).
llvm::Error stridedMove(const KernelContext &ctx, DType dtype,
                        llvm::ArrayRef<int64_t> shape,
                        llvm::ArrayRef<int64_t> strides, const void *src,
                        void *dst, int64_t base, bool scatter) {
  int64_t n = numElements(shape);
  if (n == 0)
    return llvm::Error::success();
  Indexer<1> ix;
  SHARDC_CPU_TRY(makeIndexer<1>(ctx, shape, {strides}, ix));
  return cpu::dispatchBySize(
      ctx, dtype, "'data'", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        cudaStream_t s = cudaStreamOf(ctx);
        if (scatter)
          scatterStrided<<<blocksFor(n), kBlock, 0, s>>>(
              static_cast<const T *>(src), static_cast<T *>(dst) + base, n, ix);
        else
          gatherStrided<<<blocksFor(n), kBlock, 0, s>>>(
              static_cast<const T *>(src) + base, static_cast<T *>(dst), n, ix);
        return checkLaunch(ctx);
      });
}

/// Row-major strides of `shape` in a tensor whose `axis` is `axisSize` long
/// (a part of a concatenation inside the whole).
llvm::SmallVector<int64_t, 6> stridesWithin(llvm::ArrayRef<int64_t> shape,
                                            int64_t axis, int64_t axisSize) {
  llvm::SmallVector<int64_t, 6> whole(shape.begin(), shape.end());
  whole[axis] = axisSize;
  return cpu::rowMajorStrides(whole);
}

} // namespace

llvm::Error transposeKernel(const KernelContext &ctx) {
  llvm::SmallVector<int64_t, 6> outShape, strides;
  SHARDC_CPU_TRY(cpu::checkTranspose(ctx, outShape, strides));
  return stridedMove(ctx, ctx.inputs[0].dtype, outShape, strides,
                     ctx.inputs[0].data, ctx.outputs[0].data, 0, false);
}

llvm::Error expandKernel(const KernelContext &ctx) {
  llvm::SmallVector<int64_t, 6> strides;
  SHARDC_CPU_TRY(cpu::checkExpand(ctx, strides));
  return stridedMove(ctx, ctx.inputs[0].dtype, ctx.outputs[0].shape, strides,
                     ctx.inputs[0].data, ctx.outputs[0].data, 0, false);
}

llvm::Error sliceKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::requireInput(ctx, 0, "data"));
  SHARDC_CPU_TRY(cpu::requireOutput(ctx, 0, "output"));
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  int64_t base = 0;
  llvm::SmallVector<int64_t, 6> strides;
  SHARDC_CPU_TRY(cpu::checkSlice(ctx, x, "data", y, "output", base, strides));
  return stridedMove(ctx, x.dtype, y.shape, strides, x.data, y.data, base,
                     false);
}

llvm::Error sliceGradKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::requireInput(ctx, 0, "dY"));
  SHARDC_CPU_TRY(cpu::requireOutput(ctx, 0, "dX"));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &dx = ctx.outputs[0];
  int64_t base = 0;
  llvm::SmallVector<int64_t, 6> strides;
  SHARDC_CPU_TRY(cpu::checkSlice(ctx, dx, "dX", dy, "dY", base, strides));
  if (dx.bytes() > 0)
    SHARDC_CPU_TRY(
        check(cudaMemsetAsync(dx.data, 0, dx.bytes(), cudaStreamOf(ctx)),
              "cudaMemsetAsync"));
  return stridedMove(ctx, dy.dtype, dy.shape, strides, dy.data, dx.data, base,
                     true);
}

llvm::Error concatKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::requireOutput(ctx, 0, "concat_result"));
  const TensorView &y = ctx.outputs[0];
  if (ctx.inputs.empty())
    return ctx.error("needs at least one input");
  int64_t axis;
  SHARDC_CPU_TRY(cpu::checkConcatParts(ctx, y, ctx.inputs, "inputs", axis));
  llvm::SmallVector<int64_t, 6> yStrides = cpu::rowMajorStrides(y.shape);
  int64_t offset = 0;
  for (const TensorView &x : ctx.inputs) {
    SHARDC_CPU_TRY(stridedMove(ctx, y.dtype, x.shape,
                               stridesWithin(x.shape, axis, y.shape[axis]),
                               x.data, y.data, offset * yStrides[axis], true));
    offset += x.shape[axis];
  }
  return llvm::Error::success();
}

llvm::Error splitKernel(const KernelContext &ctx) {
  SHARDC_CPU_TRY(cpu::requireInput(ctx, 0, "input"));
  const TensorView &x = ctx.inputs[0];
  if (ctx.outputs.empty())
    return ctx.error("needs at least one output");
  int64_t axis;
  SHARDC_CPU_TRY(cpu::checkConcatParts(ctx, x, ctx.outputs, "outputs", axis));
  llvm::SmallVector<int64_t, 6> xStrides = cpu::rowMajorStrides(x.shape);
  int64_t offset = 0;
  for (const TensorView &y : ctx.outputs) {
    SHARDC_CPU_TRY(stridedMove(ctx, x.dtype, y.shape,
                               stridesWithin(y.shape, axis, x.shape[axis]),
                               x.data, y.data, offset * xStrides[axis], false));
    offset += y.shape[axis];
  }
  return llvm::Error::success();
}

} // namespace shardc::rt::cuda
