//===- CudaBackend.h - The CUDA backend -------------------------*- C++ -*-===//
//
// Private to the CUDA plugin (runtime/cuda/CudaPlugin.h): streams and events
// as cudaStream_t and cudaEvent_t, device memory from cudaMalloc (the one
// arena per rank the executor allocates, plan/MemoryPlan.h), copies through
// pinned host staging, and the table of CUDA kernels. A kernel entry point
// has the CPU kernels' signature (runtime/Backend.h) and queues its work on
// cudaStreamOf(ctx): it returns before the work runs, and an error it
// returns is a launch error; errors while running surface at the next
// synchronize.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_CUDABACKEND_H
#define SHARDC_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"

#include "llvm/Support/Error.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace shardc::rt::cuda {

/// An error naming the CUDA call that failed and its message, or success.
llvm::Error check(cudaError_t status, const char *what);

/// How the backend computes (shardrun --tf32, --cudnn).
struct BackendOptions {
  /// float32 matrix products and convolutions may use TF32 tensor cores
  /// (10-bit mantissa inputs; faster, not bit-comparable with the CPU
  /// backend).
  bool tf32 = false;
  /// Conv and training-mode BatchNorm go through cuDNN where it takes their
  /// operands (runtime/cuda/Cudnn.h); off, or where it does not, the
  /// backend's own kernels run.
  bool cudnn = true;
};

/// The cuDNN convolution algorithm chosen for one geometry: `algo` is a
/// cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, or -1 when no algorithm
/// qualifies and the backend's own kernel runs instead; `math` its
/// cudnnMathType_t; `workspace` its scratch bytes.
struct ConvAlgorithm {
  int algo = -1;
  int math = 0;
  size_t workspace = 0;
};

/// A cudaStream_t and the library handles bound to it, created on first
/// use: cuBLAS for the matrix products, cuDNN for convolutions and batch
/// normalization. Kernels reach it through cudaStreamOf(ctx) /
/// streamOf(ctx).
class CudaStream : public Stream {
public:
  CudaStream(cudaStream_t stream, BackendOptions options)
      : stream(stream), options(options) {}
  ~CudaStream() override;
  llvm::Error synchronize() override;
  cudaStream_t handle() const { return stream; }
  const BackendOptions &backendOptions() const { return options; }
  /// The stream's cuBLAS handle: default math (no TF32 unless the backend
  /// was created with it, for parity with the CPU backend), its workspace
  /// on this stream.
  llvm::Expected<cublasHandle_t> blas();
  /// The stream's cuDNN handle, bound to this stream.
  llvm::Expected<cudnnHandle_t> dnn();
  /// The convolution algorithms chosen so far on this stream, by geometry
  /// (runtime/cuda/Cudnn.cpp): cuDNN's heuristics are asked once per
  /// geometry, and the same geometry always runs the same algorithm.
  std::map<std::vector<int64_t>, ConvAlgorithm> convAlgorithms;
  /// Device scratch of at least `bytes`, for the kernel being queued (the
  /// next kernel on this stream may reuse it: stream order keeps them
  /// apart). Grown stream-ordered, never shrunk.
  llvm::Expected<void *> scratch(size_t bytes);
  /// Waits for the stream and copies `bytes` of device memory at `src` to
  /// `dst` on the host: for the few kernels that must look at a result
  /// before they return (a loss's out-of-range target).
  llvm::Error readBack(void *dst, const void *src, size_t bytes);

private:
  cudaStream_t stream;
  BackendOptions options;
  cublasHandle_t blasHandle = nullptr;
  cudnnHandle_t dnnHandle = nullptr;
  void *scratchBase = nullptr;
  size_t scratchBytes = 0;
};

/// A cudaEvent_t. The NCCL communicator orders its stream against the
/// compute stream with the executor's events, so it reaches the handle.
class CudaEvent : public Event {
public:
  explicit CudaEvent(cudaEvent_t event) : event(event) {}
  ~CudaEvent() override;
  llvm::Error record(Stream &stream) override;
  llvm::Error wait(Stream &stream) override;
  llvm::Error synchronize() override;
  llvm::Expected<double> microsSince(const Event &earlier) const override;
  cudaEvent_t handle() const { return event; }

private:
  cudaEvent_t event;
};

/// The stream a kernel queues its work on.
cudaStream_t cudaStreamOf(const KernelContext &ctx);
CudaStream &streamOf(const KernelContext &ctx);

/// An error naming the cuBLAS call that failed, or success.
llvm::Error checkBlas(cublasStatus_t status, const char *what);
/// An error naming the cuDNN call that failed, or success.
llvm::Error checkDnn(cudnnStatus_t status, const char *what);

/// Every (op type, kernel) pair the CUDA backend provides.
const std::vector<std::pair<llvm::StringRef, KernelFn>> &kernelTable();

/// The backend on device `device`, or an error naming the CUDA call that
/// failed.
llvm::Expected<std::unique_ptr<KernelBackend>>
createBackend(int device, BackendOptions options = {});

/// The number of visible devices (cudaGetDeviceCount); 0 with `why` set when
/// the driver reports none.
llvm::Expected<int> deviceCount(std::string *why);

/// The NCCL communicator of this rank's GPU `device` over the ranks of
/// `host`, which carries its bootstrap and its host-memory collectives
/// (NcclCommunicator.cpp). `host` must outlive it.
llvm::Expected<std::unique_ptr<Communicator>>
createNcclCommunicator(Communicator &host, int device, double timeoutSeconds);

} // namespace shardc::rt::cuda

#endif // SHARDC_RUNTIME_CUDA_CUDABACKEND_H
