#!/usr/bin/python3
"""The cost model (plan/CostModel.h, shardc --print-cost) against measured
step times, and the machine numbers that fit this machine.

On the GPT example scaled by --layers/--width (bench/memory_bench.py's
export), Adam, it compiles and runs:
  1. N ranks at ZeRO stage 3 with --trace (rank 0's events, which ran
     while the other ranks shared the machine): the matrix-product kernels'
     total time over the plan's flops gives `flops`; the other kernels'
     time, less `kernel` seconds each (the median time of the smallest tenth
     of them), over the bytes they read and write gives `memory`; the
     communication events (bytes and time) give `link` (bytes a rank sends
     per second, ring algorithms);
  2. for each ZeRO stage 0-3 at N ranks, with the fitted numbers passed as
     --cost-model: the predicted step time and the measured mean step time
     (after the first step).
Usage: bench/cost_model_bench.py [--ranks 4] [--layers 16] [--width 512]
                                 [--steps 4]
Prints the fitted --cost-model value and a Markdown table.
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
sys.path.insert(0, HERE)
from memory_bench import export, tool_env as env  # noqa: E402

FLOP_OPS = ("MatMul", "Gemm", "Conv", "ConvGradInput", "ConvGradWeight")


def compile_plan(args, model, plan, flags, cost_model=None):
    cmd = [args.shardc, model, "-o", plan, "--optimizer", "adam", "--print-cost"] + flags
    if cost_model:
        cmd += ["--cost-model", cost_model]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env()).stdout
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.e+-]+)", out.split("machine:")[0])}


def run(args, plan, data, trace=None):
    log = plan + ".jsonl"
    cmd = [args.shardrun, plan, "--data", data, "--steps", str(args.steps),
           "--progress", "off", "--log", log]
    if trace:
        cmd += ["--trace", trace]
    subprocess.run(cmd, check=True, capture_output=True, text=True, env=env())
    with open(log) as f:
        rows = [json.loads(line) for line in f]
    return sum(r["step_ms"] for r in rows[1:]) / max(len(rows) - 1, 1) / 1000


def events(trace, cat):
    with open(trace) as f:
        return [e for e in json.load(f)["traceEvents"]
                if e["pid"] == 0 and e.get("cat") == cat]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build/bin/shardc"))
    ap.add_argument("--shardrun", default=os.path.join(ROOT, "build/bin/shardrun"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="shard-cost-bench-") as tmp:
        model, data, psi = export(tmp, args.layers, args.width)
        print(f"GPT: {args.layers} layers, width {args.width}, psi = {psi} "
              f"parameters, Adam fp32\n")
        # 1. Kernels and links from one run of N ranks at stage 3 (rank 0's
        # trace): the kernels ran while the other ranks computed too, as
        # in every run the model predicts.
        plan = os.path.join(tmp, "fit")
        pred = compile_plan(args, model, plan,
                            ["--world-size", str(args.ranks), "--zero-stage", "3"])
        trace = os.path.join(tmp, "fit.json")
        run(args, plan, data, trace)
        kernels = events(trace, "kernel") + events(trace, "recompute")
        steps = args.steps
        flop_us = sum(e["dur"] for e in kernels if e["name"].split(" ")[0] in FLOP_OPS)
        other = [e["dur"] for e in kernels if e["name"].split(" ")[0] not in FLOP_OPS]
        small = sorted(other)[:max(len(other) // 10, 1)]
        kernel_s = statistics.median(small) / 1e6
        flops = pred["flops"] * steps / (flop_us / 1e6)
        other_s = sum(other) / 1e6 - kernel_s * len(other)
        memory = pred["kernel_bytes"] * steps / max(other_s, 1e-9)
        # Each event's bytes are its larger buffer (nccl-tests' convention);
        # a ring sends (n - 1) / n of it, twice for an all-reduce.
        comm = [e for e in events(trace, "communication")
                if not e["name"].startswith("barrier")]
        sent = sum(e["args"]["bytes"] * (e["args"]["ranks"] - 1) / e["args"]["ranks"]
                   * (2 if e["name"].startswith("allreduce") else 1) for e in comm)
        link = sent / max(sum(e["dur"] for e in comm) / 1e6, 1e-9)
        fitted = f"flops={flops:.3g},memory={memory:.3g},kernel={kernel_s:.3g},link={link:.3g}"
        print(f"fitted: --cost-model {fitted}\n")
        # 2. Predicted against measured, stages 0-3.
        print("| stage | predicted step | measured step | measured / predicted |")
        print("|---|---|---|---|")
        for stage in range(4):
            plan = os.path.join(tmp, f"s{stage}")
            pred = compile_plan(args, model, plan, ["--world-size", str(args.ranks),
                                                    "--zero-stage", str(stage)], fitted)
            measured = run(args, plan, data)
            print(f"| {stage} | {pred['total']:.3f} s | {measured:.3f} s "
                  f"| {measured / pred['total']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
