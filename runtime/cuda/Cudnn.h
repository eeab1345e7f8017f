//===- Cudnn.h - Conv and BatchNorm through cuDNN ---------------*- C++ -*-===//
//
// Private to runtime/cuda. Each function runs one op through cuDNN when the
// backend has cuDNN on (BackendOptions::cudnn) and cuDNN takes the op's
// operands, and returns true; it returns false when the caller's own kernel
// must run instead (which rewrites anything queued before cuDNN declined:
// BatchNormalization's running statistics). The operands have been checked
// by the CPU kernels' checks (cpu::checkConv..., cpu::checkBatchNorm...)
// before any of these is called.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_CUDNN_H
#define SHARDC_RUNTIME_CUDA_CUDNN_H

#include "runtime/cpu/ConvPool.h"
#include "runtime/cpu/KernelUtil.h"

#include "llvm/Support/Error.h"

namespace shardc::rt::cuda {

/// Y = conv(X, W), without the bias (the caller adds it).
llvm::Expected<bool> cudnnConv(const KernelContext &ctx,
                               const cpu::ConvGeometry &g, const TensorView &x,
                               const TensorView &w, const TensorView &y);
/// dX = the convolution's gradient with respect to X.
llvm::Expected<bool> cudnnConvGradInput(const KernelContext &ctx,
                                        const cpu::ConvGeometry &g,
                                        const TensorView &dy,
                                        const TensorView &w,
                                        const TensorView &dx);
/// dW = the convolution's gradient with respect to W.
llvm::Expected<bool> cudnnConvGradWeight(const KernelContext &ctx,
                                         const cpu::ConvGeometry &g,
                                         const TensorView &dy,
                                         const TensorView &x,
                                         const TensorView &dw);
/// Y += B broadcast over Y's channels (axis 1): Conv's bias after a
/// cuDNN convolution in Y's type (any cuDNN takes: 16-bit floats
/// included).
llvm::Expected<bool> cudnnAddBias(const KernelContext &ctx, const TensorView &b,
                                  const TensorView &y);

/// BatchNormalization in training mode (the kernel's operands, ctx.inputs
/// and ctx.outputs).
llvm::Expected<bool> cudnnBatchNorm(const KernelContext &ctx,
                                    const cpu::BatchNormGeometry &g);
/// BatchNormGrad in training mode, all three outputs present.
llvm::Expected<bool> cudnnBatchNormGrad(const KernelContext &ctx,
                                        const cpu::BatchNormGeometry &g);

} // namespace shardc::rt::cuda

#endif // SHARDC_RUNTIME_CUDA_CUDNN_H
