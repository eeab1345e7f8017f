#!/usr/bin/python3
"""shardc --memory-budget on the GPT example scaled to about 50 M parameters
(bench/memory_bench.py's export), Adam, N ranks.

It finds the reach of the budget: the stage-0 peak (the fastest plan) and
the smallest peak within reach (what shardc refuses a 1-byte budget with).
It also takes the ZeRO-3 peak (stage 3 with its defaults). For three budgets
between the ZeRO-3 peak and the stage-0 peak, and one between the smallest
peak and the ZeRO-3 peak, it compiles with --memory-budget and reports:
  - the flags shardc chose and how long choosing took;
  - the predicted peak, and the peak measured by a run (--report-memory,
    max over ranks), which must not exceed the budget;
  - the predicted step time (--print-cost) and the measured mean step time
    after the first step.
Usage: bench/memory_budget_bench.py [--ranks 4] [--layers 16] [--width 512]
                                    [--steps 4] [--cost-model K=V,...]
Prints a Markdown table; exits 1 if a measured peak exceeds its budget.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from memory_bench import export, tool_env as env  # noqa: E402


def mib(b):
    return f"{b / 2**20:.1f} MiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--cost-model", default=None)
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build/bin/shardc"))
    ap.add_argument("--shardrun", default=os.path.join(ROOT, "build/bin/shardrun"))
    args = ap.parse_args()
    cost = ["--cost-model", args.cost_model] if args.cost_model else []
    with tempfile.TemporaryDirectory(prefix="shard-budget-bench-") as tmp:
        model, data, psi = export(tmp, args.layers, args.width)

        def shardc(plan, flags, ok=True):
            r = subprocess.run([args.shardc, model, "-o", plan, "--optimizer", "adam",
                                "--world-size", str(args.ranks), "--print-memory",
                                "--print-cost"] + cost + flags,
                               capture_output=True, text=True, env=env())
            if ok and r.returncode:
                sys.exit(r.stderr)
            return r

        def peak(out):
            return int(re.search(r"peak memory \(bytes\):.* total=(\d+)", out).group(1))

        top = peak(shardc(os.path.join(tmp, "s0"), ["--zero-stage", "0"]).stdout)
        zero3 = peak(shardc(os.path.join(tmp, "s3"), ["--zero-stage", "3"]).stdout)
        r = shardc(os.path.join(tmp, "floor"), ["--memory-budget", "1"], ok=False)
        m = re.search(r"within reach, .*? \((\d+) bytes, with ([^)]*)\)", r.stderr)
        floor = int(m.group(1))
        print(f"GPT: {args.layers} layers, width {args.width}, psi = {psi} parameters, "
              f"Adam fp32, {args.ranks} ranks, {args.steps} steps\n")
        print(f"predicted peaks per rank: stage 0 {mib(top)}, ZeRO-3 defaults {mib(zero3)}, "
              f"smallest within reach {mib(floor)} ({m.group(2)})\n")
        print("| budget | chose | choosing took | predicted peak | measured peak "
              "| predicted step | measured step |")
        print("|---|---|---|---|---|---|---|")
        ok = True
        budgets = [zero3 + f * (top - zero3) for f in (0.75, 0.5, 0.1)]
        budgets.append(floor + 0.5 * (zero3 - floor))
        for i, budget in enumerate(int(b) for b in budgets):
            plan = os.path.join(tmp, f"b{i}")
            t0 = time.time()
            r = shardc(plan, ["--memory-budget", str(budget)])
            took = time.time() - t0
            chose = re.search(r": chose (.*): peak", r.stderr).group(1)
            predicted = peak(r.stdout)
            step = float(re.search(r"step time per rank \(seconds\): total=([0-9.e+-]+)",
                                   r.stdout).group(1))
            log = os.path.join(tmp, f"b{i}.jsonl")
            rep = subprocess.run([args.shardrun, plan, "--data", data, "--steps",
                                  str(args.steps), "--progress", "off", "--report-memory",
                                  "--log", log, "--offload-dir", os.path.join(tmp, "tier")],
                                 check=True, capture_output=True, text=True, env=env()).stdout
            measured = max(int(re.findall(r"(\d+) \(\s*\d+\)", line)[-1])
                           for line in rep.splitlines() if re.match(r"^\d+\s", line))
            with open(log) as f:
                rows = [json.loads(line) for line in f]
            ms = sum(x["step_ms"] for x in rows[1:]) / max(len(rows) - 1, 1)
            ok &= measured <= budget
            print(f"| {mib(budget)} | `{chose}` | {took:.1f} s | {mib(predicted)} "
                  f"| {mib(measured)} | {step * 1000:.0f} ms | {ms:.0f} ms |")
        print("\nevery measured peak within its budget" if ok else
              "\nA MEASURED PEAK EXCEEDS ITS BUDGET")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
