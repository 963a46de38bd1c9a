"""The command line ``python -m minitorch_dist.run -n N [options] script.py [args]``.

``parse_options`` reads the launcher's options with ``argparse`` (they end at the first
word that is not one of them: the script's own ``-n`` is the script's; an unknown option
before the script is refused with a did-you-mean), ``main`` checks the program and the
machines before any rank starts, then runs the job with ``job.launch`` or, with
``--dry-run``, prints the ``mpiexec`` command and environment it would use.

>>> parse_options(["-n", "2", "--oversubscribe", "train.py", "--lr", "0.1"])["argv"]
['train.py', '--lr', '0.1']
"""
import argparse
import difflib
import importlib.util
import os
import re
import shlex
import sys

from .bind_shim import MODE_VARIABLE, SAVED_PRELOAD
from .compute_slots import SLOTS_VARIABLE, check_compute_slots
from .job import check_timeout, launch
from .mpiexec import (THREAD_VARIABLES, build_command, find_mpiexec, forwarded_variables,
                      mpi_flavor, rank_environment)
from .network import (check_interfaces, check_resolvable, check_slots, job_environment,
                      parse_hosts, read_hostfile)
from .remote import AGENT_VARIABLE

__all__ = ["main", "parse_args", "parse_options", "build_parser", "check_program",
           "UsageError"]

PROG = "python -m minitorch_dist.run"
_PROGRAM = "script.py [args...] | -m module [args...] | -c code [args...]"
_DESCRIPTION = """Run a Python program on N MPI ranks (processes) of this machine, or of several machines with
--hosts/--hostfile. Each rank runs the program as `python script.py` would; a rank that fails
ends the whole job, and the launcher prints one report naming the rank, its error and the last
lines of its traceback (docs/failures.md). The launcher's options come before the program;
every word after the program is the program's own."""
_EXAMPLES = """examples:
  python -m minitorch_dist.run -n 2 examples/mnist_cnn.py --epochs 2
  python -m minitorch_dist.run -n 8 --rank0-only examples/sharding_quickstart.py
  python -m minitorch_dist.run -n 4 --timeout 600 -m mypackage.train --lr 0.1
  python -m minitorch_dist.run -n 8 --compute-slots 1 train.py   # ranks take turns computing
  python -m minitorch_dist.run -n 2 -c "from minitorch_dist.communication import init, get_rank; init(); print(get_rank())"
  python -m minitorch_dist.run --dry-run -n 4 train.py        # print the mpiexec command only
  python -m minitorch_dist.run -n 8 --hosts node1:4,node2:4 --iface eth0 train.py
  python -m minitorch_dist.run -n 8 --hostfile hosts.txt --iface 10.0.0.0/24 train.py

output: each line of a rank's output is shown as it comes; with --tag (the default when the
output is a terminal) it starts with the rank, "[1] ...". Every rank's full output is kept in
rank.<N>.log in the job's log directory (--log-dir, or a temporary one kept when the job
fails). Exit status: the job's (0 when every rank succeeded), 124 after --timeout, 130 after
Ctrl-C, 2 for a usage error of the launcher."""


class UsageError(SystemExit):
    """A usage error of the launcher: its message (with the usage line), exit status 2
    from ``main``."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        message = re.sub(r"^argument [^:]+: (?=bad value)", "", message)
        raise UsageError(f"minitorch_dist.run: {message}\n{self.format_usage().rstrip()}")


def _ranks(text):
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"bad value {text!r} for -n: the number of ranks "
                                         "must be a whole number of at least 1")
    return value


def _timeout(text):
    try:
        return check_timeout(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"bad value {text!r} for --timeout: {exc}") from None


def build_parser():
    """The launcher's ``argparse`` parser (its options only: the program is split off first)."""
    parser = _Parser(prog=PROG, usage=f"{PROG} -n N [options] {_PROGRAM}",
                     description=_DESCRIPTION, epilog=_EXAMPLES, allow_abbrev=False,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "-np", "--nproc", dest="n", type=_ranks, metavar="N",
                        help="the number of ranks to start (required)")
    parser.add_argument("--timeout", type=_timeout, metavar="SECONDS",
                        help="kill the whole job after SECONDS (a positive number) and exit "
                             "124; default: no limit")
    parser.add_argument("--oversubscribe", action="store_true",
                        help="allow more ranks than cores or slots (automatic on one machine "
                             "when N exceeds the cores)")
    parser.add_argument("--log-dir", metavar="DIR",
                        help="keep every rank's output (rank.<N>.log) and the failure records "
                             "in DIR; default: a temporary directory, removed when the job "
                             "succeeds")
    parser.add_argument("--tag", action=argparse.BooleanOptionalAction, default=None,
                        help="start each output line with its rank, \"[1] ...\" (default: "
                             "on when the launcher's output is a terminal)")
    parser.add_argument("--rank0-only", action="store_true",
                        help="show only rank 0's standard output (progress, losses); every "
                             "rank's standard error (warnings, errors) is still shown, and "
                             "every rank's output is still in its log")
    parser.add_argument("--hosts", "--host", dest="hosts", metavar="HOST[:SLOTS],...",
                        help="start the ranks on these machines (Open MPI gives a HOST without "
                             ":SLOTS one slot); each needs this Python at the same path")
    parser.add_argument("--hostfile", metavar="FILE",
                        help="the machines, one a line: HOST [slots=N] (Open MPI) or HOST:N "
                             "(MPICH); '#' starts a comment")
    parser.add_argument("--iface", dest="interfaces", metavar="NET",
                        help="with --hosts/--hostfile: the network (interface names or CIDR, "
                             "comma separated) that the job's traffic and listeners use")
    parser.add_argument("--compute-slots", dest="compute_slots", metavar="K",
                        help="at most K ranks compute at once (1 <= K <= N): a rank gives its "
                             "slot back while it waits for others, so N ranks need the memory "
                             "of K ranks' activations, and each computing rank gets cores/K "
                             "BLAS threads; same results; default: every rank computes at "
                             "will (docs/distributed.md, Launching)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the mpiexec command line and environment, start nothing")
    parser.add_argument("program", nargs="?", metavar=_PROGRAM,
                        help="the program every rank runs, as `python` would run it; the "
                             "words after it are its own arguments")
    return parser


def _option_arity(parser):
    """``{option string: (number of words it takes after it, its long name)}``."""
    arity = {}
    for action in parser._actions:
        takes = 0 if action.nargs == 0 else 1
        for name in action.option_strings:
            arity[name] = (takes, action.option_strings[-1])
    return arity


def _split(args, parser):
    """``(launcher words, program words)``: the program starts at the first word that is
    not a launcher option (``-m``/``-c`` included); ``--`` ends the options explicitly.
    An option's value is joined to its long name ("--timeout=-5"): argparse would take a
    value that starts with "-" for an option."""
    arity = _option_arity(parser)
    words, index = [], 0
    while index < len(args):
        word = args[index]
        name = word.split("=", 1)[0] if word.startswith("--") else word
        if word == "--":
            return words, list(args[index + 1:])
        if word in ("-m", "-c") or not word.startswith("-") or word == "-":
            return words, list(args[index:])
        if name not in arity:
            close = difflib.get_close_matches(name, list(arity), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            parser.error(f"unknown option {word!r}{hint}; the launcher's options come before "
                         f"the program (see {PROG} --help)")
        takes, long_name = arity[name]
        if takes and name == word and index + 1 < len(args):
            words.append(f"{long_name}={args[index + 1]}")
            index += 2
        else:
            words.append(word)
            index += 1
    return words, []


def parse_options(args):
    """The launcher's options as a dict (n, timeout, oversubscribe, dry_run, log_dir, tag,
    rank0_only, hosts, hostfile, interfaces, compute_slots, argv); a usage error is a ``UsageError`` (a
    ``SystemExit``) carrying the message and the usage line; ``-h`` prints the help and
    raises ``SystemExit(0)``.

    >>> parse_options(["-n", "2", "--hosts", "a,b", "--iface", "eth0", "t.py"])["interfaces"]
    'eth0'
    """
    parser = build_parser()
    words, program = _split(list(args), parser)
    options = vars(parser.parse_args(words))
    options.pop("program")
    if options["n"] is None or not program:
        parser.error("need -n N and a script (or -m module / -c code)")
    if program[0] in ("-m", "-c") and len(program) < 2:
        parser.error(f"{program[0]} needs a {'module' if program[0] == '-m' else 'code'} "
                     "argument")
    if options["interfaces"] and not (options["hosts"] or options["hostfile"]):
        parser.error("--iface only applies with --hosts or --hostfile (a single-machine job "
                     "uses shared memory only)")
    if options["hosts"] is not None and options["hostfile"] is not None:
        parser.error("give --hosts or --hostfile, not both")
    if options["hosts"] is not None:
        try:
            parse_hosts(options["hosts"])
        except ValueError as exc:
            parser.error(str(exc))
    if options["compute_slots"] is not None:
        if options["hosts"] is not None or options["hostfile"] is not None:
            parser.error("--compute-slots applies to a job on this machine only (its slots "
                         "are lock files there), not with --hosts or --hostfile")
        try:
            options["compute_slots"] = check_compute_slots(options["compute_slots"],
                                                           options["n"])
        except ValueError as exc:
            parser.error(str(exc))
    options["argv"] = program
    return options


def parse_args(args):
    """``(n, timeout, oversubscribe, dry_run, argv)``; options end at the first other word.
    ``parse_options`` also returns the log directory, the output and the host options.

    >>> parse_args(["-n", "2", "--timeout", "9", "train.py", "-n", "5"])
    (2, 9.0, False, False, ['train.py', '-n', '5'])
    """
    options = parse_options(args)
    return (options["n"], options["timeout"], options["oversubscribe"], options["dry_run"],
            options["argv"])


def check_program(argv):
    """Refuse (ValueError) a script that is not a readable file or a ``-m`` module that
    cannot be found, before any rank starts (a rank would find the same)."""
    if argv[0] == "-c":
        return
    if argv[0] == "-m":
        module = argv[1]
        added = os.getcwd() not in sys.path   # a rank puts the working directory first
        if added:
            sys.path.insert(0, os.getcwd())
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError) as exc:
            raise ValueError(f"-m {module}: cannot find the module ({exc})") from None
        finally:
            if added:
                sys.path.remove(os.getcwd())
        if not found:
            raise ValueError(f"-m {module}: no module named {module!r} (from {os.getcwd()})")
        return
    script = argv[0]
    if os.path.isdir(script) and not os.path.isfile(os.path.join(script, "__main__.py")):
        raise ValueError(f"script {script!r} is a directory without __main__.py")
    if not os.path.exists(script):
        raise ValueError(f"script {script!r} does not exist (from {os.getcwd()}); the "
                         "launcher's options come before it")
    if not os.access(script, os.R_OK):
        raise ValueError(f"script {script!r} cannot be read")


def _check_machines(options):
    """The host options parsed and checked; returns ``(hosts, option)`` or ``(None, None)``."""
    if options["hosts"] is not None:
        hosts, option = parse_hosts(options["hosts"]), "--hosts"
    elif options["hostfile"] is not None:
        hosts, option = read_hostfile(options["hostfile"]), "--hostfile"
    else:
        return None, None
    check_slots(hosts, options["n"], options["oversubscribe"], option)
    return hosts, option


def _command(n, argv, mpiexec, oversubscribe, **options):
    mpiexec = find_mpiexec() if mpiexec is None else mpiexec
    return build_command(n, argv, mpiexec, flavor=mpi_flavor(mpiexec), oversubscribe=oversubscribe,
                         abort_on_error=importlib.util.find_spec("mpi4py") is not None,
                         **options)


def main(args=None):
    """The command line: ``python -m minitorch_dist.run -n N [options] script.py [args]``;
    returns the exit status (2 for a usage error, printed with the usage line)."""
    try:
        options = parse_options(sys.argv[1:] if args is None else args)
        hosts = {key: options[key] for key in ("hosts", "hostfile", "interfaces")}
        if options["interfaces"]:
            hosts["interfaces"] = options["interfaces"] = check_interfaces(options["interfaces"])
        machines, option = _check_machines(options)
        if not options["dry_run"]:
            check_program(options["argv"])
            if machines:
                check_resolvable(machines, option)
    except UsageError as error:
        print(error.code, file=sys.stderr, flush=True)
        return 2
    except ValueError as exc:
        print(f"minitorch_dist.run: {exc}", file=sys.stderr, flush=True)
        return 2
    if options["dry_run"]:
        return _dry_run(options, hosts)
    try:
        return launch(options["n"], options["argv"], timeout=options["timeout"],
                      oversubscribe=options["oversubscribe"], log_dir=options["log_dir"],
                      tag=options["tag"], rank0_only=options["rank0_only"],
                      env=rank_environment(compute_slots=options["compute_slots"]), **hosts)
    except KeyboardInterrupt:       # Ctrl-C outside the wait (setup, report)
        print("minitorch_dist.run: interrupted (Ctrl-C)", file=sys.stderr, flush=True)
        return 130


def _dry_run(options, hosts):
    """Print the mpiexec command (with the environment it needs) instead of running it."""
    mpiexec = find_mpiexec()
    remote = bool(options["hosts"] or options["hostfile"])
    env = job_environment(rank_environment(compute_slots=options["compute_slots"]),
                          mpi_flavor(mpiexec), remote, interfaces=options["interfaces"])
    shown = ("LD_PRELOAD", SAVED_PRELOAD, MODE_VARIABLE, AGENT_VARIABLE)
    if options["compute_slots"] is not None:
        shown += (SLOTS_VARIABLE,) + THREAD_VARIABLES
    prefix = [f"{name}={shlex.quote(env[name])}" for name in shown if name in env]
    forward = forwarded_variables(env) if remote else ()
    print(" ".join(prefix + [shlex.quote(word) for word in _command(
        options["n"], options["argv"], mpiexec, options["oversubscribe"], forward=forward,
        **hosts)]))
    return 0
