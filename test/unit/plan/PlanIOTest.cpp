//===- PlanIOTest.cpp - Plan writer, loader and validation ----------------===//
#include "plan/PlanIO.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cstring>
#include <fcntl.h>
#include <functional>
#include <unistd.h>

using namespace shardc;
using namespace shardc::plan;

namespace {

/// A fresh directory, removed with its contents at the end of the test.
class TempDir {
public:
  TempDir() {
    std::error_code ec =
        llvm::sys::fs::createUniqueDirectory("shard-plan-test", path);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string str() const { return std::string(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<256> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

private:
  llvm::SmallString<256> path;
};

/// The message of an error ("" for success).
std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}

std::vector<uint8_t> bytesOf(const void *p, size_t n) {
  const uint8_t *b = static_cast<const uint8_t *>(p);
  return std::vector<uint8_t>(b, b + n);
}

std::string readFile(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  EXPECT_TRUE(bool(buf)) << path;
  return buf ? (*buf)->getBuffer().str() : std::string();
}

void writeFile(const std::string &path, llvm::StringRef contents) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << ec.message();
  os << contents;
}

const float kWeights[6] = {1, 2, 3, 4, 5, 6};
const int64_t kShapeConst[2] = {2, 3};
const float kBias[3] = {0.5f, -0.5f, 1.5f};

/// x (INPUT f32 [2,2]), w (PARAMETER f32 [2,3]), s (CONSTANT i64 [2]),
/// b (PARAMETER f32 [3]), y = Gemm(x, w, b), z = Relu(y); outputs z, y.
void buildValidPlan(PlanWriter &w) {
  int32_t x = w.addBuffer("x", rt::DType::F32, {2, 2}, INPUT);
  int32_t wt = cantFail(w.addDataBuffer("w", rt::DType::F32, {2, 3}, PARAMETER,
                                        bytesOf(kWeights, sizeof kWeights)));
  int32_t s =
      cantFail(w.addDataBuffer("s", rt::DType::I64, {2}, CONSTANT,
                               bytesOf(kShapeConst, sizeof kShapeConst)));
  int32_t b = cantFail(w.addDataBuffer("b", rt::DType::F32, {3}, PARAMETER,
                                       bytesOf(kBias, sizeof kBias)));
  int32_t y = w.addBuffer("y", rt::DType::F32, {2, 3}, TEMP);
  int32_t z = w.addBuffer("z", rt::DType::F32, {2, 3}, TEMP);
  (void)s;
  Plan &p = w.plan();
  p.set_producer("PlanIOTest");
  p.set_model_name("tiny");
  Op *gemm = p.add_ops();
  gemm->set_type("Gemm");
  gemm->set_name("fc");
  gemm->add_inputs(x);
  gemm->add_inputs(wt);
  gemm->add_inputs(b);
  gemm->add_outputs(y);
  Attribute *alpha = gemm->add_attributes();
  alpha->set_name("alpha");
  alpha->set_f(1.0);
  Attribute *transA = gemm->add_attributes();
  transA->set_name("transA");
  transA->set_i(0);
  Attribute *mode = gemm->add_attributes();
  mode->set_name("mode");
  mode->set_s("fast");
  Attribute *perm = gemm->add_attributes();
  perm->set_name("perm");
  perm->mutable_ints()->add_values(1);
  perm->mutable_ints()->add_values(0);
  Attribute *scales = gemm->add_attributes();
  scales->set_name("scales");
  scales->mutable_floats()->add_values(0.25);
  Op *relu = p.add_ops();
  relu->set_type("Relu");
  relu->set_name("act");
  relu->add_inputs(y);
  relu->add_outputs(z);
  p.add_inputs(x);
  p.add_outputs(z);
  p.add_outputs(y);
}

/// Writes the valid plan to `dir`, then rewrites plan.pb after `mutate`
/// (bypassing the writer's own validation).
void writeMutated(const TempDir &dir,
                  const std::function<void(Plan &)> &mutate) {
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  Plan p;
  std::string raw = readFile(dir.file(kPlanFile));
  ASSERT_TRUE(p.ParseFromString(raw));
  mutate(p);
  std::string out;
  ASSERT_TRUE(p.SerializeToString(&out));
  writeFile(dir.file(kPlanFile), out);
}

/// Loads `dir` and returns the error message, or "" if it loaded.
std::string loadError(const TempDir &dir,
                      llvm::ArrayRef<llvm::StringRef> known = {}) {
  auto loaded = loadPlan(dir.str(), known);
  return errorText(loaded);
}

/// Expects loading the mutated plan to fail with a message naming the plan
/// directory and containing every one of `parts`.
void expectRejected(const std::function<void(Plan &)> &mutate,
                    std::initializer_list<llvm::StringRef> parts) {
  TempDir dir;
  writeMutated(dir, mutate);
  std::string msg = loadError(dir);
  ASSERT_NE(msg, "") << "the plan was accepted";
  EXPECT_NE(msg.find(dir.str()), std::string::npos) << msg;
  for (llvm::StringRef part : parts)
    EXPECT_NE(msg.find(part.str()), std::string::npos)
        << "'" << part.str() << "' not in: " << msg;
}

//===----------------------------------------------------------------------===//

TEST(PlanIOTest, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64({}), 0xcbf29ce484222325ULL);
  const uint8_t a[] = {'a'};
  EXPECT_EQ(fnv1a64(a), 0xaf63dc4c8601ec8cULL);
  const uint8_t foobar[] = {'f', 'o', 'o', 'b', 'a', 'r'};
  EXPECT_EQ(fnv1a64(foobar), 0x85944171f73967e8ULL);
}

TEST(PlanIOTest, DTypeConversions) {
  EXPECT_EQ(toRuntime(FLOAT32), rt::DType::F32);
  EXPECT_EQ(toRuntime(INT64), rt::DType::I64);
  EXPECT_EQ(toRuntime(FLOAT16), rt::DType::F16);
  EXPECT_EQ(toRuntime(static_cast<DType>(5)), rt::DType::Undefined);
  EXPECT_EQ(fromRuntime(rt::DType::Bool), BOOL);
  EXPECT_EQ(fromRuntime(rt::DType::F64), FLOAT64);
}

TEST(PlanIOTest, RoundTrip) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  EXPECT_TRUE(llvm::sys::fs::exists(dir.file(kParamsFile)));
  EXPECT_TRUE(llvm::sys::fs::exists(dir.file(kConstantsFile)));

  auto loaded = loadPlan(dir.str(), {"Gemm", "Relu"});
  ASSERT_EQ(errorText(loaded), "");
  const LoadedPlan &lp = **loaded;
  const Plan &p = lp.plan;
  EXPECT_EQ(lp.dir, dir.str());
  EXPECT_EQ(p.version(), kPlanVersion);
  EXPECT_EQ(p.producer(), "PlanIOTest");
  EXPECT_EQ(p.model_name(), "tiny");
  ASSERT_EQ(p.buffers_size(), 6);
  ASSERT_EQ(lp.bytes.size(), 6u);

  const Buffer &wbuf = p.buffers(1);
  EXPECT_EQ(wbuf.name(), "w");
  EXPECT_EQ(wbuf.kind(), PARAMETER);
  EXPECT_EQ(wbuf.dtype(), FLOAT32);
  EXPECT_EQ(wbuf.data_file(), kParamsFile);
  EXPECT_EQ(wbuf.data_offset(), 0u);
  EXPECT_EQ(wbuf.data_bytes(), sizeof kWeights);
  EXPECT_EQ(lp.bytes[1], bytesOf(kWeights, sizeof kWeights));

  const Buffer &sbuf = p.buffers(2);
  EXPECT_EQ(sbuf.kind(), CONSTANT);
  EXPECT_EQ(sbuf.dtype(), INT64);
  EXPECT_EQ(sbuf.data_file(), kConstantsFile);
  EXPECT_EQ(lp.bytes[2], bytesOf(kShapeConst, sizeof kShapeConst));

  // The second parameter follows the first in params.bin.
  const Buffer &bbuf = p.buffers(3);
  EXPECT_EQ(bbuf.data_file(), kParamsFile);
  EXPECT_EQ(bbuf.data_offset(), sizeof kWeights);
  EXPECT_EQ(lp.bytes[3], bytesOf(kBias, sizeof kBias));

  EXPECT_TRUE(lp.bytes[0].empty());
  EXPECT_TRUE(lp.bytes[4].empty());

  ASSERT_EQ(p.ops_size(), 2);
  const Op &gemm = p.ops(0);
  EXPECT_EQ(gemm.type(), "Gemm");
  EXPECT_EQ(gemm.name(), "fc");
  ASSERT_EQ(gemm.attributes_size(), 5);
  EXPECT_EQ(gemm.attributes(0).f(), 1.0);
  EXPECT_EQ(gemm.attributes(2).s(), "fast");
  EXPECT_EQ(gemm.attributes(3).ints().values(1), 0);
  EXPECT_EQ(gemm.attributes(4).floats().values(0), 0.25);
  ASSERT_EQ(p.outputs_size(), 2);
  EXPECT_EQ(p.outputs(0), 5);
}

TEST(PlanIOTest, RewriteReplacesExistingPlan) {
  TempDir dir;
  {
    PlanWriter w;
    buildValidPlan(w);
    ASSERT_EQ(errorText(w.write(dir.str())), "");
  }
  PlanWriter w;
  int32_t c = cantFail(w.addDataBuffer("c", rt::DType::F32, {3}, CONSTANT,
                                       bytesOf(kBias, sizeof kBias)));
  w.plan().add_outputs(c);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  auto loaded = loadPlan(dir.str());
  ASSERT_EQ(errorText(loaded), "");
  EXPECT_EQ((*loaded)->plan.buffers_size(), 1);
  EXPECT_EQ((*loaded)->bytes[0], bytesOf(kBias, sizeof kBias));
  // No temporaries are left behind.
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(dir.str(), ec), end;
       !ec && it != end; it.increment(ec))
    ++files;
  EXPECT_EQ(files, 3);
}

TEST(PlanIOTest, WriterCreatesNestedDirectory) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  std::string nested = dir.file("a/b/plan");
  ASSERT_EQ(errorText(w.write(nested)), "");
  auto loaded = loadPlan(nested);
  EXPECT_EQ(errorText(loaded), "");
}

TEST(PlanIOTest, WriterRejectsWrongDataSize) {
  PlanWriter w;
  auto r = w.addDataBuffer("w", rt::DType::F32, {2, 3}, PARAMETER,
                           bytesOf(kWeights, 5 * sizeof(float)));
  std::string msg = errorText(r);
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs 24 bytes, got 20"), std::string::npos) << msg;
}

TEST(PlanIOTest, WriterRejectsDataForTemp) {
  PlanWriter w;
  auto r = w.addDataBuffer("t", rt::DType::F32, {1}, TEMP,
                           bytesOf(kWeights, sizeof(float)));
  EXPECT_NE(errorText(r).find("only PARAMETER and CONSTANT"),
            std::string::npos);
}

TEST(PlanIOTest, WriterRefusesInvalidPlan) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  w.plan().mutable_ops(0)->set_inputs(0, 42);
  std::string msg = errorText(w.write(dir.file("out")));
  EXPECT_NE(msg.find("refusing to write an invalid plan"), std::string::npos)
      << msg;
  EXPECT_FALSE(llvm::sys::fs::exists(dir.file("out/plan.pb")));
}

//===----------------------------------------------------------------------===//
// Rejections: the directory and plan.pb itself.
//===----------------------------------------------------------------------===//

TEST(PlanIOTest, RejectsMissingDirectory) {
  TempDir dir;
  auto loaded = loadPlan(dir.file("nope"));
  std::string msg = errorText(loaded);
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.file("nope")), std::string::npos) << msg;
}

TEST(PlanIOTest, RejectsMissingPlanFile) {
  TempDir dir;
  std::string msg = loadError(dir);
  EXPECT_NE(msg.find("cannot read plan.pb in " + dir.str()), std::string::npos)
      << msg;
}

TEST(PlanIOTest, RejectsTruncatedPlanFile) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  std::string raw = readFile(dir.file(kPlanFile));
  // Cut inside the packed list of graph outputs: protobuf itself fails.
  writeFile(dir.file(kPlanFile), llvm::StringRef(raw).drop_back(1));
  std::string msg = loadError(dir);
  EXPECT_NE(msg.find("plan.pb in " + dir.str() + " is not a valid plan"),
            std::string::npos)
      << msg;
  // Every shorter prefix is rejected too, one way or another.
  for (size_t n = 0; n < raw.size(); ++n) {
    writeFile(dir.file(kPlanFile), llvm::StringRef(raw).take_front(n));
    EXPECT_NE(loadError(dir), "") << "prefix of " << n << " bytes accepted";
  }
}

TEST(PlanIOTest, RejectsGarbagePlanFile) {
  TempDir dir;
  writeFile(dir.file(kPlanFile), "\xff\xff\xff\xff garbage, not protobuf");
  std::string msg = loadError(dir);
  EXPECT_NE(msg.find("plan.pb in " + dir.str() + " is not a valid plan"),
            std::string::npos)
      << msg;
}

TEST(PlanIOTest, RejectsEmptyPlanFile) {
  TempDir dir;
  writeFile(dir.file(kPlanFile), "");
  EXPECT_NE(loadError(dir).find("is not a valid plan: the file is empty"),
            std::string::npos);
}

TEST(PlanIOTest, RejectsWrongVersion) {
  expectRejected([](Plan &p) { p.set_version(7); },
                 {"has version 7", "reads version 1", "recompile", "shardc"});
}

//===----------------------------------------------------------------------===//
// Rejections: buffers.
//===----------------------------------------------------------------------===//

TEST(PlanIOTest, RejectsUnknownDType) {
  expectRejected(
      [](Plan &p) { p.mutable_buffers(4)->set_dtype(static_cast<DType>(5)); },
      {"buffer 4 'y'", "unknown element type code 5"});
}

TEST(PlanIOTest, RejectsNegativeDimension) {
  expectRejected([](Plan &p) { p.mutable_buffers(4)->set_shape(1, -3); },
                 {"buffer 4 'y'", "negative"});
}

TEST(PlanIOTest, RejectsShapeOverflow) {
  expectRejected(
      [](Plan &p) {
        Buffer *b = p.mutable_buffers(4);
        b->set_shape(0, int64_t(1) << 40);
        b->set_shape(1, int64_t(1) << 40);
      },
      {"buffer 4 'y'", "64 bits"});
  // The element count fits but the byte count does not.
  expectRejected(
      [](Plan &p) {
        Buffer *b = p.mutable_buffers(4);
        b->set_shape(0, int64_t(1) << 31);
        b->set_shape(1, int64_t(1) << 31);
      },
      {"buffer 4 'y'", "bytes"});
}

TEST(PlanIOTest, RejectsDataBytesMismatch) {
  expectRejected([](Plan &p) { p.mutable_buffers(1)->set_data_bytes(20); },
                 {"buffer 1 'w'", "data_bytes is 20", "needs 24"});
}

TEST(PlanIOTest, RejectsDataFileOutsidePlanDirectory) {
  expectRejected(
      [](Plan &p) { p.mutable_buffers(1)->set_data_file("../params.bin"); },
      {"buffer 1 'w'", "'../params.bin'", "not a plain file name"});
  expectRejected(
      [](Plan &p) { p.mutable_buffers(1)->set_data_file("/etc/passwd"); },
      {"buffer 1 'w'", "not a plain file name"});
  expectRejected([](Plan &p) { p.mutable_buffers(1)->set_data_file(""); },
                 {"buffer 1 'w'", "not a plain file name"});
  expectRejected([](Plan &p) { p.mutable_buffers(1)->set_data_file(".."); },
                 {"buffer 1 'w'", "not a plain file name"});
}

TEST(PlanIOTest, RejectsDataOnTempBuffer) {
  expectRejected([](Plan &p) { p.mutable_buffers(4)->set_data_file("x.bin"); },
                 {"buffer 4 'y'", "must not name a data file"});
}

TEST(PlanIOTest, RejectsDataPastEndOfFile) {
  // The offset points past the end of params.bin.
  expectRejected([](Plan &p) { p.mutable_buffers(3)->set_data_offset(100); },
                 {"buffer 3 'b'", "past the end of params.bin"});
}

TEST(PlanIOTest, RejectsOffsetOverflow) {
  expectRejected(
      [](Plan &p) { p.mutable_buffers(3)->set_data_offset(~uint64_t(0) - 4); },
      {"buffer 3 'b'", "overflows"});
}

TEST(PlanIOTest, RejectsTruncatedDataFile) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  std::string params = readFile(dir.file(kParamsFile));
  writeFile(dir.file(kParamsFile), llvm::StringRef(params).drop_back(4));
  std::string msg = loadError(dir);
  EXPECT_NE(msg.find(dir.str()), std::string::npos) << msg;
  EXPECT_NE(msg.find("buffer 3 'b'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(PlanIOTest, RejectsMissingDataFile) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  ASSERT_FALSE(llvm::sys::fs::remove(dir.file(kConstantsFile)));
  std::string msg = loadError(dir);
  EXPECT_NE(msg.find("buffer 2 's'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot open data file"), std::string::npos) << msg;
}

TEST(PlanIOTest, RejectsChecksumMismatch) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  std::string params = readFile(dir.file(kParamsFile));
  params[5] ^= 0x01;
  writeFile(dir.file(kParamsFile), params);
  std::string msg = loadError(dir);
  EXPECT_NE(msg.find(dir.str()), std::string::npos) << msg;
  EXPECT_NE(msg.find("buffer 1 'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum mismatch in params.bin"), std::string::npos)
      << msg;
}

/// A buffer beyond 4 GiB into a (sparse) data file: offsets are 64-bit.
TEST(PlanIOTest, ReadsDataBeyond4GiB) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  const uint64_t offset = (uint64_t(1) << 32) + 12345;
  std::string path = dir.file("big.bin");
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(offset + sizeof kBias)), 0);
  ASSERT_EQ(::pwrite(fd, kBias, sizeof kBias, static_cast<off_t>(offset)),
            static_cast<ssize_t>(sizeof kBias));
  ::close(fd);

  Plan p;
  ASSERT_TRUE(p.ParseFromString(readFile(dir.file(kPlanFile))));
  p.mutable_buffers(3)->set_data_file("big.bin");
  p.mutable_buffers(3)->set_data_offset(offset);
  writeFile(dir.file(kPlanFile), p.SerializeAsString());
  auto loaded = loadPlan(dir.str());
  ASSERT_EQ(errorText(loaded), "");
  EXPECT_EQ((*loaded)->bytes[3], bytesOf(kBias, sizeof kBias));
}

//===----------------------------------------------------------------------===//
// Rejections: inputs, ops and outputs.
//===----------------------------------------------------------------------===//

TEST(PlanIOTest, RejectsInputBufferNotListed) {
  expectRejected([](Plan &p) { p.clear_inputs(); },
                 {"buffer 0 'x'", "missing from the plan's inputs"});
}

TEST(PlanIOTest, RejectsNonInputListedAsInput) {
  expectRejected([](Plan &p) { p.add_inputs(1); },
                 {"graph input 1", "buffer 1 'w'", "not an INPUT"});
}

TEST(PlanIOTest, RejectsGraphInputOutOfRange) {
  expectRejected([](Plan &p) { p.add_inputs(99); },
                 {"graph input 1", "99", "out of range"});
}

TEST(PlanIOTest, RejectsDuplicateGraphInput) {
  expectRejected([](Plan &p) { p.add_inputs(0); },
                 {"graph input 1", "listed more than once"});
}

TEST(PlanIOTest, RejectsOpInputOutOfRange) {
  expectRejected(
      [](Plan &p) { p.mutable_ops(1)->set_inputs(0, 6); },
      {"op 1 (Relu 'act')", "input 0", "buffer index 6", "out of range"});
  expectRejected([](Plan &p) { p.mutable_ops(1)->set_inputs(0, -2); },
                 {"op 1 (Relu 'act')", "buffer index -2", "out of range"});
}

TEST(PlanIOTest, RejectsOpOutputOutOfRange) {
  expectRejected([](Plan &p) { p.mutable_ops(0)->set_outputs(0, 1000); },
                 {"op 0 (Gemm 'fc')", "output 0", "buffer index 1000"});
}

TEST(PlanIOTest, AcceptsAbsentOptionalOperands) {
  TempDir dir;
  writeMutated(dir, [](Plan &p) {
    p.mutable_ops(0)->set_inputs(2, -1);
    p.mutable_ops(1)->add_outputs(-1);
  });
  EXPECT_EQ(loadError(dir), "");
}

TEST(PlanIOTest, RejectsUseBeforeDef) {
  // Swap the ops: Relu now reads y before Gemm writes it.
  expectRejected([](Plan &p) { p.mutable_ops()->SwapElements(0, 1); },
                 {"op 0 (Relu 'act')", "reads buffer 4 'y'",
                  "before any earlier op writes it"});
}

TEST(PlanIOTest, RejectsOpReadingItsOwnOutput) {
  expectRejected([](Plan &p) { p.mutable_ops(0)->set_inputs(0, 4); },
                 {"op 0 (Gemm 'fc')", "reads buffer 4 'y'"});
}

TEST(PlanIOTest, RejectsUnknownOpType) {
  TempDir dir;
  writeMutated(dir, [](Plan &p) { p.mutable_ops(1)->set_type("Frobnicate"); });
  EXPECT_EQ(loadError(dir), "") << "no op list given: any type is fine";
  std::string msg = loadError(dir, {"Gemm", "Relu"});
  EXPECT_NE(msg.find(dir.str()), std::string::npos) << msg;
  EXPECT_NE(msg.find("op 1 (Frobnicate 'act')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown op type 'Frobnicate'"), std::string::npos) << msg;
}

TEST(PlanIOTest, RejectsOpWithoutType) {
  expectRejected([](Plan &p) { p.mutable_ops(1)->clear_type(); },
                 {"op 1", "'act'", "no type"});
}

TEST(PlanIOTest, RejectsDuplicateAttribute) {
  expectRejected(
      [](Plan &p) {
        Attribute *a = p.mutable_ops(0)->add_attributes();
        a->set_name("alpha");
        a->set_f(2.0);
      },
      {"op 0 (Gemm 'fc')", "attribute 'alpha' appears more than once"});
}

TEST(PlanIOTest, RejectsAttributeWithoutValue) {
  expectRejected(
      [](Plan &p) { p.mutable_ops(0)->add_attributes()->set_name("beta"); },
      {"op 0 (Gemm 'fc')", "attribute 'beta' has no value"});
}

TEST(PlanIOTest, RejectsGraphOutputOutOfRange) {
  expectRejected([](Plan &p) { p.set_outputs(1, 17); },
                 {"graph output 1", "17", "out of range"});
}

TEST(PlanIOTest, RejectsGraphOutputNeverWritten) {
  expectRejected([](Plan &p) { p.mutable_ops()->RemoveLast(); },
                 {"graph output 0", "buffer 5 'z'", "no op writes it"});
}

TEST(PlanIOTest, RejectsPlanWithoutOutputs) {
  expectRejected([](Plan &p) { p.clear_outputs(); }, {"no outputs"});
}

} // namespace
