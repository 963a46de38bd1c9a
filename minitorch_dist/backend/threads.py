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
BatchMatMul and Conv2D): below :data:`SMALL_PRODUCT_FLOPS` multiply-adds (m*n*k < 2^23, e.g.
Wide&Deep's example MLP, 500x312 @ 312x64) a product runs on one thread. Measured on this
2-core machine: quiet, two threads take 0.5-0.8x of one thread's time from 2^20 up (about
1.0x below 2^19); with one other busy process, a two-thread product is usually 0.5-0.6x but
now and then 8-100x (the second thread is not scheduled and the first waits for it), which
is how single-process examples ran 3-10x slower with the default threads. The cut-off gives
up at most 0.3 ms per product on a quiet machine to remove those stalls from the small
products; a machine that is busy all the time is better off with ``num_threads=1``.
OpenBLAS's own cut-off (m*n*k < 262,144) covers only far smaller products.

**Bit-identical results across thread counts.** For MatMul this is the BLAS's property, and
it depends on the build and the CPU (OpenBLAS picks its kernels by core type). OpenBLAS's
threaded driver splits the output's rows and columns between threads, never the inner (k)
dimension; where first measured, every count from 2 up gave the same bits, and one thread
differed only for some k (600 or 700, not 512, 640, 768 or 1024). On the CI machine (AMD
EPYC, OpenBLAS 0.3.31 as bundled with NumPy 2.4, Haswell kernels) the kernel rounds an
element according to where it falls in the block it is given: a one-thread (1000 x 288) @
(288 x 64) cut at row 500 differs from the whole product in the piece's last rows, so raw
float32 products differ in the last bits between 1, 2, 3 and 4 threads for every k tried
(288 to 1024; float64 behaved as described above). What holds everywhere: products under
the small-product cut-off run on one thread at every count, and work spread by
:func:`parallel_items` (Winograd's
blocks, Conv2D's large products cut into pieces fixed by the shapes, never by the thread
count) and the C++ kernels (each row, image or block on one thread, sums in a fixed order)
give the same bits at any count, one included. ``python_tests/test_threads.py`` checks this
against the installed library, and probes the BLAS (raw NumPy products at 2, 3 and 4
threads) before asserting MatMul's bits from 2 threads up: it skips when the BLAS differs.
"""
import contextlib
import ctypes
import os
import threading

__all__ = ["physical_cores", "default_num_threads", "set_num_threads", "get_num_threads",
           "ensure_applied", "product_threads", "parallel_items", "parallel_workers", "blas_info",
           "SMALL_PRODUCT_FLOPS"]

SMALL_PRODUCT_FLOPS = 1 << 23      # m*n*k below this: one thread (see product_threads)
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
    applied = _state["applied"]
    if applied is None:         # ensure_applied, asked inline: this runs on every product
        ensure_applied()
        applied = _state["applied"]
    return applied


def ensure_applied():
    """Apply the policy once, before the first computation (cheap after that)."""
    if _state["applied"] is None:
        with _lock:
            if _state["applied"] is None:
                requested = _state["requested"]
                _apply(requested if requested is not None else default_num_threads())


@contextlib.contextmanager
def product_threads(flops):
    """Run a matrix product of ``flops`` multiply-adds (m*n*k) on the threads that pay.

    Below :data:`SMALL_PRODUCT_FLOPS` (2^23, about 0.25 ms of one core here) the product
    runs on one thread, above it on every thread in force. The choice depends on the size
    alone, so a given product always runs the same way in a process (OpenBLAS's one-thread
    and threaded drivers may round differently; see the module docstring). A no-op when one
    thread is in force. The BLAS's count is process-wide: a thread rank
    (``communication.run_ranks``) computing at the same moment may see one thread.

    >>> with product_threads(10):
    ...     pass
    """
    if _state["applied"] is None:
        ensure_applied()
    full = _state["applied"]
    if full <= 1 or flops >= SMALL_PRODUCT_FLOPS or _blas()._set is None:
        yield
        return
    _blas().set(1)
    try:
        yield
    finally:
        _blas().set(full)


_EXECUTOR = []


def _executor():
    if not _EXECUTOR:
        from concurrent.futures import ThreadPoolExecutor
        _EXECUTOR.append(ThreadPoolExecutor(max_workers=16, thread_name_prefix="minitorch_dist"))
    return _EXECUTOR[0]


def parallel_workers(count):
    """How many threads :func:`parallel_items` uses for ``count`` items."""
    ensure_applied()
    return max(1, min(_state["applied"], count))


def parallel_items(count, fn):
    """Call ``fn(i, w)`` for every ``i`` in ``range(count)``, spread over the threads in force;
    ``w`` (0 to threads - 1) names the thread, for per-thread scratch memory.

    For loops of independent pieces of work that release the GIL (NumPy products, the C++
    kernels): the items are cut into one contiguous chunk per thread, chunk 0 runs on this
    thread, and inside the call the BLAS and the C++ kernels use one thread each, so there
    is a single fork and join per call instead of one per product. On a busy machine, that
    is what keeps a descheduled thread from stalling every product in turn. ``fn`` must
    write only its own item's outputs; what it computes does not depend on the thread count.

    >>> out = [0] * 5
    >>> parallel_items(5, lambda i, w: out.__setitem__(i, i * i))
    >>> out
    [0, 1, 4, 9, 16]
    """
    workers = parallel_workers(count)
    if workers <= 1:
        with product_threads(0):      # one BLAS thread, as each piece gets below
            for i in range(count):
                fn(i, 0)
        return

    def chunk(w):
        for i in range(count * w // workers, count * (w + 1) // workers):
            fn(i, w)

    blas, full = _blas(), _state["applied"]
    native = None
    try:
        from ..kernels import native as _native
        native = _native if _native._C is not None else None
    except ImportError:
        pass
    blas.set(1)
    previous = native.set_sparse_threads(1) if native is not None else None
    try:
        futures = [_executor().submit(chunk, w) for w in range(1, workers)]
        chunk(0)
        for f in futures:
            f.result()
    finally:
        if native is not None:
            native.set_sparse_threads(previous)
        blas.set(full)
