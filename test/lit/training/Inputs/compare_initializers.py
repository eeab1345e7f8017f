"""Prints which initializers of two ONNX models differ (bitwise) and which
are the same, by name: `changed: a b` and `unchanged: c d`.

    compare_initializers.py BEFORE.onnx AFTER.onnx"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def initializers(path):
    return {i.name: numpy_helper.to_array(i)
            for i in onnx.load(path).graph.initializer}


before, after = initializers(sys.argv[1]), initializers(sys.argv[2])
if set(before) != set(after):
    sys.exit("the models have different initializers: %s" %
             sorted(set(before) ^ set(after)))
same = sorted(n for n in before
              if before[n].tobytes() == after[n].tobytes())
print("changed:", " ".join(sorted(set(before) - set(same))))
print("unchanged:", " ".join(same))
