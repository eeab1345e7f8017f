//===- FuzzPlan.cpp - libFuzzer target: the plan reader -------------------===//
//
// Input: the bytes of a plan.pb. A plan on disk is covered by its manifest's
// SHA-256 sums, so a random corruption never gets past the checksum; this
// target fuzzes what stands behind it, for a plan whose manifest was
// resealed (by a tool, or by hand): protobuf parsing, validatePlan, and
// everything that trusts a validated plan before and during the first step:
// the memory plan, the digest ranks compare, Executor::create (allocation,
// kernel and collective resolution) and, for a one-rank plan, one run() of
// the CPU kernels with zero-filled parameters and inputs. A plan for N > 1
// ranks is set up as rank 0 of N against a communicator that only answers
// rank() and worldSize() (create() asks nothing else); it is not run, since
// a run of N ranks needs N processes. Parameter bytes are
// synthesized (zeros), since their checksums are loadPlan's business. The
// same bytes also go through the manifest parser.
//
// Any of these may refuse the input with an error; none may crash, read
// out of bounds or hang. With SHARD_FUZZ_VERBOSE set, the target prints how
// far each input got and why it was refused (to see what seeds reach).
//
//===----------------------------------------------------------------------===//

#include "plan/MemoryPlan.h"
#include "plan/PlanIO.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cpu/Kernels.h"

#include "google/protobuf/stubs/common.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace shardc;

namespace {

/// Plans whose buffers need more than this are validated but not executed:
/// the fuzzer's memory limit is for finding leaks, not for large plans.
constexpr uint64_t kMaxRunBytes = uint64_t(32) << 20;
/// And plans with more ops than this: one input must stay fast.
constexpr int kMaxRunOps = 4096;

std::vector<llvm::StringRef> knownOpTypes() {
  std::vector<llvm::StringRef> types;
  for (const auto &entry : rt::cpu::kernelTable())
    types.push_back(entry.first);
  for (llvm::StringRef type : rt::Executor::collectiveOpTypes())
    types.push_back(type);
  return types;
}

/// Rank 0 of `world` ranks for Executor::create; starts no collective.
class SetupOnlyCommunicator final : public rt::Communicator {
public:
  explicit SetupOnlyCommunicator(int world) : world(world) {}
  int rank() const override { return 0; }
  int worldSize() const override { return world; }
  llvm::StringRef name() const override { return "setup-only"; }
  llvm::Expected<rt::CollectiveHandle> allGatherStart(const void *, void *,
                                                      int64_t, rt::DType,
                                                      rt::Event *) override {
    return notRun();
  }
  llvm::Expected<rt::CollectiveHandle>
  reduceScatterStart(const void *, void *, int64_t, rt::DType, rt::ReduceOp,
                     rt::Event *) override {
    return notRun();
  }
  llvm::Expected<rt::CollectiveHandle> allReduceStart(const void *, void *,
                                                      int64_t, rt::DType,
                                                      rt::ReduceOp,
                                                      rt::Event *) override {
    return notRun();
  }
  llvm::Error wait(rt::CollectiveHandle, rt::Stream *) override {
    return notRun();
  }
  llvm::Error barrier() override { return notRun(); }
  [[noreturn]] void abort(int) override { std::abort(); }
  llvm::Error asyncError() override { return llvm::Error::success(); }

private:
  static llvm::Error notRun() {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the fuzzer runs no collectives");
  }
  int world;
};

/// Plans for more ranks than this are validated but not set up.
constexpr int64_t kMaxSetupWorld = 1024;

/// Drops `err`, printing it with SHARD_FUZZ_VERBOSE.
void drop(llvm::Error err, const char *stage) {
  static const bool verbose = std::getenv("SHARD_FUZZ_VERBOSE") != nullptr;
  std::string text = llvm::toString(std::move(err));
  if (verbose)
    std::fprintf(stderr, "fuzz-plan: refused by %s: %s\n", stage, text.c_str());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::vector<llvm::StringRef> known = knownOpTypes();

  // The manifest parser sees the same bytes as text.
  if (llvm::Expected<plan::Manifest> m = plan::parseManifest(
          llvm::StringRef(reinterpret_cast<const char *>(data), size)))
    (void)m->find(plan::kPlanFile);
  else
    llvm::consumeError(m.takeError());

  plan::LoadedPlan loaded;
  loaded.dir = "fuzz-plan";
  {
#if GOOGLE_PROTOBUF_VERSION < 4022000
    google::protobuf::LogSilencer silence;
#endif
    if (size > static_cast<size_t>(INT32_MAX) ||
        !loaded.plan.ParseFromArray(data, static_cast<int>(size)))
      return 0;
  }
  if (llvm::Error err = plan::validatePlan(loaded.plan, known)) {
    drop(std::move(err), "validatePlan");
    return 0;
  }
  (void)plan::describeHyperParameters(loaded.plan);
  (void)plan::planMemory(loaded.plan);

  uint64_t total = 0;
  for (const plan::Buffer &b : loaded.plan.buffers()) {
    uint64_t bytes =
        static_cast<uint64_t>(rt::numElements(llvm::SmallVector<int64_t, 6>(
            b.shape().begin(), b.shape().end()))) *
        rt::dtypeSize(plan::toRuntime(b.dtype()));
    total += bytes;
    if (total > kMaxRunBytes)
      return 0;
  }
  loaded.bytes.resize(loaded.plan.buffers_size());
  for (int i = 0; i < loaded.plan.buffers_size(); ++i) {
    const plan::Buffer &b = loaded.plan.buffers(i);
    if (b.kind() == plan::PARAMETER || b.kind() == plan::CONSTANT)
      loaded.bytes[i].assign(
          static_cast<size_t>(rt::numElements(llvm::SmallVector<int64_t, 6>(
              b.shape().begin(), b.shape().end()))) *
              rt::dtypeSize(plan::toRuntime(b.dtype())),
          0);
  }
  (void)plan::digestPlan(loaded);
  if (loaded.plan.ops_size() > kMaxRunOps)
    return 0;

  int64_t world = loaded.plan.world_size() > 1 ? loaded.plan.world_size() : 1;
  if (world > kMaxSetupWorld)
    return 0;
  std::unique_ptr<rt::KernelBackend> backend = rt::createCpuBackend();
  std::unique_ptr<rt::Communicator> comm;
  if (world > 1)
    comm = std::make_unique<SetupOnlyCommunicator>(static_cast<int>(world));
  llvm::Expected<std::unique_ptr<rt::Executor>> exec =
      rt::Executor::create(loaded, *backend, comm.get());
  if (!exec) {
    drop(exec.takeError(), "Executor::create");
    return 0;
  }
  if (comm)
    return 0;
  for (size_t i = 0; i < (*exec)->numInputs(); ++i) {
    const rt::ValueInfo &info = (*exec)->inputInfo(i);
    std::vector<uint8_t> zeros(
        static_cast<size_t>(rt::numElements(info.shape)) *
        rt::dtypeSize(info.dtype));
    rt::TensorView view(info.dtype, info.shape,
                        zeros.empty() ? nullptr : zeros.data());
    if (llvm::Error err = (*exec)->setInput(i, view)) {
      drop(std::move(err), "Executor::setInput");
      return 0;
    }
  }
  if (llvm::Error err = (*exec)->run())
    drop(std::move(err), "Executor::run");
  else if (std::getenv("SHARD_FUZZ_VERBOSE"))
    std::fprintf(stderr, "fuzz-plan: ran %d ops\n", loaded.plan.ops_size());
  return 0;
}
