#!/usr/bin/python3
"""Training-mode dropout end to end, on the models and data that
test/training/dropout/export_dropout.py exported from PyTorch (a dropout on a
batch-first and one on a sequence-first activation; a language model with
nn.TransformerEncoderLayer, whose attention merges the samples with other
axes).

    check_dropout.py --shardc BIN --shardrun BIN [--part NAME]

Parts (all by default):
  train   the loss falls over 40 steps; the same --seed gives bitwise the
          same losses, another seed other losses
  ranks   the same global batch of 16 on 1 rank, on 2 ranks (micro-batch 8,
          ZeRO-0), on 4 ranks (micro-batch 4, ZeRO-3), and accumulated over
          2 micro-batches on 1 rank (8 each) and on 2 ranks (4 each, ZeRO-2)
          gives the same losses to rtol 1e-5: every rank and micro-batch
          draws its slab of the one-rank mask
  mask    Dropout's mask output: y = x * mask / (1 - ratio), a keep rate
          near 1 - ratio, the same mask for the same seed, another for another
  p0      the eval-mode export and the p = 0 training export have no dropout
          left: they compile without any shardc.Dropout and give PyTorch's
          eval loss
  lm      the language model compiles without warnings (shardc finds the
          samples in every dropout's input: attention weights [B*H, T, T],
          [B, T, d] activations and a flattened sequence-first [T*B, d]), and
          the same global batch of 8 on 1 rank and on 2 ranks (micro-batch
          4) gives the same losses to rtol 1e-5
Needs numpy and onnx only. Exit code 1 on a failure."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "dropout")
DATA = os.path.join(MODELS, "data")
LM_DATA = os.path.join(MODELS, "lm_data")
STEPS = 40
OPT = ["--optimizer", "adam", "--lr", "1e-2"]
RANKS_RTOL = 1e-5


def run(cmd):
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout + proc.stderr)
        raise SystemExit(f"FAILED: {' '.join(cmd)} exited with code {proc.returncode}")
    return proc


def losses(log):
    with open(log) as f:
        return [float(json.loads(line)["loss"]) for line in f if line.strip()]


def train(args, work, model, seed, flags=()):
    tag = f"{os.path.basename(model)}-{'-'.join(flags) or 'w1'}"
    plan = os.path.join(work, tag)
    if not os.path.exists(plan):
        run([args.shardc, model, "-o", plan] + OPT + list(flags))
    log = os.path.join(work, f"{tag}-seed{seed}.jsonl")
    run([args.shardrun, plan, "--data", DATA, "--steps", str(STEPS), "--log", log,
         "--progress", "off", "--seed", str(seed)])
    return losses(log)


def check_train(args, work):
    problems = []
    model = os.path.join(MODELS, "dropout_b16.onnx")
    a = train(args, work, model, 1)
    again = train(args, work, model, 1)
    other = train(args, work, model, 2)
    first, last = np.mean(a[:10]), np.mean(a[-10:])
    print(f"seed 1: mean loss of steps 1-10 {first:.5f}, of steps {STEPS - 9}-{STEPS} {last:.5f}")
    if not last < 0.8 * first:
        problems.append("the loss did not fall by 20 %")
    if again != a:
        problems.append("two runs with --seed 1 logged different losses")
    differ = sum(x != y for x, y in zip(a, other))
    print(f"seed 2 against seed 1: {differ} of {STEPS} step losses differ "
          f"(step 1: {other[0]:.8g} against {a[0]:.8g})")
    if other[0] == a[0] or differ < STEPS // 2:
        problems.append("--seed 2 did not change the losses")
    return problems


def check_ranks(args, work):
    one = train(args, work, os.path.join(MODELS, "dropout_b16.onnx"), 3)
    two = train(args, work, os.path.join(MODELS, "dropout_b8.onnx"), 3,
                ["--world-size=2", "--zero-stage=0"])
    four = train(args, work, os.path.join(MODELS, "dropout_b4.onnx"), 3,
                 ["--world-size=4", "--zero-stage=3"])
    # Gradient accumulation: 2 micro-batches of 8 on 1 rank, and 2 of 4 on
    # each of 2 ranks, draw the masks of 2 and 4 ranks.
    accum1 = train(args, work, os.path.join(MODELS, "dropout_b8.onnx"), 3,
                   ["--grad-accum=2"])
    accum2 = train(args, work, os.path.join(MODELS, "dropout_b4.onnx"), 3,
                   ["--world-size=2", "--zero-stage=2", "--grad-accum=2"])
    runs = [two, four, accum1, accum2]
    print(f"\n{'step':>4}  {'1 rank':>12}  {'2 ranks':>12}  {'4 ranks':>12}  "
          f"{'1 rank x2':>12}  {'2 ranks x2':>12}")
    worst = 0.0
    for s, x in enumerate(one):
        others = [r[s] for r in runs if s < len(r)]
        rel = max(abs(y - x) for y in others) / abs(x)
        worst = max(worst, rel)
        print(f"{s + 1:>4}  {x:>12.8g}  " + "  ".join(f"{y:>12.8g}" for y in others) +
              f"  {rel:.1e}")
    print(f"largest relative difference from 1 rank: {worst:.2e}")
    if any(len(r) != STEPS for r in [one] + runs):
        return ["a run logged the wrong number of steps"]
    if not worst <= RANKS_RTOL:
        return [f"the losses at 2 or 4 ranks, or accumulating 2 micro-batches, differ "
                f"from 1 rank's by {worst:.2e} (more than {RANKS_RTOL:g})"]
    return []


def check_mask(args, work):
    ratio = 0.3
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 50])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 50])
    m = helper.make_tensor_value_info("mask", TensorProto.BOOL, [64, 50])
    nodes = [
        helper.make_node("Constant", [], ["r"], value=helper.make_tensor(
            "rv", TensorProto.FLOAT, [], [ratio])),
        helper.make_node("Constant", [], ["t"], value=helper.make_tensor(
            "tv", TensorProto.BOOL, [], [True])),
        helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"]),
    ]
    graph = helper.make_graph(nodes, "dropout_mask", [x], [y, m])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(work, "mask.onnx")
    onnx.save(model, path)
    plan = os.path.join(work, "mask-plan")
    run([args.shardc, path, "-o", plan])
    xv = np.random.default_rng(0).uniform(0.5, 1.5, (64, 50)).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), xv)

    def forward(seed):
        out = os.path.join(work, f"mask-out-{seed}")
        run([args.shardrun, plan, "--input", f"x={work}/x.npy", "--output-dir", out,
             "--seed", str(seed)])
        return np.load(os.path.join(out, "y.npy")), np.load(os.path.join(out, "mask.npy"))

    problems = []
    yv, mv = forward(5)
    if mv.dtype != np.bool_ or mv.shape != xv.shape:
        return [f"mask is {mv.dtype} {mv.shape}, not bool {xv.shape}"]
    want = xv * mv.astype(np.float32) * np.float32(1 / (1 - ratio))
    err = float(np.max(np.abs(yv - want)))
    rate = float(mv.mean())
    sigma = np.sqrt(ratio * (1 - ratio) / mv.size)
    print(f"mask: keep rate {rate:.4f} (1 - ratio = {1 - ratio}, sigma {sigma:.4f}), "
          f"max |y - x * mask / (1 - ratio)| = {err:.2e}")
    if err > 1e-6:
        problems.append("y is not x * mask / (1 - ratio)")
    if abs(rate - (1 - ratio)) > 4 * sigma:
        problems.append("the keep rate is more than 4 sigma from 1 - ratio")
    y2, m2 = forward(5)
    y3, m3 = forward(6)
    if not (np.array_equal(y2, yv) and np.array_equal(m2, mv)):
        problems.append("the same seed gave another mask")
    if np.array_equal(m3, mv):
        problems.append("another seed gave the same mask")
    return problems


def check_p0(args, work):
    problems = []
    want = float(np.load(os.path.join(MODELS, "eval_loss.npy")))
    xs = np.load(os.path.join(DATA, "x.npy"))[:16]
    ys = np.load(os.path.join(DATA, "y.npy"))[:16]
    np.save(os.path.join(work, "x16.npy"), xs)
    np.save(os.path.join(work, "y16.npy"), ys)
    for name in ("eval_p0", "train_p0"):
        model = os.path.join(MODELS, name + ".onnx")
        ir = run([args.shardc, model, "--emit=mlir"]).stdout
        plan = os.path.join(work, name)
        run([args.shardc, model, "-o", plan])
        out = os.path.join(work, name + "-out")
        run([args.shardrun, plan, "--input", f"x={work}/x16.npy", "--input",
             f"y={work}/y16.npy", "--output-dir", out])
        got = float(np.load(os.path.join(out, "loss.npy")))
        rel = abs(got - want) / abs(want)
        dropouts = ir.count("shardc.Dropout")
        print(f"{name}: {dropouts} shardc.Dropout ops, loss {got:.8g}, PyTorch's eval loss "
              f"{want:.8g} (rel {rel:.1e})")
        if dropouts:
            problems.append(f"{name} kept a dropout")
        if not rel <= 1e-5:
            problems.append(f"{name}'s loss differs from PyTorch's eval loss")
    return problems


def check_lm(args, work):
    problems = []
    # The flattened sequence-first dropout: T = 8 groups before the samples.
    ir = run([args.shardc, os.path.join(MODELS, "lm_b8.onnx"), "--emit=mlir"]).stdout
    dropouts = ir.count("shardc.Dropout")
    flat = ir.count("batch_outer = 8 : i64")
    print(f"lm: {dropouts} shardc.Dropout ops, {flat} with batch_outer 8")
    if dropouts != 5 or flat != 1:
        problems.append("the model does not have the 4 dropouts of the layer and one on "
                        "[T*B, d] with batch_outer 8")
    logs = []
    for batch, flags in ((8, []), (4, ["--world-size=2", "--zero-stage=1"])):
        model = os.path.join(MODELS, f"lm_b{batch}.onnx")
        plan = os.path.join(work, f"lm_b{batch}")
        proc = run([args.shardc, model, "-o", plan] + OPT + flags)
        if "warning" in proc.stderr:
            sys.stdout.write(proc.stderr)
            problems.append(f"shardc warned on lm_b{batch}.onnx")
        log = os.path.join(work, f"lm_b{batch}.jsonl")
        run([args.shardrun, plan, "--data", LM_DATA, "--steps", str(STEPS), "--log", log,
             "--progress", "off", "--seed", "4"])
        logs.append(losses(log))
    one, two = logs
    print(f"\n{'step':>4}  {'1 rank':>12}  {'2 ranks':>12}")
    worst = 0.0
    for s, (x, y) in enumerate(zip(one, two)):
        rel = abs(y - x) / abs(x)
        worst = max(worst, rel)
        print(f"{s + 1:>4}  {x:>12.8g}  {y:>12.8g}  {rel:.1e}")
    print(f"largest relative difference from 1 rank: {worst:.2e}")
    if len(one) != STEPS or len(two) != STEPS:
        return problems + ["a run logged the wrong number of steps"]
    if not worst <= RANKS_RTOL:
        problems.append(f"the losses at 2 ranks differ from 1 rank's by {worst:.2e} "
                        f"(more than {RANKS_RTOL:g})")
    return problems


PARTS = {"train": check_train, "ranks": check_ranks, "mask": check_mask, "p0": check_p0,
         "lm": check_lm}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--shardrun", required=True)
    ap.add_argument("--part", choices=sorted(PARTS), action="append",
                    help="run only this part (repeatable)")
    args = ap.parse_args()
    problems = []
    with tempfile.TemporaryDirectory(prefix="shard-dropout-") as work:
        for name in args.part or PARTS:
            print(f"== {name}")
            problems += [f"{name}: {p}" for p in PARTS[name](args, work)]
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
