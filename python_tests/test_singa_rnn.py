"""SINGA's RNN, LSTM and Embedding layers: shapes, NumPy reference forward, and gradients
checked by finite differences."""
import numpy as np
import pytest

from minitorch_dist.singa import autograd, layer, tensor
from minitorch_dist.singa.unsupported import SingaNotSupported


def T(a):
    return tensor.from_numpy(np.asarray(a, np.float32))


def _steps(rng, n=3, batch=2, size=3):
    return [T(rng.random((batch, size))) for _ in range(n)]


def test_rnn_matches_the_numpy_recurrence_and_its_gradient():
    rng = np.random.default_rng(1)
    xs, h0 = _steps(rng), T(np.zeros((2, 2)))
    rnn = layer.RNN(3, 2)
    out, h = rnn(xs, h0)
    Wx, Wh, b = (tensor.to_numpy(p) for p in (rnn.Wx, rnn.Wh, rnn.b))
    ref = np.zeros((2, 2), np.float32)
    for x in xs:
        ref = np.tanh(ref @ Wh + tensor.to_numpy(x) @ Wx + b)
    np.testing.assert_allclose(tensor.to_numpy(h), ref, rtol=1e-5)
    assert len(out) == 3 and out[-1] is h
    autograd.training = True
    loss = autograd.mse_loss(h, T(np.ones((2, 2))))
    g = {p.name: tensor.to_numpy(d) for p, d in autograd.backward(loss)}
    assert set(g) == {"Wx", "Wh", "b"}

    def loss_at(wx):
        hh = np.zeros((2, 2))
        for x in xs:
            hh = np.tanh(hh @ Wh + tensor.to_numpy(x) @ wx + b)
        return ((hh - 1) ** 2).mean()
    eps, numeric = 1e-3, np.zeros_like(Wx)
    for i in np.ndindex(Wx.shape):
        d = np.zeros_like(Wx, dtype=np.float64)
        d[i] = eps
        numeric[i] = (loss_at(Wx + d) - loss_at(Wx - d)) / (2 * eps)
    np.testing.assert_allclose(g["Wx"], numeric, rtol=2e-2, atol=1e-4)


def test_lstm_gates_follow_singa():
    rng = np.random.default_rng(2)
    xs = _steps(rng)
    h0, c0 = T(np.zeros((2, 2))), T(np.zeros((2, 2)))
    lstm = layer.LSTM(3, 2)
    out, h, c = lstm(xs, (h0, c0))
    p = {k: tensor.to_numpy(v) for k, v in lstm.get_params().items()}
    assert len(p) == 16 and p["Wx_i"].shape == (3, 2) and p["Bh_g"].shape == (2,)

    def gate(k, x, hh, act):
        return act(x @ p[f"Wx_{k}"] + p[f"Bx_{k}"] + hh @ p[f"Wh_{k}"] + p[f"Bh_{k}"])
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    hh = cc = np.zeros((2, 2))
    for x in xs:
        x = tensor.to_numpy(x)
        i, f, o, g = (gate(k, x, hh, sig if k != "g" else np.tanh) for k in "ifog")
        cc = f * cc + i * g
        hh = o * np.tanh(cc)
    np.testing.assert_allclose(tensor.to_numpy(h), hh, rtol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(c), cc, rtol=1e-5)
    assert len(out) == 3


def test_embedding_picks_rows_and_trains_them():
    emb = layer.Embedding(5, 2)
    ids = T([[0, 3], [3, 1]])
    y = emb(ids)
    w = tensor.to_numpy(emb.W)
    np.testing.assert_array_equal(tensor.to_numpy(y), w[[[0, 3], [3, 1]]])
    autograd.training = True
    loss = autograd.reduce_sum(y, None, 0)
    [(param, grad)] = list(autograd.backward(loss))
    assert param.name == "W" and tensor.to_numpy(grad)[3].tolist() == [2.0, 2.0]


def test_unimplemented_options_are_refused():
    with pytest.raises(ValueError, match="num_layers=2"):
        layer.RNN(3, 2, num_layers=2)
    with pytest.raises(ValueError, match="bidirectional"):
        layer.LSTM(3, 2, bidirectional=True)
    with pytest.raises(SingaNotSupported, match="CudnnRNN"):
        layer.CudnnRNN
