//===- VecMathAvx512.cpp - VecMath.h's loops for x86-64-v4 (AVX-512) ---===//
//
// Compiled with -march=x86-64-v4 where the target is x86-64
// (runtime/cpu/CMakeLists.txt defines SHARDC_VEC_AVX512 then); elsewhere
// empty.
//
//===----------------------------------------------------------------------===//
#if defined(SHARDC_VEC_AVX512)
#define SHARDC_VEC_ISA avx512
#define SHARDC_VEC_WIDTH 16
#include "runtime/cpu/VecMathImpl.h"
#endif
