//===- VecMathAvx2.cpp - VecMath.h's loops for x86-64-v3 (AVX2, FMA) ---===//
//
// Compiled with -march=x86-64-v3 where the target is x86-64
// (runtime/cpu/CMakeLists.txt defines SHARDC_VEC_AVX2 then); elsewhere
// empty.
//
//===----------------------------------------------------------------------===//
#if defined(SHARDC_VEC_AVX2)
#define SHARDC_VEC_ISA avx2
#define SHARDC_VEC_WIDTH 8
#include "runtime/cpu/VecMathImpl.h"
#endif
