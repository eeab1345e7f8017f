//===- MpiCommunicator.cpp - Collectives over MPI on CPU ------------------===//
//
// One thread per process owns MPI. It calls MPI_Init_thread (so it is MPI's
// "main thread" and MPI_THREAD_FUNNELED suffices), then serves a FIFO of
// operations that the runtime's thread posts: start calls enqueue and return
// a handle at once, the communication thread runs the queued collectives in
// order, and wait() sleeps on a condition variable until its operation is
// done. MPI only progresses while it is called, so a thread driving the
// collective is what lets communication overlap the runtime's computation.
// Every rank posts the same collectives in the same order, so the FIFO keeps
// them matched, and the n-th collective is "collective #n" on every rank.
//
// Algorithms. A group of a power-of-two number of ranks (2, 4, 8, ...: the
// usual data parallel sizes) runs its collectives over point-to-point
// messages, as NCCL does on its own transports: all-gather by recursive
// doubling; reduce-scatter by recursive halving, each step handing the
// partner (rank ^ m, for m = 1, 2, 4, ...) the blocks it keeps and adding
// the partner's part of this rank's; all-reduce by the same halving over
// contiguous halves, then doubling back. Two things follow. Speed: Open MPI
// 4.1's nonblocking reduce-scatter (libnbc) reduces the whole buffer to rank
// 0 along a binomial tree and scatters it, measured about 3x slower per byte
// than its all-reduce on shared memory, where halving moves each byte once.
// Order: every element's sum is added along one tree, pairs of neighbouring
// ranks first
// ((g0 + g1) + (g2 + g3) on 4 ranks; a + b == b + a in floating point),
// whatever the collective and the element's place in its buffer. So the
// all-reduce of stage 0, the reduce-scatter of stages 1-3 and hybrid
// sharding's reduce-scatter within groups of consecutive ranks followed by
// an all-reduce across them give the same bits, and so do the stages' runs.
// Messages are cut into segments of at most kSegmentBytes; a step whose sums
// land in place receives all its segments at once, one that must land
// elsewhere first (the middle steps of a reduce-scatter from 8 ranks on, an
// in-place all-reduce) cycles through a bounce buffer of kBounceSegments.
// Other group sizes (3, 6, ...) run MPI's nonblocking collectives, whose
// orders may differ between all-reduce and reduce-scatter.
//
// Waiting. Each MPI call is a nonblocking collective (MPI_Iallreduce, ...)
// or point-to-point message that the thread completes by polling MPI_Test.
// Blocking collectives spin in Open MPI (mpi_yield_when_idle only adds
// sched_yield), so a rank whose peer is late burned a core for as long as it
// waited, and a rank whose peer never came burned it forever. The poll loop
// spins while MPI does work and for 2 ms after, then sleeps between tests, idle
// time / 32 up to 1 ms: a collective is late by at most 3 % of its wait, and by
// 1 ms at most. A test did work (a copy, a reduction) when it cost this thread
// more than 50 us of CPU; an idle test costs 1-2 us, up to about 20 us with
// cold caches right after a sleep (measured with Open MPI 4.1 on shared
// memory). docs/faults.md has the CPU use of a rank waiting on a stopped peer.
//
// Collective watchdog (MpiCommunicatorOptions::collectiveTimeoutSeconds,
// shardrun --collective-timeout). When one MPI call of a collective has not
// completed after the timeout, the waiting rank finds out who is missing
// without needing the missing rank to do anything: on a duplicate of the
// communicator kept for this, it sends every other rank a query and waits up
// to 2 s for the answers. Each rank's communication thread answers from its
// poll loop, and every 100 ms when idle, with where it is: inside collective
// #n (its step and the op that started it), or computing at step s, op k
// (runtime/comm/Progress.h). A stopped process, a hung host or a dead link
// answers nothing. The lowest rank among those waiting in the collective
// then prints one line naming each rank that did not arrive (did not answer,
// still computing at step s op k, or inside another collective) and the
// collective with its step and op, and ends the job with MPI_Abort; the other
// waiting ranks stay quiet unless the job is still alive 10 s later. If every
// rank answers from inside the collective (the last one just arrived), the
// wait starts over once; a second timeout with everyone inside means MPI
// itself makes no progress, and ends the job too. The final barrier before
// MPI_Finalize is watched the same way, so a rank that stops at the end does
// not hang the others in MPI_Finalize. Time this rank itself spent stopped
// (Ctrl-Z, a suspended machine: a gap of over 1 s between two polls) does
// not count. With a timeout of 0 nothing is watched or answered.
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
// When a rank dies (a fatal signal, SIGKILL, the OOM killer), mpirun notices
// within about a second and ends the other ranks with SIGTERM (then SIGKILL);
// srun does the same with --kill-on-bad-exit, and otherwise the watchdog ends
// the survivors, naming the dead rank as one that did not answer. Who names
// the dead rank and its step is in runtime/comm/RankGuard.h (fatal signals)
// and tools/shardrun/Launcher.cpp (SIGKILL, through the progress board).
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/CommSupport.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Progress.h"
#include "runtime/kernels/CastOps.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <time.h>
#include <unistd.h>
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
/// never reduced, travel as unsigned integers of their size; so do float16
/// and bfloat16, which MPI has no type for, and which mpiOp reduces with
/// operations of their own.
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
  case DType::BF16:
    return MPI_UINT16_T;
  case DType::Undefined:
    break;
  }
  return MPI_DATATYPE_NULL;
}

/// Sum or max of 16-bit floats held as uint16_t: each pair is widened to
/// float, combined, and rounded back to nearest even (as a float16 or
/// bfloat16 add does); max propagates NaN.
template <float (*Load)(uint16_t), uint16_t (*Store)(float), bool IsMax>
static void reduce16(void *in, void *inout, int *len, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = Load(a[i]), y = Load(b[i]);
    float r = IsMax ? (std::isnan(x) || x > y ? x : y) : x + y;
    b[i] = Store(r);
  }
}

/// A commutative user operation, created once (MPI is initialized by the
/// time a communicator reduces; MPI_Finalize frees it).
static MPI_Op userOp(MPI_User_function *fn) {
  MPI_Op op = MPI_OP_NULL;
  MPI_Op_create(fn, /*commute=*/1, &op);
  return op;
}

static MPI_Op mpiOp(ReduceOp op, DType dtype) {
  bool max = op == ReduceOp::Max;
  if (dtype == DType::F16) {
    static MPI_Op sum =
        userOp(reduce16<ops::halfToFloat, ops::floatToHalf, false>);
    static MPI_Op mx =
        userOp(reduce16<ops::halfToFloat, ops::floatToHalf, true>);
    return max ? mx : sum;
  }
  if (dtype == DType::BF16) {
    static MPI_Op sum =
        userOp(reduce16<ops::bfloat16ToFloat, ops::floatToBfloat16, false>);
    static MPI_Op mx =
        userOp(reduce16<ops::bfloat16ToFloat, ops::floatToBfloat16, true>);
    return max ? mx : sum;
  }
  return max ? MPI_MAX : MPI_SUM;
}

using Clock = std::chrono::steady_clock;

/// Seconds of CPU this thread has used.
static double threadCpuSeconds() {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

static double secondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// One line on stderr in one write (ranks share the terminal).
static void printLine(const std::string &line) {
  std::string text = line + "\n";
  const char *p = text.data();
  size_t left = text.size();
  while (left) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0)
      return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

/// The largest message of the pairwise collectives, and how many of them
/// may land in the bounce buffer at once (see the file comment).
constexpr int64_t kSegmentBytes = int64_t(1) << 20;
constexpr int64_t kBounceSegments = 4;

/// The poll loop's pacing (see the file comment).
constexpr double kSpinSeconds = 2e-3;
constexpr double kMaxSleepSeconds = 1e-3;
constexpr double kSleepDivisor = 32;
constexpr double kWorkCpuSeconds = 50e-6;
/// A gap between two polls that means this process was stopped.
constexpr double kStoppedGapSeconds = 1.0;
/// How long a stalled rank waits for the other ranks' answers.
constexpr double kAnswerSeconds = 2.0;
/// How often an idle communication thread answers queries.
constexpr auto kIdlePoll = std::chrono::milliseconds(100);
/// How long a waiting rank that does not report gives the reporter.
constexpr double kReporterGraceSeconds = 10.0;

/// The handle of the barrier before MPI_Finalize (start calls count from 1).
constexpr CollectiveHandle kFinalBarrier = 0;

/// Tags on the watchdog's communicator.
constexpr int kQueryTag = 1;
constexpr int kAnswerTag = 2;

/// Where a rank is, as the watchdog's messages carry it.
struct WatchStatus {
  /// 1: inside collective `seq`; 0: not in a collective (computing), `seq`
  /// is the last collective it ran.
  int64_t inCollective = 0;
  int64_t seq = 0;
  int64_t kind = 0;
  int64_t step = -1;
  int64_t op = -1;
  /// How long it has been in this collective (or since its last one).
  int64_t waitedMs = 0;
};
constexpr int kStatusInts = sizeof(WatchStatus) / sizeof(int64_t);

/// The ranks a collective runs among: the whole communicator, or a group
/// that split() made. Owned by the communicator (its addresses are stable),
/// filled by the communication thread before the start call that made it
/// returns.
struct Group {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  /// "" for the whole communicator (CollectiveRecord::group).
  std::string label;
  /// The members' ranks in the whole communicator, in group order.
  std::vector<int> members;
};

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(const MpiCommunicatorOptions &options)
      : maxChunkBytes(options.maxChunkBytes),
        timeoutSeconds(options.collectiveTimeoutSeconds) {}
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
                   ReduceOp::Sum, inputReady, world());
  }
  llvm::Expected<CollectiveHandle>
  reduceScatterStart(const void *in, void *out, int64_t count, DType dtype,
                     ReduceOp op, Event *inputReady) override {
    return enqueue(CollectiveKind::ReduceScatter, in, out, count, dtype, op,
                   inputReady, world());
  }
  llvm::Expected<CollectiveHandle> allReduceStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  ReduceOp op,
                                                  Event *inputReady) override {
    return enqueue(CollectiveKind::AllReduce, in, out, count, dtype, op,
                   inputReady, world());
  }
  /// Blocks until the collective has completed; the stream needs nothing
  /// more, since everything queued later is queued after this returns.
  llvm::Error wait(CollectiveHandle handle, Stream *computeStream) override;
  llvm::Error barrier() override { return barrierOf(world()); }
  llvm::Expected<std::unique_ptr<Communicator>>
  split(int color, int key, llvm::StringRef label) override {
    return splitGroup(world(), color, key, label);
  }
  [[noreturn]] void abort(int code) override;
  llvm::Error asyncError() override;
  std::vector<CollectiveRecord> takeRecords() override;

  // For the groups' communicators (MpiGroupCommunicator).
  llvm::Expected<CollectiveHandle> enqueue(CollectiveKind kind, const void *in,
                                           void *out, int64_t count,
                                           DType dtype, ReduceOp reduce,
                                           Event *inputReady, Group *group);
  llvm::Error barrierOf(Group *group);
  llvm::Expected<std::unique_ptr<Communicator>>
  splitGroup(Group *parent, int color, int key, llvm::StringRef label);

private:
  Group *world() { return &groups.front(); }

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
    /// Where the runtime thread was when it started the collective.
    progress::Position position;
    /// The ranks it runs among.
    Group *group;
    /// Split only: MPI_Comm_split's arguments and the group it fills.
    int color = 0, key = 0;
    Group *made = nullptr;
  };
  struct OpState {
    bool done = false;
    bool waited = false;
    std::string error;
  };

  // Communication thread.
  void threadMain();
  llvm::Error initMpi();
  llvm::Error execute(const Op &op);
  llvm::Error allGather(const Op &op);
  llvm::Error reduceScatter(const Op &op);
  llvm::Error allReduce(const Op &op);
  llvm::Error splitComm(const Op &op);
  /// Elements per MPI call when each call moves `blocks` blocks per rank.
  int64_t chunkElements(DType dtype, int64_t blocks) const;

  // Collectives of power-of-two groups over point-to-point messages
  // (recursive halving and doubling; the file comment has why).
  static bool pairwise(const Group &group) {
    return group.size > 1 && (group.size & (group.size - 1)) == 0;
  }
  llvm::Error pairAllGather(const Op &op);
  llvm::Error pairReduceScatter(const Op &op);
  llvm::Error pairAllReduce(const Op &op);
  /// A run of elements that one step sends or receives.
  struct Piece {
    const char *data;
    int64_t count;
  };
  /// One step with `peer`: sends the `sends` pieces and receives `recvs`,
  /// in messages of at most segmentElements(); the peer runs the step with
  /// the lists swapped (its sends the same sizes as these receives). Each
  /// received segment lands in its piece (`data` is the destination) or,
  /// with `bounced`, in the bounce buffer; then `received(piece, offset, n,
  /// data)` runs on it.
  llvm::Error exchange(
      const Op &op, int peer, llvm::ArrayRef<Piece> sends,
      llvm::ArrayRef<Piece> recvs, bool bounced,
      llvm::function_ref<llvm::Error(size_t, int64_t, int64_t, const char *)>
          received);
  /// b = a (op) b over `n` elements (MPI_Reduce_local: MPI's own reduction).
  llvm::Error reduceLocal(const Op &op, const char *a, char *b, int64_t n);
  int64_t segmentElements(DType dtype) const;
  [[noreturn]] void abortNow(int code);

  /// Completes `requests`, the MPI calls of one part of `op`: polls, sleeps
  /// when nothing moves, answers the watchdog, and runs it when the calls
  /// stall.
  llvm::Error complete(llvm::MutableArrayRef<MPI_Request> requests,
                       const Op &op);
  /// The watchdog, after `waited` seconds without completion: ends the job,
  /// or returns to wait again (every rank is inside the collective, or it
  /// completed meanwhile). `stalls` counts earlier returns for this call.
  void onStall(llvm::MutableArrayRef<MPI_Request> requests, const Op &op,
               double waited, int &stalls);
  /// Answers the other ranks' watchdog queries; reaps finished sends.
  void serveQueries();
  WatchStatus statusNow() const;
  /// "allreduce #12 of 1024 x float32", "barrier #13".
  std::string describeOp(const Op &op) const;
  bool watching() const { return timeoutSeconds > 0 && mySize > 1; }

  const int64_t maxChunkBytes;
  const double timeoutSeconds;
  int myRank = 0;
  int mySize = 1;
  /// Written by the communication thread during init, read-only after.
  MPI_Comm comm = MPI_COMM_NULL;
  /// The watchdog's messages travel here, never mixed with collectives.
  MPI_Comm watchComm = MPI_COMM_NULL;

  // Communication thread only.
  /// The posted receive of the next query, and its buffer.
  MPI_Request queryRequest = MPI_REQUEST_NULL;
  WatchStatus queryIn;
  /// Sends of answers and queries in flight, with their buffers (a deque
  /// keeps the buffers in place).
  std::deque<std::pair<MPI_Request, WatchStatus>> sends;
  /// The operation inside MPI now, and since when.
  const Op *running = nullptr;
  /// Where exchange() receives segments that are reduced into place; kept
  /// between collectives (kBounceSegments segments of kSegmentBytes).
  std::unique_ptr<char[]> bounce;
  int64_t bounceBytes = 0;
  Clock::time_point runningSince;
  CollectiveHandle lastSeq = 0;
  Clock::time_point lastEnd = Clock::now();
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
  /// The whole communicator first, then the groups split() made, which live
  /// as long as it does (freed before MPI_Finalize). Appended to under
  /// `mutex`.
  std::deque<Group> groups = std::deque<Group>(1);
};

/// The communicator of a group of an MpiCommunicator's ranks: its
/// collectives go through the parent's queue and thread (file comment).
class MpiGroupCommunicator final : public Communicator {
public:
  MpiGroupCommunicator(MpiCommunicator &parent, Group &group)
      : parent(parent), group(group) {}

  int rank() const override { return group.rank; }
  int worldSize() const override { return group.size; }
  llvm::StringRef name() const override { return "mpi"; }

  llvm::Expected<CollectiveHandle> allGatherStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  Event *inputReady) override {
    return parent.enqueue(CollectiveKind::AllGather, in, out, count, dtype,
                          ReduceOp::Sum, inputReady, &group);
  }
  llvm::Expected<CollectiveHandle>
  reduceScatterStart(const void *in, void *out, int64_t count, DType dtype,
                     ReduceOp op, Event *inputReady) override {
    return parent.enqueue(CollectiveKind::ReduceScatter, in, out, count, dtype,
                          op, inputReady, &group);
  }
  llvm::Expected<CollectiveHandle> allReduceStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  ReduceOp op,
                                                  Event *inputReady) override {
    return parent.enqueue(CollectiveKind::AllReduce, in, out, count, dtype, op,
                          inputReady, &group);
  }
  llvm::Error wait(CollectiveHandle handle, Stream *computeStream) override {
    return parent.wait(handle, computeStream);
  }
  llvm::Error barrier() override { return parent.barrierOf(&group); }
  llvm::Expected<std::unique_ptr<Communicator>>
  split(int color, int key, llvm::StringRef label) override {
    return parent.splitGroup(&group, color, key, label);
  }
  [[noreturn]] void abort(int code) override { parent.abort(code); }
  llvm::Error asyncError() override { return parent.asyncError(); }

private:
  MpiCommunicator &parent;
  Group &group;
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
                         Event *inputReady, Group *group) {
  int64_t bytes = 0;
  if (llvm::Error err = detail::checkCollectiveArgs(
          kind, in, out, count, dtype, group->rank, group->size, bytes))
    return std::move(err);
  double queuedUs = nowMicros();
  CollectiveHandle handle;
  {
    std::lock_guard<std::mutex> lock(mutex);
    handle = nextHandle++;
    states.emplace(handle, OpState());
    queue.push_back(Op{kind, in, out, count, dtype, reduce, inputReady, handle,
                       bytes, queuedUs, progress::position(), group});
  }
  workCv.notify_one();
  return handle;
}

llvm::Error MpiCommunicator::barrierOf(Group *group) {
  llvm::Expected<CollectiveHandle> handle =
      enqueue(CollectiveKind::Barrier, nullptr, nullptr, 0, DType::Undefined,
              ReduceOp::Sum, nullptr, group);
  if (!handle)
    return handle.takeError();
  return wait(*handle, nullptr);
}

llvm::Expected<std::unique_ptr<Communicator>>
MpiCommunicator::splitGroup(Group *parent, int color, int key,
                            llvm::StringRef label) {
  if (color < 0)
    return commError(
        llvm::formatv("split: color {0} is negative", color).str());
  Group *made;
  CollectiveHandle handle;
  {
    std::lock_guard<std::mutex> lock(mutex);
    groups.emplace_back();
    made = &groups.back();
    made->label = label.str();
    handle = nextHandle++;
    states.emplace(handle, OpState());
    Op op{CollectiveKind::Split, nullptr, nullptr, 0, DType::Undefined,
          ReduceOp::Sum,         nullptr, handle,  0, nowMicros(),
          progress::position(),  parent};
    op.color = color;
    op.key = key;
    op.made = made;
    queue.push_back(op);
  }
  workCv.notify_one();
  if (llvm::Error err = wait(handle, nullptr))
    return std::move(err);
  return std::unique_ptr<Communicator>(
      std::make_unique<MpiGroupCommunicator>(*this, *made));
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
  progress::setEnding(progress::Ending::Aborted);
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
    Group &all = groups.front();
    all.comm = comm;
    all.rank = myRank;
    all.size = mySize;
    for (int r = 0; r < mySize; ++r)
      all.members.push_back(r);
    if (watching()) {
      SHARD_MPI_CHECK(MPI_Comm_dup(comm, &watchComm));
      SHARD_MPI_CHECK(MPI_Comm_set_errhandler(watchComm, MPI_ERRORS_RETURN));
      SHARD_MPI_CHECK(MPI_Irecv(&queryIn, kStatusInts, MPI_INT64_T,
                                MPI_ANY_SOURCE, kQueryTag, watchComm,
                                &queryRequest));
    }
    return llvm::Error::success();
  }();
  if (err) {
    if (queryRequest != MPI_REQUEST_NULL) {
      MPI_Cancel(&queryRequest);
      MPI_Wait(&queryRequest, MPI_STATUS_IGNORE);
    }
    if (watchComm != MPI_COMM_NULL)
      MPI_Comm_free(&watchComm);
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
      auto ready = [this] {
        return abortRequested || shutdown || !queue.empty();
      };
      if (watching()) {
        // Idle, but other ranks' watchdogs may ask where this rank is.
        while (!workCv.wait_for(lock, kIdlePoll, ready)) {
          lock.unlock();
          serveQueries();
          lock.lock();
        }
      } else {
        workCv.wait(lock, ready);
      }
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
      running = &op;
      runningSince = Clock::now();
      llvm::Error err = execute(op);
      running = nullptr;
      lastSeq = op.handle;
      lastEnd = Clock::now();
      if (err)
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
      if (records.size() < kMaxRecords && op.kind != CollectiveKind::Split)
        records.push_back({detail::collectiveKindName(op.kind),
                           op.kind == CollectiveKind::Barrier ? 0 : op.handle,
                           op.bytes, op.queuedUs, startUs, endUs,
                           op.group->label, op.group->size});
      OpState &state = states[op.handle];
      state.done = true;
      state.error = std::move(error);
    }
    doneCv.notify_all();
  }

  // Every rank reaches this point after the same collectives, so freeing the
  // communicator and finalizing (both collective) match up. Errors here have
  // nobody left to report to. A watched barrier first: MPI_Finalize waits
  // for every rank, and a rank that stopped would hang it unwatched.
  bool healthy;
  {
    std::lock_guard<std::mutex> lock(mutex);
    healthy = firstError.empty();
  }
  if (watching() && healthy) {
    Op last{
        CollectiveKind::Barrier, nullptr, nullptr,       0, DType::Undefined,
        ReduceOp::Sum,           nullptr, kFinalBarrier, 0, nowMicros(),
        progress::position(),    world()};
    running = &last;
    runningSince = Clock::now();
    llvm::consumeError(execute(last));
    running = nullptr;
  }
  if (queryRequest != MPI_REQUEST_NULL) {
    MPI_Cancel(&queryRequest);
    MPI_Wait(&queryRequest, MPI_STATUS_IGNORE);
  }
  for (auto &send : sends)
    if (send.first != MPI_REQUEST_NULL)
      MPI_Request_free(&send.first);
  sends.clear();
  if (watchComm != MPI_COMM_NULL)
    if (llvm::Error err = SHARD_MPI_ERROR(MPI_Comm_free(&watchComm)))
      llvm::consumeError(std::move(err));
  for (Group &g : groups)
    if (&g != world() && g.comm != MPI_COMM_NULL)
      if (llvm::Error err = SHARD_MPI_ERROR(MPI_Comm_free(&g.comm)))
        llvm::consumeError(std::move(err));
  if (llvm::Error err = SHARD_MPI_ERROR(MPI_Comm_free(&comm)))
    llvm::consumeError(std::move(err));
  MPI_Finalize();
}

//===----------------------------------------------------------------------===//
// Waiting and the collective watchdog (communication thread)
//===----------------------------------------------------------------------===//

llvm::Error
MpiCommunicator::complete(llvm::MutableArrayRef<MPI_Request> requests,
                          const Op &op) {
  Clock::time_point start = Clock::now();
  Clock::time_point lastWork = start, lastPoll = start;
  int stalls = 0;
  unsigned polls = 0;
  for (;;) {
    int done = 0;
    double cpu = threadCpuSeconds();
    SHARD_MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()),
                                requests.data(), &done, MPI_STATUSES_IGNORE));
    if (done)
      return llvm::Error::success();
    Clock::time_point now = Clock::now();
    if (threadCpuSeconds() - cpu > kWorkCpuSeconds)
      lastWork = now;
    if (secondsBetween(lastPoll, now) > kStoppedGapSeconds)
      start = lastWork = now; // This process itself was stopped.
    lastPoll = now;
    double idle = secondsBetween(lastWork, now);
    if (watching()) {
      if (idle > kSpinSeconds || (++polls & 255) == 0)
        serveQueries();
      double waited = secondsBetween(start, now);
      if (waited > timeoutSeconds) {
        onStall(requests, op, waited, stalls);
        start = lastWork = lastPoll = Clock::now();
        continue;
      }
    }
    if (idle > kSpinSeconds)
      std::this_thread::sleep_for(std::chrono::duration<double>(
          std::min(kMaxSleepSeconds, idle / kSleepDivisor)));
  }
}

WatchStatus MpiCommunicator::statusNow() const {
  WatchStatus status;
  Clock::time_point now = Clock::now();
  if (running) {
    status.inCollective = 1;
    status.seq = running->handle;
    status.kind = static_cast<int64_t>(running->kind);
    status.step = running->position.step;
    status.op = running->position.op;
    status.waitedMs =
        static_cast<int64_t>(1e3 * secondsBetween(runningSince, now));
    return status;
  }
  progress::Position position = progress::position();
  status.seq = lastSeq;
  status.step = position.step;
  status.op = position.op;
  status.waitedMs = static_cast<int64_t>(1e3 * secondsBetween(lastEnd, now));
  return status;
}

void MpiCommunicator::serveQueries() {
  while (queryRequest != MPI_REQUEST_NULL) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Test(&queryRequest, &flag, &status) != MPI_SUCCESS || !flag)
      break;
    sends.emplace_back(MPI_REQUEST_NULL, statusNow());
    MPI_Isend(&sends.back().second, kStatusInts, MPI_INT64_T, status.MPI_SOURCE,
              kAnswerTag, watchComm, &sends.back().first);
    if (MPI_Irecv(&queryIn, kStatusInts, MPI_INT64_T, MPI_ANY_SOURCE, kQueryTag,
                  watchComm, &queryRequest) != MPI_SUCCESS)
      queryRequest = MPI_REQUEST_NULL;
  }
  while (!sends.empty()) {
    int flag = 1;
    if (sends.front().first != MPI_REQUEST_NULL &&
        MPI_Test(&sends.front().first, &flag, MPI_STATUS_IGNORE) ==
            MPI_SUCCESS &&
        !flag)
      break;
    sends.pop_front();
  }
}

/// "at step 3, op 57 (MatMul)" or "before the first step".
static std::string whereText(const progress::Position &position) {
  std::string where = progress::describe(position);
  return position.step < 0 ? where : "at " + where;
}

/// Seconds as "3" or "2.5".
static std::string secondsText(double seconds) {
  return llvm::formatv("{0}", llvm::format("%g", seconds)).str();
}

std::string MpiCommunicator::describeOp(const Op &op) const {
  if (op.handle == kFinalBarrier)
    return "the final barrier (before MPI_Finalize)";
  std::string text =
      llvm::formatv("{0} #{1}", detail::collectiveKindName(op.kind), op.handle)
          .str();
  if (op.kind != CollectiveKind::Barrier)
    text += llvm::formatv(" of {0} x {1}", op.count, dtypeName(op.dtype)).str();
  if (!op.group->label.empty())
    text += " in the group of " + op.group->label;
  return text;
}

/// "rank 1" or "ranks 1, 3".
static std::string rankList(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

void MpiCommunicator::onStall(llvm::MutableArrayRef<MPI_Request> requests,
                              const Op &op, double waited, int &stalls) {
  auto completed = [&] {
    int flag = 0;
    return MPI_Testall(static_cast<int>(requests.size()), requests.data(),
                       &flag, MPI_STATUSES_IGNORE) == MPI_SUCCESS &&
           flag;
  };
  // Ask every other rank where it is.
  WatchStatus mine = statusNow();
  std::vector<WatchStatus> answers(mySize);
  std::vector<MPI_Request> receives(mySize, MPI_REQUEST_NULL);
  std::vector<char> answered(mySize, 0);
  answered[myRank] = 1;
  int missing = 0;
  for (int r = 0; r < mySize; ++r) {
    if (r == myRank)
      continue;
    sends.emplace_back(MPI_REQUEST_NULL, mine);
    MPI_Isend(&sends.back().second, kStatusInts, MPI_INT64_T, r, kQueryTag,
              watchComm, &sends.back().first);
    if (MPI_Irecv(&answers[r], kStatusInts, MPI_INT64_T, r, kAnswerTag,
                  watchComm, &receives[r]) == MPI_SUCCESS)
      ++missing;
  }
  bool arrived = false;
  Clock::time_point asked = Clock::now();
  while (missing > 0 && secondsBetween(asked, Clock::now()) < kAnswerSeconds) {
    for (int r = 0; r < mySize; ++r) {
      int flag = 0;
      if (receives[r] != MPI_REQUEST_NULL &&
          MPI_Test(&receives[r], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
          flag) {
        answered[r] = 1;
        --missing;
      }
    }
    if (!arrived && completed())
      arrived = true;
    serveQueries();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int r = 0; r < mySize; ++r) {
    if (receives[r] == MPI_REQUEST_NULL)
      continue;
    MPI_Status status;
    MPI_Cancel(&receives[r]);
    MPI_Wait(&receives[r], &status);
    int cancelled = 1;
    MPI_Test_cancelled(&status, &cancelled);
    if (!cancelled)
      answered[r] = 1;
  }
  // The missing rank arrived while we asked: carry on.
  if (arrived)
    return;

  // Only the collective's group has to arrive.
  std::vector<char> member(mySize, 0);
  for (int r : op.group->members)
    member[r] = 1;
  std::vector<int> inside, silent, elsewhere;
  std::vector<std::string> computing;
  for (int r = 0; r < mySize; ++r) {
    if (r == myRank || !member[r])
      continue;
    const WatchStatus &a = answers[r];
    if (!answered[r])
      silent.push_back(r);
    else if (a.inCollective && a.seq == op.handle)
      inside.push_back(r);
    else if (a.inCollective)
      elsewhere.push_back(r);
    else
      computing.push_back(
          llvm::formatv(
              "rank {0}, still computing {1} ({2:f1} s after "
              "collective #{3})",
              r, whereText({a.step, static_cast<int32_t>(a.op), nullptr}),
              a.waitedMs / 1e3, a.seq)
              .str());
  }

  std::string message =
      llvm::formatv("{0}: error: rank {1}: collective timeout {2}: {3} has "
                    "waited {4:f1} s (limit {5} s) ",
                    progress::programName(), myRank, whereText(op.position),
                    describeOp(op), waited, secondsText(timeoutSeconds))
          .str();
  if (silent.empty() && elsewhere.empty() && computing.empty()) {
    // Everyone is inside: the last rank arrived just now, or MPI itself is
    // stuck between them. Give it one more period.
    if (stalls++ == 0)
      return;
    message += "with every rank inside it: MPI makes no progress between the "
               "ranks (a broken network link or a stuck transport)";
  } else {
    message += "for ranks that did not arrive: ";
    std::vector<std::string> parts;
    if (!silent.empty())
      parts.push_back(rankList(silent) +
                      llvm::formatv(", which did not answer within {0:f0} s "
                                    "(stopped, hung, or its host or network "
                                    "link is down)",
                                    kAnswerSeconds)
                          .str());
    for (std::string &c : computing)
      parts.push_back(std::move(c));
    if (!elsewhere.empty())
      parts.push_back(
          rankList(elsewhere) +
          (op.group->label.empty()
               ? ", inside another collective (the ranks disagree on the "
                 "order of collectives)"
               : ", inside another collective (of another rank group, "
                 "waiting there for its ranks, or the ranks disagree on the "
                 "order of collectives)"));
    for (size_t i = 0; i < parts.size(); ++i)
      message += (i ? "; " : "") + parts[i];
    message += "; if the ranks are only slow, raise the limit "
               "(shardrun --collective-timeout)";
  }
  message += "; ending the job";

  // The lowest rank waiting in the collective reports; the others leave it
  // the job's end, and speak only if it does not come.
  bool reporter = inside.empty() || inside.front() > myRank;
  if (!reporter) {
    Clock::time_point since = Clock::now();
    while (secondsBetween(since, Clock::now()) < kReporterGraceSeconds) {
      serveQueries();
      if (completed())
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  printLine(message);
  abortNow(1);
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
  case CollectiveKind::Barrier: {
    MPI_Request request;
    SHARD_MPI_CHECK(MPI_Ibarrier(op.group->comm, &request));
    return complete(request, op);
  }
  case CollectiveKind::Split:
    return splitComm(op);
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
  if (pairwise(*op.group))
    return pairAllGather(op);
  MPI_Datatype type = mpiType(op.dtype);
  int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  const char *in = static_cast<const char *>(op.in);
  char *out = static_cast<char *>(op.out);
  const MPI_Comm comm = op.group->comm;
  const int groupRank = op.group->rank, groupSize = op.group->size;
  bool inPlace = in == out + groupRank * op.count * elem;

  if (op.count <= chunkElements(op.dtype, 1)) {
    int count = static_cast<int>(op.count);
    MPI_Request request;
    SHARD_MPI_CHECK(MPI_Iallgather(inPlace ? MPI_IN_PLACE : in, count, type,
                                   out, count, type, comm, &request));
    return complete(request, op);
  }

  // Too large for one call. Rank r's piece [off, off + len) of its block
  // lands at out[r * count + off], which is strided across ranks: gather
  // each piece into contiguous scratch, then scatter it into place.
  int64_t len = chunkElements(op.dtype, groupSize);
  llvm::Expected<std::unique_ptr<char[]>> scratch =
      allocScratch(len * groupSize * elem);
  if (!scratch)
    return scratch.takeError();
  char *tmp = scratch->get();
  for (int64_t off = 0; off < op.count; off += len) {
    int64_t n = std::min(len, op.count - off);
    MPI_Request request;
    SHARD_MPI_CHECK(MPI_Iallgather(in + off * elem, static_cast<int>(n), type,
                                   tmp, static_cast<int>(n), type, comm,
                                   &request));
    if (llvm::Error err = complete(request, op))
      return err;
    for (int r = 0; r < groupSize; ++r) {
      if (inPlace && r == groupRank)
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
  if (pairwise(*op.group))
    return pairReduceScatter(op);
  MPI_Datatype type = mpiType(op.dtype);
  MPI_Op reduce = mpiOp(op.reduce, op.dtype);
  int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  const char *in = static_cast<const char *>(op.in);
  char *out = static_cast<char *>(op.out);
  const MPI_Comm comm = op.group->comm;
  const int groupSize = op.group->size;

  if (op.count <= chunkElements(op.dtype, 1)) {
    MPI_Request request;
    SHARD_MPI_CHECK(MPI_Ireduce_scatter_block(
        in, out, static_cast<int>(op.count), type, reduce, comm, &request));
    return complete(request, op);
  }

  // Every rank splits each block the same way: piece [off, off + len) of
  // block r is in[r * count + off]. Pack the pieces of all blocks into
  // contiguous scratch so one call reduces them and hands rank r its piece.
  int64_t len = chunkElements(op.dtype, groupSize);
  llvm::Expected<std::unique_ptr<char[]>> scratch =
      allocScratch(len * groupSize * elem);
  if (!scratch)
    return scratch.takeError();
  char *tmp = scratch->get();
  for (int64_t off = 0; off < op.count; off += len) {
    int64_t n = std::min(len, op.count - off);
    for (int r = 0; r < groupSize; ++r)
      std::memcpy(tmp + r * n * elem, in + (r * op.count + off) * elem,
                  static_cast<size_t>(n * elem));
    MPI_Request request;
    SHARD_MPI_CHECK(MPI_Ireduce_scatter_block(tmp, out + off * elem,
                                              static_cast<int>(n), type, reduce,
                                              comm, &request));
    if (llvm::Error err = complete(request, op))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error MpiCommunicator::allReduce(const Op &op) {
  if (op.count == 0)
    return llvm::Error::success();
  if (pairwise(*op.group))
    return pairAllReduce(op);
  MPI_Datatype type = mpiType(op.dtype);
  MPI_Op reduce = mpiOp(op.reduce, op.dtype);
  int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  const char *in = static_cast<const char *>(op.in);
  char *out = static_cast<char *>(op.out);
  const MPI_Comm comm = op.group->comm;
  bool inPlace = in == out;
  // Contiguous pieces of input and output line up: no scratch needed.
  int64_t len = chunkElements(op.dtype, 1);
  for (int64_t off = 0; off < op.count; off += len) {
    int64_t n = std::min(len, op.count - off);
    MPI_Request request;
    SHARD_MPI_CHECK(MPI_Iallreduce(inPlace ? MPI_IN_PLACE : in + off * elem,
                                   out + off * elem, static_cast<int>(n), type,
                                   reduce, comm, &request));
    if (llvm::Error err = complete(request, op))
      return err;
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Pairwise collectives of power-of-two groups (communication thread)
//===----------------------------------------------------------------------===//

int64_t MpiCommunicator::segmentElements(DType dtype) const {
  int64_t bytes = std::min(maxChunkBytes, kSegmentBytes);
  return std::clamp<int64_t>(bytes / static_cast<int64_t>(dtypeSize(dtype)), 1,
                             INT_MAX);
}

llvm::Error MpiCommunicator::reduceLocal(const Op &op, const char *a, char *b,
                                         int64_t n) {
  SHARD_MPI_CHECK(MPI_Reduce_local(a, b, static_cast<int>(n), mpiType(op.dtype),
                                   mpiOp(op.reduce, op.dtype)));
  return llvm::Error::success();
}

llvm::Error MpiCommunicator::exchange(
    const Op &op, int peer, llvm::ArrayRef<Piece> sends,
    llvm::ArrayRef<Piece> recvs, bool bounced,
    llvm::function_ref<llvm::Error(size_t, int64_t, int64_t, const char *)>
        received) {
  const MPI_Datatype type = mpiType(op.dtype);
  const MPI_Comm comm = op.group->comm;
  const int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  const int64_t segment = segmentElements(op.dtype);
  // The messages: each piece cut into segments, in order.
  struct Segment {
    size_t piece;
    int64_t offset, count;
  };
  auto cut = [&](llvm::ArrayRef<Piece> pieces) {
    std::vector<Segment> segments;
    for (size_t i = 0; i < pieces.size(); ++i)
      for (int64_t off = 0; off < pieces[i].count; off += segment)
        segments.push_back({i, off, std::min(segment, pieces[i].count - off)});
    return segments;
  };
  const std::vector<Segment> out = cut(sends), in = cut(recvs);
  // Receives into place are all posted at once; into the bounce buffer, at
  // most kBounceSegments at a time, each slot reused once reduced.
  const size_t window =
      bounced ? std::min<size_t>(in.size(), kBounceSegments) : in.size();
  if (bounced && window > 0 && bounceBytes < kBounceSegments * segment * elem) {
    int64_t bytes = kBounceSegments * segment * elem;
    bounce.reset(new (std::nothrow) char[static_cast<size_t>(bytes)]);
    bounceBytes = bounce ? bytes : 0;
    if (!bounce)
      return commError(llvm::formatv("cannot allocate {0} bytes of scratch "
                                     "for a collective",
                                     bytes)
                           .str());
  }
  auto landing = [&](size_t j) {
    const Segment &g = in[j];
    return bounced ? bounce.get() + (j % window) * segment * elem
                   : const_cast<char *>(recvs[g.piece].data) + g.offset * elem;
  };
  // Both ranks send and receive their segments in order, and MPI keeps the
  // order of messages between two ranks: the peer's j-th send meets this
  // rank's j-th receive.
  std::vector<MPI_Request> requests(window + out.size(), MPI_REQUEST_NULL);
  MPI_Request *recvRequests = requests.data();
  MPI_Request *sendRequests = recvRequests + window;
  auto post = [&](size_t j) -> llvm::Error {
    SHARD_MPI_CHECK(MPI_Irecv(landing(j), static_cast<int>(in[j].count), type,
                              peer, 0, comm, &recvRequests[j % window]));
    return llvm::Error::success();
  };
  for (size_t j = 0; j < window; ++j)
    if (llvm::Error err = post(j))
      return err;
  for (size_t j = 0; j < out.size(); ++j)
    SHARD_MPI_CHECK(MPI_Isend(sends[out[j].piece].data + out[j].offset * elem,
                              static_cast<int>(out[j].count), type, peer, 0,
                              comm, &sendRequests[j]));
  for (size_t j = 0; j < in.size(); ++j) {
    if (llvm::Error err = complete(recvRequests[j % window], op))
      return err;
    if (llvm::Error err =
            received(in[j].piece, in[j].offset, in[j].count, landing(j)))
      return err;
    if (bounced && j + window < in.size())
      if (llvm::Error err = post(j + window))
        return err;
  }
  return complete(llvm::MutableArrayRef<MPI_Request>(sendRequests, out.size()),
                  op);
}

/// exchange()'s `received` for segments that need nothing more once landed.
static llvm::Error landed(size_t, int64_t, int64_t, const char *) {
  return llvm::Error::success();
}

llvm::Error MpiCommunicator::pairAllGather(const Op &op) {
  const int size = op.group->size, rank = op.group->rank;
  const int64_t count = op.count;
  const int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  char *out = static_cast<char *>(op.out);
  if (op.in != out + rank * count * elem)
    std::memcpy(out + rank * count * elem, op.in,
                static_cast<size_t>(count * elem));
  // Recursive doubling: after the step with mask m this rank holds the 2m
  // blocks from (rank & ~(2m - 1)), which its partner helped fill.
  for (int m = 1; m < size; m *= 2) {
    int64_t mine = rank & ~(m - 1), theirs = mine ^ m;
    Piece send{out + mine * count * elem, m * count};
    Piece recv{out + theirs * count * elem, m * count};
    if (llvm::Error err = exchange(op, rank ^ m, send, recv, false, landed))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error MpiCommunicator::pairReduceScatter(const Op &op) {
  const int size = op.group->size, rank = op.group->rank;
  const int64_t count = op.count;
  const int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  const char *in = static_cast<const char *>(op.in);
  char *out = static_cast<char *>(op.out);
  // Recursive halving along the tree (file comment): before the step with
  // mask m this rank holds sums for the blocks b whose bits below m are its
  // own; it hands the partner (rank ^ m) those whose bit m differs, and adds
  // the partner's part of the rest. After the first step block b's sum is at
  // work + (b >> 1) * count; the last step leaves block `rank` in `out`.
  std::unique_ptr<char[]> work;
  if (size > 2) {
    llvm::Expected<std::unique_ptr<char[]>> scratch =
        allocScratch(size / 2 * count * elem);
    if (!scratch)
      return scratch.takeError();
    work = std::move(*scratch);
  }
  auto block = [&](bool first, int64_t b) -> char * {
    return first ? const_cast<char *>(in) + b * count * elem
                 : work.get() + (b >> 1) * count * elem;
  };
  std::vector<Piece> sends, recvs;
  for (int m = 1; m < size; m *= 2) {
    bool first = m == 1, last = 2 * m == size;
    sends.clear();
    recvs.clear();
    for (int64_t b = rank & (m - 1); b < size; b += m) {
      if ((b & m) != (rank & m))
        sends.push_back({block(first, b), count});
      else
        recvs.push_back({last    ? out
                         : first ? block(false, b)
                                 : nullptr,
                         count});
    }
    // The block that piece i of `recvs` sums.
    auto kept = [&](size_t i) {
      return (rank & (2 * m - 1)) + static_cast<int64_t>(i) * 2 * m;
    };
    llvm::Error err =
        exchange(op, rank ^ m, sends, recvs, !first && !last,
                 [&](size_t i, int64_t off, int64_t n, const char *data) {
                   char *mine = block(first, kept(i)) + off * elem;
                   // Into place (work or out): add this rank's part to it.
                   if (first || last)
                     return reduceLocal(op, mine, const_cast<char *>(data), n);
                   return reduceLocal(op, data, mine, n);
                 });
    if (err) {
      // Receives may still be posted into `work`: leave it to them.
      (void)work.release();
      return err;
    }
  }
  return llvm::Error::success();
}

llvm::Error MpiCommunicator::pairAllReduce(const Op &op) {
  const int size = op.group->size, rank = op.group->rank;
  const int64_t count = op.count;
  const int64_t elem = static_cast<int64_t>(dtypeSize(op.dtype));
  const char *in = static_cast<const char *>(op.in);
  char *out = static_cast<char *>(op.out);
  // Block b of the buffer starts at element b * count / size.
  auto at = [&](int64_t b) { return b * count / size; };
  auto piece = [&](const char *base, int64_t b, int64_t blocks) {
    return Piece{base + at(b) * elem, at(b + blocks) - at(b)};
  };
  // Recursive halving along the tree of pairReduceScatter, over contiguous
  // halves: the step with mask m keeps the lower or upper half of this
  // rank's blocks by bit m of its rank and adds the partner's part of it.
  // The first step reads `in` and writes its half of `out`.
  struct Halves {
    int64_t mine, theirs, blocks;
  };
  std::vector<Halves> steps;
  int64_t lo = 0;
  for (int m = 1; m < size; m *= 2) {
    int64_t half = size / (2 * m);
    Halves h{rank & m ? lo + half : lo, rank & m ? lo : lo + half, half};
    steps.push_back(h);
    bool fromIn = m == 1 && in != out;
    char *dst = out + at(h.mine) * elem;
    const char *mineIn = in + at(h.mine) * elem;
    if (llvm::Error err =
            exchange(op, rank ^ m, piece(fromIn ? in : out, h.theirs, half),
                     piece(out, h.mine, half), !fromIn,
                     [&](size_t, int64_t off, int64_t n, const char *data) {
                       if (fromIn)
                         return reduceLocal(op, mineIn + off * elem,
                                            dst + off * elem, n);
                       return reduceLocal(op, data, dst + off * elem, n);
                     }))
      return err;
    lo = h.mine;
  }
  // Recursive doubling, the same steps backwards, hands every rank the
  // other blocks.
  for (size_t k = steps.size(); k-- > 0;) {
    const Halves &h = steps[k];
    if (llvm::Error err =
            exchange(op, rank ^ (1 << k), piece(out, h.mine, h.blocks),
                     piece(out, h.theirs, h.blocks), false, landed))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error MpiCommunicator::splitComm(const Op &op) {
  // Blocking, and so not watched: every rank calls split() at the same
  // point, before the collectives of a step.
  Group &g = *op.made;
  // A failure leaves g.comm to the shutdown, which frees every group's.
  SHARD_MPI_CHECK(MPI_Comm_split(op.group->comm, op.color, op.key, &g.comm));
  MPI_Group mine = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
  llvm::Error err = [&]() -> llvm::Error {
    SHARD_MPI_CHECK(MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN));
    SHARD_MPI_CHECK(MPI_Comm_rank(g.comm, &g.rank));
    SHARD_MPI_CHECK(MPI_Comm_size(g.comm, &g.size));
    // The members' ranks in the whole communicator, for the watchdog.
    SHARD_MPI_CHECK(MPI_Comm_group(g.comm, &mine));
    SHARD_MPI_CHECK(MPI_Comm_group(comm, &all));
    std::vector<int> local(g.size);
    for (int r = 0; r < g.size; ++r)
      local[r] = r;
    g.members.assign(g.size, 0);
    SHARD_MPI_CHECK(MPI_Group_translate_ranks(mine, g.size, local.data(), all,
                                              g.members.data()));
    return llvm::Error::success();
  }();
  if (mine != MPI_GROUP_NULL)
    MPI_Group_free(&mine);
  if (all != MPI_GROUP_NULL)
    MPI_Group_free(&all);
  return err;
}

} // namespace

llvm::Expected<std::unique_ptr<Communicator>>
createMpiCommunicator(const MpiCommunicatorOptions &options) {
  if (options.maxChunkBytes <= 0)
    return commError(llvm::formatv("maxChunkBytes must be positive, got {0}",
                                   options.maxChunkBytes)
                         .str());
  if (!(options.collectiveTimeoutSeconds >= 0) ||
      !std::isfinite(options.collectiveTimeoutSeconds))
    return commError(
        llvm::formatv("the collective timeout must be a number of seconds "
                      ">= 0 (0 disables it), got {0}",
                      options.collectiveTimeoutSeconds)
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
