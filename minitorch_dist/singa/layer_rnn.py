"""SINGA's recurrent and lookup layers: ``RNN``, ``LSTM`` and ``Embedding``.

As in SINGA they are plain compositions of autograd operators (``matmul``, ``add_bias``,
``tanh``/``relu``, ``sigmoid``, ``mul``), so the core tape records every step and
``autograd.backward`` reaches every weight. Shapes and initialisation are SINGA's:

* ``RNN(input_size, hidden_size, ...)``: ``forward(xs, h0)`` over a list of ``(batch,
  input_size)`` steps returns ``(outputs, h)``; ``h' = act(x Wx + h Wh + b)``; ``Wx``,
  ``Wh`` ~ N(0, 1), ``b`` = 0.
* ``LSTM(input_size, hidden_size, ...)``: ``forward(xs, (h0, c0))`` returns
  ``(outputs, h, c)``; gates i, f, o (sigmoid) and g (tanh), each ``x Wx_k + Bx_k +
  h Wh_k + Bh_k``; weights ~ N(0, 0.01²), biases 0.
* ``Embedding(input_dim, output_dim, initializer="gaussian")``: rows of ``W`` (N(0, 1) or
  U(-1, 1)) picked by integer ids.

Options SINGA accepts but does not implement for these layers (``num_layers`` other than 1,
``batch_first``, ``dropout``, ``bidirectional``) are refused with a clear error here.
``CudnnRNN`` needs cuDNN and is refused on this build.

>>> import numpy as np
>>> from minitorch_dist.singa import layer, tensor
>>> rnn = layer.RNN(3, 2)
>>> xs = [tensor.from_numpy(np.ones((4, 3), np.float32)) for _ in range(5)]
>>> out, h = rnn(xs, tensor.from_numpy(np.zeros((4, 2), np.float32)))
>>> len(out), h.shape
(5, (4, 2))
"""
from . import autograd, tensor
from .layer_base import Layer

__all__ = ["RNN_Base", "RNN", "LSTM", "Embedding"]


def _check_options(name, num_layers, batch_first, dropout, bidirectional):
    given = {"num_layers": (num_layers, 1), "batch_first": (batch_first, False),
             "dropout": (dropout, 0), "bidirectional": (bidirectional, False)}
    for option, (value, plain) in given.items():
        if value != plain:
            raise ValueError(f"layer.{name}: {option}={value!r} is not implemented (SINGA's "
                             f"{name} layer ignores it too); only {option}={plain!r} runs")


def _param(shape, device, std=None):
    t = tensor.Tensor(shape, device, requires_grad=True, stores_grad=True)
    if std is not None:
        t.gaussian(0.0, std)
    return t


class RNN_Base(Layer):
    """SINGA's base of the recurrent layers."""

    def step_forward(self, *args, **kwargs):
        raise NotImplementedError(f"layer.{type(self).__name__} must define step_forward")


class RNN(RNN_Base):
    """SINGA's vanilla ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh',
    bias=True, batch_first=False, dropout=0, bidirectional=False)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super().__init__()
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"layer.RNN: nonlinearity must be 'tanh' or 'relu', got "
                             f"{nonlinearity!r}")
        _check_options("RNN", num_layers, batch_first, dropout, bidirectional)
        self.input_size, self.hidden_size = input_size, hidden_size
        self.nonlinearity, self.bias = nonlinearity, bias

    def initialize(self, xs, h0):
        dev = h0.device
        self.Wx = _param((self.input_size, self.hidden_size), dev, 1.0)
        self.Wh = _param((self.hidden_size, self.hidden_size), dev, 1.0)
        self.b = _param((self.hidden_size,), dev)

    def forward(self, xs, h0):
        out, h = [], h0
        for x in xs:
            h = self.step_forward(x, h, self.Wx, self.Wh, self.b)
            out.append(h)
        return out, h

    def step_forward(self, x, h, Wx, Wh, b):
        y = autograd.add(autograd.matmul(h, Wh), autograd.matmul(x, Wx))
        y = autograd.add_bias(y, b, axis=0)
        return autograd.tanh(y) if self.nonlinearity == "tanh" else autograd.relu(y)


_GATES = ("i", "f", "o", "g")


class LSTM(RNN_Base):
    """SINGA's ``LSTM(input_size, hidden_size, nonlinearity='tanh', num_layers=1,
    bias=True, batch_first=False, dropout=0, bidirectional=False)``."""

    def __init__(self, input_size, hidden_size, nonlinearity="tanh", num_layers=1, bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super().__init__()
        if nonlinearity != "tanh":
            raise ValueError(f"layer.LSTM: nonlinearity must be 'tanh' (SINGA's LSTM uses "
                             f"tanh), got {nonlinearity!r}")
        _check_options("LSTM", num_layers, batch_first, dropout, bidirectional)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias

    def initialize(self, xs, h0_c0):
        dev = h0_c0[0].device
        for k in _GATES:
            setattr(self, f"Wx_{k}", _param((self.input_size, self.hidden_size), dev, 0.01))
        for k in _GATES:
            setattr(self, f"Wh_{k}", _param((self.hidden_size, self.hidden_size), dev, 0.01))
        for kind in ("Bx", "Bh"):
            for k in _GATES:
                setattr(self, f"{kind}_{k}", _param((self.hidden_size,), dev))

    def forward(self, xs, h0_c0):
        h, c = h0_c0
        out = []
        for x in xs:
            h, c = self.step_forward(x, h, c)
            out.append(h)
        return out, h, c

    def _gate(self, k, x, h):
        y1 = autograd.add_bias(autograd.matmul(x, getattr(self, f"Wx_{k}")),
                               getattr(self, f"Bx_{k}"), axis=0)
        y2 = autograd.add_bias(autograd.matmul(h, getattr(self, f"Wh_{k}")),
                               getattr(self, f"Bh_{k}"), axis=0)
        y = autograd.add(y1, y2)
        return autograd.tanh(y) if k == "g" else autograd.sigmoid(y)

    def step_forward(self, x, h, c):
        i, f, o, g = (self._gate(k, x, h) for k in _GATES)
        cout = autograd.add(autograd.mul(f, c), autograd.mul(i, g))
        return autograd.mul(o, autograd.tanh(cout)), cout


class Embedding(Layer):
    """SINGA's ``Embedding(input_dim, output_dim, initializer='gaussian')``."""

    def __init__(self, input_dim, output_dim, initializer="gaussian"):
        super().__init__()
        if initializer not in ("gaussian", "uniform"):
            raise ValueError(f"layer.Embedding: initializer must be 'gaussian' or 'uniform', "
                             f"got {initializer!r}")
        self.input_dim, self.output_dim, self.initializer = input_dim, output_dim, initializer

    def initialize(self, x):
        self.W = _param((self.input_dim, self.output_dim), x.device)
        if self.initializer == "uniform":
            self.W.uniform(-1.0, 1.0)
        else:
            self.W.gaussian(0.0, 1.0)

    def from_pretrained(self, W, freeze=True):
        """Load ``W`` (a Tensor or array); ``freeze`` keeps it out of training."""
        if not self._initialized:
            raise RuntimeError("layer.Embedding.from_pretrained: call the layer once first "
                               "(its weight is created at the first call)")
        self.W.copy_from(W)
        self.W.requires_grad = not freeze

    def forward(self, x):
        return autograd.embedding(x, self.W)
