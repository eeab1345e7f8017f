//===- Fused.cpp - FusedElementwise: a chain of elementwise ops -----------===//
//
// The program (runtime/kernels/FusedOps.h) runs over the output in blocks
// of kBlock elements: each instruction computes its block into scratch that
// stays in the L1 cache (or straight into its output), reading the inputs'
// elements of that block (in place where an input has the output's shape,
// gathered by its broadcast pattern otherwise). So the chain reads its
// inputs and writes its outputs once, instead of writing and reading every
// intermediate tensor. An output may be the same memory as an input (an
// update in place): then outputs are copied out of scratch at the end of
// each block, after all of the block's reads.
//
// The instructions run VecMath.h's loops, compiled for the CPU's widest
// vectors (AVX-512 where it has them, while the single-op kernels are
// built for any x86-64), with the single ops' arithmetic: Exp and Erf the
// same vectorized functions, Pow's small exponents the same products,
// Tanh, Sigmoid and Log the same functors; a division by a scalar input
// multiplies by its reciprocal with a correction where that is proven to
// give the quotient's bits (vec::divisorReciprocal). So the fused chain
// computes the same bits as the ops one by one, only faster.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/KernelUtil.h"
#include "runtime/cpu/VecMath.h"

#include <algorithm>
#include <cstring>

namespace shardc::rt::cpu {

using ops::BroadcastPattern;
using ops::FusedOpcode;

llvm::Error checkFused(const KernelContext &ctx, FusedProgram &p) {
  llvm::ArrayRef<int64_t> program = ctx.attrs.getInts("program");
  llvm::ArrayRef<int64_t> results = ctx.attrs.getInts("results");
  if (program.empty() || program.size() % ops::kFusedInstrInts != 0)
    return ctx.error("attribute 'program' must hold " +
                     llvm::Twine(ops::kFusedInstrInts) +
                     " ints per instruction and at least one instruction; "
                     "it has " +
                     llvm::Twine(program.size()));
  if (program.size() / ops::kFusedInstrInts >
          static_cast<size_t>(ops::kMaxFusedInstrs) ||
      ctx.inputs.size() > static_cast<size_t>(ops::kMaxFusedInputs) ||
      ctx.outputs.size() > static_cast<size_t>(ops::kMaxFusedOutputs))
    return ctx.error("has " + llvm::Twine(ctx.inputs.size()) + " inputs, " +
                     llvm::Twine(program.size() / ops::kFusedInstrInts) +
                     " instructions and " + llvm::Twine(ctx.outputs.size()) +
                     " outputs; at most " + llvm::Twine(ops::kMaxFusedInputs) +
                     ", " + llvm::Twine(ops::kMaxFusedInstrs) + " and " +
                     llvm::Twine(ops::kMaxFusedOutputs) + " are allowed");
  if (ctx.outputs.empty() || results.size() != ctx.outputs.size())
    return ctx.error("attribute 'results' names " +
                     llvm::Twine(results.size()) + " values for " +
                     llvm::Twine(ctx.outputs.size()) + " outputs");
  for (size_t k = 0; k < ctx.outputs.size(); ++k) {
    std::string name = "output " + std::to_string(k);
    SHARDC_CPU_TRY(requireOutput(ctx, k, name));
    SHARDC_CPU_TRY(requireType(ctx, ctx.outputs[k], DType::F32, name));
    SHARDC_CPU_TRY(
        requireShape(ctx, ctx.outputs[k], ctx.outputs[0].shape, name));
  }
  llvm::ArrayRef<int64_t> shape = ctx.outputs[0].shape;
  p.numel = ctx.outputs[0].numel();
  size_t numInputs = ctx.inputs.size();
  p.inputs.assign(numInputs, BroadcastPattern());
  for (size_t k = 0; k < numInputs; ++k) {
    std::string name = "input " + std::to_string(k);
    SHARDC_CPU_TRY(requireInput(ctx, k, name));
    const TensorView &in = ctx.inputs[k];
    if (in.dtype != DType::F32 && in.dtype != DType::Bool)
      return unsupportedType(ctx, in.dtype, name);
    if (!ops::broadcastPattern(in.shape, shape, p.inputs[k]))
      return ctx.error(name + " (shape " + shapeToString(in.shape) +
                       ") does not broadcast to the output shape " +
                       shapeToString(shape) +
                       " as (i / inner) % size: a FusedElementwise input "
                       "spans one run of the output's dimensions");
  }
  size_t numInstrs = program.size() / ops::kFusedInstrInts;
  p.instrs.clear();
  for (size_t j = 0; j < numInstrs; ++j) {
    const int64_t *w = program.data() + j * ops::kFusedInstrInts;
    const ops::FusedOpInfo *info = ops::fusedOpInfo(w[0]);
    if (!info)
      return ctx.error("instruction " + llvm::Twine(j) + " has opcode " +
                       llvm::Twine(w[0]) + ", which no op has");
    FusedProgram::Instr instr{info->code, {}};
    std::fill(std::begin(instr.args), std::end(instr.args), -1);
    int64_t limit = static_cast<int64_t>(numInputs + j);
    for (int a = 0; a < ops::kFusedArgs; ++a) {
      int64_t v = w[1 + a];
      if (a >= info->arity) {
        if (v != -1)
          return ctx.error(
              "instruction " + llvm::Twine(j) + " (" +
              llvm::StringRef(info->name.data(), info->name.size()) +
              ") reads " + llvm::Twine(a + 1) + " values; it takes " +
              llvm::Twine(info->arity));
        continue;
      }
      if (v < 0 || v >= limit)
        return ctx.error("instruction " + llvm::Twine(j) + " reads value " +
                         llvm::Twine(v) + "; only values 0 to " +
                         llvm::Twine(limit - 1) + " exist before it");
      bool isBool = v < static_cast<int64_t>(numInputs) &&
                    ctx.inputs[v].dtype == DType::Bool;
      bool wantsBool = ops::readsBool(info->code, a);
      if (isBool != wantsBool)
        return ctx.error("instruction " + llvm::Twine(j) + " reads value " +
                         llvm::Twine(v) +
                         (wantsBool ? ", which is not a bool input, as a "
                                      "Where's condition"
                                    : ", a bool input, as a float"));
      instr.args[a] = static_cast<int32_t>(v);
    }
    p.instrs.push_back(instr);
  }
  int64_t numValues = static_cast<int64_t>(numInputs + numInstrs);
  p.results.clear();
  for (int64_t v : results) {
    if (v < 0 || v >= numValues ||
        (v < static_cast<int64_t>(numInputs) &&
         ctx.inputs[v].dtype == DType::Bool))
      return ctx.error("attribute 'results' names value " + llvm::Twine(v) +
                       ", which is not a float value of the program's " +
                       llvm::Twine(numValues));
    p.results.push_back(static_cast<int32_t>(v));
  }
  return llvm::Error::success();
}

namespace {

/// Elements per block (2 KiB a value): the scratch of a GELU gradient's
/// chain (19 values) stays in a 48 KiB L1 cache, and each instruction's
/// loop is still long enough that its start costs little. On the step-time
/// GPT (bench/step_time.py, world size 1) its chains took 10.9-11.5 ms per
/// step at 512, 11.7 at 256, 13.1-13.7 at 1024, 14.1-14.5 at 2048.
constexpr int64_t kBlock = 512;

/// Writes elements [start, start + m) of an input read by pattern `p` into
/// `out`, as floats.
template <typename T>
void gather(const T *in, const BroadcastPattern &p, int64_t start, int64_t m,
            float *out) {
  int64_t idx = (start / p.inner) % p.size;
  int64_t r = start % p.inner;
  int64_t j = 0;
  while (j < m) {
    if (p.inner == 1) {
      int64_t run = std::min(p.size - idx, m - j);
      for (int64_t t = 0; t < run; ++t)
        out[j + t] = static_cast<float>(in[idx + t]);
      j += run;
      idx += run;
    } else {
      int64_t run = std::min(p.inner - r, m - j);
      std::fill(out + j, out + j + run, static_cast<float>(in[idx]));
      j += run;
      r += run;
      if (r < p.inner)
        continue;
      r = 0;
      ++idx;
    }
    if (idx == p.size)
      idx = 0;
  }
}

/// One instruction over a block of `m` elements: the vectorized loops of
/// VecMath.h where they cover the opcode, else ops::fusedApply (the
/// single ops' functors). `powByScalar` is set where Pow's kernel would take
/// its products (runtime/cpu/KernelUtil.h smallPower): the exponent is one
/// scalar input's and the base has the output's shape.
void runInstr(FusedOpcode op, const float *a, const float *b, const float *c,
              bool powByScalar, float *o, int64_t m) {
  if (vec::fused(op, a, b, c, o, m))
    return;
  if (op == FusedOpcode::Pow && powByScalar &&
      smallPower(a, static_cast<double>(b[0]), o, m))
    return;
  for (int64_t i = 0; i < m; ++i)
    o[i] = ops::fusedApply(op, a[i], b ? b[i] : 0.0f, c ? c[i] : 0.0f);
}

/// Where a program computes erf(v) and, later, exp(-(v * v)) (GELU's
/// gradient: Erf, then Mul(v, v), Neg and Exp), the Erf instruction
/// computes both from one exponential (vec::erfAndGaussian, the same bits).
/// gaussianOf[j] is the Exp instruction that Erf instruction j fills; skip
/// marks the Exp, and the Mul and Neg that nothing else reads.
struct ErfGaussianPairs {
  std::vector<int> gaussianOf;
  std::vector<bool> skip;
};

ErfGaussianPairs pairErfWithGaussian(const FusedProgram &p, size_t numInputs) {
  size_t n = p.instrs.size();
  ErfGaussianPairs pairs{std::vector<int>(n, -1), std::vector<bool>(n, false)};
  std::vector<int> reads(numInputs + n, 0);
  for (const FusedProgram::Instr &in : p.instrs)
    for (int32_t a : in.args)
      if (a >= 0)
        ++reads[a];
  for (int32_t r : p.results)
    ++reads[r];
  // The instruction computing value v, or nullptr for an input.
  auto producer = [&](int32_t v) -> const FusedProgram::Instr * {
    return v >= static_cast<int32_t>(numInputs) ? &p.instrs[v - numInputs]
                                                : nullptr;
  };
  for (size_t e = 0; e < n; ++e) {
    if (p.instrs[e].op != FusedOpcode::Exp)
      continue;
    int32_t negValue = p.instrs[e].args[0];
    const FusedProgram::Instr *neg = producer(negValue);
    if (!neg || neg->op != FusedOpcode::Neg)
      continue;
    int32_t squareValue = neg->args[0];
    const FusedProgram::Instr *square = producer(squareValue);
    if (!square || square->op != FusedOpcode::Mul ||
        square->args[0] != square->args[1])
      continue;
    int32_t v = square->args[0];
    for (size_t r = 0; r < e; ++r) {
      if (p.instrs[r].op != FusedOpcode::Erf || p.instrs[r].args[0] != v ||
          pairs.gaussianOf[r] != -1)
        continue;
      pairs.gaussianOf[r] = static_cast<int>(e);
      pairs.skip[e] = true;
      if (reads[negValue] == 1) {
        pairs.skip[negValue - numInputs] = true;
        if (reads[squareValue] == 1)
          pairs.skip[squareValue - numInputs] = true;
      }
      break;
    }
  }
  return pairs;
}

} // namespace

llvm::Error fusedElementwiseKernel(const KernelContext &ctx) {
  FusedProgram p;
  SHARDC_CPU_TRY(checkFused(ctx, p));
  size_t numInputs = ctx.inputs.size();
  size_t numValues = numInputs + p.instrs.size();
  thread_local std::vector<float> scratch;
  scratch.resize(numValues * kBlock);
  auto block = [&](size_t v) { return scratch.data() + v * kBlock; };
  std::vector<const float *> value(numValues, nullptr);
  // Scalars are spread over a block once; inputs of the output's shape are
  // read in place.
  std::vector<bool> direct(numInputs, false), uniform(numInputs, false),
      fullShape(numInputs, false);
  for (size_t k = 0; k < numInputs; ++k) {
    const TensorView &in = ctx.inputs[k];
    uniform[k] = p.inputs[k].size == 1;
    fullShape[k] = in.shape == ctx.outputs[0].shape;
    direct[k] = in.dtype == DType::F32 && p.inputs[k].size == p.numel &&
                p.inputs[k].inner == 1;
    if (uniform[k]) {
      float v = in.dtype == DType::Bool ? (in.as<uint8_t>()[0] ? 1.0f : 0.0f)
                                        : in.as<float>()[0];
      std::fill(block(k), block(k) + kBlock, v);
      value[k] = block(k);
    }
  }
  // Instructions whose value is an output write it there directly, unless
  // an output is the memory of an input: then every block's reads must come
  // before its writes, and outputs are copied out of scratch last.
  std::vector<int> outputOf(numValues, -1);
  bool staged = false;
  for (size_t r = 0; r < p.results.size(); ++r) {
    const TensorView &out = ctx.outputs[r];
    const char *lo = static_cast<const char *>(out.data);
    const char *hi = lo + p.numel * sizeof(float);
    for (const TensorView &in : ctx.inputs) {
      const char *ilo = static_cast<const char *>(in.data);
      const char *ihi = ilo + in.numel() * dtypeSize(in.dtype);
      staged |= ilo < hi && lo < ihi;
    }
    if (outputOf[p.results[r]] == -1 &&
        p.results[r] >= static_cast<int32_t>(numInputs))
      outputOf[p.results[r]] = static_cast<int>(r);
  }
  ErfGaussianPairs pairs = pairErfWithGaussian(p, numInputs);
  // Divisions by one scalar input (GELU's x / sqrt(2)) multiply by its
  // reciprocal where that gives the quotient's bits (vec::divisorReciprocal).
  std::vector<float> reciprocal(p.instrs.size(), 0.0f);
  for (size_t j = 0; j < p.instrs.size(); ++j) {
    const FusedProgram::Instr &instr = p.instrs[j];
    int32_t b = instr.args[1];
    if (instr.op != FusedOpcode::Div || b < 0 ||
        static_cast<size_t>(b) >= numInputs || !uniform[b])
      continue;
    if (std::optional<float> r = vec::divisorReciprocal(block(b)[0]))
      reciprocal[j] = *r;
  }
  auto outputFor = [&](size_t j, int64_t start) {
    int outIndex = staged ? -1 : outputOf[numInputs + j];
    return outIndex >= 0 ? ctx.outputs[outIndex].as<float>() + start
                         : block(numInputs + j);
  };
  for (int64_t start = 0; start < p.numel; start += kBlock) {
    int64_t m = std::min(kBlock, p.numel - start);
    for (size_t k = 0; k < numInputs; ++k) {
      const TensorView &in = ctx.inputs[k];
      if (uniform[k])
        continue;
      if (direct[k]) {
        value[k] = in.as<float>() + start;
        continue;
      }
      if (in.dtype == DType::Bool)
        gather(in.as<uint8_t>(), p.inputs[k], start, m, block(k));
      else
        gather(in.as<float>(), p.inputs[k], start, m, block(k));
      value[k] = block(k);
    }
    for (size_t j = 0; j < p.instrs.size(); ++j) {
      if (pairs.skip[j])
        continue;
      const FusedProgram::Instr &instr = p.instrs[j];
      auto arg = [&](int a) {
        return instr.args[a] < 0 ? nullptr : value[instr.args[a]];
      };
      auto isInput = [&](int a) {
        return instr.args[a] >= 0 &&
               static_cast<size_t>(instr.args[a]) < numInputs;
      };
      bool powByScalar = isInput(1) && uniform[instr.args[1]] &&
                         (!isInput(0) || fullShape[instr.args[0]]);
      float *out = outputFor(j, start);
      if (int e = pairs.gaussianOf[j]; e >= 0) {
        float *gauss = outputFor(e, start);
        vec::erfAndGaussian(arg(0), out, gauss, m);
        value[numInputs + e] = gauss;
      } else if (reciprocal[j] != 0.0f) {
        vec::divideByReciprocal(arg(0), arg(1)[0], reciprocal[j], out, m);
      } else {
        runInstr(instr.op, arg(0), arg(1), arg(2), powByScalar, out, m);
      }
      value[numInputs + j] = out;
    }
    for (size_t r = 0; r < p.results.size(); ++r) {
      float *out = ctx.outputs[r].as<float>() + start;
      if (value[p.results[r]] != out)
        std::memmove(out, value[p.results[r]],
                     static_cast<size_t>(m) * sizeof(float));
    }
  }
  return llvm::Error::success();
}

} // namespace shardc::rt::cpu
