#!/usr/bin/python3
"""ZeRO-3 resharding after forward to a group (shardc --reshard-after-forward
G; FSDP2's integer reshard_after_forward, ZeRO++'s hpZ) on real training
runs of the GPT example with AdamW at stage 3. Each plan is compared with the
same plan at the default (--reshard-after-forward true: backward gathers from
the shards) and with false (the gathered parameters are kept):

  - training: the logs (every value but timings) and the exported models are
    bit for bit those of the default plan: the backward gathers rebuild the
    same parameters, and nothing else changes;
  - the trace: forward gathers span the whole shard group, as they do with
    false; backward gathers, as many as the default's beyond false's and
    with those bytes, run within groups of G ranks along the mesh's last
    axis; every rank sees the same pattern;
  - memory: the executor measures exactly the predicted peaks
    (--report-memory), and the predicted parameter bytes exceed the
    default's (a 1/G slice of every unit is kept from forward to backward).

Configurations: N = 4, G = 2; the same with --grad-accum 2, with
--param-dtype bf16 (the kept slice is in bf16) and with --recompute; hybrid
sharding N = 8 in groups of 4, G = 2 (a 2 x 2 x 2 mesh). A checkpoint saved
by the G = 2 plan resumes in the default plan bit for bit (the shards are
laid out alike). Needs no Python packages."""
import argparse
import collections
import json
import os
import shutil
import tempfile

from training_checks import check_report, fail, predicted, read_log, run, tool_env








def gathers(path, ranks):
    """Per rank: the all-gathers' bytes by (group, ranks)."""
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e["cat"] == "communication" and
                  e["name"].startswith("allgather")]
    per_rank = []
    for rank in range(ranks):
        by_group = collections.defaultdict(list)
        for e in events:
            if e["pid"] == rank:
                by_group[(e["args"]["group"], e["args"]["ranks"])].append(
                    e["args"]["bytes"])
        per_rank.append({k: sorted(v) for k, v in by_group.items()})
    return per_rank


def multiset_minus(a, b):
    rest = collections.Counter(a)
    rest.subtract(collections.Counter(b))
    if any(v < 0 for v in rest.values()):
        return None
    return sorted(rest.elements())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shardc", required=True)
    p.add_argument("--shardrun", required=True)
    p.add_argument("--example", required=True)
    args = p.parse_args()
    model = os.path.join(args.example, "gpt.onnx")
    data = os.path.join(args.example, "data")
    env = tool_env()
    work = tempfile.mkdtemp(prefix="shard-reshard-")
    steps = 4
    try:
        def compile_plan(name, flags):
            plan = os.path.join(work, name)
            out = run([args.shardc, model, "-o", plan, "--optimizer", "adamw",
                       "--zero-stage", "3", "--print-memory"] + flags,
                      env).stdout
            return plan, predicted(out)

        def train(plan, name, ranks, extra=()):
            log = os.path.join(work, name + ".jsonl")
            onnx = os.path.join(work, name + ".onnx")
            trace = os.path.join(work, name + ".trace.json")
            out = run([args.shardrun, plan, "--data", data, "--steps",
                       str(steps), "--seed", "1", "--progress", "off", "--log",
                       log, "--export", onnx, "--report-memory", "--trace",
                       trace] + list(extra), env).stdout
            check_report(name, out, ranks)
            with open(onnx, "rb") as f:
                exported = f.read()
            return read_log(log), exported, gathers(trace, ranks)

        configs = [
            ("N=4, G=2", 4, 2, ["--world-size", "4"], "axis 1"),
            ("N=4, G=2, --grad-accum 2", 4, 2,
             ["--world-size", "4", "--grad-accum", "2"], "axis 1"),
            ("N=4, G=2, --param-dtype bf16", 4, 2,
             ["--world-size", "4", "--param-dtype", "bf16"], "axis 1"),
            ("N=4, G=2, --recompute", 4, 2,
             ["--world-size", "4", "--recompute"], "axis 1"),
            ("N=8 in groups of 4, G=2", 8, 2,
             ["--world-size", "8", "--hybrid-shard", "4"], "axis 2"),
        ]
        for i, (name, ranks, group, flags, axis) in enumerate(configs):
            runs = {}
            for mode in ("true", str(group), "false"):
                tag = "%d-%s" % (i, mode)
                plan, mem = compile_plan(
                    tag, flags + ["--reshard-after-forward=" + mode])
                log, exported, gathered = train(plan, tag, ranks)
                runs[mode] = (mem, log, exported, gathered)
            mem, log, exported, gathered = runs[str(group)]
            dmem, dlog, dexported, dgathered = runs["true"]
            _, _, _, kgathered = runs["false"]
            if log != dlog or len(log) != steps:
                fail("%s: the log differs from the default plan's:\n%s\n%s" %
                     (name, log, dlog))
            if exported != dexported:
                fail("%s: the exported model differs from the default plan's"
                     % name)
            if not mem["params"] > dmem["params"]:
                fail("%s: predicted params %d bytes, not above the default's %d"
                     % (name, mem["params"], dmem["params"]))
            for rank in range(ranks):
                mine, default, kept = (gathered[rank], dgathered[rank],
                                       kgathered[rank])
                within = mine.get((axis, group), [])
                backward = multiset_minus(
                    sum(default.values(), []), sum(kept.values(), []))
                if not within or within != backward:
                    fail("%s: rank %d: gathers within %d ranks (%s): %s bytes; "
                         "the default plan's backward gathers: %s" %
                         (name, rank, group, axis, within, backward))
                # The groups' names depend on the mesh: compare by size.
                rest = sorted((k[1], b) for k, v in mine.items()
                              if k != (axis, group) for b in v)
                if rest != sorted((k[1], b) for k, v in kept.items() for b in v):
                    fail("%s: rank %d: the other gathers %s differ from those "
                         "of --reshard-after-forward=false %s" %
                         (name, rank, rest, kept))
            print("ok: %s: %d steps and the exported model bit for bit; per "
                  "rank %d backward gathers within %d ranks (%s), %d bytes; "
                  "predicted params %d bytes (default %d, false %d), "
                  "measured = predicted" %
                  (name, steps, len(within), group, axis, sum(within),
                   mem["params"], dmem["params"], runs["false"][0]["params"]))

        # A checkpoint of the G = 2 plan resumes in the default plan.
        plan = os.path.join(work, "0-2")
        ckpt = os.path.join(work, "ckpt")
        straight, _, _ = train(plan, "straight", 4)
        train(plan, "saving", 4, ["--checkpoint-dir", ckpt,
                                  "--checkpoint-every", "2"])
        moved, _, _ = train(os.path.join(work, "0-true"), "moved", 4,
                            ["--resume", os.path.join(ckpt, "step-2")])
        if moved != straight[2:]:
            fail("checkpoint: the default plan resumed from step 2 logged %s, "
                 "the G = 2 run %s" % (moved, straight[2:]))
        print("ok: checkpoint: the default plan resumes the G = 2 plan's "
              "checkpoint bit for bit")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
