//===- Normalization.cpp - Import of ONNX normalizations ------------------===//
//
// Softmax and LogSoftmax (opset-13 semantics: one axis, default -1),
// LayerNormalization, which always gets its Mean and InvStdDev results (the
// input's leading dims, then 1s from `axis` on), and BatchNormalization with
// its defaults filled in, in inference and in training mode (also when the
// dynamo exporter made a training-mode batch norm an inference-mode node).
// InstanceNormalization (what nn.InstanceNorm2d and nn.GroupNorm export to)
// becomes a LayerNormalization over the spatial dimensions followed by the
// per-channel scale and bias. Tested by test/lit/import/normalization.onnxtxt
// and batchnorm.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

#include "mlir/IR/Matchers.h"

#include "google/protobuf/unknown_field_set.h"

using namespace mlir;

namespace shardc {

template <typename OpT>
static LogicalResult importSoftmaxLike(ImportContext &ctx) {
  if (failed(ctx.requireOperands(1, 1)))
    return failure();
  Value in = ctx.operand(0);
  auto axis = ctx.normAxis(ctx.intAttr("axis", -1),
                           cast<RankedTensorType>(in.getType()).getRank());
  if (failed(axis))
    return failure();
  return ctx.finish(
      ctx.builder().create<OpT>(ctx.loc(), in.getType(), in, *axis));
}

static LogicalResult importLayerNorm(ImportContext &ctx) {
  if (failed(ctx.requireOperands(2, 3)))
    return failure();
  OpBuilder &b = ctx.builder();
  Value x = ctx.operand(0);
  auto xt = cast<RankedTensorType>(x.getType());
  auto axis = ctx.normAxis(ctx.intAttr("axis", -1), xt.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> stat(xt.getShape().take_front(*axis));
  stat.append(xt.getRank() - *axis, 1);
  auto statType = RankedTensorType::get(stat, b.getF32Type());
  auto op = b.create<LayerNormalizationOp>(
      ctx.loc(), TypeRange{xt, statType, statType}, x, ctx.operand(1),
      ctx.operand(2), b.getI64IntegerAttr(*axis),
      b.getF32FloatAttr(ctx.floatAttr("epsilon", 1e-5f)));
  return ctx.finish(op);
}

/// Whether `node` is an inference-mode BatchNormalization that PyTorch's
/// dynamo exporter made from a training-mode batch norm: torchlib (through
/// PyTorch 2.15 at least) translates aten._native_batch_norm_legit_functional,
/// native_batch_norm and _native_batch_norm_legit into inference mode
/// whatever their `training` argument, but the node's metadata
/// (NodeProto.metadata_props, IR 10, an unknown field to libonnx 1.12) keeps
/// the FX call, e.g. "call_function[target=torch.ops.aten.
/// _native_batch_norm_legit_functional.default](args = (%conv2d, %p_bn_weight,
/// %p_bn_bias, %b_bn_running_mean, %b_bn_running_var, True, 0.1, 1e-05)".
static bool exportedFromTrainingBatchNorm(const onnx::NodeProto &node) {
  const auto &unknown = node.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto &field = unknown.field(i);
    onnx::StringStringEntryProto entry;
    if (field.number() != 9 ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED ||
        !entry.ParseFromString(field.length_delimited()) ||
        entry.key() != "pkg.torch.onnx.fx_node")
      continue;
    llvm::StringRef call(entry.value());
    bool batchNorm = llvm::any_of(
        ArrayRef<llvm::StringRef>{
            "aten._native_batch_norm_legit_functional.default]",
            "aten.native_batch_norm.default]",
            "aten._native_batch_norm_legit.default]"},
        [&](llvm::StringRef target) { return call.contains(target); });
    size_t open = call.find("](args = (");
    if (!batchNorm || open == llvm::StringRef::npos)
      return false;
    llvm::StringRef args = call.drop_front(open + 10).split(')').first;
    SmallVector<llvm::StringRef> parts;
    args.split(parts, ", ");
    // (input, weight, bias, running_mean, running_var, training, momentum,
    // eps)
    return parts.size() == 8 && parts[5] == "True";
  }
  return false;
}

static LogicalResult importBatchNorm(ImportContext &ctx) {
  if (failed(ctx.requireOperands(5, 5)))
    return failure();
  OpBuilder &b = ctx.builder();
  int64_t training = ctx.intAttr("training_mode", 0);
  if (!training && exportedFromTrainingBatchNorm(ctx.node())) {
    ctx.nodeWarning() << "PyTorch's dynamo exporter translated a training-mode "
                         "batch norm into inference mode; it is imported in "
                         "training mode (batch statistics), as the module ran";
    training = 1;
  }
  if (ctx.opset() < 14 && ctx.node().output_size() > 1)
    return ctx.nodeError() << "training outputs (saved mean/variance) before "
                              "opset 14 are not supported; export with "
                              "opset_version >= 14";
  Value x = ctx.operand(0);
  Type statType = ctx.operand(3).getType();
  auto op = b.create<BatchNormalizationOp>(
      ctx.loc(), TypeRange{x.getType(), statType, statType}, x, ctx.operand(1),
      ctx.operand(2), ctx.operand(3), ctx.operand(4),
      b.getF32FloatAttr(ctx.floatAttr("epsilon", 1e-5f)),
      b.getF32FloatAttr(ctx.floatAttr("momentum", 0.9f)),
      b.getBoolAttr(training != 0), /*unbiased_var=*/b.getBoolAttr(false),
      /*moments=*/Value(), /*batch_count=*/IntegerAttr());
  return ctx.finish(op);
}

/// Whether `v` is a constant whose every element equals `x`.
static bool isSplatConstant(Value v, double x) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) ||
      !isa<FloatType>(attr.getElementType()))
    return false;
  return llvm::all_of(attr.getValues<APFloat>(), [&](const APFloat &f) {
    return f.convertToDouble() == x;
  });
}

/// InstanceNormalization normalizes each (n, c) slice of an (N, C, d...)
/// input over its spatial dimensions: that is LayerNormalization from axis 2
/// with a scale of ones (whose two-pass statistics and gradient rule it
/// reuses), then `* scale[c] + B[c]`. The multiply and add are left out when
/// scale is constant ones and B constant zeros (GroupNorm's export).
static LogicalResult importInstanceNorm(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 3)))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value x = ctx.operand(0), scale = ctx.operand(1), bias = ctx.operand(2);
  auto xt = cast<RankedTensorType>(x.getType());
  Type elem = xt.getElementType();
  if (xt.getRank() < 3)
    return ctx.nodeError() << "input must have shape [N, C, spatial...], got "
                           << xt;
  int64_t channels = xt.getDimSize(1);
  for (Value v : {scale, bias}) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getShape() != ArrayRef<int64_t>{channels} ||
        t.getElementType() != elem)
      return ctx.nodeError() << "scale and B must be " << elem << "["
                             << channels << "], got " << t;
  }
  auto onesType = RankedTensorType::get(xt.getShape().drop_front(2), elem);
  Value ones = ctx.splat(onesType, b.getFloatAttr(elem, 1.0));
  SmallVector<int64_t> stat(xt.getShape().take_front(2));
  stat.append(xt.getRank() - 2, 1);
  auto statType = RankedTensorType::get(stat, elem);
  Value y = b.create<LayerNormalizationOp>(
                 loc, TypeRange{xt, statType, statType}, x, ones, Value(),
                 b.getI64IntegerAttr(2),
                 b.getF32FloatAttr(ctx.floatAttr("epsilon", 1e-5f)))
                .getOutput();
  // scale and B as (C, 1, ..., 1), broadcasting over the spatial dims.
  SmallVector<int64_t> perChannel{channels};
  perChannel.append(xt.getRank() - 2, 1);
  auto channelType = RankedTensorType::get(perChannel, elem);
  if (!isSplatConstant(scale, 1.0))
    y = b.create<MulOp>(loc, y, b.create<ReshapeOp>(loc, channelType, scale));
  if (!isSplatConstant(bias, 0.0))
    y = b.create<AddOp>(loc, y, b.create<ReshapeOp>(loc, channelType, bias));
  ctx.define(0, y);
  return success();
}

void registerNormalizationImporters(OpImporterTable &table) {
  table.add("InstanceNormalization", importInstanceNorm);
  table.add("Softmax", importSoftmaxLike<SoftmaxOp>);
  table.add("LogSoftmax", importSoftmaxLike<LogSoftmaxOp>);
  table.add("LayerNormalization", importLayerNorm);
  table.add("BatchNormalization", importBatchNorm);
}

} // namespace shardc
