"""How launched jobs end. Signals to the launcher leave no process behind, a rank
that leaves early ends the job within seconds and is named, ``--timeout`` takes only positive
finite numbers, and a failed job is reported once. (What a job's processes listen on:
test_network_exposure.py.)"""
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from minitorch_dist.launch.cli import parse_args
from minitorch_dist.launch.job import _prune_job_dirs, check_timeout, JOB_DIR_PREFIX, launch, TIMEOUT_EXIT_CODE
from minitorch_dist.launch.multiprocess import spawn
from minitorch_dist.launch import report
from mpi_jobs import REPO, SCRIPTS, child_env, needs_mpi

SLEEP = os.path.join(SCRIPTS, "fail_sleep.py")
EARLY = os.path.join(SCRIPTS, "fail_early_exit.py")
RAISE = os.path.join(SCRIPTS, "fail_raise.py")


def _alive(pid):
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _launcher(*args, timeout=90):
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "minitorch_dist.run", *args], cwd=REPO,
                          env=child_env(), capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - start


# ---- --timeout values ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf", "-inf", "x", ""])
def test_timeout_accepts_only_positive_finite_numbers(value):
    with pytest.raises(SystemExit, match=f"bad value {value!r} for --timeout"):
        parse_args(["-n", "2", "--timeout", value, "s.py"])
    with pytest.raises(ValueError, match="--timeout must be"):
        launch(2, ["s.py"], timeout=value, mpiexec="/nonexistent/mpiexec")


def test_timeout_values_that_are_fine():
    assert check_timeout("0.5") == 0.5 and check_timeout(600) == 600.0
    assert check_timeout(None) is None
    assert parse_args(["-n", "1", "--timeout", "1e3", "s.py"])[1] == 1000.0
    with pytest.raises(ValueError):
        check_timeout(math.nan)


# ---- signals --------------------------------------------------------------------------------
@needs_mpi
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_a_signal_to_the_launcher_leaves_no_process(tmp_path, signum):
    """A signal to the launcher ends every rank; except after SIGKILL, which nothing can
    clean up after, it also leaves nothing in the temporary folder (here one of this test's,
    so that a SIGKILL's leftovers do not stay in the machine's)."""
    import shutil
    import tempfile
    temp = tempfile.mkdtemp(prefix="mtd-s-", dir="/tmp")   # short: PMIx sockets live inside
    launcher = subprocess.Popen([sys.executable, "-m", "minitorch_dist.run", "-n", "2", SLEEP,
                                 str(tmp_path), "120"], cwd=REPO,
                                env=child_env({"TMPDIR": temp}),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("pid.*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [int(p.read_text()) for p in tmp_path.glob("pid.*")]
        assert len(pids) == 2, "the ranks did not start"
        launcher.send_signal(signum)
        _, err = launcher.communicate(timeout=30)
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        survivors = [pid for pid in pids if _alive(pid)]
        assert not survivors, f"ranks {survivors} survived {signum.name}"
        if signum != signal.SIGKILL:
            assert launcher.returncode == 128 + signum
            assert len(err.strip().splitlines()) == 1, err          # one line, no traceback
            assert "stopped all 2 ranks" in err and "Traceback" not in err
            assert os.listdir(temp) == []         # job folder and MPI session folder gone
        if signum == signal.SIGINT:
            assert "Ctrl-C" in err and launcher.returncode == 130
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(10)
        for path in tmp_path.glob("pid.*"):
            pid = int(path.read_text())
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


# ---- early exit -------------------------------------------------------------------------------
@needs_mpi
@pytest.mark.parametrize("mode, how", [("exit", "without an error at step 3"),
                                       ("short", "without an error at step 4"),
                                       ("code", "with exit code 3 at step 3")])
def test_a_rank_leaving_early_ends_the_job_and_is_named(mode, how):
    done, seconds = _launcher("-n", "2", EARLY, mode, "1")          # no --timeout
    assert seconds < 15, f"took {seconds:.1f} s"
    assert done.returncode != 0
    assert f"rank 1 left the job {how}" in done.stderr, done.stderr
    if mode == "code":       # a non-zero exit is a failure of rank 1 itself
        assert "Rank 1 failed first (step 3):\n  SystemExit: exit code 3" in done.stderr
    else:
        assert "while rank 0 waits in allreduce" in done.stderr
    assert "rank 0 finished" not in done.stdout


@needs_mpi
def test_ranks_that_all_finish_are_not_reported():
    done, _ = _launcher("-n", "2", "--timeout", "60", "-c",
                        "import numpy as np, time\n"
                        "from minitorch_dist import communication as comm\n"
                        "comm.init(); c = comm.get_communicator()\n"
                        "c.allreduce(np.ones(2))\n"
                        "time.sleep(2.0 * c.rank)\n"          # rank 1 finishes 2 s later
                        "c.allreduce(np.ones(2)); print('ok', c.rank)")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["0", "1", "ok", "ok"]


@needs_mpi
@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="needs Linux's /proc/loadavg")
def test_session_files_a_killed_mpiexec_left_behind_do_not_stop_a_later_job():
    """Regression: a killed mpiexec leaves its session folder ``<temp>/ompi.<pid>``; a later
    mpiexec with the same pid (pids wrap at 32768) failed at start ("The PMIx server's
    listener thread failed to start"). The launcher now gives each job a fresh folder and
    removes it afterwards. Here the next pids' folders are planted, with their sockets,
    in a temporary folder of this test's (TMPDIR: other jobs do not see them)."""
    import shutil
    import socket
    import tempfile
    temp = tempfile.mkdtemp(prefix="mtd-t-", dir="/tmp")   # short: sockets live inside
    try:
        first = int(open("/proc/loadavg").read().split()[-1]) + 1     # the last pid given
        host = socket.gethostname()
        for pid in range(first, first + 300):
            folder = os.path.join(temp, f"ompi.{pid}")
            os.mkdir(folder)
            for name in (f"pmix.{host}.tool", f"pmix.{host}.tool.{pid}",
                         f"pmix.{host}.tool.prterun-{host}-{pid}@0"):
                with socket.socket(socket.AF_UNIX) as stale:
                    stale.bind(os.path.join(folder, name))
        done = subprocess.run([sys.executable, "-m", "minitorch_dist.run", "-n", "2",
                               "--timeout", "60", "-c", "print('ok')"], cwd=REPO,
                              env=child_env({"TMPDIR": temp}), capture_output=True, text=True,
                              timeout=90)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["ok", "ok"]
        assert not [name for name in os.listdir(temp) if name.startswith("mtd-mpi-")]
    finally:
        shutil.rmtree(temp, ignore_errors=True)


@needs_mpi
@pytest.mark.parametrize("n,hosts", [(0, None), (2, "bad host!")], ids=["no ranks", "bad host"])
def test_a_job_that_cannot_start_leaves_no_folder(n, hosts, tmp_path, monkeypatch):
    """Regression: the job folder and Open MPI's session folder were made before the command
    was checked, so a refused job left both in the temporary folder; and ``launch()`` passed
    a host name the command line refuses on to mpiexec (which failed after 2 s with its own
    message)."""
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ValueError):
        launch(n, ["s.py"], hosts=hosts, timeout=60)
    assert sorted(path.name for path in tmp_path.iterdir()) == []


# ---- one report -------------------------------------------------------------------------------
@needs_mpi
def test_a_failed_job_is_reported_once(tmp_path):
    logs = tmp_path / "logs"
    done, _ = _launcher("-n", "2", "--log-dir", str(logs), RAISE)
    assert done.returncode == 1
    err = done.stderr
    assert err.count("ValueError: DATA_PATH '/nonexistent/data' does not exist") == 1, err
    assert "failed first" in err and "load_data(\"/nonexistent/data\")" in err
    assert "Traceback" not in err and "MPI_ABORT" not in err and "prterun" not in err
    assert str(logs) in err
    assert len(err.strip().splitlines()) <= 4 + report.TRACEBACK_LINES
    assert any("Traceback" in (logs / f"rank.{r}.log").read_text()
               for r in (0, 1) if (logs / f"rank.{r}.log").exists())


def test_a_rank_writes_its_failure_line_in_one_piece():
    """Regression (a CI flake): the failure line went out as two writes, the text and then
    its newline, and MPI_Abort's banner landed between them; the launcher then took the
    banner's first rule as part of this line and showed the rest of the banner."""
    from minitorch_dist.launch.rank_runner import say_failed

    class Writes:
        def __init__(self):
            self.chunks = []

        def write(self, text):
            self.chunks.append(text)

        def flush(self):
            pass
    stream = Writes()
    say_failed(stream, 1, ValueError("no data  "))
    assert stream.chunks == ["minitorch_dist: rank 1 failed: ValueError: no data\n"]


@needs_mpi
def test_one_failing_rank_is_named(tmp_path):
    done, _ = _launcher("-n", "2", "--log-dir", str(tmp_path), RAISE, "1")
    assert done.returncode == 1
    assert "Rank 1 failed first" in done.stderr, done.stderr


def test_report_folds_identical_errors():
    records = [{"rank": r, "kind": "exception", "summary": "ValueError: bad",
                "traceback": 'Traceback\n  File "t.py", line 1, in <module>\n    f()\n'
                             "ValueError: bad\n", "time": r} for r in (3, 0, 1, 2, 7)]
    records.append({"rank": 5, "kind": "exception", "summary": "KeyError: 'x'",
                    "traceback": "", "time": 9})
    text = report.format_report(records, 1, "/logs")
    assert "Rank 3 failed first" in text
    assert "ranks 0-2, 7: the same error" in text
    assert "rank 5: KeyError: 'x'" in text
    assert '    f()' in text and text.count("ValueError: bad") == 1


def test_report_without_records_shows_what_mpiexec_said():
    text = report.format_report([], 134, "/logs", "prterun: something went wrong\n")
    assert "no rank reported an exception" in text and "something went wrong" in text


def test_report_keeps_our_own_reason_above_a_long_mpi_banner():
    """The launch agent's one-line reason came before PRRTE's 20-line banner and was cut."""
    said = ("minitorch_dist.launch.remote: no launch agent found on PATH among 'myssh'\n"
            + "".join(f"banner line {i}\n" for i in range(20)))
    text = report.format_report([], 1, "/logs", said)
    assert "no launch agent found" in text and "banner line 19" in text
    assert "banner line 4\n" not in text          # the banner itself is still cut to 15


def test_only_the_newest_failure_logs_are_kept(tmp_path):
    for index in range(5):
        folder = tmp_path / f"{JOB_DIR_PREFIX}{index}"
        folder.mkdir()
        os.utime(folder, (1000 + index, 1000 + index))
    (tmp_path / "my-logs").mkdir()
    _prune_job_dirs(str(tmp_path), keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        [f"{JOB_DIR_PREFIX}3", f"{JOB_DIR_PREFIX}4", "my-logs"]


# ---- the multiprocessing launch ---------------------------------------------------------------
SPAWN = os.path.join(SCRIPTS, "fail_spawn.py")


def test_spawn_reports_a_failure_once(tmp_path):
    done = subprocess.run([sys.executable, SPAWN, "raise", str(tmp_path)], cwd=REPO,
                          env=child_env(), capture_output=True, text=True, timeout=90)
    assert done.returncode == 1
    assert done.stderr.count("ValueError: bad batch size for 3 processes") == 1, done.stderr
    assert "Rank 0 failed first" in done.stderr and "Traceback" not in done.stderr
    assert "_spawned" not in done.stderr
    assert "Traceback" in (tmp_path / "logs" / "rank.0.log").read_text()


def test_spawn_succeeds_quietly(tmp_path):
    done = subprocess.run([sys.executable, SPAWN, "ok", str(tmp_path)], cwd=REPO,
                          env=child_env(), capture_output=True, text=True, timeout=90)
    assert done.returncode == 0 and done.stderr == ""
    assert sorted(re.findall(r"rank \d ok", done.stdout)) == ["rank 0 ok", "rank 1 ok", "rank 2 ok"]


def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# Started with SIGINT ignored (as a background job of a script is), Python installs no
# Ctrl-C handler, and the parent slept through the signal until the test timed out. Three
# fresh-clone CI runs failed so: their suite ran as a background job, and the spawned
# parent inherited the ignored SIGINT. spawn now installs its own, as the launcher does.
@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_spawn_ctrl_c_prints_one_line_and_stops_every_process(tmp_path, inherited):
    parent = subprocess.Popen([sys.executable, SPAWN, "sleep", str(tmp_path)], cwd=REPO,
                              env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True,
                              preexec_fn=_ignore_sigint if inherited == "ignored" else None)
    try:
        pids_dir = tmp_path / "pids"
        deadline = time.monotonic() + 60
        while (not pids_dir.exists() or len(list(pids_dir.iterdir())) < 3) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)         # every pid file written, not only created
        pids = [int(p.read_text()) for p in pids_dir.iterdir()]
        assert len(pids) == 3
        parent.send_signal(signal.SIGINT)
        _, err = parent.communicate(timeout=30)
        assert parent.returncode == 130
        assert err.strip() == "minitorch_dist.run: interrupted (Ctrl-C): stopped all 3 processes"
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in pids if _alive(pid)]
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_spawn_rejects_bad_arguments():
    with pytest.raises(ValueError, match="world_size must be a positive int"):
        spawn(print, 0)
    with pytest.raises(ValueError, match="--timeout must be"):
        spawn(print, 2, timeout=-1)


def test_report_names_the_fix_for_a_wrong_rank_count():
    records = [{"rank": 1, "kind": "exception", "time": 0, "traceback": "",
                "summary": "ShardingError: matmul: strategy ((2, 4), (4, 1)) uses 8 devices but "
                           "the world has only 2; the product of the split counts must not "
                           "exceed the world"}]
    assert "start it again with python -m minitorch_dist.run -n 8" in \
        report.format_report(records, 1, "/logs")
    records[0]["summary"] = ("ValueError: pipeline_stages (4) must divide the number of ranks "
                             "(6): every stage needs the same number of ranks")
    assert "needs a multiple of 4 ranks" in report.format_report(records, 1, "/logs")
    records[0]["summary"] = "ValueError: something else"
    assert "hint" not in report.format_report(records, 1, "/logs")


@needs_mpi
def test_a_rank_that_dies_without_a_word_is_still_reported():
    done, seconds = _launcher("-n", "2", "--timeout", "60", "-c",
                              "import os, time\n"
                              "from mpi4py import MPI\n"
                              "MPI.COMM_WORLD.Barrier()\n"
                              "if MPI.COMM_WORLD.rank == 1: os._exit(7)\n"
                              "time.sleep(30)")
    assert done.returncode != 0 and seconds < 30
    assert "no rank reported an exception" in done.stderr, done.stderr
    assert "mpiexec said:" in done.stderr and "full logs of every rank" in done.stderr


@needs_mpi
def test_a_timeout_names_the_ranks_that_had_left():
    """A raw mpi4py barrier is not watched: the timeout ends the job, naming the leaver."""
    done, seconds = _launcher("-n", "2", "--timeout", "6", "-c",
                              "import sys\n"
                              "from mpi4py import MPI\n"
                              "if MPI.COMM_WORLD.rank == 1: sys.exit(0)\n"
                              "MPI.COMM_WORLD.Barrier()")
    assert done.returncode == TIMEOUT_EXIT_CODE and seconds < 30
    assert "did not finish within 6.0 s" in done.stderr
    assert "ranks that had already left while others still ran: rank 1 (exit code 0)" in \
        done.stderr, done.stderr


def test_watchdog_only_flags_collectives_the_leaver_never_joined():
    from minitorch_dist.launch import watchdog

    class Fake:
        world_ranks, size = None, 2

        def __init__(self, seq):
            self._call_seq = seq
    a, b = Fake(3), Fake(2)              # two wrappers of COMM_WORLD: 5 calls in all
    counted = []

    def count(comm):                     # what watchdog.watch records of a communicator
        counted.append((watchdog.comm_key(comm), [comm._call_seq]))
        watchdog._counters.append(counted[-1])
    count(a)
    count(b)
    try:
        joined = {1: {"rank": 1, "code": 0, "collectives": {"world": 5}, "step": None}}
        assert watchdog.stuck_reason(a, ("allreduce", 3, 0.0), joined, 0) is None
        left = {1: {"rank": 1, "code": 0, "collectives": {"world": 4}, "step": 7}}
        reason = watchdog.stuck_reason(a, ("allreduce", 3, 0.0), left, 0)
        assert reason.startswith("rank 1 left the job without an error at step 7 after 4 "
                                 "collective calls, while rank 0 waits in allreduce #3")
        sub = Fake(1)
        sub.world_ranks = (0, 2)         # a group without rank 1 is not affected
        count(sub)
        assert watchdog.stuck_reason(sub, ("barrier", 1, 0.0), left, 0) is None
    finally:
        for entry in counted:
            watchdog._counters.remove(entry)


@needs_mpi
def test_launch_writes_both_streams_to_one_file(tmp_path):
    log = tmp_path / "out.txt"
    with open(log, "w") as out:
        code = launch(2, ["-c", "import sys; print('o'); print('e', file=sys.stderr)"],
                          timeout=50, stdout=out, stderr=subprocess.STDOUT,
                          env=child_env())
    assert code == 0
    assert sorted(log.read_text().split()) == ["e", "e", "o", "o"]
