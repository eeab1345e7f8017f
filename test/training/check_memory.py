#!/usr/bin/python3
"""Trains an example for 200 steps and checks that parameters and optimizer
state are updated in place: the process's peak resident memory after the
first steps does not grow, and the loss goes down. Needs numpy only."""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--shardrun", required=True)
    ap.add_argument("--example", required=True)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    name = os.path.basename(os.path.normpath(args.example))
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "plan")
        log = os.path.join(tmp, "run.jsonl")
        subprocess.run([args.shardc, os.path.join(args.example, name + ".onnx"), "-o", plan,
                        "--optimizer", "adam", "--lr", "1e-3"], check=True)
        subprocess.run([args.shardrun, plan, "--data", os.path.join(args.example, "data"),
                        "--steps", str(args.steps), "--log", log, "--progress", "off"],
                       check=True)
        with open(log) as f:
            rows = [json.loads(line) for line in f]
    if len(rows) != args.steps:
        print(f"expected {args.steps} log lines, got {len(rows)}")
        return 1
    early = rows[9]["peak_rss_bytes"]
    late = rows[-1]["peak_rss_bytes"]
    growth = late - early
    print(f"{name}: peak RSS after step 10: {early} bytes, after step {args.steps}: {late} bytes "
          f"(growth {growth} bytes)")
    first, last = rows[0]["loss"], rows[-1]["loss"]
    print(f"{name}: loss step 1 {first:.5f}, step {args.steps} {last:.5f}")
    ok = True
    # The allocator may still round a page or two; a per-step leak of even one
    # activation would add megabytes over 190 steps.
    if growth > 256 * 1024:
        print("FAIL: peak memory grows after the first steps")
        ok = False
    if not last < first:
        print("FAIL: the loss did not go down")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
