#!/usr/bin/python3
"""Compiles a shipped example with shardc, runs it with shardrun on its
example micro-batch and compares the outputs with PyTorch's (committed in
examples/NAME/expected by examples/export_examples.py). Needs numpy only."""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("example", help="example directory, e.g. examples/mlp")
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--shardrun", required=True)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    args = ap.parse_args()
    name = os.path.basename(os.path.normpath(args.example))
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "plan")
        subprocess.run([args.shardc, os.path.join(args.example, name + ".onnx"), "-o", plan],
                       check=True)
        cmd = [args.shardrun, plan, "--output-dir", os.path.join(tmp, "out")]
        indir = os.path.join(args.example, "input")
        for f in sorted(os.listdir(indir)):
            cmd += ["--input", f"{f[:-4]}={os.path.join(indir, f)}"]
        subprocess.run(cmd, check=True)
        expdir = os.path.join(args.example, "expected")
        ok = True
        for f in sorted(os.listdir(expdir)):
            want = np.load(os.path.join(expdir, f))
            got = np.load(os.path.join(tmp, "out", f))
            close = got.shape == want.shape and np.allclose(got, want, rtol=args.rtol, atol=args.atol)
            err = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("nan")
            print(f"{name} {f[:-4]}: shape {got.shape}, max abs diff vs PyTorch {err:.3g}: "
                  f"{'ok' if close else 'MISMATCH'}")
            ok &= close
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
