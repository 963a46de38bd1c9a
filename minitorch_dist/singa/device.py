"""SINGA's ``device`` module: where tensors live, and the random seed.

A SINGA ``Device`` here is a thin handle on a minitorch_dist ``Device`` (``dev.core``): the
host ("CPU"), a CUDA GPU through CuPy, or the virtual GPU (``MINITORCH_DIST_VIRTUAL_GPU=1``,
NumPy arrays with every host/device copy made and counted). Handles are cached, so asking
twice for the same GPU gives the same object, as in SINGA.

``create_cuda_gpu_on(i)`` on a machine without a GPU returns the virtual GPU ``i`` when it is
enabled, otherwise the host, with a one-line warning, so the guide's scripts run on a laptop.

>>> from minitorch_dist.singa import device
>>> dev = device.create_cpu_device()
>>> dev.id(), dev is device.get_default_device()
(-1, True)
>>> dev.SetRandSeed(0)
"""
import warnings

from .. import random as _random
from ..backend import cupy_or_none, get_device, virtual_gpu_enabled
from ..backend.device import Device as CoreDevice
from .unsupported import module_getattr, not_supported

__all__ = ["Device", "create_cuda_gpu_on", "create_cuda_gpu", "create_cuda_gpus",
           "create_cuda_gpus_on", "create_cpu_device", "get_default_device", "get_num_gpus",
           "get_gpu_ids", "to_core"]

_handles = {}



_graph_noted = []


def note_eager_graph(call, stacklevel=3):
    """Say once per process that SINGA's graph mode runs eagerly here: the same numbers, but
    no buffered graph and no scheduling (``sequential``) are built."""
    if not _graph_noted:
        _graph_noted.append(call)
        warnings.warn(f"singa {call}: graph mode runs eagerly in minitorch_dist.singa: every "
                      "operation runs at once, with the same numbers; SINGA's buffered graph "
                      "and its scheduling (sequential) are not built", stacklevel=stacklevel)

class Device:
    """SINGA's ``Device``: ``id()`` (-1 for the host), ``SetRandSeed``, graph switches.

    Execution is always eager: ``EnableGraph`` only records the flag (see docs/singa.md).
    ``PrintTimeProfiling`` prints ``ms.placement_report()`` once ``SetVerbosity(v)`` with
    ``v > 0`` was called (SINGA prints its profile only with a positive verbosity).
    """

    def __init__(self, core):
        if not isinstance(core, CoreDevice):
            raise TypeError(f"device.Device wraps a minitorch_dist Device, got {type(core).__name__}")
        self.core = core
        self._graph = False
        self._verbosity = 0
        self._skip = 0

    # ---- identity ---------------------------------------------------------------------
    def id(self):
        """The GPU ordinal, or -1 for the host (SINGA's convention)."""
        return -1 if self.core.is_host else self.core.index

    def host(self):
        """The host device."""
        return create_cpu_device()

    @property
    def virtual(self):
        """True for the emulated GPU (``MINITORCH_DIST_VIRTUAL_GPU=1``)."""
        return self.core.virtual

    def __repr__(self):
        return f"singa.Device({self.core!r})"

    def __eq__(self, other):
        if isinstance(other, Device):
            return other.core is self.core
        return isinstance(other, CoreDevice) and other is self.core

    def __hash__(self):
        return hash(self.core)

    # ---- random seed ------------------------------------------------------------------
    def SetRandSeed(self, seed):
        """Seed every random draw of the framework (parameter init, dropout, ``gaussian``).

        minitorch_dist has one random stream for host and devices, so this is ``ms.set_seed``.
        """
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"Device.SetRandSeed(seed): seed must be a non-negative int, "
                             f"got {seed!r}")
        _random.set_seed(seed)

    # ---- graph and profiling switches (recorded; execution stays eager) ------------------
    def EnableGraph(self, enable=True):
        """Record SINGA's graph switch (execution stays eager: ``note_eager_graph``)."""
        self._graph = bool(enable)
        if self._graph:
            note_eager_graph("Device.EnableGraph(True)")

    def graph_enabled(self):
        """SINGA's graph switch as last set."""
        return self._graph

    def ResetGraph(self):
        """Accepted; there is no buffered graph to clear."""
        pass

    def RunGraph(self, serial=False):
        """Not supported: operations run eagerly."""
        raise not_supported("Device.RunGraph", "minitorch_dist runs every operation eagerly, "
                            "so there is no buffered graph to run")

    def Sync(self):
        """Wait for the device (CuPy: the current stream); nothing to wait for otherwise."""
        if not self.core.is_host and not self.core.virtual:
            self.core.xp.cuda.get_current_stream().synchronize()

    def Reset(self):
        """Accepted; nothing to reset."""
        self._graph = False

    def SetVerbosity(self, verbosity):
        """Set the verbosity ``PrintTimeProfiling`` uses."""
        self._verbosity = int(verbosity)

    def SetSkipIteration(self, skip):
        """Accepted (SINGA skips the first iterations in its profile)."""
        self._skip = int(skip)

    def PrintTimeProfiling(self):
        """Print ``ms.placement_report()`` when the verbosity is above 0."""
        if self._verbosity > 0:
            from ..placement import placement_report
            print(placement_report(), flush=True)


def _handle(core):
    handle = _handles.get(core)
    if handle is None or handle.core is not core:
        handle = _handles[core] = Device(core)
    return handle


def to_core(spec, call):
    """The minitorch_dist Device for a SINGA ``Device``, a core ``Device``, a name or None
    (None is the host, SINGA's default device); TypeError naming ``call`` otherwise."""
    if isinstance(spec, Device):
        return spec.core
    if isinstance(spec, CoreDevice):
        return spec
    if spec is None:
        return get_device("CPU")
    if isinstance(spec, str):
        return get_device(spec)
    raise TypeError(f"{call}: device must be a Device from singa.device (e.g. "
                    f"device.create_cuda_gpu_on(0)), got {type(spec).__name__}")


# ---- creating devices ---------------------------------------------------------------------
def create_cpu_device():
    """The host device (SINGA's ``CppCPU``)."""
    return _handle(get_device("CPU"))


get_default_device = create_cpu_device


def get_num_gpus():
    """Real CUDA GPUs that CuPy sees (0 without CuPy; the virtual GPU is not counted)."""
    cupy = cupy_or_none()
    return 0 if cupy is None else int(cupy.cuda.runtime.getDeviceCount())


def get_gpu_ids():
    """The ordinals of the real GPUs CuPy sees."""
    return list(range(get_num_gpus()))


def create_cuda_gpu_on(device_id):
    """The GPU ``device_id`` (the process's ``local_rank`` in the guide).

    Without a real GPU: the virtual GPU ``device_id`` when ``MINITORCH_DIST_VIRTUAL_GPU=1``,
    else the host device with a one-line ``RuntimeWarning``.
    """
    if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
        raise ValueError(f"device.create_cuda_gpu_on(device_id): device_id must be a "
                         f"non-negative int (a GPU ordinal, e.g. sgd.local_rank), got {device_id!r}")
    if virtual_gpu_enabled():
        return _handle(get_device(f"GPU:{device_id}"))
    cupy = cupy_or_none()
    if cupy is None:
        warnings.warn(f"device.create_cuda_gpu_on({device_id}): no CUDA GPU here, using the host "
                      "CPU (set MINITORCH_DIST_VIRTUAL_GPU=1 for an emulated GPU)",
                      RuntimeWarning, stacklevel=2)
        return create_cpu_device()
    count = cupy.cuda.runtime.getDeviceCount()
    if device_id >= count:
        raise ValueError(f"device.create_cuda_gpu_on({device_id}): only {count} GPU(s) are "
                         f"visible (ordinals 0..{count - 1})")
    return _handle(get_device(f"GPU:{device_id}"))


def create_cuda_gpu():
    """GPU 0 (see ``create_cuda_gpu_on``)."""
    return create_cuda_gpu_on(0)


def create_cuda_gpus_on(device_ids):
    """One device per id in ``device_ids``."""
    if not isinstance(device_ids, (list, tuple)):
        raise TypeError(f"device.create_cuda_gpus_on(device_ids): expected a list of GPU "
                        f"ordinals, got {type(device_ids).__name__}")
    return [create_cuda_gpu_on(i) for i in device_ids]


def create_cuda_gpus(num):
    """GPUs ``0 .. num-1``; a list of ids (as SINGA's device page writes it) means those."""
    if isinstance(num, (list, tuple)):
        return create_cuda_gpus_on(num)
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise ValueError(f"device.create_cuda_gpus(num): num must be a positive int, got {num!r}")
    return create_cuda_gpus_on(list(range(num)))


_UNSUPPORTED = {
    "create_opencl_device": "OpenCL devices do not exist in minitorch_dist",
    "get_gpu_mem_size": "ask CuPy: cupy.cuda.Device(i).mem_info",
    "device_query": "ask CuPy: cupy.cuda.runtime.getDeviceProperties(i)",
    "enable_lazy_alloc": "buffers are pooled per device automatically",
}
__getattr__ = module_getattr("device", _UNSUPPORTED, __all__)
