//===- FuzzNpy.cpp - libFuzzer target: the .npy reader --------------------===//
//
// Input: the bytes of a .npy file. parseNpy must accept it or return an
// error, never crash, read out of bounds or allocate more than the input
// implies. An accepted array must survive encodeNpy -> parseNpy unchanged
// (dtype, shape, bytes): a reader that accepts what it cannot represent
// would otherwise hand the trainer a different tensor than the file holds.
//
//===----------------------------------------------------------------------===//

#include "runtime/Npy.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace shardc::rt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::Expected<NpyArray> array =
      parseNpy(llvm::ArrayRef<uint8_t>(data, size), "fuzz.npy");
  if (!array) {
    llvm::consumeError(array.takeError());
    return 0;
  }
  llvm::Expected<std::vector<uint8_t>> encoded =
      encodeNpy(array->dtype, array->shape,
                array->data.empty() ? nullptr : array->data.data());
  if (!encoded) {
    std::fprintf(stderr, "accepted array does not encode: %s\n",
                 llvm::toString(encoded.takeError()).c_str());
    std::abort();
  }
  llvm::Expected<NpyArray> again = parseNpy(*encoded, "fuzz-roundtrip.npy");
  if (!again) {
    std::fprintf(stderr, "re-encoded array does not parse: %s\n",
                 llvm::toString(again.takeError()).c_str());
    std::abort();
  }
  if (again->dtype != array->dtype || again->shape != array->shape ||
      again->data != array->data) {
    std::fprintf(stderr, "array changed in an encode/parse round trip\n");
    std::abort();
  }
  return 0;
}
