"""Gradients as raw arrays on their parameter's device, checked against the parameter."""
from ...row_tensor import RowTensor
from ...tensor import Tensor

__all__ = ["gradient_array"]


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
