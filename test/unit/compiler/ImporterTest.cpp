//===- ImporterTest.cpp - Importer data paths and plan emission -----------===//
//
// What is not IR in the compiler: initializer bytes (raw, typed fields,
// external data confined to the model directory), constant byte layouts, and
// the plan emitted from an imported model, loaded back by the runtime's
// validating loader.
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "ir/ShardcDialect.h"
#include "passes/LowerToPlan/OpDesc.h"
#include "passes/LowerToPlan/PlanEmitter.h"
#include "passes/Passes.h"
#include "plan/PlanIO.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace shardc;

namespace {

/// A fresh directory removed at the end of the test.
class TempDir {
public:
  TempDir() {
    llvm::SmallString<128> p;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("shard-importer", p));
    path = std::string(p);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  std::string path;
};

void writeFile(const std::string &path, const void *data, size_t n) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << ec.message();
  os.write(static_cast<const char *>(data), n);
}

onnx::TensorProto floatTensor(std::vector<int64_t> dims) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims)
    t.add_dims(d);
  return t;
}

void setExternal(onnx::TensorProto &t, const std::string &location,
                 int64_t offset, int64_t length) {
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto *kv = t.add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  kv = t.add_external_data();
  kv->set_key("offset");
  kv->set_value(std::to_string(offset));
  if (length >= 0) {
    kv = t.add_external_data();
    kv->set_key("length");
    kv->set_value(std::to_string(length));
  }
}

std::string errorOf(llvm::Expected<std::vector<uint8_t>> r) {
  if (r)
    return "";
  return llvm::toString(r.takeError());
}

TEST(ImporterTensorBytes, RawData) {
  onnx::TensorProto t = floatTensor({2});
  float v[2] = {1.5f, -2.0f};
  t.set_raw_data(v, sizeof(v));
  auto bytes = readTensorBytes(t, ".");
  ASSERT_TRUE(!!bytes);
  ASSERT_EQ(bytes->size(), 8u);
  float back[2];
  std::memcpy(back, bytes->data(), 8);
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[1], -2.0f);
}

TEST(ImporterTensorBytes, TypedFieldsAndBools) {
  onnx::TensorProto t;
  t.set_name("b");
  t.set_data_type(onnx::TensorProto::BOOL);
  t.add_dims(3);
  t.add_int32_data(1);
  t.add_int32_data(0);
  t.add_int32_data(7);
  auto bytes = readTensorBytes(t, ".");
  ASSERT_TRUE(!!bytes);
  EXPECT_EQ(*bytes, (std::vector<uint8_t>{1, 0, 1}));

  onnx::TensorProto i;
  i.set_name("i");
  i.set_data_type(onnx::TensorProto::INT64);
  i.add_dims(2);
  i.add_int64_data(-3);
  i.add_int64_data(1LL << 40);
  auto ib = readTensorBytes(i, ".");
  ASSERT_TRUE(!!ib);
  int64_t back[2];
  std::memcpy(back, ib->data(), 16);
  EXPECT_EQ(back[0], -3);
  EXPECT_EQ(back[1], 1LL << 40);
}

TEST(ImporterTensorBytes, RejectsWrongCountsAndTypes) {
  onnx::TensorProto t = floatTensor({3});
  t.add_float_data(1.0f);
  EXPECT_NE(errorOf(readTensorBytes(t, ".")).find("has 1 values"),
            std::string::npos);

  onnx::TensorProto r = floatTensor({2});
  r.set_raw_data(std::string(7, '\0'));
  EXPECT_NE(errorOf(readTensorBytes(r, ".")).find("7 bytes of raw data"),
            std::string::npos);

  onnx::TensorProto s;
  s.set_name("s");
  s.set_data_type(onnx::TensorProto::STRING);
  EXPECT_NE(errorOf(readTensorBytes(s, ".")).find("does not support"),
            std::string::npos);

  onnx::TensorProto neg = floatTensor({-1});
  EXPECT_NE(errorOf(readTensorBytes(neg, ".")).find("negative dimension"),
            std::string::npos);
}

TEST(ImporterTensorBytes, ExternalDataInsideModelDir) {
  TempDir dir;
  float v[4] = {0, 1, 2, 3};
  writeFile(dir.file("w.bin"), v, sizeof(v));
  onnx::TensorProto t = floatTensor({2});
  setExternal(t, "w.bin", 8, 8);
  auto bytes = readTensorBytes(t, dir.path);
  ASSERT_TRUE(!!bytes) << llvm::toString(bytes.takeError());
  float back[2];
  std::memcpy(back, bytes->data(), 8);
  EXPECT_EQ(back[0], 2.0f);
  EXPECT_EQ(back[1], 3.0f);
}

TEST(ImporterTensorBytes, ExternalDataPastEndOfFile) {
  TempDir dir;
  float v[4] = {0, 1, 2, 3};
  writeFile(dir.file("w.bin"), v, sizeof(v));
  onnx::TensorProto t = floatTensor({2});
  setExternal(t, "w.bin", 12, 8);
  EXPECT_NE(errorOf(readTensorBytes(t, dir.path)).find("runs past the end"),
            std::string::npos);
  onnx::TensorProto wrongLen = floatTensor({2});
  setExternal(wrongLen, "w.bin", 0, 4);
  EXPECT_NE(errorOf(readTensorBytes(wrongLen, dir.path)).find("length 4"),
            std::string::npos);
}

TEST(ImporterTensorBytes, ExternalDataMustStayInModelDir) {
  TempDir outer;
  std::string modelDir = outer.file("model");
  ASSERT_FALSE(llvm::sys::fs::create_directory(modelDir));
  float v[2] = {1, 2};
  writeFile(outer.file("secret.bin"), v, sizeof(v));

  onnx::TensorProto up = floatTensor({2});
  setExternal(up, "../secret.bin", 0, 8);
  EXPECT_NE(errorOf(readTensorBytes(up, modelDir)).find("outside the model"),
            std::string::npos);

  onnx::TensorProto abs = floatTensor({2});
  setExternal(abs, outer.file("secret.bin"), 0, 8);
  EXPECT_NE(errorOf(readTensorBytes(abs, modelDir)).find("absolute"),
            std::string::npos);

  llvm::SmallString<128> link(modelDir);
  llvm::sys::path::append(link, "link.bin");
  ASSERT_FALSE(llvm::sys::fs::create_link(outer.file("secret.bin"), link));
  onnx::TensorProto viaLink = floatTensor({2});
  setExternal(viaLink, "link.bin", 0, 8);
  EXPECT_NE(
      errorOf(readTensorBytes(viaLink, modelDir)).find("outside the model"),
      std::string::npos);

  onnx::TensorProto missing = floatTensor({2});
  setExternal(missing, "nope.bin", 0, 8);
  EXPECT_NE(errorOf(readTensorBytes(missing, modelDir)).find("cannot open"),
            std::string::npos);
}

TEST(ConstantBytes, RoundTripIncludingBoolAndSplat) {
  mlir::MLIRContext ctx;
  auto boolType =
      mlir::RankedTensorType::get({4}, mlir::IntegerType::get(&ctx, 1));
  std::vector<uint8_t> bits = {1, 0, 0, 1};
  auto attr = constantFromBytes(boolType, bits);
  EXPECT_EQ(constantBytes(attr), bits);

  auto f32 = mlir::RankedTensorType::get({3}, mlir::Float32Type::get(&ctx));
  auto splat = mlir::DenseElementsAttr::get(f32, 2.5f);
  std::vector<uint8_t> bytes = constantBytes(splat);
  ASSERT_EQ(bytes.size(), 12u);
  float back[3];
  std::memcpy(back, bytes.data(), 12);
  EXPECT_EQ(back[0], 2.5f);
  EXPECT_EQ(back[2], 2.5f);
}

/// Imports a textual model, emits its plan, and loads it back.
TEST(PlanEmission, ImportedModelRoundTripsThroughTheLoader) {
  TempDir dir;
  std::string model = dir.file("m.onnxtxt");
  std::string text = R"(<
  ir_version: 8,
  opset_import: ["" : 15]
>
g (float[2, 3] X, float[3, 4] W = {1,2,3,4,5,6,7,8,9,10,11,12}, float[4] B = {1,1,1,1}) => (float[2, 4] Y, float[3, 4] W2)
{
  M = MatMul(X, W)
  S = Add(M, B)
  Y = Relu(S)
  W2 = Identity(W)
}
)";
  writeFile(model, text.data(), text.size());
  mlir::MLIRContext ctx;
  ctx.getDiagEngine().registerHandler([](mlir::Diagnostic &d) {
    ADD_FAILURE() << d.str();
    return mlir::success();
  });
  auto imported = importOnnxFile(ctx, model, {});
  ASSERT_TRUE(mlir::succeeded(imported));
  mlir::PassManager pm(&ctx);
  buildImportCleanupPipeline(pm);
  ASSERT_TRUE(mlir::succeeded(pm.run(*imported->module)));

  plan::PlanWriter writer;
  const onnx::ModelProto &proto = imported->model;
  std::string modelDir = imported->modelDir;
  ParamReader reader =
      [&](llvm::StringRef name) -> llvm::Expected<std::vector<uint8_t>> {
    for (const auto &init : proto.graph().initializer())
      if (init.name() == name)
        return readTensorBytes(init, modelDir);
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "missing");
  };
  ASSERT_TRUE(mlir::succeeded(emitPlan(*imported->module, reader, writer)));
  std::string planDir = dir.file("plan");
  ASSERT_FALSE(!!writer.write(planDir));

  auto loaded = plan::loadPlan(planDir);
  ASSERT_TRUE(!!loaded) << llvm::toString(loaded.takeError());
  const plan::Plan &p = (*loaded)->plan;
  ASSERT_EQ(p.inputs_size(), 1);
  EXPECT_EQ(p.buffers(p.inputs(0)).name(), "X");
  ASSERT_EQ(p.outputs_size(), 2);
  EXPECT_EQ(p.buffers(p.outputs(0)).name(), "Y");
  EXPECT_EQ(p.buffers(p.outputs(1)).name(), "W2");
  // MatMul, Add, Relu, and a copy of the parameter W for output W2 (a graph
  // output that is a parameter gets its own buffer).
  std::vector<std::string> types;
  for (const auto &op : p.ops())
    types.push_back(op.type());
  EXPECT_EQ(types,
            (std::vector<std::string>{"MatMul", "Add", "Relu", "Identity"}));
  int params = 0;
  for (int i = 0; i < p.buffers_size(); ++i)
    if (p.buffers(i).kind() == plan::PARAMETER) {
      ++params;
      EXPECT_EQ((*loaded)->bytes[i].size(),
                p.buffers(i).name() == "W" ? 48u : 16u);
    }
  EXPECT_EQ(params, 2);
}

/// Emits a plan from textual IR; returns the diagnostics, or "" on success.
std::string emitFromIr(llvm::StringRef ir) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<ShardcDialect, mlir::func::FuncDialect>();
  std::string diagnostics;
  ctx.getDiagEngine().registerHandler([&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(ir, &ctx);
  if (!module)
    return "parse error: " + diagnostics;
  plan::PlanWriter writer;
  ParamReader reader =
      [](llvm::StringRef) -> llvm::Expected<std::vector<uint8_t>> {
    return std::vector<uint8_t>(8, 0);
  };
  if (mlir::succeeded(emitPlan(*module, reader, writer)))
    return "";
  return diagnostics.empty() ? "failed without a diagnostic" : diagnostics;
}

// The runtime finishes each collective it starts exactly once: plan lowering
// refuses a start whose handle is never waited for, or waited for twice
// (both are valid IR: the handle type only says what a wait consumes).
TEST(PlanEmission, EveryCollectiveIsWaitedForOnce) {
  const char *waitedOnce = R"(
func.func @main(%g: tensor<2xf32> {shardc.input = "g"}) -> tensor<2xf32>
    attributes {shardc.output_names = ["r"]} {
  %h = shardc.AllReduceStart %g {world_size = 2 : i64} : tensor<2xf32>
  %r = shardc.CollectiveWait %h : tensor<2xf32>
  return %r : tensor<2xf32>
})";
  EXPECT_EQ(emitFromIr(waitedOnce), "");

  const char *neverWaited = R"(
func.func @main(%g: tensor<2xf32> {shardc.input = "g"}) -> tensor<2xf32>
    attributes {shardc.output_names = ["r"]} {
  %h = shardc.AllReduceStart %g {world_size = 2 : i64} : tensor<2xf32>
  return %g : tensor<2xf32>
})";
  EXPECT_NE(emitFromIr(neverWaited)
                .find("is not finished by exactly one shardc.CollectiveWait"),
            std::string::npos);

  const char *waitedTwice = R"(
func.func @main(%g: tensor<2xf32> {shardc.input = "g"}) -> (tensor<2xf32>, tensor<2xf32>)
    attributes {shardc.output_names = ["a", "b"]} {
  %h = shardc.AllReduceStart %g {world_size = 2 : i64} : tensor<2xf32>
  %a = shardc.CollectiveWait %h : tensor<2xf32>
  %b = shardc.CollectiveWait %h : tensor<2xf32>
  return %a, %b : tensor<2xf32>, tensor<2xf32>
})";
  EXPECT_NE(emitFromIr(waitedTwice)
                .find("is not finished by exactly one shardc.CollectiveWait"),
            std::string::npos);
}

} // namespace
