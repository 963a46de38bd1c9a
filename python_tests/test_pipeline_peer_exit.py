"""Pipeline peers that leave (issue 28 item 6): point-to-point waits are watched like
collective waits. A pipeline rank that calls ``sys.exit(0)`` at step 3 used to hang the
job on either stage (its peer waited in a receive nobody watched); the leaver's exit record
now counts its messages, and the waiting rank's watchdog ends the job in seconds, naming
the rank that left and the step."""
import json
import os
import time

import pytest

from minitorch_dist.launch import watchdog
from mpi_jobs import SCRIPTS, launch, needs_mpi

SCRIPT = os.path.join(SCRIPTS, "pipeline_peer_exit.py")


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("leaver", [0, 1], ids=["first-stage-leaves", "last-stage-leaves"])
def test_a_pipeline_rank_that_leaves_ends_the_job_naming_it(leaver):
    started = time.monotonic()
    done, _ = launch(2, SCRIPT, str(leaver), launcher_timeout=60)
    elapsed = time.monotonic() - started
    waiter = 1 - leaver
    assert done.returncode == 1, done.stderr
    assert elapsed < 40, (elapsed, done.stderr)          # not the launcher's timeout
    assert f"rank {leaver} left the job without an error at step 3" in done.stderr, done.stderr
    assert f"while rank {waiter} waits to " in done.stderr, done.stderr
    assert "finished" not in done.stdout


def _p2p_wait(op, number, me=1, peer=0):
    return {"rank": me, "key": "world", "op": op, "seq": number, "mine": number,
            "peer": peer, "peer_local": peer, "me_local": me, "members": [me, peer],
            "step": 3, "time": 0.0}


def _exit(sent, received, rank=0):
    return {0: {"rank": rank, "code": 0, "collectives": {}, "step": 3,
                "p2p": {"world": {"sent": {"1": sent}, "received": {"1": received}}}}}


def test_a_receive_is_stuck_only_once_the_peer_sent_fewer_messages():
    assert watchdog.stuck_reason_for(_p2p_wait("recv", 7), _exit(7, 7)) is None   # on its way
    reason = watchdog.stuck_reason_for(_p2p_wait("recv", 8), _exit(7, 7))
    assert reason.startswith("rank 0 left the job without an error at step 3 after sending "
                             "rank 1 7 pipeline messages, while rank 1 waits to receive "
                             "message #8 from it (step 3)")
    assert watchdog.stuck_reason_for(_p2p_wait("recv", 8), {}) is None            # still there


def test_a_send_is_stuck_once_the_peer_left_without_receiving_it():
    assert watchdog.stuck_reason_for(_p2p_wait("send", 5), _exit(0, 5)) is None
    reason = watchdog.stuck_reason_for(_p2p_wait("send", 6), _exit(0, 5))
    assert "after receiving 5 of the pipeline messages rank 1 sent it" in reason
    assert "rank 1 waits to send message #6 to it" in reason


def test_an_old_exit_record_without_message_counts_counts_none():
    old = {0: {"rank": 0, "code": 0, "collectives": {"world": 3}, "step": 3}}
    assert watchdog.stuck_reason_for(_p2p_wait("recv", 1), old) is not None


def test_the_relay_judges_a_relayed_message_wait(tmp_path):
    from minitorch_dist.launch.relay import RecordRelay
    stops = []
    relay = RecordRelay(str(tmp_path), stop=lambda: stops.append(1))
    relay("wait.1.json", dict(_p2p_wait("recv", 8), open=True))
    assert not stops
    relay("exit.0.json", _exit(7, 7)[0])
    relay.close()
    assert stops == [1]
    failure = json.loads((tmp_path / "failure.1.json").read_text())
    assert "waits to receive message #8" in failure["summary"]
