//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
#include "runtime/Npy.h"
#include "runtime/kernels/CastOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SwapByteOrder.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <fcntl.h>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace shardc::rt {

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

Error makeError(const Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// The header dict of a .npy file as written by numpy.
struct NpyHeader {
  std::optional<std::string> descr;
  std::optional<bool> fortranOrder;
  std::optional<std::vector<int64_t>> shape;
};

/// A recursive-descent parser for the subset of Python literals numpy writes
/// into a header: a dict of string keys to strings, booleans and tuples of
/// non-negative integers.
class HeaderParser {
public:
  explicit HeaderParser(StringRef text) : text(text) {}

  Expected<NpyHeader> parse() {
    NpyHeader h;
    skipSpace();
    if (!consume('{'))
      return fail("expected '{'");
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      Expected<std::string> key = parseString();
      if (!key)
        return key.takeError();
      skipSpace();
      if (!consume(':'))
        return fail("expected ':' after key '" + *key + "'");
      skipSpace();
      if (*key == "descr") {
        if (h.descr)
          return fail("duplicate key 'descr'");
        if (peek() != '\'' && peek() != '"')
          return fail("'descr' must be a string (structured types are not "
                      "supported)");
        Expected<std::string> v = parseString();
        if (!v)
          return v.takeError();
        h.descr = *v;
      } else if (*key == "fortran_order") {
        if (h.fortranOrder)
          return fail("duplicate key 'fortran_order'");
        if (text.substr(pos).starts_with("True")) {
          h.fortranOrder = true;
          pos += 4;
        } else if (text.substr(pos).starts_with("False")) {
          h.fortranOrder = false;
          pos += 5;
        } else {
          return fail("'fortran_order' must be True or False");
        }
      } else if (*key == "shape") {
        if (h.shape)
          return fail("duplicate key 'shape'");
        Expected<std::vector<int64_t>> v = parseTuple();
        if (!v)
          return v.takeError();
        h.shape = std::move(*v);
      } else {
        return fail("unexpected key '" + *key + "'");
      }
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume('}'))
        break;
      return fail("expected ',' or '}'");
    }
    skipSpace();
    if (pos != text.size())
      return fail("unexpected text after the header dict");
    if (!h.descr)
      return fail("missing key 'descr'");
    if (!h.fortranOrder)
      return fail("missing key 'fortran_order'");
    if (!h.shape)
      return fail("missing key 'shape'");
    return h;
  }

private:
  char peek() const { return pos < text.size() ? text[pos] : '\0'; }
  bool consume(char c) {
    if (peek() != c)
      return false;
    ++pos;
    return true;
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  Error fail(const Twine &msg) {
    return makeError(msg + " at column " + Twine(pos + 1));
  }

  Expected<std::string> parseString() {
    char quote = peek();
    if (quote != '\'' && quote != '"')
      return fail("expected a quoted string");
    ++pos;
    size_t end = text.find(quote, pos);
    if (end == StringRef::npos)
      return fail("unterminated string");
    std::string s = text.substr(pos, end - pos).str();
    pos = end + 1;
    return s;
  }

  Expected<std::vector<int64_t>> parseTuple() {
    std::vector<int64_t> dims;
    if (!consume('('))
      return fail("'shape' must be a tuple");
    while (true) {
      skipSpace();
      if (consume(')'))
        return dims;
      size_t start = pos;
      while (pos < text.size() && llvm::isDigit(text[pos]))
        ++pos;
      // numpy writes plain ints; tolerate the 'L' suffix of Python 2.
      StringRef digits = text.slice(start, pos);
      if (peek() == 'L')
        ++pos;
      int64_t dim = 0;
      if (digits.empty())
        return fail("shape dimensions must be non-negative integers");
      if (digits.getAsInteger(10, dim))
        return fail("shape dimension " + digits + " is too large");
      dims.push_back(dim);
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume(')'))
        return dims;
      return fail("expected ',' or ')' in 'shape'");
    }
  }

  StringRef text;
  size_t pos = 0;
};

/// The dtype for a .npy type string, or an error explaining why not.
Expected<DType> dtypeFromDescr(StringRef descr) {
  if (descr.size() < 2)
    return makeError("unsupported dtype '" + descr + "'");
  char order = descr[0];
  StringRef code = descr.drop_front();
  static const struct {
    StringRef code;
    DType dtype;
  } table[] = {{"f4", DType::F32}, {"f8", DType::F64},  {"i8", DType::I64},
               {"i4", DType::I32}, {"b1", DType::Bool}, {"u1", DType::U8},
               {"i1", DType::I8},  {"f2", DType::F16}};
  for (const auto &entry : table) {
    if (code != entry.code)
      continue;
    bool single = dtypeSize(entry.dtype) == 1;
    // One-byte types have no byte order; numpy writes '|'.
    if (order == '<' || order == '|' ||
        (single && (order == '>' || order == '=')))
      return entry.dtype;
    if (order == '=' && llvm::sys::IsLittleEndianHost)
      return entry.dtype;
    if (order == '>')
      return makeError("big-endian dtype '" + descr +
                       "' is not supported; save it as little-endian, e.g. "
                       "arr.astype('<" +
                       code + "')");
    break;
  }
  return makeError("unsupported dtype '" + descr +
                   "' (supported: <f4 <f8 <f2 <i8 <i4 |i1 |u1 |b1)");
}

template <typename T> T readLE(const uint8_t *p) {
  return llvm::support::endian::read<T, llvm::endianness::little>(p);
}

} // namespace

StringRef npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::F16:
    return "<f2";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::I8:
    return "|i1";
  case DType::U8:
    return "|u1";
  case DType::Bool:
    return "|b1";
  case DType::BF16: // none: written as float32 (encodeNpy, writeNpy)
  case DType::Undefined:
    return "";
  }
  return "";
}

Expected<NpyArray> parseNpy(llvm::ArrayRef<uint8_t> bytes, StringRef name) {
  static_assert(llvm::sys::IsLittleEndianHost,
                ".npy element data is copied as-is: little-endian hosts only");
  auto bad = [&](const Twine &why) {
    return makeError(name + " is not a valid .npy file: " + why);
  };
  if (bytes.size() < kMagicLen + 2 ||
      std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
    return bad("missing the \\x93NUMPY magic");
  uint8_t major = bytes[kMagicLen], minor = bytes[kMagicLen + 1];
  size_t lenBytes;
  if (major == 1 && minor == 0)
    lenBytes = 2;
  else if ((major == 2 || major == 3) && minor == 0)
    lenBytes = 4;
  else
    return bad("unsupported format version " + Twine(unsigned(major)) + "." +
               Twine(unsigned(minor)));
  size_t prefix = kMagicLen + 2 + lenBytes;
  if (bytes.size() < prefix)
    return bad("the file ends inside the header");
  uint64_t headerLen = lenBytes == 2
                           ? readLE<uint16_t>(bytes.data() + kMagicLen + 2)
                           : readLE<uint32_t>(bytes.data() + kMagicLen + 2);
  if (headerLen > bytes.size() - prefix)
    return bad("the header is " + Twine(headerLen) +
               " bytes but the file "
               "ends after " +
               Twine(bytes.size() - prefix));
  StringRef headerText(reinterpret_cast<const char *>(bytes.data()) + prefix,
                       headerLen);
  Expected<NpyHeader> header = HeaderParser(headerText).parse();
  if (!header)
    return bad("malformed header: " + toString(header.takeError()));
  if (*header->fortranOrder)
    return makeError(name + ": Fortran-order arrays are not supported; save "
                            "a C-order array (numpy.ascontiguousarray)");

  Expected<DType> dtype = dtypeFromDescr(*header->descr);
  if (!dtype)
    return makeError(name + ": " + toString(dtype.takeError()));

  NpyArray array;
  array.dtype = *dtype;
  array.shape = std::move(*header->shape);
  int64_t numel = 1;
  for (int64_t d : array.shape)
    if (llvm::MulOverflow(numel, d, numel))
      return bad("shape " + shapeToString(array.shape) + " is too large");
  int64_t dataBytes;
  if (llvm::MulOverflow(numel, static_cast<int64_t>(dtypeSize(*dtype)),
                        dataBytes))
    return bad("shape " + shapeToString(array.shape) + " is too large");

  size_t dataStart = prefix + headerLen;
  uint64_t available = bytes.size() - dataStart;
  if (available < static_cast<uint64_t>(dataBytes))
    return makeError(name + ": truncated data: " + dtypeName(*dtype) + " " +
                     shapeToString(array.shape) + " needs " + Twine(dataBytes) +
                     " bytes, the file has " + Twine(available));
  if (available > static_cast<uint64_t>(dataBytes))
    return makeError(name + ": " + Twine(available - dataBytes) +
                     " unexpected bytes after the data of " +
                     dtypeName(*dtype) + " " + shapeToString(array.shape));
  array.data.assign(bytes.begin() + dataStart, bytes.end());
  // numpy booleans are 0 or 1; kernels rely on that.
  if (array.dtype == DType::Bool)
    for (uint8_t &b : array.data)
      b = b != 0;
  return std::move(array);
}

Expected<NpyArray> readNpy(StringRef path) {
  // Only a regular file is read, and only as many bytes as it has: a FIFO
  // would block and a device (/dev/zero) never ends. O_NONBLOCK keeps the
  // open itself from waiting for a FIFO's writer.
  std::string p = path.str();
  int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return makeError("cannot read " + path + ": " +
                     std::error_code(errno, std::generic_category()).message());
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError("cannot read " + path +
                     ": not a regular file (a .npy must be a plain file, not "
                     "a pipe, device or directory)");
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getOpenFile(fd, path, st.st_size,
                                      /*RequiresNullTerminator=*/false);
  ::close(fd);
  if (!file)
    return makeError("cannot read " + path + ": " + file.getError().message());
  StringRef buf = (*file)->getBuffer();
  return parseNpy(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(buf.data()),
                              buf.size()),
      path);
}

namespace {

/// The magic, version, header length and padded header dict of a .npy file
/// for a C-order array; `dataBytes` receives the size of the data part.
Expected<std::string> npyHeader(DType dtype, llvm::ArrayRef<int64_t> shape,
                                const void *data, uint64_t &dataBytes) {
  StringRef descr = npyDescr(dtype);
  if (descr.empty())
    return makeError("cannot write an array of undefined element type");
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return makeError("cannot write an array of shape " +
                       shapeToString(shape));
    if (llvm::MulOverflow(numel, d, numel))
      return makeError("shape " + shapeToString(shape) + " is too large");
  }
  int64_t bytes;
  if (llvm::MulOverflow(numel, static_cast<int64_t>(dtypeSize(dtype)), bytes))
    return makeError("shape " + shapeToString(shape) + " is too large");
  if (bytes > 0 && !data)
    return makeError("no data for " + dtypeName(dtype) + " " +
                     shapeToString(shape));
  dataBytes = static_cast<uint64_t>(bytes);

  std::string dict =
      "{'descr': '" + descr.str() + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      dict += ", ";
    dict += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    dict += ",";
  dict += "), }";

  // Pad with spaces and a final newline so that the data starts at a
  // multiple of 64 bytes, as numpy does.
  auto padded = [&](size_t prefix) {
    size_t total = prefix + dict.size() + 1;
    return (total + 63) / 64 * 64 - prefix;
  };
  size_t lenBytes = 2;
  char major = 1;
  size_t headerLen = padded(kMagicLen + 2 + 2);
  if (headerLen > 0xffff) {
    lenBytes = 4;
    major = 2;
    headerLen = padded(kMagicLen + 2 + 4);
  }
  std::string out(kMagic, kMagicLen);
  out.push_back(major);
  out.push_back(0);
  for (size_t i = 0; i < lenBytes; ++i)
    out.push_back(static_cast<char>((headerLen >> (8 * i)) & 0xff));
  out += dict;
  out.append(headerLen - dict.size() - 1, ' ');
  out.push_back('\n');
  return out;
}

} // namespace

/// A bfloat16 tensor's values as float32.
static std::vector<float> widenBfloat16(llvm::ArrayRef<int64_t> shape,
                                        const void *data) {
  std::vector<float> out(static_cast<size_t>(numElements(shape)));
  const auto *h = static_cast<const uint16_t *>(data);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = ops::bfloat16ToFloat(h[i]);
  return out;
}

void adaptNpyToInput(NpyArray &arr, DType want) {
  if (want != DType::BF16 || arr.dtype != DType::F32)
    return;
  size_t n = static_cast<size_t>(arr.numel());
  std::vector<uint8_t> out(n * 2);
  for (size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, arr.data.data() + i * 4, 4);
    uint16_t h = ops::floatToBfloat16(f);
    std::memcpy(out.data() + i * 2, &h, 2);
  }
  arr.data = std::move(out);
  arr.dtype = DType::BF16;
}

Expected<std::vector<uint8_t>>
encodeNpy(DType dtype, llvm::ArrayRef<int64_t> shape, const void *data) {
  if (dtype == DType::BF16) {
    std::vector<float> wide = widenBfloat16(shape, data);
    return encodeNpy(DType::F32, shape, wide.data());
  }
  uint64_t dataBytes = 0;
  Expected<std::string> header = npyHeader(dtype, shape, data, dataBytes);
  if (!header)
    return header.takeError();
  std::vector<uint8_t> out(header->begin(), header->end());
  const uint8_t *p = static_cast<const uint8_t *>(data);
  if (dataBytes > 0)
    out.insert(out.end(), p, p + dataBytes);
  return std::move(out);
}

Error writeNpy(StringRef path, DType dtype, llvm::ArrayRef<int64_t> shape,
               const void *data) {
  if (dtype == DType::BF16) {
    std::vector<float> wide = widenBfloat16(shape, data);
    return writeNpy(path, DType::F32, shape, wide.data());
  }
  uint64_t dataBytes = 0;
  Expected<std::string> header = npyHeader(dtype, shape, data, dataBytes);
  if (!header)
    return makeError("cannot write " + path + ": " +
                     toString(header.takeError()));
  Error err = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
    os << *header;
    if (dataBytes > 0)
      os.write(static_cast<const char *>(data), dataBytes);
    return Error::success();
  });
  if (err)
    return makeError("cannot write " + path + ": " + toString(std::move(err)));
  return Error::success();
}

} // namespace shardc::rt
