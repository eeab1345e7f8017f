//===- Npy.h - Reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// The .npy format (numpy.lib.format): the magic "\x93NUMPY", a version, a
// header length and a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded to a multiple of 64 bytes, then the raw elements. We read versions
// 1.0, 2.0 and 3.0 and write 1.0 (2.0 when the header does not fit), in C
// order, little-endian, for the element types of rt::DType.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_NPY_H
#define SHARDC_RUNTIME_NPY_H

#include "runtime/Tensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardc::rt {

/// An array read from a .npy file; owns its elements.
struct NpyArray {
  DType dtype = DType::Undefined;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t numel() const { return numElements(shape); }
  /// A view over `data` (valid while this array lives and is not resized).
  TensorView view() {
    return TensorView(dtype, shape, data.empty() ? nullptr : data.data());
  }
};

/// The .npy type string of a dtype ("<f4", "|b1", ...).
llvm::StringRef npyDescr(DType dtype);

/// Parses the contents of a .npy file. `name` (usually the path) is used in
/// error messages.
llvm::Expected<NpyArray> parseNpy(llvm::ArrayRef<uint8_t> bytes,
                                  llvm::StringRef name);

/// Reads a .npy file. Malformed headers, unsupported element types, Fortran
/// order, truncated data and trailing bytes are errors that name the file.
llvm::Expected<NpyArray> readNpy(llvm::StringRef path);

/// Encodes a dense C-order tensor as the bytes of a .npy file.
/// `data` holds numElements(shape) * dtypeSize(dtype) bytes.
llvm::Expected<std::vector<uint8_t>>
encodeNpy(DType dtype, llvm::ArrayRef<int64_t> shape, const void *data);

/// .npy has no bfloat16. A bfloat16 tensor is encoded and written as
/// float32 (exactly), and a graph input of bfloat16 reads a float32 array:
/// this rounds `arr` to bfloat16 (nearest even) when `want` is bfloat16 and
/// it holds float32, and leaves it alone otherwise.
void adaptNpyToInput(NpyArray &arr, DType want);

/// Writes a .npy file (through a temporary that is renamed into place).
llvm::Error writeNpy(llvm::StringRef path, DType dtype,
                     llvm::ArrayRef<int64_t> shape, const void *data);
inline llvm::Error writeNpy(llvm::StringRef path, const TensorView &t) {
  return writeNpy(path, t.dtype, t.shape, t.data);
}

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_NPY_H
