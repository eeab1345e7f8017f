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
//             collective is done. A collective over n ranks takes the
//             faster of the algorithms NCCL and MPI choose between: a ring
//             (n - 1 steps for an all-gather or a reduce-scatter, 2(n - 1)
//             for an all-reduce, each step a link latency, plus the bytes a
//             ring sends, sentBytes, over the link bandwidth) and, for an
//             all-reduce, a pair of binary trees (2 ceil(log2 n) steps, 2x
//             the input's bytes). A collective whose ranks span more than
//             one host (ranks fill hosts in order; hybrid sharding's
//             replica groups stride across them) runs at the slower of the
//             link and the host link, each step at the larger of their
//             latencies: a ring crosses between
//             hosts once per host, and with one ring per network interface
//             (NCCL) a host's whole network bandwidth carries what each rank
//             sends.
//   tier      offload transfers, likewise: latency + bytes / tier bandwidth.
//
// A CollectiveWait holds the compute timeline until its start is done; that
// hold is the exposed communication or transfer time. The step ends when all
// three timelines are done. Kernels slow down when a host runs more ranks
// than it has slots for (oversubscribed CPU cores): each takes
// ranks-on-host / slots times longer. Where collectives copy with the
// ranks' own cores (MPI over shared memory, `link-cpu`) and the host has no
// core to spare, each collective also adds its copying time to its rank's
// compute timeline.
//
// Everything the model knows of the machine is in MachineModel: its
// defaults are measured on the CPU backend; a hardware file (`shardc
// --hardware FILE`, bench/hardware/) describes another machine, and
// bench/simulate_bench.py fits one from traces of this machine's runs.
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
#include <vector>

namespace shardc::plan {

/// What the cost model knows of the machine one rank runs on. The defaults
/// are one rank of the CPU backend on one core of a 2-core AMD EPYC,
/// bench/hardware/epyc-2core.hw as bench/simulate_bench.py fitted it on
/// 2026-11-25 from traces of the step-time GPT, MPI over shared memory
/// (refitted since for faster products: flops 1.04e11 where 9.68e10 is
/// here), without its host-slots: a rank is assumed to have its core to
/// itself. The tier's
/// rate is what bench/offload_bench.py measured for a tier file in the page
/// cache.
struct MachineModel {
  /// Floating-point operations per second of a matrix product or
  /// convolution kernel.
  double flopsPerSecond = 9.68e10;
  /// Bytes per second a memory-bound kernel reads and writes.
  double memoryBytesPerSecond = 1.34e10;
  /// Fixed time of every kernel (dispatch, threading, launch).
  double kernelSeconds = 1.12e-6;
  /// Bytes per second one rank sends in a collective within a host, and the
  /// latency of one step of a collective's algorithm.
  double linkBytesPerSecond = 6.95e8;
  double linkSeconds = 5.01e-5;
  /// Between hosts: the bytes per second a host's network interfaces send
  /// together, and the latency of a step; 0: as within a host.
  double hostLinkBytesPerSecond = 0;
  double hostLinkSeconds = 0;
  /// Ranks per host (0: every rank on one host), and how many of them a
  /// host runs at full speed (its cores over the threads per rank, or its
  /// GPUs; 0: all).
  double hostRanks = 0;
  double hostSlots = 0;
  /// Bytes per second of a rank's collective sends that its host's cores
  /// spend copying and summing (MPI over shared memory), cycles the ranks'
  /// kernels lose while the host runs as many ranks as it has slots; 0:
  /// collectives take no kernel time (NCCL, RDMA, or cores to spare).
  double linkCpuBytesPerSecond = 0;
  /// Bytes per second between memory and the offload tier (reads and
  /// writes share it), and a transfer's fixed time.
  double tierBytesPerSecond = 2.0e9;
  double tierSeconds = 5.0e-5;

  /// One rank of the CPU backend: the defaults.
  static MachineModel cpu() { return MachineModel(); }

  /// Overrides fields from "key=value,key=value" (keys: flops, memory,
  /// kernel, link, link-latency, host-link, host-link-latency, host-ranks,
  /// host-slots, link-cpu, tier, tier-latency; rates in per second, times in
  /// seconds, each positive; the host keys and link-cpu may be 0, their
  /// default).
  llvm::Error parseOverrides(llvm::StringRef text);
  /// Overrides fields from a hardware file: one "key = value" per line, the
  /// keys of parseOverrides, '#' starting a comment. Errors name the file
  /// and line.
  llvm::Error parseFile(llvm::StringRef path);
  /// The fields as parseOverrides reads them, exact: parseOverrides of the
  /// result gives this model back.
  std::string toOverrides() const;

  /// "flops=9.7e+10 memory=1.3e+10 ..." for messages (the host keys only
  /// where set).
  std::string describe() const;

  /// The ranks one host runs at `ranks` ranks: all of them, or host-ranks.
  double ranksOnHost(uint64_t ranks) const;
  /// How many times longer a kernel takes at `ranks` ranks: the ranks on a
  /// host over its slots, at least 1.
  double computeSlowdown(uint64_t ranks) const;
  /// The kernel time a rank loses to a collective that sends `sentBytes`,
  /// at `ranks` ranks: sentBytes / link-cpu, times computeSlowdown, where
  /// the host runs at least as many ranks as it has slots; else 0.
  double collectiveCpuSeconds(uint64_t sentBytes, uint64_t ranks) const;
  /// A kernel's time: the fixed overhead plus max(flops / F, bytes / B),
  /// `bytes` being what it reads and writes, on a host running no more
  /// ranks than it has slots.
  double kernelTime(uint64_t flops, uint64_t bytes) const {
    return kernelSeconds +
           std::max(static_cast<double>(flops) / flopsPerSecond,
                    static_cast<double>(bytes) / memoryBytesPerSecond);
  }
  /// A collective of `kind` on `bytes` of input over `ranks` ranks whose
  /// rank numbers lie within `span` of each other (0: `ranks`, consecutive
  /// ranks): the faster algorithm's steps times the latency, plus its bytes
  /// over the bandwidth; where the span crosses hosts, the slower of the
  /// link and the host link, and the larger latency.
  double collectiveTime(CollectiveOpKind kind, uint64_t bytes, uint64_t ranks,
                        uint64_t span = 0) const;
};

/// The predicted time of one step and where it goes.
struct StepCost {
  /// The step: when the last of the three timelines is done.
  double seconds = 0;
  /// Kernel time, and the part of it that recomputes activations.
  double computeSeconds = 0;
  /// How many times longer each kernel took for sharing its host's slots
  /// (MachineModel::computeSlowdown).
  double computeSlowdown = 1;
  double recomputeSeconds = 0;
  /// The part of computeSeconds that collectives' copies took from the
  /// kernels (MachineModel::collectiveCpuSeconds).
  double commCpuSeconds = 0;
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
  /// Each wait that held the compute timeline: the index in Plan.ops of
  /// the start it waited for, and how long it held it.
  struct Exposed {
    int startOp;
    double seconds;
  };
  std::vector<Exposed> exposed;
};

/// The bytes one rank sends for collective start `op` of `plan`, as ring
/// algorithms move them: an all-gather sends the rank's shard to n - 1
/// ranks, a reduce-scatter (n - 1) / n of its input, an all-reduce twice
/// that, n being the ranks it spans (its `world_size` attribute, or the
/// plan's). 0 for any other op.
uint64_t sentBytes(const Plan &plan, const Op &op);
/// The same for a collective of `kind` on `bytes` of input over `ranks`.
uint64_t ringSentBytes(CollectiveOpKind kind, uint64_t bytes, uint64_t ranks);

/// The bytes of buffer `index` of `plan` (0 for an index out of range).
uint64_t bufferBytes(const Plan &plan, int32_t index);

/// Replays `plan`'s step on `machine`.
StepCost estimateStep(const Plan &plan, const MachineModel &machine);

} // namespace shardc::plan

#endif // SHARDC_PLAN_COSTMODEL_H
