"""The initial weights of the ResNet-18 test model, from numpy alone: the
committed resnet18.onnx holds the graph without weight data (11.7 M
parameters would be 47 MB), and both export_resnet18.py (which gives
PyTorch's model these weights) and check_resnet18.py (which fills them into
the ONNX model for shardc) call this."""
import numpy as np


def initial_value(name, shape, dtype):
    """torchvision's initialization of ResNet-18 (He-normal convolutions by
    fan-out, BatchNorm weight 1 and bias 0, running statistics 0 and 1) and
    nn.Linear's default for the classifier; seeded by the name."""
    rng = np.random.default_rng(abs(hash_name(name)))
    if name.endswith("running_var") or (len(shape) == 1 and name.endswith("weight")):
        return np.ones(shape, dtype)
    if len(shape) <= 1:
        return np.zeros(shape, dtype)
    if len(shape) == 2:  # the classifier: nn.Linear's default
        bound = 1.0 / np.sqrt(shape[1])
        return rng.uniform(-bound, bound, shape).astype(dtype)
    fan_out = shape[0] * int(np.prod(shape[2:]))  # torchvision's conv init
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_out)).astype(dtype)


def hash_name(name):
    """A stable hash (Python's hash() of a str changes per process)."""
    h = 1469598103934665603
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) % (1 << 63)
    return h


def data(n=64, seed=0):
    """Images 3x64x64 whose class (of 10) is set by the mean colour of one
    of ten patches, and their labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    x = 0.5 * rng.standard_normal((n, 3, 64, 64)).astype(np.float32)
    for i, k in enumerate(y):
        r, c = divmod(int(k), 5)
        x[i, :, 8 + 24 * r:24 + 24 * r, 2 + 12 * c:14 + 12 * c] += 1.0
    return {"x": x, "y": y.astype(np.int64)}
