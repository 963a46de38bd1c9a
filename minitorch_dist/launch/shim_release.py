"""Releasing the bind shim in a rank once MPI has opened its listeners.

In a multi-machine job with ``--iface`` every rank starts with the bind shim preloaded in
``net:`` mode (``bind_shim``): MPI's TCP listeners, opened in ``MPI_Init``, must land on
the named network. The user's own sockets must not: so the rank releases the shim right
after ``MPI_Init``. MPI is initialised when ``mpi4py.MPI`` is first imported (by the program,
or by ``minitorch_dist.communication``), with whatever ``mpi4py.rc`` settings the program
made before; ``release_after_mpi_init()`` hooks that import instead of importing MPI itself,
so those settings still count. A program that sets ``mpi4py.rc.initialize = False`` keeps the
shim until it ends (its own later ``MPI_Init`` still needs it).
"""
import importlib.abc
import importlib.util
import os
import sys

from .bind_shim import release_environment

__all__ = ["release_after_mpi_init"]

_MODULE = "mpi4py.MPI"


class _ReleasingLoader(importlib.abc.Loader):
    """``mpi4py.MPI``'s own loader, then the release once MPI is initialised."""

    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        if module.Is_initialized():
            release_environment(os.environ)


class _MPIImportHook(importlib.abc.MetaPathFinder):
    """Finds ``mpi4py.MPI`` once, the usual way (mpi4py has a finder of its own, which picks
    the build for the MPI library present), and wraps its loader."""

    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ReleasingLoader(spec.loader)
        return spec


def release_after_mpi_init():
    """Release the shim right after MPI is initialised (now, if it already is)."""
    module = sys.modules.get(_MODULE)
    if module is not None:
        if module.Is_initialized():
            release_environment(os.environ)
        return
    if not any(isinstance(finder, _MPIImportHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MPIImportHook())
