//===- PlanIO.h - Writing and loading plan directories ----------*- C++ -*-===//
//
// A plan directory is `plan.pb` plus data files (see plan.proto) and a
// `manifest` that lists every file of the plan with its size and SHA-256
// (docs/plan-format.md). The writer streams parameter and constant bytes
// into `params.bin` / `constants.bin` and writes the manifest last; the
// loader first checks the manifest and every file against it, then
// validates everything (version, buffer indices, shapes, byte counts, file
// bounds, checksums, def-before-use of every buffer, ZeRO-3 units, optimizer
// hyper-parameters) before a caller can run anything, and reports the first
// problem with the plan directory and the offending file, buffer or op
// named. It opens nothing but regular files of the plan directory itself
// (no FIFO, device or symbolic link) and never reads more than the manifest
// says.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PLAN_PLANIO_H
#define SHARDC_PLAN_PLANIO_H

#include "plan.pb.h"
#include "plan/SafeFile.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardc::plan {

/// The schema version this build writes and accepts (plan.pb's `version`
/// and the manifest's first line). Version 2 added the manifest, 3 the
/// initial values of state, 4 the units' optimizer-state layout, 5 the rank
/// mesh (hybrid sharding), 6 the offload tier (Buffer.offloaded and the
/// OffloadReadStart / OffloadWriteStart ops).
constexpr uint32_t kPlanVersion = 7;
/// File names inside a plan directory.
constexpr const char *kPlanFile = "plan.pb";
constexpr const char *kParamsFile = "params.bin";
constexpr const char *kConstantsFile = "constants.bin";
constexpr const char *kManifestFile = "manifest";
/// The largest manifest a reader accepts.
constexpr uint64_t kMaxManifestBytes = uint64_t(1) << 20;
/// The most files a manifest may list.
constexpr size_t kMaxManifestFiles = 256;

/// FNV-1a 64-bit hash of `data`.
uint64_t fnv1a64(llvm::ArrayRef<uint8_t> data,
                 uint64_t seed = 0xcbf29ce484222325ULL);

/// One file of a plan directory as the manifest lists it.
struct ManifestEntry {
  std::string name;
  uint64_t size = 0;
  std::string sha256; ///< 64 lowercase hex digits
};

/// The manifest of a plan directory:
///
///   shard-plan 3
///   plan.pb 33816 <sha256 of plan.pb>
///   params.bin 112128 <sha256>
///   ...
///   sha256 <sha256 of every byte above this line>
///
/// One line per file, '\n' line ends, nothing after the last line.
struct Manifest {
  uint32_t version = 0;
  std::vector<ManifestEntry> files;
  /// The last line's SHA-256: it identifies the whole plan (every file's
  /// size and content), so ranks compare it before the first step.
  std::string digest;

  const ManifestEntry *find(llvm::StringRef name) const;
};

/// What a manifest belongs to: its first line is "<word> <version>", it
/// must list file `required`, and messages about a bad one name the
/// `container` and end with `advice`. Checkpoints (runtime/Checkpoint.h)
/// have manifests of the same form.
struct ManifestKind {
  llvm::StringRef word;
  uint32_t version;
  llvm::StringRef required;
  llvm::StringRef container;
  llvm::StringRef advice;
};
/// "shard-plan 4", plan.pb, "recompile the model with shardc".
extern const ManifestKind kPlanManifest;

/// The text of a manifest listing `files`.
std::string formatManifest(llvm::ArrayRef<ManifestEntry> files,
                           const ManifestKind &kind = kPlanManifest);

/// Parses and checks a manifest's text: header, one well-formed line per
/// file (plain names, no duplicates, the required file listed) and the
/// final SHA-256. A manifest of another version is an error with the kind's
/// advice.
llvm::Expected<Manifest>
parseManifest(llvm::StringRef text, const ManifestKind &kind = kPlanManifest);

/// Reads file `name` of the plan directory `dir`. Only a regular file is
/// read (a FIFO, device, directory or symbolic link is an error, and
/// opening one never blocks), and only when it holds at most `maxBytes`.
llvm::Expected<std::vector<uint8_t>>
readPlanFile(llvm::StringRef dir, llvm::StringRef name, uint64_t maxBytes);

/// Reads and checks the manifest of `dir`. A directory without one (a plan
/// written before version 2) is an error that says to recompile.
llvm::Expected<Manifest> readManifest(llvm::StringRef dir);

/// Reads file `name` of `dir` and checks it against the manifest of `dir`
/// (listed, same size, same SHA-256).
llvm::Expected<std::vector<uint8_t>> readVerifiedPlanFile(llvm::StringRef dir,
                                                          llvm::StringRef name);

/// Rewrites the manifest of `dir` for the current contents of the files it
/// lists. For tests and tools that edit a plan on purpose; the loader then
/// validates the edited plan like any other.
llvm::Error resealPlan(llvm::StringRef dir);

/// Builds a plan and writes its directory. Data of PARAMETER buffers goes to
/// params.bin, of CONSTANT buffers to constants.bin; offsets, byte counts and
/// checksums are filled in by the writer.
class PlanWriter {
public:
  PlanWriter();
  ~PlanWriter();

  /// Adds a buffer with no data (TEMP or INPUT) and returns its index.
  int32_t addBuffer(llvm::StringRef name, rt::DType dtype,
                    llvm::ArrayRef<int64_t> shape, BufferKind kind);
  /// Adds a PARAMETER or CONSTANT buffer whose bytes are `data`
  /// (exactly numel * element size bytes, else an error).
  /// With shardCount > 1 (a ZeRO-3 flat parameter), `data` holds
  /// shardCount consecutive shards of `shape`; each rank loads its own.
  llvm::Expected<int32_t> addDataBuffer(llvm::StringRef name, rt::DType dtype,
                                        llvm::ArrayRef<int64_t> shape,
                                        BufferKind kind,
                                        llvm::ArrayRef<uint8_t> data,
                                        int64_t shardCount = 1);
  /// Adds a file that travels with the plan (e.g. the source model named by
  /// Training.source_model): written to `dir`/`name` and listed in the
  /// manifest. `name` must be a plain file name other than the plan's own.
  llvm::Error addFile(llvm::StringRef name, std::vector<uint8_t> bytes);
  /// Whether addFile added `name`.
  bool hasFile(llvm::StringRef name) const;

  /// The message being built: add ops, inputs and outputs directly.
  Plan &plan() { return planMsg; }

  /// A writer for a plan that is only measured (shardc --simulate):
  /// addDataBuffer takes empty data and records where the bytes would lie
  /// (validate checks the plan as write would), and write refuses.
  void setShapesOnly() { shapesOnlyPlan = true; }
  bool shapesOnly() const { return shapesOnlyPlan; }
  /// The checks write makes of the plan (validatePlan), without writing.
  llvm::Error validate() const;

  /// Checks the plan with validatePlan (an invalid plan is an error and
  /// nothing is written), creates `dir` (and parents) if needed, writes the
  /// data files, plan.pb and the manifest. An existing plan in `dir` is
  /// replaced only after everything new has been written (files are written
  /// to temporaries and renamed, the manifest last: until then the old
  /// manifest no longer matches and the directory does not load).
  llvm::Error write(llvm::StringRef dir);

private:
  Plan planMsg;
  bool shapesOnlyPlan = false;
  /// The bytes a shapes-only plan's data files would hold.
  uint64_t shapesOnlyParams = 0, shapesOnlyConsts = 0;
  std::vector<uint8_t> params, constants;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> extraFiles;
};

/// A validated plan with its parameter and constant bytes in memory.
struct LoadedPlan {
  std::string dir;
  Plan plan;
  /// The manifest every file was checked against.
  Manifest manifest;
  /// bytes[i] holds the data of buffer i (empty for TEMP and INPUT).
  std::vector<std::vector<uint8_t>> bytes;
};

/// The ranks of a plan as a mesh (plan.proto Plan.mesh_shape and
/// shard_axes): rank r sits at the row-major coordinates of r in `shape`.
/// A set of axes splits the ranks into groups of the ranks that differ only
/// along those axes; a collective runs within such a group, and ZeRO shards
/// are spread over the group of the shard axes.
struct RankMesh {
  std::vector<int64_t> shape;
  /// Increasing, in [0, shape.size()).
  std::vector<int32_t> shardAxes;

  /// The mesh of a validated plan (one axis of world_size ranks, sharded
  /// along it, when the plan names none).
  static RankMesh of(const Plan &plan);
  int64_t worldSize() const;
  /// Ranks per group of `axes` (the product of their extents).
  int64_t groupSize(llvm::ArrayRef<int32_t> axes) const;
  /// `rank`'s position in its group of `axes` (its linear index over them),
  /// and which group it is in (its linear index over the other axes).
  int64_t indexIn(int64_t rank, llvm::ArrayRef<int32_t> axes) const;
  int64_t groupOf(int64_t rank, llvm::ArrayRef<int32_t> axes) const;
  /// ZeRO shards: how many, the shard `rank` holds, and whether `rank` holds
  /// the first copy of it (replica 0, which saves it in checkpoints).
  int64_t shardCount() const { return groupSize(shardAxes); }
  int64_t shardIndex(int64_t rank) const { return indexIn(rank, shardAxes); }
  bool firstReplica(int64_t rank) const {
    return groupOf(rank, shardAxes) == 0;
  }
  /// Every axis, in order.
  std::vector<int32_t> allAxes() const;
  /// "2 x 2 (shards along axis 1)", for messages; "" for one axis sharded
  /// along it.
  std::string describe() const;
};

/// The axes of a collective op's `mesh_axes` attribute (every axis of
/// `mesh` when absent).
std::vector<int32_t> collectiveAxes(const Op &op, const RankMesh &mesh);

/// Reads and validates a plan directory: the manifest, then every file it
/// lists against it, then plan.pb and the data. `knownOpTypes`, when non-empty,
/// lists the op types the caller can run; any other op type is an error.
/// `rank` selects which shard of sharded parameters is loaded (its
/// RankMesh::shardIndex).
llvm::Expected<std::unique_ptr<LoadedPlan>>
loadPlan(llvm::StringRef dir, llvm::ArrayRef<llvm::StringRef> knownOpTypes = {},
         int rank = 0);

/// Validates a plan message without its data (structure only).
llvm::Error validatePlan(const Plan &plan,
                         llvm::ArrayRef<llvm::StringRef> knownOpTypes = {});

/// What ranks compare before the first step, each part a hash: ranks whose
/// plans differ in any part would compute differently.
struct PlanDigest {
  enum Part {
    /// Every file of the plan (the manifest's digest).
    Whole,
    /// The sequence of collectives (type, element type, element count).
    Collectives,
    /// Ops, buffers, graph inputs and outputs, units, model attributes.
    Schedule,
    /// The training settings and the optimizer ops' attributes.
    HyperParameters,
    /// params.bin (every rank's shards).
    ParameterData,
    /// constants.bin.
    Constants,
    /// Every other file (the source model).
    OtherFiles,
    /// What does not change the computation: producer, model name, the
    /// memory prediction.
    Metadata,
    NumParts
  };
  std::array<uint64_t, NumParts> parts{};
};

/// What each part of a PlanDigest covers, for messages.
llvm::StringRef planPartName(PlanDigest::Part part);

/// Hashes the parts of a loaded plan.
PlanDigest digestPlan(const LoadedPlan &loaded);

/// The plan's hyper-parameters in one line, e.g. "optimizer adamw,
/// micro_batch 8, AdamUpdate lr=0.003 beta1=0.9 ...", for messages.
std::string describeHyperParameters(const Plan &plan);

/// Conversions between the runtime's DType and the schema's.
rt::DType toRuntime(DType t);
DType fromRuntime(rt::DType t);

} // namespace shardc::plan

#endif // SHARDC_PLAN_PLANIO_H
