//===- FusedOps.h - The instructions of a FusedElementwise op ---*- C++ -*-===//
//
// A FusedElementwise op (shardc-fuse-elementwise) computes a chain of
// elementwise float32 ops in one pass over memory. Its plan op carries the
// chain as a program:
//
//   program  ints, 4 per instruction: opcode, then the values it reads (-1
//            where the opcode reads fewer than 3)
//   results  ints: the value each output is
//
// Values are numbered inputs first (0 .. inputs-1), then one per
// instruction in program order; an instruction reads only values numbered
// below its own. Every output and instruction has the op's shape (the shape
// of output 0); each input broadcasts to it as `input[(i / inner) % size]`
// for output element i (broadcastPattern below), which covers equal shapes,
// scalars, trailing vectors (a bias) and per-row values (a mean).
//
// The opcodes are the plan format's (docs/ops.md), so their numbers never
// change; new ones go at the end. The arithmetic is ElementOps.h's, the
// same functors the single-op kernels run, so a fused chain computes the
// bits its ops compute one by one. The compiler asks this table which ops
// it may fuse, so compiler and runtimes agree on one list.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_FUSEDOPS_H
#define SHARDC_RUNTIME_KERNELS_FUSEDOPS_H

#include "runtime/kernels/ElementOps.h"
#include "runtime/kernels/FusedOpcode.h"

#include <cstdint>
#include <string_view>

namespace shardc::rt::ops {

/// One opcode: the op type it computes (the plan op type of the same
/// single op) and the values it reads.
struct FusedOpInfo {
  std::string_view name;
  FusedOpcode code;
  int arity;
};

inline constexpr FusedOpInfo kFusedOps[] = {
    {"Add", FusedOpcode::Add, 2},
    {"Sub", FusedOpcode::Sub, 2},
    {"Mul", FusedOpcode::Mul, 2},
    {"Div", FusedOpcode::Div, 2},
    {"Max", FusedOpcode::Max, 2},
    {"Min", FusedOpcode::Min, 2},
    {"Pow", FusedOpcode::Pow, 2},
    {"Neg", FusedOpcode::Neg, 1},
    {"Abs", FusedOpcode::Abs, 1},
    {"Sqrt", FusedOpcode::Sqrt, 1},
    {"Exp", FusedOpcode::Exp, 1},
    {"Erf", FusedOpcode::Erf, 1},
    {"Tanh", FusedOpcode::Tanh, 1},
    {"Sigmoid", FusedOpcode::Sigmoid, 1},
    {"Relu", FusedOpcode::Relu, 1},
    {"Where", FusedOpcode::Where, 3},
    {"ReluGrad", FusedOpcode::ReluGrad, 2},
    {"SigmoidGrad", FusedOpcode::SigmoidGrad, 2},
    {"TanhGrad", FusedOpcode::TanhGrad, 2},
    {"Log", FusedOpcode::Log, 1},
};
inline constexpr int kNumFusedOpcodes =
    sizeof(kFusedOps) / sizeof(kFusedOps[0]);

/// The opcode of an op type, or null when it cannot be fused.
inline const FusedOpInfo *findFusedOp(std::string_view type) {
  for (const FusedOpInfo &info : kFusedOps)
    if (info.name == type)
      return &info;
  return nullptr;
}
/// The entry of a valid opcode number, or null.
inline const FusedOpInfo *fusedOpInfo(int64_t code) {
  for (const FusedOpInfo &info : kFusedOps)
    if (static_cast<int64_t>(info.code) == code)
      return &info;
  return nullptr;
}

/// The values an instruction reads, at most, and the ints it takes in a
/// program: the opcode and that many value indices.
constexpr int kFusedArgs = 3;
constexpr int kFusedInstrInts = 1 + kFusedArgs;

/// Whether operand `arg` of an instruction of `code` is a bool: a Where's
/// condition, the one place a bool is read (and only from an input). Every
/// other operand is f32.
inline bool readsBool(FusedOpcode code, int arg) {
  return code == FusedOpcode::Where && arg == 0;
}

/// The most inputs, instructions and outputs of one FusedElementwise op:
/// every backend runs one within these (the CUDA kernel keeps all values of
/// an element in registers), and the compiler fuses within them.
constexpr int kMaxFusedInputs = 16;
constexpr int kMaxFusedInstrs = 48;
constexpr int kMaxFusedOutputs = 8;

/// How an input of shape `in` reads for output element i of shape `out`:
/// element (i / inner) % size. The input's dimensions (aligned to the right,
/// missing ones 1) must be 1 or equal to the output's, and those that equal
/// a non-1 output dimension must be contiguous. `size` is the input's
/// element count.
struct BroadcastPattern {
  int64_t inner = 1, size = 1;
};

/// The pattern of `in` against `out`, or false when `in` does not broadcast
/// to `out` that way (the op cannot be fused with that operand).
template <typename InShape, typename OutShape>
bool broadcastPattern(const InShape &in, const OutShape &out,
                      BroadcastPattern &p) {
  int64_t rank = static_cast<int64_t>(out.size());
  int64_t inRank = static_cast<int64_t>(in.size());
  if (inRank > rank)
    return false;
  // Output dims [lo, hi) are the ones the input spans (not 1 in it).
  int64_t lo = -1, hi = -1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t k = d - (rank - inRank);
    int64_t inDim = k < 0 ? 1 : in[k];
    int64_t outDim = out[d];
    if (outDim == 1) {
      // Multiplies nothing: it continues a run it follows, starts none.
      if (inDim != 1)
        return false;
      if (hi == d)
        hi = d + 1;
      continue;
    }
    if (inDim == outDim) {
      if (hi != -1 && hi != d)
        return false; // a second run: not (i / inner) % size
      if (lo == -1)
        lo = d;
      hi = d + 1;
    } else if (inDim != 1) {
      return false;
    }
  }
  p = BroadcastPattern();
  if (lo == -1)
    return true; // a scalar: size 1
  for (int64_t d = lo; d < hi; ++d)
    p.size *= out[d];
  for (int64_t d = hi; d < rank; ++d)
    p.inner *= out[d];
  return true;
}

/// One instruction on one element: what the single op computes. `a`, `b`,
/// `c` are the values it reads (a Where's condition as 0 or 1).
SHARDC_HOST_DEVICE inline float fusedApply(FusedOpcode op, float a, float b,
                                           float c) {
  switch (op) {
  case FusedOpcode::Add:
    return AddOp{}(a, b);
  case FusedOpcode::Sub:
    return SubOp{}(a, b);
  case FusedOpcode::Mul:
    return MulOp{}(a, b);
  case FusedOpcode::Div:
    return DivOp{}(a, b);
  case FusedOpcode::Max:
    return MaxOp{}(a, b);
  case FusedOpcode::Min:
    return MinOp{}(a, b);
  case FusedOpcode::Pow:
    return powValue(a, b);
  case FusedOpcode::Neg:
    return NegOp{}(a);
  case FusedOpcode::Abs:
    return AbsOp{}(a);
  case FusedOpcode::Sqrt:
    return SqrtOp{}(a);
  case FusedOpcode::Exp:
    return ExpOp{}(a);
  case FusedOpcode::Erf:
    return ErfOp{}(a);
  case FusedOpcode::Tanh:
    return TanhOp{}(a);
  case FusedOpcode::Sigmoid:
    return SigmoidOp{}(a);
  case FusedOpcode::Relu:
    return ReluOp{}(a);
  case FusedOpcode::Where:
    return a != 0.0f ? b : c;
  case FusedOpcode::ReluGrad:
    return ReluGradOp{}(a, b);
  case FusedOpcode::SigmoidGrad:
    return SigmoidGradOp{}(a, b);
  case FusedOpcode::TanhGrad:
    return TanhGradOp{}(a, b);
  case FusedOpcode::Log:
    return LogOp{}(a);
  }
  return 0.0f;
}

} // namespace shardc::rt::ops

#endif // SHARDC_RUNTIME_KERNELS_FUSEDOPS_H
