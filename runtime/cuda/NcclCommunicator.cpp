//===- NcclCommunicator.cpp - Collectives over NCCL -----------------------===//
//
// The communicator of ranks that run on GPUs (runtime/comm/Communicator.h).
// Collectives on device memory go to NCCL on the communicator's own stream:
//
//   start   makes the NCCL stream wait for the caller's `inputReady` event
//           (recorded on the compute stream after the work that writes the
//           input), queues the NCCL call and records a completion event;
//           it returns before anything has run.
//   wait    makes the compute stream wait for the completion event (no host
//           blocking), or with no stream blocks the host until it is reached.
//
// Collectives on host memory (the trainer's loss average, the plan
// fingerprint, checkpoint gathers), the barrier and the abort go to the host
// communicator the NCCL one was made from: MPI, or the self communicator at
// world size 1. The NCCL unique id travels over it too (rank 0 creates it,
// an allgather hands it to every rank).
//
// Trace. Each collective is bracketed by two timing events on the NCCL
// stream; the watchdog turns them into CollectiveRecords once complete,
// timed from an anchor event reached at a known host time, so the Chrome
// trace shows NCCL on its own stream beside the kernels (which the
// executor times the same way on the compute stream).
//
// Failures. NCCL reports a failed peer or a broken link asynchronously: a
// watchdog thread polls ncclCommGetAsyncError and the completion events of
// the collectives in flight. On an error, or when a collective has been in
// flight longer than the collective timeout (shardrun --collective-timeout),
// it aborts the NCCL communicator (ncclCommAbort, which releases kernels
// stuck waiting for a dead peer) and ends the job through the host
// communicator with a message naming the collective, so no rank is left
// hanging on the GPU.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/CommSupport.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cpu/KernelUtil.h"
#include "runtime/cuda/CudaBackend.h"

#include "llvm/ADT/Twine.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace shardc::rt::cuda {

namespace {

using detail::CollectiveKind;

llvm::Error ncclError(ncclResult_t result, const char *call) {
  if (result == ncclSuccess)
    return llvm::Error::success();
  return detail::makeCallError("NCCL", call, __FILE__, __LINE__,
                               ncclGetErrorString(result));
}

/// NCCL's type for reductions of `dtype`, or false.
bool reductionType(DType dtype, ncclDataType_t &type) {
  switch (dtype) {
  case DType::F32:
    type = ncclFloat32;
    return true;
  case DType::F64:
    type = ncclFloat64;
    return true;
  case DType::I32:
    type = ncclInt32;
    return true;
  case DType::I64:
    type = ncclInt64;
    return true;
  case DType::F16:
    type = ncclFloat16;
    return true;
  case DType::BF16:
    type = ncclBfloat16;
    return true;
  default:
    return false;
  }
}

/// Whether `p` is device (or managed) memory, which NCCL can use.
bool onDevice(const void *p) {
  if (!p)
    return false;
  cudaPointerAttributes attrs{};
  if (cudaPointerGetAttributes(&attrs, p) != cudaSuccess) {
    cudaGetLastError(); // Clear the sticky "invalid value" of host memory.
    return false;
  }
  return attrs.type == cudaMemoryTypeDevice ||
         attrs.type == cudaMemoryTypeManaged;
}

class NcclCommunicator : public Communicator {
public:
  NcclCommunicator(Communicator &host, int device, double timeoutSeconds)
      : host(host), device(device), timeoutSeconds(timeoutSeconds) {}

  /// A group of `parent`'s ranks (split()): `hostGroup` is the same group of
  /// the host communicator. Its collectives go on the parent's stream, so
  /// that every group's run in the one order all ranks started them.
  NcclCommunicator(std::unique_ptr<Communicator> hostGroup,
                   NcclCommunicator &parent, std::string label)
      : ownedHost(std::move(hostGroup)), host(*ownedHost),
        device(parent.device), timeoutSeconds(parent.timeoutSeconds),
        parent(&parent), label(std::move(label)) {}

  /// Makes this group's NCCL communicator from the parent's
  /// (ncclCommSplit, collective over the parent's ranks).
  llvm::Error initSplit(int color, int key) {
    SHARDC_CPU_TRY(check(cudaSetDevice(device), "cudaSetDevice"));
    SHARDC_CPU_TRY(
        ncclError(ncclCommSplit(parent->comm, color, key, &comm, nullptr),
                  "ncclCommSplit"));
    stream = parent->stream;
    ownsStream = false;
    return startWatching();
  }

  llvm::Error init() {
    SHARDC_CPU_TRY(check(cudaSetDevice(device), "cudaSetDevice"));
    // Rank 0's id reaches every rank through the host communicator.
    ncclUniqueId id{};
    if (host.rank() == 0)
      SHARDC_CPU_TRY(ncclError(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    std::vector<char> ids(sizeof(id) * host.worldSize());
    SHARDC_CPU_TRY(host.allGather(&id, ids.data(), sizeof(id), DType::U8));
    std::memcpy(&id, ids.data(), sizeof(id));
    SHARDC_CPU_TRY(
        check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags (NCCL)"));
    SHARDC_CPU_TRY(
        ncclError(ncclCommInitRank(&comm, host.worldSize(), id, host.rank()),
                  "ncclCommInitRank"));
    return startWatching();
  }

  llvm::Error startWatching() {
    // The anchor of the trace's times: a point of the NCCL stream reached
    // at a known host time (nowMicros).
    SHARDC_CPU_TRY(check(cudaEventCreate(&anchor), "cudaEventCreate"));
    SHARDC_CPU_TRY(check(cudaEventRecord(anchor, stream), "cudaEventRecord"));
    SHARDC_CPU_TRY(check(cudaEventSynchronize(anchor), "cudaEventSynchronize"));
    anchorUs = nowMicros();
    anchoredAt = std::chrono::steady_clock::now();
    watchdog = std::thread([this] { watch(); });
    return llvm::Error::success();
  }

  std::vector<CollectiveRecord> takeRecords() override {
    std::vector<CollectiveRecord> taken;
    {
      std::lock_guard<std::mutex> lock(mu);
      // Those completed since the watchdog last looked are recorded too.
      for (auto it = inFlight.begin(); it != inFlight.end();) {
        if (it->second.waited && cudaEventQuery(it->second.done) == cudaSuccess)
          it = retire(it);
        else
          ++it;
      }
      taken = std::exchange(records, {});
    }
    // The groups' collectives are this communicator's too.
    std::lock_guard<std::mutex> lock(childrenMu);
    for (NcclCommunicator *child : children)
      for (CollectiveRecord &r : child->takeRecords())
        taken.push_back(std::move(r));
    return taken;
  }

  llvm::Expected<std::unique_ptr<Communicator>>
  split(int color, int key, llvm::StringRef groupLabel) override {
    llvm::Expected<std::unique_ptr<Communicator>> hostGroup =
        host.split(color, key, groupLabel);
    if (!hostGroup)
      return hostGroup.takeError();
    auto group = std::make_unique<NcclCommunicator>(std::move(*hostGroup),
                                                    *this, groupLabel.str());
    if (llvm::Error err = group->initSplit(color, key))
      return std::move(err);
    std::lock_guard<std::mutex> lock(childrenMu);
    children.push_back(group.get());
    return std::unique_ptr<Communicator>(std::move(group));
  }

  ~NcclCommunicator() override {
    if (parent) {
      std::lock_guard<std::mutex> lock(parent->childrenMu);
      llvm::erase(parent->children, this);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    wake.notify_all();
    if (watchdog.joinable())
      watchdog.join();
    if (stream)
      cudaStreamSynchronize(stream);
    for (auto &[h, f] : inFlight) {
      cudaEventDestroy(f.begin);
      cudaEventDestroy(f.done);
    }
    for (cudaEvent_t e : freeEvents)
      cudaEventDestroy(e);
    if (anchor)
      cudaEventDestroy(anchor);
    if (comm && !aborting)
      ncclCommDestroy(comm);
    if (stream && ownsStream)
      cudaStreamDestroy(stream);
  }

  int rank() const override { return host.rank(); }
  int worldSize() const override { return host.worldSize(); }
  llvm::StringRef name() const override { return "nccl"; }

  llvm::Expected<CollectiveHandle> allGatherStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  Event *inputReady) override {
    if (!onDevice(in) && !onDevice(out))
      return forward(host.allGatherStart(in, out, count, dtype, inputReady));
    int64_t bytes = 0;
    SHARDC_CPU_TRY(detail::checkCollectiveArgs(CollectiveKind::AllGather, in,
                                               out, count, dtype, rank(),
                                               worldSize(), bytes));
    size_t n = static_cast<size_t>(count) * dtypeSize(dtype);
    return launch(CollectiveKind::AllGather, bytes, inputReady, [&] {
      return ncclAllGather(in, out, n, ncclUint8, comm, stream);
    });
  }

  llvm::Expected<CollectiveHandle>
  reduceScatterStart(const void *in, void *out, int64_t count, DType dtype,
                     ReduceOp op, Event *inputReady) override {
    if (!onDevice(in) && !onDevice(out))
      return forward(
          host.reduceScatterStart(in, out, count, dtype, op, inputReady));
    int64_t bytes = 0;
    SHARDC_CPU_TRY(detail::checkCollectiveArgs(CollectiveKind::ReduceScatter,
                                               in, out, count, dtype, rank(),
                                               worldSize(), bytes));
    ncclDataType_t type;
    if (!reductionType(dtype, type))
      return unsupported(dtype);
    return launch(CollectiveKind::ReduceScatter, bytes, inputReady, [&] {
      return ncclReduceScatter(in, out, static_cast<size_t>(count), type,
                               op == ReduceOp::Sum ? ncclSum : ncclMax, comm,
                               stream);
    });
  }

  llvm::Expected<CollectiveHandle> allReduceStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  ReduceOp op,
                                                  Event *inputReady) override {
    if (!onDevice(in) && !onDevice(out))
      return forward(
          host.allReduceStart(in, out, count, dtype, op, inputReady));
    int64_t bytes = 0;
    SHARDC_CPU_TRY(detail::checkCollectiveArgs(CollectiveKind::AllReduce, in,
                                               out, count, dtype, rank(),
                                               worldSize(), bytes));
    ncclDataType_t type;
    if (!reductionType(dtype, type))
      return unsupported(dtype);
    return launch(CollectiveKind::AllReduce, bytes, inputReady, [&] {
      return ncclAllReduce(in, out, static_cast<size_t>(count), type,
                           op == ReduceOp::Sum ? ncclSum : ncclMax, comm,
                           stream);
    });
  }

  llvm::Error wait(CollectiveHandle handle, Stream *computeStream) override {
    cudaEvent_t done = nullptr;
    std::optional<CollectiveHandle> hostHandle;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto it = forwarded.find(handle); it != forwarded.end()) {
        hostHandle = it->second;
        forwarded.erase(it);
      }
    }
    // The host wait blocks: not under the lock the watchdog needs.
    if (hostHandle)
      return host.wait(*hostHandle, computeStream);
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = inFlight.find(handle);
      if (it == inFlight.end())
        return llvm::createStringError(
            "NCCL communicator: wait on unknown handle " +
            std::to_string(handle));
      done = it->second.done;
    }
    llvm::Error err =
        computeStream
            ? check(cudaStreamWaitEvent(
                        static_cast<CudaStream *>(computeStream)->handle(),
                        done, 0),
                    "cudaStreamWaitEvent (after NCCL)")
            : check(cudaEventSynchronize(done), "cudaEventSynchronize (NCCL)");
    // The event may be reused once the compute stream's wait is queued
    // (cudaStreamWaitEvent captures the recorded point); the watchdog keeps
    // watching until it completes.
    {
      std::lock_guard<std::mutex> lock(mu);
      inFlight[handle].waited = true;
    }
    if (err)
      return err;
    return asyncError();
  }

  llvm::Error barrier() override { return host.barrier(); }

  [[noreturn]] void abort(int code) override {
    abortNccl();
    host.abort(code);
    std::abort(); // host.abort does not return.
  }

  llvm::Error asyncError() override {
    std::lock_guard<std::mutex> lock(mu);
    if (!failure.empty())
      return llvm::createStringError(failure);
    ncclResult_t state = ncclSuccess;
    if (comm && !aborting &&
        ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
        state != ncclSuccess && state != ncclInProgress) {
      failure = std::string("NCCL reported an asynchronous error: ") +
                ncclGetErrorString(state);
      return llvm::createStringError(failure);
    }
    return host.asyncError();
  }

private:
  struct Flight {
    cudaEvent_t begin = nullptr, done = nullptr;
    double queuedUs = 0;
    CollectiveKind kind = CollectiveKind::AllReduce;
    int64_t bytes = 0;
    /// When the watchdog first saw `begin` reached: the collective's
    /// inputs were ready and NCCL had it (the timeout counts from here).
    std::optional<std::chrono::steady_clock::time_point> started;
    bool waited = false;
  };

  llvm::Error unsupported(DType dtype) {
    return llvm::createStringError(
        "NCCL communicator: reductions take f32, f64, i32 and i64, not " +
        dtypeName(dtype));
  }

  /// A host collective's handle, renumbered into this communicator's.
  llvm::Expected<CollectiveHandle>
  forward(llvm::Expected<CollectiveHandle> hostHandle) {
    if (!hostHandle)
      return hostHandle.takeError();
    std::lock_guard<std::mutex> lock(mu);
    CollectiveHandle h = nextHandle++;
    forwarded[h] = *hostHandle;
    return h;
  }

  template <typename Call>
  llvm::Expected<CollectiveHandle> launch(CollectiveKind kind, int64_t bytes,
                                          Event *inputReady, Call &&call) {
    if (llvm::Error err = asyncError())
      return std::move(err);
    if (inputReady)
      SHARDC_CPU_TRY(
          check(cudaStreamWaitEvent(
                    stream, static_cast<CudaEvent *>(inputReady)->handle(), 0),
                "cudaStreamWaitEvent (before NCCL)"));
    double queuedUs = nowMicros();
    cudaEvent_t begin = nullptr, done = nullptr;
    llvm::Error err = takeEvent(begin);
    if (!err)
      err = takeEvent(done);
    if (!err)
      err = check(cudaEventRecord(begin, stream), "cudaEventRecord");
    if (!err)
      err = ncclError(call(), detail::collectiveKindName(kind));
    if (!err)
      err = check(cudaEventRecord(done, stream), "cudaEventRecord");
    std::lock_guard<std::mutex> lock(mu);
    if (err) {
      // Nothing was started: the events go back to the pool.
      for (cudaEvent_t e : {begin, done})
        if (e)
          freeEvents.push_back(e);
      return std::move(err);
    }
    CollectiveHandle h = nextHandle++;
    Flight &f = inFlight[h];
    f.begin = begin;
    f.done = done;
    f.queuedUs = queuedUs;
    f.kind = kind;
    f.bytes = bytes;
    return h;
  }

  /// A timing event from the pool, or a new one.
  llvm::Error takeEvent(cudaEvent_t &e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!freeEvents.empty()) {
        e = freeEvents.back();
        freeEvents.pop_back();
        return llvm::Error::success();
      }
    }
    return check(cudaEventCreate(&e), "cudaEventCreate (NCCL)");
  }

  /// Records a completed, waited-for collective and pools its events
  /// (under `mu`).
  std::map<CollectiveHandle, Flight>::iterator
  retire(std::map<CollectiveHandle, Flight>::iterator it) {
    record(it->first, it->second);
    freeEvents.push_back(it->second.begin);
    freeEvents.push_back(it->second.done);
    return inFlight.erase(it);
  }

  /// The trace record of a completed collective (under `mu`).
  void record(CollectiveHandle h, const Flight &f) {
    if (records.size() >= kMaxRecords)
      return;
    float begin = 0, end = 0;
    if (cudaEventElapsedTime(&begin, anchor, f.begin) != cudaSuccess ||
        cudaEventElapsedTime(&end, anchor, f.done) != cudaSuccess)
      return;
    CollectiveRecord r;
    r.kind = detail::collectiveKindName(f.kind);
    r.handle = h;
    r.bytes = f.bytes;
    r.group = label;
    r.ranks = worldSize();
    r.queuedUs = f.queuedUs;
    r.startUs = anchorUs + 1000.0 * begin;
    r.endUs = anchorUs + 1000.0 * end;
    records.push_back(std::move(r));
  }

  /// The watchdog: retires completed collectives, and ends the job on an
  /// NCCL error or a collective past the timeout.
  void watch() {
    cudaSetDevice(device);
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      wake.wait_for(lock, std::chrono::milliseconds(100));
      if (stopping)
        break;
      auto now = std::chrono::steady_clock::now();
      std::string fatal;
      for (auto it = inFlight.begin(); it != inFlight.end();) {
        Flight &f = it->second;
        cudaError_t state = cudaEventQuery(f.done);
        if (state == cudaSuccess && f.waited) {
          it = retire(it);
          continue;
        }
        if (!f.started && cudaEventQuery(f.begin) == cudaSuccess)
          f.started = now;
        double seconds =
            f.started ? std::chrono::duration<double>(now - *f.started).count()
                      : 0.0;
        if (state == cudaErrorNotReady && timeoutSeconds > 0 &&
            seconds > timeoutSeconds && fatal.empty())
          fatal = std::string("the NCCL ") +
                  detail::collectiveKindName(f.kind) + " of " +
                  std::to_string(f.bytes) + " bytes has not completed after " +
                  std::to_string(static_cast<int>(seconds)) +
                  " s (--collective-timeout): another rank stopped or a "
                  "link is down";
        else if (state != cudaSuccess && state != cudaErrorNotReady &&
                 fatal.empty())
          fatal = std::string("a GPU error while an NCCL collective ran: ") +
                  cudaGetErrorName(state);
        ++it;
      }
      if (inFlight.empty())
        reanchor(now);
      ncclResult_t async = ncclSuccess;
      if (fatal.empty() && !aborting &&
          ncclCommGetAsyncError(comm, &async) == ncclSuccess &&
          async != ncclSuccess && async != ncclInProgress)
        fatal = std::string("NCCL reported an asynchronous error: ") +
                ncclGetErrorString(async);
      if (fatal.empty())
        continue;
      failure = fatal;
      std::string line = "shardrun: error: rank " + std::to_string(rank()) +
                         ": " + fatal + "; ending the job\n";
      std::fputs(line.c_str(), stderr);
      lock.unlock();
      abortNccl();
      host.abort(1);
    }
  }

  /// ncclCommAbort, once (the watchdog and a failing caller may both end
  /// the job): it releases kernels waiting for a dead peer.
  void abortNccl() {
    if (comm && !aborting.exchange(true))
      ncclCommAbort(comm);
  }

  /// With nothing in flight, a new anchor for the trace times (under `mu`):
  /// cudaEventElapsedTime's float milliseconds lose precision far from it.
  void reanchor(std::chrono::steady_clock::time_point now) {
    // A group's stream is its parent's, busy with the other groups'
    // collectives: synchronizing on it here would stall this one's.
    if (!ownsStream || now - anchoredAt < std::chrono::seconds(60))
      return;
    if (cudaEventRecord(anchor, stream) != cudaSuccess ||
        cudaEventSynchronize(anchor) != cudaSuccess)
      return;
    anchorUs = nowMicros();
    anchoredAt = now;
  }

  /// A group's host communicator (split()); `host` refers to it.
  std::unique_ptr<Communicator> ownedHost;
  Communicator &host;
  int device;
  double timeoutSeconds;
  /// Set for a group: the communicator it was split from, and its label.
  NcclCommunicator *parent = nullptr;
  std::string label;
  /// The groups split from this one, whose records takeRecords() returns.
  std::mutex childrenMu;
  std::vector<NcclCommunicator *> children;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  bool ownsStream = true;
  cudaEvent_t anchor = nullptr;
  double anchorUs = 0;
  std::chrono::steady_clock::time_point anchoredAt;
  std::atomic<bool> aborting{false};
  std::vector<CollectiveRecord> records;
  std::thread watchdog;
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  std::string failure;
  CollectiveHandle nextHandle = 1;
  std::map<CollectiveHandle, Flight> inFlight;
  std::map<CollectiveHandle, CollectiveHandle> forwarded;
  std::vector<cudaEvent_t> freeEvents;
};

} // namespace

llvm::Expected<std::unique_ptr<Communicator>>
createNcclCommunicator(Communicator &host, int device, double timeoutSeconds) {
  auto comm = std::make_unique<NcclCommunicator>(host, device, timeoutSeconds);
  if (llvm::Error err = comm->init())
    return std::move(err);
  return std::unique_ptr<Communicator>(std::move(comm));
}

} // namespace shardc::rt::cuda
