//===- BatchAxis.h - Which axis of a value runs over the samples -*- C++
//-*-===//
//
// Dropout draws its mask from an element's index in the *global* batch, so
// that N data parallel ranks, each holding a slice of the batch, draw the
// masks one rank would (Shardc_DropoutOp). That index needs the axis of the
// dropout's input along which the samples run: rank r's tensor is then slab
// r of the global tensor along that axis.
//
// The analysis follows the batch from the graph inputs (whose axis 0 is the
// batch: shardrun feeds samples along it) through the ops of @main:
// elementwise ops and ops that keep their input's layout keep the axis,
// Transpose permutes it, Reshape keeps it where the samples stay contiguous
// groups along one output axis, MatMul/Gemm keep it on the rows, reductions
// and slices keep it when they leave it alone, and so on. Values computed
// from parameters and constants only have no batch axis. Where the axis is
// lost (an op the analysis does not model, a reshape or a reduction across
// the samples) the result is unknown, and the importer warns.
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_FRONTEND_BATCHAXIS_H
#define SHARDC_FRONTEND_BATCHAXIS_H

#include "mlir/IR/Value.h"

#include <cstdint>
#include <optional>

namespace shardc {

/// The result of inferBatchAxis for a value that does not depend on the
/// graph inputs (parameters and constants only).
constexpr int64_t kNoBatchAxis = -1;

/// The axis of `v` (a value of the entry function being built or already
/// built) along which the batch's samples run, in groups of equal size and in
/// order; kNoBatchAxis when `v` does not depend on the batch; nullopt when
/// the analysis cannot tell.
std::optional<int64_t> inferBatchAxis(mlir::Value v);

} // namespace shardc

#endif // SHARDC_FRONTEND_BATCHAXIS_H
