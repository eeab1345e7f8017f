#!/usr/bin/python3
"""Hybrid sharding (shardc --hybrid-shard G; FSDP's HYBRID_SHARD and
_HYBRID_SHARD_ZERO2) on real training runs: the GPT example with AdamW on
N = 4 ranks in groups of G = 2, at ZeRO stages 1, 2 and 3. For each stage:

  - memory: the predicted parameter, gradient and optimizer-state bytes per
    rank are those of the same stage on G ranks (the ZeRO formula with N
    replaced by G); the communication buffers may
    differ by the cross-group all-reduce; the executor measures exactly the
    predicted peaks (--report-memory);
  - the trace: every all-gather and reduce-scatter runs within a group
    ("axis 1", G ranks), moving a whole unit (G shards); every gradient
    shard is then all-reduced across the groups ("axis 0", N / G ranks) with
    the shard's bytes; only the step's loss average spans all N ranks;
  - training: the losses of 6 steps equal stage 0's on N ranks (DDP) to
    1e-5 relative;
  - gradient accumulation (stage 3, 2 micro-batches): one all-reduce across
    the groups per shard and step, after the micro-batches' reduce-scatters;
  - checkpoints: a checkpoint saved every 3 steps by the hybrid run holds
    each shard once (the first group's ranks write it), resumes the hybrid
    plan bit for bit, and loads into plain ZeRO-3 on N ranks.

The parity tests (test/parity, -hybrid2) check the trained weights against
PyTorch DDP. Needs no Python packages."""
import argparse
import json
import os
import shutil
import tempfile

from training_checks import check_report, fail, predicted, read_log, run, tool_env

N, G = 4, 2







def check_trace(name, path, steps, stage):
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e["cat"] == "communication"]
    for rank in range(N):
        mine = [e for e in events if e["pid"] == rank]
        kinds = {}
        for e in mine:
            kind = e["name"].split()[0]
            key = (kind, e["args"]["group"], e["args"]["ranks"])
            kinds.setdefault(key, []).append(e["args"]["bytes"])
        gathers = kinds.get(("allgather", "axis 1", G), [])
        scatters = kinds.get(("reduce_scatter", "axis 1", G), [])
        across = kinds.get(("allreduce", "axis 0", N // G), [])
        world = kinds.get(("allreduce", "", N), [])
        if not gathers or len(gathers) % steps:
            fail("%s: rank %d: %d all-gathers within the group in %d steps" %
                 (name, rank, len(gathers), steps))
        # Every stage reduce-scatters the gradients within the group (stage
        # 1 too: a rank updates only its shard) and all-reduces each shard
        # across the groups.
        if not scatters or len(across) != len(scatters):
            fail("%s: rank %d: %d reduce-scatters within the group, %d "
                 "all-reduces across groups (one per shard)" %
                 (name, rank, len(scatters), len(across)))
        # A unit's reduce-scatter moves G shards of it; its all-reduce
        # across groups one shard.
        if sorted(b // G for b in scatters) != sorted(across):
            fail("%s: rank %d: reduce-scatter bytes %s do not match the "
                 "cross-group all-reduce bytes %s (G = %d)" %
                 (name, rank, scatters, across, G))
        # The loss average of each step, and before step 1 the ranks'
        # agreement that every one set the plan up.
        if len(world) != steps + 1 or any(b != 4 for b in world):
            fail("%s: rank %d: all-reduces over every rank: %s (the "
                 "setup agreement and the loss average, 4 bytes each, "
                 "once and once per step, expected)" % (name, rank, world))
        # Over every rank besides: the plan digest's exchange before the
        # first step (all-gathers) and barriers.
        unexpected = set(kinds) - {("allgather", "axis 1", G),
                                   ("reduce_scatter", "axis 1", G),
                                   ("allreduce", "axis 0", N // G),
                                   ("allreduce", "", N), ("allgather", "", N),
                                   ("barrier", "", N)}
        if unexpected:
            fail("%s: rank %d: collectives outside the hybrid pattern: %s" %
                 (name, rank, sorted(unexpected)))
    return len(gathers) // steps, len(scatters or world) // steps


def close(a, b, rtol=1e-5):
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-30)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shardc", required=True)
    p.add_argument("--shardrun", required=True)
    p.add_argument("--example", required=True)
    args = p.parse_args()
    model = os.path.join(args.example, "gpt.onnx")
    data = os.path.join(args.example, "data")
    env = tool_env()
    work = tempfile.mkdtemp(prefix="shard-hybrid-")
    steps = 6
    try:
        def compile_plan(name, flags):
            plan = os.path.join(work, name)
            out = run([args.shardc, model, "-o", plan, "--optimizer", "adamw",
                       "--print-memory"] + flags, env).stdout
            return plan, predicted(out)

        def train(plan, name, extra=()):
            log = os.path.join(work, name + ".jsonl")
            out = run([args.shardrun, plan, "--data", data, "--steps", str(steps),
                       "--progress", "off", "--log", log] + list(extra),
                      env).stdout
            return read_log(log), out

        ddp, _ = compile_plan("ddp", ["--world-size", str(N), "--zero-stage", "0"])
        ddp_log, _ = train(ddp, "ddp")
        for stage in (1, 2, 3):
            name = "stage %d, %d ranks in groups of %d" % (stage, N, G)
            # A hybrid step's updates wait for the all-reduce across the
            # groups, which runs to the end of backward: --early-updates
            # moves no update there, but does in the plain step, which then
            # holds fewer gradient shards at once. Compare like with like.
            same = ["--early-updates=false"]
            hybrid, mem = compile_plan(
                "hybrid%d" % stage, ["--world-size", str(N), "--zero-stage",
                                     str(stage), "--hybrid-shard", str(G)] + same)
            _, small = compile_plan(
                "group%d" % stage, ["--world-size", str(G), "--zero-stage",
                                    str(stage)] + same)
            for category in ("params", "grads", "opt_state"):
                if mem[category] != small[category]:
                    fail("%s: predicted %s %d bytes per rank, but stage %d on "
                         "%d ranks holds %d" % (name, category, mem[category],
                                                stage, G, small[category]))
            trace = os.path.join(work, "trace%d.json" % stage)
            log, report = train(hybrid, "hybrid%d" % stage,
                                      ["--report-memory", "--trace", trace])
            check_report(name, report, N)
            gathers, scatters = check_trace(name, trace, steps, stage)
            for a, b in zip(log, ddp_log):
                if not close(a["loss"], b["loss"]):
                    fail("%s: step %d loss %r, DDP's %r" %
                         (name, a["step"], a["loss"], b["loss"]))
            if len(log) != steps:
                fail("%s: %d steps logged" % (name, len(log)))
            print("ok: %s: params/grads/opt_state %d/%d/%d bytes = stage %d on "
                  "%d ranks; comm %d bytes (%+d); per step %d all-gathers and "
                  "%d gradient reductions (reduce-scatters within the group, "
                  "each followed by an all-reduce across); losses = DDP's to "
                  "1e-5" %
                  (name, mem["params"], mem["grads"], mem["opt_state"], stage,
                   G, mem["comm"], mem["comm"] - small["comm"], gathers,
                   scatters))

        # Gradient accumulation (2 micro-batches): each micro-batch is
        # reduce-scattered within the group, their sum all-reduced across the
        # groups once.
        name = "stage 3 with --grad-accum 2"
        ddp2, _ = compile_plan("ddp-accum", ["--world-size", str(N),
                                             "--zero-stage", "0",
                                             "--grad-accum", "2"])
        ddp2_log, _ = train(ddp2, "ddp-accum")
        accum, _ = compile_plan("hybrid-accum", [
            "--world-size", str(N), "--zero-stage", "3", "--hybrid-shard",
            str(G), "--grad-accum", "2"])
        trace = os.path.join(work, "trace-accum.json")
        log, _ = train(accum, "hybrid-accum", ["--trace", trace])
        with open(trace) as f:
            events = [e for e in json.load(f)["traceEvents"]
                      if e["cat"] == "communication" and e["pid"] == 0]
        scatters = sum(1 for e in events if e["name"].startswith("reduce_scatter"))
        across = sum(1 for e in events if e["args"]["group"] == "axis 0")
        if not scatters or scatters != 2 * across:
            fail("%s: %d reduce-scatters within the group and %d all-reduces "
                 "across (one per 2 micro-batches expected)" %
                 (name, scatters, across))
        for a, b in zip(log, ddp2_log):
            if not close(a["loss"], b["loss"]):
                fail("%s: step %d loss %r, DDP's %r" %
                     (name, a["step"], a["loss"], b["loss"]))
        print("ok: %s: %d reduce-scatters within the group, %d all-reduces "
              "across; losses = DDP's to 1e-5" % (name, scatters, across))

        # Checkpoints: saved by the hybrid ZeRO-3 run, resumed by it and by
        # plain ZeRO-3.
        hybrid = os.path.join(work, "hybrid3")
        ckpt = os.path.join(work, "ckpt")
        straight, _ = train(hybrid, "straight")
        train(hybrid, "saving", ["--checkpoint-dir", ckpt, "--checkpoint-every",
                                 "3"])
        step3 = os.path.join(ckpt, "step-3")
        sizes = [os.path.getsize(os.path.join(step3, "rank-%d.data" % r))
                 for r in range(N)]
        if not all(sizes[:G]) or any(sizes[G:]):
            fail("checkpoint: rank file sizes %s: the first group's %d ranks "
                 "save the shards, the other groups' replicas nothing" %
                 (sizes, G))
        resumed, _ = train(hybrid, "resumed", ["--resume", step3])
        if resumed != straight[3:]:
            fail("checkpoint: the resumed hybrid run logged %s, the straight "
                 "run %s" % (resumed, straight[3:]))
        plain, _ = compile_plan("plain3", ["--world-size", str(N),
                                           "--zero-stage", "3"])
        moved, _ = train(plain, "moved", ["--resume", step3])
        for a, b in zip(moved, straight[3:]):
            if not close(a["loss"], b["loss"]):
                fail("checkpoint: plain ZeRO-3 resumed from the hybrid "
                     "checkpoint: step %d loss %r, the hybrid run's %r" %
                     (a["step"], a["loss"], b["loss"]))
        print("ok: checkpoints: rank files %s bytes (the first group saves "
              "the shards); the hybrid plan resumes bit for bit; plain ZeRO-3 "
              "on %d ranks resumes it" % (sizes, N))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
