"""Writes an ONNX model with one graph input renamed everywhere it is used.

    rename_input.py MODEL.onnx OLD NEW OUT.onnx"""
import sys

import onnx

model_path, old, new, out = sys.argv[1:5]
model = onnx.load(model_path)
graph = model.graph
for value in graph.input:
    if value.name == old:
        value.name = new
for node in graph.node:
    for i, name in enumerate(node.input):
        if name == old:
            node.input[i] = new
onnx.save(model, out)
