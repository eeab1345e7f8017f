//===- CudaPlugin.h - The CUDA backend's entry points -----------*- C++ -*-===//
//
// The CUDA backend is a plugin, libshard-cuda.so, that shardrun loads only
// when a run asks for a GPU (runtime/Device.h). shardrun itself links no CUDA
// library, so it starts and trains on CPU on a machine without the CUDA
// runtime, cuBLAS, cuDNN or NCCL; `--device cuda` there is an error that
// names the library that could not be loaded.
//
// The plugin links against the runtime's symbols in the executable that
// loads it (shardrun is linked with --export-dynamic), so it shares the
// runtime's types (KernelBackend, KernelContext, TensorView) instead of
// carrying a second copy. Its entry points have C linkage and a version,
// checked when it is loaded: a plugin from another build is refused.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_CUDA_CUDAPLUGIN_H
#define SHARDC_RUNTIME_CUDA_CUDAPLUGIN_H

#include <cstddef>

namespace shardc::rt {
class Communicator;
class KernelBackend;
} // namespace shardc::rt

/// Bumped whenever an entry point, KernelBackend or KernelContext changes.
#define SHARD_CUDA_PLUGIN_ABI 3

extern "C" {
/// SHARD_CUDA_PLUGIN_ABI of the build the plugin comes from.
int shard_cuda_plugin_abi(void);
/// The number of CUDA devices this process sees (0 or more), or -1 with a
/// message in `error` (at most `errorSize` bytes, NUL-terminated) when the
/// driver cannot be asked.
int shard_cuda_device_count(char *error, size_t errorSize);
/// Flags of shard_cuda_create_backend: float32 products on TF32 tensor
/// cores (shardrun --tf32); the backend's own Conv and BatchNorm kernels
/// instead of cuDNN's (shardrun --cudnn=false).
#define SHARD_CUDA_TF32 1u
#define SHARD_CUDA_NO_CUDNN 2u
/// Creates the backend on CUDA device `device` (an index among the visible
/// devices) with SHARD_CUDA_* `flags`. Returns the backend, owned by the
/// caller, or nullptr with a message in `error`.
shardc::rt::KernelBackend *shard_cuda_create_backend(int device, unsigned flags,
                                                     char *error,
                                                     size_t errorSize);
/// Creates the NCCL communicator of GPU `device` over the ranks of `host`
/// (runtime/cuda/NcclCommunicator.cpp), which must outlive it; collectives
/// in flight longer than `timeoutSeconds` (0: never) end the job. Returns
/// the communicator, owned by the caller, or nullptr with a message.
shardc::rt::Communicator *
shard_cuda_create_nccl_communicator(shardc::rt::Communicator *host, int device,
                                    double timeoutSeconds, char *error,
                                    size_t errorSize);
}

#endif // SHARDC_RUNTIME_CUDA_CUDAPLUGIN_H
