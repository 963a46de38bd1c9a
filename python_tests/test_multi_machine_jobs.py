"""Jobs on several machines: ``--hosts``/``--hostfile`` jobs listen only on the
networks named with ``--iface`` (and loopback), on every machine.

The whole-job tests build two "machines" on this one: two network namespaces joined by two
veth pairs (a cluster network ``clu0`` and a public one ``pub0``), each with its own host name
and, for the remote one, its own PID namespace and a private view of the launcher's temporary
folder. A fake ssh (``PRTE_MCA_plm_ssh_agent``, as a user would set a real one) runs the
remote command in the second namespace. They need root, ``ip`` and ``unshare``; elsewhere
they skip and the unit tests below still run.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from listening_sockets import TABLES, is_loopback, parse_listeners
from minitorch_dist.launch.job import launch
from minitorch_dist.launch.mpiexec import build_command, find_mpiexec, mpi_flavor
from minitorch_dist.launch import bind_shim as job_bind_shim, network as job_network, remote as job_remote, teardown as job_teardown
from mpi_jobs import REPO, SCRIPTS, child_env, needs_mpi

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="LD_PRELOAD and namespaces are Linux-only")


# ---- the launcher's pieces ----------------------------------------------------------------
def test_iface_makes_job_remote_the_launch_agent():
    command = build_command(2, ["t.py"], "mpiexec", "/py", is_root=False, cores=1,
                                hosts="a,b", interfaces="10.0.0.0/24")
    assert command[command.index("plm_ssh_agent") + 1] == "/py -m minitorch_dist.launch.remote agent"
    plain = build_command(2, ["t.py"], "mpiexec", "/py", is_root=False, cores=1, hosts="a,b")
    assert "plm_ssh_agent" not in plain
    with pytest.raises(ValueError, match="without spaces"):
        job_remote.agent_setting("/my envs/python")


def test_the_users_agent_is_kept_for_job_remote(monkeypatch):
    monkeypatch.setattr(job_network, "bind_shim", lambda: ("/x/shim.so", None))
    user = {"PRTE_MCA_plm_ssh_agent": "/opt/bin/myssh", "OMPI_MCA_plm_rsh_args": "-p 2222",
            "LD_PRELOAD": "/u.so"}
    env = job_network.job_environment(user, "openmpi", remote=True, interfaces="eth1")
    assert env[job_remote.AGENT_VARIABLE] == "/opt/bin/myssh -p 2222"
    assert not any(name in env for name in job_remote.AGENT_SETTINGS + job_remote.ARGS_SETTINGS)
    assert env["LD_PRELOAD"] == "/x/shim.so /u.so"
    assert env[job_bind_shim.MODE_VARIABLE] == "net:eth1"
    assert job_remote.user_agent({}) == "ssh"


def test_a_job_on_several_machines_without_iface_says_it_listens_everywhere(capsys):
    assert job_network.job_environment({"A": "1"}, "openmpi", remote=True) == {"A": "1"}
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "without --iface" in err and "every network" in err


def test_the_remote_command_is_quoted_for_the_remote_shell():
    command = "PATH=/a:$PATH;export PATH;/bin/prted --x \"y z\""
    wrapped = job_remote.wrap_command(command, "eth0,10.1.0.0/16", "ssh -p 22", python="/py")
    import shlex
    assert shlex.split(wrapped) == ["/py", "-m", "minitorch_dist.launch.remote", "daemon",
                                    "eth0,10.1.0.0/16", "ssh -p 22", command]


def test_an_iface_this_machine_lacks_is_refused_before_anything_starts():
    done = subprocess.run([sys.executable, "-m", "minitorch_dist.run", "-n", "2", "--hosts",
                           "a,b", "--iface", "nosuch0", "t.py"], cwd=REPO, env=child_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--iface 'nosuch0' names no interface of this machine" in done.stderr
    with pytest.raises(ValueError, match="names no interface"):
        launch(2, ["t.py"], hosts="a,b", interfaces="nosuch0,nosuch1")


def test_job_remote_refuses_to_run_outside_a_launched_job(monkeypatch):
    monkeypatch.delenv(job_bind_shim.MODE_VARIABLE, raising=False)
    with pytest.raises(SystemExit, match="outside a launched job"):
        job_remote.main(["agent", "host", "cmd"])
    with pytest.raises(SystemExit, match="usage"):
        job_remote.main(["nonsense"])


def test_a_rank_watches_the_launcher_only_in_the_launchers_process_space():
    """The regression behind it: a rank on another machine checked the launcher's PID there,
    found none, and ended itself (exit 137) a second into every multi-machine job."""
    here = job_teardown.launcher_identity()
    if job_teardown.local_launcher_pid(here) is None:
        pytest.skip("/proc does not give a boot id and PID namespace here")
    assert job_teardown.local_launcher_pid(here) == os.getpid()
    pid, _, space = here.partition("@")
    assert job_teardown.local_launcher_pid(f"{pid}@other-boot/{space}") is None
    assert job_teardown.local_launcher_pid(pid) is None      # no space: never a guess


BIND_RELEASE_CODE = """\
import os, socket
def bound():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("0.0.0.0", 0))
    return s.getsockname()[0]
first = bound()
del os.environ["MINITORCH_DIST_BIND"]
print(first, bound())
"""


def _shim_or_skip():
    shim, reason = job_bind_shim.bind_shim()
    if shim is None:
        pytest.skip(f"no bind shim here: {reason}")
    return shim


def _binds_under(shim, mode):
    env = dict(os.environ, LD_PRELOAD=shim, MINITORCH_DIST_BIND=mode)
    done = subprocess.run([sys.executable, "-c", BIND_RELEASE_CODE], capture_output=True,
                          text=True, timeout=60, env=env)
    return done.stdout.split()


@linux_only
def test_net_mode_falls_back_to_loopback_and_ends_when_released():
    """No address on the named network here: loopback, never the wildcard. Once the
    variable is gone (a rank after MPI_Init), binds are the program's own again."""
    assert _binds_under(_shim_or_skip(), "net:nosuch0") == ["127.0.0.1", "0.0.0.0"]


RC_CODE = """\
import os, socket
import mpi4py
mpi4py.rc.thread_level = "serialized"       # the program's own setting, made before MPI
from mpi4py import MPI
s = socket.socket()
s.bind(("0.0.0.0", 0))
print(MPI.Query_thread() == MPI.THREAD_SERIALIZED, os.environ.get("MINITORCH_DIST_BIND"),
      os.environ.get("LD_PRELOAD"), s.getsockname()[0])
"""


@linux_only
@needs_mpi
def test_a_rank_releases_the_shim_after_the_programs_own_mpi_init(tmp_path):
    """The rank runner hooks the import of mpi4py.MPI instead of initialising MPI itself:
    the program's mpi4py.rc settings count, and its own sockets bind where it says."""
    shim = _shim_or_skip()
    script = tmp_path / "rc.py"
    script.write_text(RC_CODE)
    env = child_env({"LD_PRELOAD": f"{shim} libm.so.6", "MINITORCH_DIST_BIND": "net:nosuch0",
                     "MINITORCH_DIST_SAVED_LD_PRELOAD": "libm.so.6"})
    done = subprocess.run([sys.executable, "-m", "minitorch_dist.launch.rank_runner",
                           str(script)], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env=env)
    assert done.stdout.split() == ["True", "None", "libm.so.6", "0.0.0.0"], done.stderr


def _an_interface_address():
    """``(interface, IPv4 address)`` of this machine other than loopback, or None."""
    if shutil.which("ip") is None:
        return None
    lines = subprocess.run(["ip", "-o", "-4", "addr", "show", "up"], capture_output=True,
                           text=True, timeout=30).stdout.splitlines()
    for line in lines:
        words = line.split()
        address = words[3].split("/")[0]
        if not address.startswith("127."):
            return words[1], address
    return None


@linux_only
def test_net_mode_binds_the_named_interface_or_network():
    shim = _shim_or_skip()
    found = _an_interface_address()
    if found is None:
        pytest.skip("no interface with an IPv4 address other than loopback")
    name, address = found
    assert _binds_under(shim, f"net:{name}") == [address, "0.0.0.0"]
    assert _binds_under(shim, f"net:nosuch0,{address}/32") == [address, "0.0.0.0"]
    prefix = ".".join(address.split(".")[:3])
    assert _binds_under(shim, f"net:{prefix}.0/24") == [address, "0.0.0.0"]


# ---- two machines in network namespaces ------------------------------------------------------
def _namespaces_missing():
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "needs root on Linux"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"no {tool} command"
    name = f"mtdprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, timeout=30)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    return None if made.returncode == 0 else "cannot create network namespaces here"


CLUSTER, PUBLIC = "10.231.0.", "10.232.0."

JOB_CODE = """\
import os, socket, sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.rank + 1.0)
seen = [socket.gethostname(), str(total), os.environ.get("LD_PRELOAD", "<unset>"),
        os.environ.get("MINITORCH_DIST_BIND", "<unset>"),
        # what the launcher sets for every rank reaches the other machine's too (-x)
        os.environ.get("OMP_NUM_THREADS", "<unset>"),
        "job-dir" if os.environ.get("MINITORCH_DIST_JOB_DIR") else "<no job dir>"]
folder = sys.argv[1]
with open(os.path.join(folder, "rank.%d.tmp" % comm.rank), "w") as out:
    out.write("|".join(seen))
os.replace(os.path.join(folder, "rank.%d.tmp" % comm.rank), os.path.join(folder, "rank.%d" % comm.rank))
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(folder, "stop")) and time.monotonic() < deadline:
    time.sleep(0.1)
comm.Barrier()
"""


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """Two namespaces ``a`` and ``b`` with clu0 (CLUSTER) and pub0 (PUBLIC) networks."""
    missing = _namespaces_missing()
    if missing:
        pytest.skip(missing)
    tag = str(os.getpid() % 100000)
    names = {"a": f"mtdA{tag}", "b": f"mtdB{tag}"}

    def ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)
    for ns in names.values():       # left over by a killed run with the same tag
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    try:
        for ns in names.values():
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
        for network, prefix in (("clu0", CLUSTER), ("pub0", PUBLIC)):
            # both ends made inside their namespaces: no interface comes and goes in this
            # machine's namespace, where the jobs of tests running alongside list them
            ip("link", "add", network, "netns", names["a"], "type", "veth", "peer", "name",
               network, "netns", names["b"])
            for side, host in (("a", 1), ("b", 2)):
                ip("-n", names[side], "addr", "add", f"{prefix}{host}/24", "dev", network)
                ip("-n", names[side], "link", "set", network, "up")
        yield names
    finally:
        for ns in names.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _fake_ssh(folder, namespace, hidden):
    """An ssh stand-in: ``ssh HOST COMMAND...`` runs COMMAND in ``namespace`` as machine
    "nodeB", with its own PIDs, without the launcher's temporary folder ``hidden``, and, as
    sshd does, in a login environment of its own: nothing of the launcher's but PATH, HOME
    and PYTHONPATH."""
    path = folder / "fake_ssh"
    path.write_text(
        "#!/bin/sh\n"
        "while [ \"${1#-}\" != \"$1\" ]; do shift; done\n"       # options such as -x
        "shift\n"                                              # the host
        "exec env -i PATH=\"$PATH\" HOME=\"$HOME\" PYTHONPATH=\"${PYTHONPATH:-}\" "
        f"ip netns exec {namespace} unshare --uts --pid --fork --mount-proc --mount "
        f"sh -c \"mount -t tmpfs none {hidden}; hostname nodeB; $*\"\n")
    path.chmod(0o755)
    return path


def _listening_in(namespace):
    text = subprocess.run(["ip", "netns", "exec", namespace, "cat", *TABLES],
                          capture_output=True, text=True, timeout=30).stdout
    return list(parse_listeners(text).values())


def _start_job(machines, folder, args, ranks=2):
    """``python -m minitorch_dist.run -n RANKS --hosts A:S,B:S ARGS`` (S = RANKS / 2 slots
    each) launched on machine a (nodeA) with the fake ssh reaching b (nodeB), which cannot
    see the launcher's temporary folder."""
    hidden = folder / "launcher_tmp"
    hidden.mkdir(exist_ok=True)
    ssh = _fake_ssh(folder, machines["b"], hidden)
    env = child_env({"PRTE_MCA_plm_ssh_agent": str(ssh), "TMPDIR": str(hidden)})
    slots = ranks // 2
    named = "" if "--hostfile" in args else f"--hosts {CLUSTER}1:{slots},{CLUSTER}2:{slots} "
    launch = (f"hostname nodeA; exec {sys.executable} -m minitorch_dist.run -n {ranks} "
              f"--timeout 90 {named}{args}")
    return subprocess.Popen(["ip", "netns", "exec", machines["a"], "unshare", "--uts", "sh",
                             "-c", launch], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(launcher, timeout=120):
    try:
        out, err = launcher.communicate(timeout=timeout)
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
            launcher.communicate(timeout=30)
    return out, err


def _run_two_machine_job(machines, folder, extra):
    """A 2-rank job over both namespaces; once both ranks report, list what listens in each;
    return (listeners by namespace, rank reports, exit code, stderr)."""
    script = folder / "job.py"
    script.write_text(JOB_CODE)
    launcher = _start_job(machines, folder, f"{extra} {script} {folder}")
    listening = {}
    try:
        deadline = time.monotonic() + 90
        while len(list(folder.glob("rank.[0-9]"))) < 2 and time.monotonic() < deadline:
            if launcher.poll() is not None:
                break
            time.sleep(0.1)
        listening = {side: _listening_in(ns) for side, ns in machines.items()}
    finally:
        (folder / "stop").write_text("")
        out, err = _finish(launcher)
    reports = sorted(path.read_text() for path in folder.glob("rank.[0-9]"))
    return listening, reports, launcher.returncode, err


def _exposed(addresses, allowed_prefix):
    return [f"{address} port {port}" for address, port in addresses
            if not (is_loopback(address) or str(address).startswith(allowed_prefix))]


@linux_only
@needs_mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("iface, hosts", [("clu0", "--hosts"), (CLUSTER + "0/24", "--hostfile")])
def test_a_two_machine_job_listens_on_the_named_network_only(machines, tmp_path, iface, hosts):
    """Fails with Open MPI's defaults (next test): prterun, the remote prted and both ranks
    listen on 0.0.0.0/[::]. With the bind shim each listens on its machine's clu0 address or
    on loopback; the ranks compute together over clu0 and then run without the shim."""
    if mpi_flavor(find_mpiexec()) != "openmpi":
        pytest.skip("the bind shim is for Open MPI")
    if job_bind_shim.bind_shim()[0] is None:
        pytest.skip("no bind shim here: " + job_bind_shim.bind_shim()[1])
    if hosts == "--hostfile":       # the same machines, named in a file
        (tmp_path / "hosts").write_text(f"{CLUSTER}1 slots=1\n{CLUSTER}2 slots=1\n")
        hosts = f"--hostfile {tmp_path / 'hosts'}"
    else:
        hosts = ""
    listening, reports, code, err = _run_two_machine_job(machines, tmp_path,
                                                         f"{hosts} --iface {iface}")
    assert code == 0, err
    assert reports == ["nodeA|3.0|<unset>|<unset>|1|job-dir",
                       "nodeB|3.0|<unset>|<unset>|1|job-dir"], err
    for side, host in (("a", 1), ("b", 2)):
        assert not _exposed(listening[side], CLUSTER), (side, listening[side])
        # the daemon's and the rank's listeners moved to clu0: the check above saw them
        on_cluster = [port for address, port in listening[side]
                      if str(address) == f"{CLUSTER}{host}"]
        assert len(on_cluster) >= 2, (side, listening[side])


@linux_only
@needs_mpi
@pytest.mark.timeout(200)
def test_without_iface_the_two_machine_job_runs_and_listens_everywhere(machines, tmp_path):
    """The control for the test above (it can see exposure), and the regression test for
    ranks on another machine ending themselves a second in (exit 137)."""
    if mpi_flavor(find_mpiexec()) != "openmpi":
        pytest.skip("Open MPI's defaults are what this test shows")
    listening, reports, code, err = _run_two_machine_job(machines, tmp_path, "")
    assert code == 0, err
    assert reports == ["nodeA|3.0|<unset>|<unset>|1|job-dir",
                       "nodeB|3.0|<unset>|<unset>|1|job-dir"], err
    assert _exposed(listening["b"], CLUSTER)
    assert "without --iface" in err


@linux_only
@needs_mpi
@pytest.mark.timeout(200)
def test_a_remote_rank_that_raises_gets_the_one_report(machines, tmp_path):
    """nodeB cannot see the job directory: its failure record travels through its output.
    The other rank's echo over TCP (peer disconnected, "*** An error occurred") stays in
    the logs."""
    if mpi_flavor(find_mpiexec()) != "openmpi":
        pytest.skip("the fake ssh is Open MPI's launch agent")
    script = tmp_path / "raise.py"
    script.write_text("from mpi4py import MPI\nc = MPI.COMM_WORLD\nc.Barrier()\n"
                      "if c.rank == 1:\n    raise ValueError('bad batch on nodeB')\n"
                      "c.Barrier()\n")
    started = time.monotonic()
    launcher = _start_job(machines, tmp_path, f"--iface clu0 {script}")
    out, err = _finish(launcher)
    assert time.monotonic() - started < 30
    assert launcher.returncode == 1, err
    assert "Rank 1 failed first:\n  ValueError: bad batch on nodeB" in err, err
    assert err.count("bad batch on nodeB") == 2, err     # the summary and the traceback line
    assert "unexpectedly disconnected" not in err and "***" not in err, err


@linux_only
@needs_mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("leaver, waiter", [(0, 1), (1, 0)],
                         ids=["nodeA-leaves-nodeB-waits", "nodeB-leaves-nodeA-waits"])
@pytest.mark.parametrize("shared_logs", [False, True], ids=["relayed", "shared-log-dir"])
def test_an_early_exit_across_machines_is_named(machines, tmp_path, leaver, waiter,
                                                shared_logs):
    """Without a shared job directory nodeB relays its exit record (nodeA's watchdog reads
    it) or its wait (the launcher judges for it); with ``--log-dir`` on a folder both see,
    the records are files, as on one machine. Either way: ends in seconds, names both."""
    if mpi_flavor(find_mpiexec()) != "openmpi":
        pytest.skip("the fake ssh is Open MPI's launch agent")
    logs = f"--log-dir {tmp_path / 'logs'}" if shared_logs else ""
    started = time.monotonic()
    launcher = _start_job(machines, tmp_path, f"--iface clu0 {logs} "
                          f"{os.path.join(SCRIPTS, 'fail_early_exit.py')} exit {leaver}")
    out, err = _finish(launcher)
    assert time.monotonic() - started < 30, err
    assert launcher.returncode == 1, err
    assert f"Rank {waiter} failed first (step 3):" in err, err
    assert (f"rank {leaver} left the job without an error at step 3 after 3 collective calls, "
            f"while rank {waiter} waits in allreduce #4") in err, err
    assert "finished" not in out


@linux_only
@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("script, args, ranks, expected", [
    ("dp_model_check.py", "", 2, ["DP_MODEL_CHECK OK world=2"]),
    ("dist_opt_check.py", "--option fp16 --tol 2e-3", 2, ["DIST_OPT_CHECK OK"]),
    ("pipeline_check.py", "--scheduler 1f1b", 2, ["PIPELINE_CHECK OK world=2 stages=2"]),
    ("sharding_check.py", "--dp 2 --mp 2", 4, [f"OK rank {r}:" for r in range(4)]),
], ids=["model-data-parallel", "singa-distopt-fp16", "pipeline-1f1b", "sharding-2x2"])
def test_training_over_two_machines_equals_one_process(machines, tmp_path, script, args, ranks,
                                                       expected):
    """The ranks talk over TCP on clu0 here (shared memory only within a machine): data
    parallel, SINGA's DistOpt, pipeline and operator sharding still match one process."""
    if mpi_flavor(find_mpiexec()) != "openmpi":
        pytest.skip("the fake ssh is Open MPI's launch agent")
    launcher = _start_job(machines, tmp_path, f"--iface clu0 {os.path.join(SCRIPTS, script)} "
                                              f"{args}", ranks=ranks)
    out, err = _finish(launcher, timeout=240)
    assert launcher.returncode == 0, err
    assert all(line in out for line in expected), out


@linux_only
@pytest.mark.timeout(120)
def test_the_shim_warns_when_the_network_holds_several_addresses(machines):
    """One listener takes one address; Open MPI advertises them all, so a peer could pick
    one nobody listens on: the machine says so."""
    shim = _shim_or_skip()
    extra = f"{CLUSTER}11/24"
    subprocess.run(["ip", "-n", machines["a"], "addr", "add", extra, "dev", "clu0"],
                   check=True, capture_output=True, timeout=30)
    try:
        done = subprocess.run(["ip", "netns", "exec", machines["a"], sys.executable, "-c",
                               BIND_RELEASE_CODE], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, LD_PRELOAD=shim,
                                       MINITORCH_DIST_BIND="net:clu0"))
    finally:
        subprocess.run(["ip", "-n", machines["a"], "addr", "del", extra, "dev", "clu0"],
                       capture_output=True, timeout=30)
    assert done.stdout.split() == [f"{CLUSTER}1", "0.0.0.0"], done.stderr
    assert done.stderr.count("minitorch_dist: warning: --iface clu0 matches more than one "
                             "IPv4 address") == 1
