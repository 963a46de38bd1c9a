"""The relay and the watchdog check every record before judging it (issue 28 item 7): a
malformed one is dropped with a one-line warning and never stops the thread that reads it;
two writers of one record never rename each other's temporary file away."""
import json
import os
import threading

import pytest

from minitorch_dist.launch import watchdog
from minitorch_dist.launch.output import OutputDemux
from minitorch_dist.launch.record_check import record_problem
from minitorch_dist.launch.relay import RecordRelay


def _open_wait(rank=0, seq=4):
    return {"rank": rank, "key": "world", "op": "allreduce", "seq": seq, "mine": seq,
            "members": [0, 1], "step": 3, "time": 0.0, "open": True}


def _pump(tmp_path, relay, lines):
    err = io_text()
    demux = OutputDemux(str(tmp_path), io_text(), err, relay=relay)
    thread = threading.Thread(target=demux._pump, args=("stderr", _Pipe(b"".join(lines))))
    thread.start()
    thread.join(10)
    demux.join()
    return err.getvalue()


def io_text():
    import io
    return io.StringIO()


class _Pipe:
    def __init__(self, data):
        import io
        self.buffer = io.BytesIO(data)

    def readline(self):
        return self.buffer.readline()

    def close(self):
        pass


def test_a_relayed_line_without_rank_is_dropped_with_a_warning(tmp_path, capsys):
    stops = []
    relay = RecordRelay(str(tmp_path), stop=lambda: stops.append(1))
    lines = [b'[1,1]<stderr>: minitorch_dist: record exit.1.json {"code": 0, "step": 3}\n',
             b"[1,1]<stderr>: still here\n"]
    shown = _pump(tmp_path, relay, lines)
    assert shown == "still here\n"                     # the reader went on
    warning = capsys.readouterr().err
    assert "minitorch_dist: warning: dropped a malformed record exit.1.json" in warning
    assert "no integer 'rank' field" in warning and "Traceback" not in warning
    assert not (tmp_path / "exit.1.json").exists() and not stops


def test_an_exit_record_with_string_collectives_is_dropped(tmp_path, capsys):
    stops = []
    relay = RecordRelay(str(tmp_path), stop=lambda: stops.append(1))
    relay("wait.0.json", _open_wait())
    relay("exit.1.json", {"rank": 1, "code": 0, "collectives": "3", "step": 3})
    relay.close()
    assert not stops and not (tmp_path / "exit.1.json").exists()
    assert "'collectives' must map communicator keys" in capsys.readouterr().err


def test_the_watchdog_skips_a_malformed_exit_file(tmp_path, capsys):
    """Rank 0's watchdog thread reads the job directory: a record it cannot judge is left
    out (it used to raise AttributeError there and the thread died)."""
    (tmp_path / "exit.1.json").write_text(json.dumps(
        {"rank": 1, "code": 0, "collectives": "3", "step": 3}))
    (tmp_path / "exit.2.json").write_text(json.dumps({"code": 0}))
    (tmp_path / "exit.3.json").write_text(json.dumps(
        {"rank": 3, "code": 0, "collectives": {"world": 2}, "step": 1}))
    exits = watchdog.read_records(str(tmp_path), "exit")
    assert list(exits) == [3]
    assert watchdog.stuck_reason_for(dict(_open_wait(), members=[0, 1, 3]), exits) \
        .startswith("rank 3 left the job")
    assert capsys.readouterr().err.count("minitorch_dist: warning: dropped") == 2


@pytest.mark.parametrize("name, record, problem", [
    ("exit.1.json", {"rank": "1"}, "no integer 'rank'"),
    ("exit.1.json", {"rank": 2, "collectives": {}}, "differs from the rank in its name"),
    ("exit.1.json", {"rank": 1, "collectives": {"world": -1}}, "'collectives'"),
    ("exit.1.json", {"rank": 1, "p2p": {"world": {"sent": {"0": "x"}}}}, "'p2p'"),
    ("wait.1.json", {"rank": 1, "open": True, "key": "world"}, "string 'key' and 'op'"),
    ("wait.1.json", {"rank": 1, "open": "yes"}, "'open' must be true or false"),
    ("wait.1.json", dict(_open_wait(1), members="0,1"), "'members'"),
    ("failure.1.json", {"rank": 1, "summary": 3}, "'summary'"),
    ("exit.1.json", {"rank": 1, "step": "3"}, "'step'"),
])
def test_record_problems_are_named(name, record, problem):
    assert problem in record_problem(name, record)


def test_two_writers_of_one_record_never_collide(tmp_path):
    """The launcher's ``FileNotFoundError: .../exit.1.json.part``: every writer of a record
    used the same temporary name, so one writer's rename took the other's file away."""
    errors = []

    def write(k):
        try:
            for i in range(150):
                watchdog.write_record(str(tmp_path), "exit.1.json",
                                      {"rank": 1, "code": 0, "collectives": {}, "n": k * 1000 + i})
        except Exception as err:      # noqa: BLE001 - collected for the assertion
            errors.append(err)
    threads = [threading.Thread(target=write, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors[0]
    assert os.listdir(tmp_path) == ["exit.1.json"]          # no temporary left behind


def test_a_record_relayed_after_the_job_ended_is_not_written(tmp_path):
    """The job directory may be removed once the job is over; a late line must not fail."""
    relay = RecordRelay(str(tmp_path / "gone"), stop=lambda: None)
    relay.close()
    relay("exit.1.json", {"rank": 1, "code": 0, "collectives": {}, "step": None})


def test_a_write_that_fails_is_a_warning_not_a_traceback(tmp_path, capsys):
    relay = RecordRelay(str(tmp_path / "gone"), stop=lambda: None)
    relay("exit.1.json", {"rank": 1, "code": 0, "collectives": {}, "step": None})
    relay.close()
    assert "cannot write it" in capsys.readouterr().err
