"""More of MindSpore's activation layers (``nn.ELU``, ``nn.HSwish``, ``nn.PReLU``, ...), each a
thin cell over the functional op of the same meaning; ``nn.get_activation`` knows their names.

>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> nn.ReLU6()(ms.Tensor([-1.0, 3.0, 9.0])).asnumpy().tolist()
[0.0, 3.0, 6.0]
"""
import numpy as np

from ... import ops
from ...common.initializer import initializer
from ..cell import Cell
from ..parameter import Parameter
from .activation import _BY_NAME as _ACTIVATION_NAMES

__all__ = ["CELU", "ELU", "FastGelu", "Hardtanh", "HShrink", "HSigmoid", "HSwish", "LogSigmoid",
           "LRN", "Mish", "Softsign", "PReLU", "ReLU6", "RReLU", "SeLU", "SiLU", "Softmin",
           "SoftShrink", "Tanhshrink", "Threshold"]


class _Elementwise(Cell):
    """An activation with fixed settings: ``fn(x, **settings)``."""
    fn = None

    def __init__(self, **settings):
        super().__init__()
        object.__setattr__(self, "settings", settings)

    def construct(self, x):
        return type(self).fn(x, **self.settings)

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in self.settings.items())


def _layer(name, fn, **defaults):
    def __init__(self, *args, **kwargs):
        settings = dict(defaults)
        settings.update(zip(defaults, args))
        unknown = set(kwargs) - set(defaults)
        if unknown:
            raise TypeError(f"nn.{name}: unexpected argument(s) {sorted(unknown)}; expected "
                            f"{list(defaults)}")
        settings.update(kwargs)
        _Elementwise.__init__(self, **settings)
    return type(name, (_Elementwise,), {"fn": staticmethod(fn), "__init__": __init__,
                                        "__doc__": f"MindSpore's ``nn.{name}``.", "__module__": __name__})


CELU = _layer("CELU", ops.celu, alpha=1.0)
ELU = _layer("ELU", ops.elu, alpha=1.0)
FastGelu = _layer("FastGelu", ops.fast_gelu)
Hardtanh = _layer("Hardtanh", ops.hardtanh, min_val=-1.0, max_val=1.0)
HShrink = _layer("HShrink", ops.hardshrink, lambd=0.5)
HSigmoid = _layer("HSigmoid", ops.hardsigmoid)
HSwish = _layer("HSwish", ops.hardswish)
LogSigmoid = _layer("LogSigmoid", ops.logsigmoid)
Mish = _layer("Mish", ops.mish)
Softsign = _layer("Softsign", ops.softsign)
ReLU6 = _layer("ReLU6", ops.relu6)
RReLU = _layer("RReLU", ops.rrelu, lower=1.0 / 8, upper=1.0 / 3)
SeLU = _layer("SeLU", ops.selu)
SiLU = _layer("SiLU", ops.silu)
Softmin = _layer("Softmin", ops.softmin, axis=-1)
SoftShrink = _layer("SoftShrink", ops.softshrink, lambd=0.5)
Tanhshrink = _layer("Tanhshrink", ops.tanhshrink)
Threshold = _layer("Threshold", ops.threshold, threshold=0.0, value=0.0)
LRN = _layer("LRN", ops.lrn, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5,
             norm_region="ACROSS_CHANNELS")


class PReLU(Cell):
    """``max(0, x) + w * min(0, x)`` with a learnt slope ``w`` per channel (or one)."""

    def __init__(self, channel=1, w=0.25):
        super().__init__()
        if isinstance(channel, bool) or not isinstance(channel, int) or channel < 1:
            raise ValueError(f"nn.PReLU: channel must be a positive int, got {channel!r}")
        values = np.full(channel, w, np.float32) if np.isscalar(w) else np.asarray(w, np.float32)
        self.w = Parameter(initializer(values, [channel]), name="a")

    def construct(self, x):
        return ops.prelu(x, self.w)


# nn.get_activation (layers/activation.py) knows these names too
_ACTIVATION_NAMES.update({
    "relu6": ReLU6, "fast_gelu": FastGelu, "elu": ELU, "prelu": PReLU, "hswish": HSwish,
    "hsigmoid": HSigmoid, "logsigmoid": LogSigmoid, "softshrink": SoftShrink, "hshrink": HShrink,
    "mish": Mish, "silu": SiLU, "selu": SeLU, "softsign": Softsign, "softmin": Softmin,
    "celu": CELU, "tanhshrink": Tanhshrink})
