#!/usr/bin/python3
"""Offload (shardc --offload, shardrun --offload-dir) on the GPT example
scaled to about 50 M parameters (bench/memory_bench.py's export), N ranks at
ZeRO stage 3, Adam: for no offload, --offload optimizer, --offload params and
both, it trains a few steps and reports per rank
  - the runtime's peak (--report-memory, measured = predicted) and the tier's
    bytes (shardc --print-memory offloaded=),
  - peak RSS (the log's peak_rss_bytes, max over steps and ranks),
  - the mean step time after the first step, and its overhead over no
    offload,
  - the tier's transfer time per step (the trace's "offload" events, rank 0)
    and the fraction of it hidden behind compute: 1 - exposed / transfer
    time, where each transfer exposes the part of its duration that its
    wait ("offload-wait") blocked, at most its own duration.
Usage: bench/offload_bench.py [--ranks 4] [--layers 16] [--width 512]
                              [--steps 6] [--offload-dir DIR]
The offload directory defaults to a temporary directory (on /tmp: its disk,
and Linux's page cache in front of it). Prints a Markdown table.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from memory_bench import export, tool_env  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--offload-dir", default=None)
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build/bin/shardc"))
    ap.add_argument("--shardrun", default=os.path.join(ROOT, "build/bin/shardrun"))
    args = ap.parse_args()
    env = tool_env()
    with tempfile.TemporaryDirectory(prefix="shard-offload-bench-") as tmp:
        model, data, psi = export(tmp, args.layers, args.width)
        tier = args.offload_dir or os.path.join(tmp, "tier")
        print(f"GPT: {args.layers} layers, width {args.width}, psi = {psi} "
              f"parameters, Adam fp32, {args.ranks} ranks, ZeRO-3, "
              f"{args.steps} steps, tier in {tier}\n")
        print("| --offload | tier per rank | runtime peak | peak RSS | step time "
              "| overhead | transfers per step | hidden |")
        print("|---|---|---|---|---|---|---|---|")
        base_ms = None
        for choice in ([], ["optimizer"], ["params"], ["optimizer", "params"]):
            plan = os.path.join(tmp, "plan-" + "-".join(choice or ["none"]))
            flags = sum((["--offload", c] for c in choice), [])
            out = subprocess.run(
                [args.shardc, model, "-o", plan, "--optimizer", "adam",
                 "--world-size", str(args.ranks), "--zero-stage", "3",
                 "--print-memory"] + flags,
                check=True, capture_output=True, text=True, env=env).stdout
            tier_bytes = int(re.search(r"offloaded=(\d+)", out).group(1))
            log = os.path.join(tmp, "log.jsonl")
            trace = os.path.join(tmp, "trace.json")
            rep = subprocess.run(
                [args.shardrun, plan, "--data", data, "--steps",
                 str(args.steps), "--progress", "off", "--report-memory",
                 "--log", log, "--trace", trace, "--offload-dir", tier],
                check=True, capture_output=True, text=True, env=env).stdout
            peak = max(int(re.findall(r"(\d+) \(\s*\d+\)", line)[-1])
                       for line in rep.splitlines() if re.match(r"^\d+\s", line))
            with open(log) as f:
                rows = [json.loads(line) for line in f]
            rss = max(r["peak_rss_bytes"] for r in rows)
            ms = sum(r["step_ms"] for r in rows[1:]) / max(len(rows) - 1, 1)
            if base_ms is None:
                base_ms = ms
            with open(trace) as f:
                events = [e for e in json.load(f)["traceEvents"] if e["pid"] == 0]
            # Each transfer's event comes right before the event of the wait
            # that finished it; the wait may also cover transfers queued
            # before it on the one I/O thread, so only up to the transfer's
            # own duration of it counts as exposed.
            moved = exposed = 0.0
            for e, w in zip(events, events[1:]):
                if e.get("cat") == "offload" and w.get("cat") == "offload-wait":
                    moved += e["dur"]
                    exposed += min(w["dur"], e["dur"])
            hidden = 1 - exposed / moved if moved else float("nan")
            print(f"| {' '.join(choice) or '(none)'} | {tier_bytes / 2**20:.1f} MiB "
                  f"| {peak / 2**20:.1f} MiB | {rss / 2**20:.1f} MiB | {ms:.0f} ms "
                  f"| {ms / base_ms - 1:+.0%} | {moved / args.steps / 1000:.0f} ms "
                  f"| {hidden:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
