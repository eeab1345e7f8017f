#!/usr/bin/python3
"""Builds the example models in PyTorch and exports them, with their losses,
to ONNX, together with small data sets.

    /usr/bin/python3 examples/export_examples.py [--out examples]
                                                 [--examples mhagpt tenclm]

Writes, for each example NAME in {mlp, cnn, gpt, mhagpt, tenclm}:
    NAME/NAME.onnx        the model: inputs (features, labels) -> (logits, loss)
    NAME/NAME_dynamic_batch.onnx  (mhagpt) the same with a symbolic batch axis
    NAME/data/*.npy       a small data set, first axis = samples
    NAME/input/*.npy      one micro-batch of it (the README's main job runs it)
    NAME/expected/*.npy   PyTorch's outputs (logits, loss) on that micro-batch
Needs Debian's python3-torch and python3-onnx; the test suite does not.
Everything is seeded, so re-running reproduces the committed files' values.
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 15


class MLP(nn.Module):
    def __init__(self, d_in=64, hidden=128, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x, y):
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h))
        logits = self.head(h)
        return logits, F.cross_entropy(logits, y)


class CNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.head = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x, y):
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        h = F.avg_pool2d(F.relu(self.bn2(self.conv2(h))), 2, count_include_pad=False)
        logits = self.head(h.flatten(1))
        return logits, F.cross_entropy(logits, y)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.d = d
        self.scale = 1.0 / (d // heads) ** 0.5
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, _ = x.shape
        d = self.d
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = torch.where(mask[:, :, :t, :t], att, torch.tensor(float("-inf")))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.proj(y)
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return x


class GPT(nn.Module):
    """A small GPT-2-style language model with a tied embedding/head."""

    def __init__(self, vocab=64, ctx=16, d=32, heads=4, layers=2, tied=True):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        if tied:
            self.head.weight = self.tok.weight
        causal = torch.tril(torch.ones(ctx, ctx, dtype=torch.bool))
        self.register_buffer("mask", causal.view(1, 1, ctx, ctx))

    def forward(self, idx, targets):
        b, t = idx.shape
        pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.head(self.ln(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


class MHABlock(nn.Module):
    """A pre-norm transformer block written with PyTorch's own
    nn.MultiheadAttention (its export computes the q/k/v split points with
    Shape -> Gather -> Div -> Slice chains)."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.att = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        a, _ = self.att(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class MHAGPT(nn.Module):
    """The GPT above built from nn.MultiheadAttention blocks, with a tied
    embedding/head and a boolean causal-mask buffer (True = masked out)."""

    def __init__(self, vocab=64, ctx=16, d=32, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(MHABlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.register_buffer("mask", torch.triu(torch.ones(ctx, ctx, dtype=torch.bool), 1))

    def forward(self, idx, targets):
        b, t = idx.shape
        pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x, self.mask[:t, :t])
        logits = self.head(self.ln(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


class TransformerLM(nn.Module):
    """A language model from nn.TransformerEncoder (post-norm
    nn.TransformerEncoderLayer, ReLU, no dropout) with a float causal mask
    registered as a buffer: ONNX has no requires_grad, so the buffer is an
    initializer like the weights, and training must leave it alone
    (shardc --freeze 'mask$')."""

    def __init__(self, vocab=64, ctx=16, d=32, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(0.02 * torch.randn(1, ctx, d))
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(ctx))

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos
        logits = self.head(self.enc(x, mask=self.mask))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def mlp_data(n, rng):
    # Ten Gaussian clusters in 64-d.
    centers = rng.normal(0, 1, (10, 64)).astype(np.float32)
    y = rng.integers(0, 10, n)
    x = centers[y] + 0.5 * rng.normal(0, 1, (n, 64)).astype(np.float32)
    return {"x": x.astype(np.float32), "y": y.astype(np.int64)}


def cnn_data(n, rng):
    # 16x16 images: class k has a bright 4x4 square at one of ten places.
    x = 0.1 * rng.normal(0, 1, (n, 1, 16, 16)).astype(np.float32)
    y = rng.integers(0, 10, n)
    for i, k in enumerate(y):
        r, c = divmod(int(k), 5)
        x[i, 0, 2 + 6 * r:6 + 6 * r, 1 + 3 * c:5 + 3 * c] += 1.0
    return {"x": x.astype(np.float32), "y": y.astype(np.int64)}


def gpt_data(n, rng, vocab=64, ctx=16):
    # Sequences of an arithmetic progression mod vocab: next token predictable.
    start = rng.integers(0, vocab, n)
    step = rng.integers(1, 4, n)
    seq = (start[:, None] + step[:, None] * np.arange(ctx + 1)[None, :]) % vocab
    return {"idx": seq[:, :-1].astype(np.int64), "targets": seq[:, 1:].astype(np.int64)}


EXAMPLES = {
    "mlp": (MLP, mlp_data, 32, ["x", "y"]),
    "cnn": (CNN, cnn_data, 16, ["x", "y"]),
    "gpt": (GPT, gpt_data, 8, ["idx", "targets"]),
    "mhagpt": (MHAGPT, gpt_data, 8, ["idx", "targets"]),
    "tenclm": (TransformerLM, gpt_data, 8, ["idx", "targets"]),
}


# Examples also exported with a symbolic batch axis, as NAME_dynamic_batch.onnx.
DYNAMIC_BATCH = {"mhagpt"}


def export(name, out, samples):
    cls, make_data, batch, input_names = EXAMPLES[name]
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = cls()
    data = make_data(samples, rng)
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    os.makedirs(os.path.join(d, "input"), exist_ok=True)
    for k, v in data.items():
        np.save(os.path.join(d, "data", f"{k}.npy"), v)
        np.save(os.path.join(d, "input", f"{k}.npy"), v[:batch])
    args = tuple(torch.from_numpy(data[k][:batch]) for k in input_names)
    model.train()
    # PyTorch's own outputs on the example micro-batch, before export touches
    # anything (a training-mode forward also updates BatchNorm statistics).
    os.makedirs(os.path.join(d, "expected"), exist_ok=True)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        logits, loss = model(*args)
    np.save(os.path.join(d, "expected", "logits.npy"), logits.numpy())
    np.save(os.path.join(d, "expected", "loss.npy"), loss.numpy())
    model.load_state_dict(state)
    torch.onnx.export(model, args, os.path.join(d, f"{name}.onnx"),
                      input_names=input_names, output_names=["logits", "loss"],
                      opset_version=OPSET, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)
    print(f"wrote {d}/{name}.onnx ({sum(p.numel() for p in model.parameters())} parameters)")
    if name in DYNAMIC_BATCH:
        # The same model with the batch axis left symbolic, as export
        # tutorials do (shardc --dim batch=B gives it back its size).
        model.load_state_dict(state)
        path = os.path.join(d, f"{name}_dynamic_batch.onnx")
        torch.onnx.export(model, args, path, input_names=input_names,
                          output_names=["logits", "loss"], opset_version=OPSET,
                          do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING,
                          dynamic_axes={k: {0: "batch"} for k in input_names})
        print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--examples", nargs="+", default=list(EXAMPLES))
    args = ap.parse_args()
    for name in args.examples:
        export(name, args.out, args.samples)


if __name__ == "__main__":
    main()
