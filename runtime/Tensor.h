//===- Tensor.h - Element types and tensor views of the runtime -*- C++ -*-===//
//
// The runtime's view of data: an element type and a dense, row-major tensor
// view over memory it does not own. Numeric codes equal ONNX's
// TensorProto.DataType so plans, .npy files and ONNX agree without tables.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_TENSOR_H
#define SHARDC_RUNTIME_TENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace shardc::rt {

/// Element types. Values equal onnx.TensorProto.DataType.
enum class DType : int32_t {
  Undefined = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  I32 = 6,
  I64 = 7,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  BF16 = 16,
};

/// Size in bytes of one element, 0 for Undefined.
size_t dtypeSize(DType t);
/// Short name ("float32", "int64", "bool", ...).
llvm::StringRef dtypeName(DType t);
/// The DType for an ONNX TensorProto.DataType code, if the runtime knows it.
std::optional<DType> dtypeFromCode(int64_t code);

/// Largest element count of a tensor, 2^46 (256 TiB of float32: beyond any
/// one machine), so that byte counts and their sums stay far inside 64
/// bits. An empty tensor's other dimensions are bounded by it too: kernels
/// loop over them, and products of them (rows, strides) must not wrap.
constexpr int64_t kMaxElements = int64_t(1) << 46;

/// Number of elements of a shape (1 for rank 0).
int64_t numElements(llvm::ArrayRef<int64_t> shape);
/// "[2, 3, 4]".
std::string shapeToString(llvm::ArrayRef<int64_t> shape);

/// A dense row-major tensor over memory owned elsewhere. An absent optional
/// operand of an op is a view with `data == nullptr` and DType::Undefined.
struct TensorView {
  DType dtype = DType::Undefined;
  llvm::SmallVector<int64_t, 6> shape;
  void *data = nullptr;

  TensorView() = default;
  TensorView(DType dtype, llvm::ArrayRef<int64_t> shape, void *data)
      : dtype(dtype), shape(shape.begin(), shape.end()), data(data) {}

  bool present() const { return data != nullptr || dtype != DType::Undefined; }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return numElements(shape); }
  size_t bytes() const {
    return static_cast<size_t>(numel()) * dtypeSize(dtype);
  }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_TENSOR_H
