"""``mindspore.log``: MindSpore's logging functions over the ``"minitorch_dist"`` logger.

``logger.info(...)``, ``warning``, ``error``, ``debug``, ``critical``; ``get_level()`` gives
MindSpore's level digit (``GLOG_v``: "0" debug, "1" info, "2" warning, "3" error);
``get_log_config()`` the settings in force. ``ms.set_context(log_level=...)`` or ``GLOG_v``
set the level. ``logger`` is that logger itself: the framework's modules log through it.

Two additions of ours: ``note(message)`` says once per process that an option is accepted
and changes nothing here ("minitorch_dist: note: ..." on stderr: no Python warning, no source
line; the launcher shows one copy for all ranks), and ``rank0_progress_only()`` asks the
launcher (``python -m minitorch_dist.run``) to show only rank 0's standard output, as
``--rank0-only`` does (the examples call it: their ranks print the same progress).

>>> import minitorch_dist.log as logger
>>> logger.get_level() in ("0", "1", "2", "3")
True
"""
import logging
import os
import sys

__all__ = ["debug", "info", "warning", "error", "critical", "get_level", "get_log_config",
           "note", "rank0_progress_only"]

logger = logging.getLogger("minitorch_dist")
debug, info, warning, error, critical = (logger.debug, logger.info, logger.warning,
                                         logger.error, logger.critical)
_DIGITS = {logging.DEBUG: "0", logging.INFO: "1", logging.WARNING: "2", logging.ERROR: "3",
           logging.CRITICAL: "3"}


def get_level():
    """The effective level as MindSpore's digit."""
    return _DIGITS.get(logger.getEffectiveLevel(), "2")


def get_log_config():
    """``{"GLOG_v": digit}``: the one setting that applies here."""
    return {"GLOG_v": get_level()}


_noted = set()


def note(message, key=None):
    """Say ``message`` once per process (per ``key``, default the message) through the
    logger at WARNING level as "minitorch_dist: note: <message>" (on stderr unless logging is
    configured otherwise); returns whether it was said. For options MindSpore documents as
    no-ops here: the user did nothing wrong, so this is one line, not a Python warning with
    its source line. Silent at log level ERROR (``GLOG_v=3``).

    >>> import minitorch_dist.log as logger
    >>> logger.note("doctest: said once", key="log.py doctest"), \\
    ...     logger.note("doctest: said once", key="log.py doctest")
    (True, False)
    """
    key = message if key is None else key
    if key in _noted or not logger.isEnabledFor(logging.WARNING):
        return False
    _noted.add(key)
    logger.warning("minitorch_dist: note: %s", message)
    return True


# The line a rank prints to ask the launcher for rank 0's output only (launch/output.py reads
# it and shows nothing of it); the job directory variable says the launcher started us.
RANK0_ONLY_REQUEST = "minitorch_dist: control: rank0-only"
JOB_DIR_VARIABLE = "MINITORCH_DIST_JOB_DIR"
ALL_RANKS_VARIABLE = "MINITORCH_DIST_ALL_RANKS"   # "1": every rank's output, whatever asked
# set by mpiexec in its ranks (Open MPI, MPICH/Hydra, PMIx): the output goes through the
# launcher's reader; run.spawn's processes have a job directory too, but write straight out
_MPI_RANK_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")


def rank0_progress_only():
    """Under the launcher, show only rank 0's standard output from now on (the other ranks'
    standard error, their warnings and errors, is still shown; every rank's log keeps all).
    For programs whose ranks print the same progress; ``MINITORCH_DIST_ALL_RANKS=1`` keeps
    every rank's output. Outside the launcher's MPI ranks (one process, plain ``mpiexec``,
    ``run.spawn``'s processes) it does nothing. Returns whether the launcher was asked."""
    if not os.environ.get(JOB_DIR_VARIABLE) or os.environ.get(ALL_RANKS_VARIABLE) == "1" \
            or not any(name in os.environ for name in _MPI_RANK_VARIABLES):
        return False
    sys.stdout.flush()
    print(RANK0_ONLY_REQUEST, flush=True)
    return True
