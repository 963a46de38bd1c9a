"""Gradients as raw arrays on their parameter's device, checked against the parameter."""
from ...row_tensor import RowTensor
from ...tensor import Tensor

__all__ = ["gradient_array", "check_gradient_tuple"]


def gradient_array(grad, param, owner):
    """``grad`` (Tensor, RowTensor, array or None) as an array shaped, placed and typed like
    ``param``; None stays None. ``owner`` names the caller in the error message."""
    if grad is None:
        return None
    if isinstance(grad, RowTensor):
        grad = grad.to_dense()
    if isinstance(grad, Tensor):
        data = grad.data if grad.device is param.device else \
            param.device.copy_from(grad.data, grad.device)
    else:
        data = param.device.xp.asarray(grad)
    if tuple(data.shape) != param.shape:
        raise ValueError(f"{owner}: gradient for parameter {param.name!r} has shape "
                         f"{tuple(data.shape)}, expected {param.shape}")
    return data if data.dtype == param.dtype else data.astype(param.dtype)


def check_gradient_tuple(grads, count, owner, aligned_with):
    """Refuse ``grads`` unless it is a tuple or list of ``count`` gradients (one per parameter
    of ``aligned_with``, named in the message with ``owner``).

    >>> check_gradient_tuple((1, 2), 3, "DistOpt.step", "opt.parameters")
    Traceback (most recent call last):
    ...
    ValueError: DistOpt.step: expected a tuple of 3 gradients aligned with opt.parameters, got 2
    """
    if not isinstance(grads, (tuple, list)) or len(grads) != count:
        got = len(grads) if isinstance(grads, (tuple, list)) else type(grads).__name__
        raise ValueError(f"{owner}: expected a tuple of {count} gradients aligned with "
                         f"{aligned_with}, got {got}")
