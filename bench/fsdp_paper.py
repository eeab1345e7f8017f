#!/usr/bin/python3
"""The FSDP paper's GPT-175B setting, predicted by `shardc --simulate`.

    bench/fsdp_paper.py [--ranks 128 256 512] [--batch 1 2]
                        [--hardware bench/hardware/a100-80gb-roce.hw]
                        [--layers 96 --width 12288 --heads 96 --seq 2048
                         --vocab 50000]

Zhao et al., "PyTorch FSDP: Experiences on Scaling Fully Sharded Data
Parallel" (VLDB 2023), section 5.4: minGPT-175B (vocabulary 50000, block
2048), 128 to 512 A100 80GB GPUs, batch 1 and 2 per GPU, full sharding with
backward prefetch, activation checkpointing, bf16 mixed precision, Adam; it
reports more than 173 and 186 Tflop/s per GPU at batch 1 and 2.

The model is written here with onnx.helper as GPT-3's 175B shape (96
layers, width 12288, 96 heads; untied head, as minGPT): the blocks Shard's
examples export (LayerNormalization, attention written out with a causal
Where, erf GELU, SoftmaxCrossEntropyLoss). Its 175 billion float32
parameters are external data in one sparse file of the right size, which
takes no disk: --simulate reads parameters by shape only. Each setting is
`shardc --optimizer adam --world-size N --zero-stage 3 --param-dtype bf16
--recompute --dim batch=B --simulate --hardware FILE`.

Prints a Markdown table: the predicted step, its exposed communication, the
per-GPU peak memory, and Tflop/s per GPU counted two ways: the plan's
matrix-product flops (recomputation included: the hardware's work) and
model flops (6 x parameters x tokens plus attention's 12 x layers x width
x seq^2 per sequence, no recomputation: the usual "model flops" count).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Graph:
    """Nodes, initializers (as external data in one file) and constants."""

    def __init__(self, weights):
        self.nodes, self.inits, self.count = [], [], 0
        self.weights, self.offset = weights, 0

    def param(self, name, shape):
        t = TensorProto()
        t.name, t.data_type = name, TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        size = 4 * int(np.prod(shape))
        for k, v in (("location", os.path.basename(self.weights)),
                     ("offset", str(self.offset)), ("length", str(size))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.offset += size
        self.inits.append(t)
        return name

    def const(self, value, dtype=None):
        name = f"c{self.count}"
        self.count += 1
        arr = np.array(value, dtype=dtype)
        self.nodes.append(helper.make_node("Constant", [], [name],
                                           value=numpy_helper.from_array(arr, name)))
        return name

    def op(self, kind, inputs, **attrs):
        name = f"t{self.count}"
        self.count += 1
        self.nodes.append(helper.make_node(kind, inputs, [name], **attrs))
        return name


def linear(g, x, prefix, d_in, d_out):
    w = g.param(prefix + ".weight", [d_in, d_out])
    b = g.param(prefix + ".bias", [d_out])
    return g.op("Add", [g.op("MatMul", [x, w]), b])


def layer_norm(g, x, prefix, d):
    return g.op("LayerNormalization", [x, g.param(prefix + ".weight", [d]),
                                       g.param(prefix + ".bias", [d])], axis=-1, epsilon=1e-5)


def gpt(path, layers, width, heads, seq, vocab):
    """Writes the model to PATH with its parameters' external data in a
    sparse file beside it; returns the parameter count."""
    weights = path + ".weights"
    g = Graph(weights)
    d, hd = width, width // heads
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", seq])
    targets = helper.make_tensor_value_info("targets", TensorProto.INT64, ["batch", seq])
    tok = g.param("tok.weight", [vocab, d])
    pos = g.param("pos.weight", [seq, d])
    x = g.op("Add", [g.op("Gather", [tok, "idx"]),
                     g.op("Gather", [pos, g.const(np.arange(seq), np.int64)])])
    mask = g.const(np.tril(np.ones((1, 1, seq, seq), dtype=bool)))
    neg_inf = g.const(-np.inf, np.float32)
    scale = g.const(1.0 / np.sqrt(hd), np.float32)
    split = g.const([d, d, d], np.int64)
    heads_shape = g.const([0, seq, heads, hd], np.int64)
    merged_shape = g.const([0, seq, d], np.int64)
    sqrt2, one, half = (g.const(v, np.float32) for v in (np.sqrt(2.0), 1.0, 0.5))
    for i in range(layers):
        p = f"blocks.{i}"
        qkv = linear(g, layer_norm(g, x, p + ".ln1", d), p + ".attn.qkv", d, 3 * d)
        q, k, v = (f"t{g.count}", f"t{g.count + 1}", f"t{g.count + 2}")
        g.count += 3
        g.nodes.append(helper.make_node("Split", [qkv, split], [q, k, v], axis=2))
        q, k, v = (g.op("Reshape", [t, heads_shape]) for t in (q, k, v))
        q = g.op("Transpose", [q], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [k], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [v], perm=[0, 2, 1, 3])
        att = g.op("Mul", [g.op("MatMul", [q, k]), scale])
        att = g.op("Softmax", [g.op("Where", [mask, att, neg_inf])], axis=-1)
        y = g.op("Transpose", [g.op("MatMul", [att, v])], perm=[0, 2, 1, 3])
        y = linear(g, g.op("Reshape", [y, merged_shape]), p + ".attn.proj", d, d)
        x = g.op("Add", [x, y])
        h = linear(g, layer_norm(g, x, p + ".ln2", d), p + ".mlp.fc", d, 4 * d)
        h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [g.op("Erf", [g.op("Div", [h, sqrt2])]),
                                                       one])]), half])
        x = g.op("Add", [x, linear(g, h, p + ".mlp.proj", 4 * d, d)])
    head = g.param("head.weight", [d, vocab])
    logits = g.op("MatMul", [layer_norm(g, x, "ln", d), head])
    flat = g.op("Reshape", [logits, g.const([-1, vocab], np.int64)])
    labels = g.op("Reshape", ["targets", g.const([-1], np.int64)])
    g.nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", [flat, labels], ["loss"],
                                    reduction="mean"))
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    graph = helper.make_graph(g.nodes, "gpt", [idx, targets], [loss], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="bench/fsdp_paper.py")
    onnx.save(model, path)
    with open(weights, "wb") as f:
        f.truncate(g.offset)  # sparse: the size without the bytes
    return g.offset // 4


def simulate(args, model, ranks, batch):
    cmd = [args.shardc, model, "--optimizer", "adam", "--world-size", str(ranks),
           "--zero-stage", "3", "--param-dtype", "bf16", "--recompute",
           "--dim", f"batch={batch}", "--simulate", "--hardware", args.hardware]
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    out = r.stdout
    num = r"([0-9.]+e[+-][0-9]+)"
    return {
        "step": float(re.search(r"step:\s+" + num, out).group(1)),
        "exposed": float(re.search(r"on the links, " + num + " s exposed", out).group(1)),
        "comm": float(re.search(r"collectives:\s+" + num, out).group(1)),
        "flops": float(re.search(r"work:\s+" + num, out).group(1)),
        "peak": re.search(r"peak memory:\s+(\S+ \S+) per rank", out).group(1),
        "seconds": time.time() - start,
        "out": out,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--layers", type=int, default=96)
    ap.add_argument("--width", type=int, default=12288)
    ap.add_argument("--heads", type=int, default=96)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=50000)
    ap.add_argument("--hardware", default=os.path.join(HERE, "hardware", "a100-80gb-roce.hw"))
    ap.add_argument("--shardc", default=os.path.join(ROOT, "build/bin/shardc"))
    ap.add_argument("-v", "--verbose", action="store_true", help="print shardc's reports")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="shard-fsdp-paper-") as tmp:
        model = os.path.join(tmp, "gpt.onnx")
        psi = gpt(model, args.layers, args.width, args.heads, args.seq, args.vocab)
        print(f"GPT: {args.layers} layers, width {args.width}, {args.heads} heads, "
              f"seq {args.seq}, vocab {args.vocab}: {psi / 1e9:.1f} B parameters; "
              f"machine {os.path.relpath(args.hardware, ROOT)}\n")
        print("| GPUs | batch per GPU | predicted step | exposed communication "
              "| peak memory per GPU | Tflop/s per GPU (plan, with recompute) "
              "| Tflop/s per GPU (model flops) |")
        print("|---|---|---|---|---|---|---|")
        for n in args.ranks:
            for b in args.batch:
                r = simulate(args, model, n, b)
                if args.verbose:
                    print(r["out"])
                tokens = b * args.seq
                model_flops = 6 * psi * tokens + 12 * args.layers * args.width * args.seq ** 2 * b
                print(f"| {n} | {b} | {r['step']:.2f} s | {r['exposed']:.2f} s of "
                      f"{r['comm']:.2f} s | {r['peak']} | {r['flops'] / r['step'] / 1e12:.0f} "
                      f"| {model_flops / r['step'] / 1e12:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
