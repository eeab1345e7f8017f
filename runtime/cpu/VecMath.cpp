//===- VecMath.cpp - Choosing the vectorized loops' path ------------------===//
//
// See VecMath.h. The paths are tried best first: a CPU with every feature of
// x86-64-v4 (AVX-512 F, BW, CD, DQ, VL and v3's) runs avx512; one with
// x86-64-v3's (AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE) avx2; any other base.
// SHARD_CPU_PATH=avx512|avx2|base picks a path this CPU can run (for
// comparing them); shardrun refuses a name the CPU cannot run when it
// starts.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/VecMath.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

namespace shardc::rt::cpu::vec {

#define SHARDC_VEC_DECLARE(isa)                                                \
  namespace isa {                                                              \
  void expArray(const float *x, float *out, int64_t n);                        \
  void erfArray(const float *x, float *out, int64_t n);                        \
  void erfAndGaussian(const float *x, float *erfOut, float *gaussOut,          \
                      int64_t n);                                              \
  float maxOf(const float *x, int64_t n);                                      \
  double expSum(const float *x, float shift, float *out, int64_t n);           \
  void adam(const ops::AdamStep<float> &s, const float *p, const float *g,     \
            const float *m, const float *v, float *outP, float *outM,          \
            float *outV, int64_t n);                                           \
  bool fused(ops::FusedOpcode op, const float *a, const float *b,              \
             const float *c, float *out, int64_t n);                           \
  void layerNormRow(const float *x, const float *w, const float *b,            \
                    double eps, float *y, int64_t n, double *mean,             \
                    double *invStd);                                           \
  void layerNormGradRow(const float *dy, const float *x, const float *w,       \
                        double mean, double invStd, float *dx, double *dScale, \
                        double *dBias, int64_t n);                             \
  void softmaxGradRow(const float *dy, const float *y, float *dx, int64_t n);  \
  void scale(float *x, float s, int64_t n);                                    \
  void addToDouble(double *acc, const float *x, int64_t n);                    \
  bool reciprocalDivides(float c);                                             \
  void divideByReciprocal(const float *a, float c, float r, float *out,        \
                          int64_t n);                                          \
  }
#define SHARDC_VEC_PATH(isa)                                                   \
  Path {                                                                       \
#isa, isa::expArray, isa::erfArray, isa::erfAndGaussian, isa::maxOf,       \
        isa::expSum, isa::adam, isa::fused, isa::layerNormRow,                 \
        isa::layerNormGradRow, isa::softmaxGradRow, isa::scale,                \
        isa::addToDouble, isa::reciprocalDivides, isa::divideByReciprocal      \
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
  if (__builtin_cpu_supports("x86-64-v4"))
    paths.push_back(SHARDC_VEC_PATH(avx512));
#endif
#if defined(SHARDC_VEC_AVX2)
  if (__builtin_cpu_supports("x86-64-v3"))
    paths.push_back(SHARDC_VEC_PATH(avx2));
#endif
  paths.push_back(SHARDC_VEC_PATH(base));
  return paths;
}

llvm::ArrayRef<Path> availablePaths() {
  static const llvm::SmallVector<Path, 3> paths = detectPaths();
  return paths;
}

/// The path SHARD_CPU_PATH names, the best one when it is unset or empty,
/// nothing when it names no path this CPU can run.
static const Path *wantedPath() {
  llvm::ArrayRef<Path> paths = availablePaths();
  const char *want = std::getenv("SHARD_CPU_PATH");
  if (!want || !*want)
    return &paths.front();
  for (const Path &p : paths)
    if (llvm::StringRef(want) == p.name)
      return &p;
  return nullptr;
}

std::optional<std::string> pathChoiceError() {
  if (wantedPath())
    return std::nullopt;
  std::string names;
  for (const Path &p : availablePaths())
    names += std::string(names.empty() ? "" : ", ") + p.name;
  return "SHARD_CPU_PATH=" + std::string(std::getenv("SHARD_CPU_PATH")) +
         " is not a path this CPU can run (it can run: " + names +
         "); unset it to use the best";
}

static const Path &choosePath() {
  if (const Path *p = wantedPath())
    return *p;
  // Tools check pathChoiceError() when they start; this is the last resort.
  std::fprintf(stderr, "error: %s\n", pathChoiceError()->c_str());
  std::exit(2);
}

const Path &activePath() {
  static const Path &path = choosePath();
  return path;
}

std::optional<float> divisorReciprocal(float c) {
  static std::mutex mu;
  static std::unordered_map<uint32_t, bool> checked;
  uint32_t bits;
  std::memcpy(&bits, &c, sizeof bits);
  bool divides;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = checked.find(bits);
    if (it == checked.end())
      it = checked.emplace(bits, activePath().reciprocalDivides(c)).first;
    divides = it->second;
  }
  if (!divides)
    return std::nullopt;
  return 1.0f / c;
}

} // namespace shardc::rt::cpu::vec
