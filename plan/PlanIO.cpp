//===- PlanIO.cpp - Writing and loading plan directories ------------------===//
//
// The loader trusts nothing in a plan directory: every index, shape, byte
// count, file name and checksum is checked before a caller sees the plan, so
// the executor and the kernels can rely on the plan being consistent.
//
//===----------------------------------------------------------------------===//
#include "plan/PlanIO.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "google/protobuf/stubs/common.h"
#if GOOGLE_PROTOBUF_VERSION < 4022000
#include "google/protobuf/stubs/logging.h"
#endif

#include <climits>
#include <limits>

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
/// dimension is negative or the size does not fit in 63 bits.
Expected<uint64_t> denseBytes(rt::DType dtype, llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0)
      return makeError("dimension " + Twine(d) + " of shape " +
                       rt::shapeToString(shape) + " is negative");
    if (llvm::MulOverflow(n, shape[d], n))
      return makeError("shape " + rt::shapeToString(shape) +
                       " has more elements than fit in 64 bits");
  }
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

/// A data file name must stay inside the plan directory.
bool isPlainFileName(StringRef name) {
  if (name.empty() || name == "." || name == "..")
    return false;
  if (name.contains('/') || name.contains('\\') || name.contains('\0') ||
      name.contains(".."))
    return false;
  return true;
}

/// Writes `bytes` to a new temporary file next to `finalPath` and returns the
/// temporary's path.
Expected<std::string> writeTemporary(StringRef finalPath,
                                     llvm::ArrayRef<uint8_t> bytes) {
  int fd = -1;
  llvm::SmallString<256> tmpPath;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(
          finalPath + ".tmp-%%%%%%%%", fd, tmpPath))
    return makeError("cannot create a temporary file for " + finalPath + ": " +
                     ec.message());
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  os.close();
  if (os.has_error()) {
    std::string msg = os.error().message();
    os.clear_error();
    llvm::sys::fs::remove(tmpPath);
    return makeError("cannot write " + tmpPath + ": " + msg);
  }
  return std::string(tmpPath);
}

/// Reads `bytes` bytes at `offset` of an open file.
Error readSlice(llvm::sys::fs::file_t file, uint64_t offset,
                std::vector<uint8_t> &out) {
  size_t done = 0;
  while (done < out.size()) {
    llvm::MutableArrayRef<char> chunk(
        reinterpret_cast<char *>(out.data()) + done,
        std::min<size_t>(out.size() - done, size_t(1) << 30));
    Expected<size_t> got =
        llvm::sys::fs::readNativeFileSlice(file, chunk, offset + done);
    if (!got)
      return got.takeError();
    if (*got == 0)
      return makeError("unexpected end of file after " + Twine(offset + done) +
                       " bytes");
    done += *got;
  }
  return Error::success();
}

} // namespace

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

Error PlanWriter::write(StringRef dir) {
  if (Error err = validatePlan(planMsg))
    return makeError("refusing to write an invalid plan to " + dir + ": " +
                     toString(std::move(err)));
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return makeError("cannot create plan directory " + dir + ": " +
                     ec.message());

  std::string planBytes;
  if (!planMsg.SerializeToString(&planBytes))
    return makeError("cannot serialize the plan for " + dir +
                     " (is it larger than 2 GiB?)");

  // Everything goes to temporaries first; plan.pb is renamed last, so a plan
  // directory never holds a new plan.pb with old data files.
  struct Pending {
    std::string tmp, dest;
  };
  llvm::SmallVector<Pending, 3> pending;
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
    return Error::success();
  };

  if (Error err = stage(kParamsFile, params)) {
    cleanup();
    return err;
  }
  if (Error err = stage(kConstantsFile, constants)) {
    cleanup();
    return err;
  }
  if (Error err = stage(kPlanFile,
                        llvm::ArrayRef<uint8_t>(
                            reinterpret_cast<const uint8_t *>(planBytes.data()),
                            planBytes.size()))) {
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
// Validation
//===----------------------------------------------------------------------===//

Error validatePlan(const Plan &plan, llvm::ArrayRef<StringRef> knownOpTypes) {
  const int numBuffers = plan.buffers_size();
  auto inRange = [&](int64_t index) {
    return index >= 0 && index < numBuffers;
  };

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
    if (!hasData(b)) {
      if (!b.data_file().empty() || b.data_bytes() != 0 || b.data_offset() != 0)
        return makeError(what + ": a " + kindName(b.kind()) +
                         " buffer must not name a data file");
      continue;
    }
    if (b.shard_count() < 0 || (b.shard_count() > 1 && b.kind() != PARAMETER))
      return makeError(what + ": shard_count " + Twine(b.shard_count()) +
                       " is invalid (only PARAMETER buffers are sharded)");
    uint64_t shards = b.shard_count() > 1 ? b.shard_count() : 1;
    if (*bytes != 0 && shards > std::numeric_limits<uint64_t>::max() / *bytes)
      return makeError(what + ": shard_count overflows");
    if (b.data_bytes() != *bytes * shards)
      return makeError(what + ": data_bytes is " + Twine(b.data_bytes()) +
                       " but " + Twine(shards) + " x " + rt::dtypeName(dtype) +
                       " " + rt::shapeToString(shape) + " needs " +
                       Twine(*bytes * shards));
    if (!isPlainFileName(b.data_file()))
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
  // Views: into a TEMP buffer that is no view itself, inside its bytes.
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
    if (b.alias_offset() > size(root) ||
        size(b) > size(root) - b.alias_offset())
      return makeError(what + ": view [" + Twine(b.alias_offset()) + ", +" +
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
      if (plan.buffers(index).is_alias())
        return makeError(what + ": output " + Twine(k) + " writes " +
                         describeBuffer(plan, index) + ", a view");
      if (kind == INPUT || kind == CONSTANT)
        return makeError(what + ": output " + Twine(k) + " writes " +
                         describeBuffer(plan, index) + ", a " + kindName(kind) +
                         " buffer");
    }
    // Outputs become defined only after all inputs were checked: an op may
    // not read a TEMP that it writes itself.
    for (int32_t index : op.outputs())
      if (index != -1)
        defined[index] = true;
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
    }
  }

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
    if (t.micro_batch() <= 0)
      return makeError("training: micro_batch must be positive");
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

namespace {

/// An open data file of a plan directory, with its size.
struct DataFile {
  llvm::sys::fs::file_t handle = llvm::sys::fs::kInvalidFile;
  uint64_t size = 0;
};

/// Reads the data of every PARAMETER and CONSTANT buffer of a structurally
/// valid plan, checking bounds and checksums.
Error loadData(LoadedPlan &loaded, int rank) {
  const Plan &plan = loaded.plan;
  llvm::StringMap<DataFile> files;
  auto closeAll = [&] {
    for (auto &entry : files)
      if (entry.second.handle != llvm::sys::fs::kInvalidFile)
        llvm::sys::fs::closeFile(entry.second.handle);
  };

  loaded.bytes.assign(plan.buffers_size(), {});
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const Buffer &b = plan.buffers(i);
    if (!hasData(b))
      continue;
    std::string what = describeBuffer(plan, i);

    auto it = files.find(b.data_file());
    if (it == files.end()) {
      llvm::SmallString<256> path(loaded.dir);
      llvm::sys::path::append(path, b.data_file());
      DataFile df;
      llvm::sys::fs::file_status status;
      if (std::error_code ec = llvm::sys::fs::status(path, status)) {
        closeAll();
        return makeError(what + ": cannot open data file " + path + ": " +
                         ec.message());
      }
      if (status.type() != llvm::sys::fs::file_type::regular_file) {
        closeAll();
        return makeError(what + ": data file " + path +
                         " is not a regular file");
      }
      df.size = status.getSize();
      Expected<llvm::sys::fs::file_t> handle =
          llvm::sys::fs::openNativeFileForRead(path);
      if (!handle) {
        closeAll();
        return makeError(what + ": cannot open data file " + path + ": " +
                         toString(handle.takeError()));
      }
      df.handle = *handle;
      it = files.insert({b.data_file(), df}).first;
    }
    const DataFile &df = it->second;

    // validatePlan ruled out overflow of offset + bytes.
    if (b.data_offset() + b.data_bytes() > df.size) {
      closeAll();
      return makeError(what + ": bytes [" + Twine(b.data_offset()) + ", " +
                       Twine(b.data_offset() + b.data_bytes()) +
                       ") lie past "
                       "the end of " +
                       b.data_file() + " (" + Twine(df.size) +
                       " bytes); the file is truncated or does not belong to "
                       "this plan");
    }
    std::vector<uint8_t> &bytes = loaded.bytes[i];
    bytes.resize(b.data_bytes());
    if (Error err = readSlice(df.handle, b.data_offset(), bytes)) {
      closeAll();
      return makeError(what + ": cannot read " + b.data_file() + ": " +
                       toString(std::move(err)));
    }
    uint64_t sum = fnv1a64(bytes);
    if (sum != b.checksum()) {
      closeAll();
      return makeError(what + ": checksum mismatch in " + b.data_file() +
                       " at offset " + Twine(b.data_offset()) + " (plan says " +
                       hex64(b.checksum()) + ", data has " + hex64(sum) +
                       "); the file is corrupt or does not belong to this "
                       "plan");
    }
    if (b.shard_count() > 1) {
      if (rank < 0 || rank >= b.shard_count()) {
        closeAll();
        return makeError(what + ": has " + Twine(b.shard_count()) +
                         " shards, none for rank " + Twine(rank));
      }
      size_t shardBytes = bytes.size() / b.shard_count();
      std::vector<uint8_t> mine(bytes.begin() + rank * shardBytes,
                                bytes.begin() + (rank + 1) * shardBytes);
      bytes = std::move(mine);
    }
  }
  closeAll();
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
  llvm::SmallString<256> planPath(dir);
  llvm::sys::path::append(planPath, kPlanFile);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(planPath, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return makeError("cannot read " + Twine(kPlanFile) + " in " + dir + ": " +
                     file.getError().message());

  auto loaded = std::make_unique<LoadedPlan>();
  loaded->dir = dir.str();
  StringRef raw = (*file)->getBuffer();
  auto invalid = [&](const Twine &why) {
    return makeError(Twine(kPlanFile) + " in " + dir +
                     " is not a valid plan: " + why);
  };
  if (raw.empty())
    return invalid("the file is empty");
  if (raw.size() > static_cast<size_t>(INT_MAX))
    return invalid("the file is larger than 2 GiB");
  bool parsed;
  {
#if GOOGLE_PROTOBUF_VERSION < 4022000
    // A damaged file makes protobuf log to stderr (e.g. about invalid
    // UTF-8); the error below says everything the user needs.
    google::protobuf::LogSilencer silence;
#endif
    parsed =
        loaded->plan.ParseFromArray(raw.data(), static_cast<int>(raw.size()));
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
  if (Error err = loadData(*loaded, rank))
    return makeError("invalid plan in " + dir + ": " +
                     toString(std::move(err)));
  return std::move(loaded);
}

} // namespace shardc::plan
