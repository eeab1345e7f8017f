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
  nan-alpha          Y = LeakyRelu(X) with alpha = NaN
  type-field         Y = LeakyRelu(X) whose alpha is declared an int but
                     holds a float value
  no-type            Y = LeakyRelu(X) whose alpha has no type

Uses only Debian's python3-onnx.
"""
import sys

import onnx
from onnx import TensorProto, helper


def model(nodes, inputs, outputs, opsets):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


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
        # metadata_props (field 4) is newer than Debian's onnx: appended raw.
        entry = onnx.StringStringEntryProto(
            key="pkg.torch.export.graph_signature.InputSpec.kind", value="PARAMETER")
        payload = entry.SerializeToString()
        vi = onnx.ValueInfoProto()
        vi.ParseFromString(helper.make_tensor_value_info("W", TensorProto.FLOAT, [2, 3])
                           .SerializeToString() + bytes([4 << 3 | 2, len(payload)]) + payload)
        graph.value_info.append(vi)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    elif kind in ("nan-alpha", "type-field", "no-type"):
        node = helper.make_node("LeakyRelu", ["X"], ["Y"], name="leaky",
                                alpha=float("nan") if kind == "nan-alpha" else 0.5)
        if kind == "type-field":
            node.attribute[0].type = onnx.AttributeProto.INT
        elif kind == "no-type":
            node.attribute[0].ClearField("type")
        m = model([node], [x], [y], [("", 13)])
    else:
        sys.exit("unknown kind " + kind)
    with open(out, "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
