//===- Communicator.cpp - Blocking collectives, self communicator ---------===//
//
// What every communicator shares: the blocking conveniences, argument
// checks, the time origin of collective records, the launcher detection, and
// the communicator of a world of one rank.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Communicator.h"
#include "runtime/comm/CommSupport.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

namespace shardc::rt {

double nowMicros() {
  static const std::chrono::steady_clock::time_point origin =
      std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - origin)
      .count();
}

llvm::Error Communicator::allGather(const void *in, void *out, int64_t count,
                                    DType dtype) {
  llvm::Expected<CollectiveHandle> handle =
      allGatherStart(in, out, count, dtype);
  if (!handle)
    return handle.takeError();
  return wait(*handle);
}

llvm::Error Communicator::allReduce(const void *in, void *out, int64_t count,
                                    DType dtype, ReduceOp op) {
  llvm::Expected<CollectiveHandle> handle =
      allReduceStart(in, out, count, dtype, op);
  if (!handle)
    return handle.takeError();
  return wait(*handle);
}

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::split(int, int, llvm::StringRef label) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "the " + name().str() +
                                     " communicator cannot split its ranks "
                                     "into groups (" +
                                     label.str() + ")");
}

bool launchedByMpi() {
  // Open MPI's mpirun sets OMPI_COMM_WORLD_*; MPICH/Intel MPI's hydra and
  // `srun --mpi=pmi2` set PMI_*; `srun --mpi=pmix` and PMIx launchers set
  // PMIX_*. SLURM_* alone says nothing: srun sets them for any program, and
  // an sbatch script sees them too.
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                          "PMI_SIZE", "PMI_RANK", "PMIX_RANK"}) {
    const char *value = std::getenv(var);
    if (value && *value)
      return true;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Shared support
//===----------------------------------------------------------------------===//

namespace detail {

const char *collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllGather:
    return "allgather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllReduce:
    return "allreduce";
  case CollectiveKind::Barrier:
    return "barrier";
  case CollectiveKind::Split:
    return "split";
  }
  return "unknown";
}

static bool isReducible(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16 || dtype == DType::I32 || dtype == DType::I64;
}

static llvm::Error argError(CollectiveKind kind, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 llvm::Twine(collectiveKindName(kind)) + ": " +
                                     message);
}

/// True when [a, a + aBytes) and [b, b + bBytes) share a byte.
static bool overlaps(const void *a, int64_t aBytes, const void *b,
                     int64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + static_cast<uintptr_t>(bBytes) &&
         y < x + static_cast<uintptr_t>(aBytes);
}

llvm::Error checkCollectiveArgs(CollectiveKind kind, const void *in,
                                const void *out, int64_t count, DType dtype,
                                int rank, int worldSize, int64_t &bytes) {
  bytes = 0;
  if (kind == CollectiveKind::Barrier || kind == CollectiveKind::Split)
    return llvm::Error::success();
  bool reduces = kind != CollectiveKind::AllGather;
  size_t elem = dtypeSize(dtype);
  if (elem == 0)
    return argError(kind, llvm::Twine("element type ") + dtypeName(dtype) +
                              " is not supported");
  if (reduces && !isReducible(dtype))
    return argError(kind, llvm::Twine("element type ") + dtypeName(dtype) +
                              " is not supported for reductions (supported: "
                              "float32, float64, float16, bfloat16, int32, "
                              "int64)");
  if (count < 0)
    return argError(kind, llvm::Twine("negative element count ") +
                              llvm::Twine(count));
  int64_t blocks = kind == CollectiveKind::AllReduce ? 1 : worldSize;
  int64_t limit = std::numeric_limits<int64_t>::max() /
                  (blocks * static_cast<int64_t>(elem));
  if (count > limit)
    return argError(kind, llvm::formatv("{0} elements of {1} on {2} ranks "
                                        "overflow a 64-bit byte count",
                                        count, dtypeName(dtype), worldSize)
                              .str());
  int64_t blockBytes = count * static_cast<int64_t>(elem);
  int64_t inBytes = kind == CollectiveKind::ReduceScatter
                        ? blockBytes * worldSize
                        : blockBytes;
  int64_t outBytes =
      kind == CollectiveKind::AllGather ? blockBytes * worldSize : blockBytes;
  bytes = std::max(inBytes, outBytes);
  if (count == 0)
    return llvm::Error::success();
  if (!in || !out)
    return argError(kind, llvm::formatv("null {0} buffer for {1} elements",
                                        in ? "output" : "input", count)
                              .str());
  switch (kind) {
  case CollectiveKind::AllReduce:
    if (in != out && overlaps(in, inBytes, out, outBytes))
      return argError(kind, "input and output buffers overlap without being "
                            "the same buffer");
    break;
  case CollectiveKind::AllGather:
    if (in != static_cast<const char *>(out) + rank * blockBytes &&
        overlaps(in, inBytes, out, outBytes))
      return argError(kind, "input overlaps the output without being this "
                            "rank's block of it");
    break;
  case CollectiveKind::ReduceScatter:
    if (overlaps(in, inBytes, out, outBytes))
      return argError(kind, "input and output buffers overlap");
    break;
  case CollectiveKind::Barrier:
  case CollectiveKind::Split:
    break;
  }
  return llvm::Error::success();
}

llvm::Error makeCallError(llvm::StringRef lib, llvm::StringRef call,
                          const char *file, int line, llvm::StringRef message) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("{0} error in {1} at {2}:{3}: {4}", lib, call,
                    llvm::sys::path::filename(file), line, message)
          .str());
}

} // namespace detail

//===----------------------------------------------------------------------===//
// SelfCommunicator
//===----------------------------------------------------------------------===//

namespace {

using detail::CollectiveKind;

/// World size 1: every collective is a copy (or nothing, in place), done in
/// the start call; wait only retires the handle.
class SelfCommunicator final : public Communicator {
public:
  SelfCommunicator() { (void)nowMicros(); }

  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  llvm::StringRef name() const override { return "self"; }

  llvm::Expected<CollectiveHandle> allGatherStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  Event *inputReady) override {
    return copy(CollectiveKind::AllGather, in, out, count, dtype, inputReady);
  }
  llvm::Expected<CollectiveHandle>
  reduceScatterStart(const void *in, void *out, int64_t count, DType dtype,
                     ReduceOp op, Event *inputReady) override {
    return copy(CollectiveKind::ReduceScatter, in, out, count, dtype,
                inputReady);
  }
  llvm::Expected<CollectiveHandle> allReduceStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  ReduceOp op,
                                                  Event *inputReady) override {
    return copy(CollectiveKind::AllReduce, in, out, count, dtype, inputReady);
  }

  /// The copy was done by the start call: every stream is already ordered
  /// after it.
  llvm::Error wait(CollectiveHandle handle, Stream *) override {
    std::lock_guard<std::mutex> lock(mutex);
    if (!outstanding.erase(handle))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "wait: unknown collective handle %lld (never started, or already "
          "waited for)",
          static_cast<long long>(handle));
    return llvm::Error::success();
  }

  llvm::Error barrier() override {
    double now = nowMicros();
    std::lock_guard<std::mutex> lock(mutex);
    addRecord({"barrier", 0, 0, now, now, now});
    return llvm::Error::success();
  }

  [[noreturn]] void abort(int code) override {
    // No other rank to release: end this process, without running static
    // destructors that could block.
    std::fflush(nullptr);
    std::_Exit(code);
  }

  llvm::Error asyncError() override { return llvm::Error::success(); }

  /// One rank: every group is this rank alone.
  llvm::Expected<std::unique_ptr<Communicator>>
  split(int, int, llvm::StringRef) override {
    return createSelfCommunicator();
  }

  std::vector<CollectiveRecord> takeRecords() override {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<CollectiveRecord> taken;
    taken.swap(records);
    return taken;
  }

private:
  /// Copies `in` to `out` on the calling thread, once `inputReady` (if any)
  /// is reached.
  llvm::Expected<CollectiveHandle> copy(CollectiveKind kind, const void *in,
                                        void *out, int64_t count, DType dtype,
                                        Event *inputReady) {
    int64_t bytes = 0;
    if (llvm::Error err = detail::checkCollectiveArgs(kind, in, out, count,
                                                      dtype, 0, 1, bytes))
      return std::move(err);
    double queued = nowMicros();
    if (inputReady)
      if (llvm::Error err = inputReady->synchronize())
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            llvm::Twine(detail::collectiveKindName(kind)) +
                ": waiting for the input: " + llvm::toString(std::move(err)));
    double start = nowMicros();
    if (count > 0 && in != out)
      std::memcpy(out, in, static_cast<size_t>(bytes));
    double end = nowMicros();
    std::lock_guard<std::mutex> lock(mutex);
    CollectiveHandle handle = nextHandle++;
    outstanding.insert(handle);
    addRecord(
        {detail::collectiveKindName(kind), handle, bytes, queued, start, end});
    return handle;
  }

  void addRecord(CollectiveRecord record) {
    if (records.size() < kMaxRecords)
      records.push_back(std::move(record));
  }

  std::mutex mutex;
  CollectiveHandle nextHandle = 1;
  llvm::DenseSet<CollectiveHandle> outstanding;
  std::vector<CollectiveRecord> records;
};

} // namespace

std::unique_ptr<Communicator> createSelfCommunicator() {
  return std::make_unique<SelfCommunicator>();
}

} // namespace shardc::rt
