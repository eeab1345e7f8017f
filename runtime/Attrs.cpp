//===- Attrs.cpp - Op attributes as the runtime sees them -----------------===//
#include "runtime/Attrs.h"

namespace shardc::rt {

AttrValue AttrValue::ofInt(int64_t v) {
  AttrValue a;
  a.kind = Kind::Int;
  a.i = v;
  return a;
}
AttrValue AttrValue::ofFloat(double v) {
  AttrValue a;
  a.kind = Kind::Float;
  a.f = v;
  return a;
}
AttrValue AttrValue::ofString(std::string v) {
  AttrValue a;
  a.kind = Kind::String;
  a.s = std::move(v);
  return a;
}
AttrValue AttrValue::ofInts(std::vector<int64_t> v) {
  AttrValue a;
  a.kind = Kind::Ints;
  a.ints = std::move(v);
  return a;
}
AttrValue AttrValue::ofFloats(std::vector<double> v) {
  AttrValue a;
  a.kind = Kind::Floats;
  a.floats = std::move(v);
  return a;
}

const AttrValue *AttrMap::lookup(llvm::StringRef name) const {
  auto it = attrs.find(name.str());
  return it == attrs.end() ? nullptr : &it->second;
}

int64_t AttrMap::getInt(llvm::StringRef name, int64_t def) const {
  const AttrValue *a = lookup(name);
  if (!a)
    return def;
  if (a->kind == AttrValue::Kind::Float)
    return static_cast<int64_t>(a->f);
  return a->kind == AttrValue::Kind::Int ? a->i : def;
}

double AttrMap::getFloat(llvm::StringRef name, double def) const {
  const AttrValue *a = lookup(name);
  if (!a)
    return def;
  if (a->kind == AttrValue::Kind::Int)
    return static_cast<double>(a->i);
  return a->kind == AttrValue::Kind::Float ? a->f : def;
}

llvm::StringRef AttrMap::getString(llvm::StringRef name,
                                   llvm::StringRef def) const {
  const AttrValue *a = lookup(name);
  return a && a->kind == AttrValue::Kind::String ? llvm::StringRef(a->s) : def;
}

llvm::ArrayRef<int64_t> AttrMap::getInts(llvm::StringRef name) const {
  const AttrValue *a = lookup(name);
  if (!a || a->kind != AttrValue::Kind::Ints)
    return {};
  return a->ints;
}

llvm::ArrayRef<double> AttrMap::getFloats(llvm::StringRef name) const {
  const AttrValue *a = lookup(name);
  if (!a || a->kind != AttrValue::Kind::Floats)
    return {};
  return a->floats;
}

} // namespace shardc::rt
