"""SINGA's ``singa_wrap`` (its SWIG module), for the one name the guide takes from it.

SINGA's examples write ``from singa import singa_wrap as singa`` and then
``singa.NcclIdHolder()``; with this module ``from minitorch_dist.singa import singa_wrap as
singa`` works the same. ``NcclIdHolder`` is minitorch_dist's ``UniqueId``: a picklable
rendezvous ticket (127.0.0.1, a free port and a secret token) that the parent of a
``multiprocessing`` launch hands to its children.

>>> from minitorch_dist.singa import singa_wrap as singa
>>> nccl_id = singa.NcclIdHolder()
>>> nccl_id.host
'127.0.0.1'
"""
from ..communication.unique_id import NcclIdHolder
from .handles import BatchNormHandle, ConvHandle, PoolingHandle
from .unsupported import module_getattr

__all__ = ["NcclIdHolder", "ConvHandle", "BatchNormHandle", "PoolingHandle", "USE_DIST",
           "USE_CUDA"]

USE_DIST = True        # DistOpt is always available (MPI, TCP, or NCCL with CuPy)


def _cuda():
    from ..backend import cupy_or_none
    return cupy_or_none() is not None


def __getattr__(name):
    if name == "USE_CUDA":
        return _cuda()
    return _fallback(name)


_fallback = module_getattr("singa_wrap", {
    "Communicator": "use opt.DistOpt, which owns the communicator (DistOpt.communicator)",
    "Tensor": "use tensor.Tensor", "Device": "use the device module"}, __all__)
