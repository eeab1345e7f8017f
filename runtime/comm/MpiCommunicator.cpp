//===- MpiCommunicator.cpp - Collectives over MPI on CPU ------------------===//
//
// One thread per process owns MPI. It calls MPI_Init_thread (so it is MPI's
// "main thread" and MPI_THREAD_FUNNELED suffices), then serves a FIFO of
// operations that the runtime's thread posts: start calls enqueue and return
// a handle at once, the communication thread runs the queued collectives in
// order with blocking MPI calls, and wait() sleeps on a condition variable
// until its operation is done. MPI only progresses while it is called, so a
// thread sitting in a blocking collective is what lets communication overlap
// the runtime's computation. Every rank posts the same collectives in the
// same order, so the FIFO keeps them matched.
//
// Streams (Communicator.h): the communication thread synchronizes a start's
// inputReady event before its MPI calls read the input, and wait() blocks the
// calling thread until the collective has completed, so the compute stream
// needs no ordering of its own. On the CPU backend the event is complete when
// recorded.
//
// Errors: the communicator has MPI_ERRORS_RETURN, and SHARD_MPI_CHECK turns
// a failing call into an llvm::Error naming the call, file:line and MPI's
// message. The first failure is sticky (asyncError()); later queued
// operations fail without calling MPI, since the ranks may no longer agree on
// the order of collectives.
//
// abort(): if the communication thread is idle, it calls MPI_Abort itself.
// If it is inside an MPI call (typically a collective that a failed rank will
// never join), the calling thread calls MPI_Abort directly. Under
// MPI_THREAD_FUNNELED that is outside the standard, but Open MPI's MPI_Abort
// only asks the launcher (through PMIx, which is thread safe) to kill the
// job and then exits, which works from any thread; it is also the only way
// out, since the communication thread will never return.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/CommSupport.h"
#include "runtime/comm/Communicator.h"

#include "llvm/Support/FormatVariadic.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>

namespace shardc::rt {

llvm::Error detail::mpiCallError(int code, const char *call, const char *file,
                                 int line) {
  if (code == MPI_SUCCESS)
    return llvm::Error::success();
  char text[MPI_MAX_ERROR_STRING + 1] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof(text), "MPI error code %d", code);
  return makeCallError("MPI", call, file, line, text);
}

namespace {

using detail::CollectiveKind;

/// MPI can be initialized once per process.
std::atomic<bool> mpiClaimed{false};

static llvm::Error commError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "mpi: " + message);
}

/// The MPI datatype moving elements of `dtype`. Types that are only moved,
/// never reduced, travel as unsigned integers of their size.
static MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I64:
    return MPI_INT64_T;
  case DType::I8:
    return MPI_INT8_T;
  case DType::U8:
  case DType::Bool:
    return MPI_UINT8_T;
  case DType::F16:
    return MPI_UINT16_T;
  case DType::Undefined:
    break;
  }
  return MPI_DATATYPE_NULL;
}

static MPI_Op mpiOp(ReduceOp op) {
  return op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
}

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(const MpiCommunicatorOptions &options)
      : maxChunkBytes(options.maxChunkBytes) {}
  ~MpiCommunicator() override;

  /// Starts the communication thread and waits until it has initialized
  /// MPI.
  llvm::Error init();

  int rank() const override { return myRank; }
  int worldSize() const override { return mySize; }
  llvm::StringRef name() const override { return "mpi"; }

  llvm::Expected<CollectiveHandle> allGatherStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  Event *inputReady) override {
    return enqueue(CollectiveKind::AllGather, in, out, count, dtype,
                   ReduceOp::Sum, inputReady);
  }
  llvm::Expected<CollectiveHandle>
  reduceScatterStart(const void *in, void *out, int64_t count, DType dtype,
                     ReduceOp op, Event *inputReady) override {
    return enqueue(CollectiveKind::ReduceScatter, in, out, count, dtype, op,
                   inputReady);
  }
  llvm::Expected<CollectiveHandle> allReduceStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  ReduceOp op,
                                                  Event *inputReady) override {
    return enqueue(CollectiveKind::AllReduce, in, out, count, dtype, op,
                   inputReady);
  }
  /// Blocks until the collective has completed; the stream needs nothing
  /// more, since everything queued later is queued after this returns.
  llvm::Error wait(CollectiveHandle handle, Stream *computeStream) override;
  llvm::Error barrier() override;
  [[noreturn]] void abort(int code) override;
  llvm::Error asyncError() override;
  std::vector<CollectiveRecord> takeRecords() override;

private:
  struct Op {
    CollectiveKind kind;
    const void *in;
    void *out;
    int64_t count;
    DType dtype;
    ReduceOp reduce;
    /// Synchronized on the communication thread before the MPI calls.
    Event *inputReady;
    CollectiveHandle handle;
    int64_t bytes;
    double queuedUs;
  };
  struct OpState {
    bool done = false;
    bool waited = false;
    std::string error;
  };

  llvm::Expected<CollectiveHandle> enqueue(CollectiveKind kind, const void *in,
                                           void *out, int64_t count,
                                           DType dtype, ReduceOp reduce,
                                           Event *inputReady);

  // Communication thread.
  void threadMain();
  llvm::Error initMpi();
  llvm::Error execute(const Op &op);
  llvm::Error allGather(const Op &op);
  llvm::Error reduceScatter(const Op &op);
  llvm::Error allReduce(const Op &op);
  /// Elements per MPI call when each call moves `blocks` blocks per rank.
  int64_t chunkElements(DType dtype, int64_t blocks) const;
  [[noreturn]] void abortNow(int code);

  const int64_t maxChunkBytes;
  int myRank = 0;
  int mySize = 1;
  /// Written by the communication thread during init, read-only after.
  MPI_Comm comm = MPI_COMM_NULL;
  std::thread thread;

  std::mutex mutex;
  /// Signals the communication thread: work queued, shutdown, abort.
  std::condition_variable workCv;
  /// Signals waiters: init finished, an operation finished.
  std::condition_variable doneCv;
  bool initDone = false;
  std::string initError;
  std::deque<Op> queue;
  std::unordered_map<CollectiveHandle, OpState> states;
  CollectiveHandle nextHandle = 1;
  /// The communication thread is inside an MPI call for an operation.
  bool busy = false;
  bool shutdown = false;
  bool abortRequested = false;
  int abortCode = 0;
  /// The first error of an operation; non-empty means broken.
  std::string firstError;
  std::vector<CollectiveRecord> records;
};

//===----------------------------------------------------------------------===//
// Runtime thread side
//===----------------------------------------------------------------------===//

llvm::Error MpiCommunicator::init() {
  thread = std::thread([this] { threadMain(); });
  std::unique_lock<std::mutex> lock(mutex);
  doneCv.wait(lock, [this] { return initDone; });
  if (initError.empty())
    return llvm::Error::success();
  std::string message = initError;
  lock.unlock();
  thread.join();
  return commError(message);
}

MpiCommunicator::~MpiCommunicator() {
  if (!thread.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    shutdown = true;
  }
  workCv.notify_all();
  thread.join();
}

llvm::Expected<CollectiveHandle>
MpiCommunicator::enqueue(CollectiveKind kind, const void *in, void *out,
                         int64_t count, DType dtype, ReduceOp reduce,
                         Event *inputReady) {
  int64_t bytes = 0;
  if (llvm::Error err = detail::checkCollectiveArgs(kind, in, out, count, dtype,
                                                    myRank, mySize, bytes))
    return std::move(err);
  double queuedUs = nowMicros();
  CollectiveHandle handle;
  {
    std::lock_guard<std::mutex> lock(mutex);
    handle = nextHandle++;
    states.emplace(handle, OpState());
    queue.push_back(Op{kind, in, out, count, dtype, reduce, inputReady, handle,
                       bytes, queuedUs});
  }
  workCv.notify_one();
  return handle;
}

llvm::Error MpiCommunicator::wait(CollectiveHandle handle, Stream *) {
  std::unique_lock<std::mutex> lock(mutex);
  auto it = states.find(handle);
  if (it == states.end())
    return commError(llvm::formatv("wait: unknown collective handle {0} "
                                   "(never started, or already waited for)",
                                   handle)
                         .str());
  // References into the map survive rehashing by concurrent start calls.
  OpState &state = it->second;
  if (state.waited)
    return commError(llvm::formatv("wait: collective handle {0} is already "
                                   "being waited for",
                                   handle)
                         .str());
  state.waited = true;
  doneCv.wait(lock, [&] { return state.done; });
  std::string error = std::move(state.error);
  states.erase(handle);
  if (error.empty())
    return llvm::Error::success();
  return commError(error);
}

llvm::Error MpiCommunicator::barrier() {
  llvm::Expected<CollectiveHandle> handle =
      enqueue(CollectiveKind::Barrier, nullptr, nullptr, 0, DType::Undefined,
              ReduceOp::Sum, nullptr);
  if (!handle)
    return handle.takeError();
  return wait(*handle, nullptr);
}

llvm::Error MpiCommunicator::asyncError() {
  std::lock_guard<std::mutex> lock(mutex);
  if (firstError.empty())
    return llvm::Error::success();
  return commError(firstError);
}

std::vector<CollectiveRecord> MpiCommunicator::takeRecords() {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<CollectiveRecord> taken;
  taken.swap(records);
  return taken;
}

void MpiCommunicator::abort(int code) {
  std::unique_lock<std::mutex> lock(mutex);
  if (busy) {
    // The communication thread is blocked in MPI and may never come back.
    lock.unlock();
    std::fprintf(stderr,
                 "shard: rank %d: aborting the job (code %d) from outside the "
                 "MPI communication thread, which is inside a collective\n",
                 myRank, code);
    abortNow(code);
  }
  // The communication thread is idle, or between operations and about to
  // look at its queue, which it does under this lock: it sees the request
  // before starting anything else.
  abortRequested = true;
  abortCode = code;
  lock.unlock();
  workCv.notify_all();
  // MPI_Abort ends the process. Should the communication thread somehow not
  // get there, do it from here.
  std::this_thread::sleep_for(std::chrono::seconds(30));
  std::fprintf(stderr,
               "shard: rank %d: the MPI communication thread did not abort the "
               "job; aborting from this thread\n",
               myRank);
  abortNow(code);
}

//===----------------------------------------------------------------------===//
// Communication thread side
//===----------------------------------------------------------------------===//

void MpiCommunicator::abortNow(int code) {
  std::fflush(nullptr);
  MPI_Abort(comm != MPI_COMM_NULL ? comm : MPI_COMM_WORLD, code);
  // MPI_Abort does not return in Open MPI; make sure of it.
  std::_Exit(code);
}

llvm::Error MpiCommunicator::initMpi() {
  int initialized = 0, finalized = 0;
  SHARD_MPI_CHECK(MPI_Initialized(&initialized));
  SHARD_MPI_CHECK(MPI_Finalized(&finalized));
  if (initialized || finalized)
    return commError("MPI was already initialized in this process by "
                     "someone else; the communicator must own MPI");
  int provided = MPI_THREAD_SINGLE;
  SHARD_MPI_CHECK(
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  llvm::Error err = [&]() -> llvm::Error {
    if (provided < MPI_THREAD_FUNNELED)
      return commError("the MPI library does not provide "
                       "MPI_THREAD_FUNNELED");
    SHARD_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    SHARD_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    SHARD_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    SHARD_MPI_CHECK(MPI_Comm_rank(comm, &myRank));
    SHARD_MPI_CHECK(MPI_Comm_size(comm, &mySize));
    return llvm::Error::success();
  }();
  if (err) {
    if (comm != MPI_COMM_NULL)
      MPI_Comm_free(&comm);
    MPI_Finalize();
  }
  return err;
}

void MpiCommunicator::threadMain() {
  llvm::Error initErr = initMpi();
  bool ok = !initErr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    initDone = true;
    if (initErr)
      initError = llvm::toString(std::move(initErr));
  }
  doneCv.notify_all();
  if (!ok)
    return;

  for (;;) {
    Op op;
    bool skip = false;
    std::string skipReason;
    {
      std::unique_lock<std::mutex> lock(mutex);
      workCv.wait(lock, [this] {
        return abortRequested || shutdown || !queue.empty();
      });
      if (abortRequested) {
        int code = abortCode;
        lock.unlock();
        abortNow(code);
      }
      if (queue.empty())
        break; // Shutdown, and every posted operation has run.
      op = queue.front();
      queue.pop_front();
      skip = !firstError.empty();
      if (skip)
        skipReason = "not run: an earlier collective failed: " + firstError;
      busy = !skip;
    }

    double startUs = nowMicros();
    std::string error = std::move(skipReason);
    if (!skip) {
      if (llvm::Error err = execute(op))
        error =
            llvm::formatv("{0} of {1} x {2}: {3}",
                          detail::collectiveKindName(op.kind), op.count,
                          dtypeName(op.dtype), llvm::toString(std::move(err)))
                .str();
    }
    double endUs = nowMicros();

    {
      std::lock_guard<std::mutex> lock(mutex);
      busy = false;
      if (!error.empty() && firstError.empty())
        firstError = error;
      if (records.size() < kMaxRecords)
        records.push_back({detail::collectiveKindName(op.kind),
                           op.kind == CollectiveKind::Barrier ? 0 : op.handle,
                           op.bytes, op.queuedUs, startUs, endUs});
      OpState &state = states[op.handle];
      state.done = true;
      state.error = std::move(error);
    }
    doneCv.notify_all();
  }

  // Every rank reaches this point after the same collectives, so freeing the
  // communicator and finalizing (both collective) match up. Errors here have
  // nobody left to report to.
  if (llvm::Error err = SHARD_MPI_ERROR(MPI_Comm_free(&comm)))
    llvm::consumeError(std::move(err));
  MPI_Finalize();
}

int64_t MpiCommunicator::chunkElements(DType dtype, int64_t blocks) const {
  int64_t perCall = maxChunkBytes / (static_cast<int64_t>(dtypeSize(dtype)) *
                                     std::max<int64_t>(blocks, 1));
  return std::clamp<int64_t>(perCall, 1, INT_MAX);
}

llvm::Error MpiCommunicator::execute(const Op &op) {
  // The input is ready on the caller's compute stream from here on (on the
  // CPU backend, already when the event was recorded).
  if (op.inputReady)
    if (llvm::Error err = op.inputReady->synchronize())
      return commError("waiting for the input: " +
                       llvm::toString(std::move(err)));
  switch (op.kind) {
  case CollectiveKind::Barrier:
    SHARD_MPI_CHECK(MPI_Barrier(comm));
    return llvm::Error::success();
  case CollectiveKind::AllGather:
    return allGather(op);
  case CollectiveKind::ReduceScatter:
    return reduceScatter(op);
  case CollectiveKind::AllReduce:
    return allReduce(op);
  }
  return commError("unknown collective");
}

/// A scratch buffer; an error rather than a crash if memory runs out.
static llvm::Expected<std::unique_ptr<char[]>> allocScratch(int64_t bytes) {
  std::unique_ptr<char[]> buffer(
      new (std::nothrow) char[static_cast<size_t>(bytes)]);
  if (!buffer)
    return commError(llvm::formatv("cannot allocate {0} bytes of scratch "
                                   "for a chunked collective",
                                   bytes)
                         .str());
  return std::move(buffer);
}

llvm::Error MpiCommunicator::allGather(const Op &op) {
  if (op.count == 0)
    return llvm::Error::success();
  MPI_Datatype type = mpiType(op.dtype);
  int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  const char *in = static_cast<const char *>(op.in);
  char *out = static_cast<char *>(op.out);
  bool inPlace = in == out + myRank * op.count * elem;

  if (op.count <= chunkElements(op.dtype, 1)) {
    int count = static_cast<int>(op.count);
    SHARD_MPI_CHECK(MPI_Allgather(inPlace ? MPI_IN_PLACE : in, count, type, out,
                                  count, type, comm));
    return llvm::Error::success();
  }

  // Too large for one call. Rank r's piece [off, off + len) of its block
  // lands at out[r * count + off], which is strided across ranks: gather
  // each piece into contiguous scratch, then scatter it into place.
  int64_t len = chunkElements(op.dtype, mySize);
  llvm::Expected<std::unique_ptr<char[]>> scratch =
      allocScratch(len * mySize * elem);
  if (!scratch)
    return scratch.takeError();
  char *tmp = scratch->get();
  for (int64_t off = 0; off < op.count; off += len) {
    int64_t n = std::min(len, op.count - off);
    SHARD_MPI_CHECK(MPI_Allgather(in + off * elem, static_cast<int>(n), type,
                                  tmp, static_cast<int>(n), type, comm));
    for (int r = 0; r < mySize; ++r) {
      if (inPlace && r == myRank)
        continue; // Already there.
      std::memcpy(out + (r * op.count + off) * elem, tmp + r * n * elem,
                  static_cast<size_t>(n * elem));
    }
  }
  return llvm::Error::success();
}

llvm::Error MpiCommunicator::reduceScatter(const Op &op) {
  if (op.count == 0)
    return llvm::Error::success();
  MPI_Datatype type = mpiType(op.dtype);
  MPI_Op reduce = mpiOp(op.reduce);
  int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  const char *in = static_cast<const char *>(op.in);
  char *out = static_cast<char *>(op.out);

  if (op.count <= chunkElements(op.dtype, 1)) {
    SHARD_MPI_CHECK(MPI_Reduce_scatter_block(
        in, out, static_cast<int>(op.count), type, reduce, comm));
    return llvm::Error::success();
  }

  // Every rank splits each block the same way: piece [off, off + len) of
  // block r is in[r * count + off]. Pack the pieces of all blocks into
  // contiguous scratch so one call reduces them and hands rank r its piece.
  int64_t len = chunkElements(op.dtype, mySize);
  llvm::Expected<std::unique_ptr<char[]>> scratch =
      allocScratch(len * mySize * elem);
  if (!scratch)
    return scratch.takeError();
  char *tmp = scratch->get();
  for (int64_t off = 0; off < op.count; off += len) {
    int64_t n = std::min(len, op.count - off);
    for (int r = 0; r < mySize; ++r)
      std::memcpy(tmp + r * n * elem, in + (r * op.count + off) * elem,
                  static_cast<size_t>(n * elem));
    SHARD_MPI_CHECK(MPI_Reduce_scatter_block(
        tmp, out + off * elem, static_cast<int>(n), type, reduce, comm));
  }
  return llvm::Error::success();
}

llvm::Error MpiCommunicator::allReduce(const Op &op) {
  MPI_Datatype type = mpiType(op.dtype);
  MPI_Op reduce = mpiOp(op.reduce);
  int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  const char *in = static_cast<const char *>(op.in);
  char *out = static_cast<char *>(op.out);
  bool inPlace = in == out;
  // Contiguous pieces of input and output line up: no scratch needed.
  int64_t len = chunkElements(op.dtype, 1);
  for (int64_t off = 0; off < op.count; off += len) {
    int64_t n = std::min(len, op.count - off);
    SHARD_MPI_CHECK(MPI_Allreduce(inPlace ? MPI_IN_PLACE : in + off * elem,
                                  out + off * elem, static_cast<int>(n), type,
                                  reduce, comm));
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<Communicator>>
createMpiCommunicator(const MpiCommunicatorOptions &options) {
  if (options.maxChunkBytes <= 0)
    return commError(llvm::formatv("maxChunkBytes must be positive, got {0}",
                                   options.maxChunkBytes)
                         .str());
  if (mpiClaimed.exchange(true))
    return commError("an MPI communicator was already created in this "
                     "process; MPI can be initialized only once");
  (void)nowMicros(); // Fix the time origin before the first record.
  auto communicator = std::make_unique<MpiCommunicator>(options);
  if (llvm::Error err = communicator->init())
    return std::move(err);
  return std::unique_ptr<Communicator>(std::move(communicator));
}

llvm::Expected<std::unique_ptr<Communicator>> createMpiCommunicator() {
  return createMpiCommunicator(MpiCommunicatorOptions());
}

} // namespace shardc::rt
