//===- VecMath.cpp - Choosing the vectorized loops' path ------------------===//
//
// See VecMath.h. The paths are tried best first: a CPU that has AVX-512 F,
// BW, DQ and VL runs avx512; one with AVX2 and FMA avx2; any other base.
// SHARD_CPU_PATH=avx512|avx2|base picks a path this CPU can run (for
// comparing them); a name it cannot run is refused when the program starts.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/VecMath.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdio>
#include <cstdlib>

namespace shardc::rt::cpu::vec {

#define SHARDC_VEC_DECLARE(isa)                                                \
  namespace isa {                                                              \
  void expArray(const float *x, float *out, int64_t n);                        \
  void erfArray(const float *x, float *out, int64_t n);                        \
  float maxOf(const float *x, int64_t n);                                      \
  double expSum(const float *x, float shift, float *out, int64_t n);           \
  void adam(const ops::AdamStep<float> &s, const float *p, const float *g,     \
            const float *m, const float *v, float *outP, float *outM,          \
            float *outV, int64_t n);                                           \
  }
#define SHARDC_VEC_PATH(isa)                                                   \
  Path {                                                                       \
#isa, isa::expArray, isa::erfArray, isa::maxOf, isa::expSum, isa::adam     \
  }

SHARDC_VEC_DECLARE(base)
#if defined(SHARDC_VEC_AVX512)
SHARDC_VEC_DECLARE(avx512)
#endif
#if defined(SHARDC_VEC_AVX2)
SHARDC_VEC_DECLARE(avx2)
#endif

static llvm::SmallVector<Path, 3> detectPaths() {
  llvm::SmallVector<Path, 3> paths;
#if defined(SHARDC_VEC_AVX512)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    paths.push_back(SHARDC_VEC_PATH(avx512));
#endif
#if defined(SHARDC_VEC_AVX2)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    paths.push_back(SHARDC_VEC_PATH(avx2));
#endif
  paths.push_back(SHARDC_VEC_PATH(base));
  return paths;
}

llvm::ArrayRef<Path> availablePaths() {
  static const llvm::SmallVector<Path, 3> paths = detectPaths();
  return paths;
}

static const Path &choosePath() {
  llvm::ArrayRef<Path> paths = availablePaths();
  const char *want = std::getenv("SHARD_CPU_PATH");
  if (!want || !*want)
    return paths.front();
  for (const Path &p : paths)
    if (llvm::StringRef(want) == p.name)
      return p;
  std::string names;
  for (const Path &p : paths)
    names += std::string(names.empty() ? "" : ", ") + p.name;
  std::fprintf(stderr,
               "error: SHARD_CPU_PATH=%s is not a path this CPU can run "
               "(it can run: %s); unset it to use the best\n",
               want, names.c_str());
  std::exit(2);
}

const Path &activePath() {
  static const Path &path = choosePath();
  return path;
}

} // namespace shardc::rt::cpu::vec
