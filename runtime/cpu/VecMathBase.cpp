//===- VecMathBase.cpp - VecMath.h's loops for any CPU of the target ------===//
//
// Compiled for the target's baseline instruction set.
//
//===----------------------------------------------------------------------===//
#define SHARDC_VEC_ISA base
#define SHARDC_VEC_WIDTH 4
#include "runtime/cpu/VecMathImpl.h"
