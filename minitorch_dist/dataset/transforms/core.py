"""The transform base class, ``TypeCast``, ``Compose`` and how ``map`` applies a list.

A transform is a callable on one sample's arrays. A transform that can also work on a
whole stack of samples (leading axis = samples) with the same result per sample defines
``apply_batch``; ``Dataset.map`` then applies it to thousands of samples per call.
"""
import numpy as np


class Transform:
    """Base class: ``__call__`` handles one sample; ``apply_batch`` a stack of samples."""

    def __call__(self, *arrays):
        raise NotImplementedError

    def apply_batch(self, *arrays):
        """Same as ``__call__`` on every sample of the stacks ``arrays`` (axis 0 = samples)."""
        raise NotImplementedError

    def __repr__(self):
        settings = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({settings})"


def supports_batch(operation):
    """Whether ``map`` may apply ``operation`` to a whole stack of samples at once."""
    if not callable(getattr(operation, "apply_batch", None)):
        return False
    return bool(getattr(operation, "batchable", True))


class TypeCast(Transform):
    """Cast to ``dtype`` (a NumPy dtype such as ``ms.int32``, or a name such as "int32").

    >>> import numpy as np, minitorch_dist as ms
    >>> TypeCast(ms.int32)(np.uint32(7)).dtype
    dtype('int32')
    """

    def __init__(self, data_type):
        try:
            self.data_type = np.dtype(data_type)
        except TypeError:
            raise TypeError(f"TypeCast: cannot interpret {data_type!r} as a dtype; "
                            "pass e.g. ms.int32 or 'float32'") from None

    def __call__(self, array):
        return np.asarray(array).astype(self.data_type)

    def apply_batch(self, arrays):
        return np.asarray(arrays).astype(self.data_type)


class Compose(Transform):
    """Several transforms applied in order, usable as one ``map`` operation.

    >>> import numpy as np
    >>> from minitorch_dist.dataset import vision
    >>> Compose([vision.Rescale(0.5, 0), TypeCast("int32")])(np.array([4, 6])).tolist()
    [2, 3]
    """

    def __init__(self, transforms):
        transforms = list(transforms)
        if not transforms:
            raise ValueError("Compose: needs at least one transform")
        for t in transforms:
            if not callable(t):
                raise TypeError(f"Compose: every transform must be callable, got {t!r}")
        self.transforms = transforms
        self.batchable = all(supports_batch(t) for t in transforms)

    def __call__(self, *arrays):
        return _unwrap(apply_operations(self.transforms, arrays, batched=False))

    def apply_batch(self, *arrays):
        return _unwrap(apply_operations(self.transforms, arrays, batched=True))


def apply_operations(operations, values, batched):
    """Run ``operations`` in order on the tuple ``values``; always returns a tuple.

    A tuple result feeds several arguments to the next operation; anything else is one value.
    """
    values = tuple(values)
    for op in operations:
        out = op.apply_batch(*values) if batched else op(*values)
        values = out if isinstance(out, tuple) else (out,)
    return values


def _unwrap(values):
    return values[0] if len(values) == 1 else values
