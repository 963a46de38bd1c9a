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
from .ctensor import CTensor as Tensor, Gaussian, Uniform, kFloat, kFloat16, kFloat32, kInt
from .handles import BatchNormHandle, ConvHandle, PoolingHandle
from .unsupported import module_getattr

__all__ = ["NcclIdHolder", "ConvHandle", "BatchNormHandle", "PoolingHandle", "USE_DIST",
           "USE_CUDA", "Tensor", "Gaussian", "Uniform", "kFloat", "kFloat16", "kFloat32",
           "kInt"]

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
        "GpuBatchNormForwardTraining", "GpuBatchNormForwardInference", "VecTensor",
        "ConcatOn", "SliceOn", "CpuBatchNormForwardTraining", "CpuBatchNormForwardInference",
        "CpuBatchNormBackwardx", "CpuPoolingForward", "CpuPoolingBackward", "SoftMax",
        "Reshape", "Pow", "Erf", "Ceil", "Floor", "Round", "RoundE", "Platform",
        "CpuConvForward", "CpuConvBackwardx", "CpuConvBackwardW", "CpuConvBackwardb",
        "GpuConvForward", "GpuConvBackwardx", "GpuConvBackwardW", "GpuConvBackwardb",
        "GpuPoolingForward", "GpuPoolingBackward", "CudnnConvHandle", "CudnnPoolingHandle",
        "CpuBatchNormBackward", "GpuBatchNormBackward", "SumAll", "Exp", "Log", "Sqrt",
        "Abs", "Sign", "Tanh", "Sigmoid", "ReLU", "Transpose", "DefaultTranspose",
        "Mult", "Axpy", "Bernoulli", "AddFloat", "SubFloat", "MultFloat", "DivFloat",
        "LTFloat", "LEFloat", "GTFloat", "GEFloat", "EQFloat", "PowFloat", "Square",
        "CopyDataToFrom", "RowMax", "SoftMaxBackward", "CrossEntropyFwd",
        "SoftmaxCrossEntropyBwd", "__add__", "__sub__", "__mul__", "__div__", "__lt__",
        "__le__", "__gt__", "__ge__", "__eq__")}},
    __all__)
