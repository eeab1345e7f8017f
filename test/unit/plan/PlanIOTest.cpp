//===- PlanIOTest.cpp - Plan writer, loader and validation ----------------===//
#include "plan/PlanIO.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <limits>
#include <sys/stat.h>
#include <tuple>
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
/// (bypassing the writer's own validation) and reseals the manifest: a
/// self-consistent hostile plan, which the reader's checks must stop.
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
  ASSERT_EQ(errorText(resealPlan(dir.str())), "");
}

/// Writes the valid plan, replaces file `name` with `contents` and, when
/// `reseal`, rewrites the manifest to match.
void writeWithFile(const TempDir &dir, llvm::StringRef name,
                   llvm::StringRef contents, bool reseal) {
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  writeFile(dir.file(name), contents);
  if (reseal) {
    ASSERT_EQ(errorText(resealPlan(dir.str())), "");
  }
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
  EXPECT_EQ(files, 4);
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

TEST(PlanIOTest, ShapesOnlyWriterRecordsSizesAndNeverWrites) {
  TempDir dir;
  PlanWriter w;
  w.setShapesOnly();
  // No data: the buffer records its size (every rank's shards) alone.
  auto id = w.addDataBuffer("unit", rt::DType::BF16, {1000, 1000}, PARAMETER,
                            {}, /*shardCount=*/4);
  ASSERT_EQ(errorText(id), "");
  const Buffer &b = w.plan().buffers(*id);
  EXPECT_EQ(b.data_bytes(), 4u * 1000 * 1000 * 2);
  EXPECT_EQ(b.shard_count(), 4);
  EXPECT_EQ(b.data_file(), kParamsFile);
  EXPECT_EQ(b.data_offset(), 0u);
  auto next = w.addDataBuffer("next", rt::DType::F32, {3}, PARAMETER, {});
  ASSERT_EQ(errorText(next), "");
  EXPECT_EQ(w.plan().buffers(*next).data_offset(), 8000000u);
  // A shapes-only plan validates as a written plan would.
  PlanWriter v;
  v.setShapesOnly();
  int32_t x = v.addBuffer("x", rt::DType::F32, {2, 3}, INPUT);
  int32_t p =
      cantFail(v.addDataBuffer("p", rt::DType::F32, {2, 3}, PARAMETER, {}));
  int32_t y = v.addBuffer("y", rt::DType::F32, {2, 3}, TEMP);
  Op *add = v.plan().add_ops();
  add->set_type("Add");
  add->set_name("add");
  add->add_inputs(x);
  add->add_inputs(p);
  add->add_outputs(y);
  v.plan().add_inputs(x);
  v.plan().add_outputs(y);
  EXPECT_EQ(errorText(v.validate()), "");
  // Data of the wrong size is still refused.
  auto bad = w.addDataBuffer("w", rt::DType::F32, {2, 3}, PARAMETER,
                             bytesOf(kWeights, 5 * sizeof(float)));
  EXPECT_NE(errorText(bad).find("needs 24 bytes, got 20"), std::string::npos);
  std::string msg = errorText(w.write(dir.file("plan")));
  EXPECT_NE(msg.find("without its parameters"), std::string::npos) << msg;
  EXPECT_FALSE(llvm::sys::fs::exists(dir.file("plan")));
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
  EXPECT_NE(msg.find(dir.str() + " is not a complete plan directory"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("manifest is missing"), std::string::npos) << msg;
  // A manifest but no plan.pb.
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  ASSERT_FALSE(llvm::sys::fs::remove(dir.file(kPlanFile)));
  msg = loadError(dir);
  EXPECT_NE(msg.find("cannot open " + dir.file(kPlanFile)), std::string::npos)
      << msg;
}

TEST(PlanIOTest, RejectsTruncatedPlanFile) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  std::string raw = readFile(dir.file(kPlanFile));
  // Shorter than the manifest says.
  writeFile(dir.file(kPlanFile), llvm::StringRef(raw).drop_back(1));
  std::string msg = loadError(dir);
  EXPECT_NE(
      msg.find(dir.file(kPlanFile) + " is " + std::to_string(raw.size() - 1) +
               " bytes, but the manifest lists " + std::to_string(raw.size())),
      std::string::npos)
      << msg;
  // Resealed, protobuf itself fails (the cut is inside the packed list of
  // graph outputs).
  ASSERT_EQ(errorText(resealPlan(dir.str())), "");
  msg = loadError(dir);
  EXPECT_NE(msg.find("plan.pb in " + dir.str() + " is not a valid plan"),
            std::string::npos)
      << msg;
  // Every shorter prefix is rejected too, one way or another, resealed or
  // not.
  for (size_t n = 0; n < raw.size(); ++n) {
    writeFile(dir.file(kPlanFile), llvm::StringRef(raw).take_front(n));
    EXPECT_NE(loadError(dir), "") << "prefix of " << n << " bytes accepted";
    ASSERT_EQ(errorText(resealPlan(dir.str())), "");
    EXPECT_NE(loadError(dir), "")
        << "resealed prefix of " << n << " bytes accepted";
  }
}

TEST(PlanIOTest, RejectsGarbagePlanFile) {
  TempDir dir;
  writeWithFile(dir, kPlanFile, "\xff\xff\xff\xff garbage, not protobuf",
                /*reseal=*/true);
  std::string msg = loadError(dir);
  EXPECT_NE(msg.find("plan.pb in " + dir.str() + " is not a valid plan"),
            std::string::npos)
      << msg;
}

TEST(PlanIOTest, RejectsEmptyPlanFile) {
  TempDir dir;
  writeWithFile(dir, kPlanFile, "", /*reseal=*/true);
  EXPECT_NE(loadError(dir).find("is not a valid plan: the file is empty"),
            std::string::npos);
}

TEST(PlanIOTest, RejectsWrongVersion) {
  expectRejected([](Plan &p) { p.set_version(8); },
                 {"has version 8", "reads version 7", "recompile", "shardc"});
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
      {"buffer 4 'y'", "more than 2^46 elements"});
  // Past 2^46 elements, whether or not the byte count would fit 64 bits.
  expectRejected(
      [](Plan &p) {
        Buffer *b = p.mutable_buffers(4);
        b->set_shape(0, int64_t(1) << 31);
        b->set_shape(1, int64_t(1) << 31);
      },
      {"buffer 4 'y'", "more than 2^46 elements"});
  // An empty buffer's other dimensions are bounded too: the kernels loop
  // over them.
  expectRejected(
      [](Plan &p) {
        Buffer *b = p.mutable_buffers(4);
        b->set_shape(0, 0);
        b->set_shape(1, int64_t(1) << 50);
      },
      {"buffer 4 'y'", "is empty, but its other dimensions multiply past "
                       "2^46"});
}

TEST(PlanIOTest, RejectsInitialValueOutsideState) {
  // Only compiler-created state starts at a value of its own (the loss
  // scale); a parameter's values come from its data file.
  expectRejected([](Plan &p) { p.mutable_buffers(1)->set_initial_value(2); },
                 {"buffer 1 'w'", "only a STATE buffer has an initial value"});
  // A STATE buffer's value must be exact in its type (checked before any
  // conversion: a value past int32's range is refused, not cast).
  expectRejected(
      [](Plan &p) {
        Buffer *b = p.mutable_buffers(1);
        b->set_kind(STATE);
        b->clear_data_file();
        b->set_data_bytes(0);
        b->set_data_offset(0);
        b->set_checksum(0);
        b->set_dtype(INT32);
        b->set_initial_value(1e30);
      },
      {"buffer 1 'w'", "initial value", "is not exact in its element type"});
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
  // The manifest's size stops it first.
  std::string msg = loadError(dir);
  EXPECT_NE(msg.find(dir.file(kParamsFile) + " is 32 bytes, but the manifest "
                                             "lists 36"),
            std::string::npos)
      << msg;
  // Resealed, the buffer's bounds do.
  ASSERT_EQ(errorText(resealPlan(dir.str())), "");
  msg = loadError(dir);
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
  EXPECT_NE(msg.find(dir.file(kParamsFile) +
                     " does not match its SHA-256 in the manifest"),
            std::string::npos)
      << msg;
  // Resealed, the buffer's own checksum still catches it.
  ASSERT_EQ(errorText(resealPlan(dir.str())), "");
  msg = loadError(dir);
  EXPECT_NE(msg.find(dir.str()), std::string::npos) << msg;
  EXPECT_NE(msg.find("buffer 1 'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum mismatch in params.bin"), std::string::npos)
      << msg;
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

//===----------------------------------------------------------------------===//
// The manifest and the files it lists.
//===----------------------------------------------------------------------===//

namespace {

/// A manifest of `lines` (each without its line break) with a valid final
/// SHA-256.
std::string signedManifest(llvm::ArrayRef<std::string> lines) {
  std::string text;
  for (const std::string &l : lines)
    text += l + "\n";
  return text + "sha256 " +
         sha256Hex(llvm::ArrayRef<uint8_t>(
             reinterpret_cast<const uint8_t *>(text.data()), text.size())) +
         "\n";
}

std::string parseError(llvm::StringRef text) {
  auto m = parseManifest(text);
  return errorText(m);
}

const std::string kZeroHash(64, '0');

/// Loads `dir` expecting an error containing every one of `parts`.
void expectLoadError(const TempDir &dir,
                     std::initializer_list<llvm::StringRef> parts) {
  std::string msg = loadError(dir);
  ASSERT_NE(msg, "") << "the plan was accepted";
  for (llvm::StringRef part : parts)
    EXPECT_NE(msg.find(part.str()), std::string::npos)
        << "'" << part.str() << "' not in: " << msg;
}

} // namespace

TEST(PlanManifestTest, Sha256KnownValues) {
  EXPECT_EQ(sha256Hex({}),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const uint8_t abc[] = {'a', 'b', 'c'};
  EXPECT_EQ(sha256Hex(abc),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(PlanManifestTest, WriterListsEveryFile) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.addFile("model.onnx", {1, 2, 3})), "");
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  auto m = readManifest(dir.str());
  ASSERT_EQ(errorText(m), "");
  EXPECT_EQ(m->version, kPlanVersion);
  ASSERT_EQ(m->files.size(), 4u);
  for (const char *name :
       {kPlanFile, kParamsFile, kConstantsFile, "model.onnx"}) {
    const ManifestEntry *e = m->find(name);
    ASSERT_NE(e, nullptr) << name;
    std::string contents = readFile(dir.file(name));
    EXPECT_EQ(e->size, contents.size()) << name;
    EXPECT_EQ(e->sha256, sha256Hex(llvm::ArrayRef<uint8_t>(
                             reinterpret_cast<const uint8_t *>(contents.data()),
                             contents.size())))
        << name;
  }
  // The text round-trips.
  EXPECT_EQ(formatManifest(m->files), readFile(dir.file(kManifestFile)));
  auto loaded = loadPlan(dir.str());
  ASSERT_EQ(errorText(loaded), "");
  EXPECT_EQ((*loaded)->manifest.digest, m->digest);
  auto model = readVerifiedPlanFile(dir.str(), "model.onnx");
  ASSERT_EQ(errorText(model), "");
  EXPECT_EQ(*model, std::vector<uint8_t>({1, 2, 3}));
}

TEST(PlanManifestTest, WriterRejectsBadExtraFiles) {
  PlanWriter w;
  for (const char *name : {"../model.onnx", "/tmp/model.onnx", "", "a b",
                           kPlanFile, kParamsFile, kManifestFile, ".hidden"})
    EXPECT_NE(errorText(w.addFile(name, {})), "") << name;
  ASSERT_EQ(errorText(w.addFile("model.onnx", {})), "");
  EXPECT_NE(errorText(w.addFile("model.onnx", {})).find("twice"),
            std::string::npos);
}

TEST(PlanManifestTest, WriterNeedsTheSourceModelAsAFile) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  Plan &p = w.plan();
  // A scalar loss so the plan is a valid training step.
  int32_t loss = w.addBuffer("loss", rt::DType::F32, {}, TEMP);
  Op *sum = p.add_ops();
  sum->set_type("ReduceSum");
  sum->set_name("sum");
  sum->add_inputs(5);
  sum->add_outputs(loss);
  p.add_outputs(loss);
  p.mutable_training()->set_loss_output(2);
  p.mutable_training()->set_micro_batch(2);
  p.mutable_training()->set_source_model("model.onnx");
  std::string msg = errorText(w.write(dir.str()));
  EXPECT_NE(msg.find("source model 'model.onnx' is not one of the plan's "
                     "files"),
            std::string::npos)
      << msg;
  ASSERT_EQ(errorText(w.addFile("model.onnx", {7})), "");
  EXPECT_EQ(errorText(w.write(dir.str())), "");
  EXPECT_EQ(loadError(dir), "");
}

TEST(PlanManifestTest, ParseRejectsMalformedManifests) {
  std::string plan = "plan.pb 10 " + kZeroHash;
  EXPECT_EQ(parseError(signedManifest({"shard-plan 7", plan})), "");
  EXPECT_NE(parseError("").find("empty"), std::string::npos);
  std::string good = signedManifest({"shard-plan 7", plan});
  EXPECT_NE(parseError(llvm::StringRef(good).drop_back()).find("line break"),
            std::string::npos);
  EXPECT_NE(parseError(signedManifest({"PK\x03\x04 zip", plan}))
                .find("not a plan manifest"),
            std::string::npos);
  EXPECT_NE(parseError(signedManifest({"shard-plan 1", plan}))
                .find("version 1, but this build reads version 7; recompile"),
            std::string::npos);
  EXPECT_NE(parseError(signedManifest({"shard-plan x", plan}))
                .find("no valid plan version"),
            std::string::npos);
  EXPECT_NE(parseError(signedManifest({"shard-plan 7"})).find("lists no files"),
            std::string::npos);
  EXPECT_NE(
      parseError(signedManifest({"shard-plan 7", "params.bin 1 " + kZeroHash}))
          .find("does not list plan.pb"),
      std::string::npos);
  for (const std::string &line : std::vector<std::string>{
           "../plan.pb 10 " + kZeroHash, "/etc/passwd 10 " + kZeroHash,
           "plan.pb 010 " + kZeroHash, "plan.pb -1 " + kZeroHash,
           "plan.pb 99999999999999999999 " + kZeroHash,
           "plan.pb 10 " + std::string(64, 'A'),
           "plan.pb 10 " + kZeroHash + " x", "plan.pb 10",
           "manifest 10 " + kZeroHash})
    EXPECT_NE(parseError(signedManifest({"shard-plan 7", line}))
                  .find("manifest line 2"),
              std::string::npos)
        << line;
  EXPECT_NE(parseError(signedManifest({"shard-plan 7", plan, plan}))
                .find("listed more than once"),
            std::string::npos);
  // The final line guards everything above it.
  std::string tampered = good;
  tampered[tampered.find("10")] = '9';
  EXPECT_NE(parseError(tampered).find("does not match its own SHA-256"),
            std::string::npos);
}

TEST(PlanManifestTest, RejectsEveryDamageToTheManifest) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  std::string good = readFile(dir.file(kManifestFile));
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x04;
    writeFile(dir.file(kManifestFile), bad);
    EXPECT_NE(loadError(dir), "") << "flip at byte " << i << " accepted";
  }
  for (size_t n = 0; n < good.size(); ++n) {
    writeFile(dir.file(kManifestFile), llvm::StringRef(good).take_front(n));
    EXPECT_NE(loadError(dir), "") << "prefix of " << n << " bytes accepted";
  }
  writeFile(dir.file(kManifestFile), good + "x");
  EXPECT_NE(loadError(dir), "");
  writeFile(dir.file(kManifestFile), good);
  EXPECT_EQ(loadError(dir), "");
}

TEST(PlanManifestTest, RejectsEveryFlippedByteOfPlanFile) {
  // E.g. one flipped byte that changes Adam's beta2 or renames an attribute.
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  std::string good = readFile(dir.file(kPlanFile));
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    writeFile(dir.file(kPlanFile), bad);
    std::string msg = loadError(dir);
    EXPECT_NE(msg.find("does not match its SHA-256 in the manifest"),
              std::string::npos)
        << "flip at byte " << i << ": " << msg;
  }
}

TEST(PlanManifestTest, RejectsExtendedFiles) {
  for (const char *name : {kPlanFile, kParamsFile, kConstantsFile}) {
    TempDir dir;
    PlanWriter w;
    buildValidPlan(w);
    ASSERT_EQ(errorText(w.write(dir.str())), "");
    std::string contents = readFile(dir.file(name));
    writeFile(dir.file(name), contents + std::string(8, '\0'));
    expectLoadError(dir,
                    {dir.file(name), std::to_string(contents.size() + 8) +
                                         " bytes, but the manifest lists " +
                                         std::to_string(contents.size())});
  }
}

TEST(PlanManifestTest, RejectsOldPlanWithoutManifest) {
  TempDir dir;
  writeMutated(dir, [](Plan &p) { p.set_version(1); });
  ASSERT_FALSE(llvm::sys::fs::remove(dir.file(kManifestFile)));
  expectLoadError(dir,
                  {"the plan in " + dir.str() + " has version 1",
                   "this build reads version " + std::to_string(kPlanVersion),
                   "recompile the model with shardc"});
}

TEST(PlanManifestTest, RejectsMissingManifest) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  ASSERT_FALSE(llvm::sys::fs::remove(dir.file(kManifestFile)));
  expectLoadError(dir, {dir.str() + " is not a complete plan directory",
                        dir.file(kManifestFile) + " is missing", "recompile"});
}

TEST(PlanManifestTest, RejectsFifoWithoutBlocking) {
  for (const char *name : {kPlanFile, kManifestFile, kParamsFile}) {
    TempDir dir;
    PlanWriter w;
    buildValidPlan(w);
    ASSERT_EQ(errorText(w.write(dir.str())), "");
    ASSERT_FALSE(llvm::sys::fs::remove(dir.file(name)));
    ASSERT_EQ(::mkfifo(dir.file(name).c_str(), 0644), 0);
    // No writer ever opens the FIFO: a blocking open or read would hang.
    expectLoadError(dir, {dir.file(name) + " is a FIFO, not a regular file"});
  }
}

TEST(PlanManifestTest, RejectsDevicesAndDirectories) {
  auto dev = readPlanFile("/dev", "zero", 1024);
  EXPECT_NE(errorText(dev).find("/dev/zero is a character device, not a "
                                "regular file"),
            std::string::npos);
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  ASSERT_FALSE(llvm::sys::fs::remove(dir.file(kConstantsFile)));
  ASSERT_FALSE(llvm::sys::fs::create_directory(dir.file(kConstantsFile)));
  expectLoadError(dir, {dir.file(kConstantsFile) + " is a directory"});
}

TEST(PlanManifestTest, RejectsSymbolicLinks) {
  // /dev/zero behind a link (it would read until memory runs out), and a
  // link to a correct copy outside the plan directory: both refused.
  for (bool toCopy : {false, true}) {
    TempDir dir, elsewhere;
    PlanWriter w;
    buildValidPlan(w);
    ASSERT_EQ(errorText(w.write(dir.str())), "");
    std::string target = "/dev/zero";
    if (toCopy) {
      target = elsewhere.file(kPlanFile);
      writeFile(target, readFile(dir.file(kPlanFile)));
    }
    ASSERT_FALSE(llvm::sys::fs::remove(dir.file(kPlanFile)));
    ASSERT_FALSE(llvm::sys::fs::create_link(target, dir.file(kPlanFile)));
    expectLoadError(dir, {dir.file(kPlanFile) + " is a symbolic link"});
  }
}

TEST(PlanManifestTest, RejectsDamagedExtraFile) {
  TempDir dir;
  PlanWriter w;
  buildValidPlan(w);
  ASSERT_EQ(errorText(w.addFile("model.onnx", {1, 2, 3, 4})), "");
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  writeFile(dir.file("model.onnx"), "\x01\x02\x03\x05");
  expectLoadError(dir, {dir.file("model.onnx"),
                        "does not match its SHA-256 in the manifest"});
  auto model = readVerifiedPlanFile(dir.str(), "model.onnx");
  EXPECT_NE(errorText(model).find("does not match its SHA-256"),
            std::string::npos);
  auto unlisted = readVerifiedPlanFile(dir.str(), "other.onnx");
  EXPECT_NE(errorText(unlisted).find("does not list other.onnx"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Training settings, ZeRO-3 units, optimizer ops.
//===----------------------------------------------------------------------===//

namespace {

/// Makes the valid plan a training step: loss = ReduceSum(z), a scalar.
void makeTraining(Plan &p) {
  Buffer *loss = p.add_buffers();
  loss->set_name("loss");
  loss->set_dtype(FLOAT32);
  loss->set_kind(TEMP);
  int32_t index = p.buffers_size() - 1;
  Op *sum = p.add_ops();
  sum->set_type("ReduceSum");
  sum->set_name("sum");
  sum->add_inputs(5);
  sum->add_outputs(index);
  p.add_outputs(index);
  p.mutable_training()->set_loss_output(2);
  p.mutable_training()->set_micro_batch(2);
  p.mutable_training()->set_optimizer("adamw");
}

/// Appends an AdamUpdate of parameter w (buffer 1) with the given
/// attributes (name -> float; "decoupled" as an int).
Op *addAdam(Plan &p) {
  Op *op = p.add_ops();
  op->set_type("AdamUpdate");
  op->set_name("adam:w");
  op->add_inputs(1);
  op->add_inputs(4);
  op->add_outputs(1);
  for (auto [name, v] : {std::pair<const char *, double>{"lr", 0.003},
                         {"beta1", 0.9},
                         {"beta2", 0.999},
                         {"eps", 1e-8},
                         {"weight_decay", 0.01}}) {
    Attribute *a = op->add_attributes();
    a->set_name(name);
    a->set_f(v);
  }
  Attribute *d = op->add_attributes();
  d->set_name("decoupled");
  d->set_i(1);
  return op;
}

Attribute *findAttr(Op *op, llvm::StringRef name) {
  for (Attribute &a : *op->mutable_attributes())
    if (a.name() == name)
      return &a;
  return nullptr;
}

/// A 2-rank ZeRO-3 plan: unit0 (PARAMETER f32 [4], 2 shards, padded 8
/// elements) holds a (offset 0, [3]) and b (offset 3, [5]); out =
/// Relu(unit0).
void buildShardedPlan(PlanWriter &w) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6, 7, 8};
  int32_t u = cantFail(w.addDataBuffer(
      "unit0", rt::DType::F32, {4}, PARAMETER,
      bytesOf(data.data(), data.size() * sizeof(float)), /*shardCount=*/2));
  int32_t out = w.addBuffer("out", rt::DType::F32, {4}, TEMP);
  Plan &p = w.plan();
  p.set_world_size(2);
  p.set_zero_stage(3);
  Op *relu = p.add_ops();
  relu->set_type("Relu");
  relu->set_name("act");
  relu->add_inputs(u);
  relu->add_outputs(out);
  p.add_outputs(out);
  FlatUnit *unit = p.add_units();
  unit->set_name("unit0");
  unit->set_buffer(u);
  unit->set_padded_elements(8);
  FlatParam *a = unit->add_params();
  a->set_name("a");
  a->set_offset(0);
  a->add_shape(3);
  FlatParam *b = unit->add_params();
  b->set_name("b");
  b->set_offset(3);
  b->add_shape(5);
}

/// The same unit at ZeRO stage 1, whole: unit0 (PARAMETER f32 [8], every
/// rank all of it) and the rank's shard of it, a view of 4 elements with a
/// shard stride of 16 bytes; out = Relu(shard).
void buildWholeUnitPlan(PlanWriter &w) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6, 7, 8};
  int32_t u = cantFail(
      w.addDataBuffer("unit0", rt::DType::F32, {8}, PARAMETER,
                      bytesOf(data.data(), data.size() * sizeof(float))));
  int32_t shard = w.addBuffer("unit0:shard", rt::DType::F32, {4}, TEMP);
  int32_t out = w.addBuffer("out", rt::DType::F32, {4}, TEMP);
  Plan &p = w.plan();
  Buffer *view = p.mutable_buffers(shard);
  view->set_is_alias(true);
  view->set_alias_of(u);
  view->set_alias_shard_stride(16);
  p.set_world_size(2);
  p.set_zero_stage(1);
  Op *relu = p.add_ops();
  relu->set_type("Relu");
  relu->set_name("act");
  relu->add_inputs(shard);
  relu->add_outputs(out);
  p.add_outputs(out);
  FlatUnit *unit = p.add_units();
  unit->set_name("unit0");
  unit->set_buffer(u);
  unit->set_whole(true);
  unit->set_padded_elements(8);
  for (auto [name, offset, size] :
       {std::tuple{"a", 0, 3}, std::tuple{"b", 3, 5}}) {
    FlatParam *fp = unit->add_params();
    fp->set_name(name);
    fp->set_offset(offset);
    fp->add_shape(size);
  }
}

/// Loads the sharded plan (or the one `build` makes), edited by `mutate`,
/// as rank 1: the loader's error ("" when it is accepted) and the plan
/// directory it named.
std::pair<std::string, std::string>
loadMutatedShardedPlan(const std::function<void(Plan &)> &mutate,
                       void (*build)(PlanWriter &) = buildShardedPlan) {
  TempDir dir;
  PlanWriter w;
  build(w);
  EXPECT_EQ(errorText(w.write(dir.str())), "");
  Plan p;
  EXPECT_TRUE(p.ParseFromString(readFile(dir.file(kPlanFile))));
  mutate(p);
  writeFile(dir.file(kPlanFile), p.SerializeAsString());
  EXPECT_EQ(errorText(resealPlan(dir.str())), "");
  auto loaded = loadPlan(dir.str(), {}, 1);
  return {errorText(loaded), dir.str()};
}

void expectShardedRejected(const std::function<void(Plan &)> &mutate,
                           std::initializer_list<llvm::StringRef> parts,
                           void (*build)(PlanWriter &) = buildShardedPlan) {
  auto [msg, dir] = loadMutatedShardedPlan(mutate, build);
  ASSERT_NE(msg, "") << "the plan was accepted";
  EXPECT_NE(msg.find(dir), std::string::npos) << msg;
  for (llvm::StringRef part : parts)
    EXPECT_NE(msg.find(part.str()), std::string::npos)
        << "'" << part.str() << "' not in: " << msg;
}

} // namespace

TEST(PlanIOTest, AcceptsTrainingStepWithAdam) {
  TempDir dir;
  writeMutated(dir, [](Plan &p) {
    makeTraining(p);
    addAdam(p);
  });
  EXPECT_EQ(loadError(dir), "");
}

TEST(PlanIOTest, RejectsSourceModelOutsidePlanDirectory) {
  for (const char *name : {"../model.onnx", "/etc/passwd", "a/../../x.onnx",
                           "..", kPlanFile, kManifestFile})
    expectRejected(
        [&](Plan &p) {
          makeTraining(p);
          p.mutable_training()->set_source_model(name);
        },
        {"source_model", "not a plain file name inside the plan directory"});
  // A plain name the manifest does not list.
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        p.mutable_training()->set_source_model("model.onnx");
      },
      {"source model 'model.onnx' is not listed in the manifest"});
}

TEST(PlanIOTest, RejectsMicroBatchOtherThanTheInputBatch) {
  // x is [2, 2]: the micro-batch is 2.
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        p.mutable_training()->set_micro_batch(3);
      },
      {"training: micro_batch is 3, but the first graph input's batch "
       "dimension is 2"});
}

TEST(PlanIOTest, ChecksGradientAccumulationAndGradNormOutput) {
  // x is [2, 2]: two micro-batches of 1.
  TempDir dir;
  writeMutated(dir, [](Plan &p) {
    makeTraining(p);
    p.mutable_training()->set_micro_batch(1);
    p.mutable_training()->set_grad_accum(2);
  });
  EXPECT_EQ(loadError(dir), "");
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        p.mutable_training()->set_grad_accum(2);
      },
      {"training: micro_batch is 2 times grad_accum 2, but the first graph "
       "input's batch dimension is 2"});
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        p.mutable_training()->set_grad_accum(-1);
      },
      {"training: grad_accum -1 is not in [0, 65536]"});
  // The grad norm output is a float32 scalar other than the loss.
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        p.mutable_training()->set_grad_norm_output(p.training().loss_output());
      },
      {"training: grad norm output 2 is out of range or the loss"});
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        p.mutable_training()->set_grad_norm_output(7);
      },
      {"training: grad norm output 7 is out of range"});
}

TEST(PlanIOTest, RejectsUnknownOptimizer) {
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        p.mutable_training()->set_optimizer("adamx");
      },
      {"unknown optimizer 'adamx'"});
}

TEST(PlanIOTest, RejectsRenamedOrMissingHyperParameter) {
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        findAttr(addAdam(p), "beta2")->set_name("beta3");
      },
      {"AdamUpdate 'adam:w'", "unknown attribute 'beta3'",
       "AdamUpdate takes lr, beta1, beta2"});
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        Op *op = addAdam(p);
        op->mutable_attributes()->DeleteSubrange(2, 1); // beta2
      },
      {"AdamUpdate 'adam:w'", "attribute 'beta2' is missing"});
}

TEST(PlanIOTest, RejectsHyperParameterOutOfRange) {
  struct Case {
    const char *attr;
    double value;
    const char *message;
  };
  for (const Case &c :
       {Case{"beta2", 1.5, "attribute 'beta2' is 1.5; it must be in [0, 1)"},
        Case{"beta1", -0.1, "attribute 'beta1' is -0.1"},
        Case{"lr", -1, "attribute 'lr' is -1; it must be finite and >= 0"},
        Case{"lr", std::nan(""), "attribute 'lr' is nan"},
        Case{"eps", INFINITY, "attribute 'eps' is inf"}})
    expectRejected(
        [&](Plan &p) {
          makeTraining(p);
          findAttr(addAdam(p), c.attr)->set_f(c.value);
        },
        {"AdamUpdate 'adam:w'", c.message});
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        findAttr(addAdam(p), "decoupled")->set_i(2);
      },
      {"attribute 'decoupled' must be an int 0 or 1"});
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        findAttr(addAdam(p), "lr")->set_i(1);
      },
      {"attribute 'lr' must be a float"});
}

TEST(PlanIOTest, LearningRateScheduleAttributes) {
  auto addAttr = [](Op *op, const char *name) {
    Attribute *a = op->add_attributes();
    a->set_name(name);
    return a;
  };
  // Optional: a plan with a schedule loads.
  {
    TempDir dir;
    writeMutated(dir, [&](Plan &p) {
      makeTraining(p);
      Op *op = addAdam(p);
      addAttr(op, "lr_schedule")->set_s("cosine");
      addAttr(op, "warmup_steps")->set_i(10);
      addAttr(op, "decay_steps")->set_i(100);
      addAttr(op, "min_lr_ratio")->set_f(0.1);
    });
    EXPECT_EQ(loadError(dir), "");
  }
  expectRejected(
      [&](Plan &p) {
        makeTraining(p);
        addAttr(addAdam(p), "lr_schedule")->set_s("step");
      },
      {"AdamUpdate 'adam:w'",
       "attribute 'lr_schedule' must be constant, linear or cosine"});
  expectRejected(
      [&](Plan &p) {
        makeTraining(p);
        addAttr(addAdam(p), "warmup_steps")->set_i(-3);
      },
      {"attribute 'warmup_steps' must be an int >= 0"});
  expectRejected(
      [&](Plan &p) {
        makeTraining(p);
        addAttr(addAdam(p), "min_lr_ratio")->set_f(1.5);
      },
      {"attribute 'min_lr_ratio' is 1.5; it must be in [0, 1]"});
}

TEST(PlanIOTest, RejectsTrainedParameterWithoutUpdate) {
  // With its AdamUpdate, w is trained; without, it would stay as loaded.
  TempDir dir;
  writeMutated(dir, [](Plan &p) {
    makeTraining(p);
    addAdam(p);
    p.mutable_buffers(1)->set_role(TRAINED);
  });
  EXPECT_EQ(loadError(dir), "");
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        p.mutable_buffers(1)->set_role(TRAINED);
      },
      {"buffer 1 'w': a trained parameter that no op updates"});
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        Buffer *b = p.add_buffers();
        b->set_name("w.exp_avg");
        b->set_dtype(FLOAT32);
        b->set_kind(STATE);
      },
      {"'w.exp_avg': a STATE buffer that no op updates"});
  // A gradient-only step (no optimizer) updates nothing.
  TempDir gradOnly;
  writeMutated(gradOnly, [](Plan &p) {
    makeTraining(p);
    p.mutable_training()->clear_optimizer();
    p.mutable_buffers(1)->set_role(TRAINED);
  });
  EXPECT_EQ(loadError(gradOnly), "");
  // But it has no optimizer ops.
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        addAdam(p);
        p.mutable_training()->clear_optimizer();
      },
      {"AdamUpdate 'adam:w'",
       "does not implement the training's optimizer ''"});
}

TEST(PlanIOTest, RejectsOptimizerOpsOfAnotherOptimizer) {
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        addAdam(p);
        p.mutable_training()->set_optimizer("adam");
      },
      {"AdamUpdate 'adam:w'",
       "does not implement the training's optimizer 'adam' (decoupled=1)"});
  expectRejected(
      [](Plan &p) {
        makeTraining(p);
        addAdam(p);
        p.mutable_training()->set_optimizer("sgd");
      },
      {"AdamUpdate 'adam:w'", "optimizer 'sgd'"});
}

TEST(PlanIOTest, RejectsDuplicateParameterNames) {
  expectRejected(
      [](Plan &p) { p.mutable_buffers(3)->set_name("w"); },
      {"buffer 3 'w'", "another PARAMETER buffer has the same name"});
}

TEST(PlanIOTest, RejectsInvalidWorldSizeAndStage) {
  expectRejected([](Plan &p) { p.set_world_size(-2); },
                 {"world_size -2 is invalid"});
  expectRejected([](Plan &p) { p.set_zero_stage(4); },
                 {"zero_stage 4 is invalid"});
}

TEST(PlanIOTest, LoadsShardedPlanPerRank) {
  TempDir dir;
  PlanWriter w;
  buildShardedPlan(w);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  for (int rank : {0, 1}) {
    auto loaded = loadPlan(dir.str(), {}, rank);
    ASSERT_EQ(errorText(loaded), "");
    std::vector<float> want = {1.f + 4 * rank, 2.f + 4 * rank, 3.f + 4 * rank,
                               4.f + 4 * rank};
    EXPECT_EQ((*loaded)->bytes[0], bytesOf(want.data(), 16));
  }
  auto rank2 = loadPlan(dir.str(), {}, 2);
  EXPECT_NE(errorText(rank2).find("none for rank 2"), std::string::npos);
}

TEST(PlanIOTest, RejectsUnitParameterOutOfRange) {
  expectShardedRejected(
      [](Plan &p) { p.mutable_units(0)->mutable_params(1)->set_offset(4); },
      {"unit 0 'unit0'", "parameter 1 'b'", "elements [4, +5)",
       "outside the unit's 8 elements"});
  expectShardedRejected(
      [](Plan &p) { p.mutable_units(0)->mutable_params(0)->set_offset(-1); },
      {"parameter 0 'a'", "outside the unit's 8 elements"});
  expectShardedRejected(
      [](Plan &p) {
        p.mutable_units(0)->mutable_params(1)->set_offset(
            std::numeric_limits<int64_t>::max() - 2);
      },
      {"parameter 1 'b'", "outside the unit's 8 elements"});
  expectShardedRejected(
      [](Plan &p) { p.mutable_units(0)->mutable_params(1)->set_shape(0, -5); },
      {"parameter 1 'b'", "invalid shape"});
  expectShardedRejected(
      [](Plan &p) { p.mutable_units(0)->mutable_params(1)->set_offset(2); },
      {"unit 0 'unit0'", "parameter 1 'b'", "starts at element 2",
       "the previous one ends at 3"});
  expectShardedRejected(
      [](Plan &p) { p.mutable_units(0)->mutable_params(1)->set_name("a"); },
      {"parameter 1 'a'", "same name"});
}

TEST(PlanIOTest, RejectsUnitWithMissingParameter) {
  // The first parameter gone: a gap before the second.
  expectShardedRejected(
      [](Plan &p) {
        p.mutable_units(0)->mutable_params()->DeleteSubrange(0, 1);
      },
      {"parameter 0 'b'", "starts at element 3", "previous one ends at 0"});
  // The last one gone: more padding than one element per shard.
  expectShardedRejected(
      [](Plan &p) { p.mutable_units(0)->mutable_params()->RemoveLast(); },
      {"unit 0 'unit0'", "its parameters end at element 3",
       "8 elements in 2 shard(s)"});
}

TEST(PlanIOTest, RejectsUnitBufferMismatch) {
  expectShardedRejected(
      [](Plan &p) { p.mutable_units(0)->set_padded_elements(16); },
      {"unit 0 'unit0'", "padded_elements is 16", "2 shard(s) of 4 elements"});
  expectShardedRejected([](Plan &p) { p.mutable_units(0)->set_buffer(7); },
                        {"unit 0 'unit0'", "buffer index 7 is out of range"});
  expectShardedRejected(
      [](Plan &p) { p.mutable_units(0)->set_buffer(1); },
      {"unit 0 'unit0'", "buffer 1 'out'", "a TEMP buffer, not a PARAMETER"});
  expectShardedRejected([](Plan &p) { *p.add_units() = p.units(0); },
                        {"unit 1 'unit0'", "belongs to another unit too"});
}

TEST(PlanIOTest, LoadsWholeUnitWithShardViews) {
  EXPECT_EQ(loadMutatedShardedPlan([](Plan &) {}, buildWholeUnitPlan).first,
            "");
  // Every shard's block of the view stays inside the unit, apart.
  expectShardedRejected(
      [](Plan &p) { p.mutable_buffers(1)->set_alias_shard_stride(20); },
      {"buffer 1 'unit0:shard'", "view [20, +16) leaves buffer 0 'unit0'"},
      buildWholeUnitPlan);
  expectShardedRejected(
      [](Plan &p) { p.mutable_buffers(1)->set_alias_shard_stride(8); },
      {"buffer 1 'unit0:shard'", "shard stride 8 of a view of 16 bytes",
       "overlaps"},
      buildWholeUnitPlan);
  expectShardedRejected(
      [](Plan &p) {
        p.mutable_buffers(1)->set_alias_offset(16);
        p.mutable_buffers(1)->set_alias_shard_stride(~0ull - 7);
      },
      {"buffer 1 'unit0:shard'", "overflows"}, buildWholeUnitPlan);
  // A whole unit holds all its elements, in a multiple of the shards.
  expectShardedRejected(
      [](Plan &p) { p.mutable_units(0)->set_padded_elements(16); },
      {"unit 0 'unit0'", "a whole unit of padded_elements 16",
       "1 shard(s) of 8 elements"},
      buildWholeUnitPlan);
  expectShardedRejected([](Plan &p) { p.mutable_units(0)->set_whole(true); },
                        {"unit 0 'unit0'", "a whole unit of padded_elements 8",
                         "2 shard(s) of 4 elements"});
  expectShardedRejected(
      [](Plan &p) {
        p.mutable_units(0)->set_buffer(-1);
        p.mutable_units(0)->set_whole(true);
      },
      {"unit 0 'unit0'", "a whole unit needs its parameter buffer"});
}

TEST(PlanIOTest, RejectsShardCountOtherThanWorldSize) {
  expectShardedRejected([](Plan &p) { p.set_world_size(4); },
                        {"buffer 0 'unit0'", "shard_count 2 differs from the "
                                             "plan's shard count 4"});
}

namespace {

/// Appends a ShardSlice of the sharded plan's unit (buffer 1) spanning
/// `size` ranks, along mesh `axes` when given.
void addShardSlice(Plan &p, int64_t size, std::vector<int64_t> axes = {}) {
  Op *op = p.add_ops();
  op->set_type("ShardSlice");
  op->set_name("slice");
  op->add_inputs(1);
  Buffer *b = p.add_buffers();
  b->set_name("slice:0");
  b->set_dtype(FLOAT32);
  b->add_shape(2);
  op->add_outputs(p.buffers_size() - 1);
  Attribute *a = op->add_attributes();
  a->set_name("world_size");
  a->set_i(size);
  if (!axes.empty()) {
    Attribute *m = op->add_attributes();
    m->set_name("mesh_axes");
    for (int64_t x : axes)
      m->mutable_ints()->add_values(x);
  }
}

} // namespace

TEST(PlanIOTest, RankMeshOfHybridSharding) {
  // 2 groups x 2 ranks, shards along axis 1: ranks 0 and 2 hold shard 0,
  // ranks 1 and 3 shard 1; ranks 0 and 1 hold the first replica.
  Plan p;
  p.set_world_size(4);
  p.add_mesh_shape(2);
  p.add_mesh_shape(2);
  p.add_shard_axes(1);
  RankMesh mesh = RankMesh::of(p);
  EXPECT_EQ(mesh.worldSize(), 4);
  EXPECT_EQ(mesh.shardCount(), 2);
  std::vector<int64_t> shard, group0, index0;
  std::vector<bool> first;
  for (int r = 0; r < 4; ++r) {
    shard.push_back(mesh.shardIndex(r));
    first.push_back(mesh.firstReplica(r));
    group0.push_back(mesh.groupOf(r, {0}));
    index0.push_back(mesh.indexIn(r, {0}));
  }
  EXPECT_EQ(shard, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(first, (std::vector<bool>{true, true, false, false}));
  // Along axis 0 (across groups): ranks {0, 2} and {1, 3}.
  EXPECT_EQ(group0, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(index0, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(mesh.groupSize({0, 1}), 4);
  EXPECT_EQ(mesh.describe(), "2 x 2 (shards along axis 1)");
  // Without a mesh: one axis, a shard per rank.
  Plan flat;
  flat.set_world_size(3);
  RankMesh one = RankMesh::of(flat);
  EXPECT_EQ(one.shardCount(), 3);
  EXPECT_EQ(one.shardIndex(2), 2);
  EXPECT_TRUE(one.firstReplica(2));
  EXPECT_EQ(one.describe(), "");
}

TEST(PlanIOTest, LoadsTheShardOfItsGroupWithHybridSharding) {
  TempDir dir;
  PlanWriter w;
  buildShardedPlan(w);
  Plan &p = w.plan();
  p.set_world_size(4);
  p.add_mesh_shape(2);
  p.add_mesh_shape(2);
  p.add_shard_axes(1);
  ASSERT_EQ(errorText(w.write(dir.str())), "");
  for (int rank = 0; rank < 4; ++rank) {
    auto loaded = loadPlan(dir.str(), {}, rank);
    ASSERT_TRUE(bool(loaded)) << errorText(loaded);
    const std::vector<uint8_t> &bytes = (*loaded)->bytes[0];
    ASSERT_EQ(bytes.size(), 4 * sizeof(float));
    float first;
    std::memcpy(&first, bytes.data(), sizeof(float));
    EXPECT_EQ(first, rank % 2 == 0 ? 1.0f : 5.0f) << "rank " << rank;
  }
}

TEST(PlanIOTest, RejectsInvalidRankMesh) {
  expectShardedRejected(
      [](Plan &p) {
        p.add_mesh_shape(2);
        p.add_mesh_shape(2);
      },
      {"mesh_shape holds 4 ranks, but the world size is 2"});
  expectShardedRejected(
      [](Plan &p) {
        p.set_world_size(4);
        p.add_mesh_shape(2);
        p.add_mesh_shape(0);
      },
      {"mesh_shape has an axis of 0 ranks"});
  expectShardedRejected(
      [](Plan &p) {
        p.set_world_size(4);
        p.add_mesh_shape(2);
        p.add_mesh_shape(2);
        p.add_shard_axes(2);
      },
      {"shard_axes must be increasing axes of the 2-d mesh"});
  // Shards spread over a group of 2 of the 4 ranks: the buffer's 2 shards
  // fit, but shard_count 2 with the shards along both axes (4) does not.
  expectShardedRejected(
      [](Plan &p) {
        p.set_world_size(4);
        p.add_mesh_shape(2);
        p.add_mesh_shape(2);
      },
      {"shard_count 2 differs from the plan's shard count 4"});
}

TEST(PlanIOTest, ChecksTheGroupOfCollectives) {
  auto hybrid = [](Plan &p) {
    p.set_world_size(4);
    p.add_mesh_shape(2);
    p.add_mesh_shape(2);
    p.add_shard_axes(1);
  };
  EXPECT_EQ(loadMutatedShardedPlan([&](Plan &p) {
              hybrid(p);
              addShardSlice(p, 2, {1});
            }).first,
            "");
  expectShardedRejected(
      [&](Plan &p) {
        hybrid(p);
        addShardSlice(p, 4, {1});
      },
      {"ShardSlice 'slice'",
       "'world_size' must be the size of its rank group, 2"});
  expectShardedRejected(
      [&](Plan &p) {
        hybrid(p);
        addShardSlice(p, 2);
      },
      {"'world_size' must be the plan's world size 4"});
  expectShardedRejected(
      [&](Plan &p) {
        hybrid(p);
        addShardSlice(p, 2, {2});
      },
      {"'mesh_axes' must be increasing axes of the 2-d rank mesh"});
}

TEST(PlanIOTest, RejectsCollectiveWorldSizeMismatch) {
  expectShardedRejected(
      [](Plan &p) { addShardSlice(p, 3); },
      {"ShardSlice 'slice'", "'world_size' must be the plan's world size 2"});
}

//===----------------------------------------------------------------------===//
// Digests for the cross-rank check.
//===----------------------------------------------------------------------===//

namespace {

/// Writes the valid training plan (mutated) and returns its digest.
PlanDigest digest(const std::function<void(Plan &)> &mutate,
                  float biasScale = 1.0f) {
  TempDir dir;
  PlanWriter w;
  float bias[3] = {kBias[0] * biasScale, kBias[1], kBias[2]};
  int32_t x = w.addBuffer("x", rt::DType::F32, {2, 2}, INPUT);
  int32_t wt = cantFail(w.addDataBuffer("w", rt::DType::F32, {2, 3}, PARAMETER,
                                        bytesOf(kWeights, sizeof kWeights)));
  cantFail(w.addDataBuffer("s", rt::DType::I64, {2}, CONSTANT,
                           bytesOf(kShapeConst, sizeof kShapeConst)));
  int32_t b = cantFail(w.addDataBuffer("b", rt::DType::F32, {3}, PARAMETER,
                                       bytesOf(bias, sizeof bias)));
  int32_t y = w.addBuffer("y", rt::DType::F32, {2, 3}, TEMP);
  int32_t z = w.addBuffer("z", rt::DType::F32, {2, 3}, TEMP);
  Plan &p = w.plan();
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
  Op *relu = p.add_ops();
  relu->set_type("Relu");
  relu->set_name("act");
  relu->add_inputs(y);
  relu->add_outputs(z);
  p.add_inputs(x);
  p.add_outputs(z);
  p.add_outputs(y);
  makeTraining(p);
  addAdam(p);
  mutate(p);
  EXPECT_EQ(errorText(w.write(dir.str())), "");
  auto loaded = loadPlan(dir.str());
  EXPECT_EQ(errorText(loaded), "");
  if (!loaded)
    return {};
  return digestPlan(**loaded);
}

/// The parts in which two digests differ.
std::vector<PlanDigest::Part> differing(const PlanDigest &a,
                                        const PlanDigest &b) {
  std::vector<PlanDigest::Part> parts;
  for (int p = 0; p < PlanDigest::NumParts; ++p)
    if (a.parts[p] != b.parts[p])
      parts.push_back(static_cast<PlanDigest::Part>(p));
  return parts;
}

} // namespace

TEST(PlanDigestTest, NamesWhatDiffers) {
  auto none = [](Plan &) {};
  PlanDigest base = digest(none);
  EXPECT_TRUE(differing(base, digest(none)).empty());
  using P = PlanDigest;
  EXPECT_EQ(
      differing(base, digest([](Plan &p) {
                  findAttr(p.mutable_ops(p.ops_size() - 1), "lr")->set_f(0.001);
                })),
      (std::vector<P::Part>{P::Whole, P::HyperParameters}));
  EXPECT_EQ(
      differing(
          base, digest([](Plan &p) {
            // Adam instead of AdamW.
            p.mutable_training()->set_optimizer("adam");
            findAttr(p.mutable_ops(p.ops_size() - 1), "decoupled")->set_i(0);
          })),
      (std::vector<P::Part>{P::Whole, P::HyperParameters}));
  EXPECT_EQ(differing(base, digest([](Plan &p) {
                        p.mutable_ops(0)->mutable_attributes(0)->set_f(2.0);
                      })),
            (std::vector<P::Part>{P::Whole, P::Schedule}));
  EXPECT_EQ(differing(base, digest(none, 2.0f)),
            (std::vector<P::Part>{P::Whole, P::ParameterData}));
  EXPECT_EQ(differing(base, digest([](Plan &p) { p.set_producer("other"); })),
            (std::vector<P::Part>{P::Whole, P::Metadata}));
}

TEST(PlanDigestTest, DescribesHyperParameters) {
  Plan p;
  p.mutable_training()->set_optimizer("adamw");
  p.mutable_training()->set_micro_batch(8);
  Op *op = addAdam(p);
  Op *op2 = addAdam(p);
  findAttr(op2, "lr")->set_f(0.001);
  (void)op;
  EXPECT_EQ(describeHyperParameters(p),
            "optimizer adamw, micro_batch 8, AdamUpdate lr=0.003|0.001 "
            "beta1=0.9 beta2=0.999 eps=1e-08 weight_decay=0.01 decoupled=1");
}

namespace {
/// Adds a STATE buffer of `elements` float32 elements and returns its index.
int32_t addStateBuffer(Plan &p, const std::string &name, int64_t elements) {
  Buffer *b = p.add_buffers();
  b->set_name(name);
  b->set_dtype(FLOAT32);
  b->add_shape(elements);
  b->set_kind(STATE);
  b->set_category(OPT_STATE);
  return p.buffers_size() - 1;
}

} // namespace

TEST(PlanIOTest, AcceptsUnitOptimizerStateShards) {
  // Stage 3: the parameter shard and an optimizer-state shard of one layout.
  EXPECT_EQ(loadMutatedShardedPlan([](Plan &p) {
              FlatState *s = p.mutable_units(0)->add_states();
              s->set_buffer(addStateBuffer(p, "unit0.exp_avg", 4));
              s->set_suffix(".exp_avg");
            }).first,
            "");
  // Stages 1-2 (no parameter shard, whole parameter buffers) are the plans
  // shardc writes at those stages: every training test loads them.
}

TEST(PlanIOTest, RejectsUnitOptimizerStateMismatch) {
  expectShardedRejected(
      [](Plan &p) {
        FlatState *s = p.mutable_units(0)->add_states();
        s->set_buffer(addStateBuffer(p, "unit0.exp_avg", 3));
        s->set_suffix(".exp_avg");
      },
      {"unit 0 'unit0'", "optimizer state 0 '.exp_avg'", "holds 3 elements",
       "shard of 8 / 2"});
  expectShardedRejected(
      [](Plan &p) {
        FlatState *s = p.mutable_units(0)->add_states();
        s->set_buffer(1);
        s->set_suffix(".exp_avg");
      },
      {"optimizer state 0 '.exp_avg'", "buffer 1 'out'",
       "a TEMP buffer, not a STATE"});
  expectShardedRejected(
      [](Plan &p) {
        int32_t id = addStateBuffer(p, "unit0.m", 4);
        for (int k = 0; k < 2; ++k) {
          FlatState *s = p.mutable_units(0)->add_states();
          s->set_buffer(id);
          s->set_suffix(k ? ".v" : ".m");
        }
      },
      {"optimizer state 1 '.v'", "belongs to another unit too"});
  expectShardedRejected(
      [](Plan &p) {
        FlatState *s = p.mutable_units(0)->add_states();
        s->set_buffer(addStateBuffer(p, "unit0.m", 4));
      },
      {"optimizer state 0 ''", "suffix is empty or repeated"});
  expectShardedRejected([](Plan &p) { p.mutable_units(0)->set_buffer(-1); },
                        {"unit 0 'unit0'", "neither a parameter buffer nor "
                                           "optimizer state"});
  expectShardedRejected(
      [](Plan &p) {
        FlatUnit *u = p.mutable_units(0);
        u->set_buffer(-1);
        FlatState *s = u->add_states();
        s->set_buffer(addStateBuffer(p, "unit0.m", 4));
        s->set_suffix(".m");
      },
      {"parameter 0 'a'", "no PARAMETER buffer of this name and shape"});
}

//===----------------------------------------------------------------------===//
// The offload tier: no kernel can reach an offloaded buffer.
//===----------------------------------------------------------------------===//

TEST(PlanIOTest, RejectsKernelReadingTheOffloadTier) {
  expectRejected([](Plan &p) { p.mutable_buffers(1)->set_offloaded(true); },
                 {"op 0", "Gemm", "lives in the offload tier",
                  "only OffloadReadStart reads it"});
}

TEST(PlanIOTest, RejectsOffloadedInput) {
  expectRejected([](Plan &p) { p.mutable_buffers(0)->set_offloaded(true); },
                 {"cannot live in the offload tier"});
}

TEST(PlanIOTest, RejectsTransferFromMemory) {
  // A "read" from a buffer in memory (y) into z.
  expectRejected(
      [](Plan &p) { p.mutable_ops(1)->set_type("OffloadReadStart"); },
      {"must read an offloaded buffer into one in memory"});
}

TEST(PlanIOTest, RejectsViewIntoTheOffloadTier) {
  expectRejected(
      [](Plan &p) {
        p.mutable_buffers(1)->set_offloaded(true);
        Buffer *z = p.mutable_buffers(5);
        z->set_is_alias(true);
        z->set_alias_of(1);
        z->set_alias_offset(0);
      },
      {"a view into", "which lives in the offload tier"});
}
