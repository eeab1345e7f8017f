//===- ExportTest.cpp - exportModel's own checks --------------------------===//
//
// loadPlan and Executor::create reject a ZeRO-3 unit whose parameters leave
// it; exportModel, which takes the plan apart from the executor, checks
// again before it copies, so no plan can make it copy memory past the
// gathered unit into the ONNX file.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"
#include "runtime/Trainer.h"

#include "gtest/gtest.h"

#include <cstring>
#include <limits>

using namespace shardc;
using namespace shardc::rt;

namespace {

/// unit0 (PARAMETER f32 [4], one rank) holding parameter p at `offset` with
/// shape [4]; out = Relu(unit0); a training plan with a source model.
plan::LoadedPlan unitPlan(int64_t offset = 0, int64_t padded = 4) {
  plan::PlanWriter w;
  float data[4] = {1, 2, 3, 4};
  std::vector<uint8_t> bytes(sizeof data);
  std::memcpy(bytes.data(), data, sizeof data);
  int32_t u = cantFail(
      w.addDataBuffer("unit0", DType::F32, {4}, plan::PARAMETER, bytes));
  int32_t out = w.addBuffer("out", DType::F32, {4}, plan::TEMP);
  plan::Plan &p = w.plan();
  plan::Op *relu = p.add_ops();
  relu->set_type("Relu");
  relu->set_name("act");
  relu->add_inputs(u);
  relu->add_outputs(out);
  p.add_outputs(out);
  p.mutable_training()->set_source_model("model.onnx");
  plan::FlatUnit *unit = p.add_units();
  unit->set_name("unit0");
  unit->set_buffer(u);
  unit->set_padded_elements(padded);
  plan::FlatParam *param = unit->add_params();
  param->set_name("p");
  param->set_offset(offset);
  param->add_shape(4);
  plan::LoadedPlan lp;
  lp.dir = "<memory>";
  lp.plan = p;
  lp.bytes = {bytes, {}};
  return lp;
}

/// Runs exportModel with an executor of the valid plan and `plan`.
std::string exportError(const plan::LoadedPlan &plan) {
  std::unique_ptr<KernelBackend> backend = createCpuBackend();
  plan::LoadedPlan valid = unitPlan();
  valid.plan.clear_training(); // the executor needs no loss
  auto exec = Executor::create(valid, *backend);
  EXPECT_TRUE(bool(exec));
  if (!exec)
    return toString(exec.takeError());
  llvm::Error err = exportModel(**exec, plan.plan, "/nonexistent-plan-dir",
                                "/nonexistent-plan-dir/out.onnx");
  return err ? toString(std::move(err)) : std::string();
}

TEST(ExportTest, RejectsUnitParameterOutsideTheUnit) {
  for (int64_t offset : {int64_t(1), int64_t(-1), int64_t(1) << 40,
                         std::numeric_limits<int64_t>::max() - 1}) {
    std::string msg = exportError(unitPlan(offset));
    EXPECT_NE(msg.find("--export: unit 'unit0': parameter 'p' (offset " +
                       std::to_string(offset) +
                       ", shape [4]) lies outside the unit's 4 elements"),
              std::string::npos)
        << msg;
  }
}

TEST(ExportTest, RejectsUnitLargerThanItsShards) {
  std::string msg = exportError(unitPlan(0, /*padded=*/400));
  EXPECT_NE(msg.find("--export: unit 'unit0': 1 shards of 4 elements are not "
                     "its 400 padded elements"),
            std::string::npos)
      << msg;
}

TEST(ExportTest, ReadsTheSourceModelOnlyThroughTheManifest) {
  // A unit inside its bounds gets as far as the source model, which must be
  // a listed file of a plan directory.
  std::string msg = exportError(unitPlan());
  EXPECT_NE(msg.find("--export: cannot read the source model"),
            std::string::npos)
      << msg;
}

} // namespace
