"""Dense: the fully connected layer ``y = x Wᵀ + b``."""
import math

from ... import ops
from ...backend import dtypes
from ...common.initializer import HeUniform, Uniform, initializer
from ..cell import Cell
from ..parameter import Parameter
from .activation import get_activation
from .basic import positive_int
from .logical_shape import logical_shape

__all__ = ["Dense"]


class Dense(Cell):
    """Fully connected layer: ``activation(x @ weight.T + bias)``.

    ``weight`` has shape ``(out_channels, in_channels)`` (MindSpore's and PyTorch's layout).
    The defaults draw the weight from ``HeUniform(sqrt(5))`` and the bias from
    ``Uniform(1/sqrt(in_channels))``, like PyTorch's ``Linear`` and MindSpore 2.x.
    Inputs with more than two axes are treated as a batch of rows over the last axis.
    The primitives are attributes (``matmul``, ``bias_add``) so they can be placed with
    ``net.fc.matmul.set_device("CPU")``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> fc = nn.Dense(3, 2, weight_init="ones", bias_init="zeros")
    >>> fc(ms.Tensor([[1.0, 2.0, 3.0]])).asnumpy().tolist()
    [[6.0, 6.0]]
    >>> [p.name for p in fc.trainable_params()]
    ['weight', 'bias']
    """

    def __init__(self, in_channels, out_channels, weight_init=None, bias_init=None,
                 has_bias=True, activation=None, dtype=dtypes.float32):
        super().__init__()
        self.in_channels = positive_int(in_channels, "Dense", "in_channels")
        self.out_channels = positive_int(out_channels, "Dense", "out_channels")
        self.has_bias = bool(has_bias)
        if weight_init is None:
            weight_init = HeUniform(math.sqrt(5))
        self.weight = Parameter(initializer(weight_init, [self.out_channels, self.in_channels], dtype))
        self.bias = None
        if self.has_bias:
            if bias_init is None:
                bias_init = Uniform(1.0 / math.sqrt(self.in_channels))
            self.bias = Parameter(initializer(bias_init, [self.out_channels], dtype))
        self.matmul = ops.MatMul(transpose_b=True)
        self.bias_add = ops.Add()
        self.reshape = ops.Reshape()
        self.activation = get_activation(activation)

    def construct(self, x):
        shape = logical_shape(x)      # whole, also on a rank's slice in a sharded run
        if not shape or shape[-1] != self.in_channels:
            raise ValueError(f"Dense expected input with last dimension {self.in_channels}, "
                             f"got shape {tuple(shape)}")
        _check_input_dtype(x, self.weight)
        flat = len(shape) != 2
        if flat:
            x = self.reshape(x, (-1, self.in_channels))
        out = self.matmul(x, self.weight)
        if self.has_bias:
            out = self.bias_add(out, self.bias)
        if self.activation is not None:
            out = self.activation(out)
        if flat:
            out = self.reshape(out, tuple(shape[:-1]) + (self.out_channels,))
        return out

    def extra_repr(self):
        act = f", activation={type(self.activation).__name__}" if self.activation is not None else ""
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"has_bias={self.has_bias}{act}")


def _check_input_dtype(x, weight):
    """MindSpore's MatMul refuses operands of different types, so an integer or boolean
    input (token ids, a label column) is refused here rather than promoted to float64."""
    if not dtypes.is_floating(x.dtype):
        raise TypeError(f"nn.Dense: the input has dtype {x.dtype} but the weight is "
                        f"{weight.dtype}; Dense multiplies floating-point inputs only (as "
                        f"MindSpore's MatMul, which needs equal input types): cast the input "
                        f"first, e.g. x.astype(ms.{weight.dtype})")
