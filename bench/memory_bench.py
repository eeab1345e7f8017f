#!/usr/bin/python3
"""Per-rank model-state memory of ZeRO stages 0-3, measured, against the ZeRO
paper's formulas.

Exports the GPT example scaled to about 50 M parameters (PyTorch, Debian's
python3-torch), compiles it with Adam for N ranks at each stage, trains two
steps with `shardrun --report-memory` and compares each rank's measured peak
bytes of parameters + gradients + optimizer state (fp32 Adam, psi =
parameter count) with
    stage 0: 16 psi            stage 1: 8 psi + 8 psi / N
    stage 2: 4 psi + 12 psi/N  stage 3: 16 psi / N + one unit's gathered
                                        parameters and gradients.
With --hybrid-shard G (hybrid sharding: shards within groups of G ranks,
replicated across the N / G groups) it measures stages 1-3 against the same
formulas with N replaced by G.
With --reshard-after-forward G it measures instead, at stage 3, what a unit
keeps from forward to backward: the parameters' peak and the bytes each rank
sends per step with --reshard-after-forward true, G and false.
Usage: bench/memory_bench.py [--ranks 4] [--layers 16] [--width 512]
                             [--hybrid-shard G] [--reshard-after-forward G]
Prints a Markdown table; exits 1 if any stage needs more than 10 % above its
formula (less is fine: at stage 1 each unit's reduced gradients are freed once
its shard is taken, so not all of them are kept until the step as ZeRO-1's
formula counts).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
# The tools' environment (mpirun may run as root), shared with the tests;
# the other benchmarks import it from here.
sys.path.insert(0, os.path.join(ROOT, "test", "training"))
from training_checks import tool_env  # noqa: E402


def export(out, layers, width, ctx=16, batch=2, samples=64):
    """The GPT example at this size, exported in training mode to
    OUT/gpt<layers>.onnx with `samples` sequences in OUT/data; returns the
    model, the data directory and the parameter count."""
    import torch
    from export_examples import GPT
    torch.manual_seed(0)
    vocab = 64
    model = GPT(vocab=vocab, ctx=ctx, d=width, heads=8, layers=layers)
    psi = sum(p.numel() for p in model.parameters())
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab, (samples, ctx + 1))
    data = os.path.join(out, "data")
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "idx.npy"), tokens[:, :-1].astype(np.int64))
    np.save(os.path.join(data, "targets.npy"), tokens[:, 1:].astype(np.int64))
    args = (torch.from_numpy(tokens[:batch, :-1].astype(np.int64)),
            torch.from_numpy(tokens[:batch, 1:].astype(np.int64)))
    model.train()
    path = os.path.join(out, "gpt%d.onnx" % layers)
    torch.onnx.export(model, args, path, input_names=["idx", "targets"],
                      output_names=["logits", "loss"], opset_version=15,
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    return path, data, psi


def report(shardrun, plan, data):
    out = subprocess.run([shardrun, plan, "--data", data, "--steps", "2", "--progress", "off",
                          "--report-memory"], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^(\d+)\s+(.*)$", line)
        if m:
            pairs = re.findall(r"(\d+) \(\s*(\d+)\)", m.group(2))
            rows[int(m.group(1))] = [int(a) for a, _ in pairs]
    return rows  # per rank: activations, params, grads, opt_state, comm, total


def reshard_table(args, model, data, tmp, hybrid):
    """Stage 3 with --reshard-after-forward true, G and false."""
    print("| `--reshard-after-forward` | params peak per rank (max over ranks) "
          "| sent per step and rank (`sent_per_step`) |")
    print("|---|---|---|")
    for mode in ("true", str(args.reshard_after_forward), "false"):
        plan = os.path.join(tmp, "r" + mode)
        out = subprocess.run([args.shardc, model, "-o", plan, "--optimizer", "adam",
                              "--world-size", str(args.ranks), "--zero-stage", "3",
                              "--reshard-after-forward=" + mode, "--print-memory"] + hybrid,
                             check=True, capture_output=True, text=True).stdout
        sent = int(re.search(r"sent_per_step=(\d+)", out).group(1))
        rows = report(args.shardrun, plan, data)
        params = max(r[1] for r in rows.values())
        print(f"| `{mode}` | {params / 2**20:.1f} MiB | {sent / 2**20:.1f} MiB |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--hybrid-shard", type=int, default=0)
    ap.add_argument("--reshard-after-forward", type=int, default=0, metavar="G")
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build/bin/shardc"))
    ap.add_argument("--shardrun", default=os.path.join(ROOT, "build/bin/shardrun"))
    args = ap.parse_args()
    # The ranks a shard spreads over: N, or the group with hybrid sharding.
    n = args.hybrid_shard or args.ranks
    hybrid = ["--hybrid-shard", str(args.hybrid_shard)] if args.hybrid_shard else []
    with tempfile.TemporaryDirectory(prefix="shard-bench-") as tmp:
        model, data, psi = export(tmp, args.layers, args.width)
        print(f"GPT: {args.layers} layers, width {args.width}, psi = {psi} parameters, "
              f"Adam fp32, {args.ranks} ranks" +
              (f" in groups of {n} (formulas with N = {n})" if hybrid else "") + "\n")
        if args.reshard_after_forward:
            return reshard_table(args, model, data, tmp, hybrid)
        print("| stage | formula | formula bytes | measured params | grads | optimizer state "
              "| measured model state (max over ranks) | ratio | activations | comm |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        ok = True
        for stage in range(1 if hybrid else 0, 4):
            plan = os.path.join(tmp, f"s{stage}")
            subprocess.run([args.shardc, model, "-o", plan, "--optimizer", "adam",
                            "--world-size", str(args.ranks), "--zero-stage", str(stage)] +
                           hybrid, check=True)
            rows = report(args.shardrun, plan, data)
            state = max(r[1] + r[2] + r[3] for r in rows.values())
            worst = max(rows.values(), key=lambda r: r[1] + r[2] + r[3])
            if stage == 0:
                text, formula = "16Ψ", 16 * psi
            elif stage == 1:
                text, formula = "8Ψ + 8Ψ/N", 8 * psi + 8 * psi / n
            elif stage == 2:
                text, formula = "4Ψ + 12Ψ/N", 4 * psi + 12 * psi / n
            else:
                # One unit's gathered parameters and (unreduced) gradients:
                # the largest unit is one transformer block (the default
                # wrap policy makes one unit per layer).
                unit = 12 * args.width * args.width + 13 * args.width
                text, formula = "16Ψ/N + 8·unit", 16 * psi / n + 8 * unit
            ratio = state / formula
            ok &= ratio <= 1.10
            print(f"| {stage} | {text} | {formula / 2**20:.1f} MiB | {worst[1] / 2**20:.1f} MiB "
                  f"| {worst[2] / 2**20:.1f} MiB | {worst[3] / 2**20:.1f} MiB | "
                  f"{state / 2**20:.1f} MiB | {ratio:.3f} | {worst[0] / 2**20:.1f} MiB "
                  f"| {worst[4] / 2**20:.1f} MiB |")
        print("\nno stage above its formula by more than 10 %" if ok else
              "\nSOME STAGE IS MORE THAN 10 % ABOVE ITS FORMULA")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
