//===- Device.cpp - Choosing the device a rank runs on --------------------===//
#include "runtime/Device.h"
#include "runtime/cuda/CudaPlugin.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <sched.h>
#include <unistd.h>

namespace shardc::rt {

using llvm::Error;
using llvm::Expected;
using llvm::Twine;

static Error makeError(const Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

llvm::StringRef deviceKindName(DeviceKind kind) {
  switch (kind) {
  case DeviceKind::Cpu:
    return "cpu";
  case DeviceKind::Cuda:
    return "cuda";
  case DeviceKind::Auto:
    return "auto";
  }
  return "cpu";
}

static constexpr const char *kPluginName = "libshard-cuda.so";

/// Where the CUDA plugin is looked for, in order: $SHARD_CUDA_PLUGIN if set,
/// else libshard-cuda.so in the running executable's directory and in its
/// ../lib.
static std::vector<std::string> pluginCandidates() {
  if (const char *env = std::getenv("SHARD_CUDA_PLUGIN"); env && *env)
    return {env};
  std::vector<std::string> paths;
  // /proc/self/exe: the running executable, wherever it was started from.
  llvm::SmallString<256> exe;
  if (!llvm::sys::fs::real_path("/proc/self/exe", exe)) {
    llvm::StringRef dir = llvm::sys::path::parent_path(exe);
    llvm::SmallString<256> same(dir), lib(llvm::sys::path::parent_path(dir));
    llvm::sys::path::append(same, kPluginName);
    llvm::sys::path::append(lib, "lib", kPluginName);
    paths.push_back(same.str().str());
    paths.push_back(lib.str().str());
  }
  return paths;
}

namespace {

/// The loaded plugin's entry points (loaded once per process, never
/// unloaded: backends it created may live until exit).
struct CudaPlugin {
  decltype(&shard_cuda_device_count) deviceCount = nullptr;
  decltype(&shard_cuda_create_backend) create = nullptr;
  decltype(&shard_cuda_create_nccl_communicator) createNccl = nullptr;
  std::string path;
  std::string error;
};

const CudaPlugin &loadCudaPlugin() {
  static CudaPlugin plugin;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void *handle = nullptr;
    for (const std::string &path : pluginCandidates()) {
      if (!llvm::sys::fs::exists(path)) {
        tried += "\n  " + path + ": not found";
        continue;
      }
      handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        plugin.path = path;
        break;
      }
      // dlerror names the library that is missing (libcudnn.so.9, ...).
      const char *msg = dlerror();
      tried += "\n  " + path + ": " + (msg ? msg : "cannot be loaded");
    }
    if (!handle) {
      plugin.error =
          "the CUDA backend (" + std::string(kPluginName) +
          ") could not be loaded:" + tried +
          "\n(build Shard with the CUDA toolkit, cuDNN and NCCL installed: "
          "cmake -DSHARD_CUDA=ON; put their libraries on LD_LIBRARY_PATH; or "
          "set SHARD_CUDA_PLUGIN to the plugin's path)";
      return;
    }
    auto abi = reinterpret_cast<decltype(&shard_cuda_plugin_abi)>(
        dlsym(handle, "shard_cuda_plugin_abi"));
    plugin.deviceCount = reinterpret_cast<decltype(&shard_cuda_device_count)>(
        dlsym(handle, "shard_cuda_device_count"));
    plugin.create = reinterpret_cast<decltype(&shard_cuda_create_backend)>(
        dlsym(handle, "shard_cuda_create_backend"));
    plugin.createNccl =
        reinterpret_cast<decltype(&shard_cuda_create_nccl_communicator)>(
            dlsym(handle, "shard_cuda_create_nccl_communicator"));
    if (!abi || !plugin.deviceCount || !plugin.create || !plugin.createNccl) {
      plugin.error = plugin.path + " is not a Shard CUDA plugin";
      plugin.deviceCount = nullptr;
      return;
    }
    if (abi() != SHARD_CUDA_PLUGIN_ABI) {
      plugin.error = plugin.path + " comes from another build of Shard " +
                     "(plugin interface " + std::to_string(abi()) +
                     ", shardrun's " + std::to_string(SHARD_CUDA_PLUGIN_ABI) +
                     "); use the plugin built with this shardrun";
      plugin.deviceCount = nullptr;
    }
  });
  return plugin;
}

} // namespace

/// The GPU of the rank with index `localRank` on its host, among `count`.
static int deviceOfLocalRank(int localRank, int count) {
  return localRank >= 0 ? localRank % count : 0;
}

uint64_t hostKey() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return llvm::xxh3_64bits(llvm::StringRef(host));
}

/// The CPUs the cgroup v2 quota of this process allows (cpu.max: "QUOTA
/// PERIOD", or "max" for none), rounded up; 0 when there is none or it
/// cannot be read.
static int cgroupCpuLimit() {
  auto file = llvm::MemoryBuffer::getFile("/sys/fs/cgroup/cpu.max",
                                          /*IsText=*/true);
  if (!file)
    return 0;
  llvm::SmallVector<llvm::StringRef, 2> fields;
  (*file)->getBuffer().trim().split(fields, ' ');
  double quota = 0, period = 0;
  if (fields.size() != 2 || fields[0].getAsDouble(quota) ||
      fields[1].getAsDouble(period) || quota <= 0 || period <= 0)
    return 0;
  return std::max(1, static_cast<int>(std::ceil(quota / period)));
}

ProcessCpus processCpus() {
  ProcessCpus cpus;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  uint64_t maskKey = 0;
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    cpus.count = CPU_COUNT(&mask);
    maskKey = llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(&mask), sizeof mask));
  } else {
    cpus.count = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  }
  if (int limit = cgroupCpuLimit())
    cpus.count = std::min(cpus.count, limit);
  cpus.count = std::max(cpus.count, 1);
  cpus.key = hostKey() ^ (maskKey * 0x9e3779b97f4a7c15ull);
  return cpus;
}

int defaultCpuThreads(const ProcessCpus &mine,
                      llvm::ArrayRef<uint64_t> everyRank) {
  int sharing = static_cast<int>(llvm::count(everyRank, mine.key));
  return std::max(1, mine.count / std::max(sharing, 1));
}

int localRankFromEnvironment(int rank) {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char *value = std::getenv(name);
    int local = 0;
    if (value && !llvm::StringRef(value).getAsInteger(10, local) && local >= 0)
      return local;
  }
  return rank;
}

Expected<std::unique_ptr<KernelBackend>>
createBackend(DeviceKind kind, int localRank, const DeviceOptions &options,
              std::string *why) {
  if (why)
    why->clear();
  if (kind == DeviceKind::Cpu)
    return createCpuBackend();
  auto fallBack = [&](const std::string &reason)
      -> Expected<std::unique_ptr<KernelBackend>> {
    if (kind == DeviceKind::Cuda)
      return makeError("--device cuda: " + reason +
                       "; run with --device cpu (or auto)");
    if (why)
      *why = reason;
    return createCpuBackend();
  };
  const CudaPlugin &plugin = loadCudaPlugin();
  if (!plugin.deviceCount)
    return fallBack(plugin.error);
  char message[512] = "";
  int count = plugin.deviceCount(message, sizeof(message));
  if (count < 0)
    return fallBack(std::string("the CUDA driver cannot be asked for GPUs: ") +
                    message);
  if (count == 0)
    return fallBack("no CUDA GPU is visible to this process (" +
                    std::string(message) +
                    "; check nvidia-smi and CUDA_VISIBLE_DEVICES)");
  int device = deviceOfLocalRank(localRank, count);
  unsigned flags = (options.tf32 ? SHARD_CUDA_TF32 : 0u) |
                   (options.cudnn ? 0u : SHARD_CUDA_NO_CUDNN);
  KernelBackend *backend =
      plugin.create(device, flags, message, sizeof(message));
  if (!backend)
    return makeError("--device " + deviceKindName(kind) + ": GPU " +
                     Twine(device) + ": " + message);
  return std::unique_ptr<KernelBackend>(backend);
}

Expected<std::unique_ptr<Communicator>>
createDeviceCommunicator(const KernelBackend &backend, Communicator &host,
                         int localRank, double timeoutSeconds) {
  if (backend.name() != "cuda")
    return nullptr;
  const CudaPlugin &plugin = loadCudaPlugin();
  char message[512] = "";
  int count =
      plugin.deviceCount ? plugin.deviceCount(message, sizeof(message)) : 0;
  if (!plugin.createNccl || count <= 0)
    return makeError(
        "the NCCL communicator needs the CUDA backend: " +
        (plugin.error.empty() ? std::string(message) : plugin.error));
  Communicator *comm =
      plugin.createNccl(&host, deviceOfLocalRank(localRank, count),
                        timeoutSeconds, message, sizeof(message));
  if (!comm)
    return makeError(Twine("NCCL: ") + message);
  return std::unique_ptr<Communicator>(comm);
}

} // namespace shardc::rt
