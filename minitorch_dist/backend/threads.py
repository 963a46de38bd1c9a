"""Threads per process: how many the BLAS and the C++ host kernels may use.

The policy, PyTorch's:

* **one process**: one thread per physical core this process may run on (hyperthread
  siblings count once; the CPU affinity mask is respected);
* **under a launcher** (``python -m minitorch_dist.run``, ``mpiexec``; detected from the
  MPI world size): one thread per rank, since the ranks already fill the cores;
* **overrides**, first match wins: ``ms.set_context(num_threads=N)`` at run time, then
  ``MINITORCH_DIST_NUM_THREADS``, ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
  ``MKL_NUM_THREADS`` from the environment.

The count applies to the BLAS NumPy was built with (OpenBLAS or MKL, found among the loaded
libraries and set through its own ``*_set_num_threads``) and to the C++ kernels' worker
threads (``kernels.native.set_sparse_threads``). It is applied when ``minitorch_dist`` is
imported (``backend/__init__.py`` calls :func:`ensure_applied`); :func:`blas_info` says
which library was found and its count.

**Small products stay off the thread pool** (:func:`product_threads`, used by MatMul,
BatchMatMul and Conv2D): below :data:`SMALL_PRODUCT_FLOPS` multiply-adds waking the BLAS's
other threads costs more than they give; mid-sized products take one thread or all,
whichever was measured faster for their size in this process, so a busy machine (where a
thread that is not scheduled makes the others wait: a 32x784 @ 784x512 product took 0.36 ms
on one thread and 11-47 ms on two while other processes ran) and a quiet one (where two
threads nearly halve it) both get the faster choice. OpenBLAS's own cut-off
(m*n*k < 262,144) only covers far smaller products.

**Bit-identical results across thread counts.** OpenBLAS's GEMM splits the output's rows
and columns between threads, never the inner (k) dimension, so each output element is summed
in the same order whatever the count: matrix products, convolutions (im2col + GEMM) and the
C++ kernels (each row is computed by one thread) give the same bits at 1, 2 or N threads on
the same machine and library. That is a property of the library, not a promise: a different
OpenBLAS build or core type (its kernel choice follows the CPU) or MKL (whose
conditional-numerical-reproducibility mode is off by default) may change the summation order
and the last bits. ``python_tests/test_threads.py`` checks it for the installed library.
"""
import contextlib
import ctypes
import os
import threading
import time

__all__ = ["physical_cores", "default_num_threads", "set_num_threads", "get_num_threads",
           "ensure_applied", "product_threads", "blas_info", "SMALL_PRODUCT_FLOPS",
           "LARGE_PRODUCT_FLOPS"]

SMALL_PRODUCT_FLOPS = 1 << 19      # m*n*k below this: one thread (see product_threads)
LARGE_PRODUCT_FLOPS = 1 << 28      # from this up: every thread in force
ENV_VARIABLES = ("MINITORCH_DIST_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                 "MKL_NUM_THREADS")
_LAUNCHER_SIZE_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE",
                            "MPI_LOCALNRANKS", "PMI_SIZE", "PMIX_SIZE")

_state = {"requested": None, "applied": None}
_lock = threading.Lock()


def physical_cores():
    """Physical cores among the CPUs this process may run on (at least 1).

    Reads the CPU topology from sysfs (siblings of one core count once); falls back to
    the number of usable CPUs.

    >>> physical_cores() >= 1
    True
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(base + "core_id") as f:
                core = f.read().strip()
            with open(base + "physical_package_id") as f:
                package = f.read().strip()
        except OSError:
            return max(1, len(cpus))
        cores.add((package, core))
    return max(1, len(cores))


def _env_threads(environ):
    for name in ENV_VARIABLES:
        value = environ.get(name, "").strip()
        if value:
            try:
                count = int(value.split(",")[0])
            except ValueError:
                continue
            if count >= 1:
                return count
    return None


def _launcher_ranks(environ):
    for name in _LAUNCHER_SIZE_VARIABLES:
        try:
            size = int(environ.get(name, "") or 0)
        except ValueError:
            continue
        if size > 0:
            return size
    return 0


def default_num_threads(environ=None):
    """The count the policy picks for this process (before any ``set_num_threads``).

    >>> default_num_threads({"OMP_NUM_THREADS": "3"})
    3
    >>> default_num_threads({"OMPI_COMM_WORLD_SIZE": "4"})
    1
    """
    environ = os.environ if environ is None else environ
    count = _env_threads(environ)
    if count is not None:
        return count
    if _launcher_ranks(environ) > 1:
        return 1
    return physical_cores()


# --- the BLAS ---------------------------------------------------------------------------------
class _Blas:
    """Setter and getter of the loaded BLAS's thread count (OpenBLAS or MKL), if found."""

    _OPENBLAS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
                 "scipy_openblas_set_num_threads", "openblas_set_num_threads64_")
    _MKL = ("MKL_Set_Num_Threads",)

    def __init__(self):
        self.name, self.path, self._set, self._get = None, None, None, None
        for path in self._loaded_libraries():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for setter in self._OPENBLAS + self._MKL:
                fn = getattr(lib, setter, None)
                if fn is None:
                    continue
                getter = getattr(lib, setter.replace("set", "get").replace("Set", "Get"), None)
                fn.argtypes, fn.restype = (ctypes.c_int,), None
                if getter is not None:
                    getter.argtypes, getter.restype = (), ctypes.c_int
                self.name = "mkl" if setter in self._MKL else "openblas"
                self.path, self._set, self._get = path, fn, getter
                return

    @staticmethod
    def _loaded_libraries():
        import numpy  # noqa: F401  (loads the BLAS)
        try:
            with open("/proc/self/maps") as f:
                paths = {line.split()[-1] for line in f if ".so" in line}
        except OSError:
            paths = set()
        wanted = [p for p in paths if "blas" in os.path.basename(p).lower() or
                  "mkl_rt" in os.path.basename(p).lower()]
        if not wanted:
            try:   # other platforms: threadpoolctl knows where to look
                from threadpoolctl import threadpool_info
                wanted = [i["filepath"] for i in threadpool_info() if i.get("user_api") == "blas"]
            except ImportError:
                pass
        return sorted(wanted)

    def set(self, count):
        if self._set is not None:
            self._set(int(count))

    def get(self):
        return self._get() if self._get is not None else None


_BLAS = []


def _blas():
    if not _BLAS:
        _BLAS.append(_Blas())
    return _BLAS[0]


def blas_info():
    """Which BLAS was found and its current thread count: ``{"name", "path", "threads"}``.

    >>> sorted(blas_info())
    ['name', 'path', 'threads']
    """
    blas = _blas()
    return {"name": blas.name, "path": blas.path, "threads": blas.get()}


def _apply(count):
    _blas().set(count)
    try:
        from ..kernels import native
        if native._C is not None:
            native.set_sparse_threads(count)
    except ImportError:
        pass
    _state["applied"] = count


def set_num_threads(count):
    """Threads for the BLAS and the C++ kernels from now on; ``None`` goes back to the policy.

    ``ms.set_context(num_threads=N)`` calls this. Returns the count in force.

    >>> from minitorch_dist.backend import threads
    >>> threads.set_num_threads(1)
    1
    >>> _ = threads.set_num_threads(None)
    """
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise ValueError(f"num_threads must be a positive int or None, got {count!r}")
    with _lock:
        _state["requested"] = count
        chosen = count if count is not None else default_num_threads()
        _apply(chosen)
    return chosen


def get_num_threads():
    """The thread count in force (applying the policy first if nothing ran yet).

    >>> get_num_threads() >= 1
    True
    """
    ensure_applied()
    return _state["applied"]


def ensure_applied():
    """Apply the policy once, before the first computation (cheap after that)."""
    if _state["applied"] is None:
        with _lock:
            if _state["applied"] is None:
                requested = _state["requested"]
                _apply(requested if requested is not None else default_num_threads())


class _Tuner:
    """Picks one thread or all of them for mid-sized products, by timing both.

    Products are grouped by size (half-octaves of m*n*k). In each group the first
    ``2 * TRIALS`` calls alternate one thread and the full count; after that the group uses
    whichever took less time per multiply-add (median), and every ``RECHECK`` calls it
    times both again, so a machine that becomes busy (or quiet) is noticed.
    """

    TRIALS = 4
    RECHECK = 256

    def __init__(self):
        self.groups = {}

    def choose(self, flops, full):
        """(threads to use, group key) for a product of ``flops`` multiply-adds."""
        key = flops.bit_length() * 2 + ((flops >> max(flops.bit_length() - 2, 0)) & 1)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = {"calls": 0, 1: [], full: [], "best": None}
        calls = group["calls"]
        group["calls"] = calls + 1
        phase = calls % self.RECHECK
        if phase < 2 * self.TRIALS:
            if phase == 0:
                group[1], group[full] = [], []
            return (1 if phase % 2 else full), key
        if group["best"] is None or phase == 2 * self.TRIALS:
            one, many = sorted(group[1]), sorted(group[full])
            group["best"] = 1 if one and many and one[len(one) // 2] <= many[len(many) // 2] else full
        return group["best"], key

    def record(self, key, count, seconds_per_flop):
        group = self.groups[key]
        if count in group and len(group[count]) < self.TRIALS:
            group[count].append(seconds_per_flop)


_TUNER = _Tuner()


@contextlib.contextmanager
def product_threads(flops):
    """Run a matrix product of ``flops`` multiply-adds (m*n*k) on the threads that pay.

    * below :data:`SMALL_PRODUCT_FLOPS` (2^19): one thread. Waking a second thread costs
      about what the product does (measured here, a quiet machine: 32x128x128 took the same
      on 1 and 2 threads);
    * from :data:`LARGE_PRODUCT_FLOPS` (2^28, ~10 ms of a core) up: every thread in force;
    * in between, whichever a :class:`_Tuner` measured faster for products of that size:
      on a quiet machine two threads nearly halve a 64x784x512 product, while on a busy one
      a second thread that is not scheduled makes the first wait (0.36 ms on one thread
      against 11-47 ms on two).

    A no-op when one thread is in force. The BLAS's count is process-wide, so a thread rank
    (``communication.run_ranks``) computing at the same moment may see the other count; the
    results do not change (see the module docstring), only the speed.

    >>> with product_threads(10):
    ...     pass
    """
    if _state["applied"] is None:
        ensure_applied()
    full = _state["applied"]
    if full <= 1 or flops >= LARGE_PRODUCT_FLOPS or _blas()._set is None:
        yield
        return
    if flops < SMALL_PRODUCT_FLOPS:
        count, key = 1, None
    else:
        count, key = _TUNER.choose(int(flops), full)
    if count != full:
        _blas().set(count)
    start = time.perf_counter()
    try:
        yield
    finally:
        if key is not None:
            _TUNER.record(key, count, (time.perf_counter() - start) / flops)
        if count != full:
            _blas().set(full)
