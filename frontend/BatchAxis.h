//===- BatchAxis.h - Where a value's samples run ----------------*- C++ -*-===//
//
// Dropout draws its mask from an element's index in the *global* batch, so
// that N data parallel ranks, each holding a slice of the batch, draw the
// masks one rank would (Shardc_DropoutOp). That index needs to know where
// the samples run in the dropout's input: rank r's tensor, flattened, is then
// slab r of every outer row of the global tensor.
//
// The samples need not fill an axis: PyTorch's attention merges them with
// other axes ([T, B, D] -> [T, B*H, hd] and [T*B, D] -> [T, B, D]). So the
// position is an axis and the factor of that axis that comes before the
// samples: an axis of size outer * B * inner holds, at index
// (p * B + s) * inner + j, element j of sample s in outer group p.
//
// The analysis follows the batch from the graph inputs (whose axis 0 is the
// batch: shardrun feeds samples along it) through the ops of @main:
// elementwise ops and ops that keep their input's layout keep the position,
// Transpose permutes it, Reshape finds the output axis that holds the
// samples (merging or splitting axes around them), MatMul/Gemm keep it on
// the rows, reductions and slices keep it when they leave it alone, and so
// on. Values computed from parameters and constants only have no batch.
// Where the position is lost (an op the analysis does not model, a reshape
// that splits the samples over axes or could put them on several axes, a
// reduction or product across the samples) the result is unknown, and the
// importer warns.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTEND_BATCHAXIS_H
#define SHARDC_FRONTEND_BATCHAXIS_H

#include "mlir/IR/Value.h"

#include <cstdint>
#include <optional>

namespace shardc {

/// The axis of a value that does not depend on the graph inputs (parameters
/// and constants only).
constexpr int64_t kNoBatchAxis = -1;

/// Where a value's samples run: along `axis`, whose size is
/// outer * B * inner for the micro-batch B, after `outer` groups (axis index
/// (p * B + s) * inner + j is sample s of group p). Flattened, the value is
/// [O, B * I] with O = (product of the sizes before `axis`) * outer and I
/// the elements of one sample in one outer row; the global batch's value of
/// N ranks is [O, N * B * I], of which rank r holds slab r of each row.
/// `axis` is kNoBatchAxis (and `outer` 1) for a value without a batch.
struct BatchPosition {
  int64_t axis = kNoBatchAxis;
  int64_t outer = 1;
  bool operator==(const BatchPosition &o) const {
    return axis == o.axis && outer == o.outer;
  }
  bool operator!=(const BatchPosition &o) const { return !(*this == o); }
};

/// Where the samples of `v` (a value of the entry function being built or
/// already built) run; nullopt when the analysis cannot tell. Then
/// `*singleSampleReshape`, if given, says whether that is because a reshape
/// with a micro-batch of 1 could have put the sample on several axes (a
/// micro-batch of 2 or more would tell).
std::optional<BatchPosition>
inferBatchPosition(mlir::Value v, bool *singleSampleReshape = nullptr);

} // namespace shardc

#endif // SHARDC_FRONTEND_BATCHAXIS_H
