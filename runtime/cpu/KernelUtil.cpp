//===- KernelUtil.cpp - Helpers shared by the CPU kernels -----------------===//
#include "runtime/cpu/KernelUtil.h"

namespace shardc::rt::cpu {

llvm::Error unsupportedType(const KernelContext &ctx, DType t,
                            const llvm::Twine &operand) {
  return ctx.error("unsupported element type " + dtypeName(t) + " for " +
                   operand);
}

llvm::Error requireInput(const KernelContext &ctx, size_t i,
                         llvm::StringRef name) {
  if (!ctx.hasInput(i))
    return ctx.error("missing input " + llvm::Twine(i) + " ('" + name + "')");
  const TensorView &v = ctx.inputs[i];
  if (!v.data && v.numel() != 0)
    return ctx.error("input '" + name + "' has no data");
  return llvm::Error::success();
}

llvm::Error requireOutput(const KernelContext &ctx, size_t i,
                          llvm::StringRef name) {
  if (!ctx.hasOutput(i))
    return ctx.error("missing output " + llvm::Twine(i) + " ('" + name + "')");
  const TensorView &v = ctx.outputs[i];
  if (!v.data && v.numel() != 0)
    return ctx.error("output '" + name + "' has no data");
  return llvm::Error::success();
}

llvm::Error requireType(const KernelContext &ctx, const TensorView &view,
                        DType t, llvm::StringRef name) {
  if (view.dtype == t)
    return llvm::Error::success();
  return ctx.error("'" + name + "' has element type " + dtypeName(view.dtype) +
                   ", expected " + dtypeName(t));
}

llvm::Error requireShape(const KernelContext &ctx, const TensorView &view,
                         llvm::ArrayRef<int64_t> shape, llvm::StringRef name) {
  if (llvm::ArrayRef<int64_t>(view.shape) == shape)
    return llvm::Error::success();
  return ctx.error("'" + name + "' has shape " + shapeToString(view.shape) +
                   ", expected " + shapeToString(shape));
}

llvm::Error readAxis(const KernelContext &ctx, int64_t rank, int64_t def,
                     int64_t &axis) {
  axis = ctx.attrs.getInt("axis", def);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return ctx.error("axis " + llvm::Twine(ctx.attrs.getInt("axis", def)) +
                     " is out of range for rank " + llvm::Twine(rank));
  return llvm::Error::success();
}

llvm::Error requireNumel(const KernelContext &ctx, const TensorView &view,
                         int64_t n, llvm::StringRef name) {
  if (view.numel() == n)
    return llvm::Error::success();
  return ctx.error("'" + name + "' has shape " + shapeToString(view.shape) +
                   " with " + llvm::Twine(view.numel()) +
                   " elements, expected " + llvm::Twine(n));
}

int64_t product(llvm::ArrayRef<int64_t> shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i)
    p *= shape[i];
  return p;
}

llvm::SmallVector<int64_t, 6> rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 6> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

bool broadcastStrides(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out,
                      llvm::SmallVectorImpl<int64_t> &strides) {
  strides.assign(out.size(), 0);
  if (in.size() > out.size())
    return false;
  size_t lead = out.size() - in.size();
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(in.size()) - 1; d >= 0; --d) {
    int64_t o = out[lead + d];
    if (in[d] == o && o != 1) {
      strides[lead + d] = stride;
    } else if (in[d] != 1 && in[d] != o) {
      return false;
    }
    stride *= in[d];
  }
  return true;
}

llvm::Error broadcastTo(const KernelContext &ctx, const TensorView &in,
                        llvm::ArrayRef<int64_t> out, llvm::StringRef name,
                        llvm::SmallVectorImpl<int64_t> &strides) {
  if (broadcastStrides(in.shape, out, strides))
    return llvm::Error::success();
  return ctx.error("'" + name + "' of shape " + shapeToString(in.shape) +
                   " does not broadcast to " + shapeToString(out));
}

/// The largest kernel size, stride, dilation or padding: window arithmetic
/// (dilation * (kernel - 1) + 1, input + pads) then stays inside 64 bits.
constexpr int64_t kMaxWindowAttr = int64_t(1) << 31;

llvm::Error readWindowAttrs(const KernelContext &ctx, int64_t numSpatial,
                            llvm::ArrayRef<int64_t> weightKernel,
                            bool useWeightKernel, WindowAttrs &w) {
  size_t n = static_cast<size_t>(numSpatial);
  llvm::ArrayRef<int64_t> kernel = ctx.attrs.getInts("kernel_shape");
  if (useWeightKernel) {
    if (!kernel.empty() && kernel != weightKernel)
      return ctx.error("kernel_shape " + shapeToString(kernel) +
                       " does not match the weights' spatial shape " +
                       shapeToString(weightKernel));
    kernel = weightKernel;
  }
  if (kernel.size() != n)
    return ctx.error("kernel_shape " + shapeToString(kernel) + " must have " +
                     llvm::Twine(numSpatial) + " entries");
  w.kernel.assign(kernel.begin(), kernel.end());

  auto readList = [&](llvm::StringRef name, size_t count, int64_t def,
                      int64_t minValue,
                      llvm::SmallVectorImpl<int64_t> &out) -> llvm::Error {
    llvm::ArrayRef<int64_t> v = ctx.attrs.getInts(name);
    if (v.empty()) {
      out.assign(count, def);
      return llvm::Error::success();
    }
    if (v.size() != count)
      return ctx.error(name + " " + shapeToString(v) + " must have " +
                       llvm::Twine(count) + " entries");
    for (int64_t x : v)
      if (x < minValue || x > kMaxWindowAttr)
        return ctx.error(name + " " + shapeToString(v) +
                         " has an entry outside [" + llvm::Twine(minValue) +
                         ", 2^31]");
    out.assign(v.begin(), v.end());
    return llvm::Error::success();
  };
  for (int64_t k : w.kernel)
    if (k < 1 || k > kMaxWindowAttr)
      return ctx.error("kernel_shape " + shapeToString(w.kernel) +
                       " has an entry outside [1, 2^31]");
  SHARDC_CPU_TRY(readList("strides", n, 1, 1, w.strides));
  SHARDC_CPU_TRY(readList("dilations", n, 1, 1, w.dilations));
  llvm::SmallVector<int64_t, 6> pads;
  SHARDC_CPU_TRY(readList("pads", 2 * n, 0, 0, pads));
  w.padBegin.assign(pads.begin(), pads.begin() + n);
  w.padEnd.assign(pads.begin() + n, pads.end());
  return llvm::Error::success();
}

} // namespace shardc::rt::cpu
