#!/usr/bin/python3
"""Writes small binary ONNX models that the textual syntax cannot express.

    make_models.py KIND OUT.onnx

KIND:
  named-unsupported  Relu, then a Hardmax node named "encoder/hardmax_1"
  named-domain       a node "gelu_1" of domain com.microsoft (opset 1)
  no-shape           a graph input with an element type but no shape
  torch-kinds        Y = X * W + c, where W carries the input kind PARAMETER
                     that PyTorch's dynamo exporter records
                     (ValueInfoProto.metadata_props, IR 10) and c none
  torch-buffers      loss = ReduceSum(X * W + t * k), W a PARAMETER, t a
                     BUFFER (a registered table), k a CONSTANT_TENSOR
  torch-user-inputs  the same with the kind recorded for X (USER_INPUT)
                     only, as some exporter versions do
  nan-alpha          Y = LeakyRelu(X) with alpha = NaN
  type-field         Y = LeakyRelu(X) whose alpha is declared an int but
                     holds a float value
  no-type            Y = LeakyRelu(X) whose alpha has no type
  short-initializer  Y = X + ReduceSum(W), W an initializer declared [2^34] holding
                     two values (its bytes were allocated before the count
                     was checked: 64 GiB)

Uses only Debian's python3-onnx.
"""
import sys

import onnx
from onnx import TensorProto, helper


def model(nodes, inputs, outputs, opsets):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def with_kind(name, shape, kind):
    """A float ValueInfoProto of `name` with PyTorch's input kind in its
    metadata_props (field 4, newer than Debian's onnx: appended raw)."""
    entry = onnx.StringStringEntryProto(
        key="pkg.torch.export.graph_signature.InputSpec.kind", value=kind)
    payload = entry.SerializeToString()
    vi = onnx.ValueInfoProto()
    vi.ParseFromString(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
                       .SerializeToString() + bytes([4 << 3 | 2, len(payload)]) + payload)
    return vi


def main():
    kind, out = sys.argv[1], sys.argv[2]
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])
    if kind == "named-unsupported":
        m = model([helper.make_node("Relu", ["X"], ["r"], name="encoder/relu_0"),
                   helper.make_node("Hardmax", ["r"], ["Y"], name="encoder/hardmax_1")],
                  [x], [y], [("", 14)])
    elif kind == "named-domain":
        m = model([helper.make_node("Gelu", ["X"], ["Y"], name="gelu_1",
                                    domain="com.microsoft")],
                  [x], [y], [("", 13), ("com.microsoft", 1)])
    elif kind == "no-shape":
        unranked = helper.make_tensor_value_info("X", TensorProto.FLOAT, None)
        m = model([helper.make_node("Relu", ["X"], ["Y"], name="relu")],
                  [unranked], [y], [("", 13)])
    elif kind == "torch-kinds":
        w = helper.make_tensor("W", TensorProto.FLOAT, [2, 3], [1.0] * 6)
        c = helper.make_tensor("c", TensorProto.FLOAT, [3], [0.5] * 3)
        graph = helper.make_graph(
            [helper.make_node("Mul", ["X", "W"], ["t"]), helper.make_node("Add", ["t", "c"], ["Y"])],
            "g", [x], [y], [w, c])
        graph.value_info.append(with_kind("W", [2, 3], "PARAMETER"))
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    elif kind in ("torch-buffers", "torch-user-inputs"):
        w = helper.make_tensor("W", TensorProto.FLOAT, [2, 3], [1.0] * 6)
        t = helper.make_tensor("t", TensorProto.FLOAT, [3], [0.5] * 3)
        k = helper.make_tensor("k", TensorProto.FLOAT, [3], [2.0] * 3)
        loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
        graph = helper.make_graph(
            [helper.make_node("Mul", ["X", "W"], ["xw"]), helper.make_node("Mul", ["t", "k"], ["tk"]),
             helper.make_node("Add", ["xw", "tk"], ["s"]),
             helper.make_node("ReduceSum", ["s"], ["loss"], keepdims=0)],
            "g", [x], [loss], [w, t, k])
        if kind == "torch-buffers":
            graph.value_info.extend([with_kind("W", [2, 3], "PARAMETER"),
                                     with_kind("t", [3], "BUFFER"),
                                     with_kind("k", [3], "CONSTANT_TENSOR")])
        graph.input[0].CopyFrom(with_kind("X", [2, 3], "USER_INPUT"))
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    elif kind in ("nan-alpha", "type-field", "no-type"):
        node = helper.make_node("LeakyRelu", ["X"], ["Y"], name="leaky",
                                alpha=float("nan") if kind == "nan-alpha" else 0.5)
        if kind == "type-field":
            node.attribute[0].type = onnx.AttributeProto.INT
        elif kind == "no-type":
            node.attribute[0].ClearField("type")
        m = model([node], [x], [y], [("", 13)])
    elif kind == "short-initializer":
        w = helper.make_tensor("W", TensorProto.FLOAT, [2, 3], [1.0] * 6)
        del w.dims[:]
        w.dims.append(1 << 34)
        del w.float_data[:]
        w.float_data.extend([1.0, 2.0])
        m = model([helper.make_node("ReduceSum", ["W"], ["s"], keepdims=0),
                   helper.make_node("Add", ["X", "s"], ["Y"], name="add")],
                  [x], [y], [("", 13)])
        m.graph.initializer.append(w)
    else:
        sys.exit("unknown kind " + kind)
    with open(out, "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
