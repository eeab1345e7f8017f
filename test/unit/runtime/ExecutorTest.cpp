//===- ExecutorTest.cpp - Running small plans on the CPU backend ----------===//
#include "runtime/Executor.h"
#include "runtime/comm/Progress.h"
#include "runtime/cpu/Kernels.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstring>

using namespace shardc;
using namespace shardc::rt;
using plan::Attribute;
using plan::Op;

namespace {

template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}
std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  const uint8_t *p = reinterpret_cast<const uint8_t *>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(T));
}

void addFloatAttr(Op *op, const char *name, double v) {
  Attribute *a = op->add_attributes();
  a->set_name(name);
  a->set_f(v);
}
void addIntAttr(Op *op, const char *name, int64_t v) {
  Attribute *a = op->add_attributes();
  a->set_name(name);
  a->set_i(v);
}

const std::vector<float> kW = {1, -1, 0.5f, 2, 1, -3}; // [2, 3]
const std::vector<float> kB = {0.25f, 0, -1};          // [3]
const std::vector<float> kC = {10, 20, 30};            // [3]

/// x (INPUT f32 [2,2]); y = Gemm(x, w, b); z = Relu(y); out = Add(z, c).
/// Outputs: out, y.
void buildMlp(plan::PlanWriter &w) {
  int32_t x = w.addBuffer("x", DType::F32, {2, 2}, plan::INPUT);
  int32_t wt = cantFail(
      w.addDataBuffer("w", DType::F32, {2, 3}, plan::PARAMETER, bytesOf(kW)));
  int32_t b = cantFail(
      w.addDataBuffer("b", DType::F32, {3}, plan::PARAMETER, bytesOf(kB)));
  int32_t c = cantFail(
      w.addDataBuffer("c", DType::F32, {3}, plan::CONSTANT, bytesOf(kC)));
  int32_t y = w.addBuffer("y", DType::F32, {2, 3}, plan::TEMP);
  int32_t z = w.addBuffer("z", DType::F32, {2, 3}, plan::TEMP);
  int32_t out = w.addBuffer("out", DType::F32, {2, 3}, plan::TEMP);
  plan::Plan &p = w.plan();
  Op *gemm = p.add_ops();
  gemm->set_type("Gemm");
  gemm->set_name("fc");
  gemm->add_inputs(x);
  gemm->add_inputs(wt);
  gemm->add_inputs(b);
  gemm->add_outputs(y);
  addFloatAttr(gemm, "alpha", 1.0);
  addFloatAttr(gemm, "beta", 1.0);
  addIntAttr(gemm, "transA", 0);
  addIntAttr(gemm, "transB", 0);
  Op *relu = p.add_ops();
  relu->set_type("Relu");
  relu->set_name("act");
  relu->add_inputs(y);
  relu->add_outputs(z);
  Op *add = p.add_ops();
  add->set_type("Add");
  add->set_name("shift");
  add->add_inputs(z);
  add->add_inputs(c);
  add->add_outputs(out);
  p.add_inputs(x);
  p.add_outputs(out);
  p.add_outputs(y);
}

/// The plan of `w` as loadPlan would return it, without touching disk.
plan::LoadedPlan inMemory(plan::PlanWriter &w,
                          const std::vector<std::vector<uint8_t>> &data) {
  plan::LoadedPlan lp;
  lp.dir = "<memory>";
  lp.plan = w.plan();
  lp.bytes.resize(lp.plan.buffers_size());
  size_t next = 0;
  for (int i = 0; i < lp.plan.buffers_size(); ++i) {
    auto kind = lp.plan.buffers(i).kind();
    if (kind == plan::PARAMETER || kind == plan::CONSTANT)
      lp.bytes[i] = data[next++];
  }
  return lp;
}

plan::LoadedPlan mlpPlan() {
  plan::PlanWriter w;
  buildMlp(w);
  return inMemory(w, {bytesOf(kW), bytesOf(kB), bytesOf(kC)});
}

/// Reference: y = x·W + b, out = relu(y) + c.
void reference(const std::vector<float> &x, std::vector<float> &y,
               std::vector<float> &out) {
  y.assign(6, 0);
  out.assign(6, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float s = kB[j];
      for (int k = 0; k < 2; ++k)
        s += x[i * 2 + k] * kW[k * 3 + j];
      y[i * 3 + j] = s;
      out[i * 3 + j] = std::max(s, 0.0f) + kC[j];
    }
}

std::vector<float> toVector(const TensorView &t) {
  const float *p = t.as<float>();
  return std::vector<float>(p, p + t.numel());
}

TEST(ExecutorTest, CpuKernelTableHasTheOpsUsedHere) {
  for (llvm::StringRef type : {"Gemm", "Relu", "Add"})
    EXPECT_TRUE(llvm::any_of(cpu::kernelTable(), [&](const auto &entry) {
      return entry.first == type;
    })) << type.str();
}

// The CPU backend aligns small allocations for vector loads and large ones
// (the arena) to 2 MiB, so that the huge pages it asks for cover them from
// their first byte (runtime/Backend.cpp); every byte asked for is usable.
TEST(ExecutorTest, CpuAllocationsAreAlignedForVectorsAndHugePages) {
  auto backend = createCpuBackend();
  for (size_t bytes :
       {size_t(1), size_t(100), size_t(4) << 20, (size_t(9) << 20) + 3}) {
    llvm::Expected<void *> p = backend->allocate(bytes);
    ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
    auto address = reinterpret_cast<uintptr_t>(*p);
    EXPECT_EQ(address % 64, 0u) << bytes;
    if (bytes >= (size_t(4) << 20)) {
      EXPECT_EQ(address % (size_t(2) << 20), 0u) << bytes;
    }
    std::memset(*p, 0x5a, bytes);
    EXPECT_EQ(static_cast<unsigned char *>(*p)[bytes - 1], 0x5a);
    backend->deallocate(*p);
  }
}

TEST(ExecutorTest, RunsGemmReluAdd) {
  auto backend = createCpuBackend();
  plan::LoadedPlan lp = mlpPlan();
  auto exec = Executor::create(lp, *backend);
  ASSERT_EQ(errorText(exec), "");
  Executor &e = **exec;

  ASSERT_EQ(e.numInputs(), 1u);
  EXPECT_EQ(e.inputInfo(0).name, "x");
  EXPECT_EQ(e.inputInfo(0).typeString(), "float32 [2, 2]");
  ASSERT_EQ(e.numOutputs(), 2u);
  EXPECT_EQ(e.outputInfo(0).name, "out");
  EXPECT_EQ(e.outputInfo(1).name, "y");
  EXPECT_EQ(e.findInput("x"), std::optional<size_t>(0));
  EXPECT_EQ(e.findInput("y"), std::nullopt);

  std::vector<float> x = {1, 2, -3, 0.5f};
  ASSERT_EQ(
      errorText(e.setInput("x", TensorView(DType::F32, {2, 2}, x.data()))), "");
  ASSERT_EQ(errorText(e.run()), "");

  std::vector<float> y, out;
  reference(x, y, out);
  TensorView outView = e.output(0);
  EXPECT_EQ(outView.dtype, DType::F32);
  EXPECT_EQ(llvm::ArrayRef<int64_t>(outView.shape),
            llvm::ArrayRef<int64_t>({2, 3}));
  std::vector<float> gotOut = toVector(outView), gotY = toVector(e.output(1));
  for (int i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(gotY[i], y[i]) << i;
    EXPECT_FLOAT_EQ(gotOut[i], out[i]) << i;
  }

  // Inputs persist; a second run with a new input gives new results.
  x = {-1, 0, 0, 4};
  ASSERT_EQ(errorText(e.setInput(size_t(0),
                                 TensorView(DType::F32, {2, 2}, x.data()))),
            "");
  ASSERT_EQ(errorText(e.run()), "");
  reference(x, y, out);
  gotOut = toVector(e.output(0));
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(gotOut[i], out[i]) << i;
}

TEST(ExecutorTest, RunsPlanLoadedFromDisk) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("shard-exec-test", dir));
  plan::PlanWriter w;
  buildMlp(w);
  ASSERT_EQ(errorText(w.write(dir)), "");
  auto loaded = plan::loadPlan(dir, {"Gemm", "Relu", "Add"});
  ASSERT_EQ(errorText(loaded), "");
  auto backend = createCpuBackend();
  auto exec = Executor::create(**loaded, *backend);
  ASSERT_EQ(errorText(exec), "");
  // The executor keeps its own copy of the parameters.
  loaded->reset();
  std::vector<float> x = {0.5f, -0.5f, 2, 1};
  ASSERT_EQ(errorText((*exec)->setInput(
                "x", TensorView(DType::F32, {2, 2}, x.data()))),
            "");
  ASSERT_EQ(errorText((*exec)->run()), "");
  std::vector<float> y, out;
  reference(x, y, out);
  std::vector<float> got = toVector((*exec)->output(0));
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(got[i], out[i]) << i;
  llvm::sys::fs::remove_directories(dir);
}

TEST(ExecutorTest, OutputMayBeAParameter) {
  plan::PlanWriter w;
  int32_t c = cantFail(
      w.addDataBuffer("c", DType::F32, {3}, plan::CONSTANT, bytesOf(kC)));
  w.plan().add_outputs(c);
  plan::LoadedPlan lp = inMemory(w, {bytesOf(kC)});
  auto backend = createCpuBackend();
  auto exec = Executor::create(lp, *backend);
  ASSERT_EQ(errorText(exec), "");
  ASSERT_EQ(errorText((*exec)->run()), "");
  EXPECT_EQ(toVector((*exec)->output(0)), kC);
}

TEST(ExecutorTest, RejectsInputDTypeMismatch) {
  auto backend = createCpuBackend();
  plan::LoadedPlan lp = mlpPlan();
  auto exec = Executor::create(lp, *backend);
  ASSERT_EQ(errorText(exec), "");
  std::vector<double> x(4, 1.0);
  std::string msg = errorText(
      (*exec)->setInput("x", TensorView(DType::F64, {2, 2}, x.data())));
  EXPECT_EQ(msg, "input 'x' expects float32 [2, 2], got float64 [2, 2]");
}

TEST(ExecutorTest, RejectsInputShapeMismatch) {
  auto backend = createCpuBackend();
  plan::LoadedPlan lp = mlpPlan();
  auto exec = Executor::create(lp, *backend);
  ASSERT_EQ(errorText(exec), "");
  std::vector<float> x(4, 1.0f);
  std::string msg =
      errorText((*exec)->setInput("x", TensorView(DType::F32, {4}, x.data())));
  EXPECT_EQ(msg, "input 'x' expects float32 [2, 2], got float32 [4]");
  msg = errorText(
      (*exec)->setInput("x", TensorView(DType::F32, {2, 2, 1}, x.data())));
  EXPECT_NE(msg.find("got float32 [2, 2, 1]"), std::string::npos) << msg;
}

TEST(ExecutorTest, RejectsUnknownInputName) {
  auto backend = createCpuBackend();
  plan::LoadedPlan lp = mlpPlan();
  auto exec = Executor::create(lp, *backend);
  ASSERT_EQ(errorText(exec), "");
  std::vector<float> x(4, 1.0f);
  std::string msg = errorText(
      (*exec)->setInput("X", TensorView(DType::F32, {2, 2}, x.data())));
  EXPECT_NE(msg.find("no input 'X'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'x' (float32 [2, 2])"), std::string::npos) << msg;
  msg = errorText(
      (*exec)->setInput(size_t(3), TensorView(DType::F32, {2, 2}, x.data())));
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

TEST(ExecutorTest, RejectsRunWithoutInputs) {
  auto backend = createCpuBackend();
  plan::LoadedPlan lp = mlpPlan();
  auto exec = Executor::create(lp, *backend);
  ASSERT_EQ(errorText(exec), "");
  EXPECT_EQ(errorText((*exec)->run()), "inputs not set: 'x' (float32 [2, 2])");
}

TEST(ExecutorTest, RejectsOpWithoutKernel) {
  plan::PlanWriter w;
  buildMlp(w);
  w.plan().mutable_ops(1)->set_type("Frobnicate");
  plan::LoadedPlan lp = inMemory(w, {bytesOf(kW), bytesOf(kB), bytesOf(kC)});
  auto backend = createCpuBackend();
  auto exec = Executor::create(lp, *backend);
  std::string msg = errorText(exec);
  EXPECT_NE(msg.find("op 1 (Frobnicate 'act')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no kernel"), std::string::npos) << msg;
}

TEST(ExecutorTest, RejectsInvalidHandBuiltPlan) {
  plan::PlanWriter w;
  buildMlp(w);
  w.plan().mutable_ops(0)->set_inputs(1, 99);
  plan::LoadedPlan lp = inMemory(w, {bytesOf(kW), bytesOf(kB), bytesOf(kC)});
  auto backend = createCpuBackend();
  auto exec = Executor::create(lp, *backend);
  std::string msg = errorText(exec);
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

TEST(ExecutorTest, RejectsMissingParameterBytes) {
  plan::PlanWriter w;
  buildMlp(w);
  plan::LoadedPlan lp = inMemory(w, {bytesOf(kW), {}, bytesOf(kC)});
  auto backend = createCpuBackend();
  auto exec = Executor::create(lp, *backend);
  std::string msg = errorText(exec);
  EXPECT_NE(msg.find("buffer 2 'b' needs 12 bytes"), std::string::npos) << msg;
}

TEST(ExecutorTest, ReportsKernelErrorsWithOpIndex) {
  // Gemm's inner dimensions disagree: a kernel error, not a crash.
  plan::PlanWriter w;
  buildMlp(w);
  w.plan().mutable_ops(0)->mutable_attributes(3)->set_i(1); // transB
  plan::LoadedPlan lp = inMemory(w, {bytesOf(kW), bytesOf(kB), bytesOf(kC)});
  auto backend = createCpuBackend();
  auto exec = Executor::create(lp, *backend);
  ASSERT_EQ(errorText(exec), "");
  std::vector<float> x(4, 1.0f);
  ASSERT_EQ(errorText((*exec)->setInput(
                "x", TensorView(DType::F32, {2, 2}, x.data()))),
            "");
  std::string msg = errorText((*exec)->run());
  EXPECT_NE(msg.find("op 0 of 3 failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Gemm 'fc'"), std::string::npos) << msg;
}

TEST(ExecutorTest, ProfilesOps) {
  auto backend = createCpuBackend();
  plan::LoadedPlan lp = mlpPlan();
  auto exec = Executor::create(lp, *backend);
  ASSERT_EQ(errorText(exec), "");
  Executor &e = **exec;
  std::vector<float> x(4, 1.0f);
  ASSERT_EQ(
      errorText(e.setInput("x", TensorView(DType::F32, {2, 2}, x.data()))), "");
  ASSERT_EQ(e.profile().size(), 3u);
  ASSERT_EQ(errorText(e.run()), "");
  EXPECT_EQ(e.profile()[0].calls, 0u) << "profiling is off by default";
  e.setProfiling(true);
  ASSERT_EQ(errorText(e.run()), "");
  ASSERT_EQ(errorText(e.run()), "");
  EXPECT_EQ(e.profile()[0].type, "Gemm");
  EXPECT_EQ(e.profile()[2].name, "shift");
  EXPECT_EQ(e.profile()[1].calls, 2u);
  EXPECT_GE(e.profile()[1].seconds, 0.0);
}

} // namespace

TEST(ExecutorTest, PublishesItsPosition) {
  // The step of the run, and "outside the plan's ops" once run() returns,
  // also after a failed op (runtime/comm/Progress.h).
  auto backend = createCpuBackend();
  plan::LoadedPlan lp = mlpPlan();
  auto exec = Executor::create(lp, *backend);
  ASSERT_EQ(errorText(exec), "");
  std::vector<float> x(4, 1.0f);
  ASSERT_EQ(errorText((*exec)->setInput(
                "x", TensorView(DType::F32, {2, 2}, x.data()))),
            "");
  progress::enterOp(7, "Before");
  (*exec)->setStep(41);
  ASSERT_EQ(errorText((*exec)->run()), "");
  EXPECT_EQ(progress::record().step.load(), 41);
  EXPECT_EQ(progress::record().op.load(), -1);
  EXPECT_EQ(progress::describe(progress::position()),
            "step 42, outside the plan's ops");

  plan::PlanWriter w;
  buildMlp(w);
  w.plan().mutable_ops(0)->mutable_attributes(3)->set_i(1); // transB
  plan::LoadedPlan bad = inMemory(w, {bytesOf(kW), bytesOf(kB), bytesOf(kC)});
  auto failing = Executor::create(bad, *backend);
  ASSERT_EQ(errorText(failing), "");
  ASSERT_EQ(errorText((*failing)->setInput(
                "x", TensorView(DType::F32, {2, 2}, x.data()))),
            "");
  (*failing)->setStep(3);
  EXPECT_NE(errorText((*failing)->run()), "");
  EXPECT_EQ(progress::record().step.load(), 3);
  EXPECT_EQ(progress::record().op.load(), -1);
}

//===----------------------------------------------------------------------===//
// The offload tier in pinned host memory (a device backend's), on a backend
// whose "device" is host memory and whose copies are memcpy: the executor's
// side of the GPU tier (tickets, waits, trace times, checkpoint reads),
// against the same plan on the file tier.
//===----------------------------------------------------------------------===//

namespace {

/// The CPU's kernels and memory, with pinned host memory as a device
/// backend has it; counts what the tier asks of it. `pinned` false and
/// `hostMemory` false: a device backend without pinned memory.
class PinnedHostBackend : public KernelBackend {
public:
  explicit PinnedHostBackend(bool pinned = true, bool hostMemory = true)
      : cpuBackend(createCpuBackend()), pinned(pinned), hostMemory(hostMemory) {
    for (const auto &[type, fn] : cpu::kernelTable())
      registerKernel(type, fn);
  }
  llvm::StringRef name() const override { return "pinned-test"; }
  llvm::Expected<void *> allocate(size_t bytes) override {
    return cpuBackend->allocate(bytes);
  }
  void deallocate(void *ptr) override { cpuBackend->deallocate(ptr); }
  std::unique_ptr<Stream> createStream() override {
    return cpuBackend->createStream();
  }
  std::unique_ptr<Event> createEvent() override {
    return cpuBackend->createEvent();
  }
  llvm::Error launch(KernelFn kernel, const KernelContext &ctx,
                     Stream &stream) override {
    return cpuBackend->launch(kernel, ctx, stream);
  }
  bool hostAccessible() const override { return hostMemory; }
  bool hasPinnedMemory() const override { return pinned; }
  llvm::Expected<void *> allocatePinned(size_t bytes) override {
    if (pinnedFails)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "cudaHostAlloc of " +
                                         std::to_string(bytes) +
                                         " bytes failed (out of memory)");
    pinnedBytes += bytes;
    return cpuBackend->allocate(bytes);
  }
  void deallocatePinned(void *ptr) override {
    ++pinnedFrees;
    cpuBackend->deallocate(ptr);
  }
  llvm::Error copyPinnedAsync(void *dst, const void *src, size_t bytes,
                              bool toDevice, Stream &) override {
    std::memcpy(dst, src, bytes);
    ++(toDevice ? reads : writes);
    return llvm::Error::success();
  }

  std::unique_ptr<KernelBackend> cpuBackend;
  bool pinned, hostMemory;
  bool pinnedFails = false;
  size_t pinnedBytes = 0;
  int pinnedFrees = 0, reads = 0, writes = 0;
};

const std::vector<float> kTierW = {1, -2, 0.5f, 4};

/// x (INPUT [4]); w (PARAMETER [4]) and s (STATE [4], starting at 3) live
/// in the tier. Each step: read both; y = x + w; n = s + w; write y back
/// into w and n into s. Output: y.
plan::LoadedPlan offloadPlan() {
  plan::PlanWriter w;
  int32_t x = w.addBuffer("x", DType::F32, {4}, plan::INPUT);
  int32_t wt = cantFail(
      w.addDataBuffer("w", DType::F32, {4}, plan::PARAMETER, bytesOf(kTierW)));
  int32_t s = w.addBuffer("s", DType::F32, {4}, plan::STATE);
  int32_t wm = w.addBuffer("w.read", DType::F32, {4}, plan::TEMP);
  int32_t sm = w.addBuffer("s.read", DType::F32, {4}, plan::TEMP);
  int32_t y = w.addBuffer("y", DType::F32, {4}, plan::TEMP);
  int32_t n = w.addBuffer("n", DType::F32, {4}, plan::TEMP);
  plan::Plan &p = w.plan();
  p.mutable_buffers(wt)->set_offloaded(true);
  p.mutable_buffers(s)->set_offloaded(true);
  p.mutable_buffers(s)->set_initial_value(3);
  auto add = [&](const char *type, std::vector<int32_t> ins,
                 std::vector<int32_t> outs) {
    Op *op = p.add_ops();
    op->set_type(type);
    op->set_name(std::string(type) + "#" + std::to_string(p.ops_size()));
    for (int32_t i : ins)
      op->add_inputs(i);
    for (int32_t o : outs)
      op->add_outputs(o);
  };
  add("OffloadReadStart", {wt}, {wm});
  add("OffloadReadStart", {s}, {sm});
  add("CollectiveWait", {wm}, {wm});
  add("CollectiveWait", {sm}, {sm});
  add("Add", {x, wm}, {y});
  add("Add", {sm, wm}, {n});
  add("OffloadWriteStart", {y}, {wt});
  add("OffloadWriteStart", {n}, {s});
  add("CollectiveWait", {wt}, {wt});
  add("CollectiveWait", {s}, {s});
  p.add_inputs(x);
  p.add_outputs(y);
  return inMemory(w, {bytesOf(kTierW)});
}

/// Runs offloadPlan() for three steps on `backend` (offload directory
/// `dir`, empty for none) with tracing on; returns y of each step and s
/// after the last, read through the executor (from the tier).
std::vector<float> runOffloadPlan(KernelBackend &backend,
                                  const std::string &dir,
                                  std::vector<TraceEvent> *trace = nullptr) {
  plan::LoadedPlan lp = offloadPlan();
  auto exec = Executor::create(lp, backend, nullptr, ExecutorOptions{dir});
  EXPECT_EQ(errorText(exec), "");
  if (!exec)
    return {};
  Executor &e = **exec;
  e.setTracing(true);
  std::vector<float> seen, x = {10, 20, 30, 40};
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(errorText(e.setInput("x", TensorView(DType::F32, {4}, x.data()))),
              "");
    EXPECT_EQ(errorText(e.run()), "");
    std::vector<float> y = toVector(e.output(0));
    seen.insert(seen.end(), y.begin(), y.end());
  }
  auto state = e.readBuffer(2);
  EXPECT_EQ(errorText(state), "");
  if (state) {
    const float *f = reinterpret_cast<const float *>(state->data());
    seen.insert(seen.end(), f, f + 4);
  }
  if (trace)
    trace->assign(e.traceEvents().begin(), e.traceEvents().end());
  return seen;
}

TEST(ExecutorTest, RunsTheOffloadTierInPinnedHostMemory) {
  // y_k = (k+1) x + w, and s gathers w_0 + w_1 + w_2 on top of 3.
  std::vector<float> expected;
  for (int k = 1; k <= 3; ++k)
    for (int i = 0; i < 4; ++i)
      expected.push_back(k * 10.0f * (i + 1) + kTierW[i]);
  for (int i = 0; i < 4; ++i)
    expected.push_back(3 + 3 * kTierW[i] + 30.0f * (i + 1));

  PinnedHostBackend pinned;
  std::vector<TraceEvent> trace;
  // No offload directory is needed: the tier is the backend's memory.
  EXPECT_EQ(runOffloadPlan(pinned, "", &trace), expected);
  // One allocation: the memory plan's tier (two aligned buffers).
  EXPECT_EQ(pinned.pinnedBytes,
            plan::planMemory(offloadPlan().plan).offloadBytes);
  EXPECT_EQ(pinned.pinnedFrees, 1);
  EXPECT_EQ(pinned.reads, 6);
  EXPECT_EQ(pinned.writes, 6);
  int reads = 0, writes = 0;
  for (const TraceEvent &ev : trace)
    if (ev.category == "offload") {
      EXPECT_GE(ev.durationUs, 0);
      reads += ev.name == "offload read 16 B";
      writes += ev.name == "offload write 16 B";
    }
  EXPECT_EQ(reads, 6);
  EXPECT_EQ(writes, 6);

  // The file tier gives the same values.
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("shard-tier-test", dir));
  auto cpuBackend = createCpuBackend();
  EXPECT_EQ(runOffloadPlan(*cpuBackend, std::string(dir)), expected);
  llvm::sys::fs::remove_directories(dir);
}

TEST(ExecutorTest, RefusesOffloadOnADeviceWithoutPinnedMemory) {
  PinnedHostBackend device(/*pinned=*/false, /*hostMemory=*/false);
  plan::LoadedPlan lp = offloadPlan();
  auto exec = Executor::create(lp, device, nullptr, ExecutorOptions{"/tmp"});
  std::string err = errorText(exec);
  EXPECT_NE(err.find("offloads buffers (shardc --offload)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("pinned-test backend cannot run"), std::string::npos)
      << err;
}

TEST(ExecutorTest, PinnedMemoryThatCannotBeHadIsAnErrorBeforeStepOne) {
  PinnedHostBackend device;
  device.pinnedFails = true;
  plan::LoadedPlan lp = offloadPlan();
  auto exec = Executor::create(lp, device);
  std::string err = errorText(exec);
  EXPECT_NE(err.find("cannot lock "), std::string::npos) << err;
  EXPECT_NE(err.find("bytes of host memory for the offload tier"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("out of memory"), std::string::npos) << err;
}

TEST(ExecutorTest, OffloadOnTheCpuNeedsADirectory) {
  auto cpuBackend = createCpuBackend();
  plan::LoadedPlan lp = offloadPlan();
  auto exec = Executor::create(lp, *cpuBackend);
  std::string err = errorText(exec);
  EXPECT_NE(err.find("give shardrun --offload-dir DIR"), std::string::npos)
      << err;
}

} // namespace
