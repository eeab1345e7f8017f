//===- Tensor.cpp - Element types and tensor views ------------------------===//
#include "runtime/Tensor.h"

namespace shardc::rt {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::U8:
  case DType::I8:
  case DType::Bool:
    return 1;
  case DType::I64:
  case DType::F64:
    return 8;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::Undefined:
    return 0;
  }
  return 0;
}

llvm::StringRef dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "float32";
  case DType::U8:
    return "uint8";
  case DType::I8:
    return "int8";
  case DType::I32:
    return "int32";
  case DType::I64:
    return "int64";
  case DType::Bool:
    return "bool";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::F64:
    return "float64";
  case DType::Undefined:
    return "undefined";
  }
  return "undefined";
}

std::optional<DType> dtypeFromCode(int64_t code) {
  switch (code) {
  case 1:
  case 2:
  case 3:
  case 6:
  case 7:
  case 9:
  case 10:
  case 11:
  case 16:
    return static_cast<DType>(code);
  default:
    return std::nullopt;
  }
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeToString(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

} // namespace shardc::rt
