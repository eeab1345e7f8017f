//===- PlanIO.cpp - Writing and loading plan directories ------------------===//
//
// The loader trusts nothing in a plan directory: the manifest and every file
// against it, then every index, shape, byte count, offset, file name and
// checksum is checked before a caller sees the plan, so the executor and the
// kernels can rely on the plan being consistent.
//
//===----------------------------------------------------------------------===//
#include "plan/PlanIO.h"
#include "plan/AsyncOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include "google/protobuf/stubs/common.h"
#if GOOGLE_PROTOBUF_VERSION < 4022000
#include "google/protobuf/stubs/logging.h"
#endif

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>

namespace shardc::plan {

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace {

Error makeError(const Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// "buffer 3 'fc.weight'".
std::string describeBuffer(const Plan &plan, int64_t index) {
  std::string s = "buffer " + std::to_string(index);
  if (index >= 0 && index < plan.buffers_size())
    s += " '" + plan.buffers(static_cast<int>(index)).name() + "'";
  return s;
}

/// "op 5 (Gemm 'fc1')".
std::string describeOp(const Plan &plan, int index) {
  const Op &op = plan.ops(index);
  return "op " + std::to_string(index) + " (" +
         (op.type().empty() ? std::string("<no type>") : op.type()) + " '" +
         op.name() + "')";
}

std::string hex64(uint64_t v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format_hex(v, 18);
  return os.str();
}

std::string formatNumber(double v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.7g", v);
  return os.str();
}

StringRef kindName(int kind) {
  switch (kind) {
  case TEMP:
    return "TEMP";
  case INPUT:
    return "INPUT";
  case PARAMETER:
    return "PARAMETER";
  case CONSTANT:
    return "CONSTANT";
  case STATE:
    return "STATE";
  default:
    return "unknown";
  }
}

bool hasData(const Buffer &b) {
  return b.kind() == PARAMETER || b.kind() == CONSTANT;
}

/// Byte size of a dense tensor of `dtype` and `shape`, or an error when a
/// dimension is negative or its dimensions other than zeros multiply past
/// rt::kMaxElements (an empty tensor's too: the kernels loop over them).
Expected<uint64_t> denseBytes(rt::DType dtype, llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0)
      return makeError("dimension " + Twine(d) + " of shape " +
                       rt::shapeToString(shape) + " is negative");
    if (shape[d] && (llvm::MulOverflow(n, shape[d], n) || n > rt::kMaxElements))
      return makeError("shape " + rt::shapeToString(shape) +
                       (llvm::is_contained(shape, 0)
                            ? " is empty, but its other dimensions multiply "
                              "past 2^46"
                            : " has more than 2^46 elements"));
  }
  if (llvm::is_contained(shape, 0))
    n = 0;
  int64_t bytes = 0;
  if (llvm::MulOverflow(n, static_cast<int64_t>(rt::dtypeSize(dtype)), bytes))
    return makeError("shape " + rt::shapeToString(shape) + " of " +
                     rt::dtypeName(dtype) +
                     " has more bytes than fit in 64 bits");
  if (static_cast<uint64_t>(bytes) > std::numeric_limits<size_t>::max())
    return makeError("shape " + rt::shapeToString(shape) +
                     " is too large for this machine");
  return static_cast<uint64_t>(bytes);
}

/// Opens file `name` of plan directory `dir` (ReadOnlyFile::open).
Expected<std::unique_ptr<ReadOnlyFile>> openPlanFile(StringRef dir,
                                                     StringRef name) {
  return ReadOnlyFile::open(dir, name, "plan");
}

/// "the file is corrupt or does not belong to this plan; recompile ...".
const char *kMismatchAdvice =
    "the file is damaged or does not belong to this plan; recompile the "
    "model with shardc";

/// Checks an open file's size against its manifest entry.
Error checkSize(const ReadOnlyFile &file, const ManifestEntry &entry) {
  if (file.size() != entry.size)
    return makeError(file.path() + " is " + Twine(file.size()) +
                     " bytes, but the manifest lists " + Twine(entry.size) +
                     ": " + kMismatchAdvice);
  return Error::success();
}

Error hashMismatch(const ReadOnlyFile &file, const ManifestEntry &entry,
                   StringRef actual) {
  return makeError(file.path() +
                   " does not match its SHA-256 in the manifest (" +
                   entry.sha256.substr(0, 16) + "..., the file has " +
                   actual.substr(0, 16) + "...): " + kMismatchAdvice);
}

bool isLowerHex64(StringRef s) {
  return s.size() == 64 && llvm::all_of(s, [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

/// A printable, bounded excerpt of untrusted text for messages.
std::string excerpt(StringRef text) {
  std::string s;
  for (char c : text.take_front(40))
    s += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 40)
    s += "...";
  return s;
}

} // namespace

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

const ManifestEntry *Manifest::find(StringRef name) const {
  for (const ManifestEntry &e : files)
    if (e.name == name)
      return &e;
  return nullptr;
}

const ManifestKind kPlanManifest = {"shard-plan", kPlanVersion, kPlanFile,
                                    "plan", "recompile the model with shardc"};

std::string formatManifest(llvm::ArrayRef<ManifestEntry> files,
                           const ManifestKind &kind) {
  std::string text =
      kind.word.str() + " " + std::to_string(kind.version) + "\n";
  for (const ManifestEntry &e : files)
    text += e.name + " " + std::to_string(e.size) + " " + e.sha256 + "\n";
  text += "sha256 " +
          sha256Hex(llvm::ArrayRef<uint8_t>(
              reinterpret_cast<const uint8_t *>(text.data()), text.size())) +
          "\n";
  return text;
}

Expected<Manifest> parseManifest(StringRef text, const ManifestKind &kind) {
  Manifest m;
  if (text.empty())
    return makeError("the manifest is empty");
  if (!text.ends_with("\n"))
    return makeError("the manifest does not end with a line break (it is "
                     "truncated or damaged)");
  StringRef body = text.drop_back();
  llvm::SmallVector<StringRef, 16> lines;
  body.split(lines, '\n');
  StringRef header = lines.front();
  StringRef versionText = header;
  if (!versionText.consume_front(kind.word) || !versionText.consume_front(" "))
    return makeError("not a " + kind.container +
                     " manifest (its first line is '" + excerpt(header) +
                     "', not '" + kind.word + " " + Twine(kind.version) + "')");
  uint32_t version = 0;
  if (versionText.empty() || versionText.size() > 9 ||
      !llvm::all_of(versionText, [](char c) { return c >= '0' && c <= '9'; }) ||
      versionText.getAsInteger(10, version))
    return makeError("the manifest's first line '" + excerpt(header) +
                     "' has no valid " + kind.container + " version");
  if (version != kind.version)
    return makeError("the " + kind.container + " has version " +
                     Twine(version) + ", but this build reads version " +
                     Twine(kind.version) + "; " + kind.advice);
  m.version = version;
  if (lines.size() < 3)
    return makeError("the manifest lists no files");
  StringRef last = lines.back();
  StringRef digest = last;
  if (!digest.consume_front("sha256 ") || !isLowerHex64(digest))
    return makeError("the manifest's last line '" + excerpt(last) +
                     "' is not 'sha256 <64 hex digits>' (the manifest is "
                     "truncated or damaged)");
  size_t signedBytes = text.size() - last.size() - 1;
  std::string actual = sha256Hex(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(text.data()), signedBytes));
  if (actual != digest)
    return makeError("the manifest does not match its own SHA-256 (it is "
                     "damaged); " +
                     kind.advice);
  m.digest = digest.str();
  if (lines.size() - 2 > kMaxManifestFiles)
    return makeError("the manifest lists " + Twine(lines.size() - 2) +
                     " files, more than " + Twine(kMaxManifestFiles));
  for (size_t k = 1; k + 1 < lines.size(); ++k) {
    StringRef line = lines[k];
    llvm::SmallVector<StringRef, 3> fields;
    line.split(fields, ' ');
    auto bad = [&](const Twine &why) {
      return makeError("manifest line " + Twine(k + 1) + " '" + excerpt(line) +
                       "': " + why);
    };
    if (fields.size() != 3)
      return bad("expected '<file> <bytes> <sha256>'");
    ManifestEntry e;
    e.name = fields[0].str();
    if (!isPlainFileName(fields[0]) || fields[0] == kManifestFile)
      return bad("'" + excerpt(fields[0]) +
                 "' is not a plain file name inside the " + kind.container +
                 " directory");
    StringRef size = fields[1];
    if (size.empty() || size.size() > 19 ||
        (size.size() > 1 && size.front() == '0') ||
        !llvm::all_of(size, [](char c) { return c >= '0' && c <= '9'; }) ||
        size.getAsInteger(10, e.size) ||
        e.size > uint64_t(std::numeric_limits<int64_t>::max()))
      return bad("invalid byte count");
    if (!isLowerHex64(fields[2]))
      return bad("invalid SHA-256");
    e.sha256 = fields[2].str();
    if (m.find(e.name))
      return bad("file listed more than once");
    m.files.push_back(std::move(e));
  }
  if (!m.find(kind.required))
    return makeError("the manifest does not list " + kind.required);
  return std::move(m);
}

Expected<std::vector<uint8_t>> readPlanFile(StringRef dir, StringRef name,
                                            uint64_t maxBytes) {
  Expected<std::unique_ptr<ReadOnlyFile>> file = openPlanFile(dir, name);
  if (!file)
    return file.takeError();
  const ReadOnlyFile &f = **file;
  if (f.size() > maxBytes)
    return makeError(f.path() + " is " + Twine(f.size()) +
                     " bytes, more than " + Twine(maxBytes) +
                     " (it is not the plan's, or damaged)");
  std::vector<uint8_t> bytes(static_cast<size_t>(f.size()));
  if (Error err = f.read(0, bytes))
    return std::move(err);
  if (Error err = f.checkEndsAt(f.size()))
    return std::move(err);
  return std::move(bytes);
}

/// The error for a directory without a manifest: an older plan (its plan.pb
/// says which version) or not a complete plan.
static Error missingManifest(StringRef dir, StringRef manifestPath) {
  Expected<std::vector<uint8_t>> old =
      readPlanFile(dir, kPlanFile, uint64_t(64) << 20);
  if (old) {
    Plan p;
    bool parsed;
    {
#if GOOGLE_PROTOBUF_VERSION < 4022000
      google::protobuf::LogSilencer silence;
#endif
      parsed = p.ParseFromArray(old->data(), static_cast<int>(old->size()));
    }
    if (parsed && p.version() != kPlanVersion)
      return makeError("the plan in " + dir + " has version " +
                       Twine(p.version()) + ", but this build reads version " +
                       Twine(kPlanVersion) +
                       "; recompile the model with shardc");
  } else {
    llvm::consumeError(old.takeError());
  }
  return makeError(dir + " is not a complete plan directory: " + manifestPath +
                   " is missing (every plan of version " + Twine(kPlanVersion) +
                   " has one); recompile the model with shardc");
}

Expected<Manifest> readManifest(StringRef dir) {
  Expected<std::vector<uint8_t>> raw =
      readPlanFile(dir, kManifestFile, kMaxManifestBytes);
  if (!raw) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, kManifestFile);
    Error err = raw.takeError();
    bool missing = false;
    err = llvm::handleErrors(
        std::move(err), [&](const llvm::StringError &e) -> Error {
          if (e.convertToErrorCode() ==
              std::error_code(ENOENT, std::generic_category())) {
            missing = true;
            return Error::success();
          }
          return makeError(e.getMessage());
        });
    if (missing)
      return missingManifest(dir, path);
    return std::move(err);
  }
  Expected<Manifest> m = parseManifest(
      StringRef(reinterpret_cast<const char *>(raw->data()), raw->size()));
  if (!m)
    return makeError("the manifest of the plan in " + dir +
                     " is invalid: " + toString(m.takeError()));
  return m;
}

/// Reads file `name` of `dir` whole and checks it against `entry`.
static Expected<std::vector<uint8_t>> readAgainst(StringRef dir,
                                                  const ManifestEntry &entry) {
  Expected<std::unique_ptr<ReadOnlyFile>> file = openPlanFile(dir, entry.name);
  if (!file)
    return file.takeError();
  const ReadOnlyFile &f = **file;
  if (Error err = checkSize(f, entry))
    return std::move(err);
  std::vector<uint8_t> bytes(static_cast<size_t>(f.size()));
  if (Error err = f.read(0, bytes))
    return std::move(err);
  if (Error err = f.checkEndsAt(f.size()))
    return std::move(err);
  std::string actual = sha256Hex(bytes);
  if (actual != entry.sha256)
    return hashMismatch(f, entry, actual);
  return std::move(bytes);
}

Expected<std::vector<uint8_t>> readVerifiedPlanFile(StringRef dir,
                                                    StringRef name) {
  Expected<Manifest> m = readManifest(dir);
  if (!m)
    return m.takeError();
  const ManifestEntry *entry = m->find(name);
  if (!entry)
    return makeError("the manifest of the plan in " + dir + " does not list " +
                     name);
  return readAgainst(dir, *entry);
}

Error resealPlan(StringRef dir) {
  Expected<std::vector<uint8_t>> raw =
      readPlanFile(dir, kManifestFile, kMaxManifestBytes);
  if (!raw)
    return raw.takeError();
  Expected<Manifest> m = parseManifest(
      StringRef(reinterpret_cast<const char *>(raw->data()), raw->size()));
  if (!m)
    return m.takeError();
  for (ManifestEntry &e : m->files) {
    Expected<std::unique_ptr<ReadOnlyFile>> file = openPlanFile(dir, e.name);
    if (!file)
      return file.takeError();
    Expected<std::string> sum = (*file)->sha256((*file)->size());
    if (!sum)
      return sum.takeError();
    e.size = (*file)->size();
    e.sha256 = *sum;
  }
  std::string text = formatManifest(m->files);
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, kManifestFile);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return makeError("cannot write " + path + ": " + ec.message());
  os << text;
  return Error::success();
}

uint64_t fnv1a64(llvm::ArrayRef<uint8_t> data, uint64_t seed) {
  uint64_t h = seed;
  for (uint8_t b : data) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  return h;
}

rt::DType toRuntime(DType t) {
  return rt::dtypeFromCode(static_cast<int64_t>(t))
      .value_or(rt::DType::Undefined);
}

DType fromRuntime(rt::DType t) { return static_cast<DType>(t); }

//===----------------------------------------------------------------------===//
// PlanWriter
//===----------------------------------------------------------------------===//

PlanWriter::PlanWriter() { planMsg.set_version(kPlanVersion); }
PlanWriter::~PlanWriter() = default;

int32_t PlanWriter::addBuffer(StringRef name, rt::DType dtype,
                              llvm::ArrayRef<int64_t> shape, BufferKind kind) {
  Buffer *b = planMsg.add_buffers();
  b->set_name(name.str());
  b->set_dtype(fromRuntime(dtype));
  for (int64_t d : shape)
    b->add_shape(d);
  b->set_kind(kind);
  return planMsg.buffers_size() - 1;
}

Expected<int32_t> PlanWriter::addDataBuffer(StringRef name, rt::DType dtype,
                                            llvm::ArrayRef<int64_t> shape,
                                            BufferKind kind,
                                            llvm::ArrayRef<uint8_t> data,
                                            int64_t shardCount) {
  if (kind != PARAMETER && kind != CONSTANT)
    return makeError("buffer '" + name +
                     "': only PARAMETER and CONSTANT "
                     "buffers carry data, not " +
                     kindName(kind));
  if (rt::dtypeSize(dtype) == 0)
    return makeError("buffer '" + name + "': undefined element type");
  Expected<uint64_t> bytes = denseBytes(dtype, shape);
  if (!bytes)
    return makeError("buffer '" + name + "': " + toString(bytes.takeError()));
  if (shardCount < 1 || (shardCount > 1 && kind != PARAMETER))
    return makeError("buffer '" + name + "': invalid shard count");
  if (shapesOnlyPlan && data.empty()) {
    // Where the bytes would lie, so that the plan validates as written.
    uint64_t &size = kind == PARAMETER ? shapesOnlyParams : shapesOnlyConsts;
    int32_t index = addBuffer(name, dtype, shape, kind);
    Buffer *b = planMsg.mutable_buffers(index);
    b->set_data_file(kind == PARAMETER ? kParamsFile : kConstantsFile);
    b->set_data_offset(size);
    b->set_data_bytes(*bytes * shardCount);
    if (shardCount > 1)
      b->set_shard_count(shardCount);
    size += *bytes * shardCount;
    return index;
  }
  if (*bytes * shardCount != data.size())
    return makeError("buffer '" + name + "': " + Twine(shardCount) + " x " +
                     rt::dtypeName(dtype) + " " + rt::shapeToString(shape) +
                     " needs " + Twine(*bytes * shardCount) + " bytes, got " +
                     Twine(data.size()));

  std::vector<uint8_t> &file = kind == PARAMETER ? params : constants;
  int32_t index = addBuffer(name, dtype, shape, kind);
  Buffer *b = planMsg.mutable_buffers(index);
  b->set_data_file(kind == PARAMETER ? kParamsFile : kConstantsFile);
  b->set_data_offset(file.size());
  b->set_data_bytes(data.size());
  b->set_checksum(fnv1a64(data));
  if (shardCount > 1)
    b->set_shard_count(shardCount);
  file.insert(file.end(), data.begin(), data.end());
  return index;
}

Error PlanWriter::addFile(StringRef name, std::vector<uint8_t> bytes) {
  if (!isPlainFileName(name) || name == kPlanFile || name == kParamsFile ||
      name == kConstantsFile || name == kManifestFile)
    return makeError("cannot add file '" + name +
                     "' to a plan: not a plain file name, or one the plan "
                     "uses itself");
  for (const auto &f : extraFiles)
    if (f.first == name)
      return makeError("file '" + name + "' is added to the plan twice");
  extraFiles.emplace_back(name.str(), std::move(bytes));
  return Error::success();
}

bool PlanWriter::hasFile(StringRef name) const {
  return llvm::any_of(extraFiles,
                      [&](const auto &f) { return f.first == name; });
}

Error PlanWriter::validate() const { return validatePlan(planMsg); }

Error PlanWriter::write(StringRef dir) {
  if (shapesOnlyPlan)
    return makeError("refusing to write a plan without its parameters to " +
                     dir + " (it was built for measuring only)");
  if (Error err = validatePlan(planMsg))
    return makeError("refusing to write an invalid plan to " + dir + ": " +
                     toString(std::move(err)));
  if (planMsg.has_training() && !planMsg.training().source_model().empty()) {
    StringRef model = planMsg.training().source_model();
    if (llvm::none_of(extraFiles,
                      [&](const auto &f) { return f.first == model; }))
      return makeError("refusing to write the plan to " + dir +
                       ": its source model '" + model +
                       "' is not one of the plan's files (add it with "
                       "PlanWriter::addFile)");
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return makeError("cannot create plan directory " + dir + ": " +
                     ec.message());

  std::string planBytes;
  if (!planMsg.SerializeToString(&planBytes))
    return makeError("cannot serialize the plan for " + dir +
                     " (is it larger than 2 GiB?)");

  // Everything goes to temporaries first; the manifest is renamed last, so
  // a plan directory caught half-replaced fails its manifest check instead
  // of mixing old and new files.
  struct Pending {
    std::string tmp, dest;
  };
  llvm::SmallVector<Pending, 5> pending;
  std::vector<ManifestEntry> entries;
  auto cleanup = [&] {
    for (const Pending &p : pending)
      llvm::sys::fs::remove(p.tmp);
  };
  auto stage = [&](StringRef fileName, llvm::ArrayRef<uint8_t> bytes) -> Error {
    llvm::SmallString<256> dest(dir);
    llvm::sys::path::append(dest, fileName);
    Expected<std::string> tmp = writeTemporary(dest, bytes);
    if (!tmp)
      return tmp.takeError();
    pending.push_back({*tmp, std::string(dest)});
    entries.push_back({fileName.str(), bytes.size(), sha256Hex(bytes)});
    return Error::success();
  };
  auto asBytes = [](StringRef s) {
    return llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(s.data()),
                                   s.size());
  };

  Error err = stage(kPlanFile, asBytes(planBytes));
  if (!err)
    err = stage(kParamsFile, params);
  if (!err)
    err = stage(kConstantsFile, constants);
  for (const auto &f : extraFiles)
    if (!err)
      err = stage(f.first, f.second);
  if (!err) {
    std::string manifest = formatManifest(entries);
    llvm::SmallString<256> dest(dir);
    llvm::sys::path::append(dest, kManifestFile);
    Expected<std::string> tmp = writeTemporary(dest, asBytes(manifest));
    if (tmp)
      pending.push_back({*tmp, std::string(dest)});
    else
      err = tmp.takeError();
  }
  if (err) {
    cleanup();
    return err;
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    if (std::error_code ec =
            llvm::sys::fs::rename(pending[i].tmp, pending[i].dest)) {
      for (size_t j = i; j < pending.size(); ++j)
        llvm::sys::fs::remove(pending[j].tmp);
      return makeError("cannot rename " + pending[i].tmp + " to " +
                       pending[i].dest + ": " + ec.message());
    }
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// The rank mesh
//===----------------------------------------------------------------------===//

RankMesh RankMesh::of(const Plan &plan) {
  RankMesh mesh;
  mesh.shape.assign(plan.mesh_shape().begin(), plan.mesh_shape().end());
  if (mesh.shape.empty())
    mesh.shape.push_back(std::max<int64_t>(plan.world_size(), 1));
  mesh.shardAxes.assign(plan.shard_axes().begin(), plan.shard_axes().end());
  if (mesh.shardAxes.empty())
    mesh.shardAxes = mesh.allAxes();
  return mesh;
}

std::vector<int32_t> RankMesh::allAxes() const {
  std::vector<int32_t> axes(shape.size());
  for (size_t a = 0; a < axes.size(); ++a)
    axes[a] = static_cast<int32_t>(a);
  return axes;
}

int64_t RankMesh::worldSize() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t RankMesh::groupSize(llvm::ArrayRef<int32_t> axes) const {
  int64_t n = 1;
  for (int32_t a : axes)
    n *= shape[a];
  return n;
}

int64_t RankMesh::indexIn(int64_t rank, llvm::ArrayRef<int32_t> axes) const {
  // Row-major coordinates, the last axis fastest.
  std::vector<int64_t> coord(shape.size());
  for (size_t a = shape.size(); a-- > 0;) {
    coord[a] = rank % shape[a];
    rank /= shape[a];
  }
  int64_t index = 0;
  for (int32_t a : axes)
    index = index * shape[a] + coord[a];
  return index;
}

int64_t RankMesh::groupOf(int64_t rank, llvm::ArrayRef<int32_t> axes) const {
  std::vector<int32_t> others;
  for (int32_t a : allAxes())
    if (!llvm::is_contained(axes, a))
      others.push_back(a);
  return indexIn(rank, others);
}

std::string RankMesh::describe() const {
  if (shape.size() == 1 && shardAxes.size() == 1)
    return "";
  std::string text;
  for (size_t a = 0; a < shape.size(); ++a)
    text += (a ? " x " : "") + std::to_string(shape[a]);
  text += " (shards along axis";
  text += shardAxes.size() == 1 ? " " : "es ";
  for (size_t k = 0; k < shardAxes.size(); ++k)
    text += (k ? ", " : "") + std::to_string(shardAxes[k]);
  return text + ")";
}

std::vector<int32_t> collectiveAxes(const Op &op, const RankMesh &mesh) {
  for (const Attribute &attr : op.attributes())
    if (attr.name() == "mesh_axes" && attr.value_case() == Attribute::kInts)
      return std::vector<int32_t>(attr.ints().values().begin(),
                                  attr.ints().values().end());
  return mesh.allAxes();
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

namespace {

/// How an optimizer op's attribute is checked.
enum class HyperKind {
  NonNegative, ///< a finite float >= 0
  Beta,        ///< a float in [0, 1)
  Finite,      ///< a finite float
  Flag,        ///< an int, 0 or 1
  Schedule,    ///< a string: constant, linear or cosine
  Count,       ///< an int >= 0
  Ratio,       ///< a float in [0, 1]
};
struct HyperAttr {
  const char *name;
  HyperKind kind;
  /// Present on every op (else optional: the learning-rate schedule).
  bool required = true;
};
const HyperAttr kAdamAttrs[] = {{"lr", HyperKind::NonNegative},
                                {"beta1", HyperKind::Beta},
                                {"beta2", HyperKind::Beta},
                                {"eps", HyperKind::NonNegative},
                                {"weight_decay", HyperKind::NonNegative},
                                {"decoupled", HyperKind::Flag},
                                {"lr_schedule", HyperKind::Schedule, false},
                                {"warmup_steps", HyperKind::Count, false},
                                {"decay_steps", HyperKind::Count, false},
                                {"min_lr_ratio", HyperKind::Ratio, false}};
const HyperAttr kSgdAttrs[] = {{"lr", HyperKind::NonNegative},
                               {"momentum", HyperKind::NonNegative},
                               {"dampening", HyperKind::Finite},
                               {"weight_decay", HyperKind::NonNegative},
                               {"nesterov", HyperKind::Flag},
                               {"lr_schedule", HyperKind::Schedule, false},
                               {"warmup_steps", HyperKind::Count, false},
                               {"decay_steps", HyperKind::Count, false},
                               {"min_lr_ratio", HyperKind::Ratio, false}};

/// LossScale's: its factors and interval (their ranges are the kernel's
/// check; here, that none is renamed or dropped).
const HyperAttr kLossScaleAttrs[] = {{"growth_factor", HyperKind::NonNegative},
                                     {"backoff_factor", HyperKind::NonNegative},
                                     {"growth_interval", HyperKind::Count}};

/// The attributes an optimizer op type (or loss scaling's, LossScale) takes
/// (empty: neither).
llvm::ArrayRef<HyperAttr> optimizerAttrs(StringRef type) {
  if (type == "AdamUpdate")
    return kAdamAttrs;
  if (type == "SGDUpdate")
    return kSgdAttrs;
  if (type == "LossScale")
    return kLossScaleAttrs;
  return {};
}

/// An optimizer op carries exactly its hyper-parameters, each of the right
/// kind and range: a renamed or dropped one would silently fall back to a
/// kernel default.
Error validateOptimizerOp(const Plan &plan, int index) {
  const Op &op = plan.ops(index);
  llvm::ArrayRef<HyperAttr> schema = optimizerAttrs(op.type());
  std::string what = describeOp(plan, index);
  std::string names;
  for (const HyperAttr &h : schema)
    names += (names.empty() ? "" : ", ") + std::string(h.name);
  for (const Attribute &attr : op.attributes()) {
    const HyperAttr *h = llvm::find_if(
        schema, [&](const HyperAttr &x) { return attr.name() == x.name; });
    if (h == schema.end())
      return makeError(what + ": unknown attribute '" + attr.name() + "' (" +
                       op.type() + " takes " + names + ")");
    std::string a = what + ": attribute '" + attr.name() + "'";
    if (h->kind == HyperKind::Flag) {
      if (attr.value_case() != Attribute::kI ||
          (attr.i() != 0 && attr.i() != 1))
        return makeError(a + " must be an int 0 or 1");
      continue;
    }
    if (h->kind == HyperKind::Schedule) {
      if (attr.value_case() != Attribute::kS ||
          (attr.s() != "constant" && attr.s() != "linear" &&
           attr.s() != "cosine"))
        return makeError(a + " must be constant, linear or cosine");
      continue;
    }
    if (h->kind == HyperKind::Count) {
      if (attr.value_case() != Attribute::kI || attr.i() < 0)
        return makeError(a + " must be an int >= 0");
      continue;
    }
    if (attr.value_case() != Attribute::kF)
      return makeError(a + " must be a float");
    double v = attr.f();
    bool ok = std::isfinite(v);
    if (h->kind == HyperKind::NonNegative)
      ok = ok && v >= 0;
    if (h->kind == HyperKind::Beta)
      ok = ok && v >= 0 && v < 1;
    if (h->kind == HyperKind::Ratio)
      ok = ok && v >= 0 && v <= 1;
    if (!ok)
      return makeError(a + " is " + formatNumber(v) + "; it must be " +
                       (h->kind == HyperKind::Beta     ? "in [0, 1)"
                        : h->kind == HyperKind::Ratio  ? "in [0, 1]"
                        : h->kind == HyperKind::Finite ? "finite"
                                                       : "finite and >= 0"));
  }
  for (const HyperAttr &h : schema)
    if (h.required && llvm::none_of(op.attributes(), [&](const Attribute &x) {
          return x.name() == h.name;
        }))
      return makeError(what + ": attribute '" + h.name + "' is missing (" +
                       op.type() + " takes " + names + ")");
  return Error::success();
}

/// Wrap units (ZeRO stages 1-3): each names a sharded PARAMETER buffer
/// (stage 3) or none (-1: its parameters are whole PARAMETER buffers of the
/// same names and shapes), and optimizer-state shards; its padded size is
/// what the shards hold, and its parameters lie inside it one after another
/// from element 0 (no gap, no overlap), padded by less than one element per
/// shard.
Error validateUnits(const Plan &plan) {
  llvm::StringSet<> paramNames;
  std::vector<bool> usedBuffer(plan.buffers_size(), false);
  const int64_t world = RankMesh::of(plan).shardCount();
  llvm::StringMap<int> buffersByName;
  for (int i = 0; i < plan.buffers_size(); ++i)
    buffersByName.try_emplace(plan.buffers(i).name(), i);
  auto elementsOf = [](const Buffer &b) {
    int64_t n = 1;
    for (int64_t d : b.shape())
      n *= d; // validated: no overflow
    return n;
  };
  for (int u = 0; u < plan.units_size(); ++u) {
    const FlatUnit &unit = plan.units(u);
    std::string what = "unit " + std::to_string(u) + " '" + unit.name() + "'";
    // Shards of the flat layout: the parameter buffer's, else the mesh's.
    int64_t shards = world;
    if (unit.buffer() == -1 && unit.whole())
      return makeError(what + ": a whole unit needs its parameter buffer");
    if (unit.buffer() != -1) {
      if (unit.buffer() < 0 || unit.buffer() >= plan.buffers_size())
        return makeError(what + ": buffer index " + Twine(unit.buffer()) +
                         " is out of range (the plan has " +
                         Twine(plan.buffers_size()) + " buffers)");
      const Buffer &b = plan.buffers(unit.buffer());
      std::string buf = describeBuffer(plan, unit.buffer());
      if (b.kind() != PARAMETER)
        return makeError(what + ": " + buf + " is a " + kindName(b.kind()) +
                         " buffer, not a PARAMETER");
      if (usedBuffer[unit.buffer()])
        return makeError(what + ": " + buf + " belongs to another unit too");
      usedBuffer[unit.buffer()] = true;
      shards = std::max<int64_t>(b.shard_count(), 1);
      int64_t padded;
      if (unit.whole()) {
        // Every rank holds the whole unit, its shard a view of it.
        if (shards != 1 || elementsOf(b) != unit.padded_elements() ||
            unit.padded_elements() <= 0 || unit.padded_elements() % world != 0)
          return makeError(what + ": a whole unit of padded_elements " +
                           Twine(unit.padded_elements()) + " needs " + buf +
                           " to hold them all, unsharded, a multiple of the "
                           "shard count " +
                           Twine(world) + " (it holds " + Twine(shards) +
                           " shard(s) of " + Twine(elementsOf(b)) +
                           " elements)");
        shards = world;
      } else if (llvm::MulOverflow(elementsOf(b), shards, padded) ||
                 padded != unit.padded_elements()) {
        return makeError(what + ": padded_elements is " +
                         Twine(unit.padded_elements()) + ", but " + buf +
                         " holds " + Twine(shards) + " shard(s) of " +
                         Twine(elementsOf(b)) + " elements");
      }
    } else if (unit.states_size() == 0) {
      return makeError(what + ": it has neither a parameter buffer nor "
                              "optimizer state");
    } else if (unit.padded_elements() <= 0 ||
               unit.padded_elements() % world != 0) {
      return makeError(
          what + ": padded_elements " + Twine(unit.padded_elements()) +
          " is not a positive multiple of the shard count " + Twine(world));
    }
    int64_t next = 0; // the parameters tile the unit in order from 0
    for (int k = 0; k < unit.params_size(); ++k) {
      const FlatParam &fp = unit.params(k);
      std::string pw =
          what + ": parameter " + std::to_string(k) + " '" + fp.name() + "'";
      if (fp.name().empty())
        return makeError(pw + ": has no name");
      if (!paramNames.insert(fp.name()).second)
        return makeError(pw + ": another unit parameter has the same name");
      int64_t n = 1;
      for (int64_t d : fp.shape())
        if (d < 0 || llvm::MulOverflow(n, d, n))
          return makeError(pw + ": invalid shape " +
                           rt::shapeToString(llvm::SmallVector<int64_t, 6>(
                               fp.shape().begin(), fp.shape().end())));
      int64_t end;
      if (fp.offset() < 0 || llvm::AddOverflow(fp.offset(), n, end) ||
          end > unit.padded_elements())
        return makeError(pw + ": elements [" + Twine(fp.offset()) + ", +" +
                         Twine(n) + ") lie outside the unit's " +
                         Twine(unit.padded_elements()) + " elements");
      if (fp.offset() != next)
        return makeError(pw + ": starts at element " + Twine(fp.offset()) +
                         ", but the unit's parameters lie one after another "
                         "from element 0 (the previous one ends at " +
                         Twine(next) + ")");
      next = end;
      if (unit.buffer() == -1) {
        // Whole parameters: a PARAMETER buffer of this name and shape.
        auto it = buffersByName.find(fp.name());
        const Buffer *b =
            it == buffersByName.end() ? nullptr : &plan.buffers(it->second);
        if (!b || b->kind() != PARAMETER ||
            !llvm::equal(b->shape(), fp.shape()))
          return makeError(pw + ": the unit has no parameter buffer, but the "
                                "plan has no PARAMETER buffer of this name "
                                "and shape");
      }
    }
    // Padding fills the last shard only: less than one element per shard.
    if (unit.padded_elements() - next >= shards)
      return makeError(what + ": its parameters end at element " + Twine(next) +
                       ", but it has " + Twine(unit.padded_elements()) +
                       " elements in " + Twine(shards) +
                       " shard(s): more padding than the last shard needs");
    llvm::StringSet<> suffixes;
    for (int k = 0; k < unit.states_size(); ++k) {
      const FlatState &fs = unit.states(k);
      std::string sw = what + ": optimizer state " + std::to_string(k) + " '" +
                       fs.suffix() + "'";
      if (fs.suffix().empty() || !suffixes.insert(fs.suffix()).second)
        return makeError(sw + ": its suffix is empty or repeated");
      if (fs.buffer() < 0 || fs.buffer() >= plan.buffers_size())
        return makeError(sw + ": buffer index " + Twine(fs.buffer()) +
                         " is out of range (the plan has " +
                         Twine(plan.buffers_size()) + " buffers)");
      const Buffer &b = plan.buffers(fs.buffer());
      std::string buf = describeBuffer(plan, fs.buffer());
      if (b.kind() != STATE)
        return makeError(sw + ": " + buf + " is a " + kindName(b.kind()) +
                         " buffer, not a STATE");
      if (usedBuffer[fs.buffer()])
        return makeError(sw + ": " + buf + " belongs to another unit too");
      usedBuffer[fs.buffer()] = true;
      int64_t padded;
      if (llvm::MulOverflow(elementsOf(b), shards, padded) ||
          padded != unit.padded_elements())
        return makeError(sw + ": " + buf + " holds " + Twine(elementsOf(b)) +
                         " elements, not the unit's shard of " +
                         Twine(unit.padded_elements()) + " / " + Twine(shards));
    }
  }
  return Error::success();
}

} // namespace

Error validatePlan(const Plan &plan, llvm::ArrayRef<StringRef> knownOpTypes) {
  const int numBuffers = plan.buffers_size();
  auto inRange = [&](int64_t index) {
    return index >= 0 && index < numBuffers;
  };
  if (plan.world_size() < 0 || plan.world_size() > INT_MAX)
    return makeError("world_size " + Twine(plan.world_size()) + " is invalid");
  if (plan.zero_stage() < 0 || plan.zero_stage() > 3)
    return makeError("zero_stage " + Twine(plan.zero_stage()) +
                     " is invalid (0 to 3)");
  const int64_t worldSize = std::max<int64_t>(plan.world_size(), 1);
  if (plan.mesh_shape_size() > 0 || plan.shard_axes_size() > 0) {
    if (plan.mesh_shape_size() == 0 || plan.mesh_shape_size() > 8)
      return makeError("mesh_shape has " + Twine(plan.mesh_shape_size()) +
                       " axes (1 to 8)");
    int64_t ranks = 1;
    for (int64_t d : plan.mesh_shape())
      if (d < 1 || d > INT_MAX || llvm::MulOverflow(ranks, d, ranks))
        return makeError("mesh_shape has an axis of " + Twine(d) + " ranks");
    if (ranks != worldSize)
      return makeError("mesh_shape holds " + Twine(ranks) +
                       " ranks, but the world size is " + Twine(worldSize));
    int32_t previous = -1;
    for (int32_t a : plan.shard_axes()) {
      if (a <= previous || a >= plan.mesh_shape_size())
        return makeError("shard_axes must be increasing axes of the " +
                         Twine(plan.mesh_shape_size()) + "-d mesh, got " +
                         Twine(a) + " after " + Twine(previous));
      previous = a;
    }
  }
  const RankMesh mesh = RankMesh::of(plan);
  const int64_t shardCount = mesh.shardCount();

  // Buffers.
  for (int i = 0; i < numBuffers; ++i) {
    const Buffer &b = plan.buffers(i);
    std::string what = describeBuffer(plan, i);
    rt::DType dtype = toRuntime(b.dtype());
    if (dtype == rt::DType::Undefined)
      return makeError(what + ": unknown element type code " +
                       Twine(static_cast<int>(b.dtype())));
    if (kindName(b.kind()) == "unknown")
      return makeError(what + ": unknown buffer kind " +
                       Twine(static_cast<int>(b.kind())));
    llvm::SmallVector<int64_t, 6> shape(b.shape().begin(), b.shape().end());
    Expected<uint64_t> bytes = denseBytes(dtype, shape);
    if (!bytes)
      return makeError(what + ": " + toString(bytes.takeError()));
    if (b.offloaded() &&
        (b.kind() == INPUT || b.kind() == CONSTANT || b.is_alias()))
      return makeError(what + ": an " + kindName(b.kind()) +
                       (b.is_alias() ? " view" : "") +
                       " buffer cannot live in the offload tier");
    if (b.initial_value() != 0) {
      double v = b.initial_value();
      if (b.kind() != STATE)
        return makeError(what + ": only a STATE buffer has an initial value");
      // In range before any cast (an out-of-range conversion is undefined).
      bool inRange =
          std::isfinite(v) &&
          (dtype == rt::DType::F32
               ? std::fabs(v) <= std::numeric_limits<float>::max()
           : dtype == rt::DType::I32
               ? v >= std::numeric_limits<int32_t>::min() &&
                     v <= std::numeric_limits<int32_t>::max()
           : dtype == rt::DType::I64 ? std::fabs(v) < 9.2233720368547758e18
                                     : true);
      bool exact = inRange && (dtype == rt::DType::F32   ? double(float(v)) == v
                               : dtype == rt::DType::F64 ? true
                                                         : std::trunc(v) == v);
      if (!exact || !(dtype == rt::DType::F32 || dtype == rt::DType::F64 ||
                      dtype == rt::DType::I64 || dtype == rt::DType::I32))
        return makeError(what + ": initial value " +
                         llvm::formatv("{0}", v).str() +
                         " is not exact in its element type");
    }
    if (!hasData(b)) {
      if (!b.data_file().empty() || b.data_bytes() != 0 || b.data_offset() != 0)
        return makeError(what + ": a " + kindName(b.kind()) +
                         " buffer must not name a data file");
      continue;
    }
    if (b.shard_count() < 0 || (b.shard_count() > 1 && b.kind() != PARAMETER))
      return makeError(what + ": shard_count " + Twine(b.shard_count()) +
                       " is invalid (only PARAMETER buffers are sharded)");
    if (b.shard_count() > 1 && b.shard_count() != shardCount)
      return makeError(what + ": shard_count " + Twine(b.shard_count()) +
                       " differs from the plan's shard count " +
                       Twine(shardCount) + " (one shard per rank" +
                       (shardCount != worldSize ? " of a shard group" : "") +
                       ")");
    uint64_t shards = b.shard_count() > 1 ? b.shard_count() : 1;
    if (*bytes != 0 && shards > std::numeric_limits<uint64_t>::max() / *bytes)
      return makeError(what + ": shard_count overflows");
    if (b.data_bytes() != *bytes * shards)
      return makeError(what + ": data_bytes is " + Twine(b.data_bytes()) +
                       " but " + Twine(shards) + " x " + rt::dtypeName(dtype) +
                       " " + rt::shapeToString(shape) + " needs " +
                       Twine(*bytes * shards));
    if (!isPlainFileName(b.data_file()) || b.data_file() == kPlanFile ||
        b.data_file() == kManifestFile)
      return makeError(what + ": data_file '" + b.data_file() +
                       "' is not a plain file name inside the plan directory");
    if (b.data_offset() > std::numeric_limits<uint64_t>::max() - b.data_bytes())
      return makeError(what + ": data_offset " + Twine(b.data_offset()) +
                       " + data_bytes " + Twine(b.data_bytes()) + " overflows");
  }

  // Graph inputs: INPUT buffers, each listed exactly once.
  std::vector<bool> listed(numBuffers, false);
  llvm::StringSet<> inputNames;
  for (int k = 0; k < plan.inputs_size(); ++k) {
    int32_t index = plan.inputs(k);
    if (!inRange(index))
      return makeError("graph input " + Twine(k) + ": buffer index " +
                       Twine(index) + " is out of range (the plan has " +
                       Twine(numBuffers) + " buffers)");
    std::string what = "graph input " + std::to_string(k) + " (" +
                       describeBuffer(plan, index) + ")";
    const Buffer &b = plan.buffers(index);
    if (b.kind() != INPUT)
      return makeError(what + ": is a " + kindName(b.kind()) +
                       " buffer, not an INPUT");
    if (listed[index])
      return makeError(what + ": listed more than once");
    listed[index] = true;
    if (b.name().empty())
      return makeError(what + ": a graph input needs a name");
    if (!inputNames.insert(b.name()).second)
      return makeError(what + ": another graph input has the same name");
  }
  for (int i = 0; i < numBuffers; ++i)
    if (plan.buffers(i).kind() == INPUT && !listed[i])
      return makeError(describeBuffer(plan, i) +
                       ": an INPUT buffer missing from the plan's inputs");

  // Ops, in order: every input defined before use.
  std::vector<bool> defined(numBuffers, false);
  for (int i = 0; i < numBuffers; ++i)
    defined[i] = plan.buffers(i).kind() != TEMP;
  // Views: into a TEMP buffer that is no view itself, inside its bytes. An
  // op may write one (the producers of a concatenation's blocks write
  // them into its result).
  auto rootOf = [&](int32_t index) {
    return plan.buffers(index).is_alias() ? plan.buffers(index).alias_of()
                                          : index;
  };
  for (int i = 0; i < numBuffers; ++i) {
    const Buffer &b = plan.buffers(i);
    if (!b.is_alias())
      continue;
    std::string what = describeBuffer(plan, i);
    if (b.kind() != TEMP || !inRange(b.alias_of()) ||
        plan.buffers(b.alias_of()).is_alias())
      return makeError(what + ": a view must be a TEMP buffer into a buffer "
                              "that is not a view");
    auto size = [&](const Buffer &x) -> uint64_t {
      uint64_t n = 1;
      for (int64_t d : x.shape())
        n *= d;
      return n * rt::dtypeSize(toRuntime(x.dtype()));
    };
    const Buffer &root = plan.buffers(b.alias_of());
    if (root.offloaded())
      return makeError(what + ": a view into " +
                       describeBuffer(plan, b.alias_of()) +
                       ", which lives in the offload tier");
    // Each shard's block: the last one lies furthest in.
    uint64_t last = b.alias_offset();
    if (b.alias_shard_stride() != 0) {
      uint64_t shards = static_cast<uint64_t>(RankMesh::of(plan).shardCount());
      if (b.alias_shard_stride() < size(b) ||
          __builtin_mul_overflow(b.alias_shard_stride(), shards - 1, &last) ||
          __builtin_add_overflow(last, b.alias_offset(), &last))
        return makeError(what + ": shard stride " +
                         Twine(b.alias_shard_stride()) + " of a view of " +
                         Twine(size(b)) + " bytes on " + Twine(shards) +
                         " shards overlaps or overflows");
    }
    if (last > size(root) || size(b) > size(root) - last)
      return makeError(what + ": view [" + Twine(last) + ", +" +
                       Twine(size(b)) + ") leaves " +
                       describeBuffer(plan, b.alias_of()));
  }
  for (int j = 0; j < plan.ops_size(); ++j) {
    const Op &op = plan.ops(j);
    std::string what = describeOp(plan, j);
    if (op.type().empty())
      return makeError(what + ": op has no type");
    if (!knownOpTypes.empty() && !llvm::is_contained(knownOpTypes, op.type()))
      return makeError(what + ": unknown op type '" + op.type() + "'");
    for (int k = 0; k < op.inputs_size(); ++k) {
      int32_t index = op.inputs(k);
      if (index == -1)
        continue;
      if (!inRange(index))
        return makeError(what + ": input " + Twine(k) + " has buffer index " +
                         Twine(index) + ", out of range (the plan has " +
                         Twine(numBuffers) + " buffers)");
      if (!defined[rootOf(index)])
        return makeError(what + ": input " + Twine(k) + " reads " +
                         describeBuffer(plan, index) +
                         " before any earlier op writes it");
    }
    for (int k = 0; k < op.outputs_size(); ++k) {
      int32_t index = op.outputs(k);
      if (index == -1)
        continue;
      if (!inRange(index))
        return makeError(what + ": output " + Twine(k) + " has buffer index " +
                         Twine(index) + ", out of range (the plan has " +
                         Twine(numBuffers) + " buffers)");
      // Parameters and state are updated in place; inputs and constants
      // are never written.
      int kind = plan.buffers(index).kind();
      if (kind == INPUT || kind == CONSTANT)
        return makeError(what + ": output " + Twine(k) + " writes " +
                         describeBuffer(plan, index) + ", a " + kindName(kind) +
                         " buffer");
    }
    // The offload tier holds bytes no kernel can reach: only the transfers
    // (and the wait that finishes a write) touch an offloaded buffer, a read
    // from the tier and a write into it, each between buffers of the same
    // element type and count.
    auto offloaded = [&](int32_t index) {
      return index >= 0 && plan.buffers(index).offloaded();
    };
    std::optional<CollectiveOpKind> async = getCollectiveOpKind(op.type());
    bool isRead = async == CollectiveOpKind::OffloadRead,
         isWrite = async == CollectiveOpKind::OffloadWrite;
    if (isRead || isWrite) {
      if (op.inputs_size() != 1 || op.outputs_size() != 1 || op.inputs(0) < 0 ||
          op.outputs(0) < 0)
        return makeError(what + ": a transfer has one input and one output");
      const Buffer &in = plan.buffers(op.inputs(0)),
                   &out = plan.buffers(op.outputs(0));
      if (offloaded(op.inputs(0)) != isRead ||
          offloaded(op.outputs(0)) != isWrite)
        return makeError(what + (isRead ? ": must read an offloaded buffer "
                                          "into one in memory"
                                        : ": must write a buffer in memory "
                                          "into an offloaded one"));
      auto count = [](const Buffer &x) {
        int64_t n = 1;
        for (int64_t d : x.shape())
          n *= d;
        return n;
      };
      if (in.dtype() != out.dtype() || count(in) != count(out))
        return makeError(what + ": copies " +
                         describeBuffer(plan, op.inputs(0)) + " into " +
                         describeBuffer(plan, op.outputs(0)) +
                         ", of another element type or count");
    } else if (async != CollectiveOpKind::Wait) {
      for (int32_t index : op.inputs())
        if (offloaded(index))
          return makeError(what + " reads " + describeBuffer(plan, index) +
                           ", which lives in the offload tier: only "
                           "OffloadReadStart reads it");
      for (int32_t index : op.outputs())
        if (offloaded(index))
          return makeError(what + " writes " + describeBuffer(plan, index) +
                           ", which lives in the offload tier: only "
                           "OffloadWriteStart writes it");
    }
    // Outputs become defined only after all inputs were checked: an op may
    // not read a TEMP that it writes itself.
    // A written view (a block of a concatenation its producer writes in
    // place) defines its root.
    for (int32_t index : op.outputs())
      if (index != -1)
        defined[rootOf(index)] = true;
    llvm::StringSet<> attrNames;
    for (const Attribute &attr : op.attributes()) {
      if (attr.name().empty())
        return makeError(what + ": an attribute has no name");
      if (!attrNames.insert(attr.name()).second)
        return makeError(what + ": attribute '" + attr.name() +
                         "' appears more than once");
      if (attr.value_case() == Attribute::VALUE_NOT_SET)
        return makeError(what + ": attribute '" + attr.name() +
                         "' has no value");
      // Collectives and shard slices run over a group of the mesh: the
      // axes it spans must be the mesh's, and its size the group's.
      if (attr.name() == "mesh_axes") {
        if (attr.value_case() != Attribute::kInts ||
            attr.ints().values_size() == 0)
          return makeError(what + ": attribute 'mesh_axes' must list mesh "
                                  "axes");
        int64_t previous = -1;
        for (int64_t a : attr.ints().values()) {
          if (a <= previous || a >= static_cast<int64_t>(mesh.shape.size()))
            return makeError(what +
                             ": attribute 'mesh_axes' must be "
                             "increasing axes of the " +
                             Twine(mesh.shape.size()) + "-d rank mesh");
          previous = a;
        }
      }
    }
    for (const Attribute &attr : op.attributes()) {
      if (attr.name() != "world_size")
        continue;
      int64_t group = mesh.groupSize(collectiveAxes(op, mesh));
      if (attr.value_case() != Attribute::kI || attr.i() != group)
        return makeError(what + ": attribute 'world_size' must be the " +
                         (group == worldSize
                              ? Twine("plan's world size ")
                              : Twine("size of its rank group, ")) +
                         Twine(group));
    }
    if (!optimizerAttrs(op.type()).empty())
      if (Error err = validateOptimizerOp(plan, j))
        return err;
  }
  if (Error err = validateUnits(plan))
    return err;

  // Graph outputs.
  if (plan.outputs_size() == 0)
    return makeError("the plan has no outputs");
  for (int k = 0; k < plan.outputs_size(); ++k) {
    int32_t index = plan.outputs(k);
    if (!inRange(index))
      return makeError("graph output " + Twine(k) + ": buffer index " +
                       Twine(index) + " is out of range (the plan has " +
                       Twine(numBuffers) + " buffers)");
    if (!defined[rootOf(index)])
      return makeError("graph output " + Twine(k) + " (" +
                       describeBuffer(plan, index) + "): no op writes it");
    if (plan.buffers(rootOf(index)).offloaded())
      return makeError("graph output " + Twine(k) + " (" +
                       describeBuffer(plan, index) +
                       ") lives in the offload tier");
  }
  if (plan.has_training()) {
    const Training &t = plan.training();
    if (t.loss_output() < 0 || t.loss_output() >= plan.outputs_size())
      return makeError("training: loss output " + Twine(t.loss_output()) +
                       " is out of range (the plan has " +
                       Twine(plan.outputs_size()) + " outputs)");
    const Buffer &loss = plan.buffers(plan.outputs(t.loss_output()));
    int64_t n = 1;
    for (int64_t d : loss.shape())
      n *= d;
    if (n != 1 || loss.dtype() != FLOAT32)
      return makeError("training: the loss (" + loss.name() +
                       ") must be a float32 scalar");
    if (t.has_grad_norm_output()) {
      int32_t g = t.grad_norm_output();
      if (g < 0 || g >= plan.outputs_size() || g == t.loss_output())
        return makeError("training: grad norm output " + Twine(g) +
                         " is out of range or the loss (the plan has " +
                         Twine(plan.outputs_size()) + " outputs)");
      const Buffer &norm = plan.buffers(plan.outputs(g));
      if (norm.shape_size() != 0 || norm.dtype() != FLOAT32)
        return makeError("training: the grad norm (" + norm.name() +
                         ") must be a float32 scalar");
    }
    // Loss scaling's outputs: a float32 scalar and a bool scalar.
    auto checkScalarOutput = [&](bool has, int32_t k, llvm::StringRef what,
                                 DType dtype,
                                 llvm::StringRef typeName) -> llvm::Error {
      if (!has)
        return llvm::Error::success();
      if (k < 0 || k >= plan.outputs_size() || k == t.loss_output())
        return makeError("training: " + what + " output " + Twine(k) +
                         " is out of range or the loss (the plan has " +
                         Twine(plan.outputs_size()) + " outputs)");
      const Buffer &b = plan.buffers(plan.outputs(k));
      if (b.shape_size() != 0 || b.dtype() != dtype)
        return makeError("training: the " + what + " (" + b.name() +
                         ") must be a " + typeName + " scalar");
      return llvm::Error::success();
    };
    if (llvm::Error err =
            checkScalarOutput(t.has_loss_scale_output(), t.loss_scale_output(),
                              "loss scale", FLOAT32, "float32"))
      return err;
    if (llvm::Error err =
            checkScalarOutput(t.has_skipped_output(), t.skipped_output(),
                              "skipped", BOOL, "bool"))
      return err;
    if (t.has_loss_scale_output() && t.has_grad_norm_output() &&
        t.loss_scale_output() == t.grad_norm_output())
      return makeError("training: the loss scale and the grad norm are the "
                       "same output " +
                       Twine(t.loss_scale_output()));
    if (t.has_loss_scale_output() != t.has_skipped_output())
      return makeError("training: loss scaling needs both the loss scale and "
                       "the skipped output");
    if (t.micro_batch() <= 0)
      return makeError("training: micro_batch must be positive");
    // The micro-batch picks each step's samples; it is the first graph
    // input's batch dimension (1 for a scalar or no input).
    int64_t batch = 1;
    if (plan.inputs_size() > 0 && plan.buffers(plan.inputs(0)).shape_size())
      batch = plan.buffers(plan.inputs(0)).shape(0);
    if (t.grad_accum() < 0 || t.grad_accum() > 65536)
      return makeError("training: grad_accum " + Twine(t.grad_accum()) +
                       " is not in [0, 65536]");
    int64_t accum = std::max<int64_t>(t.grad_accum(), 1);
    if (batch % accum != 0 || t.micro_batch() != batch / accum)
      return makeError("training: micro_batch is " + Twine(t.micro_batch()) +
                       (accum > 1 ? " times grad_accum " + std::to_string(accum)
                                  : std::string()) +
                       ", but the first graph input's batch dimension is " +
                       Twine(batch));
    if (!t.optimizer().empty() && t.optimizer() != "sgd" &&
        t.optimizer() != "adam" && t.optimizer() != "adamw")
      return makeError("training: unknown optimizer '" + t.optimizer() +
                       "' (sgd, adam or adamw)");
    if (!t.source_model().empty() &&
        (!isPlainFileName(t.source_model()) || t.source_model() == kPlanFile ||
         t.source_model() == kManifestFile))
      return makeError("training: source_model '" + t.source_model() +
                       "' is not a plain file name inside the plan directory");
  }
  // A training step with an optimizer updates what it trains: every
  // TRAINED parameter and every STATE buffer is written by some op (a
  // dropped optimizer update would leave it as loaded). Optimizer ops are
  // the training's optimizer's (none without one: a gradient-only step).
  if (plan.has_training()) {
    std::vector<bool> written(numBuffers, false);
    for (const Op &op : plan.ops())
      for (int32_t index : op.outputs())
        if (inRange(index))
          written[index] = true;
    for (int i = 0; i < numBuffers && !plan.training().optimizer().empty();
         ++i) {
      const Buffer &b = plan.buffers(i);
      if ((b.kind() == STATE ||
           (b.kind() == PARAMETER && b.role() == TRAINED)) &&
          !written[i])
        return makeError(
            describeBuffer(plan, i) + ": a " +
            (b.kind() == STATE ? "STATE buffer" : "trained parameter") +
            " that no op updates");
    }
    StringRef optimizer = plan.training().optimizer();
    for (int j = 0; j < plan.ops_size(); ++j) {
      const Op &op = plan.ops(j);
      bool adam = op.type() == "AdamUpdate", sgd = op.type() == "SGDUpdate";
      if (!adam && !sgd)
        continue;
      int64_t decoupled = -1;
      for (const Attribute &attr : op.attributes())
        if (attr.name() == "decoupled")
          decoupled = attr.i();
      bool ok = (optimizer == "sgd" && sgd) ||
                (optimizer == "adam" && adam && decoupled == 0) ||
                (optimizer == "adamw" && adam && decoupled == 1);
      if (!ok)
        return makeError(describeOp(plan, j) +
                         ": does not implement the "
                         "training's optimizer '" +
                         optimizer + "'" +
                         (adam
                              ? " (decoupled=" + std::to_string(decoupled) + ")"
                              : std::string()));
    }
  }
  // Export finds trained values by parameter name.
  llvm::StringSet<> paramNames;
  for (int i = 0; i < numBuffers; ++i) {
    const Buffer &b = plan.buffers(i);
    if (b.kind() == PARAMETER && !b.name().empty() &&
        !paramNames.insert(b.name()).second)
      return makeError(describeBuffer(plan, i) +
                       ": another PARAMETER buffer has the same name");
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

namespace {

/// Reads the data of every PARAMETER and CONSTANT buffer of a structurally
/// valid plan whose files were checked against the manifest, checking
/// bounds and checksums.
Error loadData(LoadedPlan &loaded, int rank) {
  const Plan &plan = loaded.plan;
  llvm::StringMap<std::unique_ptr<ReadOnlyFile>> files;
  // The shard this rank holds (its rank, unless shards are replicated).
  const RankMesh mesh = RankMesh::of(plan);
  const int64_t shard =
      rank >= 0 && rank < mesh.worldSize() ? mesh.shardIndex(rank) : rank;

  loaded.bytes.assign(plan.buffers_size(), {});
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const Buffer &b = plan.buffers(i);
    if (!hasData(b))
      continue;
    std::string what = describeBuffer(plan, i);

    auto it = files.find(b.data_file());
    if (it == files.end()) {
      const ManifestEntry *entry = loaded.manifest.find(b.data_file());
      if (!entry)
        return makeError(what + ": data file " + b.data_file() +
                         " is not listed in the manifest");
      Expected<std::unique_ptr<ReadOnlyFile>> file =
          openPlanFile(loaded.dir, b.data_file());
      if (!file)
        return makeError(
            what + ": cannot open data file: " + toString(file.takeError()));
      // The whole file against the manifest, before any buffer is used.
      if (Error err = checkSize(**file, *entry))
        return makeError(what + ": " + toString(std::move(err)));
      Expected<std::string> sum = (*file)->sha256((*file)->size());
      if (!sum)
        return makeError(what + ": " + toString(sum.takeError()));
      if (*sum != entry->sha256)
        return makeError(what + ": " +
                         toString(hashMismatch(**file, *entry, *sum)));
      it = files.insert({b.data_file(), std::move(*file)}).first;
    }
    const ReadOnlyFile &df = *it->second;

    // validatePlan ruled out overflow of offset + bytes.
    if (b.data_offset() + b.data_bytes() > df.size())
      return makeError(what + ": bytes [" + Twine(b.data_offset()) + ", " +
                       Twine(b.data_offset() + b.data_bytes()) +
                       ") lie past "
                       "the end of " +
                       b.data_file() + " (" + Twine(df.size()) +
                       " bytes); the file is truncated or does not belong to "
                       "this plan");
    if (b.shard_count() > 1 && (shard < 0 || shard >= b.shard_count()))
      return makeError(what + ": has " + Twine(b.shard_count()) +
                       " shards, none for rank " + Twine(rank));
    std::vector<uint8_t> &bytes = loaded.bytes[i];
    bytes.resize(b.data_bytes());
    if (Error err = df.read(b.data_offset(), bytes))
      return makeError(what + ": cannot read " + b.data_file() + ": " +
                       toString(std::move(err)));
    uint64_t sum = fnv1a64(bytes);
    if (sum != b.checksum())
      return makeError(what + ": checksum mismatch in " + b.data_file() +
                       " at offset " + Twine(b.data_offset()) + " (plan says " +
                       hex64(b.checksum()) + ", data has " + hex64(sum) +
                       "); the file is corrupt or does not belong to this "
                       "plan");
    if (b.shard_count() > 1) {
      size_t shardBytes = bytes.size() / b.shard_count();
      std::vector<uint8_t> mine(bytes.begin() + shard * shardBytes,
                                bytes.begin() + (shard + 1) * shardBytes);
      bytes = std::move(mine);
    }
  }
  return Error::success();
}

} // namespace

Expected<std::unique_ptr<LoadedPlan>>
loadPlan(StringRef dir, llvm::ArrayRef<StringRef> knownOpTypes, int rank) {
  if (!llvm::sys::fs::is_directory(dir)) {
    if (!llvm::sys::fs::exists(dir))
      return makeError("plan directory " + dir + " does not exist");
    return makeError(dir + " is not a plan directory (not a directory)");
  }
  auto loaded = std::make_unique<LoadedPlan>();
  loaded->dir = dir.str();
  Expected<Manifest> manifest = readManifest(dir);
  if (!manifest)
    return manifest.takeError();
  loaded->manifest = std::move(*manifest);
  auto invalid = [&](const Twine &why) {
    return makeError(Twine(kPlanFile) + " in " + dir +
                     " is not a valid plan: " + why);
  };

  const ManifestEntry *planEntry = loaded->manifest.find(kPlanFile);
  if (planEntry->size > static_cast<uint64_t>(INT_MAX))
    return invalid("the manifest lists it as larger than 2 GiB");
  Expected<std::vector<uint8_t>> raw = readAgainst(dir, *planEntry);
  if (!raw)
    return makeError("invalid plan in " + dir + ": " +
                     toString(raw.takeError()));
  if (raw->empty())
    return invalid("the file is empty");
  bool parsed;
  {
#if GOOGLE_PROTOBUF_VERSION < 4022000
    // A damaged file makes protobuf log to stderr (e.g. about invalid
    // UTF-8); the error below says everything the user needs.
    google::protobuf::LogSilencer silence;
#endif
    parsed =
        loaded->plan.ParseFromArray(raw->data(), static_cast<int>(raw->size()));
  }
  if (!parsed)
    return invalid("protobuf parsing failed (the file is truncated or not a "
                   "plan)");

  if (loaded->plan.version() != kPlanVersion)
    return makeError("plan in " + dir + " has version " +
                     Twine(loaded->plan.version()) +
                     ", but this build reads version " + Twine(kPlanVersion) +
                     "; recompile the model with shardc");

  if (Error err = validatePlan(loaded->plan, knownOpTypes))
    return makeError("invalid plan in " + dir + ": " +
                     toString(std::move(err)));

  // Every other file the manifest lists (the source model), so a damaged
  // one stops the run before the first step rather than at --export.
  for (const ManifestEntry &e : loaded->manifest.files) {
    if (e.name == kPlanFile)
      continue;
    bool dataFile = llvm::any_of(loaded->plan.buffers(), [&](const Buffer &b) {
      return hasData(b) && b.data_file() == e.name;
    });
    if (dataFile)
      continue; // checked by loadData as it reads
    Expected<std::unique_ptr<ReadOnlyFile>> file = openPlanFile(dir, e.name);
    if (!file)
      return makeError("invalid plan in " + dir + ": " +
                       toString(file.takeError()));
    if (Error err = checkSize(**file, e))
      return makeError("invalid plan in " + dir + ": " +
                       toString(std::move(err)));
    Expected<std::string> sum = (*file)->sha256((*file)->size());
    if (!sum)
      return makeError("invalid plan in " + dir + ": " +
                       toString(sum.takeError()));
    if (*sum != e.sha256)
      return makeError("invalid plan in " + dir + ": " +
                       toString(hashMismatch(**file, e, *sum)));
  }
  if (loaded->plan.has_training() &&
      !loaded->plan.training().source_model().empty() &&
      !loaded->manifest.find(loaded->plan.training().source_model()))
    return makeError("invalid plan in " + dir + ": the source model '" +
                     loaded->plan.training().source_model() +
                     "' is not listed in the manifest");

  if (Error err = loadData(*loaded, rank))
    return makeError("invalid plan in " + dir + ": " +
                     toString(std::move(err)));
  return std::move(loaded);
}

//===----------------------------------------------------------------------===//
// Digests for the cross-rank check
//===----------------------------------------------------------------------===//

namespace {

uint64_t hash64(StringRef bytes) {
  std::array<uint8_t, 32> d = llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
  uint64_t v = 0;
  for (int k = 0; k < 8; ++k)
    v = (v << 8) | d[k];
  return v;
}

} // namespace

StringRef planPartName(PlanDigest::Part part) {
  switch (part) {
  case PlanDigest::Whole:
    return "the plan files";
  case PlanDigest::Collectives:
    return "the collectives (schedule of communication)";
  case PlanDigest::Schedule:
    return "the schedule (ops, buffers, model attributes)";
  case PlanDigest::HyperParameters:
    return "hyper-parameters";
  case PlanDigest::ParameterData:
    return "parameter data";
  case PlanDigest::Constants:
    return "constant data";
  case PlanDigest::OtherFiles:
    return "the source model";
  case PlanDigest::Metadata:
    return "plan metadata (producer, model name, memory prediction)";
  case PlanDigest::NumParts:
    break;
  }
  return "unknown part";
}

PlanDigest digestPlan(const LoadedPlan &loaded) {
  const Plan &plan = loaded.plan;
  PlanDigest d;
  d.parts[PlanDigest::Whole] = hash64(loaded.manifest.digest);

  // The collectives: type and each operand's element type and count.
  // With a mesh, also the axes each one spans.
  const RankMesh mesh = RankMesh::of(plan);
  std::string coll = "world " + std::to_string(plan.world_size());
  if (std::string shape = mesh.describe(); !shape.empty())
    coll += " mesh " + shape;
  coll += "\n";
  for (const Op &op : plan.ops()) {
    if (!getCollectiveOpKind(op.type()))
      continue;
    coll += op.type();
    if (mesh.shape.size() > 1)
      for (int32_t a : collectiveAxes(op, mesh))
        coll += " axis" + std::to_string(a);
    for (auto list : {&op.inputs(), &op.outputs()})
      for (int32_t index : *list) {
        if (index < 0 || index >= plan.buffers_size())
          continue;
        const Buffer &b = plan.buffers(index);
        int64_t n = 1;
        for (int64_t dim : b.shape())
          n *= dim;
        coll += " " + std::to_string(b.dtype()) + "x" + std::to_string(n);
      }
    coll += "\n";
  }
  d.parts[PlanDigest::Collectives] = hash64(coll);

  // Hyper-parameters: the training settings and the distinct values of
  // the optimizer ops' attributes (whatever the ops are called and however
  // many there are, which is the schedule's business); the schedule is
  // everything else that computes.
  Plan schedule = plan;
  std::string hyper = plan.training().SerializeAsString();
  schedule.clear_training();
  std::vector<std::string> values;
  for (Op &op : *schedule.mutable_ops()) {
    if (optimizerAttrs(op.type()).empty())
      continue;
    for (const Attribute &attr : op.attributes())
      values.push_back(op.type() + " " + attr.SerializeAsString());
    op.clear_attributes();
  }
  llvm::sort(values);
  values.erase(std::unique(values.begin(), values.end()), values.end());
  for (const std::string &v : values)
    hyper += "\n" + v;
  d.parts[PlanDigest::HyperParameters] = hash64(hyper);
  for (Buffer &b : *schedule.mutable_buffers())
    b.clear_checksum(); // data, compared below
  Plan meta;
  meta.set_producer(schedule.producer());
  meta.set_model_name(schedule.model_name());
  *meta.mutable_predicted_memory() = schedule.predicted_memory();
  schedule.clear_producer();
  schedule.clear_model_name();
  schedule.clear_predicted_memory();
  d.parts[PlanDigest::Schedule] = hash64(schedule.SerializeAsString());
  d.parts[PlanDigest::Metadata] = hash64(meta.SerializeAsString());

  // Data: the manifest's hashes of the files the buffers read, and every
  // other file.
  std::string params, constants, others;
  for (const ManifestEntry &e : loaded.manifest.files) {
    bool isParams = false, isConstants = false;
    for (const Buffer &b : plan.buffers()) {
      if (b.data_file() != e.name)
        continue;
      isParams |= b.kind() == PARAMETER;
      isConstants |= b.kind() == CONSTANT;
    }
    std::string line = e.name + " " + e.sha256 + "\n";
    if (isParams)
      params += line;
    if (isConstants)
      constants += line;
    if (!isParams && !isConstants && e.name != kPlanFile)
      others += line;
  }
  d.parts[PlanDigest::ParameterData] = hash64(params);
  d.parts[PlanDigest::Constants] = hash64(constants);
  d.parts[PlanDigest::OtherFiles] = hash64(others);
  return d;
}

std::string describeHyperParameters(const Plan &plan) {
  std::string s;
  if (plan.has_training()) {
    const Training &t = plan.training();
    s = "optimizer " + (t.optimizer().empty() ? "none" : t.optimizer()) +
        ", micro_batch " + std::to_string(t.micro_batch());
    if (t.grad_accum() > 1)
      s += ", grad_accum " + std::to_string(t.grad_accum());
  }
  for (StringRef type : {"AdamUpdate", "SGDUpdate"}) {
    std::string part;
    for (const HyperAttr &h : optimizerAttrs(type)) {
      std::vector<std::string> values;
      for (const Op &op : plan.ops()) {
        if (op.type() != type)
          continue;
        for (const Attribute &attr : op.attributes()) {
          if (attr.name() != h.name)
            continue;
          std::string v =
              attr.value_case() == Attribute::kF   ? formatNumber(attr.f())
              : attr.value_case() == Attribute::kI ? std::to_string(attr.i())
              : attr.value_case() == Attribute::kS ? attr.s()
                                                   : std::string("?");
          if (!llvm::is_contained(values, v))
            values.push_back(v);
        }
      }
      if (values.empty())
        continue;
      part += " " + std::string(h.name) + "=" + llvm::join(values, "|");
    }
    if (!part.empty())
      s += (s.empty() ? "" : ", ") + type.str() + part;
  }
  if (s.size() > 400)
    s = s.substr(0, 400) + "...";
  return s.empty() ? "none" : s;
}

} // namespace shardc::plan
