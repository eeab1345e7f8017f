//===- CudaBackend.cpp - The CUDA backend and the plugin's entry points ---===//
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/CudaPlugin.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cstring>
#include <dlfcn.h>
#include <string>

namespace shardc::rt::cuda {

using llvm::Error;
using llvm::Expected;
using llvm::Twine;

Error check(cudaError_t status, const char *what) {
  if (status == cudaSuccess)
    return Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 Twine(what) +
                                     " failed: " + cudaGetErrorName(status) +
                                     " (" + cudaGetErrorString(status) + ")");
}

Error checkBlas(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      Twine(what) + " failed: " + cublasGetStatusName(status) + " (" +
          cublasGetStatusString(status) + ")");
}

Error checkDnn(cudnnStatus_t status, const char *what) {
  if (status == CUDNN_STATUS_SUCCESS)
    return Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 Twine(what) +
                                     " failed: " + cudnnGetErrorString(status));
}

CudaStream::~CudaStream() {
  if (blasHandle)
    cublasDestroy(blasHandle);
  if (dnnHandle)
    cudnnDestroy(dnnHandle);
  if (scratchBase)
    cudaFreeAsync(scratchBase, stream);
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
}

Expected<void *> CudaStream::scratch(size_t bytes) {
  if (bytes <= scratchBytes)
    return scratchBase;
  // Round up, so that a growing sequence of requests reallocates rarely.
  size_t want = std::max(bytes, 2 * scratchBytes);
  want = (want + 255) / 256 * 256;
  if (scratchBase) {
    if (Error err = check(cudaFreeAsync(scratchBase, stream),
                          "cudaFreeAsync (scratch)"))
      return std::move(err);
    scratchBase = nullptr;
    scratchBytes = 0;
  }
  void *p = nullptr;
  if (Error err = check(cudaMallocAsync(&p, want, stream),
                        "cudaMallocAsync (kernel scratch)"))
    return std::move(err);
  scratchBase = p;
  scratchBytes = want;
  return scratchBase;
}

Error CudaStream::readBack(void *dst, const void *src, size_t bytes) {
  if (Error err = check(
          cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync (device to host)"))
    return err;
  return synchronize();
}

Expected<cublasHandle_t> CudaStream::blas() {
  if (blasHandle)
    return blasHandle;
  cublasHandle_t h = nullptr;
  if (Error err = checkBlas(cublasCreate(&h), "cublasCreate"))
    return std::move(err);
  if (Error err = checkBlas(cublasSetStream(h, stream), "cublasSetStream")) {
    cublasDestroy(h);
    return std::move(err);
  }
  // Products in the element type's own precision (no TF32: parity with the
  // CPU backend), 16-bit products summed in float32 throughout (no
  // reduced-precision split-K reductions), and results that do not depend
  // on the run (no atomics).
  if (Error err = checkBlas(
          cublasSetMathMode(
              h, static_cast<cublasMath_t>(
                     (options.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                   : CUBLAS_DEFAULT_MATH) |
                     CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
          "cublasSetMathMode")) {
    cublasDestroy(h);
    return std::move(err);
  }
  if (Error err = checkBlas(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED),
                            "cublasSetAtomicsMode")) {
    cublasDestroy(h);
    return std::move(err);
  }
  blasHandle = h;
  return blasHandle;
}

Expected<cudnnHandle_t> CudaStream::dnn() {
  if (dnnHandle)
    return dnnHandle;
  cudnnHandle_t h = nullptr;
  if (Error err = checkDnn(cudnnCreate(&h), "cudnnCreate"))
    return std::move(err);
  if (Error err = checkDnn(cudnnSetStream(h, stream), "cudnnSetStream")) {
    cudnnDestroy(h);
    return std::move(err);
  }
  dnnHandle = h;
  return dnnHandle;
}

Error CudaStream::synchronize() {
  return check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

CudaStream &streamOf(const KernelContext &ctx) {
  // CudaBackend::launch hands every kernel a stream it created.
  return *static_cast<CudaStream *>(ctx.stream);
}

cudaStream_t cudaStreamOf(const KernelContext &ctx) {
  return streamOf(ctx).handle();
}

CudaEvent::~CudaEvent() { cudaEventDestroy(event); }
Error CudaEvent::record(Stream &stream) {
  return check(
      cudaEventRecord(event, static_cast<CudaStream &>(stream).handle()),
      "cudaEventRecord");
}
Error CudaEvent::wait(Stream &stream) {
  return check(
      cudaStreamWaitEvent(static_cast<CudaStream &>(stream).handle(), event, 0),
      "cudaStreamWaitEvent");
}
Error CudaEvent::synchronize() {
  return check(cudaEventSynchronize(event), "cudaEventSynchronize");
}
Expected<double> CudaEvent::microsSince(const Event &earlier) const {
  float ms = 0;
  if (Error err = check(
          cudaEventElapsedTime(
              &ms, static_cast<const CudaEvent &>(earlier).handle(), event),
          "cudaEventElapsedTime"))
    return std::move(err);
  return 1000.0 * ms;
}

/// The float32 copies live in stream-ordered device memory, converted by
/// the Cast kernel, and are freed in stream order.
Error runWidened(KernelFn kernel, const KernelContext &ctx) {
  cudaStream_t s = static_cast<CudaStream &>(*ctx.stream).handle();
  llvm::SmallVector<void *, 8> temps;
  auto release = [&]() -> Error {
    Error all = Error::success();
    for (void *p : temps)
      if (Error err = check(cudaFreeAsync(p, s), "cudaFreeAsync (widened)"))
        all = joinErrors(std::move(all), std::move(err));
    return all;
  };
  auto convert = [&](const TensorView &from, const TensorView &to) {
    KernelContext c = ctx;
    const TensorView in[] = {from}, out[] = {to};
    c.opType = "Cast";
    c.inputs = in;
    c.outputs = out;
    return castKernel(c);
  };
  auto widen = [&](const TensorView &t, bool load) -> Expected<TensorView> {
    if (!t.present() || (t.dtype != DType::F16 && t.dtype != DType::BF16))
      return t;
    size_t bytes = std::max<int64_t>(t.numel(), 1) * sizeof(float);
    void *p = nullptr;
    if (Error err = check(cudaMallocAsync(&p, bytes, s),
                          "cudaMallocAsync (a 16-bit operand in float32)"))
      return std::move(err);
    temps.push_back(p);
    TensorView wide(DType::F32, t.shape, p);
    if (load)
      if (Error err = convert(t, wide))
        return std::move(err);
    return wide;
  };
  auto run = [&]() -> Error {
    llvm::SmallVector<TensorView, 8> ins, outs;
    for (const TensorView &t : ctx.inputs) {
      Expected<TensorView> w = widen(t, /*load=*/true);
      if (!w)
        return w.takeError();
      ins.push_back(*w);
    }
    for (const TensorView &t : ctx.outputs) {
      Expected<TensorView> w = widen(t, /*load=*/false);
      if (!w)
        return w.takeError();
      outs.push_back(*w);
    }
    KernelContext wide = ctx;
    wide.inputs = ins;
    wide.outputs = outs;
    if (Error err = kernel(wide))
      return err;
    for (size_t k = 0; k < outs.size(); ++k)
      if (outs[k].data != ctx.outputs[k].data)
        if (Error err = convert(outs[k], ctx.outputs[k]))
          return err;
    return Error::success();
  };
  Error err = run();
  return joinErrors(std::move(err), release());
}

namespace {

/// The CUDA backend of one device. Copies go through a pinned staging
/// buffer so that cudaMemcpyAsync is asynchronous to the device and ordered
/// on the stream; they wait for their copy before returning, as the
/// interface promises.
class CudaBackend : public KernelBackend {
public:
  CudaBackend(int device, BackendOptions options)
      : device(device), options(options) {
    for (const auto &[type, fn] : kernelTable())
      registerKernel(type, fn);
  }
  ~CudaBackend() override {
    if (staging)
      cudaFreeHost(staging);
  }
  llvm::StringRef name() const override { return "cuda"; }
  bool hostAccessible() const override { return false; }

  Expected<void *> allocate(size_t bytes) override {
    void *p = nullptr;
    cudaError_t status = cudaMalloc(&p, bytes ? bytes : 1);
    if (status != cudaSuccess) {
      size_t freeBytes = 0, totalBytes = 0;
      cudaGetLastError();
      cudaMemGetInfo(&freeBytes, &totalBytes);
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "out of GPU memory on device " + Twine(device) + ": cudaMalloc of " +
              Twine(bytes) + " bytes failed (" + cudaGetErrorString(status) +
              "); " + Twine(freeBytes) + " of " + Twine(totalBytes) +
              " bytes are free");
    }
    return p;
  }
  void deallocate(void *ptr) override { cudaFree(ptr); }

  // The offload tier (OffloadTier.h): page-locked, so that its copies run
  // on the DMA engines while kernels run.
  bool hasPinnedMemory() const override { return true; }
  Expected<void *> allocatePinned(size_t bytes) override {
    void *p = nullptr;
    cudaError_t status =
        cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
    if (status != cudaSuccess) {
      cudaGetLastError();
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "cudaHostAlloc of " + Twine(bytes) +
                                         " bytes failed (" +
                                         cudaGetErrorString(status) + ")");
    }
    return p;
  }
  void deallocatePinned(void *ptr) override { cudaFreeHost(ptr); }
  Error copyPinnedAsync(void *dst, const void *src, size_t bytes, bool toDevice,
                        Stream &stream) override {
    if (!bytes)
      return Error::success();
    return check(cudaMemcpyAsync(dst, src, bytes,
                                 toDevice ? cudaMemcpyHostToDevice
                                          : cudaMemcpyDeviceToHost,
                                 static_cast<CudaStream &>(stream).handle()),
                 toDevice ? "cudaMemcpyAsync (offload tier to device)"
                          : "cudaMemcpyAsync (device to offload tier)");
  }

  std::unique_ptr<Stream> createStream() override {
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
      return nullptr;
    return std::make_unique<CudaStream>(s, options);
  }
  std::unique_ptr<Event> createEvent() override {
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
      return nullptr;
    return std::make_unique<CudaEvent>(e);
  }
  std::unique_ptr<Event> createTimingEvent() override {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess)
      return nullptr;
    return std::make_unique<CudaEvent>(e);
  }

  Error copyToDevice(void *dst, const void *src, size_t bytes,
                     Stream &stream) override {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice, stream);
  }
  Error copyToHost(void *dst, const void *src, size_t bytes,
                   Stream &stream) override {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
  }
  Error fillZero(void *dst, size_t bytes, Stream &stream) override {
    if (!bytes)
      return Error::success();
    return check(cudaMemsetAsync(dst, 0, bytes,
                                 static_cast<CudaStream &>(stream).handle()),
                 "cudaMemsetAsync");
  }

  Error launch(KernelFn kernel, const KernelContext &ctx,
               Stream &stream) override {
    KernelContext onStream = ctx;
    onStream.stream = &stream;
    auto is16 = [](const TensorView &t) {
      return t.present() && (t.dtype == DType::F16 || t.dtype == DType::BF16);
    };
    // Cast, the matrix products and the convolutions take 16-bit floats
    // themselves (on cuBLAS's and cuDNN's tensor cores, accumulating in
    // float32; a convolution cuDNN declines widens itself); every other
    // kernel computes in float32 on widened copies, as on the CPU
    // (cpu::launchKernel).
    if (!takes16BitFloats(kernel) &&
        (llvm::any_of(ctx.inputs, is16) || llvm::any_of(ctx.outputs, is16))) {
      if (Error err = runWidened(kernel, onStream))
        return err;
    } else if (Error err = kernel(onStream)) {
      return err;
    }
    // A bad launch configuration is reported here, not at the next sync.
    return check(cudaPeekAtLastError(), "a kernel launch");
  }

private:
  static constexpr size_t kStagingBytes = 8 << 20;

  static bool takes16BitFloats(KernelFn kernel) {
    return kernel == castKernel || kernel == gemmKernel ||
           kernel == matMulKernel || kernel == permutedMatMulKernel ||
           kernel == convKernel || kernel == convGradInputKernel ||
           kernel == convGradWeightKernel;
  }

  /// Copies in chunks through the pinned staging buffer.
  Error copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
             Stream &stream) {
    cudaStream_t s = static_cast<CudaStream &>(stream).handle();
    if (!staging && cudaMallocHost(&staging, kStagingBytes) != cudaSuccess) {
      cudaGetLastError();
      staging = nullptr;
      // Without pinned memory: a synchronous copy from pageable memory.
      if (Error err = check(cudaStreamSynchronize(s), "cudaStreamSynchronize"))
        return err;
      return check(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy");
    }
    for (size_t done = 0; done < bytes; done += kStagingBytes) {
      size_t n = std::min(kStagingBytes, bytes - done);
      if (kind == cudaMemcpyHostToDevice) {
        // The previous chunk's copy must be done before staging is reused.
        if (Error err =
                check(cudaStreamSynchronize(s), "cudaStreamSynchronize"))
          return err;
        std::memcpy(staging, static_cast<const char *>(src) + done, n);
        if (Error err = check(cudaMemcpyAsync(static_cast<char *>(dst) + done,
                                              staging, n, kind, s),
                              "cudaMemcpyAsync"))
          return err;
      } else {
        if (Error err = check(
                cudaMemcpyAsync(staging, static_cast<const char *>(src) + done,
                                n, kind, s),
                "cudaMemcpyAsync"))
          return err;
        if (Error err =
                check(cudaStreamSynchronize(s), "cudaStreamSynchronize"))
          return err;
        std::memcpy(static_cast<char *>(dst) + done, staging, n);
      }
    }
    return check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }

  int device;
  BackendOptions options;
  void *staging = nullptr;
};

} // namespace

Expected<int> deviceCount(std::string *why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    cudaGetLastError();
    if (!why)
      return 0;
    // The runtime says "insufficient driver" also when there is no driver.
    void *driver = status == cudaErrorInsufficientDriver
                       ? dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)
                       : nullptr;
    if (status == cudaErrorInsufficientDriver && !driver)
      *why = "no NVIDIA driver is installed: libcuda.so.1 cannot be loaded";
    else
      *why = std::string(cudaGetErrorName(status)) + ": " +
             cudaGetErrorString(status);
    if (driver)
      dlclose(driver);
    return 0;
  }
  if (Error err = check(status, "cudaGetDeviceCount"))
    return std::move(err);
  if (count == 0 && why)
    *why = "cudaGetDeviceCount returned 0";
  return count;
}

Expected<std::unique_ptr<KernelBackend>> createBackend(int device,
                                                       BackendOptions options) {
  if (Error err = check(cudaSetDevice(device), "cudaSetDevice"))
    return std::move(err);
  // Creates the context now, so that a broken device fails here and not in
  // the first allocation.
  if (Error err = check(cudaFree(nullptr), "creating the CUDA context"))
    return std::move(err);
  return std::make_unique<CudaBackend>(device, options);
}

} // namespace shardc::rt::cuda

static void writeMessage(const std::string &msg, char *error, size_t size) {
  if (!error || size == 0)
    return;
  size_t n = std::min(msg.size(), size - 1);
  std::memcpy(error, msg.data(), n);
  error[n] = '\0';
}

extern "C" int shard_cuda_plugin_abi(void) { return SHARD_CUDA_PLUGIN_ABI; }

extern "C" int shard_cuda_device_count(char *error, size_t errorSize) {
  std::string why;
  llvm::Expected<int> count = shardc::rt::cuda::deviceCount(&why);
  if (!count) {
    writeMessage(llvm::toString(count.takeError()), error, errorSize);
    return -1;
  }
  writeMessage(why, error, errorSize);
  return *count;
}

extern "C" shardc::rt::KernelBackend *
shard_cuda_create_backend(int device, unsigned flags, char *error,
                          size_t errorSize) {
  shardc::rt::cuda::BackendOptions options;
  options.tf32 = flags & SHARD_CUDA_TF32;
  options.cudnn = !(flags & SHARD_CUDA_NO_CUDNN);
  auto backend = shardc::rt::cuda::createBackend(device, options);
  if (!backend) {
    writeMessage(llvm::toString(backend.takeError()), error, errorSize);
    return nullptr;
  }
  return backend->release();
}

extern "C" shardc::rt::Communicator *
shard_cuda_create_nccl_communicator(shardc::rt::Communicator *host, int device,
                                    double timeoutSeconds, char *error,
                                    size_t errorSize) {
  auto comm =
      shardc::rt::cuda::createNcclCommunicator(*host, device, timeoutSeconds);
  if (!comm) {
    writeMessage(llvm::toString(comm.takeError()), error, errorSize);
    return nullptr;
  }
  return comm->release();
}
