#!/usr/bin/python3
"""Calibrates `shardc --simulate` on this machine and checks its predictions.

    bench/simulate_bench.py [--ranks 1 2 4] [--stages 0 3] [--steps 10]
                            [--warmup 3] [--fit-rounds 3]
                            [--hardware-out FILE | --hardware FILE]

On bench/step_time.py's GPT (d 256, 4 layers, T 64, vocab 8192, 7.37 M
parameters, micro-batch 8 per rank), Adam, one thread per rank:

 1. Fit, from the traced steps after the warm-up of --fit-rounds runs of
    one rank and of two ranks, in turn. One rank: the matrix
    products' time over the plan's flops
    gives `flops`; the median of the shortest tenth of the other kernels
    gives `kernel`, and their remaining time over the bytes they read and
    write gives `memory`. Two ranks at ZeRO stage 3, traced: rank 0's
    collectives give `link-latency` (the lower quartile of the time per
    algorithm step of those under 64 KiB) and `link` (the bytes a ring sends
    over the time left of those over 1 MiB). `host-slots` is this machine's core count:
    more ranks than cores share them. `link-cpu`: the matrix products' time
    per step at two ranks over one rank's, as a share of all kernel time, is
    the time the collectives' copies took from the kernels; the bytes a rank
    sends per step over it. The fitted numbers are written as a hardware
    file (--hardware-out).
 2. Check. For each rank count and stage: `shardc --simulate --hardware
    FILE` against the measured step (the slowest rank's step_ms from
    shardrun's log, the median after the warm-up). With --hardware FILE,
    step 1 is skipped and FILE is checked.

Prints the hardware file and a Markdown table of predicted against measured
step times.
"""
import argparse
import datetime
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
from memory_bench import tool_env  # noqa: E402
from step_time import cpu_model, export  # noqa: E402

FLOP_OPS = ("MatMul", "Gemm", "Conv", "ConvGradInput", "ConvGradWeight")


def env():
    e = tool_env()
    e["OPENBLAS_NUM_THREADS"] = "1"
    return e


def shardc(args, model, flags):
    cmd = [args.shardc, model, "--optimizer", "adam", "--lr", "1e-3"] + flags
    r = subprocess.run(cmd, capture_output=True, text=True, env=env())
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout


def compile_plan(args, model, plan, ranks, stage):
    out = shardc(args, model, ["-o", plan, "--world-size", str(ranks), "--zero-stage",
                               str(stage), "--print-cost"])
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.e+-]+)", out.split("machine:")[0])}


def simulate(args, model, hardware, ranks, stage):
    out = shardc(args, model, ["--simulate", "--hardware", hardware, "--world-size", str(ranks),
                               "--zero-stage", str(stage)])
    step = float(re.search(r"step:\s+([0-9.e+-]+) s", out).group(1))
    exposed = float(re.search(r"s on the links, ([0-9.e+-]+) s exposed", out).group(1))
    return step, exposed


def run(args, plan, data, trace=None):
    """The median over steps after the warm-up of the slowest rank's step."""
    log = plan + ".jsonl"
    cmd = [args.shardrun, plan, "--data", data, "--steps", str(args.warmup + args.steps),
           "--progress", "off", "--log", log]
    if trace:
        cmd += ["--trace", trace]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env())
    step = {}
    with open(log) as f:
        for line in f:
            r = json.loads(line)
            step[r["step"]] = max(step.get(r["step"], 0.0), r["step_ms"])
    return statistics.median(v for _, v in sorted(step.items())[args.warmup:]) / 1000


def events(args, trace, cat):
    """Rank 0's events of category `cat` that start in the steps after the
    warm-up (the first steps fault in memory and warm caches)."""
    with open(trace) as f:
        mine = [e for e in json.load(f)["traceEvents"] if e["pid"] == 0]
    steps = sorted(e["ts"] for e in mine if e.get("cat") == "step")
    return [e for e in mine if e.get("cat") == cat and e["ts"] >= steps[args.warmup]]


def ring(name, nbytes, n):
    """Algorithm steps and bytes a ring sends, as plan/CostModel.h counts
    them; `nbytes` is the event's larger buffer (an all-gather's output)."""
    if name.startswith("allreduce"):
        return 2 * (n - 1), 2 * nbytes * (n - 1) / n
    return n - 1, nbytes * (n - 1) / n


def fit(args, model, data, tmp):
    # One rank and two ranks in turn, --fit-rounds times: this machine's
    # speed drifts by several percent within minutes, and link-cpu is the
    # difference of the two.
    plan1, plan2 = os.path.join(tmp, "fit1"), os.path.join(tmp, "fit2")
    pred = compile_plan(args, model, plan1, 1, 0)
    pred2 = compile_plan(args, model, plan2, 2, 3)
    kernels, kernels2, comm = [], [], []
    for r in range(args.fit_rounds):
        for plan, into in ((plan1, kernels), (plan2, kernels2)):
            trace = f"{plan}.{r}.json"
            run(args, plan, data, trace)
            into += events(args, trace, "kernel") + events(args, trace, "recompute")
            if plan == plan2:
                comm += [e for e in events(args, trace, "communication")
                         if not e["name"].startswith("barrier")]
    steps = args.steps * args.fit_rounds
    flop_us = sum(e["dur"] for e in kernels if e["name"].split(" ")[0] in FLOP_OPS)
    other = [e["dur"] for e in kernels if e["name"].split(" ")[0] not in FLOP_OPS]
    kernel_s = statistics.median(sorted(other)[:max(len(other) // 10, 1)]) / 1e6
    flops = pred["flops"] * steps / (flop_us / 1e6)
    memory = pred["kernel_bytes"] * steps / max(sum(other) / 1e6 - kernel_s * len(other), 1e-9)

    # Two ranks fill the cores: what the matrix products lost per step, over
    # all kernels, is what the collectives' copies took, per byte sent.
    flop2_us = sum(e["dur"] for e in kernels2 if e["name"].split(" ")[0] in FLOP_OPS)
    lost = (flop2_us / flop_us - 1) * (flop_us + sum(other)) / 1e6 / steps
    link_cpu = pred2["sent_bytes"] / lost if lost > 0 else 0
    small = [e["dur"] / 1e6 / ring(e["name"], e["args"]["bytes"], e["args"]["ranks"])[0]
             for e in comm if e["args"]["bytes"] < 64 << 10 and e["args"]["ranks"] > 1]
    # The lower quartile: a collective's time also holds the wait for the
    # slowest rank to arrive, which the schedule's waits account for.
    latency = statistics.quantiles(small, n=4)[0]
    big = [e for e in comm if e["args"]["bytes"] > 1 << 20]
    sent = sum(ring(e["name"], e["args"]["bytes"], e["args"]["ranks"])[1] for e in big)
    busy = sum(e["dur"] / 1e6 - latency * ring(e["name"], e["args"]["bytes"],
                                                e["args"]["ranks"])[0] for e in big)
    link = sent / max(busy, 1e-9)
    return {"flops": flops, "memory": memory, "kernel": kernel_s, "link": link,
            "link-latency": latency, "host-slots": os.cpu_count(), "link-cpu": link_cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--stages", type=int, nargs="+", default=[0, 3])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--fit-rounds", type=int, default=3,
                    help="rounds of the one-rank and two-rank fit runs, in turn")
    ap.add_argument("--hardware-out", help="write the fitted hardware file here")
    ap.add_argument("--hardware", help="check this hardware file instead of fitting one")
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build/bin/shardc"))
    ap.add_argument("--shardrun", default=os.path.join(ROOT, "build/bin/shardrun"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="shard-simulate-bench-") as tmp:
        export("gpt", tmp, 8 * max(args.ranks) * (args.warmup + args.steps))
        model, data = os.path.join(tmp, "gpt.onnx"), os.path.join(tmp, "data")
        hardware = args.hardware
        if not hardware:
            fitted = fit(args, model, data, tmp)
            hardware = args.hardware_out or os.path.join(tmp, "fitted.hw")
            with open(hardware, "w") as f:
                f.write(f"# {cpu_model()}, {os.cpu_count()} cores: one rank of one thread, "
                        f"fitted {datetime.date.today()} by\n# bench/simulate_bench.py on its "
                        f"GPT (shardc --hardware reads this file).\n")
                for k, v in fitted.items():
                    f.write(f"{k} = {v:.3g}\n")
        with open(hardware) as f:
            print(f.read())
        print("| ranks | stage | predicted step | measured step | error | "
              "predicted exposed communication |")
        print("|---|---|---|---|---|---|")
        for n in args.ranks:
            for stage in args.stages if n > 1 else [0]:
                plan = os.path.join(tmp, f"n{n}s{stage}")
                compile_plan(args, model, plan, n, stage)
                measured = run(args, plan, data)
                predicted, exposed = simulate(args, model, hardware, n, stage)
                print(f"| {n} | {stage} | {predicted * 1e3:.1f} ms | {measured * 1e3:.1f} ms "
                      f"| {100 * (predicted / measured - 1):+.1f} % | {exposed * 1e3:.1f} ms |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
