//===- NpyTest.cpp - Reading and writing .npy files -----------------------===//
#include "runtime/Npy.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cstring>

using namespace shardc;
using namespace shardc::rt;

namespace {

class TempDir {
public:
  TempDir() {
    std::error_code ec =
        llvm::sys::fs::createUniqueDirectory("shard-npy-test", path);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<256> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

private:
  llvm::SmallString<256> path;
};

template <typename T> std::string errorText(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}
std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

void writeFile(const std::string &path, llvm::StringRef contents) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << ec.message();
  os << contents;
}

std::string readFile(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, false, false);
  EXPECT_TRUE(bool(buf));
  return buf ? (*buf)->getBuffer().str() : std::string();
}

/// A .npy file with the given version and header dict (padded like numpy)
/// followed by `data`.
std::string makeNpy(llvm::StringRef dict, llvm::StringRef data, int major = 1) {
  std::string header = dict.str();
  size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  size_t n = header.size();
  out += char(n & 0xff);
  out += char((n >> 8) & 0xff);
  if (major != 1) {
    out += char((n >> 16) & 0xff);
    out += char((n >> 24) & 0xff);
  }
  return out + header + data.str();
}

template <typename T>
void roundTrip(DType dtype, std::vector<int64_t> shape, std::vector<T> values,
               llvm::StringRef descr) {
  TempDir dir;
  std::string path = dir.file("a.npy");
  ASSERT_EQ(errorText(writeNpy(path, dtype, shape, values.data())), "");

  // The header is exactly what numpy writes: 64-byte aligned data.
  std::string raw = readFile(path);
  ASSERT_GE(raw.size(), 10u);
  EXPECT_EQ(raw.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t headerLen = uint8_t(raw[8]) | (uint8_t(raw[9]) << 8);
  EXPECT_EQ((10 + headerLen) % 64, 0u);
  EXPECT_NE(raw.find("'descr': '" + descr.str() + "'"), std::string::npos);
  EXPECT_EQ(raw[10 + headerLen - 1], '\n');

  auto array = readNpy(path);
  ASSERT_EQ(errorText(array), "");
  EXPECT_EQ(array->dtype, dtype);
  EXPECT_EQ(array->shape, shape);
  ASSERT_EQ(array->data.size(), values.size() * sizeof(T));
  if (!values.empty()) {
    EXPECT_EQ(
        std::memcmp(array->data.data(), values.data(), array->data.size()), 0);
  }
  TensorView v = array->view();
  EXPECT_EQ(v.dtype, dtype);
  EXPECT_EQ(v.numel(), static_cast<int64_t>(values.size()));
}

TEST(NpyTest, RoundTripFloat32) {
  roundTrip<float>(DType::F32, {2, 3}, {1.5f, -2, 3, 4, 5, 6e-7f}, "<f4");
}
TEST(NpyTest, RoundTripFloat64) {
  roundTrip<double>(DType::F64, {3}, {1.0 / 3, -2, 1e300}, "<f8");
}
TEST(NpyTest, RoundTripFloat16) {
  roundTrip<uint16_t>(DType::F16, {2}, {0x3c00, 0xc000}, "<f2");
}
// .npy has no bfloat16: a bfloat16 tensor is encoded as float32 (exactly),
// and a float32 array fed to a bfloat16 input is rounded to nearest even.
TEST(NpyTest, Bfloat16TravelsAsFloat32) {
  std::vector<uint16_t> bits = {0x3fc0, 0xc000, 0x3f82};
  llvm::Expected<std::vector<uint8_t>> bytes =
      encodeNpy(DType::BF16, {3}, bits.data());
  ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
  llvm::Expected<NpyArray> array = parseNpy(*bytes, "bf16.npy");
  ASSERT_TRUE(bool(array)) << llvm::toString(array.takeError());
  ASSERT_EQ(array->dtype, DType::F32);
  std::vector<float> values(3);
  std::memcpy(values.data(), array->data.data(), 12);
  EXPECT_EQ(values, (std::vector<float>{1.5f, -2.0f, 1.0f + 1.0f / 64}));
  // 1 + 2^-8 is a tie: to even, 1.
  float tie = 1.0f + 1.0f / 256;
  std::memcpy(array->data.data() + 8, &tie, 4);
  adaptNpyToInput(*array, DType::BF16);
  ASSERT_EQ(array->dtype, DType::BF16);
  ASSERT_EQ(array->data.size(), 6u);
  std::vector<uint16_t> back(3);
  std::memcpy(back.data(), array->data.data(), 6);
  EXPECT_EQ(back, (std::vector<uint16_t>{0x3fc0, 0xc000, 0x3f80}));
  // Anything else is left for the input's own type check.
  NpyArray ints;
  ints.dtype = DType::I64;
  adaptNpyToInput(ints, DType::BF16);
  EXPECT_EQ(ints.dtype, DType::I64);
}
TEST(NpyTest, RoundTripInt64) {
  roundTrip<int64_t>(DType::I64, {2, 1, 2}, {-1, int64_t(1) << 40, 0, 7},
                     "<i8");
}
TEST(NpyTest, RoundTripInt32) {
  roundTrip<int32_t>(DType::I32, {4}, {-5, 0, 5, 1 << 30}, "<i4");
}
TEST(NpyTest, RoundTripInt8) {
  roundTrip<int8_t>(DType::I8, {3}, {-128, 0, 127}, "|i1");
}
TEST(NpyTest, RoundTripUInt8) {
  roundTrip<uint8_t>(DType::U8, {2, 2}, {0, 1, 200, 255}, "|u1");
}
TEST(NpyTest, RoundTripBool) {
  roundTrip<uint8_t>(DType::Bool, {3}, {1, 0, 1}, "|b1");
}
TEST(NpyTest, RoundTripScalar) {
  roundTrip<double>(DType::F64, {}, {3.5}, "<f8");
  TempDir dir;
  float x = 2.0f;
  ASSERT_EQ(errorText(writeNpy(dir.file("s.npy"), DType::F32, {}, &x)), "");
  EXPECT_NE(readFile(dir.file("s.npy")).find("'shape': (), }"),
            std::string::npos);
}
TEST(NpyTest, RoundTripEmpty) {
  roundTrip<float>(DType::F32, {0, 4}, {}, "<f4");
}
TEST(NpyTest, OneDimensionalShapeHasTrailingComma) {
  TempDir dir;
  int64_t v[2] = {1, 2};
  ASSERT_EQ(errorText(writeNpy(dir.file("v.npy"), DType::I64, {2}, v)), "");
  EXPECT_NE(readFile(dir.file("v.npy")).find("'shape': (2,), }"),
            std::string::npos);
}

/// Exactly the bytes numpy 1.24 writes for np.save(f, np.arange(6,
/// dtype='<f4').reshape(2, 3)).
TEST(NpyTest, ReadsNumpyOutput) {
  std::string data(24, '\0');
  for (int i = 0; i < 6; ++i) {
    float f = float(i);
    std::memcpy(&data[i * 4], &f, 4);
  }
  std::string file = makeNpy(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data);
  ASSERT_EQ(file.size(), 128u + 24u);
  auto array =
      parseNpy(llvm::ArrayRef<uint8_t>(
                   reinterpret_cast<const uint8_t *>(file.data()), file.size()),
               "mem.npy");
  ASSERT_EQ(errorText(array), "");
  EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3}));
  float back[6];
  std::memcpy(back, array->data.data(), 24);
  EXPECT_EQ(back[5], 5.0f);

  // Writing the same array gives the same bytes.
  auto encoded = encodeNpy(DType::F32, {2, 3}, data.data());
  ASSERT_EQ(errorText(encoded), "");
  EXPECT_EQ(std::string(encoded->begin(), encoded->end()), file);
}

TEST(NpyTest, ReadsVersion2AndDoubleQuotes) {
  TempDir dir;
  int32_t v[3] = {7, 8, 9};
  std::string file =
      makeNpy("{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<i4\"}",
              llvm::StringRef(reinterpret_cast<const char *>(v), sizeof v),
              /*major=*/2);
  writeFile(dir.file("v2.npy"), file);
  auto array = readNpy(dir.file("v2.npy"));
  ASSERT_EQ(errorText(array), "");
  EXPECT_EQ(array->dtype, DType::I32);
  EXPECT_EQ(array->shape, (std::vector<int64_t>{3}));
}

TEST(NpyTest, NormalizesBooleans) {
  std::string file =
      makeNpy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
              std::string("\x00\x07", 2));
  auto array =
      parseNpy(llvm::ArrayRef<uint8_t>(
                   reinterpret_cast<const uint8_t *>(file.data()), file.size()),
               "b.npy");
  ASSERT_EQ(errorText(array), "");
  EXPECT_EQ(array->data, (std::vector<uint8_t>{0, 1}));
}

/// Writes `contents` to a file and returns readNpy's error message.
std::string readError(llvm::StringRef contents, std::string &path) {
  static int counter = 0;
  TempDir dir;
  path = dir.file("bad" + std::to_string(counter++) + ".npy");
  writeFile(path, contents);
  auto array = readNpy(path);
  return errorText(array);
}

void expectReadError(llvm::StringRef contents,
                     std::initializer_list<llvm::StringRef> parts) {
  std::string path;
  std::string msg = readError(contents, path);
  ASSERT_NE(msg, "") << "accepted";
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  for (llvm::StringRef part : parts)
    EXPECT_NE(msg.find(part.str()), std::string::npos)
        << "'" << part.str() << "' not in: " << msg;
}

TEST(NpyTest, RejectsMissingFile) {
  auto array = readNpy("/nonexistent/dir/x.npy");
  std::string msg = errorText(array);
  EXPECT_NE(msg.find("cannot read /nonexistent/dir/x.npy"), std::string::npos)
      << msg;
}

TEST(NpyTest, RejectsBadMagic) {
  expectReadError("not a numpy file at all", {"magic"});
  expectReadError("", {"magic"});
}

TEST(NpyTest, RejectsUnknownVersion) {
  std::string f = makeNpy(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "abcd");
  f[6] = 9;
  expectReadError(f, {"version 9.0"});
}

TEST(NpyTest, RejectsHeaderPastEnd) {
  std::string f =
      makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "");
  expectReadError(llvm::StringRef(f).take_front(40), {"header"});
  expectReadError(llvm::StringRef(f).take_front(9), {"header"});
}

TEST(NpyTest, RejectsMalformedHeader) {
  expectReadError(makeNpy("{'descr': '<f4', 'fortran_order': False", ""),
                  {"malformed header"});
  expectReadError(makeNpy("{'descr': '<f4', 'shape': (2,), }", "12345678"),
                  {"missing key 'fortran_order'"});
  expectReadError(
      makeNpy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (), }",
              "1234"),
      {"True or False"});
  expectReadError(
      makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", ""),
      {"non-negative"});
  expectReadError(
      makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "
              "'extra': 1}",
              ""),
      {"unexpected key 'extra'"});
  expectReadError(makeNpy("[1, 2, 3]", ""), {"expected '{'"});
  expectReadError(makeNpy("{'descr': [('a', '<f4')], 'fortran_order': False, "
                          "'shape': (1,), }",
                          "1234"),
                  {"structured"});
  expectReadError(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                          "(99999999999999999999,), }",
                          ""),
                  {"too large"});
  expectReadError(makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                          "(4294967296, 4294967296, 4294967296), }",
                          ""),
                  {"too large"});
}

TEST(NpyTest, RejectsUnsupportedDType) {
  expectReadError(
      makeNpy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
              "12345678"),
      {"unsupported dtype '<c8'"});
  expectReadError(
      makeNpy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
              "1234"),
      {"big-endian", "astype('<f4')"});
}

TEST(NpyTest, RejectsFortranOrder) {
  expectReadError(
      makeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
              std::string(24, '\0')),
      {"Fortran-order", "C-order"});
}

TEST(NpyTest, RejectsTruncatedData) {
  expectReadError(
      makeNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
              std::string(31, '\0')),
      {"truncated data", "float64 [2, 2] needs 32 bytes", "has 31"});
}

TEST(NpyTest, RejectsTrailingBytes) {
  expectReadError(
      makeNpy("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }",
              "abc"),
      {"1 unexpected bytes"});
}

TEST(NpyTest, WriteErrors) {
  TempDir dir;
  float x = 1;
  std::string msg =
      errorText(writeNpy(dir.file("no/such/dir/x.npy"), DType::F32, {1}, &x));
  EXPECT_NE(msg.find("cannot write"), std::string::npos) << msg;
  msg = errorText(writeNpy(dir.file("x.npy"), DType::Undefined, {1}, &x));
  EXPECT_NE(msg.find("undefined element type"), std::string::npos) << msg;
  msg = errorText(writeNpy(dir.file("x.npy"), DType::F32, {-1}, &x));
  EXPECT_NE(msg.find("shape [-1]"), std::string::npos) << msg;
}

} // namespace
