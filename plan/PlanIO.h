//===- PlanIO.h - Writing and loading plan directories ----------*- C++ -*-===//
//
// A plan directory is `plan.pb` plus data files (see plan.proto). The writer
// streams parameter and constant bytes into `params.bin` / `constants.bin`;
// the loader validates everything (version, buffer indices, shapes, byte
// counts, file bounds, checksums, def-before-use of every buffer) before a
// caller can run anything, and reports the first problem with the plan
// directory and the offending buffer or op named.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PLAN_PLANIO_H
#define SHARDC_PLAN_PLANIO_H

#include "plan.pb.h"
#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardc::plan {

/// The schema version this build writes and accepts.
constexpr uint32_t kPlanVersion = 1;
/// File names inside a plan directory.
constexpr const char *kPlanFile = "plan.pb";
constexpr const char *kParamsFile = "params.bin";
constexpr const char *kConstantsFile = "constants.bin";

/// FNV-1a 64-bit hash of `data`.
uint64_t fnv1a64(llvm::ArrayRef<uint8_t> data,
                 uint64_t seed = 0xcbf29ce484222325ULL);

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
  /// The message being built: add ops, inputs and outputs directly.
  Plan &plan() { return planMsg; }

  /// Checks the plan with validatePlan (an invalid plan is an error and
  /// nothing is written), creates `dir` (and parents) if needed, writes the
  /// data files and plan.pb. An existing plan in `dir` is replaced only after
  /// everything new has been written (files are written to temporaries and
  /// renamed, plan.pb last).
  llvm::Error write(llvm::StringRef dir);

private:
  Plan planMsg;
  std::vector<uint8_t> params, constants;
};

/// A validated plan with its parameter and constant bytes in memory.
struct LoadedPlan {
  std::string dir;
  Plan plan;
  /// bytes[i] holds the data of buffer i (empty for TEMP and INPUT).
  std::vector<std::vector<uint8_t>> bytes;
};

/// Reads and validates a plan directory. `knownOpTypes`, when non-empty,
/// lists the op types the caller can run; any other op type is an error.
/// `rank` selects which shard of sharded parameters is loaded.
llvm::Expected<std::unique_ptr<LoadedPlan>>
loadPlan(llvm::StringRef dir, llvm::ArrayRef<llvm::StringRef> knownOpTypes = {},
         int rank = 0);

/// Validates a plan message without its data (structure only).
llvm::Error validatePlan(const Plan &plan,
                         llvm::ArrayRef<llvm::StringRef> knownOpTypes = {});

/// Conversions between the runtime's DType and the schema's.
rt::DType toRuntime(DType t);
DType fromRuntime(rt::DType t);

} // namespace shardc::plan

#endif // SHARDC_PLAN_PLANIO_H
