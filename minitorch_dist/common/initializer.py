"""Weight initializers: ``initializer("normal", shape, dtype)`` and the classes behind the names.

All draws come from the framework RNG, so ``ms.set_seed`` makes them reproducible.
"""
import math

import numpy as np

from ..backend import dtypes
from .deferred_init import DeferredInit, deferring, draw_source as rng
from ..tensor import Tensor

__all__ = ["initializer", "Initializer", "Normal", "Uniform", "Zero", "One", "Constant",
           "XavierUniform", "XavierNormal", "HeUniform", "HeNormal", "TruncatedNormal"]


def _fans(shape):
    """(fan_in, fan_out) of a weight: Dense (out, in) and Conv (out, in, *kernel) layouts."""
    if len(shape) < 2:
        raise ValueError(f"fan_in/fan_out need a weight with at least 2 dimensions, got shape {shape}")
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _gain(nonlinearity, param=None):
    if nonlinearity in ("linear", "sigmoid", "conv2d", "conv1d"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    raise ValueError(f"unknown nonlinearity {nonlinearity!r}; expected linear, sigmoid, tanh, relu or leaky_relu")


class Initializer:
    """Base class: ``sample(shape)`` returns a float64 NumPy array of that shape."""

    def sample(self, shape):
        raise NotImplementedError

    def __call__(self, shape, dtype=dtypes.float32):
        return self.sample(tuple(shape)).astype(dtype)


class Normal(Initializer):
    def __init__(self, sigma=0.01, mean=0.0):
        self.sigma, self.mean = sigma, mean

    def sample(self, shape):
        return rng().normal(self.mean, self.sigma, size=shape)


class TruncatedNormal(Initializer):
    """Normal(0, sigma) redrawn outside two standard deviations."""

    draws_in_order = False     # redraws depend on the whole tensor: deferred draws are whole

    def __init__(self, sigma=0.01):
        self.sigma = sigma

    def sample(self, shape):
        out = rng().normal(0.0, 1.0, size=shape)
        bad = np.abs(out) > 2
        while bad.any():
            out[bad] = rng().normal(0.0, 1.0, size=int(bad.sum()))
            bad = np.abs(out) > 2
        return out * self.sigma


class Uniform(Initializer):
    def __init__(self, scale=0.07):
        self.scale = scale

    def sample(self, shape):
        return rng().uniform(-self.scale, self.scale, size=shape)


class Constant(Initializer):
    def __init__(self, value):
        self.value = value

    def sample(self, shape):
        return np.full(shape, self.value, dtype=np.float64)


class Zero(Constant):
    def __init__(self):
        super().__init__(0.0)


class One(Constant):
    def __init__(self):
        super().__init__(1.0)


class XavierUniform(Initializer):
    def __init__(self, gain=1.0):
        self.gain = gain

    def sample(self, shape):
        fan_in, fan_out = _fans(shape)
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        return rng().uniform(-bound, bound, size=shape)


class XavierNormal(Initializer):
    def __init__(self, gain=1.0):
        self.gain = gain

    def sample(self, shape):
        fan_in, fan_out = _fans(shape)
        return rng().normal(0.0, self.gain * math.sqrt(2.0 / (fan_in + fan_out)), size=shape)


class HeUniform(Initializer):
    """Kaiming uniform; ``HeUniform(math.sqrt(5))`` is PyTorch's default for Linear/Conv."""

    def __init__(self, negative_slope=0, mode="fan_in", nonlinearity="leaky_relu"):
        if mode not in ("fan_in", "fan_out"):
            raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
        self.negative_slope, self.mode, self.nonlinearity = negative_slope, mode, nonlinearity

    def _std(self, shape):
        fan = _fans(shape)[0 if self.mode == "fan_in" else 1]
        return _gain(self.nonlinearity, self.negative_slope) / math.sqrt(fan)

    def sample(self, shape):
        bound = math.sqrt(3.0) * self._std(shape)
        return rng().uniform(-bound, bound, size=shape)


class HeNormal(HeUniform):
    def sample(self, shape):
        return rng().normal(0.0, self._std(shape), size=shape)


_BY_NAME = {
    "normal": Normal, "zeros": Zero, "zero": Zero, "ones": One, "one": One,
    "uniform": Uniform, "xavier_uniform": XavierUniform, "xavieruniform": XavierUniform,
    "xavier_normal": XavierNormal, "he_uniform": HeUniform, "heuniform": HeUniform,
    "he_normal": HeNormal, "henormal": HeNormal, "truncated_normal": TruncatedNormal,
    "truncatednormal": TruncatedNormal,
}


def initializer(init, shape=None, dtype=dtypes.float32, device=None):
    """A Tensor of ``shape`` filled by ``init``: a name ("normal" is N(0, 0.01²)), an
    ``Initializer``, a number, or a Tensor/array (returned as is after a shape check).
    ``device`` (default: the context's ``device_target``) is where the tensor is created, so a
    host-resident table never has to fit on the accelerator.

    >>> import minitorch_dist as ms
    >>> initializer("ones", [2], ms.float32).asnumpy().tolist()
    [1.0, 1.0]
    """
    dtype = dtypes.to_dtype(dtype)
    if isinstance(init, (Tensor, np.ndarray)):
        t = init if isinstance(init, Tensor) else Tensor(init, dtype=dtype, device=device)
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise ValueError(f"initializer: the given tensor has shape {t.shape}, expected {tuple(shape)}")
        return t
    if shape is None:
        raise ValueError("initializer needs a shape, e.g. initializer('normal', [784, 512], ms.float32)")
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"initializer shape must be non-negative, got {shape}")
    if isinstance(init, str):
        cls = _BY_NAME.get(init.lower())
        if cls is None:
            raise ValueError(f"unknown initializer {init!r}; expected one of {sorted(set(_BY_NAME))}")
        init = cls()
    elif isinstance(init, bool) or not isinstance(init, (int, float, Initializer)):
        raise TypeError(f"initializer expects a name, an Initializer, a number or a Tensor, got {init!r}")
    elif not isinstance(init, Initializer):
        init = Constant(init)
    if deferring() and not isinstance(init, Constant):
        return _deferred_tensor(init, shape, dtype, device)
    return Tensor(init(shape, dtype), device=device)


def _deferred_tensor(init, shape, dtype, device):
    """A tensor of ``shape`` with no memory that draws its values later (no_init_parameters)."""
    t = Tensor(np.zeros((), dtype), device=device)
    t.data = t.device.xp.broadcast_to(t.data, shape)
    t.deferred_init = DeferredInit(init, shape, dtype)
    return t
