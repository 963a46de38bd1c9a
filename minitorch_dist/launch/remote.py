"""Carrying the bind shim to the other machines of a multi-machine job.

Open MPI's ``prterun`` starts its daemon (``prted``) on every other machine through a launch
agent, ssh by default: ``AGENT HOST COMMAND...``, where the words of COMMAND make one shell
command line that the remote login shell runs. A daemon started that way listens on every
interface of its machine. For a job with ``--iface NETS`` the launcher makes this module the
agent (``agent_setting``):

    python -m minitorch_dist.launch.remote agent HOST COMMAND...

runs the user's own agent (``AGENT_VARIABLE``: the launcher copies it from
``PRTE_MCA_plm_ssh_agent``/``OMPI_MCA_plm_rsh_agent``, with any ``..._ssh_args``; default
ssh) with the command wrapped in

    PYTHON -m minitorch_dist.launch.remote daemon NETS AGENT COMMAND

which, on that machine, builds (once) or finds the bind shim, preloads it in ``net:NETS``
mode and runs COMMAND with the user's login shell, as ssh would have. The daemon's wildcard
binds then land on that machine's address on NETS, and so do those of the ranks it starts,
until each rank releases the shim once MPI is initialised
(``rank_runner``). AGENT rides along because a daemon may start further
daemons (PRRTE's tree spawn) through this same agent.

Every machine needs this Python at the same path with minitorch_dist installed: the ranks
are started with it too. Without a C compiler on a machine, its daemon still starts, after
one warning on stderr saying that it listens on every interface and why.
"""
import os
import pwd
import shlex
import shutil
import sys

from .bind_shim import MODE_VARIABLE, bind_shim, preload_environment, release_environment

__all__ = ["AGENT_VARIABLE", "AGENT_SETTINGS", "ARGS_SETTINGS", "user_agent", "agent_setting",
           "wrap_command", "main"]

AGENT_VARIABLE = "MINITORCH_DIST_SSH_AGENT"
# PRRTE's names first; Open MPI 4's (``rsh``) are still read by users' scripts
AGENT_SETTINGS = ("PRTE_MCA_plm_ssh_agent", "OMPI_MCA_plm_ssh_agent", "PRTE_MCA_plm_rsh_agent",
                  "OMPI_MCA_plm_rsh_agent")
ARGS_SETTINGS = ("PRTE_MCA_plm_ssh_args", "OMPI_MCA_plm_ssh_args", "PRTE_MCA_plm_rsh_args",
                 "OMPI_MCA_plm_rsh_args")
_USAGE = ("usage: python -m minitorch_dist.launch.remote agent HOST COMMAND...\n"
          "       python -m minitorch_dist.launch.remote daemon NETS AGENT COMMAND")


def user_agent(env):
    """The launch agent the user set in ``env`` (PRRTE's/Open MPI's variables, with their
    extra arguments), as one command line; ``ssh`` by default.

    >>> user_agent({"OMPI_MCA_plm_rsh_agent": "rsh : ssh", "PRTE_MCA_plm_ssh_args": "-p 2222"})
    'rsh -p 2222 : ssh -p 2222'
    """
    agent = next((env[name] for name in AGENT_SETTINGS if env.get(name)), "ssh")
    extra = next((env[name] for name in ARGS_SETTINGS if env.get(name)), "")
    choices = [choice.strip() for choice in agent.split(":") if choice.strip()]
    return " : ".join(f"{choice} {extra}".strip() for choice in choices)


def agent_setting(python=None):
    """The value of PRRTE's ``plm_ssh_agent`` that makes this module the agent.

    >>> agent_setting("/usr/bin/python3")
    '/usr/bin/python3 -m minitorch_dist.launch.remote agent'
    """
    python = sys.executable if python is None else python
    if any(c.isspace() for c in python):
        raise ValueError(f"--iface needs a Python path without spaces (PRRTE splits its launch "
                         f"agent's command on them), got {python!r}")
    return f"{python} -m minitorch_dist.launch.remote agent"


def _pick_agent(agent):
    """The first of ``agent``'s " : "-separated choices found on PATH, as words."""
    for choice in agent.split(":"):
        words = shlex.split(choice)
        if words and shutil.which(words[0]):
            return words
    raise SystemExit(f"minitorch_dist.launch.remote: no launch agent found on PATH among "
                     f"{agent!r} (set PRTE_MCA_plm_ssh_agent to the command that reaches "
                     f"the other machines)")


def wrap_command(command, nets, agent, python=None):
    """The remote command line that runs ``command`` under the shim in ``net:nets`` mode.

    >>> wrap_command("prted --x 1", "eth0", "ssh", python="/py")
    "/py -m minitorch_dist.launch.remote daemon eth0 ssh 'prted --x 1'"
    """
    python = sys.executable if python is None else python
    return " ".join(shlex.quote(word) for word in
                    (python, "-m", "minitorch_dist.launch.remote", "daemon", nets, agent, command))


def _agent(args):
    """``agent HOST COMMAND...``: run the user's agent on HOST with the wrapped command."""
    if len(args) < 2 or args[0].startswith("-"):
        raise SystemExit(_USAGE)
    env = dict(os.environ)
    nets = env.get(MODE_VARIABLE, "")
    if not nets.startswith("net:"):
        raise SystemExit("minitorch_dist.launch.remote agent: started outside a launched job "
                         "(no MINITORCH_DIST_BIND=net:... in the environment)")
    agent = env.get(AGENT_VARIABLE) or "ssh"
    words = _pick_agent(agent)
    release_environment(env)          # ssh itself runs without the shim
    host, command = args[0], " ".join(args[1:])
    if os.path.basename(words[0]) == "ssh":
        words = words + ["-x"]        # as PRRTE does for ssh: no X11 forwarding
    remote = wrap_command(command, nets[len("net:"):], agent)
    os.execvpe(words[0], words + [host, remote], env)


def _daemon(args):
    """``daemon NETS AGENT COMMAND``: run COMMAND in the login shell under the shim."""
    if len(args) != 3:
        raise SystemExit(_USAGE)
    nets, agent, command = args
    env = dict(os.environ)
    env[AGENT_VARIABLE] = agent
    shim, reason = bind_shim()
    if shim is None:
        print(f"minitorch_dist: warning: the Open MPI daemon on {os.uname().nodename} will "
              f"listen on every network interface: the bind shim is unavailable there "
              f"({reason}). See docs/failures.md, 'Network exposure'.", file=sys.stderr,
              flush=True)
        env[MODE_VARIABLE] = "net:" + nets      # this agent still wraps daemons it starts
    else:
        env = preload_environment(env, shim, "net:" + nets)
    shell = pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    if not os.access(shell, os.X_OK) or os.path.basename(shell) in ("nologin", "false"):
        shell = "/bin/sh"
    os.execve(shell, [shell, "-c", command], env)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "agent":
        return _agent(argv[1:])
    if argv and argv[0] == "daemon":
        return _daemon(argv[1:])
    raise SystemExit(_USAGE)


if __name__ == "__main__":
    main()
