#!/usr/bin/python3
"""Writes ONNX models with local functions that use IR 9/10 fields, which
Debian's onnx 1.12 has no Python API for: a function's attribute defaults
(FunctionProto.attribute_proto, field 11) and overloads (FunctionProto.overload,
field 13; NodeProto.overload, field 8). They are appended to the serialized
messages as raw protobuf fields, which onnx 1.12 keeps as unknown fields.

    make_function_models.py KIND OUT.onnx

KIND:
  defaults   local.Scale<factor> with default factor = 5, called once without
             and once with factor = 2
  overload   two overloads of local.Scale ("two": x * 2, "three": x * 3),
             each called once
"""
import sys

from onnx import FunctionProto, NodeProto, TensorProto, helper


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def with_field(msg, number, payload):
    """`msg` with a length-delimited field `number` holding `payload`."""
    extended = type(msg)()
    extended.ParseFromString(msg.SerializeToString() + varint(number << 3 | 2) +
                             varint(len(payload)) + payload)
    return extended


def scale_function(factor_ref=True, constant=None, overload=None, default=None):
    if factor_ref:
        attr = helper.make_attribute("value_float", 0.0)
        attr.ref_attr_name = "factor"
        attr.type = attr.FLOAT
        const = helper.make_node("Constant", [], ["f"])
        const.attribute.append(attr)
    else:
        const = helper.make_node("Constant", [], ["f"], value_float=constant)
    f = helper.make_function("local", "Scale", ["x"], ["y"],
                             [const, helper.make_node("Mul", ["x", "f"], ["y"])],
                             [helper.make_opsetid("", 18)],
                             ["factor"] if factor_ref else [])
    if default is not None:
        f = with_field(f, 11, helper.make_attribute("factor", default).SerializeToString())
    if overload is not None:
        f = with_field(f, 13, overload.encode())
    return f


def call(inputs, outputs, overload=None, **attrs):
    n = helper.make_node("Scale", inputs, outputs, domain="local", **attrs)
    return with_field(n, 8, overload.encode()) if overload else n


def main():
    kind, out = sys.argv[1], sys.argv[2]
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "ab"]
    if kind == "defaults":
        nodes = [call(["X"], ["a"]), call(["X"], ["b"], factor=2.0)]
        functions = [scale_function(default=5.0)]
    elif kind == "overload":
        nodes = [call(["X"], ["a"], overload="two"), call(["X"], ["b"], overload="three")]
        functions = [scale_function(False, 2.0, overload="two"),
                     scale_function(False, 3.0, overload="three")]
    else:
        sys.exit("unknown kind " + kind)
    graph = helper.make_graph(nodes, "g", [x], outs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                helper.make_opsetid("local", 1)],
                          functions=functions)
    m.ir_version = 10
    with open(out, "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
