"""The command line ``python -m minitorch_dist.run -n N [options] script.py [args]``.

``parse_options`` reads the launcher's options (they end at the first other word: the
script's own ``-n`` is the script's), ``main`` runs the job with ``job.launch`` or, with
``--dry-run``, prints the ``mpiexec`` command and environment it would use.

>>> parse_options(["-n", "2", "--oversubscribe", "train.py", "--lr", "0.1"])["argv"]
['train.py', '--lr', '0.1']
"""
import importlib.util
import shlex
import sys

from .bind_shim import MODE_VARIABLE, SAVED_PRELOAD
from .job import check_timeout, launch
from .mpiexec import (build_command, find_mpiexec, forwarded_variables, mpi_flavor,
                      rank_environment)
from .network import check_interfaces, job_environment
from .remote import AGENT_VARIABLE

__all__ = ["main", "parse_args", "parse_options"]

_USAGE = ("usage: python -m minitorch_dist.run -n N [--timeout SECONDS] [--oversubscribe] "
          "[--log-dir DIR] [--hosts H1,H2 | --hostfile FILE] [--iface NET] [--dry-run] "
          "script.py [args...]   (or -m module / -c code instead of script.py)")


def _command(n, argv, mpiexec, oversubscribe, **options):
    mpiexec = find_mpiexec() if mpiexec is None else mpiexec
    return build_command(n, argv, mpiexec, flavor=mpi_flavor(mpiexec), oversubscribe=oversubscribe,
                         abort_on_error=importlib.util.find_spec("mpi4py") is not None,
                         **options)


def parse_args(args):
    """``(n, timeout, oversubscribe, dry_run, argv)``; options end at the first other word.
    ``parse_options`` also returns the log directory and the host options.

    >>> parse_args(["-n", "2", "--timeout", "9", "train.py", "-n", "5"])
    (2, 9.0, False, False, ['train.py', '-n', '5'])
    """
    options = parse_options(args)
    return (options["n"], options["timeout"], options["oversubscribe"], options["dry_run"],
            options["argv"])


_VALUE_OPTIONS = {"-n": "n", "-np": "n", "--nproc": "n", "--timeout": "timeout",
                  "--log-dir": "log_dir", "--hosts": "hosts", "--host": "hosts",
                  "--hostfile": "hostfile", "--iface": "interfaces"}


def parse_options(args):
    """The launcher's options as a dict (n, timeout, oversubscribe, dry_run, log_dir, hosts,
    hostfile, interfaces, argv); a bad value is a ``SystemExit`` with the usage line.

    >>> parse_options(["-n", "2", "--hosts", "a,b", "--iface", "eth0", "t.py"])["interfaces"]
    'eth0'
    """
    options = {"n": None, "timeout": None, "oversubscribe": False, "dry_run": False,
               "log_dir": None, "hosts": None, "hostfile": None, "interfaces": None}
    index = 0
    while index < len(args):
        word = args[index]
        if word in _VALUE_OPTIONS and index + 1 < len(args):
            value, key = args[index + 1], _VALUE_OPTIONS[word]
            try:
                if key == "n":
                    value = int(value)
                    if value < 1:
                        raise ValueError(f"{word} must be at least 1")
                elif key == "timeout":
                    value = check_timeout(value)
            except ValueError as exc:
                raise SystemExit(f"minitorch_dist.run: bad value {args[index + 1]!r} for "
                                 f"{word}: {exc}\n{_USAGE}")
            options[key] = value
            index += 2
        elif word == "--oversubscribe":
            options["oversubscribe"], index = True, index + 1
        elif word == "--dry-run":
            options["dry_run"], index = True, index + 1
        elif word in ("-h", "--help"):
            raise SystemExit(_USAGE)
        else:
            break
    if options["n"] is None or index == len(args):
        raise SystemExit(f"minitorch_dist.run: need -n N and a script\n{_USAGE}")
    if options["interfaces"] and not (options["hosts"] or options["hostfile"]):
        raise SystemExit("minitorch_dist.run: --iface only applies with --hosts or --hostfile "
                         "(a single-machine job uses shared memory only)")
    options["argv"] = list(args[index:])
    return options


def main(args=None):
    """The command line: ``python -m minitorch_dist.run -n N [options] script.py [args]``."""
    options = parse_options(sys.argv[1:] if args is None else args)
    hosts = {key: options[key] for key in ("hosts", "hostfile", "interfaces")}
    if options["interfaces"]:
        try:
            hosts["interfaces"] = options["interfaces"] = check_interfaces(options["interfaces"])
        except ValueError as exc:
            raise SystemExit(f"minitorch_dist.run: {exc}") from None
    if options["dry_run"]:
        mpiexec = find_mpiexec()
        remote = bool(options["hosts"] or options["hostfile"])
        env = job_environment(rank_environment(), mpi_flavor(mpiexec), remote,
                              interfaces=options["interfaces"])
        prefix = [f"{name}={shlex.quote(env[name])}" for name in
                  ("LD_PRELOAD", SAVED_PRELOAD, MODE_VARIABLE, AGENT_VARIABLE) if name in env]
        forward = forwarded_variables(env) if remote else ()
        print(" ".join(prefix + [shlex.quote(word) for word in _command(
            options["n"], options["argv"], mpiexec, options["oversubscribe"], forward=forward,
            **hosts)]))
        return 0
    try:
        return launch(options["n"], options["argv"], timeout=options["timeout"],
                      oversubscribe=options["oversubscribe"], log_dir=options["log_dir"],
                      **hosts)
    except KeyboardInterrupt:       # Ctrl-C outside the wait (setup, report)
        print("minitorch_dist.run: interrupted (Ctrl-C)", file=sys.stderr, flush=True)
        return 130
