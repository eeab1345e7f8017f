#!/usr/bin/python3
"""How long a checkpoint save holds a training step up (shardrun
--checkpoint-dir), on torchvision's ResNet-18 (11.7 M parameters; with Adam
the state is 3 x 47 MB) from test/models.

  /usr/bin/python3 bench/checkpoint_save.py --shardc build/bin/shardc \\
      --shardrun build/bin/shardrun [--world-size 2 --zero-stage 3]

Trains 12 steps saving every 3rd, and prints the median step time without a
save, the hold-up of each save ("checkpoint_ms" in the log: the copy out of
the executor; writing goes on in the background) and the median time of the
steps right after a save (they overlap the writing). Needs numpy and onnx."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "models"))
import check_resnet18  # noqa: E402
import resnet18_init  # noqa: E402


def main():
    import numpy as np
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--shardrun", required=True)
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--zero-stage", type=int, default=0)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--every", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="shard-bench-ckpt-")
    try:
        model = os.path.join(work, "resnet18.onnx")
        check_resnet18.full_model(model)
        data = os.path.join(work, "data")
        os.makedirs(data)
        for k, v in resnet18_init.data().items():
            np.save(os.path.join(data, f"{k}.npy"), v)
        plan = os.path.join(work, "plan")
        subprocess.run([args.shardc, model, "-o", plan, "--optimizer", "adam", "--lr", "1e-3",
                        "--world-size", str(args.world_size), "--zero-stage",
                        str(args.zero_stage)], check=True, stdout=subprocess.DEVNULL)
        log = os.path.join(work, "run.jsonl")
        ck = os.path.join(work, "ck")
        subprocess.run([args.shardrun, plan, "--data", data, "--steps", str(args.steps),
                        "--log", log, "--progress", "off", "--checkpoint-dir", ck,
                        "--checkpoint-every", str(args.every)], check=True)
        steps = [json.loads(line) for line in open(log)]
        saves = [s for s in steps if "checkpoint_ms" in s]
        plain = [s["step_ms"] for s in steps[1:] if "checkpoint_ms" not in s]
        after = [steps[i + 1]["step_ms"] for i, s in enumerate(steps[:-1])
                 if "checkpoint_ms" in s]
        size = sum(os.path.getsize(os.path.join(ck, d, f))
                   for d in os.listdir(ck) for f in os.listdir(os.path.join(ck, d))
                   ) / max(len(os.listdir(ck)), 1)
        print(f"ResNet-18, Adam, {args.world_size} rank(s), stage {args.zero_stage}: "
              f"checkpoint {size / 2**20:.1f} MiB")
        print(f"  step without a save (median): {statistics.median(plain):.1f} ms")
        print("  held up by each save: " +
              ", ".join(f"{s['checkpoint_ms']:.1f}" for s in saves) + " ms")
        print(f"  step right after a save, overlapping the writing (median): "
              f"{statistics.median(after):.1f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
