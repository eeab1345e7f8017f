//===- ExecutorCollectiveTest.cpp - Collective steps and streams ----------===//
//
// How the executor orders collectives against its compute stream, checked
// with a backend and a communicator that log every call (one rank: real
// distributed runs are covered by test/unit/comm and test/lit/distributed),
// and the checks create() makes on a plan's collective ops.
//
//===----------------------------------------------------------------------===//
#include "runtime/Executor.h"
#include "runtime/cpu/Kernels.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace shardc;
using namespace shardc::rt;

namespace {

std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}
template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}

llvm::Error failure(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

//===----------------------------------------------------------------------===//
// A backend and a communicator that log what the executor asks of them
//===----------------------------------------------------------------------===//

using Log = std::vector<std::string>;

class LoggingStream : public Stream {
public:
  explicit LoggingStream(Log &log) : log(log) {}
  llvm::Error synchronize() override {
    log.push_back("synchronize stream");
    return llvm::Error::success();
  }

private:
  Log &log;
};

class LoggingEvent : public Event {
public:
  LoggingEvent(Log &log, int id) : log(log), id(id) {}
  llvm::Error record(Stream &stream) override {
    log.push_back("record e" + std::to_string(id));
    recordedOn = &stream;
    ++records;
    return llvm::Error::success();
  }
  llvm::Error wait(Stream &) override {
    log.push_back("stream waits for e" + std::to_string(id));
    return llvm::Error::success();
  }
  llvm::Error synchronize() override {
    log.push_back("synchronize e" + std::to_string(id));
    return llvm::Error::success();
  }

  Log &log;
  const int id;
  Stream *recordedOn = nullptr;
  int records = 0;
};

/// Host memory and the CPU kernels, with every stream, event and launch
/// logged.
class LoggingBackend : public KernelBackend {
public:
  explicit LoggingBackend(Log &log) : log(log) {
    for (const auto &[type, fn] : cpu::kernelTable())
      registerKernel(type, fn);
  }
  llvm::StringRef name() const override { return "logging"; }
  llvm::Expected<void *> allocate(size_t bytes) override {
    return std::malloc(bytes ? bytes : 1);
  }
  void deallocate(void *ptr) override { std::free(ptr); }
  std::unique_ptr<Stream> createStream() override {
    auto stream = std::make_unique<LoggingStream>(log);
    computeStream = stream.get();
    return stream;
  }
  std::unique_ptr<Event> createEvent() override {
    auto event = std::make_unique<LoggingEvent>(log, ++eventsCreated);
    return event;
  }
  llvm::Error launch(KernelFn kernel, const KernelContext &ctx,
                     Stream &stream) override {
    log.push_back("launch " + ctx.opName.str());
    if (&stream != computeStream)
      return ctx.error("launched on a stream other than the compute stream");
    if (kernel != lookup(ctx.opType))
      return ctx.error("launched with another op type's kernel");
    return kernel(ctx);
  }

  Log &log;
  /// The stream created last: the executor's compute stream.
  Stream *computeStream = nullptr;
  int eventsCreated = 0;
};

/// One rank whose collectives complete only when waited for: start checks
/// and remembers the operation, wait does the copy. A step that read a
/// collective's output before its wait would see stale data.
class DeferredCommunicator : public Communicator {
public:
  DeferredCommunicator(Log &log, LoggingBackend &backend)
      : log(log), backend(backend) {}
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  llvm::StringRef name() const override { return "deferred"; }

  llvm::Expected<CollectiveHandle> allGatherStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  Event *inputReady) override {
    return start("allgather", in, out, count, dtype, inputReady);
  }
  llvm::Expected<CollectiveHandle>
  reduceScatterStart(const void *in, void *out, int64_t count, DType dtype,
                     ReduceOp, Event *inputReady) override {
    return start("reduce_scatter", in, out, count, dtype, inputReady);
  }
  llvm::Expected<CollectiveHandle> allReduceStart(const void *in, void *out,
                                                  int64_t count, DType dtype,
                                                  ReduceOp,
                                                  Event *inputReady) override {
    return start("allreduce", in, out, count, dtype, inputReady);
  }
  llvm::Error wait(CollectiveHandle handle, Stream *computeStream) override {
    log.push_back("wait h" + std::to_string(handle));
    auto it = pending.find(handle);
    if (it == pending.end())
      return failure("unknown handle");
    if (!computeStream || computeStream != backend.computeStream)
      return failure("wait without the compute stream");
    if (it->second.in != it->second.out)
      std::memcpy(it->second.out, it->second.in, it->second.bytes);
    pending.erase(it);
    return llvm::Error::success();
  }
  llvm::Error barrier() override { return llvm::Error::success(); }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
  llvm::Error asyncError() override { return llvm::Error::success(); }

  Log &log;
  LoggingBackend &backend;
  struct Op {
    const void *in;
    void *out;
    size_t bytes;
  };
  std::map<CollectiveHandle, Op> pending;
  CollectiveHandle nextHandle = 1;

private:
  llvm::Expected<CollectiveHandle> start(const std::string &kind,
                                         const void *in, void *out,
                                         int64_t count, DType dtype,
                                         Event *inputReady) {
    auto *event = static_cast<LoggingEvent *>(inputReady);
    if (!event)
      return failure(kind + " started without an input-ready event");
    if (event->records == 0 || event->recordedOn != backend.computeStream)
      return failure(kind + ": the event was not recorded on the compute "
                            "stream");
    CollectiveHandle handle = nextHandle++;
    log.push_back(kind + " after e" + std::to_string(event->id) + " -> h" +
                  std::to_string(handle));
    pending[handle] = {in, out, static_cast<size_t>(count) * dtypeSize(dtype)};
    return handle;
  }
};

//===----------------------------------------------------------------------===//
// Plans
//===----------------------------------------------------------------------===//

plan::Op *addOp(plan::Plan &p, const char *type, const char *name,
                std::initializer_list<int32_t> inputs,
                std::initializer_list<int32_t> outputs) {
  plan::Op *op = p.add_ops();
  op->set_type(type);
  op->set_name(name);
  for (int32_t i : inputs)
    op->add_inputs(i);
  for (int32_t o : outputs)
    op->add_outputs(o);
  return op;
}

plan::LoadedPlan loaded(plan::PlanWriter &w) {
  plan::LoadedPlan lp;
  lp.dir = "<memory>";
  lp.plan = w.plan();
  lp.bytes.resize(lp.plan.buffers_size());
  return lp;
}

/// x (INPUT f32 [4]); a = Relu(x); s = Start(a); n = Neg(x); Wait(s);
/// out = Add(s, n). The Neg runs while the collective is in flight.
plan::LoadedPlan overlapPlan(const char *startType) {
  plan::PlanWriter w;
  int32_t x = w.addBuffer("x", DType::F32, {4}, plan::INPUT);
  int32_t a = w.addBuffer("a", DType::F32, {4}, plan::TEMP);
  int32_t s = w.addBuffer("s", DType::F32, {4}, plan::TEMP);
  int32_t n = w.addBuffer("n", DType::F32, {4}, plan::TEMP);
  int32_t out = w.addBuffer("out", DType::F32, {4}, plan::TEMP);
  plan::Plan &p = w.plan();
  addOp(p, "Relu", "produce", {x}, {a});
  addOp(p, startType, "start", {a}, {s});
  addOp(p, "Neg", "overlap", {x}, {n});
  addOp(p, "CollectiveWait", "wait", {s}, {s});
  addOp(p, "Add", "consume", {s, n}, {out});
  p.add_inputs(x);
  p.add_outputs(out);
  return loaded(w);
}

TEST(ExecutorCollectiveTest, StartAfterRecordedEventWaitBeforeConsumer) {
  Log log;
  LoggingBackend backend(log);
  DeferredCommunicator comm(log, backend);
  for (const char *type :
       {"AllReduceStart", "AllGatherStart", "ReduceScatterStart"}) {
    SCOPED_TRACE(type);
    log.clear();
    plan::LoadedPlan lp = overlapPlan(type);
    auto exec = Executor::create(lp, backend, &comm);
    ASSERT_EQ(errorText(exec), "");
    Executor &e = **exec;
    std::vector<float> x = {1, -2, 3, -4};
    ASSERT_EQ(errorText(e.setInput("x", TensorView(DType::F32, {4}, x.data()))),
              "");
    e.setTracing(true);
    for (int run = 0; run < 2; ++run) {
      log.clear();
      ASSERT_EQ(errorText(e.run()), "") << "run " << run;
      // One event per start, created when the plan was loaded and recorded
      // on the compute stream right before each start.
      std::string h = "h" + std::to_string(comm.nextHandle - 1);
      std::string kind = llvm::StringRef(type) == "AllReduceStart" ? "allreduce"
                         : llvm::StringRef(type) == "AllGatherStart"
                             ? "allgather"
                             : "reduce_scatter";
      int event = backend.eventsCreated;
      EXPECT_EQ(log,
                (Log{"launch produce", "record e" + std::to_string(event),
                     kind + " after e" + std::to_string(event) + " -> " + h,
                     "launch overlap", "wait " + h, "launch consume",
                     "synchronize stream"}));
      // The consumer saw the collective's result: relu(x) + (-x).
      const float *got = e.output(0).as<float>();
      EXPECT_EQ(std::vector<float>(got, got + 4),
                (std::vector<float>{0, 2, 0, 4}));
    }
    EXPECT_TRUE(comm.pending.empty());
    std::vector<std::string> categories;
    for (const TraceEvent &t : e.traceEvents())
      categories.push_back(t.category);
    ASSERT_EQ(categories.size(), 10u);
    EXPECT_EQ(
        std::vector<std::string>(categories.begin(), categories.begin() + 5),
        (std::vector<std::string>{"kernel", "collective-start", "kernel",
                                  "collective-wait", "kernel"}));
    EXPECT_EQ(e.traceEvents()[1].name, std::string(type) + " 'start'");
  }
}

TEST(ExecutorCollectiveTest, ProfilesCollectiveSteps) {
  Log log;
  LoggingBackend backend(log);
  DeferredCommunicator comm(log, backend);
  plan::LoadedPlan lp = overlapPlan("AllReduceStart");
  auto exec = Executor::create(lp, backend, &comm);
  ASSERT_EQ(errorText(exec), "");
  Executor &e = **exec;
  std::vector<float> x(4, 1.0f);
  ASSERT_EQ(errorText(e.setInput("x", TensorView(DType::F32, {4}, x.data()))),
            "");
  e.setProfiling(true);
  ASSERT_EQ(errorText(e.run()), "");
  ASSERT_EQ(e.profile().size(), 5u);
  EXPECT_EQ(e.profile()[1].type, "AllReduceStart");
  EXPECT_EQ(e.profile()[3].name, "wait");
  for (const OpProfile &p : e.profile())
    EXPECT_EQ(p.calls, 1u) << p.name;
}

TEST(ExecutorCollectiveTest, RunsCollectivesOnTheCpuBackendAndOneRank) {
  // The CPU backend's events and the self communicator: collectives over
  // one rank are copies.
  auto backend = createCpuBackend();
  for (const char *type :
       {"AllReduceStart", "AllGatherStart", "ReduceScatterStart"}) {
    SCOPED_TRACE(type);
    plan::LoadedPlan lp = overlapPlan(type);
    auto exec = Executor::create(lp, *backend);
    ASSERT_EQ(errorText(exec), "");
    std::vector<float> x = {-1, 5, 0.5f, -0.25f};
    ASSERT_EQ(errorText((*exec)->setInput(
                  "x", TensorView(DType::F32, {4}, x.data()))),
              "");
    ASSERT_EQ(errorText((*exec)->run()), "");
    const float *got = (*exec)->output(0).as<float>();
    EXPECT_EQ(std::vector<float>(got, got + 4),
              (std::vector<float>{1, 0, 0, 0.25f}));
  }
}

//===----------------------------------------------------------------------===//
// Checks when the plan is loaded
//===----------------------------------------------------------------------===//

std::string createError(const plan::LoadedPlan &lp) {
  auto backend = createCpuBackend();
  auto exec = Executor::create(lp, *backend);
  return errorText(exec);
}

TEST(ExecutorCollectiveTest, RejectsWaitWithoutStart) {
  plan::PlanWriter w;
  int32_t x = w.addBuffer("x", DType::F32, {4}, plan::INPUT);
  int32_t a = w.addBuffer("a", DType::F32, {4}, plan::TEMP);
  addOp(w.plan(), "Relu", "r", {x}, {a});
  addOp(w.plan(), "CollectiveWait", "w", {a}, {a});
  w.plan().add_inputs(x);
  w.plan().add_outputs(a);
  std::string msg = createError(loaded(w));
  EXPECT_NE(msg.find("op 1 (CollectiveWait 'w'): waits on 'a', which no "
                     "collective in flight writes"),
            std::string::npos)
      << msg;
}

TEST(ExecutorCollectiveTest, RejectsStartNeverWaitedFor) {
  plan::LoadedPlan lp = overlapPlan("AllReduceStart");
  lp.plan.mutable_ops(3)->set_type("Identity");
  std::string msg = createError(lp);
  EXPECT_NE(msg.find("op 1 (AllReduceStart 'start'): the collective it starts "
                     "is never waited for"),
            std::string::npos)
      << msg;
}

TEST(ExecutorCollectiveTest, RejectsSecondStartIntoABufferInFlight) {
  plan::LoadedPlan lp = overlapPlan("AllReduceStart");
  // Op 2 (Neg x -> n) becomes a second start into s.
  plan::Op *op = lp.plan.mutable_ops(2);
  op->set_type("AllReduceStart");
  op->set_outputs(0, lp.plan.ops(1).outputs(0));
  lp.plan.mutable_ops(4)->set_inputs(1, lp.plan.ops(2).inputs(0));
  std::string msg = createError(lp);
  EXPECT_NE(msg.find("op 2 (AllReduceStart 'overlap'): starts a collective "
                     "into 's' while op 1 (AllReduceStart 'start') is still "
                     "in flight"),
            std::string::npos)
      << msg;
}

TEST(ExecutorCollectiveTest, RejectsOperandsThatDoNotFitTheCollective) {
  plan::PlanWriter w;
  int32_t x = w.addBuffer("x", DType::F32, {4}, plan::INPUT);
  int32_t g = w.addBuffer("g", DType::F32, {8}, plan::TEMP);
  addOp(w.plan(), "AllGatherStart", "ag", {x}, {g});
  addOp(w.plan(), "CollectiveWait", "w", {g}, {g});
  w.plan().add_inputs(x);
  w.plan().add_outputs(g);
  std::string msg = createError(loaded(w));
  EXPECT_NE(msg.find("op 0 (AllGatherStart 'ag'): input of 4 and output of 8 "
                     "elements do not fit on 1 rank(s)"),
            std::string::npos)
      << msg;

  plan::LoadedPlan lp = overlapPlan("AllReduceStart");
  lp.plan.mutable_buffers(lp.plan.ops(1).outputs(0))->set_dtype(plan::INT64);
  msg = createError(lp);
  EXPECT_NE(msg.find("op 1 (AllReduceStart 'start'): input is float32 but "
                     "output is int64"),
            std::string::npos)
      << msg;

  lp = overlapPlan("AllReduceStart");
  lp.plan.mutable_ops(1)->add_inputs(lp.plan.ops(0).inputs(0));
  msg = createError(lp);
  EXPECT_NE(msg.find("op 1 (AllReduceStart 'start'): expects one input "
                     "buffer, got 2"),
            std::string::npos)
      << msg;
}

} // namespace
