#!/usr/bin/python3
"""Activation memory with and without recomputation (shardc --recompute),
predicted by shardc and measured by the executor, against a formula.

Exports the GPT example (examples/export_examples.py) at two depths L1 < L2
with the same width, context and batch (PyTorch, Debian's python3-torch),
compiles each for N ranks at ZeRO-3 with Adam, with and without
--recompute, trains 3 steps with --report-memory and --trace, and reports
the peak activation bytes per rank (max over ranks).

Without recomputation the blocks' activations add up:
    A_keep(L) = rest + L * block
with `block` one transformer block's activations and `rest` the
embeddings, the final norm, the head, the logits and the loss; the two depths
give `block` and `rest`. With recomputation each block keeps only its
output (the next block's input, [B, T, D] floats, `boundary` bytes) from
forward to backward, and one block's activations are rebuilt at a time:
    A_recompute(L) ~ rest + L * boundary + block
The table gives both sides. The trace's "recompute" events give the time
spent recomputing; step time is the median step_ms of the run.

Usage: bench/recompute_bench.py [--ranks 4] [--layers 4,8] [--width 256]
       [--ctx 64] [--batch 4]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, HERE)


def export(out, layers, width, ctx, batch):
    from memory_bench import export as export_gpt
    path, data, _ = export_gpt(out, layers, width, ctx=ctx, batch=batch,
                               samples=16 * batch)
    return path, data


def measure(args, tmp, model, data, recompute):
    tag = os.path.basename(model)[:-5] + ("-r" if recompute else "")
    plan = os.path.join(tmp, tag)
    out = subprocess.run([args.shardc, model, "-o", plan, "--optimizer", "adam",
                          "--world-size", str(args.ranks), "--zero-stage", "3",
                          "--print-memory"] + (["--recompute"] if recompute else []),
                         check=True, capture_output=True, text=True).stdout
    predicted = int(re.search(r"activations=(\d+)", out).group(1))
    log = os.path.join(tmp, tag + ".jsonl")
    trace = os.path.join(tmp, tag + ".json")
    report = subprocess.run([args.shardrun, plan, "--data", data, "--steps", "3",
                             "--progress", "off", "--report-memory", "--log", log,
                             "--trace", trace],
                            check=True, capture_output=True, text=True).stdout
    measured = 0
    for line in report.splitlines():
        m = re.match(r"^(\d+)\s+(\d+) \(", line)
        if m:
            measured = max(measured, int(m.group(2)))
    with open(log) as f:
        step_ms = statistics.median(json.loads(l)["step_ms"] for l in f)
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("pid") == 0]
    recompute_us = sum(e["dur"] for e in events if e.get("cat") == "recompute")
    kernel_us = sum(e["dur"] for e in events if e.get("cat") in ("kernel", "recompute"))
    return predicted, measured, step_ms, recompute_us / max(kernel_us, 1e-9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--layers", default="4,8")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4, help="per rank")
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build/bin/shardc"))
    ap.add_argument("--shardrun", default=os.path.join(ROOT, "build/bin/shardrun"))
    args = ap.parse_args()
    l1, l2 = (int(x) for x in args.layers.split(","))
    boundary = args.batch * args.ctx * args.width * 4
    with tempfile.TemporaryDirectory(prefix="shard-recompute-bench-") as tmp:
        results = {}
        for layers in (l1, l2):
            model, data = export(tmp, layers, args.width, args.ctx, args.batch)
            results[layers] = {r: measure(args, tmp, model, data, r)
                               for r in (False, True)}
        block = (results[l2][False][1] - results[l1][False][1]) / (l2 - l1)
        rest = results[l1][False][1] - l1 * block
        print(f"GPT, width {args.width}, context {args.ctx}, {args.batch} samples per "
              f"rank, Adam, N = {args.ranks}, ZeRO-3; block = {block / 2**20:.2f} MiB, "
              f"rest = {rest / 2**20:.2f} MiB, boundary = {boundary / 2**20:.2f} MiB\n")
        print("| layers | recompute | predicted activations | measured | formula | "
              "measured / formula | step time (median) | recompute share of kernel time |")
        print("|---|---|---|---|---|---|---|---|")
        for layers in (l1, l2):
            for r in (False, True):
                predicted, measured, step_ms, share = results[layers][r]
                formula = (rest + layers * boundary + block if r
                           else rest + layers * block)
                print(f"| {layers} | {'yes' if r else 'no'} | {predicted / 2**20:.2f} MiB "
                      f"| {measured / 2**20:.2f} MiB | {formula / 2**20:.2f} MiB "
                      f"| {measured / formula:.3f} | {step_ms:.1f} ms | {100 * share:.0f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
