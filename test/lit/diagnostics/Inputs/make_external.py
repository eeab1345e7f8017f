#!/usr/bin/python3
"""Writes ONNX models whose initializers live in external data files.

    make_external.py KIND DIR

writes DIR/model.onnx and the data files KIND needs.

A float initializer is a parameter, read when the plan is written: the model
computes Y = MatMul(X, W) with X: float[1, 3] and
W: float[3, 2] = [[1, 2], [3, 4], [5, 6]]; `valid` also writes
DIR/x.npy = [[1, 1, 1]], so Y = [[9, 12]].

  valid     W in DIR/weights.bin at offset 8 (after 8 bytes of padding)
  escape    location "../outside.bin": a file outside DIR
  absolute  location is the absolute path of DIR/weights.bin
  past-end  offset 8 + length 24 run past the end of the 24-byte file
  symlink   DIR/link.bin is a symlink to a file outside DIR

An int64 initializer is a constant, read at import: the model computes
Y = Add(X, S) with X: int64[2] and S: int64[2] = [3, 2].

  int-valid    S in DIR/shape.bin
  int-escape   location "../shape.bin"
  int-reshape  Y = Reshape(X, S) with X: float[2, 3], S in DIR/shape.bin

Uses only Debian's python3-onnx and python3-numpy.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper
from onnx.external_data_helper import set_external_data

W = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
S = np.array([3, 2], dtype=np.int64)


def external(name, array, location, offset=None, length=None):
    dtype = TensorProto.FLOAT if array.dtype == np.float32 else TensorProto.INT64
    t = TensorProto(name=name, data_type=dtype, dims=array.shape,
                    raw_data=array.tobytes())
    set_external_data(t, location, offset=offset, length=length)
    t.ClearField("raw_data")
    return t


def save(path, graph):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    # Write the protobuf as is: onnx.save would try to resolve the data.
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def matmul_model(path, location, offset=None, length=None):
    save(path, helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul")],
        "external",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 2])],
        initializer=[external("W", W, location, offset, length)]))


def add_model(path, location):
    save(path, helper.make_graph(
        [helper.make_node("Add", ["X", "S"], ["Y"], name="add")],
        "external",
        [helper.make_tensor_value_info("X", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.INT64, [2])],
        initializer=[external("S", S, location)]))


def reshape_model(path, location):
    save(path, helper.make_graph(
        [helper.make_node("Reshape", ["X", "S"], ["Y"], name="reshape")],
        "external",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=[external("S", S, location)]))


def write(path, data, prefix=b""):
    with open(path, "wb") as f:
        f.write(prefix + data.tobytes())


def main():
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    model = os.path.join(out, "model.onnx")
    if kind == "valid":
        write(os.path.join(out, "weights.bin"), W, b"\0" * 8)
        matmul_model(model, "weights.bin", offset=8, length=W.nbytes)
        np.save(os.path.join(out, "x.npy"), np.ones((1, 3), np.float32))
    elif kind == "escape":
        write(os.path.join(out, "..", "outside.bin"), W)
        matmul_model(model, "../outside.bin")
    elif kind == "absolute":
        data = os.path.abspath(os.path.join(out, "weights.bin"))
        write(data, W)
        matmul_model(model, data)
    elif kind == "past-end":
        write(os.path.join(out, "weights.bin"), W)
        matmul_model(model, "weights.bin", offset=8, length=W.nbytes)
    elif kind == "symlink":
        target = os.path.abspath(os.path.join(out, "..", "secret.bin"))
        write(target, W)
        link = os.path.join(out, "link.bin")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(target, link)
        matmul_model(model, "link.bin")
    elif kind == "int-valid":
        write(os.path.join(out, "shape.bin"), S)
        add_model(model, "shape.bin")
    elif kind == "int-escape":
        write(os.path.join(out, "..", "shape.bin"), S)
        add_model(model, "../shape.bin")
    elif kind == "int-reshape":
        write(os.path.join(out, "shape.bin"), S)
        reshape_model(model, "shape.bin")
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
