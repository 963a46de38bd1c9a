"""SINGA's ``initializer``: fill a tensor in place from the framework's seeded stream.

Fans follow SINGA (and Keras): a 2-D shape is ``(fan_in, fan_out)``; a 3-5-D kernel
``(out, in, *k)`` has ``fan_in = in * prod(k)`` and ``fan_out = out * prod(k)``; anything
else uses ``sqrt(size)`` for both. Normal fills have ``std = sqrt(scale / n)`` and uniform
fills the limit ``sqrt(3 * scale / n)``, ``n`` being the fan the rule names.

>>> import numpy as np
>>> from minitorch_dist.singa import initializer, tensor
>>> t = tensor.Tensor((2, 3))
>>> initializer.eye(t)
>>> tensor.to_numpy(t).tolist()
[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
"""
import math

import numpy as np

from .. import random as _random

__all__ = ["eye", "orthogonal", "lecun_uniform", "lecun_normal", "glorot_normal",
           "glorot_uniform", "he_normal", "he_uniform", "gaussian", "xavier", "glorot", "msra",
           "uniform"]


def eye(t):
    """The identity matrix (2-D ``t``)."""
    if len(t.shape) != 2:
        raise ValueError(f"initializer.eye: needs a 2-D tensor, got shape {t.shape}")
    t.copy_from_numpy(np.eye(t.shape[0], t.shape[1], dtype=np.float32))


def orthogonal(t, gain=1.0):
    """A random orthogonal matrix times ``gain`` (2-D ``t``)."""
    if len(t.shape) != 2:
        raise ValueError(f"initializer.orthogonal: needs a 2-D tensor, got shape {t.shape}")
    a = _random.rng().normal(0.0, 1.0, t.shape)
    u, _, v = np.linalg.svd(a, full_matrices=False)
    q = u if u.shape == t.shape else v
    t.copy_from_numpy((gain * q).astype(np.float32))


def _fans(shape):
    if len(shape) == 2:
        return shape[0], shape[1]
    if len(shape) in (3, 4, 5):
        field = int(np.prod(shape[2:]))
        return shape[1] * field, shape[0] * field
    size = math.sqrt(float(np.prod(shape)))
    return size, size


def _fill(t, scale, mode, distribution):
    fan_in, fan_out = _fans(t.shape)
    n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
    scale /= max(1.0, float(n))
    if distribution == "normal":
        t.gaussian(0.0, math.sqrt(scale))
    else:
        limit = math.sqrt(3.0 * scale)
        t.uniform(-limit, limit)


def lecun_uniform(t):
    """U(-l, l) with ``l = sqrt(3 / fan_in)``."""
    _fill(t, 1.0, "fan_in", "uniform")


def lecun_normal(t):
    """N(0, 1 / fan_in)."""
    _fill(t, 1.0, "fan_in", "normal")


def glorot_normal(t):
    """N(0, 2 / (fan_in + fan_out)) (Xavier normal)."""
    _fill(t, 1.0, "fan_avg", "normal")


def glorot_uniform(t):
    """U(-l, l) with ``l = sqrt(6 / (fan_in + fan_out))`` (Xavier uniform)."""
    _fill(t, 1.0, "fan_avg", "uniform")


def he_normal(t):
    """N(0, 2 / fan_in)."""
    _fill(t, 2.0, "fan_in", "normal")


def he_uniform(t):
    """U(-l, l) with ``l = sqrt(6 / fan_in)``."""
    _fill(t, 2.0, "fan_in", "uniform")


def gaussian(t, fan_in=0, fan_out=0):
    """SINGA's deprecated rule: N(0, std²), ``std = sqrt(2 avg / (fan_in + fan_out))`` with
    ``avg`` 2, or 1 when one fan is 0."""
    assert fan_in > 0 or fan_out > 0, "fan_in and fan_out cannot be 0 at the same time"
    avg = 1 if fan_in * fan_out == 0 else 2
    t.gaussian(0, math.sqrt(2.0 * avg / (fan_in + fan_out)))


def xavier(t):
    """U(-s, s) with ``s = sqrt(6 / (rows + cols))`` (deprecated in SINGA)."""
    scale = math.sqrt(6.0 / (t.shape[0] + t.shape[1]))
    t.uniform(-scale, scale)


def glorot(t):
    """N(0, 1) times ``sqrt(2 / (rows + cols))`` (deprecated in SINGA)."""
    t.gaussian(0, 1)
    t *= math.sqrt(2.0 / (t.shape[0] + t.shape[1]))


def msra(t):
    """N(0, 2 / rows) (deprecated in SINGA)."""
    t.gaussian(0, math.sqrt(2.0 / t.shape[0]))


def uniform(t, fan_in=0, fan_out=0):
    """SINGA 1.x's rule: U(-s, s) with ``s = sqrt(3 avg / (fan_in + fan_out))``."""
    assert fan_in > 0 or fan_out > 0, "fan_in and fan_out cannot be 0 at the same time"
    avg = 1 if fan_in * fan_out == 0 else 2
    scale = math.sqrt(3.0 * avg / (fan_in + fan_out))
    t.uniform(-scale, scale)
