"""``logical_shape``: the shape a layer's checks compare against, whole even on a slice.

Inside an operator-sharded run each rank executes ``construct`` on its own slices, so a
tensor's ``shape`` is local; MindSpore compiles ``construct`` on the whole (logical) shapes,
and its layers' checks see those. The parallel layer installs a provider (thread-aware) that
names the whole shape of a tensor it laid out; elsewhere the tensor's own shape is the answer.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> logical_shape(ms.Tensor(np.zeros((2, 3), np.float32)))
(2, 3)
"""

__all__ = ["logical_shape", "set_logical_shape_provider"]

_provider = None


def set_logical_shape_provider(provider):
    """Install ``provider(tensor) -> whole shape or None``; returns the previous one."""
    global _provider
    previous, _provider = _provider, provider
    return previous


def logical_shape(tensor):
    """The whole shape of ``tensor`` (its own shape outside a sharded run)."""
    if _provider is not None:
        whole = _provider(tensor)
        if whole is not None:
            return tuple(whole)
    return tuple(tensor.shape)
