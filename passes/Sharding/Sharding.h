//===- Sharding.h - Helpers shared by the ZeRO/FSDP passes ------*- C++ -*-===//
#ifndef SHARDC_PASSES_SHARDING_SHARDING_H
#define SHARDC_PASSES_SHARDING_SHARDING_H

#include "ir/ShardcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/MapVector.h"

namespace shardc {

/// Argument attribute set by shardc-wrap-units: the parameter's unit index.
constexpr llvm::StringLiteral kUnitAttrName = "shardc.unit";
/// Argument attributes of a ZeRO-3 flat parameter shard.
constexpr llvm::StringLiteral kParamShardAttrName = "shardc.param_shard";
constexpr llvm::StringLiteral kFlatParamsAttrName = "shardc.flat_params";
constexpr llvm::StringLiteral kFlatTypesAttrName = "shardc.flat_types";
/// Argument attributes of a wrap unit's optimizer-state shard (stages 1-3):
/// the unit's name and the state's suffix ("unit0" and ".exp_avg" for the
/// shard of every parameter's "<parameter>.exp_avg"), with the unit's
/// layout in kFlatParamsAttrName / kFlatTypesAttrName. The plan records it
/// (plan.proto FlatUnit.states) so that checkpoints can be resharded.
constexpr llvm::StringLiteral kStateShardOfAttrName = "shardc.state_shard_of";
constexpr llvm::StringLiteral kStateSuffixAttrName = "shardc.state_suffix";
/// Function attributes recording the sharding configuration.
constexpr llvm::StringLiteral kWorldSizeAttrName = "shardc.world_size";
constexpr llvm::StringLiteral kZeroStageAttrName = "shardc.zero_stage";
/// With hybrid sharding (shardc-zero-config's hybrid-shard): the number of
/// consecutive ranks a ZeRO shard group holds.
constexpr llvm::StringLiteral kShardGroupAttrName = "shardc.shard_group";
/// ZeRO-3's reshard-after-forward when it is not `true`: the number of
/// consecutive ranks a unit's parameters stay sharded over from forward to
/// backward (1: kept whole; G: a copy sharded over G ranks, along an axis of
/// its own).
constexpr llvm::StringLiteral kReshardAttrName = "shardc.reshard_after_forward";
/// An argument that lives in the offload tier (shardc-offload): plan
/// lowering marks its buffer offloaded.
constexpr llvm::StringLiteral kOffloadAttrName = "shardc.offload";
/// The mesh every collective runs on.
constexpr llvm::StringLiteral kMeshName = "world";
/// Discardable attributes linking the ops of one wrap unit across passes:
/// the unit's name on its sharded update, and on the mesh.all_slice that
/// takes this rank's gradient shard (rewritten by reduce-scatter-gradients)
/// or parameter shard (rewritten by shard-parameters).
constexpr llvm::StringLiteral kUnitNameAttrName = "shardc.unit_name";
constexpr llvm::StringLiteral kGradShardOfAttrName = "shardc.grad_shard_of";
constexpr llvm::StringLiteral kParamShardOfAttrName = "shardc.param_shard_of";

/// One optimizer update of a parameter (SGDUpdate or AdamUpdate).
struct ParamUpdate {
  mlir::Operation *op = nullptr;
  mlir::BlockArgument param;
  mlir::Value grad;
  /// Optimizer state arguments, in operand order.
  llvm::SmallVector<mlir::BlockArgument> states;
  mlir::Value step;
};

/// The parameter updates of @main, in body order.
llvm::SmallVector<ParamUpdate> collectParamUpdates(mlir::func::FuncOp func);

/// The layer a parameter belongs to: its name up to the first numeric
/// component ("blocks.3.attn.qkv.weight" -> "blocks.3"), else its module
/// ("fc1.weight" -> "fc1"). Default wrap units and recomputed segments are
/// layers.
std::string layerOf(llvm::StringRef paramName);

/// The `shardc.param` name of an argument ("" if none).
llvm::StringRef paramName(mlir::func::FuncOp func, mlir::BlockArgument arg);

/// The results of @main split into graph outputs and in-place updates.
struct StepResults {
  llvm::SmallVector<mlir::Value> outputs;
  llvm::SmallVector<std::pair<mlir::Value, mlir::BlockArgument>> updates;
};
StepResults readStepResults(mlir::func::FuncOp func);
/// Replaces @main's return with `results`, recomputing the function type
/// and the `shardc.updates` result attributes from the arguments' current
/// positions (arguments may have been added or erased since).
void writeStepResults(mlir::func::FuncOp func, const StepResults &results);

/// The world size the step was configured for (shardc-zero-config), or an
/// error on `func`.
mlir::FailureOr<int64_t> configuredWorldSize(mlir::func::FuncOp func,
                                             llvm::StringRef pass);

/// How the ranks of a step are arranged (shardc-zero-config): the mesh
/// @world is one axis of every rank, or with hybrid sharding two, groups x
/// ranks per group ([N / G, G]): ZeRO shards spread along axis 1, within a
/// group of G consecutive ranks, and are replicated along axis 0, across
/// the groups. When ZeRO-3 keeps units sharded over R ranks between forward
/// and backward (1 < R < shards), the shard group's axis is split in two,
/// [shards / R, R], and the shards spread along both.
struct RankGroups {
  int64_t world = 1;
  /// Ranks one copy of the sharded state is spread over (G, or the world).
  int64_t shards = 1;
  /// Ranks a unit's parameters stay sharded over from forward to backward
  /// (ZeRO-3's reshard-after-forward): `shards` (backward gathers from the
  /// shards), 1 (kept whole) or a divisor of `shards` in between.
  int64_t reshard = 1;
  bool hybrid() const { return shards != world; }
  /// Whether the shard group has an axis of its own for reshard's groups.
  bool splitsShards() const { return reshard > 1 && reshard < shards; }
  /// The extents of @world.
  llvm::SmallVector<int64_t> meshShape() const;
  /// The mesh axes of the shard group, of the replicas of one shard, of
  /// every rank, and of the group a unit is resharded over after forward
  /// (the shard group's unless splitsShards()).
  llvm::SmallVector<int16_t> shardAxes() const;
  llvm::SmallVector<int16_t> replicaAxes() const;
  llvm::SmallVector<int16_t> worldAxes() const;
  llvm::SmallVector<int16_t> reshardAxes() const;
};

/// The rank arrangement of the step as its attributes record it (one rank
/// when it was not configured).
RankGroups rankGroupsOf(mlir::func::FuncOp func);

/// The rank arrangement of the step (shardc-zero-config), or an error on
/// `func` naming `pass`.
mlir::FailureOr<RankGroups> configuredRanks(mlir::func::FuncOp func,
                                            llvm::StringRef pass);

/// Builds the flat, padded buffers of wrap units and tags what it creates
/// with its memory category.
class FlatBuilder {
public:
  FlatBuilder(mlir::OpBuilder &b, int64_t worldSize) : b(b), n(worldSize) {}
  mlir::Operation *tag(mlir::Operation *op, MemoryCategory category);
  mlir::Value tagged(mlir::Value v, MemoryCategory category);
  /// `v` as a 1-d tensor.
  mlir::Value flatten(mlir::Value v, MemoryCategory category);
  /// The `type`-shaped tensor at element `offset` of a 1-d buffer.
  mlir::Value sliceFlat(mlir::Value flat, int64_t offset,
                        mlir::RankedTensorType type, MemoryCategory category);
  /// 1-d `parts` concatenated and followed by `pad` zeros.
  mlir::Value concatFlat(llvm::ArrayRef<mlir::Value> parts, int64_t pad,
                         mlir::Type elem, MemoryCategory category);
  /// `v` with element type `elem`: the input of the widening cast that made
  /// `v` when it has that type (exact), else a new cast.
  mlir::Value castTo(mlir::Value v, mlir::Type elem, MemoryCategory category);
  /// `v` / world size (the average of a sum over ranks).
  mlir::Value scaleByInverseWorld(mlir::Value v, MemoryCategory category);
  /// The sum of `v` over the replicas of a shard (hybrid sharding: an
  /// all-reduce across the shard groups), or `v` when there are none.
  mlir::Value sumOverReplicas(mlir::Value v, const RankGroups &ranks,
                              MemoryCategory category);

  mlir::OpBuilder &b;
  int64_t n;
};

/// The element type the step reduces float gradients in
/// (shardc.reduce_dtype, set by shardc-mixed-precision), or null: their own.
mlir::Type reduceElementType(mlir::func::FuncOp func);

/// The op defining the latest of `values` in the block (null if none is an
/// op result).
mlir::Operation *latestDef(llvm::ArrayRef<mlir::Value> values);

/// The operations that must follow an op placed after `last` because they
/// are optimizer updates (which the ZeRO passes place right after their
/// unit's gradient) or use an update's result before `last` (the gather of
/// the updated parameters), in body order; an error naming `pass` when
/// `last` is one of them (a gradient depends on an update).
mlir::FailureOr<llvm::SmallVector<mlir::Operation *>>
opsAfterUpdates(mlir::Block &body, mlir::Operation *last, llvm::StringRef pass);

/// The optimizer updates of @main in body order, or an error on `func`
/// naming `pass` and the option that needs them (`feature`) when the step
/// updates no parameter.
mlir::FailureOr<llvm::SmallVector<OptimizerUpdate>>
requireUpdates(mlir::func::FuncOp func, llvm::StringRef pass,
               llvm::StringRef feature);

/// Moves `ops` right after `anchor`, keeping their order.
void moveOpsAfter(llvm::ArrayRef<mlir::Operation *> ops,
                  mlir::Operation *anchor);

/// The total over every rank of the PartialNorm parts of `grads` (the
/// gradients an optimizer update reads: full on every rank at stage 0,
/// this rank's shards at stages 1-3), built at `flat`'s insertion point: a
/// chain of PartialNorm, and at stages 1-3 with more than one rank, the
/// parts combined over the shard group (l2: all_reduce sum; inf: all_gather
/// and a PartialNorm of the parts, which propagates a NaN; the other groups
/// hold the same shards). An f64 scalar.
mlir::Value totalNormOverRanks(FlatBuilder &flat, mlir::func::FuncOp func,
                               llvm::ArrayRef<mlir::Value> grads,
                               NormType normType, mlir::Location loc);

/// Appends `value` to @main's graph outputs under `name` (made unique among
/// shardc.output_names with a numeric suffix), and returns the name given.
std::string addNamedOutput(mlir::func::FuncOp func, mlir::Value value,
                           llvm::StringRef name);

/// The parameter updates grouped by wrap unit (shardc.unit; a parameter
/// without one is a unit of its own), in order of first appearance.
llvm::MapVector<int64_t, llvm::SmallVector<ParamUpdate, 4>>
groupByUnit(mlir::func::FuncOp func, llvm::ArrayRef<ParamUpdate> updates);

/// Erases `root` if it is pure and unused, then every producer that is left
/// pure and unused in turn.
void eraseDeadProducers(mlir::Operation *root);

/// Writes `results` as @main's return, erases `deadOps` and the unused
/// `deadArgs`, and fixes the `shardc.updates` indices.
void finishRewrite(mlir::func::FuncOp func, const StepResults &results,
                   llvm::ArrayRef<mlir::Operation *> deadOps,
                   llvm::ArrayRef<mlir::BlockArgument> deadArgs);

} // namespace shardc

#endif // SHARDC_PASSES_SHARDING_SHARDING_H
