"""``python -m minitorch_dist.run -n N script.py``: the launcher's command line.

The launcher itself lives in ``minitorch_dist/launch/``; this module keeps the short name
that users type and import (``from minitorch_dist.run import spawn, wait_processes``).
"""
import sys

from .launch.launcher import (MALLOC_VARIABLES, THREAD_VARIABLES, TIMEOUT_EXIT_CODE,
                              build_command, check_timeout, find_mpiexec, launch, main,
                              mpi_flavor, parse_args, rank_environment, spawn, wait_processes)

__all__ = ["main", "launch", "spawn", "wait_processes", "find_mpiexec", "mpi_flavor",
           "build_command", "rank_environment", "check_timeout", "parse_args",
           "MALLOC_VARIABLES", "THREAD_VARIABLES", "TIMEOUT_EXIT_CODE"]

if __name__ == "__main__":
    sys.exit(main())
