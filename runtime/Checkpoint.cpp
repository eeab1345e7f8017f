//===- Checkpoint.cpp - Sharded checkpoints of a training run -------------===//
#include "runtime/Checkpoint.h"

#include "plan/SafeFile.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "google/protobuf/stubs/common.h"
#if GOOGLE_PROTOBUF_VERSION < 4022000
#include "google/protobuf/stubs/logging.h"
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include <unistd.h>

namespace shardc::rt {

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

static Error makeError(const Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

const plan::ManifestKind kCheckpointManifest = {
    "shard-checkpoint", kCheckpointVersion, kCheckpointFile, "checkpoint",
    "the checkpoint is damaged or incomplete; resume from another one"};

/// The largest checkpoint.pb a reader accepts.
static constexpr uint64_t kMaxCheckpointFileBytes = uint64_t(256) << 20;

static std::string rankFileName(int64_t rank) {
  return "rank-" + std::to_string(rank) + ".data";
}

static std::string stepDirName(uint64_t step) {
  return "step-" + std::to_string(step);
}

//===----------------------------------------------------------------------===//
// The logical tensors of a plan
//===----------------------------------------------------------------------===//

Expected<StateLayout> stateLayout(const plan::Plan &plan, int rank) {
  StateLayout layout;
  // Units are sharded over the mesh's shard axes; with hybrid sharding the
  // ranks of the first replica save the shards, each element once.
  const plan::RankMesh mesh = plan::RankMesh::of(plan);
  const int64_t shards = mesh.shardCount();
  const int64_t shardIndex = mesh.shardIndex(rank);
  const bool savesShard = mesh.firstReplica(rank);
  llvm::StringMap<size_t> byName;
  auto addTensor = [&](const std::string &name, DType dtype,
                       llvm::ArrayRef<int64_t> shape,
                       bool perRank) -> Expected<size_t> {
    auto [it, inserted] = byName.try_emplace(name, layout.tensors.size());
    if (!inserted)
      return makeError("the plan holds state '" + name +
                       "' twice (a parameter and an optimizer state of the "
                       "same name?); it cannot be checkpointed");
    StateTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape.assign(shape.begin(), shape.end());
    t.perRank = perRank;
    layout.tensors.push_back(std::move(t));
    return it->second;
  };
  std::vector<bool> inUnit(plan.buffers_size(), false);
  for (const plan::FlatUnit &unit : plan.units()) {
    // This rank's elements [lo, hi) of the unit's flat layout.
    int64_t shard = unit.padded_elements() / shards;
    int64_t lo = shard * shardIndex, hi = lo + shard;
    // Where they lie in `buffer`: from 0 in a shard's buffer; at lo in a
    // whole unit's parameter buffer (its other elements, gathered by the
    // step, are the other ranks' to save).
    auto addShard = [&](int32_t buffer, const std::string &suffix,
                        bool whole) -> Error {
      int64_t base = whole ? 0 : lo;
      inUnit[buffer] = true;
      DType dtype = plan::toRuntime(plan.buffers(buffer).dtype());
      for (const plan::FlatParam &p : unit.params()) {
        llvm::SmallVector<int64_t, 4> shape(p.shape().begin(), p.shape().end());
        Expected<size_t> t = addTensor(p.name() + suffix, dtype, shape, false);
        if (!t)
          return t.takeError();
        int64_t begin = std::max(p.offset(), lo);
        int64_t end = std::min(p.offset() + numElements(shape), hi);
        if (begin < end)
          layout.slices.push_back({*t, buffer, begin - base, begin - p.offset(),
                                   end - begin, savesShard});
      }
      return Error::success();
    };
    if (unit.buffer() >= 0)
      if (Error err = addShard(unit.buffer(), "", unit.whole()))
        return std::move(err);
    for (const plan::FlatState &s : unit.states())
      if (Error err = addShard(s.buffer(), s.suffix(), false))
        return std::move(err);
  }
  for (int i = 0; i < plan.buffers_size(); ++i) {
    const plan::Buffer &b = plan.buffers(i);
    if ((b.kind() != plan::PARAMETER && b.kind() != plan::STATE) || inUnit[i])
      continue;
    bool perRank =
        b.kind() == plan::PARAMETER && b.role() == plan::RUNNING_STATISTIC;
    llvm::SmallVector<int64_t, 4> shape(b.shape().begin(), b.shape().end());
    Expected<size_t> t =
        addTensor(b.name(), plan::toRuntime(b.dtype()), shape, perRank);
    if (!t)
      return t.takeError();
    int64_t n = numElements(shape);
    if (n > 0)
      layout.slices.push_back({*t, i, 0, 0, n, perRank || rank == 0});
  }
  return std::move(layout);
}

std::vector<std::pair<uint64_t, std::string>>
completeCheckpoints(StringRef dir) {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    StringRef name = llvm::sys::path::filename(it->path());
    uint64_t step;
    if (!name.consume_front("step-") || name.empty() ||
        !llvm::all_of(name, [](char c) { return c >= '0' && c <= '9'; }) ||
        name.getAsInteger(10, step))
      continue;
    llvm::SmallString<256> manifest(it->path());
    llvm::sys::path::append(manifest, plan::kManifestFile);
    llvm::sys::fs::file_status st;
    if (llvm::sys::fs::status(manifest, st) ||
        st.type() != llvm::sys::fs::file_type::regular_file)
      continue;
    found.push_back({step, it->path()});
  }
  llvm::sort(found);
  return found;
}

/// Buffer `buffer` of `exec` copied to the host, once per `cache`.
static Expected<std::vector<uint8_t> *>
hostCopy(const Executor &exec,
         llvm::DenseMap<int32_t, std::vector<uint8_t>> &cache, int32_t buffer) {
  auto it = cache.find(buffer);
  if (it == cache.end()) {
    Expected<std::vector<uint8_t>> bytes = exec.readBuffer(buffer);
    if (!bytes)
      return bytes.takeError();
    it = cache.try_emplace(buffer, std::move(*bytes)).first;
  }
  return &it->second;
}

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

/// One save on its way to disk.
struct CheckpointWriter::Pending {
  TrainingPosition position;
  std::string partialDir;
  /// This rank's pieces, one after another, and where each begins.
  std::vector<uint8_t> data;
  std::vector<uint64_t> pieceOffsets;
  /// Set by the writer thread before `state` turns 1 or 2.
  std::vector<uint64_t> checksums;
  std::string sha256;
  std::string error;
  std::atomic<int> state{0}; // 0 writing, 1 written, 2 failed
  std::thread thread;
};

Expected<std::unique_ptr<CheckpointWriter>>
CheckpointWriter::create(const CheckpointOptions &options,
                         const plan::LoadedPlan &loaded, Communicator *comm) {
  std::unique_ptr<CheckpointWriter> w(new CheckpointWriter());
  w->options = options;
  w->plan = loaded.plan;
  w->comm = comm;
  w->rank = comm ? comm->rank() : 0;
  w->world = comm ? comm->worldSize() : 1;
  w->planDigest = loaded.manifest.digest;
  if (loaded.plan.has_training())
    if (const plan::ManifestEntry *e =
            loaded.manifest.find(loaded.plan.training().source_model()))
      w->modelSha256 = e->sha256;
  // Every rank creates the directory (on a shared file system they race
  // harmlessly); rank 0's token and view of the directory are the job's.
  std::error_code ec = llvm::sys::fs::create_directories(options.dir);
  int64_t mine[3] = {ec ? 1 : 0, 0, -1};
  if (w->rank == 0) {
    std::random_device rd;
    mine[1] = static_cast<int64_t>((uint64_t(rd()) << 32) ^ rd()) & INT64_MAX;
    auto done = completeCheckpoints(options.dir);
    if (!done.empty())
      mine[2] = static_cast<int64_t>(done.back().first);
  }
  std::vector<int64_t> all(mine, mine + 3);
  if (comm && w->world > 1) {
    all.resize(3 * w->world);
    if (Error err = comm->allGather(mine, all.data(), 3, DType::I64))
      return std::move(err);
  }
  if (ec)
    return makeError("--checkpoint-dir: cannot create " + options.dir + ": " +
                     ec.message());
  for (int r = 0; r < w->world; ++r)
    if (all[3 * r])
      return makeError("--checkpoint-dir: rank " + Twine(r) +
                       " cannot create " + options.dir);
  w->token = llvm::utohexstr(static_cast<uint64_t>(all[1]), true);
  if (all[2] >= 0)
    w->saved = static_cast<uint64_t>(all[2]);
  if (Error err = w->checkShared())
    return std::move(err);
  return std::move(w);
}

Error CheckpointWriter::checkShared() {
  if (!comm || world == 1)
    return Error::success();
  // Rank 0 leaves a file in the directory and every rank looks for it: ranks
  // on hosts that do not share the directory would write their shards where
  // rank 0, which publishes the checkpoint, never sees them.
  llvm::SmallString<256> probe(options.dir);
  llvm::sys::path::append(probe, ".probe-" + token);
  int32_t wrote = 1;
  if (rank == 0)
    if (Error err = plan::writeFileDurably(probe, {})) {
      llvm::consumeError(std::move(err));
      wrote = 0;
    }
  std::vector<int32_t> seen(world, 0);
  if (Error err = comm->allGather(&wrote, seen.data(), 1, DType::I32))
    return err;
  if (!seen[0])
    return makeError("--checkpoint-dir: rank 0 cannot write in " + options.dir);
  int32_t mine = llvm::sys::fs::exists(probe) ? 1 : 0;
  if (Error err = comm->allGather(&mine, seen.data(), 1, DType::I32))
    return err;
  if (rank == 0)
    llvm::sys::fs::remove(probe);
  std::string blind;
  for (int r = 0; r < world; ++r)
    if (!seen[r])
      blind += (blind.empty() ? "" : ", ") + std::to_string(r);
  if (blind.empty())
    return Error::success();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string who = mine ? "rank(s) " + blind
                         : "rank " + std::to_string(rank) + " (host " +
                               std::string(host) + ")";
  return makeError("--checkpoint-dir " + options.dir +
                   " is not shared: " + who +
                   " cannot see the files rank 0 writes there. Every "
                   "rank must see the same directory: on several hosts put "
                   "it on a file system they all mount (NFS, Lustre, ...)");
}

CheckpointWriter::~CheckpointWriter() {
  if (pending && pending->thread.joinable())
    pending->thread.join();
}

/// Milliseconds to sleep before a rank file is renamed into place, from
/// SHARDRUN_FAULT_SAVE_DELAY_MS: lets the fault tests kill a rank while it
/// saves (docs/faults.md). 0 when unset.
static int64_t faultSaveDelayMs() {
  const char *v = std::getenv("SHARDRUN_FAULT_SAVE_DELAY_MS");
  int64_t ms = 0;
  if (!v || StringRef(v).getAsInteger(10, ms) || ms < 0)
    return 0;
  return ms;
}

Error CheckpointWriter::save(const Executor &exec,
                             const TrainingPosition &position) {
  if (Error err = finish())
    return err;
  auto t0 = std::chrono::steady_clock::now();
  Expected<StateLayout> layout = stateLayout(plan, rank);
  if (!layout)
    return layout.takeError();
  auto p = std::make_unique<Pending>();
  p->position = position;
  llvm::SmallString<256> partial(options.dir);
  // A name of this save alone: another rank may start writing the next
  // save before rank 0 has published this one.
  llvm::sys::path::append(partial, "." + stepDirName(position.step) +
                                       ".partial-" + token + "-" +
                                       std::to_string(saves++));
  saved = position.step;
  p->partialDir = std::string(partial);
  // The copy out of the executor: buffers read once each, in slice order.
  uint64_t total = 0;
  for (const StateSlice &s : layout->slices)
    if (s.saved)
      total += static_cast<uint64_t>(s.elements) *
               dtypeSize(layout->tensors[s.tensor].dtype);
  p->data.resize(total);
  llvm::DenseMap<int32_t, std::vector<uint8_t>> read;
  uint64_t at = 0;
  for (const StateSlice &s : layout->slices) {
    if (!s.saved)
      continue;
    Expected<std::vector<uint8_t> *> host = hostCopy(exec, read, s.buffer);
    if (!host)
      return host.takeError();
    size_t elem = dtypeSize(layout->tensors[s.tensor].dtype);
    size_t n = static_cast<size_t>(s.elements) * elem;
    std::memcpy(p->data.data() + at,
                (*host)->data() + static_cast<size_t>(s.bufferElement) * elem,
                n);
    p->pieceOffsets.push_back(at);
    at += n;
  }
  read.clear();
  // Written in the background: checksums, the file, its rename.
  Pending *job = p.get();
  std::string file = (partial + "/" + rankFileName(rank)).str();
  job->thread = std::thread([job, file] {
    // A rank may save no piece (at stage 0 rank 0 saves every value that
    // all ranks hold alike).
    for (size_t k = 0; k < job->pieceOffsets.size(); ++k) {
      uint64_t end = k + 1 < job->pieceOffsets.size() ? job->pieceOffsets[k + 1]
                                                      : job->data.size();
      job->checksums.push_back(plan::fnv1a64(
          llvm::ArrayRef<uint8_t>(job->data.data() + job->pieceOffsets[k],
                                  end - job->pieceOffsets[k])));
    }
    job->sha256 = plan::sha256Hex(job->data);
    Error err = Error::success();
    if (std::error_code ec = llvm::sys::fs::create_directories(job->partialDir))
      err = makeError("cannot create " + job->partialDir + ": " + ec.message());
    if (!err) {
      Expected<std::string> tmp = plan::writeTemporary(file, job->data);
      if (!tmp) {
        err = tmp.takeError();
      } else {
        if (int64_t ms = faultSaveDelayMs())
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        if (std::error_code ec = llvm::sys::fs::rename(*tmp, file)) {
          llvm::sys::fs::remove(*tmp);
          err = makeError("cannot rename " + *tmp + " to " + file + ": " +
                          ec.message());
        } else {
          err = plan::syncDirectory(job->partialDir);
        }
      }
    }
    if (err) {
      job->error = toString(std::move(err));
      job->state = 2;
      return;
    }
    std::vector<uint8_t>().swap(job->data);
    job->state = 1;
  });
  pending = std::move(p);
  holdMs = std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - t0)
               .count();
  return Error::success();
}

Expected<bool> CheckpointWriter::allWritten(bool wait) {
  if (wait && pending->thread.joinable())
    pending->thread.join();
  int32_t mine = pending->state.load();
  std::vector<int32_t> states(world, mine);
  if (comm && world > 1)
    if (Error err = comm->allGather(&mine, states.data(), 1, DType::I32))
      return std::move(err);
  std::string step = stepDirName(pending->position.step);
  for (int r = 0; r < world; ++r) {
    if (states[r] != 2)
      continue;
    if (pending->thread.joinable())
      pending->thread.join();
    if (r == rank)
      return makeError("cannot save checkpoint " + step + " in " + options.dir +
                       ": " + pending->error);
    return makeError("cannot save checkpoint " + step + " in " + options.dir +
                     ": rank " + Twine(r) +
                     " could not write its shard (its message says why)");
  }
  return llvm::all_of(states, [](int32_t s) { return s == 1; });
}

Error CheckpointWriter::poll() {
  if (!pending)
    return Error::success();
  Expected<bool> done = allWritten(/*wait=*/false);
  if (!done)
    return done.takeError();
  return *done ? publish() : Error::success();
}

Error CheckpointWriter::finish() {
  if (!pending)
    return Error::success();
  Expected<bool> done = allWritten(/*wait=*/true);
  if (!done)
    return done.takeError();
  return publish();
}

Error CheckpointWriter::publish() {
  if (pending->thread.joinable())
    pending->thread.join();
  std::unique_ptr<Pending> p = std::move(pending);
  // Every rank's file: its SHA-256 and its pieces' checksums. Rank 0 knows
  // every rank's pieces from the plan.
  std::vector<StateLayout> layouts;
  size_t maxPieces = 0;
  for (int r = 0; r < world; ++r) {
    Expected<StateLayout> l = stateLayout(plan, r);
    if (!l)
      return l.takeError();
    size_t n =
        llvm::count_if(l->slices, [](const StateSlice &s) { return s.saved; });
    maxPieces = std::max(maxPieces, n);
    layouts.push_back(std::move(*l));
  }
  if (p->checksums.size() !=
      static_cast<size_t>(llvm::count_if(
          layouts[rank].slices, [](const StateSlice &s) { return s.saved; })))
    return makeError("checkpoint: this rank's pieces do not match its plan");
  size_t record = 1 + 8 + maxPieces; // size, SHA-256 (32 bytes), checksums
  std::vector<uint64_t> mine(record, 0);
  uint64_t size = 0;
  {
    const StateLayout &l = layouts[rank];
    for (const StateSlice &s : l.slices)
      if (s.saved)
        size += static_cast<uint64_t>(s.elements) *
                dtypeSize(l.tensors[s.tensor].dtype);
  }
  mine[0] = size;
  for (int k = 0; k < 8; ++k) {
    uint64_t word = 0;
    StringRef hex = StringRef(p->sha256).substr(k * 8, 8);
    hex.getAsInteger(16, word);
    mine[1 + k] = word;
  }
  std::copy(p->checksums.begin(), p->checksums.end(), mine.begin() + 9);
  std::vector<uint64_t> all(mine);
  if (comm && world > 1) {
    all.resize(record * world);
    if (Error err = comm->allGather(mine.data(), all.data(),
                                    static_cast<int64_t>(record), DType::I64))
      return err;
  }
  std::string stepName = stepDirName(p->position.step);
  if (rank != 0)
    return Error::success();

  plan::Checkpoint ck;
  ck.set_version(kCheckpointVersion);
  ck.set_producer("shardrun");
  ck.set_step(p->position.step);
  ck.set_samples_consumed(p->position.samplesConsumed);
  ck.set_seed(p->position.seed);
  ck.set_world_size(world);
  ck.set_zero_stage(plan.zero_stage());
  ck.set_model_name(plan.model_name());
  ck.set_model_sha256(modelSha256);
  ck.set_plan_digest(planDigest);
  ck.set_data_samples(p->position.dataSamples);
  for (const StateTensor &t : layouts[0].tensors) {
    plan::CheckpointTensor *ct = ck.add_tensors();
    ct->set_name(t.name);
    ct->set_dtype(plan::fromRuntime(t.dtype));
    for (int64_t d : t.shape)
      ct->add_shape(d);
    ct->set_per_rank(t.perRank);
  }
  std::vector<plan::ManifestEntry> entries;
  for (int r = 0; r < world; ++r) {
    const uint64_t *rec = all.data() + record * r;
    uint64_t offset = 0;
    size_t k = 0;
    const StateLayout &l = layouts[r];
    for (const StateSlice &s : l.slices) {
      if (!s.saved)
        continue;
      plan::CheckpointPiece *piece = ck.mutable_tensors(s.tensor)->add_pieces();
      piece->set_rank(r);
      piece->set_byte_offset(offset);
      piece->set_element_offset(s.tensorElement);
      piece->set_elements(s.elements);
      piece->set_checksum(rec[9 + k++]);
      offset += static_cast<uint64_t>(s.elements) *
                dtypeSize(l.tensors[s.tensor].dtype);
    }
    if (offset != rec[0])
      return makeError("checkpoint " + stepName + ": rank " + Twine(r) +
                       " wrote " + Twine(rec[0]) + " bytes, its pieces take " +
                       Twine(offset));
    std::string sha;
    for (int w = 0; w < 8; ++w) {
      std::string hex = llvm::utohexstr(rec[1 + w], /*LowerCase=*/true);
      sha += std::string(8 - hex.size(), '0') + hex;
    }
    // What rank r wrote must be there as rank 0 sees the directory.
    llvm::SmallString<256> shard(p->partialDir);
    llvm::sys::path::append(shard, rankFileName(r));
    uint64_t onDisk = 0;
    if (std::error_code ec = llvm::sys::fs::file_size(shard, onDisk))
      return makeError("checkpoint " + stepName + ": rank " + Twine(r) +
                       " wrote " + shard + " but rank 0 cannot see it (" +
                       ec.message() +
                       "): --checkpoint-dir must be one directory every "
                       "rank sees");
    if (onDisk != rec[0])
      return makeError("checkpoint " + stepName + ": " + shard + " has " +
                       Twine(onDisk) + " bytes, rank " + Twine(r) + " wrote " +
                       Twine(rec[0]));
    entries.push_back({rankFileName(r), rec[0], sha});
  }
  std::string bytes;
  if (!ck.SerializeToString(&bytes))
    return makeError("checkpoint " + stepName + ": cannot serialize " +
                     kCheckpointFile);
  auto asBytes = [](StringRef s) {
    return llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(s.data()),
                                   s.size());
  };
  entries.insert(entries.begin(), {kCheckpointFile, bytes.size(),
                                   plan::sha256Hex(asBytes(bytes))});
  llvm::SmallString<256> file(p->partialDir);
  llvm::sys::path::append(file, kCheckpointFile);
  if (Error err = plan::writeFileDurably(file, asBytes(bytes)))
    return err;
  // The manifest last: from here on the checkpoint exists.
  std::string manifest = plan::formatManifest(entries, kCheckpointManifest);
  file = p->partialDir;
  llvm::sys::path::append(file, plan::kManifestFile);
  if (Error err = plan::writeFileDurably(file, asBytes(manifest)))
    return err;
  llvm::SmallString<256> final(options.dir);
  llvm::sys::path::append(final, stepName);
  // A checkpoint of the same step (a resumed run reaching it again) is
  // replaced only once the new one is complete.
  llvm::SmallString<256> old(options.dir);
  llvm::sys::path::append(old, "." + stepName + ".old-" + token);
  bool replaced = false;
  if (llvm::sys::fs::exists(final)) {
    if (std::error_code ec = llvm::sys::fs::rename(final, old))
      return makeError("cannot move the older " + final +
                       " aside: " + ec.message());
    replaced = true;
  }
  if (std::error_code ec = llvm::sys::fs::rename(p->partialDir, final))
    return makeError("cannot rename " + p->partialDir + " to " + final + ": " +
                     ec.message());
  if (Error err = plan::syncDirectory(options.dir))
    return err;
  if (replaced)
    llvm::sys::fs::remove_directories(old);
  return prune();
}

Error CheckpointWriter::prune() {
  // Partial directories (and shared-directory probes) of jobs that ended
  // before publishing, and older checkpoints beyond --keep-last. The newest
  // complete one always stays.
  std::error_code ec;
  std::vector<std::string> stale;
  for (llvm::sys::fs::directory_iterator it(options.dir, ec), end;
       it != end && !ec; it.increment(ec)) {
    StringRef name = llvm::sys::path::filename(it->path());
    if (name.starts_with(".probe-") && name != ".probe-" + token) {
      llvm::sys::fs::remove(it->path());
      continue;
    }
    if (name.starts_with(".step-") &&
        (name.contains(".partial-") || name.contains(".old-")) &&
        !name.contains(".partial-" + token + "-") &&
        !name.ends_with(".old-" + token))
      stale.push_back(it->path());
  }
  for (const std::string &dir : stale)
    llvm::sys::fs::remove_directories(dir);
  if (options.keepLast <= 0)
    return Error::success();
  auto done = completeCheckpoints(options.dir);
  size_t keep = static_cast<size_t>(std::max<int64_t>(options.keepLast, 1));
  for (size_t i = 0; i + keep < done.size(); ++i) {
    // The manifest first: a checkpoint half deleted is not one.
    llvm::SmallString<256> manifest(done[i].second);
    llvm::sys::path::append(manifest, plan::kManifestFile);
    llvm::sys::fs::remove(manifest);
    if (std::error_code e = llvm::sys::fs::remove_directories(done[i].second))
      return makeError("--keep-last: cannot remove " + done[i].second + ": " +
                       e.message());
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

/// Checks checkpoint.pb's structure: known dtypes, valid shapes, pieces
/// inside their files, and pieces that hold every element of every tensor
/// exactly once (per rank for per-rank tensors).
static Error validateCheckpoint(const plan::Checkpoint &ck,
                                const plan::Manifest &manifest, StringRef dir) {
  std::string where = (dir + "/" + kCheckpointFile).str();
  if (ck.world_size() < 1 || ck.world_size() > (1 << 20))
    return makeError(where + ": world_size " + Twine(ck.world_size()) +
                     " is invalid");
  // Positions of the sample stream and steps stay far inside int64, where
  // the trainer computes with them.
  constexpr uint64_t kMaxPosition = uint64_t(1) << 52;
  if (ck.step() > kMaxPosition || ck.samples_consumed() > kMaxPosition ||
      ck.data_samples() < 0)
    return makeError(where + ": step " + Twine(ck.step()) + ", data position " +
                     Twine(ck.samples_consumed()) + " or data-set size " +
                     Twine(ck.data_samples()) + " is invalid");
  std::vector<uint64_t> fileSizes;
  for (int64_t r = 0; r < ck.world_size(); ++r) {
    const plan::ManifestEntry *e = manifest.find(rankFileName(r));
    if (!e)
      return makeError("checkpoint " + dir + " was saved by " +
                       Twine(ck.world_size()) + " ranks, but its manifest " +
                       "lists no " + rankFileName(r) +
                       "; the checkpoint is incomplete");
    fileSizes.push_back(e->size);
  }
  llvm::StringSet<> names;
  for (const plan::CheckpointTensor &t : ck.tensors()) {
    std::string what = where + ": tensor '" + t.name() + "'";
    if (t.name().empty() || !names.insert(t.name()).second)
      return makeError(what + ": its name is empty or repeated");
    DType dtype = plan::toRuntime(t.dtype());
    if (dtype == DType::Undefined)
      return makeError(what + ": unknown element type " + Twine(t.dtype()));
    int64_t n = 1;
    for (int64_t d : t.shape())
      if (d < 0 || llvm::MulOverflow(n, d, n))
        return makeError(what + ": invalid shape");
    // Covered elements, per rank for per-rank tensors (rank -1 otherwise).
    std::map<int, std::vector<std::pair<int64_t, int64_t>>> ranges;
    for (const plan::CheckpointPiece &p : t.pieces()) {
      int64_t end;
      if (p.rank() < 0 || p.rank() >= ck.world_size() ||
          p.element_offset() < 0 || p.elements() <= 0 ||
          llvm::AddOverflow(p.element_offset(), p.elements(), end) || end > n)
        return makeError(what + ": a piece of rank " + Twine(p.rank()) +
                         " at element " + Twine(p.element_offset()) +
                         " lies outside the tensor");
      uint64_t elem = dtypeSize(dtype);
      uint64_t elements = static_cast<uint64_t>(p.elements());
      uint64_t bytes = elements * elem;
      if (elements > std::numeric_limits<uint64_t>::max() / elem ||
          p.byte_offset() > fileSizes[p.rank()] ||
          bytes > fileSizes[p.rank()] - p.byte_offset())
        return makeError(what + ": a piece lies outside " +
                         rankFileName(p.rank()));
      ranges[t.per_rank() ? p.rank() : -1].push_back({p.element_offset(), end});
    }
    if (n > 0 && (ranges.empty() || (t.per_rank() && !ranges.count(0))))
      return makeError(what + ": no piece holds its value" +
                       (t.per_rank() ? " on rank 0" : ""));
    for (auto &[r, list] : ranges) {
      llvm::sort(list);
      int64_t next = 0;
      for (auto [b, e] : list) {
        if (b != next)
          return makeError(what + ": its pieces " +
                           (b < next ? "overlap" : "leave a gap") +
                           " at element " + Twine(std::min(b, next)));
        next = e;
      }
      if (next != n)
        return makeError(what + ": its pieces end at element " + Twine(next) +
                         " of " + Twine(n));
    }
  }
  return Error::success();
}

Expected<std::unique_ptr<CheckpointReader>>
CheckpointReader::open(StringRef path) {
  if (!llvm::sys::fs::is_directory(path))
    return makeError("--resume " + path + ": no such directory");
  std::unique_ptr<CheckpointReader> r(new CheckpointReader());
  llvm::SmallString<256> manifestPath(path);
  llvm::sys::path::append(manifestPath, plan::kManifestFile);
  if (llvm::sys::fs::exists(manifestPath)) {
    r->path = path.str();
  } else {
    auto done = completeCheckpoints(path);
    if (done.empty()) {
      // A directory named like a checkpoint is one that was being written.
      if (llvm::sys::path::filename(path).starts_with("step-"))
        return makeError("--resume " + path +
                         ": the checkpoint is incomplete (it has no "
                         "manifest: the run ended while saving it); resume "
                         "from an earlier one in " +
                         llvm::sys::path::parent_path(path));
      return makeError("--resume " + path +
                       ": holds no complete checkpoint (a directory step-N "
                       "with a manifest)");
    }
    r->path = done.back().second;
  }
  Expected<std::unique_ptr<plan::ReadOnlyFile>> mf =
      plan::ReadOnlyFile::open(r->path, plan::kManifestFile, "checkpoint");
  if (!mf)
    return mf.takeError();
  Expected<std::vector<uint8_t>> text = (*mf)->readAll(plan::kMaxManifestBytes);
  if (!text)
    return text.takeError();
  Expected<plan::Manifest> m = plan::parseManifest(
      StringRef(reinterpret_cast<const char *>(text->data()), text->size()),
      kCheckpointManifest);
  if (!m)
    return makeError("the manifest of checkpoint " + r->path +
                     " is invalid: " + toString(m.takeError()));
  r->manifest = std::move(*m);
  const plan::ManifestEntry *entry = r->manifest.find(kCheckpointFile);
  Expected<std::unique_ptr<plan::ReadOnlyFile>> cf =
      plan::ReadOnlyFile::open(r->path, kCheckpointFile, "checkpoint");
  if (!cf)
    return cf.takeError();
  if ((*cf)->size() != entry->size)
    return makeError((*cf)->path() + " is " + Twine((*cf)->size()) +
                     " bytes, but the manifest lists " + Twine(entry->size) +
                     ": " + kCheckpointManifest.advice);
  Expected<std::vector<uint8_t>> raw = (*cf)->readAll(kMaxCheckpointFileBytes);
  if (!raw)
    return raw.takeError();
  if (plan::sha256Hex(*raw) != entry->sha256)
    return makeError((*cf)->path() +
                     " does not match its SHA-256 in the manifest: " +
                     kCheckpointManifest.advice);
  bool parsed;
  {
#if GOOGLE_PROTOBUF_VERSION < 4022000
    google::protobuf::LogSilencer silence;
#endif
    parsed = raw->size() <= INT_MAX &&
             r->info.ParseFromArray(raw->data(), static_cast<int>(raw->size()));
  }
  if (!parsed)
    return makeError((*cf)->path() + " is not a checkpoint description");
  if (r->info.version() != kCheckpointVersion)
    return makeError((*cf)->path() + " has version " +
                     Twine(r->info.version()) + ", but this build reads " +
                     Twine(kCheckpointVersion));
  if (Error err = validateCheckpoint(r->info, r->manifest, r->path))
    return std::move(err);
  return std::move(r);
}

Error CheckpointReader::load(Executor &exec, const plan::LoadedPlan &loaded,
                             Communicator *comm) {
  int rank = comm ? comm->rank() : 0;
  int world = comm ? comm->worldSize() : 1;
  Error err = loadHere(exec, loaded, rank, world);
  if (!comm || world == 1)
    return err;
  int32_t failed = err ? 1 : 0;
  std::vector<int32_t> all(world);
  if (Error e = comm->allGather(&failed, all.data(), 1, DType::I32)) {
    llvm::consumeError(std::move(err));
    return e;
  }
  if (err)
    return err;
  for (int r = 0; r < world; ++r)
    if (all[r])
      return makeError("rank " + Twine(r) + " could not load checkpoint " +
                       path + " (its message says why)");
  return Error::success();
}

Error CheckpointReader::loadHere(Executor &exec, const plan::LoadedPlan &loaded,
                                 int rank, int world) {
  const plan::Plan &p = loaded.plan;
  std::string what = "checkpoint " + path;
  // The same model: the plan's source model is the one that was trained.
  if (p.has_training())
    if (const plan::ManifestEntry *e =
            loaded.manifest.find(p.training().source_model()))
      if (!info.model_sha256().empty() && e->sha256 != info.model_sha256())
        return makeError(
            what + " is of another model: it was saved from model '" +
            info.model_name() + "' (source model SHA-256 " +
            info.model_sha256().substr(0, 16) + "...), the plan in " +
            loaded.dir + " compiles '" + p.model_name() + "' (" +
            e->sha256.substr(0, 16) +
            "...); resume with a plan compiled from the same ONNX file");
  Expected<StateLayout> layout = stateLayout(p, rank);
  if (!layout)
    return layout.takeError();
  // Exactly the tensors the plan holds: none missing, none left behind.
  llvm::StringMap<const plan::CheckpointTensor *> saved;
  for (const plan::CheckpointTensor &t : info.tensors())
    saved[t.name()] = &t;
  llvm::StringSet<> needed;
  for (const StateTensor &t : layout->tensors) {
    needed.insert(t.name);
    const plan::CheckpointTensor *ct = saved.lookup(t.name);
    if (!ct)
      return makeError(what + " has no '" + t.name + "', which the plan in " +
                       loaded.dir +
                       " holds: the checkpoint was saved with another "
                       "optimizer, loss scaling or model; compile the plan "
                       "with the options of the run that saved it");
    bool same = plan::toRuntime(ct->dtype()) == t.dtype &&
                llvm::equal(ct->shape(), t.shape) &&
                ct->per_rank() == t.perRank;
    if (!same)
      return makeError(what + ": '" + t.name + "' is " +
                       dtypeName(plan::toRuntime(ct->dtype())) + " " +
                       shapeToString(llvm::SmallVector<int64_t, 4>(
                           ct->shape().begin(), ct->shape().end())) +
                       ", the plan in " + loaded.dir + " holds " +
                       dtypeName(t.dtype) + " " + shapeToString(t.shape) +
                       ": the checkpoint belongs to another model or plan");
  }
  for (const plan::CheckpointTensor &t : info.tensors())
    if (!needed.contains(t.name()))
      return makeError(what + " holds '" + t.name() + "', which the plan in " +
                       loaded.dir +
                       " has no place for (loading would lose it): the "
                       "checkpoint was saved with another optimizer, loss "
                       "scaling or model; compile the plan with the options "
                       "of the run that saved it");

  // The ranks share out checking whole data files: together every byte.
  for (int64_t f = rank; f < info.world_size(); f += world) {
    const plan::ManifestEntry *e = manifest.find(rankFileName(f));
    Expected<std::unique_ptr<plan::ReadOnlyFile>> file =
        plan::ReadOnlyFile::open(path, e->name, "checkpoint");
    if (!file)
      return file.takeError();
    if ((*file)->size() != e->size)
      return makeError((*file)->path() + " is " + Twine((*file)->size()) +
                       " bytes, but the manifest lists " + Twine(e->size) +
                       ": " + kCheckpointManifest.advice);
    Expected<std::string> sum = (*file)->sha256(e->size);
    if (!sum)
      return sum.takeError();
    if (*sum != e->sha256)
      return makeError((*file)->path() +
                       " does not match its SHA-256 in the manifest: " +
                       kCheckpointManifest.advice);
  }

  // Each buffer: its current bytes (padding stays as the plan set it),
  // patched with the pieces, written back once.
  std::map<int64_t, std::unique_ptr<plan::ReadOnlyFile>> files;
  llvm::DenseMap<int32_t, std::vector<uint8_t>> images;
  for (const StateSlice &s : layout->slices) {
    const StateTensor &t = layout->tensors[s.tensor];
    const plan::CheckpointTensor &ct = *saved.lookup(t.name);
    size_t elem = dtypeSize(t.dtype);
    Expected<std::vector<uint8_t> *> image = hostCopy(exec, images, s.buffer);
    if (!image)
      return image.takeError();
    // A per-rank value: this rank's if the saving run had it, else rank 0's.
    int from = -1;
    if (ct.per_rank())
      from = llvm::any_of(ct.pieces(),
                          [&](const plan::CheckpointPiece &q) {
                            return q.rank() == rank;
                          })
                 ? rank
                 : 0;
    int64_t lo = s.tensorElement, hi = s.tensorElement + s.elements;
    int64_t copied = 0;
    for (const plan::CheckpointPiece &q : ct.pieces()) {
      if (from >= 0 && q.rank() != from)
        continue;
      int64_t b = std::max(lo, q.element_offset());
      int64_t e = std::min(hi, q.element_offset() + q.elements());
      if (b >= e)
        continue;
      auto &file = files[q.rank()];
      if (!file) {
        Expected<std::unique_ptr<plan::ReadOnlyFile>> f =
            plan::ReadOnlyFile::open(path, rankFileName(q.rank()),
                                     "checkpoint");
        if (!f)
          return f.takeError();
        file = std::move(*f);
      }
      std::vector<uint8_t> piece(static_cast<size_t>(q.elements()) * elem);
      if (Error err = file->read(q.byte_offset(), piece))
        return err;
      if (plan::fnv1a64(piece) != q.checksum())
        return makeError(
            file->path() + ": the bytes of '" + t.name + "' at offset " +
            Twine(q.byte_offset()) +
            " do not match their checksum: " + kCheckpointManifest.advice);
      std::memcpy((*image)->data() +
                      static_cast<size_t>(s.bufferElement + (b - lo)) * elem,
                  piece.data() +
                      static_cast<size_t>(b - q.element_offset()) * elem,
                  static_cast<size_t>(e - b) * elem);
      copied += e - b;
    }
    if (copied != s.elements)
      return makeError(what + ": the pieces of '" + t.name + "' hold " +
                       Twine(copied) + " of the " + Twine(s.elements) +
                       " elements rank " + Twine(rank) + " needs");
  }
  for (auto &[buffer, bytes] : images)
    if (Error err = exec.writeBuffer(static_cast<size_t>(buffer), bytes.data()))
      return err;
  return Error::success();
}

} // namespace shardc::rt
