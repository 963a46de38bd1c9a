"""MindSpore's random functions, drawn from the framework's generator (``ms.set_seed``):
``standard_normal``, ``uniform``, ``randn``, ``randint``, ``randperm``, ``bernoulli``,
``multinomial``, ``gamma``, ``poisson``, ``laplace``, ``shuffle``, ...

``seed``/``seed2`` arguments, where MindSpore has them, must be None or ints; given, they
draw from a generator seeded with them, so the same seed gives the same numbers.

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> ms.set_seed(1); a = ops.randn(2, 3)
>>> ms.set_seed(1); b = ops.randn(2, 3)
>>> a.shape, bool((a == b).all())
((2, 3), True)
"""
import numpy as np

from ..backend import dtypes
from ..random import rng
from ..tensor import Tensor
from .array_func import _constant, _host

__all__ = ["standard_normal", "normal", "uniform", "rand", "rand_like", "randn", "randn_like",
           "randint", "randint_like", "randperm", "bernoulli", "multinomial",
           "random_categorical", "gamma", "random_gamma", "poisson", "random_poisson",
           "laplace", "standard_laplace", "shuffle", "choice_with_mask", "uniform_int",
           "uniform_real"]


def _gen(seed=None, seed2=None):
    for name, value in (("seed", seed), ("seed2", seed2)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be None or an int, got {value!r}")
    if seed is None and not seed2:
        return rng()
    return np.random.default_rng([seed or 0, seed2 or 0])


def _shape(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"shape must be non-negative, got {shape}")
    return shape


def _float(values, dtype=None):
    return _constant(values.astype(dtypes.to_dtype(dtype) if dtype else dtypes.float32))


def standard_normal(shape, seed=None, seed2=None):
    return _float(_gen(seed, seed2).standard_normal(_shape((shape,))))


def normal(shape, mean, stddev, seed=None):
    m = _host(mean) if isinstance(mean, Tensor) else mean
    s = _host(stddev) if isinstance(stddev, Tensor) else stddev
    return _float(_gen(seed).normal(m, s, _shape((shape,))))


def uniform(shape, minval, maxval, seed=None, dtype=dtypes.float32):
    lo = _host(minval) if isinstance(minval, Tensor) else minval
    hi = _host(maxval) if isinstance(maxval, Tensor) else maxval
    if dtypes.to_dtype(dtype).kind in "iu":
        return _constant(_gen(seed).integers(lo, hi, _shape((shape,))).astype(dtype))
    return _float(_gen(seed).uniform(lo, hi, _shape((shape,))), dtype)


def uniform_real(shape, seed=0, seed2=0):
    return _float(_gen(seed or None, seed2).random(_shape((shape,))))


def uniform_int(shape, minval, maxval, seed=0, seed2=0):
    return _constant(_gen(seed or None, seed2).integers(int(_host(minval)), int(_host(maxval)),
                                                        _shape((shape,))).astype(np.int32))


def rand(*size, dtype=None, seed=None):
    return _float(_gen(seed).random(_shape(size)), dtype)


def rand_like(input, seed=None, *, dtype=None):   # noqa: A002
    return _float(_gen(seed).random(input.shape), dtype or input.dtype)


def randn(*size, dtype=None, seed=None):
    return _float(_gen(seed).standard_normal(_shape(size)), dtype)


def randn_like(input, seed=None, *, dtype=None):   # noqa: A002
    return _float(_gen(seed).standard_normal(input.shape), dtype or input.dtype)


def randint(low, high, size, seed=None, *, dtype=None):
    return _constant(_gen(seed).integers(low, high, _shape((size,))).astype(
        dtypes.to_dtype(dtype) if dtype else np.int64))


def randint_like(input, low, high, seed=None, *, dtype=None):   # noqa: A002
    return randint(low, high, input.shape, seed, dtype=dtype or input.dtype)


def randperm(n, seed=0, offset=0, dtype=dtypes.int64):
    return _constant(_gen(seed or None).permutation(int(n)).astype(dtypes.to_dtype(dtype)))


def bernoulli(input, p=0.5, seed=None):   # noqa: A002
    prob = _host(p) if isinstance(p, Tensor) else p
    draw = _gen(seed).random(input.shape) < prob
    return _constant(draw.astype(input.dtype), input)


def multinomial(input, num_samples, replacement=True, seed=None):   # noqa: A002
    probs = _host(input).astype(np.float64)
    rows = probs.reshape(-1, probs.shape[-1])
    gen = _gen(seed)
    out = np.stack([gen.choice(len(r), num_samples, replace=replacement, p=r / r.sum())
                    for r in rows])
    return _constant(out.reshape(probs.shape[:-1] + (num_samples,)).astype(np.int64), input)


def random_categorical(logits, num_sample, seed=0, dtype=dtypes.int64):
    probs = np.exp(_host(logits) - _host(logits).max(-1, keepdims=True))
    return multinomial(Tensor(probs), num_sample, True, seed or None).astype(dtype)


def gamma(shape, alpha, beta, seed=None):
    a, b = _host(alpha), _host(beta)
    return _float(_gen(seed).gamma(a, 1.0 / b, _shape((shape,)) + np.broadcast_shapes(a.shape, b.shape)))


def random_gamma(shape, alpha, seed=0):
    a = _host(alpha)
    return _float(_gen(seed or None).gamma(a, 1.0, _shape((shape,)) + a.shape))


def poisson(shape, mean, seed=None):
    m = _host(mean)
    return _float(_gen(seed).poisson(m, _shape((shape,)) + m.shape))


def random_poisson(shape, rate, seed=None, dtype=dtypes.float32):
    r = _host(rate)
    return _float(_gen(seed).poisson(r, _shape((shape,)) + r.shape), dtype)


def laplace(shape, mean, lambda_param, seed=None):
    return _float(_gen(seed).laplace(_host(mean), _host(lambda_param), _shape((shape,))))


def standard_laplace(shape, seed=None, seed2=None):
    return _float(_gen(seed, seed2).laplace(0.0, 1.0, _shape((shape,))))


def shuffle(x, seed=None):
    order = _gen(seed).permutation(x.shape[0])
    return x[_constant(order, x)]


def choice_with_mask(input_x, count=256, seed=None, seed2=None):   # noqa: A002
    """``count`` random positions of true elements of the bool ``input_x`` and a mask of
    which rows are real (padding rows are zeros)."""
    found = np.argwhere(_host(input_x))
    pick = _gen(seed, seed2).permutation(len(found))[:count]
    index = np.zeros((count, found.shape[1] if found.size else input_x.ndim), np.int32)
    index[:len(pick)] = found[pick]
    mask = np.arange(count) < len(pick)
    return _constant(index, input_x), _constant(mask, input_x)
