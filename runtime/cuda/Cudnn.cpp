//===- Cudnn.cpp - Conv and BatchNorm through cuDNN -----------------------===//
//
// cuDNN's convolution and batch-normalization routines (its v7 API, which
// cuDNN 9 still ships) for the operands they take; everything else stays
// with the backend's own kernels (Conv.cu, Normalization.cu), which are also
// what runs with cuDNN off (shardrun --cudnn=false).
//
// What cuDNN takes here:
//  * Conv, ConvGradInput, ConvGradWeight in float32, float64, float16 or
//    bfloat16 with 1 to 3 spatial dimensions (a 1-D convolution is a 2-D one
//    with a unit dimension), symmetric padding (an asymmetric `pads` or
//    auto_pad SAME_* with an odd total pad runs the own kernels), no empty
//    dimension, every tensor under 2^31 elements. 16-bit operands are convolved
//    in their own type with products summed in float32 (compute type
//    CUDNN_DATA_FLOAT) on tensor cores, as the 16-bit cuBLAS products; a
//    16-bit convolution cuDNN declines runs the own kernels in float32 on
//    widened copies (Conv.cu). Conv's bias is added by cudnnAddTensor, in
//    float32 and rounded once more, as PyTorch adds it after cuDNN's
//    convolution.
//  * BatchNormalization and BatchNormGrad in training mode, float32 (as
//    PyTorch, float64 stays with the own kernels), with (BatchNormalization)
//    both running statistics or neither, updated with the unbiased batch
//    variance as PyTorch does (unbiased_var); BatchNormGrad with all three
//    gradients wanted. X of any rank is viewed as (N, C, spatial, 1), which is
//    what spatial batch normalization reduces over. Inference mode runs the own
//    kernels: there the op is one multiply-add per element.
//
// Results stay reproducible: the same geometry always runs the same
// algorithm. cuDNN's heuristics (not its timing search, whose choice varies
// between runs) are asked once per geometry and stream, and only
// algorithms cuDNN reports deterministic, that sum products directly
// (implicit or explicit GEMM, direct; no FFT or Winograd transform, whose
// rounding differs from a sum of products and which spread one NaN or
// infinity over a whole tile), within kWorkspaceBudget, qualify; without
// --tf32 the math is CUDNN_FMA_MATH (no tensor cores for float32), as the
// cuBLAS products use no TF32. Batch normalization uses
// CUDNN_BATCHNORM_SPATIAL, not SPATIAL_PERSISTENT, whose faster reduction
// can overflow on large values. A shape or parameter cuDNN declines
// (CUDNN_STATUS_NOT_SUPPORTED or BAD_PARAM) runs the own kernel; any other
// cuDNN failure is the op's error.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Cudnn.h"
#include "runtime/cuda/CudaBackend.h"

#include <climits>
#include <cudnn.h>

namespace shardc::rt::cuda {

namespace {

using llvm::Error;
using llvm::Expected;

/// Most scratch one convolution may ask for; algorithms needing more do not
/// qualify.
constexpr size_t kWorkspaceBudget = size_t(256) << 20;

/// The largest batch cuDNN's batch normalization is given.
constexpr int64_t kMaxBatchNormBatch = 880801;

/// Whether cuDNN declined the operands (a shape or parameter it does not
/// support) rather than failing: then the own kernel runs instead.
bool declined(cudnnStatus_t status) {
  int category = CUDNN_STATUS_CATEGORY(status);
  return category == CUDNN_STATUS_NOT_SUPPORTED ||
         category == CUDNN_STATUS_BAD_PARAM;
}

/// In a function returning Expected<bool>: `call`, returning false (the
/// own kernel runs) when cuDNN declines and an error when it fails.
#define SHARDC_DNN_OR_DECLINE(call)                                            \
  if (cudnnStatus_t status_ = (call); status_ != CUDNN_STATUS_SUCCESS) {       \
    if (declined(status_))                                                     \
      return false;                                                            \
    return checkDnn(status_, #call);                                           \
  }

/// An owned cuDNN descriptor of type D, destroyed with `destroy`.
template <typename D, cudnnStatus_t (*destroy)(D)> struct Descriptor {
  D handle = nullptr;
  Descriptor() = default;
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;
  ~Descriptor() {
    if (handle)
      destroy(handle);
  }
};
using TensorDesc =
    Descriptor<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc =
    Descriptor<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;

/// cuDNN's element and compute type for `t`, if it takes it.
bool dataTypeOf(DType t, cudnnDataType_t &type) {
  switch (t) {
  case DType::F32:
    type = CUDNN_DATA_FLOAT;
    return true;
  case DType::F64:
    type = CUDNN_DATA_DOUBLE;
    return true;
  case DType::F16:
    type = CUDNN_DATA_HALF;
    return true;
  case DType::BF16:
    type = CUDNN_DATA_BFLOAT16;
    return true;
  default:
    return false;
  }
}

/// Whether cuDNN data of `type` is summed in float32 (16-bit floats).
bool is16Bit(cudnnDataType_t type) {
  return type == CUDNN_DATA_HALF || type == CUDNN_DATA_BFLOAT16;
}

/// The scaling factors 1 and 0 in the type cuDNN reads them as: double for
/// double data, else float (16-bit data included).
struct Scalars {
  float f1 = 1.0f, f0 = 0.0f;
  double d1 = 1.0, d0 = 0.0;
  bool isDouble;
  explicit Scalars(DType t) : isDouble(t == DType::F64) {}
  const void *one() const {
    return isDouble ? static_cast<const void *>(&d1) : &f1;
  }
  const void *zero() const {
    return isDouble ? static_cast<const void *>(&d0) : &f0;
  }
};

bool fitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

/// The three tensors and the convolution of one Conv geometry, as cuDNN
/// describes them, and the key its algorithm choice is cached under.
struct ConvDescriptors {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::vector<int64_t> key;
};

/// Fills `d` for `g` with element type `t`, or returns false when cuDNN
/// does not take the geometry (the caller's own kernel runs).
Expected<bool> describeConv(const KernelContext &ctx,
                            const cpu::ConvGeometry &g, DType t,
                            ConvDescriptors &d) {
  if (!streamOf(ctx).backendOptions().cudnn || !dataTypeOf(t, d.type))
    return false;
  size_t ns = g.inShape.size();
  if (ns < 1 || ns > 3 || g.w.padBegin != g.w.padEnd)
    return false;
  // A 1-D convolution is a 2-D one over (L, 1).
  size_t dims = std::max<size_t>(ns, 2);
  llvm::SmallVector<int, 5> xDims, wDims, yDims;
  llvm::SmallVector<int, 3> pads, strides, dilations;
  int64_t xCount = g.batch * g.channels, wCount = g.m * g.cg,
          yCount = g.batch * g.m;
  auto push = [](llvm::SmallVector<int, 5> &v, int64_t n) {
    if (!fitsInt(n) || n == 0)
      return false;
    v.push_back(static_cast<int>(n));
    return true;
  };
  if (!push(xDims, g.batch) || !push(xDims, g.channels) || !push(wDims, g.m) ||
      !push(wDims, g.cg) || !push(yDims, g.batch) || !push(yDims, g.m))
    return false;
  for (size_t s = 0; s < dims; ++s) {
    bool real = s < ns;
    int64_t in = real ? g.inShape[s] : 1, out = real ? g.outShape[s] : 1,
            k = real ? g.w.kernel[s] : 1;
    if (!push(xDims, in) || !push(wDims, k) || !push(yDims, out))
      return false;
    xCount *= in;
    wCount *= k;
    yCount *= out;
    int64_t pad = real ? g.w.padBegin[s] : 0,
            stride = real ? g.w.strides[s] : 1,
            dilation = real ? g.w.dilations[s] : 1;
    if (!fitsInt(pad) || !fitsInt(stride) || !fitsInt(dilation))
      return false;
    pads.push_back(static_cast<int>(pad));
    strides.push_back(static_cast<int>(stride));
    dilations.push_back(static_cast<int>(dilation));
  }
  if (!fitsInt(xCount) || !fitsInt(wCount) || !fitsInt(yCount) ||
      !fitsInt(g.group))
    return false;
  bool tf32 = streamOf(ctx).backendOptions().tf32;
  // Float32 without --tf32: no tensor cores. 16-bit data: tensor cores,
  // summing in float32.
  if (is16Bit(d.type))
    d.math = CUDNN_TENSOR_OP_MATH;
  else
    d.math = d.type == CUDNN_DATA_FLOAT && !tf32 ? CUDNN_FMA_MATH
                                                 : CUDNN_DEFAULT_MATH;
  cudnnDataType_t computeType = is16Bit(d.type) ? CUDNN_DATA_FLOAT : d.type;
  auto packed = [](llvm::ArrayRef<int> shape) {
    llvm::SmallVector<int, 5> strides(shape.size(), 1);
    for (size_t i = shape.size() - 1; i > 0; --i)
      strides[i - 1] = strides[i] * shape[i];
    return strides;
  };
  int rank = static_cast<int>(xDims.size());
  SHARDC_DNN_OR_DECLINE(cudnnCreateTensorDescriptor(&d.x.handle));
  SHARDC_DNN_OR_DECLINE(cudnnSetTensorNdDescriptor(
      d.x.handle, d.type, rank, xDims.data(), packed(xDims).data()));
  SHARDC_DNN_OR_DECLINE(cudnnCreateTensorDescriptor(&d.y.handle));
  SHARDC_DNN_OR_DECLINE(cudnnSetTensorNdDescriptor(
      d.y.handle, d.type, rank, yDims.data(), packed(yDims).data()));
  SHARDC_DNN_OR_DECLINE(cudnnCreateFilterDescriptor(&d.w.handle));
  SHARDC_DNN_OR_DECLINE(cudnnSetFilterNdDescriptor(
      d.w.handle, d.type, CUDNN_TENSOR_NCHW, rank, wDims.data()));
  SHARDC_DNN_OR_DECLINE(cudnnCreateConvolutionDescriptor(&d.conv.handle));
  SHARDC_DNN_OR_DECLINE(cudnnSetConvolutionNdDescriptor(
      d.conv.handle, static_cast<int>(dims), pads.data(), strides.data(),
      dilations.data(), CUDNN_CROSS_CORRELATION, computeType));
  SHARDC_DNN_OR_DECLINE(
      cudnnSetConvolutionGroupCount(d.conv.handle, static_cast<int>(g.group)));
  SHARDC_DNN_OR_DECLINE(cudnnSetConvolutionMathType(d.conv.handle, d.math));
  // cuDNN must see the output shape the CPU kernels computed (it always
  // should; a difference means a geometry cuDNN reads otherwise).
  llvm::SmallVector<int, 5> expect(rank);
  SHARDC_DNN_OR_DECLINE(cudnnGetConvolutionNdForwardOutputDim(
      d.conv.handle, d.x.handle, d.w.handle, rank, expect.data()));
  if (llvm::ArrayRef<int>(expect) != llvm::ArrayRef<int>(yDims))
    return false;
  d.key.assign({static_cast<int64_t>(t), tf32, g.group});
  for (auto *v : {&xDims, &wDims, &yDims})
    d.key.insert(d.key.end(), v->begin(), v->end());
  for (auto *v : {&pads, &strides, &dilations})
    d.key.insert(d.key.end(), v->begin(), v->end());
  return true;
}

/// Whether one of cuDNN's heuristic results qualifies (see the file
/// comment): it runs, is deterministic, sums products directly, keeps to
/// the math type asked for (no tensor-core math without --tf32) and to
/// kWorkspaceBudget.
template <typename Perf>
bool qualifies(const Perf &p, bool direct, cudnnMathType_t asked) {
  bool tensorCores = p.mathType == CUDNN_TENSOR_OP_MATH ||
                     p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  return p.status == CUDNN_STATUS_SUCCESS &&
         p.determinism == CUDNN_DETERMINISTIC && direct &&
         !(asked == CUDNN_FMA_MATH && tensorCores) &&
         p.memory <= kWorkspaceBudget;
}

/// The algorithm for key `key` (its first element the direction), asking
/// `heuristics` (which fills an array of Perf and a count) the first time.
template <typename Perf, typename MaxCount, typename Heuristics,
          typename Direct>
Expected<ConvAlgorithm> chooseAlgorithm(const KernelContext &ctx,
                                        cudnnHandle_t h, ConvDescriptors &d,
                                        int direction, MaxCount maxCount,
                                        Heuristics heuristics, Direct direct) {
  std::vector<int64_t> key = d.key;
  key.insert(key.begin(), direction);
  auto &cache = streamOf(ctx).convAlgorithms;
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  ConvAlgorithm choice;
  int count = 0;
  if (Error err = checkDnn(maxCount(h, &count),
                           "cudnnGetConvolution*AlgorithmMaxCount"))
    return std::move(err);
  std::vector<Perf> perfs(std::max(count, 1));
  int returned = 0;
  cudnnStatus_t status =
      heuristics(perfs.data(), static_cast<int>(perfs.size()), &returned);
  if (declined(status)) {
    cache.emplace(std::move(key), choice);
    return choice;
  }
  if (Error err = checkDnn(status, "cudnnGetConvolution*Algorithm_v7"))
    return std::move(err);
  for (int i = 0; i < returned; ++i) {
    if (qualifies(perfs[i], direct(perfs[i].algo), d.math)) {
      choice.algo = static_cast<int>(perfs[i].algo);
      choice.math = static_cast<int>(perfs[i].mathType);
      choice.workspace = perfs[i].memory;
      break;
    }
  }
  cache.emplace(std::move(key), choice);
  return choice;
}

/// The result of running direction `direction`'s chosen algorithm: true,
/// or false when cuDNN declined after all (then never asked again for this
/// geometry: the own kernel runs), or the error.
Expected<bool> ran(const KernelContext &ctx, const ConvDescriptors &d,
                   int direction, cudnnStatus_t status, const char *what) {
  if (status == CUDNN_STATUS_SUCCESS)
    return true;
  if (!declined(status))
    return checkDnn(status, what);
  std::vector<int64_t> key = d.key;
  key.insert(key.begin(), direction);
  streamOf(ctx).convAlgorithms[key] = ConvAlgorithm();
  return false;
}

/// The chosen algorithm's workspace and math type applied: `ws` receives
/// the scratch (null when it needs none).
Error prepare(const KernelContext &ctx, ConvDescriptors &d,
              const ConvAlgorithm &a, void *&ws) {
  // With --tf32 the algorithm runs in the math type it was chosen for;
  // without, CUDNN_FMA_MATH stays.
  if (d.math != CUDNN_FMA_MATH)
    if (Error err =
            checkDnn(cudnnSetConvolutionMathType(
                         d.conv.handle, static_cast<cudnnMathType_t>(a.math)),
                     "cudnnSetConvolutionMathType"))
      return err;
  ws = nullptr;
  if (a.workspace == 0)
    return Error::success();
  Expected<void *> scratch = streamOf(ctx).scratch(a.workspace);
  if (!scratch)
    return scratch.takeError();
  ws = *scratch;
  return Error::success();
}

} // namespace

namespace {

/// One convolution direction through cuDNN: describes `g`, chooses the
/// algorithm (`maxCount` and `heuristics(h, d, perfs, n, returned)` ask
/// cuDNN; `direct(algo)` says which algorithms sum products directly), and
/// runs it with `run(h, d, algo, workspace, bytes, one, zero)`.
template <typename Perf, typename MaxCount, typename Heuristics,
          typename Direct, typename Run>
Expected<bool> runConv(const KernelContext &ctx, const cpu::ConvGeometry &g,
                       DType type, int direction, MaxCount maxCount,
                       Heuristics heuristics, Direct direct, Run run,
                       const char *what) {
  ConvDescriptors d;
  Expected<bool> ok = describeConv(ctx, g, type, d);
  if (!ok || !*ok)
    return ok;
  Expected<cudnnHandle_t> h = streamOf(ctx).dnn();
  if (!h)
    return h.takeError();
  Expected<ConvAlgorithm> a = chooseAlgorithm<Perf>(
      ctx, *h, d, direction, maxCount,
      [&](Perf *perfs, int n, int *returned) {
        return heuristics(*h, d, perfs, n, returned);
      },
      direct);
  if (!a)
    return a.takeError();
  if (a->algo < 0)
    return false;
  void *ws = nullptr;
  if (Error err = prepare(ctx, d, *a, ws))
    return std::move(err);
  Scalars s(type);
  return ran(ctx, d, direction,
             run(*h, d, a->algo, ws, a->workspace, s.one(), s.zero()), what);
}

} // namespace

Expected<bool> cudnnConv(const KernelContext &ctx, const cpu::ConvGeometry &g,
                         const TensorView &x, const TensorView &w,
                         const TensorView &y) {
  return runConv<cudnnConvolutionFwdAlgoPerf_t>(
      ctx, g, x.dtype, 0, cudnnGetConvolutionForwardAlgorithmMaxCount,
      [](cudnnHandle_t h, ConvDescriptors &d,
         cudnnConvolutionFwdAlgoPerf_t *perfs, int n, int *returned) {
        return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.handle, d.w.handle,
                                                      d.conv.handle, d.y.handle,
                                                      n, returned, perfs);
      },
      [](cudnnConvolutionFwdAlgo_t algo) {
        return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
      },
      [&](cudnnHandle_t h, ConvDescriptors &d, int algo, void *ws, size_t bytes,
          const void *one, const void *zero) {
        return cudnnConvolutionForward(
            h, one, d.x.handle, x.data, d.w.handle, w.data, d.conv.handle,
            static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws, bytes, zero,
            d.y.handle, y.data);
      },
      "cudnnConvolutionForward");
}

Expected<bool> cudnnConvGradInput(const KernelContext &ctx,
                                  const cpu::ConvGeometry &g,
                                  const TensorView &dy, const TensorView &w,
                                  const TensorView &dx) {
  return runConv<cudnnConvolutionBwdDataAlgoPerf_t>(
      ctx, g, dy.dtype, 1, cudnnGetConvolutionBackwardDataAlgorithmMaxCount,
      [](cudnnHandle_t h, ConvDescriptors &d,
         cudnnConvolutionBwdDataAlgoPerf_t *perfs, int n, int *returned) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(
            h, d.w.handle, d.y.handle, d.conv.handle, d.x.handle, n, returned,
            perfs);
      },
      [](cudnnConvolutionBwdDataAlgo_t algo) {
        return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
      },
      [&](cudnnHandle_t h, ConvDescriptors &d, int algo, void *ws, size_t bytes,
          const void *one, const void *zero) {
        return cudnnConvolutionBackwardData(
            h, one, d.w.handle, w.data, d.y.handle, dy.data, d.conv.handle,
            static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws, bytes, zero,
            d.x.handle, dx.data);
      },
      "cudnnConvolutionBackwardData");
}

Expected<bool> cudnnConvGradWeight(const KernelContext &ctx,
                                   const cpu::ConvGeometry &g,
                                   const TensorView &dy, const TensorView &x,
                                   const TensorView &dw) {
  return runConv<cudnnConvolutionBwdFilterAlgoPerf_t>(
      ctx, g, dy.dtype, 2, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount,
      [](cudnnHandle_t h, ConvDescriptors &d,
         cudnnConvolutionBwdFilterAlgoPerf_t *perfs, int n, int *returned) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            h, d.x.handle, d.y.handle, d.conv.handle, d.w.handle, n, returned,
            perfs);
      },
      [](cudnnConvolutionBwdFilterAlgo_t algo) {
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
      },
      [&](cudnnHandle_t h, ConvDescriptors &d, int algo, void *ws, size_t bytes,
          const void *one, const void *zero) {
        return cudnnConvolutionBackwardFilter(
            h, one, d.x.handle, x.data, d.y.handle, dy.data, d.conv.handle,
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws, bytes, zero,
            d.w.handle, dw.data);
      },
      "cudnnConvolutionBackwardFilter");
}

Expected<bool> cudnnAddBias(const KernelContext &ctx, const TensorView &b,
                            const TensorView &y) {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  if (!streamOf(ctx).backendOptions().cudnn || !dataTypeOf(y.dtype, type) ||
      y.rank() < 2)
    return false;
  int64_t spatial = 1;
  for (int64_t d : llvm::ArrayRef<int64_t>(y.shape).drop_front(2))
    spatial *= d;
  int64_t batch = y.shape[0], channels = y.shape[1];
  if (batch == 0 || channels == 0 || spatial == 0 || !fitsInt(batch) ||
      !fitsInt(channels) || !fitsInt(spatial) ||
      !fitsInt(batch * channels * spatial))
    return false;
  // Y viewed as (N, M, spatial, 1), the bias as (1, M, 1, 1).
  TensorDesc yDesc, bDesc;
  SHARDC_DNN_OR_DECLINE(cudnnCreateTensorDescriptor(&yDesc.handle));
  SHARDC_DNN_OR_DECLINE(cudnnSetTensor4dDescriptor(
      yDesc.handle, CUDNN_TENSOR_NCHW, type, static_cast<int>(batch),
      static_cast<int>(channels), static_cast<int>(spatial), 1));
  SHARDC_DNN_OR_DECLINE(cudnnCreateTensorDescriptor(&bDesc.handle));
  SHARDC_DNN_OR_DECLINE(
      cudnnSetTensor4dDescriptor(bDesc.handle, CUDNN_TENSOR_NCHW, type, 1,
                                 static_cast<int>(channels), 1, 1));
  Expected<cudnnHandle_t> h = streamOf(ctx).dnn();
  if (!h)
    return h.takeError();
  Scalars s(y.dtype);
  // Y = 1 * B + 1 * Y.
  SHARDC_DNN_OR_DECLINE(cudnnAddTensor(*h, s.one(), bDesc.handle, b.data,
                                       s.one(), yDesc.handle, y.data));
  return true;
}

namespace {

/// X viewed as (N, C, spatial, 1) and the per-channel parameter shape
/// cuDNN derives from it; false when cuDNN does not take the operands.
struct BatchNormDescriptors {
  TensorDesc x, param;
};

Expected<bool> describeBatchNorm(const KernelContext &ctx,
                                 const cpu::BatchNormGeometry &g, DType t,
                                 BatchNormDescriptors &d) {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  if (!streamOf(ctx).backendOptions().cudnn || !g.training || t != DType::F32 ||
      g.epsilon < CUDNN_BN_MIN_EPSILON)
    return false;
  // PyTorch keeps batches over 880801 from cuDNN's batch normalization,
  // which fails on them.
  if (g.batch == 0 || g.channels == 0 || g.spatial == 0 ||
      g.batch > kMaxBatchNormBatch || !fitsInt(g.batch) ||
      !fitsInt(g.channels) || !fitsInt(g.spatial) ||
      !fitsInt(g.batch * g.channels * g.spatial))
    return false;
  SHARDC_DNN_OR_DECLINE(cudnnCreateTensorDescriptor(&d.x.handle));
  SHARDC_DNN_OR_DECLINE(cudnnSetTensor4dDescriptor(
      d.x.handle, CUDNN_TENSOR_NCHW, type, static_cast<int>(g.batch),
      static_cast<int>(g.channels), static_cast<int>(g.spatial), 1));
  SHARDC_DNN_OR_DECLINE(cudnnCreateTensorDescriptor(&d.param.handle));
  SHARDC_DNN_OR_DECLINE(cudnnDeriveBNTensorDescriptor(
      d.param.handle, d.x.handle, CUDNN_BATCHNORM_SPATIAL));
  return true;
}

} // namespace

Expected<bool> cudnnBatchNorm(const KernelContext &ctx,
                              const cpu::BatchNormGeometry &g) {
  const TensorView &x = ctx.inputs[0];
  const TensorView &y = ctx.outputs[0];
  // cuDNN updates both running statistics or neither, the variance with
  // the unbiased estimate (undefined for one value per channel).
  // A synchronized BatchNorm normalizes with given global statistics,
  // which cuDNN's training forward does not take.
  if (g.moments || g.hasRunningMean != g.hasRunningVar ||
      (g.hasRunningMean && (!g.unbiasedVar || g.batch * g.spatial < 2)) ||
      x.data == y.data)
    return false;
  BatchNormDescriptors d;
  Expected<bool> ok = describeBatchNorm(ctx, g, x.dtype, d);
  if (!ok || !*ok)
    return ok;
  Expected<cudnnHandle_t> h = streamOf(ctx).dnn();
  if (!h)
    return h.takeError();
  cudaStream_t stream = cudaStreamOf(ctx);
  void *runMean = nullptr, *runVar = nullptr;
  if (g.hasRunningMean) {
    // cuDNN updates the running statistics in place: they start as the
    // inputs. running = (1 - factor) running + factor batch, where ONNX's
    // is momentum running + (1 - momentum) batch.
    runMean = ctx.outputs[1].data;
    runVar = ctx.outputs[2].data;
    const TensorView &inMean = ctx.inputs[3], &inVar = ctx.inputs[4];
    if (runMean != inMean.data)
      if (Error err =
              check(cudaMemcpyAsync(runMean, inMean.data, inMean.bytes(),
                                    cudaMemcpyDeviceToDevice, stream),
                    "cudaMemcpyAsync (running mean)"))
        return std::move(err);
    if (runVar != inVar.data)
      if (Error err = check(cudaMemcpyAsync(runVar, inVar.data, inVar.bytes(),
                                            cudaMemcpyDeviceToDevice, stream),
                            "cudaMemcpyAsync (running variance)"))
        return std::move(err);
  }
  Scalars s(x.dtype);
  // Declined, the own kernel rewrites every output, the running statistics
  // copied above included.
  SHARDC_DNN_OR_DECLINE(cudnnBatchNormalizationForwardTraining(
      *h, CUDNN_BATCHNORM_SPATIAL, s.one(), s.zero(), d.x.handle, x.data,
      d.x.handle, y.data, d.param.handle, ctx.inputs[1].data,
      ctx.inputs[2].data, 1.0 - g.momentum, runMean, runVar, g.epsilon, nullptr,
      nullptr));
  return true;
}

Expected<bool> cudnnBatchNormGrad(const KernelContext &ctx,
                                  const cpu::BatchNormGeometry &g) {
  const TensorView &dy = ctx.inputs[0];
  const TensorView &x = ctx.inputs[1];
  if (g.moments || !ctx.hasOutput(0) || !ctx.hasOutput(1) ||
      !ctx.hasOutput(2) || ctx.outputs[0].data == dy.data ||
      ctx.outputs[0].data == x.data)
    return false;
  BatchNormDescriptors d;
  Expected<bool> ok = describeBatchNorm(ctx, g, x.dtype, d);
  if (!ok || !*ok)
    return ok;
  Expected<cudnnHandle_t> h = streamOf(ctx).dnn();
  if (!h)
    return h.takeError();
  // No saved statistics: cuDNN computes the batch's from X, as the own
  // kernel does.
  Scalars s(x.dtype);
  SHARDC_DNN_OR_DECLINE(cudnnBatchNormalizationBackward(
      *h, CUDNN_BATCHNORM_SPATIAL, s.one(), s.zero(), s.one(), s.zero(),
      d.x.handle, x.data, d.x.handle, dy.data, d.x.handle, ctx.outputs[0].data,
      d.param.handle, ctx.inputs[2].data, ctx.outputs[1].data,
      ctx.outputs[2].data, g.epsilon, nullptr, nullptr));
  return true;
}

} // namespace shardc::rt::cuda
