"""Where a launched job listens: mpiexec's environment for each kind of job.

* One machine (Open MPI): the ranks use shared memory (no TCP listener) and ``prterun``
  gets the bind shim in ``loopback`` mode (``bind_shim``): nothing of the job is
  reachable from the network.
* Several machines with ``--iface NETS`` (Open MPI): ``prterun``, the daemons it starts on
  the other machines (``remote``) and every rank until MPI is initialised get the shim
  in ``net:NETS`` mode: every listener is on the named networks (or loopback).
* Several machines without ``--iface``: Open MPI's default, every interface; the launcher
  says so once. MPICH: unchanged (its ``-iface`` only chooses the network used).

Without the shim (no C compiler, not Linux) the job still runs, after one warning on stderr
saying what will listen on every interface and why.
"""
import re
import socket
import sys
import threading

from .bind_shim import MODE_VARIABLE, bind_shim, preload_environment
from .remote import AGENT_SETTINGS, AGENT_VARIABLE, ARGS_SETTINGS, user_agent

__all__ = ["exposure_warning", "job_environment", "check_interfaces", "UNNAMED_NETWORK_NOTE",
           "parse_hosts", "read_hostfile", "check_slots", "check_resolvable"]

UNNAMED_NETWORK_NOTE = ("minitorch_dist.run: note: without --iface, Open MPI's daemons and the "
                        "ranks listen on every network interface of every machine; --iface NET "
                        "(an interface name or a CIDR network) keeps them on that network.")


def exposure_warning(reason, remote=False):
    """The one line printed when the shim is unavailable (the job still runs)."""
    what = ("Open MPI's daemon on this machine (prterun) and the ranks here" if remote
            else "Open MPI's launcher daemon (prterun)")
    return (f"minitorch_dist.run: warning: {what} will listen on all network interfaces for "
            f"this job: the bind shim is unavailable ({reason}). See docs/failures.md, "
            "'Network exposure'.")


def job_environment(env, flavor, remote, interfaces=None, warn=True):
    """mpiexec's environment ``env`` for a job on one machine (``remote`` False) or several
    (``interfaces``: the networks the user named), as the module docstring says; ``warn``
    prints the one-line warning or note to stderr where it applies."""
    if flavor != "openmpi" or (remote and not interfaces):
        if warn and remote and flavor == "openmpi":
            print(UNNAMED_NETWORK_NOTE, file=sys.stderr, flush=True)
        return env
    shim, reason = bind_shim()
    if remote:
        env = dict(env)
        env[AGENT_VARIABLE] = user_agent(env)
        for name in AGENT_SETTINGS + ARGS_SETTINGS:   # handed to remote.py instead
            env.pop(name, None)
        if shim is None:
            if warn:
                print(exposure_warning(reason, remote=True), file=sys.stderr, flush=True)
            env[MODE_VARIABLE] = "net:" + interfaces      # the agent still wraps the others
            return env
        return preload_environment(env, shim, "net:" + interfaces)
    if shim is None:
        if warn:
            print(exposure_warning(reason), file=sys.stderr, flush=True)
        return env
    return preload_environment(env, shim)


def check_interfaces(interfaces, local=None):
    """The ``--iface`` list, normalised ("eth0, eth1" -> "eth0,eth1": Open MPI and the shim
    match entries exactly). Refused: an empty or overlong list (the shim holds 1000
    characters), and a list of interface names none of which this machine has: the
    launching machine's daemon (``prterun``) talks to the others over the same network, and
    Open MPI would only say "No network interfaces were found for out-of-band
    communications". CIDR entries are left to Open MPI. ``local``: the interface names here.

    >>> check_interfaces("eth9,ib9", local=["lo", "eth0"])
    Traceback (most recent call last):
    ...
    ValueError: --iface 'eth9,ib9' names no interface of this machine (it has: eth0, lo); the launching machine must be on the network the job uses
    >>> check_interfaces("eth9, 10.0.0.0/8", local=["lo"])
    'eth9,10.0.0.0/8'
    """
    entries = [entry.strip() for entry in str(interfaces).split(",") if entry.strip()]
    normalised = ",".join(entries)
    if not entries:
        raise ValueError(f"--iface needs an interface name or a CIDR network, got {interfaces!r}")
    if len(normalised) > 1000:
        raise ValueError(f"--iface takes at most 1000 characters, got {len(normalised)}")
    if any("/" in entry for entry in entries):
        return normalised
    if local is None:
        try:
            local = [name for _, name in socket.if_nameindex()]
        except OSError:
            return normalised
    if not set(entries) & set(local):
        raise ValueError(f"--iface {interfaces!r} names no interface of this machine (it has: "
                         f"{', '.join(sorted(local))}); the launching machine must be on the "
                         "network the job uses")
    return normalised


# ---- the machines of a multi-machine job: --hosts and --hostfile, checked here ----------------
_HOST_NAME = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?$")
_HOSTFILE_FIELDS = ("slots", "max_slots", "max-slots")


def _slots(text, where):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{where}: the slot count must be a positive integer, got {text!r}")
    return value


def _host_name(name, where):
    if not _HOST_NAME.match(name):
        raise ValueError(f"{where}: {name!r} is not a host name or IPv4 address (letters, "
                         "digits, '.', '-' and '_')")
    return name


def parse_hosts(text):
    """``--hosts "a,b:4"`` as ``[(name, slots or None), ...]`` (Open MPI gives a host without
    ``:SLOTS`` one slot); an empty list or entry is a ValueError naming it.

    >>> parse_hosts("node1:4, node2")
    [('node1', 4), ('node2', None)]
    >>> parse_hosts("node1,,node2")
    Traceback (most recent call last):
    ...
    ValueError: --hosts entry 2 of 'node1,,node2' is empty (expected HOST or HOST:SLOTS)
    """
    if isinstance(text, (list, tuple)):
        text = ",".join(text)
    if not str(text).strip():
        raise ValueError(f"--hosts needs at least one machine (HOST or HOST:SLOTS, comma "
                         f"separated), got {text!r}")
    hosts = []
    for index, entry in enumerate(str(text).split(","), start=1):
        entry = entry.strip()
        where = f"--hosts entry {entry!r}"
        if not entry:
            raise ValueError(f"--hosts entry {index} of {text!r} is empty (expected HOST or "
                             "HOST:SLOTS)")
        name, colon, slots = entry.partition(":")
        hosts.append((_host_name(name, where), _slots(slots, where) if colon else None))
    return hosts


def read_hostfile(path):
    """The machines of an Open MPI (``HOST slots=N``) or MPICH (``HOST:N``) host file, as
    ``[(name, slots or None), ...]``; a bad line is a ValueError naming the file and line."""
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise ValueError(f"--hostfile {path!r} cannot be read: {exc.strerror or exc}") from None
    hosts = []
    for number, line in enumerate(lines, start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"--hostfile {path} line {number} ({line.strip()!r})"
        name, colon, slots = words[0].partition(":")
        count = _slots(slots, where) if colon else None
        for word in words[1:]:
            key, equals, value = word.partition("=")
            if not equals or key not in _HOSTFILE_FIELDS:
                raise ValueError(f"{where}: unknown field {word!r} (expected slots=N or "
                                 "max_slots=N)")
            if key == "slots":
                count = _slots(value, where)
            else:
                _slots(value, where)
        hosts.append((_host_name(name, where), count))
    if not hosts:
        raise ValueError(f"--hostfile {path!r} names no machine (one HOST [slots=N] a line)")
    return hosts


def check_slots(hosts, n, oversubscribe, option):
    """Refuse ``-n n`` on fewer slots than the hosts give (Open MPI would only say "All nodes
    which are allocated for this job are already filled"). Hosts without a count are left
    to MPI, except on ``--hosts`` where Open MPI gives them one slot."""
    if oversubscribe:
        return
    if option == "--hostfile" and any(slots is None for _, slots in hosts):
        return
    total = sum(1 if slots is None else slots for _, slots in hosts)
    if n > total:
        raise ValueError(f"-n {n} needs {n} slots but {option} gives {total} ("
                         + ", ".join(f"{name}:{slots or 1}" for name, slots in hosts)
                         + "): give more slots (HOST:SLOTS) or add --oversubscribe")


def check_resolvable(hosts, option, wait=3.0):
    """Refuse a host name that does not resolve (Open MPI would only say that a daemon
    "failed to report back"). A lookup slower than ``wait`` seconds is left to MPI."""
    for name, _ in hosts:
        outcome = {}

        def look_up(name=name, outcome=outcome):
            try:
                socket.getaddrinfo(name, None)
                outcome["ok"] = True
            except (OSError, UnicodeError) as exc:
                outcome["error"] = exc
        thread = threading.Thread(target=look_up, daemon=True)
        thread.start()
        thread.join(wait)
        if "error" in outcome:
            raise ValueError(f"{option} entry {name!r}: no such host (the name does not "
                             f"resolve: {outcome['error']})")
