//===- ConvPool.h - Conv and pooling checks shared with CUDA ----*- C++ -*-===//
//
// The operand checks of Conv, its gradients and the pools, and the geometry
// they compute, shared by the CPU kernels (Conv.cpp, Pool.cpp) and the CUDA
// kernels (runtime/cuda/Conv.cu, Pool.cu), so both backends refuse the same
// operands with the same messages. Each check runs every check its CPU
// kernel runs before dispatching on the element type, in the same order.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CPU_CONVPOOL_H
#define SHARDC_RUNTIME_CPU_CONVPOOL_H

#include "runtime/cpu/KernelUtil.h"

namespace shardc::rt::cpu {

/// The geometry of a convolution X (N,C,in...) * W (M,C/group,k...) ->
/// Y (N,M,out...), checked against the attributes.
struct ConvGeometry {
  int64_t batch = 0, channels = 0, m = 0, cg = 0, group = 1;
  WindowAttrs w;
  llvm::SmallVector<int64_t, 3> inShape, outShape;
  /// A 1x1 kernel with unit strides and no padding: im2col is the identity.
  bool direct = false;
  /// Conv only: a bias B (M) is added.
  bool hasBias = false;
};

/// Conv: X, W, optional B -> Y.
llvm::Error checkConv(const KernelContext &ctx, ConvGeometry &g);
/// ConvGradInput: dY, W -> dX.
llvm::Error checkConvGradInput(const KernelContext &ctx, ConvGeometry &g);
/// ConvGradWeight: dY, X -> dW.
llvm::Error checkConvGradWeight(const KernelContext &ctx, ConvGeometry &g);

/// The geometry of a pool X (N,C,in...) -> Y (N,C,out...): the output shape
/// (which encodes ceil_mode) comes from Y's view.
struct PoolGeometry {
  int64_t planes = 0; // N * C
  WindowAttrs w;
  llvm::SmallVector<int64_t, 3> inShape, outShape;
  int64_t inSize = 0, outSize = 0;
  /// MaxPool: the Indices output is present; storage_order (0 or 1).
  bool wantIndices = false;
  int64_t storageOrder = 0;
  /// AveragePool(Grad): count_include_pad.
  bool includePad = false;
};

/// MaxPool: X -> Y, optional Indices.
llvm::Error checkMaxPool(const KernelContext &ctx, PoolGeometry &g);
/// AveragePool: X -> Y.
llvm::Error checkAveragePool(const KernelContext &ctx, PoolGeometry &g);
/// AveragePoolGrad: dY -> dX (the geometry of the forward pool dX -> dY).
llvm::Error checkAveragePoolGrad(const KernelContext &ctx, PoolGeometry &g);
/// GlobalAveragePool: X -> Y, `planes` (N * C) of `size` elements each.
llvm::Error checkGlobalAveragePool(const KernelContext &ctx, int64_t &planes,
                                   int64_t &size);
/// MaxPoolGrad: dY, Indices -> dX. Indices are flat over dX and checked
/// while the kernels run (maxPoolIndexOutOfRange).
llvm::Error checkMaxPoolGrad(const KernelContext &ctx);
/// The error of MaxPoolGrad for Indices[position] == index outside dX.
llvm::Error maxPoolIndexOutOfRange(const KernelContext &ctx, int64_t index,
                                   int64_t position);

} // namespace shardc::rt::cpu

#endif // SHARDC_RUNTIME_CPU_CONVPOOL_H
