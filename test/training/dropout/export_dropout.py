#!/usr/bin/python3
"""Exports the dropout models of check_dropout.py from PyTorch, in training
mode, at several batch sizes, with small data sets.

    /usr/bin/python3 test/training/dropout/export_dropout.py [--out DIR]

The model: x (B, T, F) -> relu(fc1) -> Dropout(0.2) -> transposed to the
sequence-first layout (T, B, H) -> relu(fc2) -> Dropout(0.2) -> mean over T
-> head -> cross entropy with y (B,). The first dropout's input has the batch
on axis 0, the second's on axis 1.

Writes to DIR (default: this directory):
    dropout_b16.onnx   global batch 16, for one rank
    dropout_b8.onnx    the same model and weights at batch 8, for 2 ranks
    dropout_b4.onnx    and at batch 4, for 4 ranks
    data/x.npy, data/y.npy   256 samples whose labels a linear probe of
                       mean_t(x) gives, so the loss can fall
    eval_p0.onnx       the model exported in eval mode, and with p = 0 in
    train_p0.onnx      training mode (batch 16): both are the model without
                       dropout
    eval_loss.npy      PyTorch's eval-mode loss on the first 16 samples

The language model: tokens x (B, T) -> embedding + positions ->
nn.TransformerEncoderLayer(batch_first=True, dropout=0.1) (d 16, 2 heads,
feed-forward 32, vocabulary 32, T = 8) -> moved to the sequence-first
layout and flattened to (T*B, d) -> Dropout(0.1) -> head -> cross entropy
with y (B, T). PyTorch's attention inside the layer merges the samples with
the heads ([T, B*H, hd]) and with the positions ([T*B, d]) and back, and
the last dropout's input has them inside axis 0 after T groups.
    lm_b8.onnx         global batch 8, for one rank
    lm_b4.onnx         the same model and weights at batch 4, for 2 ranks
    lm_data/x.npy, lm_data/y.npy   64 token sequences; y[t] = (x[t] + x[t-1])
                       mod 32 (x[-1] = 0)
Needs Debian's python3-torch and python3-onnx; the test needs neither torch
nor this script. Everything is seeded: re-running reproduces the files.
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 15
T, FEATURES, HIDDEN, CLASSES = 4, 8, 32, 4
SAMPLES = 256


class DropoutNet(nn.Module):
    def __init__(self, p=0.2):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, HIDDEN)
        self.drop1 = nn.Dropout(p)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.drop2 = nn.Dropout(p)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x, y):
        h = self.drop1(F.relu(self.fc1(x)))          # (B, T, H)
        h = h.transpose(0, 1)                        # (T, B, H)
        h = self.drop2(F.relu(self.fc2(h)))
        logits = self.head(h.mean(0))                # (B, C)
        return F.cross_entropy(logits, y)


def export(model, batch, path, mode):
    x = torch.zeros(batch, T, FEATURES)
    y = torch.zeros(batch, dtype=torch.int64)
    torch.onnx.export(model, (x, y), path, input_names=["x", "y"],
                      output_names=["loss"], opset_version=OPSET,
                      do_constant_folding=False, training=mode)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    torch.manual_seed(0)
    model = DropoutNet()
    train = torch.onnx.TrainingMode.TRAINING
    model.train()
    export(model, 16, os.path.join(args.out, "dropout_b16.onnx"), train)
    export(model, 8, os.path.join(args.out, "dropout_b8.onnx"), train)
    export(model, 4, os.path.join(args.out, "dropout_b4.onnx"), train)
    model.eval()
    export(model, 16, os.path.join(args.out, "eval_p0.onnx"), torch.onnx.TrainingMode.EVAL)
    zero = DropoutNet(p=0.0)
    zero.load_state_dict(model.state_dict())
    zero.train()
    export(zero, 16, os.path.join(args.out, "train_p0.onnx"), train)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((SAMPLES, T, FEATURES)).astype(np.float32)
    probe = rng.standard_normal((FEATURES, CLASSES)).astype(np.float32)
    y = np.argmax(x.mean(1) @ probe, axis=1).astype(np.int64)
    os.makedirs(os.path.join(args.out, "data"), exist_ok=True)
    np.save(os.path.join(args.out, "data", "x.npy"), x)
    np.save(os.path.join(args.out, "data", "y.npy"), y)
    with torch.no_grad():
        loss = model(torch.from_numpy(x[:16]), torch.from_numpy(y[:16]))
    np.save(os.path.join(args.out, "eval_loss.npy"), loss.numpy().astype(np.float32))
    print(f"wrote {args.out}/data ({SAMPLES} samples, classes {np.bincount(y).tolist()})")
    export_lm(args.out)


LM_T, LM_VOCAB, LM_D, LM_HEADS, LM_FF = 8, 32, 16, 2, 32
LM_SAMPLES = 64


class TinyLM(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.tok = nn.Embedding(LM_VOCAB, LM_D)
        self.pos = nn.Parameter(torch.randn(1, LM_T, LM_D) * 0.1)
        self.layer = nn.TransformerEncoderLayer(LM_D, LM_HEADS, LM_FF, dropout=p,
                                                batch_first=True)
        self.drop = nn.Dropout(p)
        self.head = nn.Linear(LM_D, LM_VOCAB)

    def forward(self, x, y):
        h = self.layer(self.tok(x) + self.pos)                # (B, T, d)
        h = self.drop(h.transpose(0, 1).reshape(-1, LM_D))    # (T*B, d)
        logits = self.head(h).reshape(LM_T, -1, LM_VOCAB)     # (T, B, V)
        return F.cross_entropy(logits.reshape(-1, LM_VOCAB), y.t().reshape(-1))


def export_lm(out):
    torch.manual_seed(1)
    model = TinyLM()
    model.train()
    for batch in (8, 4):
        x = torch.zeros(batch, LM_T, dtype=torch.int64)
        path = os.path.join(out, f"lm_b{batch}.onnx")
        torch.onnx.export(model, (x, x), path, input_names=["x", "y"],
                          output_names=["loss"], opset_version=OPSET,
                          do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING)
        print(f"wrote {path}")
    rng = np.random.default_rng(1)
    x = rng.integers(0, LM_VOCAB, (LM_SAMPLES, LM_T)).astype(np.int64)
    prev = np.concatenate([np.zeros((LM_SAMPLES, 1), np.int64), x[:, :-1]], axis=1)
    y = (x + prev) % LM_VOCAB
    os.makedirs(os.path.join(out, "lm_data"), exist_ok=True)
    np.save(os.path.join(out, "lm_data", "x.npy"), x)
    np.save(os.path.join(out, "lm_data", "y.npy"), y)
    print(f"wrote {out}/lm_data ({LM_SAMPLES} sequences)")


if __name__ == "__main__":
    main()
