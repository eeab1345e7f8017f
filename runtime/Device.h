//===- Device.h - Choosing the device a rank runs on ------------*- C++ -*-===//
//
// shardrun --device picks the kernel backend of every rank:
//
//   cpu   the CPU backend (runtime/Backend.h), always there;
//   cuda  the CUDA backend, loaded from its plugin (runtime/cuda/CudaPlugin.h)
//         on GPU `localRank % visible GPUs`: one process per GPU. Without the
//         plugin, its libraries or a visible GPU it is an error that says
//         which, before any plan is loaded;
//   auto  cuda when the plugin loads and a GPU is visible, else cpu.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_DEVICE_H
#define SHARDC_RUNTIME_DEVICE_H

#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace shardc::rt {

enum class DeviceKind { Cpu, Cuda, Auto };

/// "cpu", "cuda" or "auto".
llvm::StringRef deviceKindName(DeviceKind kind);

/// This process's index among the ranks on its host, from what the
/// launcher set (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, MPICH's
/// MPI_LOCALRANKID, Slurm's SLURM_LOCALID), else `rank`.
int localRankFromEnvironment(int rank);

/// A key naming this process's host (a hash of its host name): equal on
/// two ranks exactly when they run on the same machine.
uint64_t hostKey();

/// The CPUs this process may run on, for sharing them among the ranks of a
/// host: how many (its affinity mask's, capped by the CPU quota of its
/// cgroup, cgroup v2's cpu.max, and at least 1), and a key naming the host
/// and the mask, equal on two ranks exactly when they may run on the same
/// CPUs of the same machine (an unbound launch: every rank of the host;
/// mpirun --bind-to core: none).
struct ProcessCpus {
  int count = 1;
  uint64_t key = 0;
};
ProcessCpus processCpus();

/// The threads of a rank's CPU kernels when none are asked for: the CPUs it
/// may run on (`mine`), divided among the ranks whose keys (`everyRank`,
/// one per rank, `mine`'s among them) equal its own, at least 1.
int defaultCpuThreads(const ProcessCpus &mine,
                      llvm::ArrayRef<uint64_t> everyRank);

/// The backend for `kind` on this rank. `localRank` is the rank's index
/// among the ranks of its host (what picks its GPU). `why` receives, for
/// DeviceKind::Auto, the reason the CPU was chosen (empty when CUDA was).
/// What shardrun's flags ask of a device backend.
struct DeviceOptions {
  /// float32 matrix products and convolutions on TF32 tensor cores (CUDA;
  /// off by default: results then match the CPU backend's to float32
  /// rounding).
  bool tf32 = false;
  /// Conv and BatchNorm through cuDNN where it takes their operands (CUDA;
  /// on by default), else the backend's own kernels.
  bool cudnn = true;
};
llvm::Expected<std::unique_ptr<KernelBackend>>
createBackend(DeviceKind kind, int localRank, const DeviceOptions &options,
              std::string *why = nullptr);

/// The communicator for ranks running on `backend`: for the CUDA backend,
/// an NCCL communicator over the ranks of `host` (which carries its
/// bootstrap and the host-memory collectives, and must outlive it); for the
/// CPU backend none (null): `host` itself serves.
llvm::Expected<std::unique_ptr<Communicator>>
createDeviceCommunicator(const KernelBackend &backend, Communicator &host,
                         int localRank, double timeoutSeconds);

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_DEVICE_H
