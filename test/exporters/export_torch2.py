#!/usr/bin/env python3
"""Exports small models with PyTorch 2.x's two ONNX exporters, each at its
default opset, together with PyTorch's reference outputs and training losses,
for test/exporters/check_exporters.py (which needs numpy and onnx only).

Debian ships no PyTorch 2.x; make a virtual environment from PyPI once (the
wheels bring their CUDA libraries along, a few GiB; the export runs on the CPU):

    /usr/bin/python3 -m venv /work/venv-torch2
    /work/venv-torch2/bin/pip install torch onnx onnxscript numpy
    /work/venv-torch2/bin/python test/exporters/export_torch2.py

Models (tiny, so that the committed files stay small), each a module
forward(x, y) -> (logits, loss) in training mode:
    mlp                  Linear-ReLU-Linear, cross entropy
    cnn                  Conv2d, BatchNorm2d (batch statistics), ReLU,
                         MaxPool2d, Linear, cross entropy
    transformer          LayerNorm, nn.MultiheadAttention, residuals, LayerNorm,
                         Linear-GELU-Linear, mean over the sequence, Linear
                         head, cross entropy
    transformer_dropout  the same with nn.Dropout(0.1) after the attention
Exporters:
    torchscript            torch.onnx.export(..., dynamo=False,
                           training=TrainingMode.TRAINING)
    torchscript_functions  the same with export_modules_as_functions: every
                           nn.Linear, nn.Conv2d, nn.BatchNorm2d, nn.LayerNorm
                           and nn.MultiheadAttention becomes an ONNX local
                           function (model.functions), called from the graph
    dynamo                 torch.onnx.export(..., dynamo=True, optimize=False)

Writes, under --out (default: models/ beside this script):
    M_E.onnx                   model M exported by exporter E
    M/x.npy, M/y.npy           the fixed batch (also the training data set)
    M/logits.npy, M/loss.npy   PyTorch's forward outputs on it
    M/reference.json           {"exporters": {E: opset}, "lr": ..., "losses":
                               [loss of step s before its update, s = 0..]}:
                               plain SGD on the fixed batch, so losses[1] is
                               the loss after one step
transformer_dropout has no reference outputs (PyTorch's masks cannot be
reproduced): only its export is written.

Two exporter behaviours of PyTorch 2.15 shape the export:
  - The dynamo exporter's graph optimizer (optimize=True, the default) is for
    inference: it folds parameter transposes into new initializers, merges
    parameters whose initial values are equal (LayerNorm weights of ones),
    and drops an all-zero bias with its Add. A model exported that way does
    not train like the PyTorch module, so this script passes optimize=False.
  - torchlib translates training-mode batch norm
    (aten._native_batch_norm_legit_functional) into an inference-mode
    BatchNormalization, normalizing with the running statistics, though the
    module normalizes with the batch's. shardc recognizes such a node by the
    FX call in its metadata and imports it in training mode (with a
    warning); cnn_dynamo.onnx is that default export.
Everything is seeded: re-running reproduces the files, except for the order
of the local functions in the *_torchscript_functions models, which PyTorch
takes from a set.
"""
import argparse
import json
import os

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

LR = 0.1
STEPS = 4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x, y):
        logits = self.fc2(F.relu(self.fc1(x)))
        return logits, F.cross_entropy(logits, y)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x, y):
        h = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        logits = self.fc(h.flatten(1))
        return logits, F.cross_entropy(logits, y)


class Transformer(nn.Module):
    def __init__(self, dropout=0.0, d=8, heads=2, classes=5):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 2 * d)
        self.out = nn.Linear(2 * d, d)
        self.head = nn.Linear(d, classes)

    def forward(self, x, y):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + self.drop(a)
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        logits = self.head(x.mean(1))
        return logits, F.cross_entropy(logits, y)


def batch(name, rng):
    if name == "mlp":
        return rng.normal(size=(4, 8)), rng.integers(0, 4, 4)
    if name == "cnn":
        return rng.normal(size=(4, 1, 8, 8)), rng.integers(0, 3, 4)
    return rng.normal(size=(2, 3, 8)), rng.integers(0, 5, 2)


def make_model(name):
    model = {"mlp": MLP, "cnn": CNN, "transformer": Transformer,
             "transformer_dropout": lambda: Transformer(dropout=0.1)}[name]()
    # Away from the default ones and zeros, every parameter differs from the
    # others: a test then notices a parameter left out or trained twice.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.train()


EXPORTERS = ["torchscript", "torchscript_functions", "dynamo"]
MODULES_AS_FUNCTIONS = {nn.Linear, nn.Conv2d, nn.BatchNorm2d, nn.LayerNorm,
                        nn.MultiheadAttention}


def export(model, args, path, exporter):
    names = dict(input_names=["x", "y"], output_names=["logits", "loss"])
    if exporter.startswith("torchscript"):
        functions = MODULES_AS_FUNCTIONS if exporter.endswith("functions") else False
        torch.onnx.export(model, args, path, dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING,
                          export_modules_as_functions=functions, **names)
    else:
        program = torch.onnx.export(model, args, dynamo=True, optimize=False, **names)
        program.save(path, external_data=False)
    m = onnx.load(path)
    # The dynamo exporter records each node's Python stack trace, paths of
    # this machine included; the rest of its metadata stays.
    for node in m.graph.node:
        keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    onnx.save(m, path)
    return next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


def reference(model, args):
    """Forward outputs, then the loss of each SGD step on the fixed batch."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        logits, loss = model(*args)
    model.load_state_dict(state)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        _, step_loss = model(*args)
        losses.append(float(step_loss))
        step_loss.backward()
        opt.step()
    model.load_state_dict(state)
    return logits.numpy(), loss.numpy(), losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "models"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for i, name in enumerate(["mlp", "cnn", "transformer", "transformer_dropout"]):
        torch.manual_seed(i)
        rng = np.random.default_rng(i)
        model = make_model(name)
        x, y = batch(name, rng)
        inputs = (torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64))
        opsets = {}
        for exporter in EXPORTERS:
            # Exporting runs the module (and so moves BatchNorm's running
            # statistics): every export starts from the same state.
            state = {k: v.clone() for k, v in model.state_dict().items()}
            opsets[exporter] = export(model, inputs,
                                      os.path.join(args.out, f"{name}_{exporter}.onnx"),
                                      exporter)
            model.load_state_dict(state)
        print(f"{name}: exported at opsets {opsets}")
        if name == "transformer_dropout":
            continue
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "x.npy"), inputs[0].numpy())
        np.save(os.path.join(d, "y.npy"), inputs[1].numpy())
        logits, loss, losses = reference(model, inputs)
        np.save(os.path.join(d, "logits.npy"), logits)
        np.save(os.path.join(d, "loss.npy"), loss)
        with open(os.path.join(d, "reference.json"), "w") as f:
            json.dump({"torch": torch.__version__, "exporters": opsets, "lr": LR,
                       "losses": losses}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
