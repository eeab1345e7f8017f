//===- OpsetDowngrade.cpp - Opset 18-21 nodes into opset-17 forms ---------===//
//
// One table, kChanges, lists every default-domain operator whose schema
// changed (or that was introduced) after opset 17 up to kMaxOpset, with the
// opsets of the changes and the rewrite that turns the node into its opset-17
// form. Rewrites are small functions over a NodeRewrite, which gives them the
// node, the opset its schema has in the model, constant inputs (initializers
// and Constant nodes), the inferred type of an input (ONNX shape inference
// over the nodes rewritten so far) and a way to emit new nodes. Operators not
// in the table have the same schema at opsets 17 to kMaxOpset and pass
// through unchanged.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpsetDowngrade.h"

#include "frontend/ModelValidator.h"
#include "frontend/OnnxBridge.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>

using namespace mlir;

namespace shardc {

namespace {

class Downgrader;

/// One node's rewrite: reads the original node, appends its opset-17 form.
class NodeRewrite {
public:
  NodeRewrite(Downgrader &d, const onnx::NodeProto &node, unsigned index,
              int version)
      : node(node), d(d), index(index), version(version) {}

  /// The node as the model has it.
  const onnx::NodeProto &node;

  /// The opset at which the node's schema was last changed, at or below the
  /// model's opset (18 for a ReduceMean of an opset-20 model).
  int schemaVersion() const { return version; }
  /// Starts an error at the node ("<OpType> (opset N): ").
  InFlightDiagnostic error();

  /// The attribute `name` if it has type `type`; null when absent, or after
  /// reporting one of another type (findAttribute): the rewrite then fails
  /// whatever it does next, so no wrong-typed attribute is read as a default.
  const onnx::AttributeProto *attr(llvm::StringRef name,
                                   onnx::AttributeProto::AttributeType type);
  int64_t intAttr(llvm::StringRef name, int64_t def) {
    const auto *a = attr(name, onnx::AttributeProto::INT);
    return a ? a->i() : def;
  }
  std::string stringAttr(llvm::StringRef name, llvm::StringRef def) {
    const auto *a = attr(name, onnx::AttributeProto::STRING);
    return a ? a->s() : def.str();
  }
  /// Whether an attribute of the wrong type was reported.
  bool attributeErrors() const { return attrErrors; }
  bool hasInput(int i) const {
    return i < node.input_size() && !node.input(i).empty();
  }
  /// An error unless the node has input 0 and output 0 (an elementwise
  /// op's X and Y).
  LogicalResult requireInputAndOutput() {
    if (hasInput(0) && node.output_size() > 0 && !node.output(0).empty())
      return success();
    return error() << "needs an input and an output, got " << node.input_size()
                   << " and " << node.output_size();
  }

  /// The values of constant integer input `i` (an initializer or a Constant
  /// node); `what` names it in the error.
  FailureOr<llvm::SmallVector<int64_t>> constInts(int i, llvm::StringRef what);
  /// The values of constant float input `i`.
  FailureOr<llvm::SmallVector<double>> constFloats(int i, llvm::StringRef what);
  /// The shape ONNX shape inference gives input `i` (-1 for a dimension it
  /// does not know); `why` says in the error what needs it.
  FailureOr<llvm::SmallVector<int64_t>> inputShape(int i, llvm::StringRef why);

  /// A value name no other value of the graph has, from `base`.
  std::string fresh(llvm::StringRef base);
  /// Appends a node of the default domain, named after the original node.
  onnx::NodeProto &emit(llvm::StringRef opType,
                        llvm::ArrayRef<std::string> inputs,
                        llvm::ArrayRef<std::string> outputs);
  /// Appends a Constant node holding `values` (int64[n], or a scalar when
  /// `scalar`) and returns its output.
  std::string constInt64(llvm::ArrayRef<int64_t> values, bool scalar = false);
  /// Appends a float32 Constant (a scalar, or float[n] when `shape` is set)
  /// cast like `like`, and returns the cast's output.
  std::string constLike(llvm::ArrayRef<float> values, const std::string &like,
                        bool scalar = true);
  /// Appends `n` (a copy of the original node, edited) unchanged.
  void keep(onnx::NodeProto n);

private:
  Downgrader &d;
  unsigned index;
  int version;
  unsigned emitted = 0;
  bool attrErrors = false;
};

using Rewrite = LogicalResult (*)(NodeRewrite &);

/// An operator whose schema changed after opset 17: the opsets of its
/// changes (through kMaxOpset) and its rewrite into the opset-17 form. A
/// null rewrite marks operators Shard does not import.
struct Change {
  const char *opType;
  std::initializer_list<int> versions;
  Rewrite rewrite;
};

class Downgrader {
public:
  Downgrader(onnx::ModelProto &model, int opset,
             llvm::function_ref<bool(llvm::StringRef)> hasImporter,
             NodeDiagnostic nodeError)
      : model(model), opset(opset), hasImporter(hasImporter),
        nodeError(nodeError) {}

  LogicalResult run();

  onnx::ModelProto &model;
  int opset;
  llvm::function_ref<bool(llvm::StringRef)> hasImporter;
  NodeDiagnostic nodeError;
  /// The rewritten nodes so far (a deque: `constants` points into them).
  std::deque<onnx::NodeProto> done;
  /// Every value name of the graph, and those the rewrites made.
  llvm::StringSet<> names;
  /// Integer and float initializers and Constant node values, by name.
  llvm::StringMap<const onnx::TensorProto *> constants;
  /// Constant nodes' values whose attribute was not a tensor.
  std::vector<std::unique_ptr<onnx::TensorProto>> ownedConstants;

  /// The elements of `name` when it is a constant or computed from
  /// constants by the ops that only move elements (and Cast): what
  /// exporters emit for axes and sizes (torchlib reshapes a Constant).
  std::optional<llvm::SmallVector<double>> valueOf(const std::string &name,
                                                   unsigned depth = 0);
  /// The work left to one valueOf (calls and values appended, 2^16 at
  /// most): a Concat of Concats of ... each taking one input many times
  /// would grow exponentially with the depth.
  int64_t valueWorkLeft = 0;
  /// Records the value of a Constant node among `constants`.
  void recordConstant(const onnx::NodeProto &node);
  /// The type shape inference gives `name` over the nodes rewritten so far.
  std::optional<onnx::TypeProto> inferType(const std::string &name);

private:
  /// The graph shape inference sees: inputs, float initializers as typed
  /// inputs (their values never fix shapes), the other initializers.
  std::optional<onnx::ModelProto> shapeBase;
};

} // namespace

//===----------------------------------------------------------------------===//
// Tensor values
//===----------------------------------------------------------------------===//

/// The elements of an integer or float tensor as doubles (int64 values up to
/// 2^53 are exact, enough for axes and sizes); nullopt for another type or
/// data not held in the proto.
static std::optional<llvm::SmallVector<double>>
tensorValues(const onnx::TensorProto &t) {
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  llvm::SmallVector<double> out;
  auto fromRaw = [&](auto type) -> bool {
    using T = decltype(type);
    if (t.raw_data().size() != n * sizeof(T))
      return false;
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, t.raw_data().data() + i * sizeof(T), sizeof(T));
      out.push_back(static_cast<double>(v));
    }
    return true;
  };
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return std::nullopt;
  bool raw = t.has_raw_data();
  switch (t.data_type()) {
  case onnx::TensorProto::INT64:
    if (raw ? !fromRaw(int64_t()) : t.int64_data_size() != n)
      return std::nullopt;
    if (!raw)
      out.assign(t.int64_data().begin(), t.int64_data().end());
    return out;
  case onnx::TensorProto::INT32:
    if (raw ? !fromRaw(int32_t()) : t.int32_data_size() != n)
      return std::nullopt;
    if (!raw)
      out.assign(t.int32_data().begin(), t.int32_data().end());
    return out;
  case onnx::TensorProto::FLOAT:
    if (raw ? !fromRaw(float()) : t.float_data_size() != n)
      return std::nullopt;
    if (!raw)
      out.assign(t.float_data().begin(), t.float_data().end());
    return out;
  case onnx::TensorProto::DOUBLE:
    if (raw ? !fromRaw(double()) : t.double_data_size() != n)
      return std::nullopt;
    if (!raw)
      out.assign(t.double_data().begin(), t.double_data().end());
    return out;
  default:
    return std::nullopt;
  }
}

static void setAttr(onnx::NodeProto &n, const std::string &name,
                    llvm::ArrayRef<int64_t> ints) {
  onnx::AttributeProto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : ints)
    a->add_ints(v);
}

static void setAttr(onnx::NodeProto &n, const std::string &name, float f) {
  onnx::AttributeProto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(f);
}

static void removeAttr(onnx::NodeProto &n, llvm::StringRef name) {
  auto *attrs = n.mutable_attribute();
  for (int i = attrs->size() - 1; i >= 0; --i)
    if (attrs->Get(i).name() == name)
      attrs->DeleteSubrange(i, 1);
}

/// Keeps the first `k` inputs of `n`.
static void truncateInputs(onnx::NodeProto &n, int k) {
  while (n.input_size() > k)
    n.mutable_input()->RemoveLast();
}

/// Drops trailing absent inputs, which opset 17's schemas may not allow.
static void trimInputs(onnx::NodeProto &n) {
  while (n.input_size() && n.input(n.input_size() - 1).empty())
    n.mutable_input()->RemoveLast();
}

//===----------------------------------------------------------------------===//
// NodeRewrite
//===----------------------------------------------------------------------===//

InFlightDiagnostic NodeRewrite::error() { return d.nodeError(node, index); }

const onnx::AttributeProto *
NodeRewrite::attr(llvm::StringRef name,
                  onnx::AttributeProto::AttributeType type) {
  return findAttribute(
      node, name, type, [&] { return error(); }, attrErrors);
}

FailureOr<llvm::SmallVector<int64_t>>
NodeRewrite::constInts(int i, llvm::StringRef what) {
  auto values = constFloats(i, what);
  if (failed(values))
    return failure();
  llvm::SmallVector<int64_t> out;
  for (double v : *values)
    out.push_back(static_cast<int64_t>(v));
  return out;
}

FailureOr<llvm::SmallVector<double>>
NodeRewrite::constFloats(int i, llvm::StringRef what) {
  const std::string &name = node.input(i);
  std::optional<llvm::SmallVector<double>> values = d.valueOf(name);
  if (!values)
    return error() << what << " (input '" << name
                   << "') must be a constant (an initializer or a Constant "
                      "node, or computed from them by Identity, Reshape, "
                      "Squeeze, Unsqueeze, Flatten, Cast or Concat on axis "
                      "0) for the rewrite into the opset-"
                   << kImportOpset << " form";
  return *values;
}

FailureOr<llvm::SmallVector<int64_t>>
NodeRewrite::inputShape(int i, llvm::StringRef why) {
  const std::string &name = node.input(i);
  std::optional<onnx::TypeProto> type = d.inferType(name);
  if (!type || !type->has_tensor_type() || !type->tensor_type().has_shape())
    return error() << why << " needs the rank of input '" << name
                   << "', which ONNX shape inference does not know";
  llvm::SmallVector<int64_t> shape;
  for (const auto &dim : type->tensor_type().shape().dim())
    shape.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  return shape;
}

std::string NodeRewrite::fresh(llvm::StringRef base) {
  std::string name = base.str();
  for (unsigned i = 1; d.names.count(name); ++i)
    name = base.str() + "_" + std::to_string(i);
  d.names.insert(name);
  return name;
}

onnx::NodeProto &NodeRewrite::emit(llvm::StringRef opType,
                                   llvm::ArrayRef<std::string> inputs,
                                   llvm::ArrayRef<std::string> outputs) {
  onnx::NodeProto &n = d.done.emplace_back();
  n.set_op_type(opType.str());
  std::string base = node.name().empty() ? node.op_type() : node.name();
  n.set_name(base + "/" + opType.str() + "_" + std::to_string(emitted++));
  for (const std::string &in : inputs)
    n.add_input(in);
  for (const std::string &out : outputs)
    n.add_output(out);
  return n;
}

std::string NodeRewrite::constInt64(llvm::ArrayRef<int64_t> values,
                                    bool scalar) {
  std::string out = fresh(node.output(0) + "_const");
  onnx::NodeProto &n = emit("Constant", {}, {out});
  onnx::AttributeProto *a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto *t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  if (!scalar)
    t->add_dims(values.size());
  for (int64_t v : values)
    t->add_int64_data(v);
  d.recordConstant(n);
  return out;
}

std::string NodeRewrite::constLike(llvm::ArrayRef<float> values,
                                   const std::string &like, bool scalar) {
  std::string raw = fresh(node.output(0) + "_const");
  onnx::NodeProto &n = emit("Constant", {}, {raw});
  onnx::AttributeProto *a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto *t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  if (!scalar)
    t->add_dims(values.size());
  for (float v : values)
    t->add_float_data(v);
  d.recordConstant(n);
  std::string out = fresh(node.output(0) + "_const_cast");
  emit("CastLike", {raw, like}, {out});
  return out;
}

void NodeRewrite::keep(onnx::NodeProto n) {
  d.done.push_back(std::move(n));
  d.recordConstant(d.done.back());
}

//===----------------------------------------------------------------------===//
// Downgrader
//===----------------------------------------------------------------------===//

void Downgrader::recordConstant(const onnx::NodeProto &node) {
  if (node.op_type() != "Constant" || node.output_size() != 1 ||
      node.attribute_size() != 1)
    return;
  const onnx::AttributeProto &a = node.attribute(0);
  // A Constant whose attribute has another type than its name says holds
  // no value this pass can use (the validator reports it).
  static const llvm::StringMap<int> types = {
      {"value", onnx::AttributeProto::TENSOR},
      {"value_int", onnx::AttributeProto::INT},
      {"value_ints", onnx::AttributeProto::INTS},
      {"value_float", onnx::AttributeProto::FLOAT},
      {"value_floats", onnx::AttributeProto::FLOATS}};
  auto type = types.find(a.name());
  if (type == types.end() || type->second != a.type())
    return;
  if (a.name() == "value") {
    constants[node.output(0)] = &a.t();
    return;
  }
  auto t = std::make_unique<onnx::TensorProto>();
  if (a.name() == "value_int" || a.name() == "value_ints") {
    t->set_data_type(onnx::TensorProto::INT64);
    if (a.name() == "value_int")
      t->add_int64_data(a.i());
    else {
      t->add_dims(a.ints_size());
      for (int64_t v : a.ints())
        t->add_int64_data(v);
    }
  } else if (a.name() == "value_float" || a.name() == "value_floats") {
    t->set_data_type(onnx::TensorProto::FLOAT);
    if (a.name() == "value_float")
      t->add_float_data(a.f());
    else {
      t->add_dims(a.floats_size());
      for (float v : a.floats())
        t->add_float_data(v);
    }
  } else {
    return;
  }
  constants[node.output(0)] = t.get();
  ownedConstants.push_back(std::move(t));
}

std::optional<llvm::SmallVector<double>>
Downgrader::valueOf(const std::string &name, unsigned depth) {
  if (depth == 0)
    valueWorkLeft = int64_t(1) << 16;
  if (--valueWorkLeft < 0)
    return std::nullopt;
  if (const onnx::TensorProto *t = constants.lookup(name))
    return tensorValues(*t);
  if (depth > 16)
    return std::nullopt;
  const onnx::NodeProto *producer = nullptr;
  for (auto it = done.rbegin(); it != done.rend() && !producer; ++it)
    if (llvm::is_contained(it->output(), name))
      producer = &*it;
  if (!producer || producer->input_size() == 0 ||
      !(producer->domain().empty() || producer->domain() == "ai.onnx"))
    return std::nullopt;
  const std::string &op = producer->op_type();
  if (op == "Identity" || op == "Reshape" || op == "Squeeze" ||
      op == "Unsqueeze" || op == "Flatten")
    return valueOf(producer->input(0), depth + 1);
  if (op == "Cast") {
    auto values = valueOf(producer->input(0), depth + 1);
    int64_t to = 0;
    for (const auto &a : producer->attribute())
      if (a.name() == "to") {
        if (a.type() != onnx::AttributeProto::INT)
          return std::nullopt;
        to = a.i();
      }
    if (values &&
        (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32))
      for (double &v : *values)
        v = std::trunc(v);
    return values;
  }
  if (op == "Concat") {
    for (const auto &a : producer->attribute())
      if (a.name() == "axis" &&
          (a.type() != onnx::AttributeProto::INT || a.i() != 0))
        return std::nullopt;
    llvm::SmallVector<double> out;
    for (const std::string &in : producer->input()) {
      auto values = valueOf(in, depth + 1);
      valueWorkLeft -= values ? int64_t(values->size()) : 0;
      if (!values || valueWorkLeft < 0)
        return std::nullopt;
      out.append(values->begin(), values->end());
    }
    return out;
  }
  return std::nullopt;
}

std::optional<onnx::TypeProto> Downgrader::inferType(const std::string &name) {
  if (!shapeBase) {
    shapeBase.emplace();
    shapeBase->set_ir_version(model.ir_version());
    for (const auto &o : model.opset_import()) {
      onnx::OperatorSetIdProto *id = shapeBase->add_opset_import();
      *id = o;
      if (o.domain().empty() || o.domain() == "ai.onnx")
        id->set_version(kImportOpset);
    }
    const onnx::GraphProto &g = model.graph();
    onnx::GraphProto *s = shapeBase->mutable_graph();
    *s->mutable_input() = g.input();
    llvm::StringSet<> inputNames;
    for (const auto &in : g.input())
      inputNames.insert(in.name());
    for (const auto &init : g.initializer()) {
      if (init.data_type() != onnx::TensorProto::FLOAT &&
          init.data_type() != onnx::TensorProto::DOUBLE &&
          init.data_type() != onnx::TensorProto::FLOAT16) {
        *s->add_initializer() = init;
        continue;
      }
      if (inputNames.count(init.name()))
        continue;
      onnx::ValueInfoProto *in = s->add_input();
      in->set_name(init.name());
      auto *tt = in->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(init.data_type());
      auto *shape = tt->mutable_shape();
      for (int64_t dim : init.dims())
        shape->add_dim()->set_dim_value(dim);
    }
  }
  for (const auto &in : shapeBase->graph().input())
    if (in.name() == name)
      return in.type();
  for (const auto &init : shapeBase->graph().initializer())
    if (init.name() == name) {
      onnx::TypeProto type;
      auto *tt = type.mutable_tensor_type();
      tt->set_elem_type(init.data_type());
      for (int64_t dim : init.dims())
        tt->mutable_shape()->add_dim()->set_dim_value(dim);
      return type;
    }
  onnx::ModelProto m = *shapeBase;
  for (const onnx::NodeProto &n : done)
    *m.mutable_graph()->add_node() = n;
  if (llvm::Error err = onnxbridge::inferShapes(m, /*strict=*/false)) {
    llvm::consumeError(std::move(err));
    return std::nullopt;
  }
  for (const auto &vi : m.graph().value_info())
    if (vi.name() == name)
      return vi.type();
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// The rewrites
//===----------------------------------------------------------------------===//

/// Same semantics at opset 17 for every element type Shard supports (the
/// change added types: float8, int4, bfloat16 for more ops, strings).
static LogicalResult unchanged(NodeRewrite &r) {
  r.keep(r.node);
  return success();
}

/// Cast and CastLike (19, 21): `saturate` only affects float8 targets.
static LogicalResult dropSaturate(NodeRewrite &r) {
  onnx::NodeProto n = r.node;
  removeAttr(n, "saturate");
  r.keep(std::move(n));
  return success();
}

/// Reduce* (18; ReduceMax and ReduceMin again at 20 for bool): `axes` moves
/// from an input back to the attribute; noop_with_empty_axes (new at 18)
/// with no axes makes the node a copy.
static LogicalResult reduceAxesInput(NodeRewrite &r) {
  onnx::NodeProto n = r.node;
  llvm::SmallVector<int64_t> axes;
  if (r.hasInput(1)) {
    auto a = r.constInts(1, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  }
  truncateInputs(n, 1);
  bool noop = r.intAttr("noop_with_empty_axes", 0) != 0;
  removeAttr(n, "noop_with_empty_axes");
  if (axes.empty() && noop) {
    r.emit("Identity", {n.input(0)}, {n.output(0)});
    return success();
  }
  if (!axes.empty())
    setAttr(n, "axes", axes);
  r.keep(std::move(n));
  return success();
}

/// Split (18): `num_outputs` splits into that many parts of ceil(d / n)
/// elements, the last one smaller. Without a `split` input, opset 17 splits
/// evenly; an uneven split gets its sizes as a constant input.
static LogicalResult splitNumOutputs(NodeRewrite &r) {
  onnx::NodeProto n = r.node;
  const onnx::AttributeProto *num =
      r.attr("num_outputs", onnx::AttributeProto::INT);
  removeAttr(n, "num_outputs");
  if (!num || r.hasInput(1)) {
    r.keep(std::move(n));
    return success();
  }
  int64_t parts = num->i();
  if (parts != n.output_size())
    return r.error() << "num_outputs = " << parts << " but the node has "
                     << n.output_size() << " outputs";
  auto shape = r.inputShape(0, "num_outputs");
  if (failed(shape))
    return failure();
  int64_t rank = shape->size();
  int64_t axis = r.intAttr("axis", 0);
  if (axis < -rank || axis >= rank)
    return r.error() << "axis " << axis << " is out of range for rank " << rank;
  if (axis < 0)
    axis += rank;
  int64_t dim = (*shape)[axis];
  if (dim < 0)
    return r.error() << "num_outputs needs the size of axis " << axis
                     << " of input '" << n.input(0)
                     << "', which ONNX shape inference does not know";
  if (dim % parts == 0) {
    r.keep(std::move(n));
    return success();
  }
  int64_t chunk = (dim + parts - 1) / parts;
  int64_t last = dim - chunk * (parts - 1);
  if (last <= 0)
    return r.error() << "num_outputs = " << parts << " cannot split " << dim
                     << " elements into parts of " << chunk;
  llvm::SmallVector<int64_t> sizes(parts - 1, chunk);
  sizes.push_back(last);
  std::string split = r.constInt64(sizes);
  truncateInputs(n, 1);
  n.add_input(split);
  r.keep(std::move(n));
  return success();
}

/// Pad (18: `axes` input; 19: mode "wrap"; 21: types). Pads given for some
/// axes become pads for every axis, zero elsewhere.
static LogicalResult padAxesInput(NodeRewrite &r) {
  onnx::NodeProto n = r.node;
  if (r.schemaVersion() >= 19 && r.stringAttr("mode", "constant") == "wrap")
    return r.error() << "mode 'wrap' (opset 19) has no opset-" << kImportOpset
                     << " form";
  if (!r.hasInput(3)) {
    trimInputs(n);
    r.keep(std::move(n));
    return success();
  }
  auto axes = r.constInts(3, "axes");
  if (failed(axes))
    return failure();
  auto pads = r.constInts(1, "pads");
  if (failed(pads))
    return failure();
  auto shape = r.inputShape(0, "the axes input");
  if (failed(shape))
    return failure();
  int64_t rank = shape->size(), k = axes->size();
  if ((int64_t)pads->size() != 2 * k)
    return r.error() << "pads has " << pads->size() << " values for " << k
                     << " axes; it needs " << 2 * k;
  llvm::SmallVector<int64_t> full(2 * rank, 0);
  for (int64_t i = 0; i < k; ++i) {
    int64_t a = (*axes)[i];
    if (a < -rank || a >= rank)
      return r.error() << "axis " << a << " is out of range for rank " << rank;
    if (a < 0)
      a += rank;
    full[a] = (*pads)[i];
    full[a + rank] = (*pads)[i + k];
  }
  *n.mutable_input(1) = r.constInt64(full);
  truncateInputs(n, 3);
  trimInputs(n);
  r.keep(std::move(n));
  return success();
}

/// Resize (18: antialias, axes, keep_aspect_ratio_policy; 19: the
/// half_pixel_symmetric coordinate mode). Scales or sizes given for some axes
/// become scales (1 elsewhere) or sizes (the input's elsewhere).
static LogicalResult resizeNewAttrs(NodeRewrite &r) {
  onnx::NodeProto n = r.node;
  if (r.intAttr("antialias", 0) != 0)
    return r.error() << "antialias = 1 (opset 18) has no opset-" << kImportOpset
                     << " form";
  if (r.stringAttr("coordinate_transformation_mode", "half_pixel") ==
      "half_pixel_symmetric")
    return r.error() << "coordinate_transformation_mode "
                        "'half_pixel_symmetric' (opset 19) has no opset-"
                     << kImportOpset << " form";
  std::string policy = r.stringAttr("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && r.hasInput(3))
    return r.error() << "keep_aspect_ratio_policy '" << policy
                     << "' (opset 18) has no opset-" << kImportOpset
                     << " form; only 'stretch' does";
  removeAttr(n, "antialias");
  removeAttr(n, "keep_aspect_ratio_policy");
  if (const onnx::AttributeProto *axesAttr =
          r.attr("axes", onnx::AttributeProto::INTS)) {
    removeAttr(n, "axes");
    bool sizes = r.hasInput(3);
    int which = sizes ? 3 : 2;
    if (!r.hasInput(which))
      return r.error() << "has neither scales nor sizes";
    auto given = r.constFloats(which, sizes ? "sizes" : "scales");
    if (failed(given))
      return failure();
    auto shape = r.inputShape(0, "the axes attribute");
    if (failed(shape))
      return failure();
    int64_t rank = shape->size();
    if ((int64_t)given->size() != axesAttr->ints_size())
      return r.error() << (sizes ? "sizes" : "scales") << " has "
                       << given->size() << " values for "
                       << axesAttr->ints_size() << " axes";
    llvm::SmallVector<double> full;
    for (int64_t d : *shape) {
      if (sizes && d < 0)
        return r.error() << "the axes attribute with sizes needs the static "
                            "shape of input '"
                         << n.input(0) << "'";
      full.push_back(sizes ? (double)d : 1.0);
    }
    for (auto [i, a] : llvm::enumerate(axesAttr->ints())) {
      if (a < -rank || a >= rank)
        return r.error() << "axis " << a << " is out of range for rank "
                         << rank;
      full[a < 0 ? a + rank : a] = (*given)[i];
    }
    if (sizes) {
      llvm::SmallVector<int64_t> ints(full.begin(), full.end());
      *n.mutable_input(3) = r.constInt64(ints);
    } else {
      std::string raw = r.fresh(n.output(0) + "_scales");
      onnx::NodeProto &c = r.emit("Constant", {}, {raw});
      onnx::AttributeProto *a = c.add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      onnx::TensorProto *t = a->mutable_t();
      t->set_data_type(onnx::TensorProto::FLOAT);
      t->add_dims(full.size());
      for (double v : full)
        t->add_float_data(static_cast<float>(v));
      *n.mutable_input(2) = raw;
    }
  }
  r.keep(std::move(n));
  return success();
}

/// AveragePool (19): `dilations` other than 1 have no opset-17 form.
static LogicalResult averagePoolDilations(NodeRewrite &r) {
  onnx::NodeProto n = r.node;
  if (const onnx::AttributeProto *dil =
          r.attr("dilations", onnx::AttributeProto::INTS)) {
    if (llvm::any_of(dil->ints(), [](int64_t v) { return v != 1; }))
      return r.error() << "dilations other than 1 (opset 19) have no opset-"
                       << kImportOpset << " form";
    removeAttr(n, "dilations");
  }
  r.keep(std::move(n));
  return success();
}

/// ScatterElements and ScatterND (18): reductions 'max' and 'min' are new.
static LogicalResult scatterReduction(NodeRewrite &r) {
  std::string reduction = r.stringAttr("reduction", "none");
  if (reduction == "max" || reduction == "min")
    return r.error() << "reduction '" << reduction
                     << "' (opset 18) has no opset-" << kImportOpset << " form";
  r.keep(r.node);
  return success();
}

/// Gelu (20): 0.5 x (1 + erf(x / sqrt 2)), or with approximate = "tanh",
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); each op has a
/// gradient rule.
static LogicalResult decomposeGelu(NodeRewrite &r) {
  std::string approx = r.stringAttr("approximate", "none");
  if (approx != "none" && approx != "tanh")
    return r.error() << "approximate '" << approx
                     << "' is neither 'none' nor 'tanh'";
  const std::string &x = r.node.input(0);
  const std::string &y = r.node.output(0);
  std::string inner;
  if (approx == "none") {
    inner = r.fresh(y + "_scaled");
    r.emit("Mul", {x, r.constLike({float(M_SQRT1_2)}, x)}, {inner});
    std::string erf = r.fresh(y + "_erf");
    r.emit("Erf", {inner}, {erf});
    inner = erf;
  } else {
    std::string x2 = r.fresh(y + "_sq"), x3 = r.fresh(y + "_cube");
    r.emit("Mul", {x, x}, {x2});
    r.emit("Mul", {x2, x}, {x3});
    std::string c3 = r.fresh(y + "_cubic");
    r.emit("Mul", {x3, r.constLike({0.044715f}, x)}, {c3});
    std::string sum = r.fresh(y + "_sum");
    r.emit("Add", {x, c3}, {sum});
    std::string scaled = r.fresh(y + "_scaled");
    r.emit("Mul", {sum, r.constLike({float(std::sqrt(2.0 / M_PI))}, x)},
           {scaled});
    std::string th = r.fresh(y + "_tanh");
    r.emit("Tanh", {scaled}, {th});
    inner = th;
  }
  std::string onePlus = r.fresh(y + "_one_plus");
  r.emit("Add", {inner, r.constLike({1.0f}, x)}, {onePlus});
  std::string half = r.fresh(y + "_half_x");
  r.emit("Mul", {x, r.constLike({0.5f}, x)}, {half});
  r.emit("Mul", {half, onePlus}, {y});
  return success();
}

/// Mish (18): x tanh(softplus(x)).
static LogicalResult decomposeMish(NodeRewrite &r) {
  const std::string &x = r.node.input(0);
  const std::string &y = r.node.output(0);
  std::string sp = r.fresh(y + "_softplus"), th = r.fresh(y + "_tanh");
  r.emit("Softplus", {x}, {sp});
  r.emit("Tanh", {sp}, {th});
  r.emit("Mul", {x, th}, {y});
  return success();
}

/// GroupNormalization (18: scale and bias per group; 21: per channel). The
/// input (N, C, ...) is viewed as (N, G, rest) and normalized over `rest` by
/// InstanceNormalization with unit scale and zero bias; scale and bias
/// then apply per group on (N, G, rest) (18) or per channel on (N, C, rest)
/// (21), and the result takes the input's shape again.
static LogicalResult decomposeGroupNorm(NodeRewrite &r) {
  const onnx::AttributeProto *groupsAttr =
      r.attr("num_groups", onnx::AttributeProto::INT);
  if (!groupsAttr)
    return r.attributeErrors()
               ? failure()
               : LogicalResult(r.error()
                               << "the num_groups attribute is missing");
  int64_t groups = groupsAttr->i();
  if (groups <= 0)
    return r.error() << "num_groups must be positive, got " << groups;
  if (r.intAttr("stash_type", 1) != 1)
    return r.error() << "stash_type " << r.intAttr("stash_type", 1)
                     << " (statistics in another type than float32) has no "
                        "opset-"
                     << kImportOpset << " form";
  if (!r.hasInput(1) || !r.hasInput(2))
    return r.error() << "needs its scale and bias inputs";
  // The groups split the channels (dim 1) evenly; the rewrite builds one
  // scale per group.
  auto xShape = r.inputShape(0, "num_groups");
  if (failed(xShape))
    return failure();
  if (xShape->size() < 2 || (*xShape)[1] < 0)
    return r.error() << "num_groups needs the channel count (dim 1) of input "
                        "'"
                     << r.node.input(0)
                     << "', which ONNX shape inference does not know";
  if ((*xShape)[1] % groups != 0)
    return r.error() << "num_groups " << groups << " does not divide the "
                     << (*xShape)[1] << " channels";
  const std::string &x = r.node.input(0), &scale = r.node.input(1),
                    &bias = r.node.input(2), &y = r.node.output(0);
  float eps = 1e-5f;
  if (const onnx::AttributeProto *e =
          r.attr("epsilon", onnx::AttributeProto::FLOAT))
    eps = e->f();

  std::string grouped = r.fresh(y + "_grouped");
  r.emit("Reshape", {x, r.constInt64({0, groups, -1})}, {grouped});
  std::vector<float> ones(groups, 1.0f), zeros(groups, 0.0f);
  std::string normed = r.fresh(y + "_normalized");
  onnx::NodeProto &in = r.emit(
      "InstanceNormalization",
      {grouped, r.constLike(ones, x, false), r.constLike(zeros, x, false)},
      {normed});
  setAttr(in, "epsilon", eps);
  // Scale and bias along axis 1 of a rank-3 view: (G, 1) or (C, 1).
  std::string view = normed;
  if (r.schemaVersion() >= 21) {
    std::string channels = r.fresh(y + "_channels");
    r.emit("Shape", {scale}, {channels});
    std::string target = r.fresh(y + "_channel_view");
    onnx::NodeProto &cat = r.emit(
        "Concat", {r.constInt64({0}), channels, r.constInt64({-1})}, {target});
    onnx::AttributeProto *axis = cat.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(0);
    view = r.fresh(y + "_per_channel");
    r.emit("Reshape", {normed, target}, {view});
  }
  std::string column = r.constInt64({-1, 1});
  std::string scaleCol = r.fresh(y + "_scale"), biasCol = r.fresh(y + "_bias");
  r.emit("Reshape", {scale, column}, {scaleCol});
  r.emit("Reshape", {bias, column}, {biasCol});
  std::string scaled = r.fresh(y + "_scaled"),
              shifted = r.fresh(y + "_shifted");
  r.emit("Mul", {view, scaleCol}, {scaled});
  r.emit("Add", {scaled, biasCol}, {shifted});
  std::string shape = r.fresh(y + "_shape");
  r.emit("Shape", {x}, {shape});
  r.emit("Reshape", {shifted, shape}, {y});
  return success();
}

/// Every default-domain operator whose schema changed after opset 17, up to
/// kMaxOpset. A null rewrite: Shard imports no form of the operator.
static const Change kChanges[] = {
    // Opset 18.
    {"BitwiseAnd", {18}, nullptr},
    {"BitwiseNot", {18}, nullptr},
    {"BitwiseOr", {18}, nullptr},
    {"BitwiseXor", {18}, nullptr},
    {"CenterCropPad", {18}, nullptr},
    {"Col2Im", {18}, nullptr},
    {"GroupNormalization", {18, 21}, decomposeGroupNorm},
    {"LpPool", {18}, nullptr},
    {"Mish", {18}, decomposeMish},
    {"OptionalGetElement", {18}, nullptr},
    {"OptionalHasElement", {18}, nullptr},
    {"Pad", {18, 19, 21}, padAxesInput},
    {"ReduceL1", {18}, reduceAxesInput},
    {"ReduceL2", {18}, reduceAxesInput},
    {"ReduceLogSum", {18}, reduceAxesInput},
    {"ReduceLogSumExp", {18}, reduceAxesInput},
    {"ReduceMax", {18, 20}, reduceAxesInput},
    {"ReduceMean", {18}, reduceAxesInput},
    {"ReduceMin", {18, 20}, reduceAxesInput},
    {"ReduceProd", {18}, reduceAxesInput},
    {"ReduceSumSquare", {18}, reduceAxesInput},
    {"Resize", {18, 19}, resizeNewAttrs},
    {"ScatterElements", {18}, scatterReduction},
    {"ScatterND", {18}, scatterReduction},
    {"Split", {18}, splitNumOutputs},
    // Opset 19.
    {"AveragePool", {19}, averagePoolDilations},
    {"Cast", {19, 21}, dropSaturate},
    {"CastLike", {19, 21}, dropSaturate},
    {"Constant", {19, 21}, unchanged},
    {"DeformConv", {19}, nullptr},
    {"DequantizeLinear", {19, 21}, nullptr},
    {"Equal", {19}, unchanged},
    {"Identity", {19, 21}, unchanged},
    {"If", {19, 21}, nullptr},
    {"Loop", {19, 21}, nullptr},
    {"QuantizeLinear", {19, 21}, nullptr},
    {"Reshape", {19, 21}, unchanged},
    {"Scan", {19, 21}, nullptr},
    {"Shape", {19, 21}, unchanged},
    {"Size", {19, 21}, unchanged},
    // Opset 20.
    {"AffineGrid", {20}, nullptr},
    {"ConstantOfShape", {20, 21}, unchanged},
    {"DFT", {20}, nullptr},
    {"Gelu", {20}, decomposeGelu},
    {"GridSample", {20}, nullptr},
    {"ImageDecoder", {20}, nullptr},
    {"IsInf", {20}, nullptr},
    {"IsNaN", {20}, nullptr},
    {"RegexFullMatch", {20}, nullptr},
    {"StringConcat", {20}, nullptr},
    {"StringSplit", {20}, nullptr},
    // Opset 21.
    {"Flatten", {21}, unchanged},
    {"QLinearMatMul", {21}, nullptr},
    {"Squeeze", {21}, unchanged},
    {"Transpose", {21}, unchanged},
    {"Unsqueeze", {21}, unchanged},
};

static const Change *findChange(llvm::StringRef opType) {
  static const llvm::StringMap<const Change *> byOp = [] {
    llvm::StringMap<const Change *> m;
    for (const Change &c : kChanges)
      m[c.opType] = &c;
    return m;
  }();
  return byOp.lookup(opType);
}

int schemaChangeAfterImportOpset(llvm::StringRef opType, int opset) {
  int version = 0;
  if (const Change *change = findChange(opType))
    for (int v : change->versions)
      if (v <= opset)
        version = std::max(version, v);
  return version;
}

LogicalResult Downgrader::run() {
  onnx::GraphProto *graph = model.mutable_graph();
  for (const auto &in : graph->input())
    names.insert(in.name());
  for (const auto &init : graph->initializer()) {
    names.insert(init.name());
    constants[init.name()] = &init;
  }
  for (const auto &node : graph->node())
    for (const auto &out : node.output())
      names.insert(out);

  for (auto [index, node] : llvm::enumerate(graph->node())) {
    const Change *change = node.domain().empty() || node.domain() == "ai.onnx"
                               ? findChange(node.op_type())
                               : nullptr;
    int version =
        change ? schemaChangeAfterImportOpset(node.op_type(), opset) : 0;
    if (!version) {
      done.push_back(node);
      recordConstant(done.back());
      continue;
    }
    if (!change->rewrite) {
      if (!hasImporter(node.op_type()))
        return nodeError(node, index)
               << "unsupported operator '" << node.op_type() << "'";
      return nodeError(node, index)
             << "the opset-" << version << " form of " << node.op_type()
             << " has no rewrite into its opset-" << kImportOpset << " form";
    }
    NodeRewrite r(*this, node, index, version);
    // Every op rewritten into other nodes reads its input 0 and defines its
    // output 0 (the ones kept unchanged are checked by ONNX afterwards).
    if (change->rewrite != unchanged && failed(r.requireInputAndOutput()))
      return failure();
    if (failed(change->rewrite(r)) || r.attributeErrors())
      return failure();
  }

  graph->clear_node();
  for (onnx::NodeProto &n : done)
    *graph->add_node() = std::move(n);
  for (auto &o : *model.mutable_opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      o.set_version(kImportOpset);
  return success();
}

LogicalResult
downgradeToImportOpset(onnx::ModelProto &model, int opset,
                       llvm::function_ref<bool(llvm::StringRef)> hasImporter,
                       NodeDiagnostic nodeError) {
  return Downgrader(model, opset, hasImporter, nodeError).run();
}

} // namespace shardc
