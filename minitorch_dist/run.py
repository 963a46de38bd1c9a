"""``python -m minitorch_dist.run -n N script.py``: the launcher's command line
(``python -m minitorch_dist.run --help`` lists every option, with examples).

The launcher itself lives in ``minitorch_dist/launch/`` (``cli``, ``job``, ``mpiexec``,
``multiprocess``); this module keeps the short name that users type and import
(``from minitorch_dist.run import spawn, wait_processes``).
"""
import sys

from .launch.cli import main, parse_args
from .launch.job import TIMEOUT_EXIT_CODE, check_timeout, launch, wait_processes
from .launch.mpiexec import (MALLOC_VARIABLES, THREAD_VARIABLES, build_command, find_mpiexec,
                             mpi_flavor, rank_environment)
from .launch.multiprocess import spawn

__all__ = ["main", "launch", "spawn", "wait_processes", "find_mpiexec", "mpi_flavor",
           "build_command", "rank_environment", "check_timeout", "parse_args",
           "MALLOC_VARIABLES", "THREAD_VARIABLES", "TIMEOUT_EXIT_CODE"]

if __name__ == "__main__":
    sys.exit(main())
