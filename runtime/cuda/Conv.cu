//===- Conv.cu - Conv, ConvGradInput and ConvGradWeight on CUDA -----------===//
//
// The CPU kernels' algorithm (runtime/cpu/Conv.cpp) on the device, with
// their operand checks (cpu::checkConv, cpu::checkConvGradInput,
// cpu::checkConvGradWeight):
//
//  * Conv: per image and group, Y_g = W_g * im2col(X_g). im2col runs as one
//    thread per column element over a chunk of images (all groups at once)
//    into stream scratch; the products are strided-batched cuBLAS calls
//    (cuda::gemm), batched over the images of the chunk or over the groups,
//    whichever needs fewer calls. A bias is added afterwards, as on the CPU.
//  * ConvGradInput: col = W_g^T * dY_g, then dX = col2im(col). col2im is a
//    gather, one thread per dX element adding its column entries in
//    ascending kernel-tap order, the order in which the CPU's scatter adds
//    them: deterministic, no atomics, and the same sums as the CPU's for
//    the same columns.
//  * ConvGradWeight: dW_g = sum over images of dY_g * im2col(X_g)^T, one
//    product per image (batched over the groups) accumulating with beta = 1
//    in image order, as the CPU does.
//
// cuDNN runs the three instead where it takes the operands (Cudnn.h); the
// kernels here are for the rest, and for shardrun --cudnn=false. Float16
// and bfloat16 operands go to cuDNN in their own type; what it does not
// take runs here in float32 on widened copies (runWidened).
//
// A 1x1 kernel with unit strides and no padding skips im2col/col2im (the
// input is its own column matrix). Column scratch is requested once per
// kernel call (at most one scratch buffer is live) and covers as many
// images as fit in kColumnBudget, at least one. The products differ from
// the CPU's by cuBLAS's summation order only.
//
// The window geometry travels to the device in fixed arrays (ConvDims): at
// most kMaxSpatial spatial dimensions, where the CPU kernels take any.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/ConvPool.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/Cudnn.h"

#include <algorithm>

namespace shardc::rt::cuda {

namespace {

/// Bytes of column scratch one call aims to stay within.
constexpr int64_t kColumnBudget = int64_t(64) << 20;

/// The window geometry of cpu::ConvGeometry as a kernel argument.
using ConvDims = WindowDims;

llvm::Error makeConvDims(const KernelContext &ctx, const cpu::ConvGeometry &g,
                         ConvDims &d) {
  return makeWindowDims(ctx, g.inShape, g.outShape, g.w, "convolves", d);
}

/// col (images*channels planes of kprod x outSize) from x (images*channels
/// planes of inSize): one thread per column element, `total` of them; taps
/// on padding read zero.
template <typename T>
__global__ void im2colElements(const T *x, T *col, int64_t total, ConvDims d) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t j = e % d.outSize;
    int64_t r = e / d.outSize;
    int64_t kk = r % d.kprod;
    int64_t plane = r / d.kprod;
    int64_t off = 0, stride = 1;
    bool valid = true;
    for (int s = d.ns - 1; s >= 0; --s) {
      int64_t o = j % d.out[s];
      j /= d.out[s];
      int64_t k = kk % d.kernel[s];
      kk /= d.kernel[s];
      int64_t i = o * d.strides[s] - d.padBegin[s] + k * d.dilations[s];
      valid = valid && i >= 0 && i < d.in[s];
      off += i * stride;
      stride *= d.in[s];
    }
    col[e] = valid ? x[plane * d.inSize + off] : T(0);
  }
}

/// The adjoint of im2colElements as a gather: each of the `total` elements
/// of x sums the column entries read from it, in ascending kernel-tap order
/// (the CPU's col2im adds them in that order), starting from zero.
template <typename T>
__global__ void col2imElements(const T *col, T *x, int64_t total, ConvDims d) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t plane = e / d.inSize;
    int64_t pos = e % d.inSize;
    int64_t i[kMaxSpatial], k[kMaxSpatial];
    for (int s = d.ns - 1; s >= 0; --s) {
      i[s] = pos % d.in[s];
      pos /= d.in[s];
      k[s] = 0;
    }
    const T *src = col + plane * d.kprod * d.outSize;
    T acc = T(0);
    for (int64_t kk = 0; kk < d.kprod; ++kk) {
      // Tap k reads x at o * stride - pad + k * dilation: the column o
      // that read this element, if any.
      int64_t o = 0;
      bool valid = true;
      for (int s = 0; s < d.ns && valid; ++s) {
        int64_t t = i[s] + d.padBegin[s] - k[s] * d.dilations[s];
        valid = t >= 0 && t % d.strides[s] == 0 && t / d.strides[s] < d.out[s];
        o = o * d.out[s] + t / d.strides[s];
      }
      if (valid)
        acc += src[kk * d.outSize + o];
      for (int s = d.ns - 1; s >= 0; --s) {
        if (++k[s] < d.kernel[s])
          break;
        k[s] = 0;
      }
    }
    x[e] = acc;
  }
}

/// Y (images x m x outSize) += B (m) per channel.
template <typename T>
__global__ void addBias(T *y, const T *b, int64_t total, int64_t m,
                        int64_t outSize) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(blockDim.x) * gridDim.x)
    y[e] += b[(e / outSize) % m];
}

/// One product per (image, group): C_ng = op(A_ng) op(B_ng) + beta C_ng,
/// each operand `*Image` elements apart between images and `*Group` apart
/// between groups. One strided-batched call per group (over the images) or
/// per image (over the groups), whichever makes fewer calls.
template <typename T> struct GroupedGemm {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  const T *a = nullptr;
  int64_t lda = 0, aImage = 0, aGroup = 0;
  const T *b = nullptr;
  int64_t ldb = 0, bImage = 0, bGroup = 0;
  T beta = T(0);
  T *c = nullptr;
  int64_t ldc = 0, cImage = 0, cGroup = 0;

  llvm::Error run(const KernelContext &ctx, int64_t images,
                  int64_t groups) const {
    if (groups <= images) {
      for (int64_t g = 0; g < groups; ++g)
        SHARDC_CPU_TRY(gemm<T>(ctx, transA, transB, m, n, k, T(1),
                               a + g * aGroup, lda, aImage, b + g * bGroup, ldb,
                               bImage, beta, c + g * cGroup, ldc, cImage,
                               images));
    } else {
      for (int64_t i = 0; i < images; ++i)
        SHARDC_CPU_TRY(gemm<T>(ctx, transA, transB, m, n, k, T(1),
                               a + i * aImage, lda, aGroup, b + i * bImage, ldb,
                               bGroup, beta, c + i * cImage, ldc, cGroup,
                               groups));
    }
    return llvm::Error::success();
  }
};

/// Column scratch for `perImage` elements per image: `chunk` images (at
/// least 1, at most `batch`) within kColumnBudget.
template <typename T>
llvm::Error columnScratch(const KernelContext &ctx, int64_t perImage,
                          int64_t batch, T *&col, int64_t &chunk) {
  int64_t bytesPerImage =
      std::max<int64_t>(perImage * static_cast<int64_t>(sizeof(T)), 1);
  chunk = std::max<int64_t>(
      1, std::min<int64_t>(batch, kColumnBudget / bytesPerImage));
  llvm::Expected<void *> base =
      streamOf(ctx).scratch(static_cast<size_t>(chunk * perImage) * sizeof(T));
  if (!base)
    return base.takeError();
  col = static_cast<T *>(*base);
  return llvm::Error::success();
}

llvm::Error zeroFill(const KernelContext &ctx, const TensorView &t) {
  return check(cudaMemsetAsync(t.data, 0, t.bytes(), cudaStreamOf(ctx)),
               "cudaMemsetAsync (convolution output)");
}

bool is16Bit(DType t) { return t == DType::F16 || t == DType::BF16; }

/// A convolution of 16-bit operands: through cuDNN in their own type
/// (`viaCudnn`, products summed in float32), or, where cuDNN does not take
/// it (off, or a geometry it declines: empty tensors, asymmetric pads),
/// `self` on float32 copies, which is how every other kernel computes
/// 16-bit floats.
template <typename ViaCudnn>
llvm::Error sixteenBit(const KernelContext &ctx, KernelFn self,
                       ViaCudnn viaCudnn) {
  llvm::Expected<bool> done = viaCudnn();
  if (!done)
    return done.takeError();
  return *done ? llvm::Error::success() : runWidened(self, ctx);
}

} // namespace

llvm::Error convKernel(const KernelContext &ctx) {
  cpu::ConvGeometry g;
  SHARDC_CPU_TRY(cpu::checkConv(ctx, g));
  const TensorView &x = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0];
  if (is16Bit(x.dtype))
    return sixteenBit(ctx, convKernel, [&]() -> llvm::Expected<bool> {
      llvm::Expected<bool> done = cudnnConv(ctx, g, x, wt, y);
      if (!done || !*done || !g.hasBias)
        return done;
      // Declined here, the widened kernel rewrites Y, bias included.
      return cudnnAddBias(ctx, ctx.inputs[2], y);
    });
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, x.dtype, "X", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        ConvDims d;
        SHARDC_CPU_TRY(makeConvDims(ctx, g, d));
        if (y.numel() == 0)
          return llvm::Error::success();
        cudaStream_t stream = cudaStreamOf(ctx);
        int64_t rows = g.cg * d.kprod;
        int64_t mg = g.m / g.group;
        llvm::Expected<bool> byCudnn = cudnnConv(ctx, g, x, wt, y);
        if (!byCudnn)
          return byCudnn.takeError();
        if (*byCudnn) {
          // Done; the bias follows.
        } else if (rows == 0) {
          // No input channels: every product is empty.
          SHARDC_CPU_TRY(zeroFill(ctx, y));
        } else {
          // Per image, the column matrices of all groups: group gi's
          // (rows x outSize) block is rows * outSize after group gi - 1's.
          int64_t perImage = g.channels * d.kprod * d.outSize;
          T *col = nullptr;
          int64_t chunk = g.batch;
          if (!g.direct)
            SHARDC_CPU_TRY(columnScratch(ctx, perImage, g.batch, col, chunk));
          GroupedGemm<T> p;
          p.m = mg;
          p.n = d.outSize;
          p.k = rows;
          p.a = wt.as<T>();
          p.lda = rows;
          p.aImage = 0;
          p.aGroup = mg * rows;
          p.ldb = d.outSize;
          p.bImage = perImage;
          p.bGroup = rows * d.outSize;
          p.ldc = d.outSize;
          p.cImage = g.m * d.outSize;
          p.cGroup = mg * d.outSize;
          for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
            int64_t count = std::min(chunk, g.batch - n0);
            const T *xn = x.as<T>() + n0 * g.channels * d.inSize;
            if (g.direct) {
              p.b = xn;
            } else {
              int64_t total = count * perImage;
              im2colElements<<<blocksFor(total), kBlock, 0, stream>>>(xn, col,
                                                                      total, d);
              SHARDC_CPU_TRY(checkLaunch(ctx));
              p.b = col;
            }
            p.c = y.as<T>() + n0 * g.m * d.outSize;
            SHARDC_CPU_TRY(p.run(ctx, count, g.group));
          }
        }
        if (g.hasBias) {
          int64_t total = y.numel();
          addBias<<<blocksFor(total), kBlock, 0, stream>>>(
              y.as<T>(), ctx.inputs[2].as<T>(), total, g.m, d.outSize);
          SHARDC_CPU_TRY(checkLaunch(ctx));
        }
        return llvm::Error::success();
      });
}

llvm::Error convGradInputKernel(const KernelContext &ctx) {
  cpu::ConvGeometry g;
  SHARDC_CPU_TRY(cpu::checkConvGradInput(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &wt = ctx.inputs[1];
  const TensorView &dx = ctx.outputs[0];
  if (is16Bit(dy.dtype))
    return sixteenBit(ctx, convGradInputKernel,
                      [&] { return cudnnConvGradInput(ctx, g, dy, wt, dx); });
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        ConvDims d;
        SHARDC_CPU_TRY(makeConvDims(ctx, g, d));
        if (dx.numel() == 0)
          return llvm::Error::success();
        llvm::Expected<bool> byCudnn = cudnnConvGradInput(ctx, g, dy, wt, dx);
        if (!byCudnn || *byCudnn)
          return byCudnn.takeError();
        int64_t rows = g.cg * d.kprod;
        int64_t mg = g.m / g.group;
        if (mg == 0) // No output channels: nothing flows back.
          return zeroFill(ctx, dx);
        // (rows x mg) * (mg x outSize) per image and group, into the
        // columns (or, direct, into dX itself).
        int64_t perImage = g.channels * d.kprod * d.outSize;
        GroupedGemm<T> p;
        p.transA = true;
        p.m = rows;
        p.n = d.outSize;
        p.k = mg;
        p.a = wt.as<T>();
        p.lda = rows;
        p.aImage = 0;
        p.aGroup = mg * rows;
        p.ldb = d.outSize;
        p.bImage = g.m * d.outSize;
        p.bGroup = mg * d.outSize;
        p.ldc = d.outSize;
        p.cImage = perImage;
        p.cGroup = rows * d.outSize;
        if (g.direct) {
          p.b = dy.as<T>();
          p.c = dx.as<T>();
          return p.run(ctx, g.batch, g.group);
        }
        T *col = nullptr;
        int64_t chunk = 0;
        SHARDC_CPU_TRY(columnScratch(ctx, perImage, g.batch, col, chunk));
        for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
          int64_t count = std::min(chunk, g.batch - n0);
          p.b = dy.as<T>() + n0 * g.m * d.outSize;
          p.c = col;
          SHARDC_CPU_TRY(p.run(ctx, count, g.group));
          int64_t total = count * g.channels * d.inSize;
          col2imElements<<<blocksFor(total), kBlock, 0, cudaStreamOf(ctx)>>>(
              col, dx.as<T>() + n0 * g.channels * d.inSize, total, d);
          SHARDC_CPU_TRY(checkLaunch(ctx));
        }
        return llvm::Error::success();
      });
}

llvm::Error convGradWeightKernel(const KernelContext &ctx) {
  cpu::ConvGeometry g;
  SHARDC_CPU_TRY(cpu::checkConvGradWeight(ctx, g));
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  const TensorView &dw = ctx.outputs[0];
  if (is16Bit(dy.dtype))
    return sixteenBit(ctx, convGradWeightKernel,
                      [&] { return cudnnConvGradWeight(ctx, g, dy, x, dw); });
  return cpu::dispatchIn(
      cpu::FloatTypes{}, ctx, dy.dtype, "dY", [&](auto tag) -> llvm::Error {
        using T = typename decltype(tag)::type;
        ConvDims d;
        SHARDC_CPU_TRY(makeConvDims(ctx, g, d));
        if (dw.numel() == 0)
          return llvm::Error::success();
        if (g.batch == 0)
          return zeroFill(ctx, dw);
        llvm::Expected<bool> byCudnn = cudnnConvGradWeight(ctx, g, dy, x, dw);
        if (!byCudnn || *byCudnn)
          return byCudnn.takeError();
        int64_t rows = g.cg * d.kprod;
        int64_t mg = g.m / g.group;
        int64_t perImage = g.channels * d.kprod * d.outSize;
        T *col = nullptr;
        int64_t chunk = g.batch;
        if (!g.direct)
          SHARDC_CPU_TRY(columnScratch(ctx, perImage, g.batch, col, chunk));
        for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
          int64_t count = std::min(chunk, g.batch - n0);
          const T *cols = x.as<T>() + n0 * g.channels * d.inSize;
          if (!g.direct) {
            int64_t total = count * perImage;
            im2colElements<<<blocksFor(total), kBlock, 0, cudaStreamOf(ctx)>>>(
                cols, col, total, d);
            SHARDC_CPU_TRY(checkLaunch(ctx));
            cols = col;
          }
          // (mg x outSize) * (outSize x rows) per group, accumulated over
          // the images in order.
          for (int64_t i = 0; i < count; ++i) {
            int64_t n = n0 + i;
            SHARDC_CPU_TRY(gemm<T>(
                ctx, false, true, mg, rows, d.outSize, T(1),
                dy.as<T>() + n * g.m * d.outSize, d.outSize, mg * d.outSize,
                cols + i * perImage, d.outSize, rows * d.outSize,
                n == 0 ? T(0) : T(1), dw.as<T>(), rows, mg * rows, g.group));
          }
        }
        return llvm::Error::success();
      });
}

} // namespace shardc::rt::cuda
