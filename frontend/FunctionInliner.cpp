//===- FunctionInliner.cpp - Inlining of ONNX model-local functions -------===//
//
// Fields that IR versions 9 and 10 added and libonnx 1.12's protobuf classes
// do not know (a function's attribute defaults, FunctionProto.attribute_proto
// = 11; the overload names, FunctionProto.overload = 13 and
// NodeProto.overload = 8) are read from the messages' unknown fields.
//
//===----------------------------------------------------------------------===//
#include "frontend/FunctionInliner.h"

#include "google/protobuf/unknown_field_set.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <map>
#include <string>
#include <vector>

using namespace mlir;

namespace shardc {

namespace {

/// A function of the model, with what IR 9/10 added to its proto.
struct Function {
  const onnx::FunctionProto *proto = nullptr;
  /// "domain.name", or "domain.name:overload", for messages.
  std::string label;
  /// Defaults of its attributes (attribute_proto), by name.
  llvm::StringMap<onnx::AttributeProto> defaults;
};

/// The string unknown field `number` of `m`, or "".
static std::string unknownString(const google::protobuf::UnknownFieldSet &set,
                                 int number) {
  for (int i = 0; i < set.field_count(); ++i)
    if (set.field(i).number() == number &&
        set.field(i).type() ==
            google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      return set.field(i).length_delimited();
  return "";
}

static std::string functionKey(const std::string &domain,
                               const std::string &name,
                               const std::string &overload) {
  return domain + '\n' + name + '\n' + overload;
}

static bool isDefaultDomain(const std::string &domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// The most nodes the inlined graph may have.
constexpr size_t kMaxInlinedNodes = size_t(1) << 18;

class Inliner {
public:
  Inliner(onnx::ModelProto &model, NodeDiagnostic nodeError)
      : model(model), nodeError(nodeError) {}

  LogicalResult run();

private:
  /// Appends `node`, or the inlined body of the function it calls.
  LogicalResult emit(const onnx::NodeProto &node);
  LogicalResult inlineCall(const onnx::NodeProto &call, const Function &fn);
  InFlightDiagnostic error() { return nodeError(*root, rootIndex); }
  /// `base`, or `base_N` for the first N that no value has taken (probing
  /// on from the last N given for `base`: many calls of one unnamed
  /// function share a base).
  std::string fresh(const std::string &base) {
    std::string name = base;
    unsigned &last = lastSuffix[base];
    while (names.count(name))
      name = base + "_" + std::to_string(++last);
    names.insert(name);
    return name;
  }

  onnx::ModelProto &model;
  NodeDiagnostic nodeError;
  int modelOpset = 0;
  std::map<std::string, Function> functions;
  llvm::StringSet<> names;
  llvm::StringMap<unsigned> lastSuffix;
  std::vector<onnx::NodeProto> out;
  /// The functions being inlined, outermost first.
  llvm::SmallVector<const Function *> stack;
  /// The graph node being inlined, which errors name.
  const onnx::NodeProto *root = nullptr;
  unsigned rootIndex = 0;
};

} // namespace

/// Renames the inputs of the nodes of `graph` (and of its subgraphs) that
/// `rename` maps: a subgraph may use values of the function's scope.
static void renameCaptures(onnx::GraphProto &graph,
                           const llvm::StringMap<std::string> &rename) {
  for (onnx::NodeProto &n : *graph.mutable_node()) {
    for (std::string &in : *n.mutable_input())
      if (auto it = rename.find(in); it != rename.end())
        in = it->second;
    for (onnx::AttributeProto &a : *n.mutable_attribute()) {
      if (a.has_g())
        renameCaptures(*a.mutable_g(), rename);
      for (onnx::GraphProto &g : *a.mutable_graphs())
        renameCaptures(g, rename);
    }
  }
}

LogicalResult Inliner::inlineCall(const onnx::NodeProto &call,
                                  const Function &fn) {
  const onnx::FunctionProto &f = *fn.proto;
  if (llvm::is_contained(stack, &fn)) {
    auto diag = error() << "function '" << fn.label << "' calls itself (";
    for (const Function *s : stack)
      diag << s->label << " -> ";
    return diag << fn.label << "); Shard cannot inline a recursive function";
  }
  for (const auto &o : f.opset_import())
    if (isDefaultDomain(o.domain()) && o.version() != modelOpset)
      return error() << "function '" << fn.label << "' imports opset "
                     << o.version() << " of the default domain, the model "
                     << modelOpset;
  if (call.input_size() > f.input_size() ||
      call.output_size() > f.output_size())
    return error() << "a call of function '" << fn.label << "' has "
                   << call.input_size() << " inputs and " << call.output_size()
                   << " outputs; the function has " << f.input_size() << " and "
                   << f.output_size();

  std::string prefix =
      (call.name().empty() ? call.op_type() : call.name()) + "/";
  llvm::StringMap<std::string> rename;
  for (auto [i, formal] : llvm::enumerate(f.input()))
    rename[formal] = (int)i < call.input_size() ? call.input(i) : "";
  for (auto [i, formal] : llvm::enumerate(f.output()))
    rename[formal] = (int)i < call.output_size() && !call.output(i).empty()
                         ? call.output(i)
                         : fresh(prefix + formal);
  llvm::StringSet<> formalOutputs;
  for (const std::string &formal : f.output())
    formalOutputs.insert(formal);
  llvm::StringMap<const onnx::AttributeProto *> callAttrs;
  for (const auto &a : call.attribute())
    callAttrs[a.name()] = &a;

  stack.push_back(&fn);
  for (const onnx::NodeProto &body : f.node()) {
    onnx::NodeProto n = body;
    n.set_name(prefix + (body.name().empty() ? body.op_type() : body.name()));
    for (std::string &in : *n.mutable_input()) {
      if (in.empty())
        continue;
      auto it = rename.find(in);
      if (it == rename.end()) {
        stack.pop_back();
        return error() << "function '" << fn.label << "': node '"
                       << body.op_type() << "' uses value '" << in
                       << "', which is neither an input of the function nor "
                          "computed before it in its body";
      }
      in = it->second;
    }
    for (std::string &o : *n.mutable_output()) {
      if (o.empty())
        continue;
      if (!formalOutputs.count(o))
        rename[o] = fresh(prefix + o);
      o = rename[o];
    }
    // Attribute references take the call's value, else the function's
    // default; an attribute set by neither is left out (the op's default).
    auto *attrs = n.mutable_attribute();
    for (int i = attrs->size() - 1; i >= 0; --i) {
      onnx::AttributeProto &a = *attrs->Mutable(i);
      if (a.ref_attr_name().empty()) {
        if (a.has_g())
          renameCaptures(*a.mutable_g(), rename);
        for (onnx::GraphProto &g : *a.mutable_graphs())
          renameCaptures(g, rename);
        continue;
      }
      const onnx::AttributeProto *value = callAttrs.lookup(a.ref_attr_name());
      if (!value) {
        auto it = fn.defaults.find(a.ref_attr_name());
        value = it == fn.defaults.end() ? nullptr : &it->second;
      }
      if (!value) {
        attrs->DeleteSubrange(i, 1);
        continue;
      }
      std::string name = a.name();
      a = *value;
      a.set_name(name);
    }
    if (failed(emit(n))) {
      stack.pop_back();
      return failure();
    }
  }
  stack.pop_back();
  return success();
}

LogicalResult Inliner::emit(const onnx::NodeProto &node) {
  if (!isDefaultDomain(node.domain())) {
    std::string overload = unknownString(node.unknown_fields(), 8);
    auto it =
        functions.find(functionKey(node.domain(), node.op_type(), overload));
    if (it != functions.end())
      return inlineCall(node, it->second);
  }
  // Functions that call others several times multiply: a chain of twenty,
  // each calling the next four times, is 4^20 nodes.
  if (out.size() >= kMaxInlinedNodes)
    return error() << "inlining the model's functions gives more than "
                   << kMaxInlinedNodes << " nodes";
  out.push_back(node);
  return success();
}

LogicalResult Inliner::run() {
  if (model.functions_size() == 0)
    return success();
  for (const auto &o : model.opset_import())
    if (isDefaultDomain(o.domain()))
      modelOpset = static_cast<int>(o.version());
  for (const onnx::FunctionProto &f : model.functions()) {
    std::string overload = unknownString(f.unknown_fields(), 13);
    Function fn;
    fn.proto = &f;
    fn.label =
        f.domain() + "." + f.name() + (overload.empty() ? "" : ":" + overload);
    const auto &unknown = f.unknown_fields();
    for (int i = 0; i < unknown.field_count(); ++i) {
      const auto &field = unknown.field(i);
      onnx::AttributeProto a;
      if (field.number() == 11 &&
          field.type() ==
              google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
          a.ParseFromString(field.length_delimited()))
        fn.defaults[a.name()] = a;
    }
    functions[functionKey(f.domain(), f.name(), overload)] = std::move(fn);
  }

  onnx::GraphProto *graph = model.mutable_graph();
  for (const auto &in : graph->input())
    names.insert(in.name());
  for (const auto &init : graph->initializer())
    names.insert(init.name());
  for (const auto &node : graph->node())
    for (const auto &o : node.output())
      names.insert(o);
  for (auto [index, node] : llvm::enumerate(graph->node())) {
    root = &node;
    rootIndex = index;
    if (failed(emit(node)))
      return failure();
  }
  graph->clear_node();
  for (onnx::NodeProto &n : out)
    *graph->add_node() = std::move(n);
  model.clear_functions();
  return success();
}

LogicalResult inlineLocalFunctions(onnx::ModelProto &model,
                                   NodeDiagnostic nodeError) {
  return Inliner(model, nodeError).run();
}

} // namespace shardc
