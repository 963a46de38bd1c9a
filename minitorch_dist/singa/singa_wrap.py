"""SINGA's ``singa_wrap`` (its SWIG module): ``NcclIdHolder``, the low-level ``Tensor``
(``CTensor``), the operator handles, and the free math functions and CPU kernels that
SINGA's own tests and Python layer call (``wrap_math``, ``wrap_nn``). CUDA-only and
communicator internals raise ``SingaNotSupported`` naming the call.

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
from .ctensor import CTensor as Tensor, Gaussian, Uniform, kFloat, kFloat16, kFloat32, kInt
from .handles import BatchNormHandle, ConvHandle, PoolingHandle
from .unsupported import module_getattr
from . import wrap_math as _math, wrap_nn as _nn
from .wrap_math import *  # noqa: F401,F403 - SINGA's element-wise and shape functions
from .wrap_nn import *  # noqa: F401,F403 - SINGA's CPU conv, pooling and batch norm

__all__ = ["NcclIdHolder", "ConvHandle", "BatchNormHandle", "PoolingHandle", "USE_DIST",
           "USE_CUDA", "Tensor", "Gaussian", "Uniform", "kFloat", "kFloat16", "kFloat32",
           "kInt"] + [n for n in _math.__all__ if n != "host"] + list(_nn.__all__)

USE_DIST = True        # DistOpt is always available (MPI, TCP, or NCCL with CuPy)


def _cuda():
    from ..backend import cupy_or_none
    return cupy_or_none() is not None


def __getattr__(name):
    if name == "USE_CUDA":
        return _cuda()
    return _fallback(name)


_SWIG = "a SWIG internal of SINGA's C++ library with no counterpart here; use the tensor " \
        "and autograd modules"
_fallback = module_getattr("singa_wrap", {
    "Communicator": "use opt.DistOpt, which owns the communicator (DistOpt.communicator)",
    "Device": "use the device module", **{name: _SWIG for name in (
        "CudnnRNNHandle", "CudnnBatchNormHandle", "GpuRNNForwardTraining",
        "GpuRNNForwardInference", "GpuRNNBackwardx", "GpuRNNBackwardW", "GpuRNNBackwardxEx",
        "GpuBatchNormForwardTraining", "GpuBatchNormForwardInference", "Platform",
        "GpuConvForward", "GpuConvBackwardx", "GpuConvBackwardW", "GpuConvBackwardb",
        "GpuPoolingForward", "GpuPoolingBackward", "CudnnConvHandle", "CudnnPoolingHandle",
        "CpuBatchNormBackward", "GpuBatchNormBackward", "SoftMaxBackward", "CrossEntropyFwd",
        "SoftmaxCrossEntropyBwd")}},
    __all__)
