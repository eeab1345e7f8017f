#!/usr/bin/python3
"""Writes the inference-mode BatchNormalization that PyTorch's dynamo
exporter makes from a batch norm, with the FX call it records in the node's
metadata (NodeProto.metadata_props, field 9 of IR 10, appended raw since
Debian's onnx 1.12 has no such field).

    make_dynamo_batchnorm.py TRAINING OUT.onnx

TRAINING: True or False, the `training` argument of the recorded
aten._native_batch_norm_legit_functional call.
"""
import sys

import onnx
from onnx import TensorProto, helper


def main():
    training, out = sys.argv[1], sys.argv[2]
    call = ("%_native_batch_norm_legit_functional : [num_users=3] = call_function["
            "target=torch.ops.aten._native_batch_norm_legit_functional.default](args = "
            f"(%conv2d, %p_bn_weight, %p_bn_bias, %b_bn_running_mean, %b_bn_running_var, "
            f"{training}, 0.1, 1e-05), kwargs = {{}})")
    entry = onnx.StringStringEntryProto(key="pkg.torch.onnx.fx_node", value=call)
    payload = entry.SerializeToString()
    field = bytes([9 << 3 | 2]) + bytes([len(payload) & 0x7F | 0x80, len(payload) >> 7]) + payload
    bn = helper.make_node("BatchNormalization", ["X", "s", "b", "m", "v"], ["Y"],
                          name="node__native_batch_norm_legit_functional__0",
                          momentum=0.9, epsilon=1e-5)
    node = onnx.NodeProto()
    node.ParseFromString(bn.SerializeToString() + field)
    c = [helper.make_tensor(n, TensorProto.FLOAT, [2], [v, v]) for n, v in
         [("s", 1.0), ("b", 0.0), ("m", 0.0), ("v", 1.0)]]
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 2])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 2])], c)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 10
    with open(out, "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
