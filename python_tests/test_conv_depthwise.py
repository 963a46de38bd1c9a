"""Depthwise convolutions (ops/depthwise.py) against their twin, the im2col path, and the
memory they keep for backward (the input, not a kh*kw-times-larger patch matrix)."""
import gc
import tracemalloc

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import ops
from minitorch_dist.ops import conv


def run(monkeypatch, algorithm, x, w, b, channels_last=False, **kwargs):
    monkeypatch.setattr(conv, "ALGORITHM", algorithm)
    data = x.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2) if channels_last else x
    xt = ms.Tensor(data, requires_grad=True)
    wt = ms.Tensor(w, requires_grad=True)
    bt = None if b is None else ms.Tensor(b, requires_grad=True)
    prim = ops.Conv2D(w.shape[0], w.shape[2:], group=x.shape[1], **kwargs)
    y = prim(xt, wt) if bt is None else prim(xt, wt, bt)
    seed = np.random.default_rng(1).standard_normal(y.shape).astype(x.dtype)
    (y * ms.Tensor(seed)).sum().backward()
    grads = [t.grad.asnumpy() for t in (xt, wt, bt) if t is not None]
    return y.asnumpy(), grads


CASES = [
    dict(pad_mode="pad", pad=1),
    dict(pad_mode="same", stride=2),
    dict(pad_mode="valid", dilation=2),
    dict(pad_mode="pad", pad=(0, 1, 2, 1), stride=(2, 1)),
]


@pytest.mark.parametrize("kwargs", CASES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
def test_depthwise_equals_the_im2col_twin(monkeypatch, kwargs, bias, channels_last):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6, 9, 8)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32) if bias else None
    ours = run(monkeypatch, "auto", x, w, b, channels_last, **kwargs)
    twin = run(monkeypatch, "im2col", x, w, b, channels_last, **kwargs)
    np.testing.assert_allclose(ours[0], twin[0], rtol=1e-5, atol=1e-5)
    for g, t in zip(ours[1], twin[1]):
        np.testing.assert_allclose(g, t, rtol=1e-5, atol=1e-4)


def test_float16_rounds_once_like_the_twin(monkeypatch):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float16)
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float16)
    ours = run(monkeypatch, "auto", x, w, None, pad_mode="pad", pad=1)
    twin = run(monkeypatch, "im2col", x, w, None, pad_mode="pad", pad=1)
    assert ours[0].dtype == np.float16
    np.testing.assert_allclose(ours[0].astype(np.float32), twin[0].astype(np.float32),
                               rtol=2e-3, atol=2e-3)


def test_grouped_but_not_depthwise_stays_on_im2col(monkeypatch):
    monkeypatch.setattr(conv, "ALGORITHM", "auto")
    x = ms.Tensor(np.ones((1, 4, 5, 5), np.float32), requires_grad=True)
    w = ms.Tensor(np.ones((4, 2, 3, 3), np.float32), requires_grad=True)
    y = ops.Conv2D(4, 3, group=2)(x, w)
    assert y.grad_fn.ctx.algorithm == "im2col"


def test_backward_keeps_the_input_not_a_patch_matrix(monkeypatch):
    monkeypatch.setattr(conv, "ALGORITHM", "auto")
    rng = np.random.default_rng(3)
    x = ms.Tensor(rng.standard_normal((4, 32, 64, 64)).astype(np.float32), requires_grad=True)
    w = ms.Tensor(rng.standard_normal((32, 1, 3, 3)).astype(np.float32), requires_grad=True)
    prim = ops.Conv2D(32, 3, pad_mode="pad", pad=1, group=32)
    first = prim(x, w)      # held, so that a pooled patch buffer could not be reused unseen
    gc.collect()
    tracemalloc.start()
    y = prim(x, w)
    live = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert y.grad_fn.ctx.algorithm == first.grad_fn.ctx.algorithm == "depthwise"
    # the output itself plus small change; im2col kept 9x the input besides
    assert live < 1.5 * x.data.nbytes, live / x.data.nbytes
