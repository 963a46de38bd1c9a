"""A single-machine job is not reachable from the network.

Every process of a job started by ``python -m minitorch_dist.run -n 2`` (the launcher,
Open MPI's ``prterun`` daemon) listens on loopback addresses only, the ranks (shared memory)
on nothing at all; the loopback
shim that achieves this for ``prterun`` rewrites only wildcard binds and never reaches the
ranks; multi-machine jobs pass the networks the user names to Open MPI instead.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from listening_sockets import is_loopback, listeners, proc_address
from minitorch_dist.launch.cli import parse_options
from minitorch_dist.launch.mpiexec import build_command, find_mpiexec, mpi_flavor
from minitorch_dist.launch import bind_shim as job_bind_shim, network as job_network
from mpi_jobs import REPO, child_env, needs_mpi

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="LD_PRELOAD and /proc are Linux-only")


# ---- what listens where ---------------------------------------------------------------------
def _descendants(root):
    """``{pid: command name}`` of ``root`` and every process below it."""
    parents, names = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    text = stat.read()
            except OSError:
                continue
            names[int(entry)] = text[text.index("(") + 1:text.rindex(")")]
            parents[int(entry)] = int(text.rsplit(")", 1)[1].split()[1])
    tree, frontier = {root: names.get(root, "?")}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree[pid] = names[pid]
                frontier.append(pid)
    return tree


def _socket_inodes(pid):
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def test_proc_net_addresses_are_decoded():
    assert str(proc_address("0100007F")) == "127.0.0.1"
    assert str(proc_address("00000000")) == "0.0.0.0"
    assert str(proc_address("00000000000000000000000001000000")) == "::1"
    assert is_loopback(proc_address("0000000000000000FFFF00000100007F"))      # ::ffff:127.0.0.1
    assert not is_loopback(proc_address("00000000000000000000000000000000"))  # ::


# ---- a whole single-machine job ---------------------------------------------------------------
RANK_CODE = """\
import os, time
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()
seen = os.environ.get("LD_PRELOAD", "<unset>") + "|" + os.environ.get({saved!r}, "<unset>")
path = os.path.join({folder!r}, "rank.%d" % MPI.COMM_WORLD.rank)
open(path + ".tmp", "w").write(seen)
os.replace(path + ".tmp", path)
time.sleep(60)
"""


@linux_only
@needs_mpi
@pytest.mark.timeout(120)
def test_single_machine_job_listens_on_loopback_only(tmp_path):
    """Fails with Open MPI's defaults: prterun's out-of-band listener is on 0.0.0.0 and
    [::]. The user's own LD_PRELOAD (here libm, harmless) reaches the ranks unchanged."""
    if mpi_flavor(find_mpiexec()) != "openmpi":
        pytest.skip("the loopback shim is for Open MPI's prterun")
    env = child_env({"LD_PRELOAD": "libm.so.6"})
    code = RANK_CODE.format(saved=job_bind_shim.SAVED_PRELOAD, folder=str(tmp_path))
    launcher = subprocess.Popen([sys.executable, "-m", "minitorch_dist.run", "-n", "2",
                                 "--timeout", "100", "-c", code], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while len(list(tmp_path.glob("rank.[0-9]"))) < 2 and time.monotonic() < deadline:
            assert launcher.poll() is None, launcher.communicate()
            time.sleep(0.1)
        ranks = sorted(tmp_path.glob("rank.[0-9]"))
        assert len(ranks) == 2, "the ranks did not start within 90 s"
        processes = _descendants(launcher.pid)
        listening = listeners()
        daemon = [pid for pid, name in processes.items() if name == "prterun"]
        assert len(daemon) == 1, processes
        rank_pids = set(_descendants(daemon[0])) - set(daemon)
        exposed, inspected = [], set()
        for pid, name in processes.items():
            for inode in _socket_inodes(pid):
                if inode in listening:
                    inspected.add(name)
                    address, port = listening[inode]
                    if not is_loopback(address) or pid in rank_pids:   # ranks: shared memory
                        exposed.append(f"{name} (pid {pid}) listens on {address} port {port}")
        assert "prterun" in inspected, "prterun listens on nothing? " + repr(processes)
        assert len(rank_pids) >= 2, processes
        assert not exposed, "\n".join(exposed)
        for rank in ranks:          # the shim is gone from the ranks' environment
            assert rank.read_text() == "libm.so.6|<unset>"
    finally:
        launcher.send_signal(signal.SIGTERM)
        out, err = launcher.communicate(timeout=30)
    assert b"warning" not in err, err


# ---- the shim itself --------------------------------------------------------------------------
BIND_CODE = """\
import socket
for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET, "127.0.0.2"),
                     (socket.AF_INET6, "::")):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.bind((host, 0))
        print(host, s.getsockname()[0])
    except OSError as exc:
        print(host, "error", exc.errno)
"""


@linux_only
def test_shim_turns_wildcard_binds_into_loopback_and_leaves_named_addresses():
    shim, reason = job_bind_shim.bind_shim()
    if shim is None:
        pytest.skip(f"no loopback shim here: {reason}")
    plain = subprocess.run([sys.executable, "-c", BIND_CODE], capture_output=True, text=True,
                           timeout=60).stdout.splitlines()
    shimmed = subprocess.run([sys.executable, "-c", BIND_CODE], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ, LD_PRELOAD=shim,
                                                  MINITORCH_DIST_BIND="loopback")
                             ).stdout.splitlines()
    # without a mode the library changes nothing: a stray LD_PRELOAD of it is harmless
    modeless = subprocess.run([sys.executable, "-c", BIND_CODE], capture_output=True, text=True,
                              timeout=60, env=dict(os.environ, LD_PRELOAD=shim)
                              ).stdout.splitlines()
    assert modeless == plain
    assert plain[0] == "0.0.0.0 0.0.0.0" and shimmed[0] == "0.0.0.0 127.0.0.1"
    assert shimmed[1] == plain[1] == "127.0.0.2 127.0.0.2"
    if "error" not in plain[2]:                         # a host with IPv6
        assert plain[2] == ":: ::" and shimmed[2] == ":: ::1"


def test_preload_keeps_the_users_value_for_the_shim_to_restore():
    env = job_bind_shim.preload_environment({"LD_PRELOAD": "/a.so:/b.so"}, "/c/shim.so")
    assert env["LD_PRELOAD"] == "/c/shim.so /a.so:/b.so"
    assert env[job_bind_shim.SAVED_PRELOAD] == "/a.so:/b.so"
    assert env[job_bind_shim.MODE_VARIABLE] == "loopback"
    assert job_bind_shim.release_environment(env) == {"LD_PRELOAD": "/a.so:/b.so"}
    env = job_bind_shim.preload_environment({}, "/c/shim.so", "net:eth1")
    assert env["LD_PRELOAD"] == "/c/shim.so" and env[job_bind_shim.SAVED_PRELOAD] == ""
    assert env[job_bind_shim.MODE_VARIABLE] == "net:eth1"
    assert job_bind_shim.release_environment(env) == {}


def test_without_a_compiler_the_job_runs_and_says_it_is_exposed(monkeypatch, capsys):
    monkeypatch.setattr(job_bind_shim, "_compiler", lambda: None)
    monkeypatch.setattr(sys, "platform", "linux")
    job_bind_shim.bind_shim.cache_clear()
    try:
        assert job_bind_shim.bind_shim() == (None, "no C compiler (cc) to build it")
        env = job_network.job_environment({"A": "1"}, "openmpi", remote=False)
    finally:
        job_bind_shim.bind_shim.cache_clear()
    assert env == {"A": "1"}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "listen on all network interfaces" in err
    assert "no C compiler" in err and "docs/failures.md" in err


@linux_only
def test_a_cache_path_that_ld_preload_cannot_hold_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "my cache"))
    monkeypatch.setattr(job_bind_shim, "_compiler", lambda: ["cc"])     # not needed: refused first
    job_bind_shim.bind_shim.cache_clear()
    try:
        shim, reason = job_bind_shim.bind_shim()
    finally:
        job_bind_shim.bind_shim.cache_clear()
    assert shim is None and "space or a colon" in reason


def test_only_single_machine_open_mpi_jobs_get_the_shim(monkeypatch):
    monkeypatch.setattr(job_network, "bind_shim", lambda: ("/x/shim.so", None))
    assert job_network.job_environment({}, "openmpi", remote=False)["LD_PRELOAD"] == "/x/shim.so"
    assert "LD_PRELOAD" not in job_network.job_environment({}, "openmpi", remote=True)
    assert "LD_PRELOAD" not in job_network.job_environment({}, "mpich", remote=False)


@linux_only
@needs_mpi
def test_dry_run_shows_the_preload_for_one_machine_only():
    if mpi_flavor(find_mpiexec()) != "openmpi" or job_bind_shim.bind_shim()[0] is None:
        pytest.skip("no Open MPI or no loopback shim here")

    def dry_run(*args):
        done = subprocess.run([sys.executable, "-m", "minitorch_dist.run", "--dry-run", *args],
                              cwd=REPO, env=child_env(), capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()
    assert dry_run("-n", "2", "t.py")[0] == "LD_PRELOAD=" + job_bind_shim.bind_shim()[0]
    assert not any(w.startswith("LD_PRELOAD=") for w in dry_run("-n", "2", "--hosts", "a,b",
                                                                 "t.py"))
    named = dry_run("-n", "2", "--hosts", "a,b", "--iface", "lo", "t.py")   # lo: on every host
    assert "MINITORCH_DIST_BIND=net:lo" in named and named[0].startswith("LD_PRELOAD=")


# ---- several machines: the user names the network ----------------------------------------------
def test_multi_machine_options_reach_mpiexec():
    command = build_command(4, ["t.py"], "mpiexec", "py", is_root=False, cores=1,
                                hosts=["a", "b"], interfaces="eth1")
    assert command[command.index("--host") + 1] == "a,b"
    assert command[command.index("btl_tcp_if_include") + 1] == "eth1"
    assert command[command.index("oob_tcp_if_include") + 1] == "eth1"
    assert "self,sm" not in command and "--oversubscribe" not in command
    with pytest.raises(SystemExit, match="--iface only applies"):
        parse_options(["-n", "2", "--iface", "eth0", "t.py"])
