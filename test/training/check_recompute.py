#!/usr/bin/python3
"""Activation recomputation (shardc --recompute, --recompute-units;
passes/Recompute.cpp) on real training runs. For each configuration the
same model is compiled with and without recomputation and trained 4 steps:

  - the logs (every value but timings) and the exported models are equal,
    bit for bit: the clones compute what forward computed (Dropout's masks
    included) and nothing else changes;
  - the predicted peak activation bytes (shardc --print-memory) fall, and
    the executor measures exactly the predicted peaks (--report-memory);
  - the trace shows the recomputation as its own category, "recompute".

Configurations: the GPT example at ZeRO-3 on 2 ranks; GPT in bf16 with
gradient accumulation; the CNN with SyncBatchNorm at ZeRO-3 on 2 ranks
(BatchNorm recomputed: running statistics must not move twice); the MLP in
fp16 with dynamic loss scaling and clipping; a PyTorch
TransformerEncoderLayer language model with dropout (test/training/dropout)
at ZeRO-2 on 2 ranks; and the multi-head-attention GPT with only its
transformer blocks recomputed (--recompute-units). Needs no Python
packages."""
import argparse
import json
import os
import re
import shutil
import tempfile

from training_checks import fail, measured_rows, read_log, run, tool_env






def predicted_activations(text):
    m = re.search(r"activations=(\d+)", text)
    if not m:
        fail("no predicted activations in shardc --print-memory:\n" + text)
    return int(m.group(1))



def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shardc", required=True)
    p.add_argument("--shardrun", required=True)
    p.add_argument("--examples", required=True)
    p.add_argument("--dropout-models", required=True)
    args = p.parse_args()
    ex = args.examples
    lm = args.dropout_models
    configs = [
        ("gpt, ZeRO-3, 2 ranks", os.path.join(ex, "gpt", "gpt.onnx"),
         os.path.join(ex, "gpt", "data"),
         ["--optimizer", "adamw", "--world-size", "2", "--zero-stage", "3"]),
        ("gpt, bf16, --grad-accum 2", os.path.join(ex, "gpt", "gpt.onnx"),
         os.path.join(ex, "gpt", "data"),
         ["--optimizer", "adam", "--param-dtype", "bf16", "--grad-accum", "2"]),
        ("cnn, --sync-batchnorm, ZeRO-3, 2 ranks", os.path.join(ex, "cnn", "cnn.onnx"),
         os.path.join(ex, "cnn", "data"),
         ["--optimizer", "sgd", "--momentum", "0.9", "--world-size", "2",
          "--zero-stage", "3", "--sync-batchnorm"]),
        ("mlp, fp16, dynamic loss scale, clipping", os.path.join(ex, "mlp", "mlp.onnx"),
         os.path.join(ex, "mlp", "data"),
         ["--optimizer", "adam", "--param-dtype", "fp16", "--loss-scale", "dynamic",
          "--clip-grad-norm", "1"]),
        ("TransformerEncoderLayer with dropout, ZeRO-2, 2 ranks",
         os.path.join(lm, "lm_b4.onnx"), os.path.join(lm, "lm_data"),
         ["--optimizer", "adamw", "--world-size", "2", "--zero-stage", "2"]),
        ("mhagpt, --recompute-units 'blocks'", os.path.join(ex, "mhagpt", "mhagpt.onnx"),
         os.path.join(ex, "mhagpt", "data"),
         ["--optimizer", "adam", "--world-size", "2", "--zero-stage", "1"]),
    ]
    env = tool_env()
    work = tempfile.mkdtemp(prefix="shard-recompute-")
    try:
        for i, (name, model, data, flags) in enumerate(configs):
            recompute = (["--recompute-units", "blocks"] if "recompute-units" in name
                         else ["--recompute"])
            result = {}
            for mode, extra in (("keep", []), ("recompute", recompute)):
                base = os.path.join(work, "%d-%s" % (i, mode))
                os.makedirs(base)
                plan = os.path.join(base, "plan")
                out = run([args.shardc, model, "-o", plan, "--print-memory"] +
                          flags + extra, env).stdout
                log = os.path.join(base, "log.jsonl")
                onnx = os.path.join(base, "model.onnx")
                trace = os.path.join(base, "trace.json")
                report = run([args.shardrun, plan, "--data", data, "--steps", "4",
                              "--seed", "1", "--progress", "off", "--log", log,
                              "--export", onnx, "--report-memory", "--trace",
                              trace], env).stdout
                rows = measured_rows(report)
                if not rows:
                    fail("%s: no --report-memory rows:\n%s" % (name, report))
                for rank, cells in rows.items():
                    if any(m != p for m, p in cells):
                        fail("%s (%s): rank %d measured %s, predicted %s" %
                             (name, mode, rank, [m for m, _ in cells],
                              [p for _, p in cells]))
                with open(trace) as f:
                    events = json.load(f)["traceEvents"]
                recomputed = [e for e in events if e.get("cat") == "recompute"]
                kernels = [e for e in events if e.get("cat") in ("kernel", "recompute")]
                result[mode] = {
                    "activations": predicted_activations(out),
                    "log": read_log(log),
                    "onnx": open(onnx, "rb").read(),
                    "recompute_events": len(recomputed),
                    "recompute_us": sum(e["dur"] for e in recomputed),
                    "kernel_us": sum(e["dur"] for e in kernels),
                }
            keep, rec = result["keep"], result["recompute"]
            if keep["log"] != rec["log"]:
                fail("%s: the logs differ with recomputation:\n%s\n%s" %
                     (name, keep["log"], rec["log"]))
            if keep["onnx"] != rec["onnx"]:
                fail("%s: the exported models differ with recomputation" % name)
            if not rec["activations"] < keep["activations"]:
                fail("%s: predicted activations %d with recomputation, %d without" %
                     (name, rec["activations"], keep["activations"]))
            if keep["recompute_events"] or not rec["recompute_events"]:
                fail("%s: recompute events in the trace: %d without, %d with" %
                     (name, keep["recompute_events"], rec["recompute_events"]))
            print("ok: %s: 4 steps bit for bit; activations %d -> %d bytes (%.0f %%), "
                  "measured = predicted; recomputation %.0f %% of kernel time" %
                  (name, keep["activations"], rec["activations"],
                   100.0 * rec["activations"] / keep["activations"],
                   100.0 * rec["recompute_us"] / max(rec["kernel_us"], 1e-9)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
