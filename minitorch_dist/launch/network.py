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
import socket
import sys

from .bind_shim import MODE_VARIABLE, bind_shim, preload_environment
from .remote import AGENT_SETTINGS, AGENT_VARIABLE, ARGS_SETTINGS, user_agent

__all__ = ["exposure_warning", "job_environment", "check_interfaces", "UNNAMED_NETWORK_NOTE"]

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
