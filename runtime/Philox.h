//===- Philox.h - Counter-based random numbers for dropout ------*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11): cuRAND's CURAND_RNG_PSEUDO_PHILOX4_32_10 and the generator
// PyTorch's CUDA backend draws dropout masks from. It maps a 128-bit counter
// and a 64-bit key to four 32-bit words with no state, so any element of a
// random stream is computed directly from its position: a CPU loop and a CUDA
// thread per four elements produce the same numbers.
//
// Plain C++17 with no dependencies: constexpr functions that compile for the
// host and, under nvcc, for the device (SHARDC_HOST_DEVICE).
//
// Dropout masks (docs/ops.md, Dropout): the key is the run's seed, the
// counter is (element / 4 as 64 bits, dropout site, training step), and
// element g of the site's global tensor uses word g % 4 of that block. An
// element is kept when its word is at least dropoutThreshold(ratio).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_PHILOX_H
#define SHARDC_RUNTIME_PHILOX_H

#include "runtime/kernels/HostDevice.h"

#include <cstdint>

namespace shardc::rt {

/// A Philox4x32 counter or output: four 32-bit words.
struct Philox4x32Block {
  uint32_t v[4];
};
/// A Philox4x32 key: two 32-bit words.
struct Philox4x32Key {
  uint32_t v[2];
};

namespace philox {
inline constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
inline constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

/// The high and low halves of the 64-bit product a * b.
SHARDC_HOST_DEVICE constexpr uint32_t mulhilo(uint32_t a, uint32_t b,
                                              uint32_t &hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

SHARDC_HOST_DEVICE constexpr Philox4x32Block oneRound(Philox4x32Block c,
                                                      Philox4x32Key k) {
  uint32_t hi0 = 0, hi1 = 0;
  uint32_t lo0 = mulhilo(kM0, c.v[0], hi0);
  uint32_t lo1 = mulhilo(kM1, c.v[2], hi1);
  return {{hi1 ^ c.v[1] ^ k.v[0], lo1, hi0 ^ c.v[3] ^ k.v[1], lo0}};
}
} // namespace philox

/// Philox4x32 with `rounds` rounds (10 is the standard, and what cuRAND and
/// Random123's philox4x32 use): the key is bumped by the Weyl constants
/// between rounds.
SHARDC_HOST_DEVICE constexpr Philox4x32Block
philox4x32(Philox4x32Block counter, Philox4x32Key key, int rounds = 10) {
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      key.v[0] += philox::kW0;
      key.v[1] += philox::kW1;
    }
    counter = philox::oneRound(counter, key);
  }
  return counter;
}

//===----------------------------------------------------------------------===//
// Dropout masks
//===----------------------------------------------------------------------===//

/// The key of every mask of a run: the 64-bit seed (shardrun --seed).
SHARDC_HOST_DEVICE constexpr Philox4x32Key dropoutKey(uint64_t seed) {
  return {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
}

/// The four random words of elements [4 * block, 4 * block + 4) of dropout
/// site `site` at training step `step` (taken modulo 2^32).
SHARDC_HOST_DEVICE constexpr Philox4x32Block
dropoutBlock(uint64_t seed, uint64_t step, uint32_t site, uint64_t block) {
  return philox4x32(
      {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), site,
        static_cast<uint32_t>(step)}},
      dropoutKey(seed));
}

/// An element whose random word is at least this is kept: round(ratio *
/// 2^32), so a word (uniform over [0, 2^32)) keeps with probability
/// 1 - ratio to within 2^-32. A ratio of 0 keeps everything; a ratio so close
/// to 1 that it rounds to 2^32 keeps nothing.
SHARDC_HOST_DEVICE constexpr uint64_t dropoutThreshold(double ratio) {
  if (!(ratio > 0.0))
    return 0;
  if (ratio >= 1.0)
    return uint64_t(1) << 32;
  return static_cast<uint64_t>(ratio * 4294967296.0 + 0.5);
}

/// Whether element `index` of the global tensor of dropout site `site` is
/// kept at `step` (one Philox call per element; kernels share one call among
/// four consecutive elements).
SHARDC_HOST_DEVICE constexpr bool dropoutKeep(uint64_t seed, uint64_t step,
                                              uint32_t site, uint64_t index,
                                              uint64_t threshold) {
  return dropoutBlock(seed, step, site, index / 4).v[index % 4] >= threshold;
}

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_PHILOX_H
