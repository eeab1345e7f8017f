//===- Attrs.h - Op attributes as the runtime sees them ---------*- C++ -*-===//
//
// A plan op carries named attributes of five kinds: int, float, string, ints
// and floats. Kernels read them through AttrMap with an explicit default.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_RUNTIME_ATTRS_H
#define SHARDC_RUNTIME_ATTRS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardc::rt {

struct AttrValue {
  enum class Kind { Int, Float, String, Ints, Floats } kind = Kind::Int;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  static AttrValue ofInt(int64_t v);
  static AttrValue ofFloat(double v);
  static AttrValue ofString(std::string v);
  static AttrValue ofInts(std::vector<int64_t> v);
  static AttrValue ofFloats(std::vector<double> v);
};

class AttrMap {
public:
  void set(const std::string &name, AttrValue v) { attrs[name] = std::move(v); }
  bool has(llvm::StringRef name) const { return attrs.count(name.str()) != 0; }
  const AttrValue *lookup(llvm::StringRef name) const;

  /// Integer attribute, or `def` when absent. A float attribute is truncated.
  int64_t getInt(llvm::StringRef name, int64_t def) const;
  /// Float attribute, or `def` when absent. An int attribute is converted.
  double getFloat(llvm::StringRef name, double def) const;
  llvm::StringRef getString(llvm::StringRef name, llvm::StringRef def) const;
  /// Integer list, or empty when absent.
  llvm::ArrayRef<int64_t> getInts(llvm::StringRef name) const;
  llvm::ArrayRef<double> getFloats(llvm::StringRef name) const;

  const std::map<std::string, AttrValue> &all() const { return attrs; }

private:
  std::map<std::string, AttrValue> attrs;
};

} // namespace shardc::rt

#endif // SHARDC_RUNTIME_ATTRS_H
