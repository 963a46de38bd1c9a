"""Cast: change a tensor's element type."""
from ..backend import dtypes, half
from .primitive import Primitive

__all__ = ["Cast", "cast"]


class Cast(Primitive):
    """MindSpore's ``ops.Cast()(x, dtype)``; ``dtype`` is a dtype (``ms.float16``, a NumPy
    dtype) or its name (``"float32"``). Casting to the same dtype returns the data unchanged.

    The gradient flows back cast to the input's dtype; a cast to an integer or boolean type
    ends the gradient there.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Cast()(ms.Tensor([1.7, -2.2]), ms.int32).asnumpy().tolist()
    [1, -2]
    """

    def __call__(self, x, dtype):
        try:
            dtype = dtypes.to_dtype(dtype)
        except TypeError as err:
            raise TypeError(f"{self.name}: {err}") from None
        return self.apply(x, dtype=dtype)

    def forward(self, ctx, x, dtype):
        return half.convert(x, dtype)

    def backward(self, ctx, g):
        # The engine casts the gradient back to the input's dtype.
        return (g if ctx.needs_input_grad[0] else None,)


_cast = Cast()


def cast(x, dtype):
    """``x`` with elements of ``dtype`` (a dtype or a name such as ``"float16"``)."""
    return _cast(x, dtype)
