"""Records relayed through the ranks' output, and what the launcher shows of MPI's own
messages (for ranks on machines without the job directory).

The whole path runs in ``test_multi_machine_jobs.py`` on two namespace machines; these
tests pin its pieces on any machine: the rank's relay line, the launcher's parsing and
judging, and the output reader's handling of MPI's echo of a failure.
"""
import io
import json
import os
import subprocess
import sys

from minitorch_dist.launch import watchdog
from minitorch_dist.launch.output import OutputDemux
from minitorch_dist.launch.relay import RecordRelay, parse_record_line
from mpi_jobs import REPO, child_env, needs_mpi


def _wait(rank, seq, members=(0, 1), step=3):
    return {"rank": rank, "key": "world", "op": "allreduce", "seq": seq, "mine": seq,
            "members": list(members), "step": step, "time": 0.0, "open": True}


def _exit(rank, calls, step=3):
    return {"rank": rank, "code": 0, "collectives": {"world": calls}, "step": step}


def test_a_rank_without_the_job_directory_relays_its_record_on_stderr(tmp_path):
    code = ("from minitorch_dist.launch import watchdog\n"
            "import sys\n"
            "sys.stderr = open('/dev/null', 'w')\n"      # the program's own redirection
            "watchdog.set_step(7)\n"
            "watchdog.record_exit(0)\n")
    env = child_env({watchdog.JOB_DIR_VARIABLE: str(tmp_path / "not-here"),
                     "OMPI_COMM_WORLD_RANK": "5"})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=REPO, env=env)
    name, record = parse_record_line(done.stderr.strip())
    assert name == "exit.5.json"
    assert record["rank"] == 5 and record["step"] == 7 and record["code"] == 0


def test_relay_lines_are_parsed_strictly():
    assert parse_record_line('minitorch_dist: record wait.1.json {"rank": 1}') == \
        ("wait.1.json", {"rank": 1})
    for bad in ('minitorch_dist: record ../../etc/x.json {"rank": 1}',
                'minitorch_dist: record exit.1.json not-json',
                'minitorch_dist: record exit.1.json [1]',
                'minitorch_dist: rank 1 failed: ValueError'):
        assert parse_record_line(bad) is None


def test_the_relay_judges_a_wait_that_can_never_end(tmp_path):
    stops = []
    relay = RecordRelay(str(tmp_path), stop=lambda: stops.append(1))
    relay("wait.1.json", _wait(1, 4))
    assert not stops                              # nobody has left: it may still finish
    relay("exit.0.json", _exit(0, 3))
    assert stops == [1]
    failure = json.loads((tmp_path / "failure.1.json").read_text())
    assert failure["kind"] == "early_exit" and failure["step"] == 3
    assert failure["summary"].startswith("rank 0 left the job without an error at step 3 "
                                         "after 3 collective calls, while rank 1 waits in "
                                         "allreduce #4")
    relay("exit.1.json", _exit(1, 3))
    assert stops == [1]                           # stops once


def test_a_wait_that_completed_is_never_judged(tmp_path):
    """Rank 1 waited in #4 a while ago; rank 0 made that call and left after #6: every
    collective rank 1 announced did complete, so nothing is wrong."""
    stops = []
    relay = RecordRelay(str(tmp_path), stop=lambda: stops.append(1))
    relay("wait.1.json", _wait(1, 4))
    relay("exit.0.json", _exit(0, 6))
    relay("exit.1.json", _exit(1, 6))
    relay.close()
    assert not stops and not (tmp_path / "failure.1.json").exists()
    assert sorted(os.listdir(tmp_path)) == ["exit.0.json", "exit.1.json", "wait.1.json"]


def test_a_withdrawn_wait_is_never_judged(tmp_path):
    """The review's case: rank 1 once waited in #4 (it completed: the wait was withdrawn),
    then rank 0's exit record counts fewer calls (say, after release()): no failure."""
    stops = []
    relay = RecordRelay(str(tmp_path), stop=lambda: stops.append(1))
    relay("wait.1.json", _wait(1, 4))
    relay("wait.1.json", {"rank": 1, "open": False, "time": 1.0})
    relay("exit.0.json", _exit(0, 0))
    relay.close()
    assert not stops and not (tmp_path / "failure.1.json").exists()


def test_an_exit_record_written_as_a_file_is_judged_too(tmp_path):
    """Rank 1 (relaying) waits; rank 0 on the launcher's machine writes its exit record
    straight into the job directory later: the relay's poll finds it within a second."""
    import time
    stops = []
    relay = RecordRelay(str(tmp_path), stop=lambda: stops.append(1))
    relay("wait.1.json", _wait(1, 4))
    watchdog.write_record(str(tmp_path), "exit.0.json", _exit(0, 3))
    deadline = time.monotonic() + 5
    while not stops and time.monotonic() < deadline:
        time.sleep(0.05)
    relay.close()
    assert stops == [1] and (tmp_path / "failure.1.json").exists()


COUNT_CODE = """import gc, json, os
from minitorch_dist.launch import watchdog

class Comm:                 # what watch() reads of a communicator
    size, world_ranks, _call_seq, _pending = 2, (0, 1), 0, None

comm = Comm()
watchdog.watch(comm)
comm._seq_box[0] = 5        # Communicator._enter keeps it current
del comm
gc.collect()                # release() drops the communicator
watchdog.record_exit(0)
print(json.dumps(json.load(open(os.path.join(os.environ["MINITORCH_DIST_JOB_DIR"],
                                             "exit.0.json")))["collectives"]))
"""


def test_an_exit_record_counts_the_calls_of_released_communicators(tmp_path):
    """Counted from the live communicators, an exit after release() said 0 calls: a wait
    that had completed then looked stuck and a healthy job was killed."""
    done = subprocess.run([sys.executable, "-c", COUNT_CODE], capture_output=True, text=True,
                          timeout=60, cwd=REPO,
                          env=child_env({watchdog.JOB_DIR_VARIABLE: str(tmp_path)}))
    assert done.stdout.strip() == '{"0,1": 5}', done.stderr


def _demux(tmp_path, lines):
    """Feed tagged mpiexec output through an OutputDemux; returns (demux, err text)."""
    err = io.StringIO()
    demux = OutputDemux(str(tmp_path), io.StringIO(), err, relay=RecordRelay(
        str(tmp_path), stop=lambda: None))

    class Pipe(io.BytesIO):
        pass
    demux._pump("stderr", Pipe(b"".join(lines)))
    return demux, err


def test_mpis_echo_of_a_failure_is_held_and_dropped_when_a_rank_explains(tmp_path):
    record = json.dumps({"rank": 1, "kind": "exception", "summary": "ValueError: x",
                         "traceback": "Traceback...\nValueError: x\n", "fold": "ValueError: x",
                         "step": None, "time": 1.0})
    lines = [b"[1,0]<stderr>: user warning line\n",
             b"[1,0]<stderr>: " + b"-" * 74 + b"\n",
             b"[1,0]<stderr>: An MPI communication peer process has unexpectedly disconnected.\n",
             b"[1,0]<stderr>: " + b"-" * 74 + b"\n",
             b"[1,0]<stderr>: \x00[nodeA:00000] *** An error occurred in Socket closed\n",
             b"[1,1]<stderr>: minitorch_dist: record failure.1.json " + record.encode() + b"\n",
             b"[1,1]<stderr>: \x00[1,0]<stderr>: \x00"]       # an empty write inside another
    demux, err = _demux(tmp_path, lines)
    assert err.getvalue() == "user warning line\n"
    assert (tmp_path / "failure.1.json").exists()            # relayed, not printed
    demux.release_mpi_messages(show=False)
    assert err.getvalue() == "user warning line\n"
    demux.join()
    assert "unexpectedly disconnected" in (tmp_path / "rank.0.log").read_text()   # kept


def test_mpis_messages_are_shown_at_the_end_when_no_rank_explains(tmp_path):
    lines = [b"[1,0]<stderr>: " + b"-" * 74 + b"\n",
             b"[1,0]<stderr>: WARNING: An invalid value was given for btl_tcp_if_include.\n",
             b"[1,0]<stderr>: " + b"-" * 74 + b"\n",
             b"[1,0]<stderr>: [nodeA:00000] *** An error occurred in MPI_Recv\n"]
    demux, err = _demux(tmp_path, lines)
    assert err.getvalue() == ""
    demux.release_mpi_messages(show=True)
    assert "invalid value was given" in err.getvalue() and "*** An error" in err.getvalue()
    demux.join()


@needs_mpi
def test_the_programs_own_dashes_are_shown_and_a_successful_job_shows_mpis_warnings(tmp_path):
    """The review's case: a stderr rule of 30 dashes held back every later line, and a job
    that succeeded (exit records only) dropped them."""
    script = tmp_path / "dashes.py"
    script.write_text("import sys\n"
                      "print('before', file=sys.stderr)\n"
                      "print('-' * 30, file=sys.stderr)\n"
                      "print('epoch 1 loss 0.5', file=sys.stderr)\n"
                      "print('-' * 74, file=sys.stderr)\n"        # as long as MPI's rule
                      "print('a block that looks like MPI', file=sys.stderr)\n"
                      "print('-' * 74, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-m", "minitorch_dist.run", "-n", "1", "--timeout",
                           "60", str(script)], capture_output=True, text=True, timeout=90,
                          cwd=REPO, env=child_env())
    assert done.returncode == 0, done.stderr
    for line in ("before", "-" * 30, "epoch 1 loss 0.5", "a block that looks like MPI"):
        assert line in done.stderr.splitlines(), done.stderr


def test_a_daemons_warning_is_shown_as_it_comes(tmp_path):
    """Untagged output (the daemons', ssh's) goes to mpiexec.log; our own warnings (a
    machine without a compiler for the shim) also reach the console."""
    lines = [b"minitorch_dist: warning: the Open MPI daemon on nodeB will listen on every "
             b"network interface\n",
             b"some prted chatter\n"]
    demux, err = _demux(tmp_path, lines)
    assert err.getvalue() == lines[0].decode()
    demux.join()
    assert (tmp_path / "mpiexec.log").read_bytes() == b"".join(lines)
