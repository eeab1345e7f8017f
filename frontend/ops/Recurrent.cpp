//===- Recurrent.cpp - Import of ONNX RNN, LSTM and GRU -------------------===//
//
// RNN, LSTM and GRU (nn.RNN, nn.LSTM, nn.GRU) are unrolled over their static
// sequence length into ops that have gradient rules: the input projection of
// every step is one MatMul, and each step is a Gemm with the recurrent
// weight, a Split into the gates, Sigmoid, Tanh, Mul and Add (RNN: Tanh or
// Relu of the sum). Forward, reverse and bidirectional, both layouts, LSTM
// peepholes and GRU's linear_before_reset. The default activations only
// (RNN: Tanh or Relu, nn.RNN's two nonlinearities), without clip,
// input_forget or sequence lengths shorter than the sequence. Tested by
// test/lit/import/recurrent.onnxtxt and rnn.onnxtxt.
//
//===----------------------------------------------------------------------===//
#include "frontend/OpImporters.h"

#include "ir/ShardcDialect.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace shardc {

namespace {

/// Builds the unrolled ops at the node's location, in its element type.
class RnnBuilder {
public:
  RnnBuilder(OpBuilder &b, Location loc, Type elem)
      : b(b), loc(loc), elem(elem) {}

  RankedTensorType type(ArrayRef<int64_t> shape) const {
    return RankedTensorType::get(shape, elem);
  }
  static ArrayRef<int64_t> shape(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }
  Value reshape(Value v, ArrayRef<int64_t> s) {
    if (shape(v) == s)
      return v;
    return b.create<ReshapeOp>(loc, type(s), v);
  }
  /// `len` elements of `v` along `axis` from `start`.
  Value slice(Value v, int64_t axis, int64_t start, int64_t len) {
    SmallVector<int64_t> s(shape(v)), starts(s.size(), 0), steps(s.size(), 1);
    if (start == 0 && len == s[axis])
      return v;
    starts[axis] = start;
    s[axis] = len;
    return b.create<SliceOp>(loc, type(s), v, starts, steps);
  }
  /// `v` cut into `n` equal pieces along `axis`.
  SmallVector<Value> split(Value v, int64_t axis, int64_t n) {
    SmallVector<int64_t> s(shape(v));
    s[axis] /= n;
    SmallVector<Type> types(n, type(s));
    auto op = b.create<SplitOp>(loc, types, v, axis);
    return SmallVector<Value>(op.getResults());
  }
  Value concat(ArrayRef<Value> vs, int64_t axis) {
    if (vs.size() == 1)
      return vs[0];
    SmallVector<int64_t> s(shape(vs[0]));
    s[axis] = 0;
    for (Value v : vs)
      s[axis] += shape(v)[axis];
    return b.create<ConcatOp>(loc, type(s), vs, axis);
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    SmallVector<int64_t> s;
    for (int64_t p : perm)
      s.push_back(shape(v)[p]);
    return b.create<TransposeOp>(loc, type(s), v, perm);
  }
  /// x (..., K) times w^T for w (N, K).
  Value linear(Value x, Value w) {
    SmallVector<int64_t> s(shape(x));
    s.back() = shape(w)[0];
    if (s.size() == 2)
      return b.create<GemmOp>(loc, type(s), x, w, Value(),
                              b.getF32FloatAttr(1.0f), b.getF32FloatAttr(1.0f),
                              b.getBoolAttr(false), b.getBoolAttr(true));
    return b.create<MatMulOp>(loc, type(s), x, transpose(w, {1, 0}));
  }
  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value sigmoid(Value x) { return b.create<SigmoidOp>(loc, x.getType(), x); }
  Value tanh(Value x) { return b.create<TanhOp>(loc, x.getType(), x); }
  Value relu(Value x) { return b.create<ReluOp>(loc, x.getType(), x); }
  Value zeros(ArrayRef<int64_t> s) {
    auto t = type(s);
    return b.create<ConstantOp>(loc, t,
                                cast<ElementsAttr>(DenseElementsAttr::get(
                                    t, b.getFloatAttr(elem, 0.0))));
  }

private:
  OpBuilder &b;
  Location loc;
  Type elem;
};

/// What LSTM and GRU share: shapes, directions and the checks of the
/// attributes and inputs this import does not support.
/// The longest sequence unrolled: each step is about ten ops per
/// direction, so this bounds one node at a few hundred thousand ops.
constexpr int64_t kMaxUnrolledSteps = 16384;

struct RnnSpec {
  int64_t seq = 0, batch = 0, hidden = 0, dirs = 1;
  bool reverse = false, batchFirst = false;
  /// The `activations` attribute as given (empty: the defaults).
  SmallVector<std::string> activations;
};

} // namespace

/// `activations` are the op's defaults, one direction's worth; `alsoValid`,
/// other functions a gate may take (RNN's Relu).
static FailureOr<RnnSpec> readSpec(ImportContext &ctx, int gates,
                                   ArrayRef<StringRef> activations,
                                   ArrayRef<StringRef> alsoValid = {}) {
  RnnSpec spec;
  auto xt = cast<RankedTensorType>(ctx.operand(0).getType());
  auto wt = cast<RankedTensorType>(ctx.operand(1).getType());
  if (!isa<FloatType>(xt.getElementType()) || xt.getRank() != 3 ||
      wt.getRank() != 3)
    return ctx.nodeError() << "X and W must be 3-d float tensors, got " << xt
                           << " and " << wt;
  std::string direction = ctx.stringAttr("direction", "forward");
  if (direction == "bidirectional")
    spec.dirs = 2;
  else if (direction == "reverse")
    spec.reverse = true;
  else if (direction != "forward")
    return ctx.nodeError() << "unknown direction '" << direction << "'";
  spec.batchFirst = ctx.intAttr("layout", 0) != 0;
  spec.seq = xt.getDimSize(spec.batchFirst ? 1 : 0);
  spec.batch = xt.getDimSize(spec.batchFirst ? 0 : 1);
  if (spec.seq > kMaxUnrolledSteps)
    return ctx.nodeError() << "the sequence has " << spec.seq
                           << " steps; recurrent layers are unrolled, up to "
                           << kMaxUnrolledSteps
                           << " steps: feed shorter sequences (truncated "
                              "backpropagation through time)";
  spec.hidden = wt.getDimSize(1) / gates;
  if (wt.getDimSize(0) != spec.dirs || wt.getDimSize(1) != gates * spec.hidden)
    return ctx.nodeError() << "W " << wt << " does not fit " << spec.dirs
                           << " direction(s) of " << gates << " gates";
  if (ctx.hasAttr("hidden_size") &&
      ctx.intAttr("hidden_size", spec.hidden) != spec.hidden)
    return ctx.nodeError() << "hidden_size does not match W";
  // The other operands' shapes follow from W's: R, B, the initial states
  // (input 5, LSTM's 6) and LSTM's peepholes (7).
  int64_t D = spec.dirs, G = gates, H = spec.hidden;
  SmallVector<std::pair<int, SmallVector<int64_t>>> expected = {
      {2, {D, G * H, H}}, {3, {D, 2 * G * H}}};
  SmallVector<int64_t> state = {D, spec.batch, H};
  if (spec.batchFirst)
    state = {spec.batch, D, H};
  expected.push_back({5, state});
  if (gates == 4) {
    expected.push_back({6, state});
    expected.push_back({7, {D, 3 * H}});
  }
  static const char *names[] = {
      "X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  for (const auto &[index, shape] : expected) {
    Value v = ctx.operand(index);
    if (!v)
      continue;
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.getShape() != ArrayRef<int64_t>(shape)) {
      auto diag = ctx.nodeError() << names[index] << " must have shape [";
      llvm::interleaveComma(shape, diag);
      return diag << "] for W " << wt << " and X " << xt << ", got "
                  << v.getType();
    }
  }
  if (ctx.hasAttr("clip"))
    return ctx.nodeError() << "clip is not supported";
  if (const auto *a = ctx.attr("activations", onnx::AttributeProto::STRINGS)) {
    if (a->strings_size() != int64_t(activations.size()) * spec.dirs)
      return ctx.nodeError()
             << "activations has " << a->strings_size() << " entries; "
             << spec.dirs << " direction(s) need "
             << activations.size() * spec.dirs;
    for (int i = 0; i < a->strings_size(); ++i) {
      StringRef act = a->strings(i);
      if (act != activations[i % activations.size()] &&
          !llvm::is_contained(alsoValid, act)) {
        auto diag = ctx.nodeError()
                    << "only the default activations are supported";
        if (!alsoValid.empty())
          diag << " (or " << llvm::join(alsoValid, ", ") << ")";
        return diag << ", got '" << act << "'";
      }
      spec.activations.push_back(act.str());
    }
  }
  // sequence_lens (input 4) may only say that every sequence is complete.
  if (ctx.operand(4)) {
    auto lens = ctx.constInts(4, "sequence_lens");
    if (failed(lens))
      return failure();
    for (int64_t l : *lens)
      if (l != spec.seq)
        return ctx.nodeError()
               << "sequence_lens shorter than the sequence (" << l << " < "
               << spec.seq << ") are not supported";
  }
  return spec;
}

/// The (B, H) slice of direction `d` of an optional initial state (dirs, B,
/// H), or zeros.
static Value initialState(RnnBuilder &r, Value state, const RnnSpec &spec,
                          int64_t d) {
  if (!state)
    return r.zeros({spec.batch, spec.hidden});
  return r.reshape(r.slice(state, 0, d, 1), {spec.batch, spec.hidden});
}

/// X as (S, B, I), whatever the layout.
static Value timeMajor(RnnBuilder &r, Value x, const RnnSpec &spec) {
  return spec.batchFirst ? r.transpose(x, {1, 0, 2}) : x;
}

/// Defines Y (S, dirs, B, H), Y_h and Y_c (dirs, B, H) (in layout 1:
/// (B, S, dirs, H) and (B, dirs, H)) from the per-direction hidden states
/// of every step (in time order) and the last cell states.
static void defineOutputs(ImportContext &ctx, RnnBuilder &r,
                          const RnnSpec &spec, ArrayRef<SmallVector<Value>> hs,
                          ArrayRef<Value> lastH, ArrayRef<Value> lastC) {
  const onnx::NodeProto &node = ctx.node();
  int64_t B = spec.batch, H = spec.hidden;
  auto wanted = [&](int i) {
    return i < node.output_size() && !node.output(i).empty();
  };
  if (wanted(0)) {
    SmallVector<Value> perDir;
    for (const auto &steps : hs) {
      SmallVector<Value> rows;
      for (Value h : steps)
        rows.push_back(r.reshape(h, {1, 1, B, H}));
      perDir.push_back(r.concat(rows, 0));
    }
    Value y = r.concat(perDir, 1);
    if (spec.batchFirst)
      y = r.transpose(y, {2, 0, 1, 3});
    ctx.define(0, y);
  }
  auto state = [&](ArrayRef<Value> last) {
    SmallVector<Value> perDir;
    for (Value v : last)
      perDir.push_back(r.reshape(v, {1, B, H}));
    Value s = r.concat(perDir, 0);
    return spec.batchFirst ? r.transpose(s, {1, 0, 2}) : s;
  };
  if (wanted(1))
    ctx.define(1, state(lastH));
  if (wanted(2) && !lastC.empty())
    ctx.define(2, state(lastC));
}

/// LSTM (gates i, o, f, c in ONNX's order):
///   i = σ(Xi + h Ri^T + Pi ⊙ c + bi),  f = σ(Xf + h Rf^T + Pf ⊙ c + bf),
///   g = tanh(Xc + h Rc^T + bc),        c' = f ⊙ c + i ⊙ g,
///   o = σ(Xo + h Ro^T + Po ⊙ c' + bo), h' = o ⊙ tanh(c').
static LogicalResult importLSTM(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 8)))
    return failure();
  auto spec = readSpec(ctx, 4, {"Sigmoid", "Tanh", "Tanh"});
  if (failed(spec))
    return failure();
  if (ctx.intAttr("input_forget", 0))
    return ctx.nodeError() << "input_forget is not supported";
  auto xt = cast<RankedTensorType>(ctx.operand(0).getType());
  RnnBuilder r(ctx.builder(), ctx.loc(), xt.getElementType());
  int64_t S = spec->seq, B = spec->batch, H = spec->hidden;
  Value x = timeMajor(r, ctx.operand(0), *spec);
  Value W = ctx.operand(1), R = ctx.operand(2), bias = ctx.operand(3);
  Value h0 = ctx.operand(5), c0 = ctx.operand(6), peep = ctx.operand(7);
  if (spec->batchFirst) {
    if (h0)
      h0 = r.transpose(h0, {1, 0, 2});
    if (c0)
      c0 = r.transpose(c0, {1, 0, 2});
  }
  SmallVector<SmallVector<Value>> hs;
  SmallVector<Value> lastH, lastC;
  for (int64_t d = 0; d < spec->dirs; ++d) {
    Value w = r.reshape(r.slice(W, 0, d, 1), {4 * H, RnnBuilder::shape(W)[2]});
    Value rw = r.reshape(r.slice(R, 0, d, 1), {4 * H, H});
    // The input projection of all steps at once: (S, B, 4H).
    Value xw = r.linear(x, w);
    if (bias) {
      Value bd = r.reshape(r.slice(bias, 0, d, 1), {8 * H});
      xw = r.add(xw,
                 r.add(r.slice(bd, 0, 0, 4 * H), r.slice(bd, 0, 4 * H, 4 * H)));
    }
    SmallVector<Value> p;
    if (peep)
      p = r.split(r.reshape(r.slice(peep, 0, d, 1), {3 * H}), 0, 3);
    Value h = initialState(r, h0, *spec, d);
    Value c = initialState(r, c0, *spec, d);
    bool backwards = spec->reverse || d == 1;
    SmallVector<Value> steps(S);
    for (int64_t k = 0; k < S; ++k) {
      int64_t t = backwards ? S - 1 - k : k;
      Value gates =
          r.add(r.reshape(r.slice(xw, 0, t, 1), {B, 4 * H}), r.linear(h, rw));
      SmallVector<Value> g = r.split(gates, 1, 4);
      Value gi = g[0], go = g[1], gf = g[2], gc = g[3];
      if (peep) {
        gi = r.add(gi, r.mul(p[0], c));
        gf = r.add(gf, r.mul(p[2], c));
      }
      Value i = r.sigmoid(gi), f = r.sigmoid(gf), cand = r.tanh(gc);
      c = r.add(r.mul(f, c), r.mul(i, cand));
      if (peep)
        go = r.add(go, r.mul(p[1], c));
      h = r.mul(r.sigmoid(go), r.tanh(c));
      steps[t] = h;
    }
    hs.push_back(steps);
    lastH.push_back(h);
    lastC.push_back(c);
  }
  defineOutputs(ctx, r, *spec, hs, lastH, lastC);
  return success();
}

/// GRU (gates z, r, h in ONNX's order):
///   z = σ(Xz + h Rz^T + bz),  r = σ(Xr + h Rr^T + br),
///   n = tanh(Xh + (r ⊙ h) Rh^T + Rbh + Wbh), or with linear_before_reset
///       (PyTorch's) tanh(Xh + r ⊙ (h Rh^T + Rbh) + Wbh),
///   h' = (1 - z) ⊙ n + z ⊙ h = n + z ⊙ (h - n).
static LogicalResult importGRU(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 6)))
    return failure();
  auto spec = readSpec(ctx, 3, {"Sigmoid", "Tanh"});
  if (failed(spec))
    return failure();
  bool linearBeforeReset = ctx.intAttr("linear_before_reset", 0) != 0;
  auto xt = cast<RankedTensorType>(ctx.operand(0).getType());
  RnnBuilder r(ctx.builder(), ctx.loc(), xt.getElementType());
  int64_t S = spec->seq, B = spec->batch, H = spec->hidden;
  Value x = timeMajor(r, ctx.operand(0), *spec);
  Value W = ctx.operand(1), R = ctx.operand(2), bias = ctx.operand(3);
  Value h0 = ctx.operand(5);
  if (spec->batchFirst && h0)
    h0 = r.transpose(h0, {1, 0, 2});
  SmallVector<SmallVector<Value>> hs;
  SmallVector<Value> lastH;
  for (int64_t d = 0; d < spec->dirs; ++d) {
    Value w = r.reshape(r.slice(W, 0, d, 1), {3 * H, RnnBuilder::shape(W)[2]});
    Value rw = r.reshape(r.slice(R, 0, d, 1), {3 * H, H});
    Value xw = r.linear(x, w); // (S, B, 3H)
    Value rb;                  // (3H) recurrence bias
    if (bias) {
      Value bd = r.reshape(r.slice(bias, 0, d, 1), {6 * H});
      xw = r.add(xw, r.slice(bd, 0, 0, 3 * H));
      rb = r.slice(bd, 0, 3 * H, 3 * H);
    }
    // Without linear_before_reset the candidate's recurrence multiplies
    // r ⊙ h, so its weight and bias are kept apart from z's and r's.
    Value rwZR = rw, rwH, rbZR = rb, rbH;
    if (!linearBeforeReset) {
      rwZR = r.slice(rw, 0, 0, 2 * H);
      rwH = r.slice(rw, 0, 2 * H, H);
      if (rb) {
        rbZR = r.slice(rb, 0, 0, 2 * H);
        rbH = r.slice(rb, 0, 2 * H, H);
      }
    }
    Value h = initialState(r, h0, *spec, d);
    bool backwards = spec->reverse || d == 1;
    SmallVector<Value> steps(S);
    for (int64_t k = 0; k < S; ++k) {
      int64_t t = backwards ? S - 1 - k : k;
      SmallVector<Value> xg =
          r.split(r.reshape(r.slice(xw, 0, t, 1), {B, 3 * H}), 1, 3);
      Value hr = r.linear(h, rwZR);
      if (rbZR)
        hr = r.add(hr, rbZR);
      SmallVector<Value> hg = r.split(hr, 1, linearBeforeReset ? 3 : 2);
      Value z = r.sigmoid(r.add(xg[0], hg[0]));
      Value reset = r.sigmoid(r.add(xg[1], hg[1]));
      Value rec;
      if (linearBeforeReset) {
        rec = r.mul(reset, hg[2]);
      } else {
        rec = r.linear(r.mul(reset, h), rwH);
        if (rbH)
          rec = r.add(rec, rbH);
      }
      Value n = r.tanh(r.add(xg[2], rec));
      h = r.add(n, r.mul(z, r.sub(h, n)));
      steps[t] = h;
    }
    hs.push_back(steps);
    lastH.push_back(h);
  }
  defineOutputs(ctx, r, *spec, hs, lastH, {});
  return success();
}

/// RNN: h' = f(Xi + h Ri^T + Wbi + Rbi), f Tanh (the default) or Relu per
/// direction (nn.RNN's nonlinearity).
static LogicalResult importRNN(ImportContext &ctx) {
  if (failed(ctx.requireOperands(3, 6)))
    return failure();
  auto spec = readSpec(ctx, 1, {"Tanh"}, {"Relu"});
  if (failed(spec))
    return failure();
  auto xt = cast<RankedTensorType>(ctx.operand(0).getType());
  RnnBuilder r(ctx.builder(), ctx.loc(), xt.getElementType());
  int64_t S = spec->seq, B = spec->batch, H = spec->hidden;
  Value x = timeMajor(r, ctx.operand(0), *spec);
  Value W = ctx.operand(1), R = ctx.operand(2), bias = ctx.operand(3);
  Value h0 = ctx.operand(5);
  if (spec->batchFirst && h0)
    h0 = r.transpose(h0, {1, 0, 2});
  SmallVector<SmallVector<Value>> hs;
  SmallVector<Value> lastH;
  for (int64_t d = 0; d < spec->dirs; ++d) {
    bool relu = !spec->activations.empty() && spec->activations[d] == "Relu";
    Value w = r.reshape(r.slice(W, 0, d, 1), {H, RnnBuilder::shape(W)[2]});
    Value rw = r.reshape(r.slice(R, 0, d, 1), {H, H});
    Value xw = r.linear(x, w); // (S, B, H)
    if (bias) {
      Value bd = r.reshape(r.slice(bias, 0, d, 1), {2 * H});
      xw = r.add(xw, r.add(r.slice(bd, 0, 0, H), r.slice(bd, 0, H, H)));
    }
    Value h = initialState(r, h0, *spec, d);
    bool backwards = spec->reverse || d == 1;
    SmallVector<Value> steps(S);
    for (int64_t k = 0; k < S; ++k) {
      int64_t t = backwards ? S - 1 - k : k;
      Value pre =
          r.add(r.reshape(r.slice(xw, 0, t, 1), {B, H}), r.linear(h, rw));
      h = relu ? r.relu(pre) : r.tanh(pre);
      steps[t] = h;
    }
    hs.push_back(steps);
    lastH.push_back(h);
  }
  defineOutputs(ctx, r, *spec, hs, lastH, {});
  return success();
}

void registerRecurrentImporters(OpImporterTable &table) {
  table.add("RNN", importRNN);
  table.add("LSTM", importLSTM);
  table.add("GRU", importGRU);
}

} // namespace shardc
