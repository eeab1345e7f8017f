//===- CostModel.h - The predicted time of a plan's step --------*- C++ -*-===//
//
// The compiler's estimate of one step's time per rank, before any run: the
// plan's ops replayed on three timelines, as the executor runs them.
//
//   compute   kernels, in plan order. A kernel with flops (Op.flops: matrix
//             products and convolutions) takes max(flops / F, bytes / B);
//             any other kernel bytes / B, its bytes being what it reads and
//             writes; each adds a fixed overhead. Views cost nothing (they
//             are no ops).
//   links     collectives, one at a time in plan order, each starting when
//             the compute timeline reaches its start op and the previous
//             collective is done: latency + bytes sent / link bandwidth, the
//             bytes a ring algorithm sends (sentBytes).
//   tier      offload transfers, likewise: latency + bytes / tier bandwidth.
//
// A CollectiveWait holds the compute timeline until its start is done; that
// hold is the exposed communication or transfer time. The step ends when all
// three timelines are done. Everything the model knows of the machine is in
// MachineModel; its defaults are measured on the CPU backend
// (bench/cost_model_bench.py refits them from a trace).
//
//===----------------------------------------------------------------------===//
#ifndef SHARDC_PLAN_COSTMODEL_H
#define SHARDC_PLAN_COSTMODEL_H

#include "plan.pb.h"
#include "plan/AsyncOps.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace shardc::plan {

/// What the cost model knows of the machine one rank runs on. The defaults
/// are one rank of the CPU backend, fitted by bench/cost_model_bench.py (4
/// ranks of the 50 M-parameter GPT at stage 3 on a 2-core machine: each rank
/// has about half a core, and MPI moves bytes through shared memory); the
/// tier's rate is what bench/offload_bench.py measured for a tier file in the
/// page cache.
struct MachineModel {
  /// Floating-point operations per second of a matrix product or
  /// convolution kernel.
  double flopsPerSecond = 1.5e10;
  /// Bytes per second a memory-bound kernel reads and writes.
  double memoryBytesPerSecond = 8.0e9;
  /// Fixed time of every kernel (dispatch, threading, launch).
  double kernelSeconds = 3.0e-7;
  /// Bytes per second one rank sends in a collective, and a collective's
  /// fixed time.
  double linkBytesPerSecond = 8.3e8;
  double linkSeconds = 2.0e-5;
  /// Bytes per second between memory and the offload tier (reads and
  /// writes share it), and a transfer's fixed time.
  double tierBytesPerSecond = 2.0e9;
  double tierSeconds = 5.0e-5;

  /// One rank of the CPU backend: the defaults.
  static MachineModel cpu() { return MachineModel(); }

  /// Overrides fields from "key=value,key=value" (keys: flops, memory,
  /// kernel, link, link-latency, tier, tier-latency; rates in per second,
  /// times in seconds, each positive).
  llvm::Error parseOverrides(llvm::StringRef text);

  /// "F=4.0e10 flop/s, memory 5.0e9 B/s, ..." for messages.
  std::string describe() const;

  /// A kernel's time: the fixed overhead plus max(flops / F, bytes / B),
  /// `bytes` being what it reads and writes.
  double kernelTime(uint64_t flops, uint64_t bytes) const {
    return kernelSeconds +
           std::max(static_cast<double>(flops) / flopsPerSecond,
                    static_cast<double>(bytes) / memoryBytesPerSecond);
  }
  /// A collective's time: latency plus the bytes a rank sends over the
  /// link bandwidth.
  double collectiveTime(uint64_t sentBytes) const {
    return linkSeconds + static_cast<double>(sentBytes) / linkBytesPerSecond;
  }
};

/// The predicted time of one step and where it goes.
struct StepCost {
  /// The step: when the last of the three timelines is done.
  double seconds = 0;
  /// Kernel time, and the part of it that recomputes activations.
  double computeSeconds = 0;
  double recomputeSeconds = 0;
  /// Time the links and the tier are busy.
  double commSeconds = 0;
  double tierSeconds = 0;
  /// Time the compute timeline waits for collectives and for transfers
  /// (the part of commSeconds and tierSeconds not hidden behind compute).
  double commWaitSeconds = 0;
  double tierWaitSeconds = 0;
  /// What the kernels do: their count, the flops of those with flops, the
  /// bytes the others read and write (bench/cost_model_bench.py divides
  /// measured kernel times by these to fit a MachineModel).
  uint64_t kernels = 0;
  uint64_t flops = 0;
  uint64_t kernelBytes = 0;
  /// Bytes one rank sends over collectives, and moves to and from the tier.
  uint64_t sentBytes = 0;
  uint64_t tierBytes = 0;
};

/// The bytes one rank sends for collective start `op` of `plan`, as ring
/// algorithms move them: an all-gather sends the rank's shard to n - 1
/// ranks, a reduce-scatter (n - 1) / n of its input, an all-reduce twice
/// that, n being the ranks it spans (its `world_size` attribute, or the
/// plan's). 0 for any other op.
uint64_t sentBytes(const Plan &plan, const Op &op);
/// The same for a collective of `kind` on `bytes` of input over `ranks`.
uint64_t ringSentBytes(CollectiveOpKind kind, uint64_t bytes, uint64_t ranks);

/// Replays `plan`'s step on `machine`.
StepCost estimateStep(const Plan &plan, const MachineModel &machine);

} // namespace shardc::plan

#endif // SHARDC_PLAN_COSTMODEL_H
