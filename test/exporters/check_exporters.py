#!/usr/bin/python3
"""Compiles a model exported by PyTorch 2.x (test/exporters/export_torch2.py)
with shardc, runs it with shardrun and compares with PyTorch:

  - forward: logits (rtol 1e-4, atol 1e-5) and loss (rtol 1e-4) on the
    fixed batch, from a forward-only plan;
  - training: the loss of each plain-SGD step on that batch (rtol 1e-4),
    losses[1] being the loss after one step.

    check_exporters.py --shardc BIN --shardrun BIN --model mlp --exporter dynamo

For transformer_dropout, which has no PyTorch reference (its masks cannot be
reproduced), it checks that the model imports with a training-mode dropout
of ratio 0.1 and that a few training steps give finite losses that depend on
shardrun's --seed and repeat with the same seed.
Needs numpy and onnx only. Exit code 1 on a mismatch.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
LOSS_RTOL = 1e-4
LOGITS_RTOL, LOGITS_ATOL = 1e-4, 1e-5
RUN_TIMEOUT_S = 240


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def default_opset(path):
    m = onnx.load(path)
    return next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


def train(args, model, tmp, data, lr, steps, seed=0, tag="train"):
    plan = os.path.join(tmp, f"{tag}.plan")
    log = os.path.join(tmp, f"{tag}.jsonl")
    run([args.shardc, model, "-o", plan, "--optimizer", "sgd", "--lr", str(lr)])
    run([args.shardrun, plan, "--data", data, "--steps", str(steps), "--log", log,
         "--seed", str(seed)])
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


def check_reference(args, model, tmp):
    ref_dir = os.path.join(args.models, args.model)
    with open(os.path.join(ref_dir, "reference.json")) as f:
        ref = json.load(f)
    ok = True
    plan = os.path.join(tmp, "forward.plan")
    run([args.shardc, model, "-o", plan])
    out = os.path.join(tmp, "out")
    run([args.shardrun, plan, "--output-dir", out,
         "--input", "x=" + os.path.join(ref_dir, "x.npy"),
         "--input", "y=" + os.path.join(ref_dir, "y.npy")])
    # By position: the TorchScript exporter names an output that a local
    # function computes after the function's value ("11", not "logits").
    outputs = [o.name for o in onnx.load(model).graph.output]
    for name, output, rtol, atol in [("logits", outputs[0], LOGITS_RTOL, LOGITS_ATOL),
                                     ("loss", outputs[1], LOSS_RTOL, 0.0)]:
        want = np.load(os.path.join(ref_dir, name + ".npy"))
        got = np.load(os.path.join(out, output + ".npy"))
        close = got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=atol)
        diff = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("nan")
        print(f"forward {name}: shape {got.shape}, max abs diff vs PyTorch {diff:.3g}: "
              f"{'ok' if close else 'MISMATCH'}")
        ok &= close

    data = os.path.join(tmp, "data")
    os.makedirs(data)
    for name in ["x", "y"]:
        np.save(os.path.join(data, name + ".npy"), np.load(os.path.join(ref_dir, name + ".npy")))
    losses = train(args, model, tmp, data, ref["lr"], len(ref["losses"]))
    for step, (got, want) in enumerate(zip(losses, ref["losses"])):
        close = abs(got - want) <= LOSS_RTOL * abs(want)
        print(f"step {step} loss {got:.7g}, PyTorch {want:.7g}, rel diff "
              f"{abs(got - want) / abs(want):.2g}: {'ok' if close else 'MISMATCH'}")
        ok &= close
    if len(losses) != len(ref["losses"]):
        print(f"shardrun logged {len(losses)} steps, PyTorch {len(ref['losses'])}: MISMATCH")
        ok = False
    return ok


def check_dropout(args, model, tmp):
    ir = run([args.shardc, model, "--emit=mlir"]).stdout
    ratios = re.findall(r"shardc\.Dropout .*ratio = ([0-9.e+-]+)", ir)
    ok = len(ratios) == 1 and abs(float(ratios[0]) - 0.1) < 1e-6
    print(f"training-mode dropout ratios in the IR: {ratios}: {'ok' if ok else 'MISMATCH'}")
    rng = np.random.default_rng(0)
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    np.save(os.path.join(data, "x.npy"), rng.normal(size=(2, 3, 8)).astype(np.float32))
    np.save(os.path.join(data, "y.npy"), np.array([1, 3], dtype=np.int64))
    a = train(args, model, tmp, data, 0.1, 3, seed=0, tag="seed0")
    b = train(args, model, tmp, data, 0.1, 3, seed=0, tag="seed0again")
    c = train(args, model, tmp, data, 0.1, 3, seed=1, tag="seed1")
    finite = all(np.isfinite(a + c))
    print(f"losses, seed 0: {a}; again: {b}; seed 1: {c}")
    ok &= finite and a == b and a != c
    print(f"finite, repeated by the same seed, changed by another: "
          f"{'ok' if finite and a == b and a != c else 'MISMATCH'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--shardrun", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--models", default=os.path.join(HERE, "models"))
    args = ap.parse_args()
    model = os.path.join(args.models, f"{args.model}_{args.exporter}.onnx")
    print(f"{args.model} exported by {args.exporter} at opset {default_opset(model)}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "transformer_dropout":
            ok = check_dropout(args, model, tmp)
        else:
            ok = check_reference(args, model, tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
