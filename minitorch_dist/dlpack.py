"""DLPack interop: share memory with NumPy, CuPy and PyTorch without copies."""
import numpy as np

from .backend import dtypes, get_device
from .tensor import Tensor

_DLPACK_CPU, _DLPACK_CUDA = 1, 2


def from_dlpack(obj):
    """A Tensor sharing memory with ``obj`` (anything with ``__dlpack__``).

    >>> import numpy as np, minitorch_dist as ms
    >>> a = np.arange(3.0)
    >>> t = ms.from_dlpack(a); a[0] = 7.0
    >>> t.asnumpy().tolist()
    [7.0, 1.0, 2.0]
    """
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack expects an object with __dlpack__ (NumPy, CuPy, PyTorch), "
                        f"got {type(obj).__name__}")
    kind, index = obj.__dlpack_device__()
    if kind == _DLPACK_CPU:
        device = get_device("CPU")
        data = np.from_dlpack(obj)
    elif kind == _DLPACK_CUDA:
        device = get_device(f"GPU:{index}")
        if device.virtual:
            raise ValueError("from_dlpack got CUDA memory but the GPU is virtual "
                             "(MINITORCH_DIST_VIRTUAL_GPU=1); copy it to the host first")
        data = device.xp.from_dlpack(obj)
    else:
        raise ValueError(f"from_dlpack supports CPU and CUDA memory, got DLPack device type {kind}")
    if data.dtype not in dtypes.SUPPORTED:
        raise TypeError(f"from_dlpack got dtype {data.dtype}, which is not supported; expected one of "
                        f"{[str(d) for d in dtypes.SUPPORTED]}")
    return Tensor._make(data, device)
