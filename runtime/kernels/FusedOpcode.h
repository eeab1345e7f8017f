//===- FusedOpcode.h - FusedElementwise's opcodes ---------------*- C++ -*-===//
//
// The instructions a FusedElementwise plan op's program names
// (runtime/kernels/FusedOps.h has the rest of the contract). Alone in this
// header so that the per-instruction-set loops (runtime/cpu/VecMathImpl.h)
// can switch on them without seeing any inline function.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_KERNELS_FUSEDOPCODE_H
#define SHARDC_RUNTIME_KERNELS_FUSEDOPCODE_H

#include <cstdint>

namespace shardc::rt::ops {

/// The plan format's numbers: they never change; new opcodes go at the end.
enum class FusedOpcode : int32_t {
  Add = 0,
  Sub = 1,
  Mul = 2,
  Div = 3,
  Max = 4,
  Min = 5,
  Pow = 6,
  Neg = 7,
  Abs = 8,
  Sqrt = 9,
  Exp = 10,
  Erf = 11,
  Tanh = 12,
  Sigmoid = 13,
  Relu = 14,
  /// Where(cond, x, y): cond is a bool input, read as 0 or 1.
  Where = 15,
  ReluGrad = 16,
  SigmoidGrad = 17,
  TanhGrad = 18,
  Log = 19,
};

} // namespace shardc::rt::ops

#endif // SHARDC_RUNTIME_KERNELS_FUSEDOPCODE_H
