"""``--compute-slots K``: ranks take turns computing, give their slot back while they wait,
wait without spinning, and get the same bits as without slots."""
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from minitorch_dist.communication import LocalCommunicator, hooks, run_ranks
from minitorch_dist.communication.communicator import Request
from minitorch_dist.launch import compute_slots
from minitorch_dist.launch.cli import main, parse_options
from minitorch_dist.launch.mpiexec import (MALLOC_VARIABLES, SLOT_MALLOC_VARIABLES,
                                            rank_environment)
from mpi_jobs import REPO, child_env, needs_mpi

# A data-parallel job (Model.train, 4 ranks): before each step a rank computes for a while
# (recorded as an interval of time.monotonic()); the waits from a burst's end to the next
# step's start are timed in wall and CPU seconds. Each rank saves its parameters.
_JOB = r'''
import json, os, sys, time
import numpy as np
import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import communication, nn
from minitorch_dist.train import Model
from minitorch_dist.train.callback import Callback

out = sys.argv[1]
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True,
                             parameter_broadcast=True)
communication.init()
rank, world = communication.get_rank(), communication.get_group_size()
rng = np.random.default_rng(0)
x = rng.standard_normal((4 * 8 * world, 6)).astype(np.float32)
y = rng.integers(0, 3, len(x)).astype(np.int32)
work = rng.standard_normal((160, 160))
bursts, waits = [], []


class Burst(Callback):
    def __init__(self):
        self.after = None

    def on_train_step_begin(self, run_context):
        now, cpu = time.monotonic(), time.process_time()
        if self.after is not None:
            waits.append((now - self.after[0], cpu - self.after[1]))
        start, total = now, work
        while time.monotonic() - start < 0.05:
            total = np.tanh(total @ work / 160.0)
        bursts.append((start, time.monotonic()))
        self.after = (time.monotonic(), time.process_time())


ms.set_seed(100 + rank)
net = nn.SequentialCell([nn.Dense(6, 8), nn.ReLU(), nn.Dense(8, 3)])
opt = nn.Momentum(net.trainable_params(), 0.1, 0.9)
model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), opt)
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False, num_shards=world,
                             shard_id=rank).batch(8)
model.train(1, data, callbacks=[Burst()], dataset_sink_mode=False)
np.savez(os.path.join(out, f"params.{rank}.npz"),
         *[p.asnumpy() for p in net.trainable_params()])
comm = communication.get_communicator()          # point to point around a ring, both ways
left, right = (rank - 1) % world, (rank + 1) % world
request = comm.irecv(np.zeros(2, np.float32), left, tag=7)
comm.send(np.full(2, rank, np.float32), right, tag=7)
got = [float(request.wait()[0])]
sending = comm.isend(np.full(2, rank, np.float32), left, tag=8)
got.append(float(comm.recv(np.zeros(2, np.float32), right, tag=8)[0]))
sending.wait()
with open(os.path.join(out, f"timeline.{rank}.json"), "w") as f:
    json.dump({"bursts": bursts, "waits": waits, "ring": got,
               "threads": os.environ.get("OMP_NUM_THREADS")}, f)
'''


def _overlaps(intervals):
    """The most intervals (start, end) of different ranks that cover one instant."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    depth = deepest = 0
    for _, step in events:
        depth += step
        deepest = max(deepest, depth)
    return deepest


def _run_job(tmp_path, name, *launcher_options, env=None):
    script = tmp_path / "slots_job.py"
    script.write_text(_JOB)
    out = tmp_path / name
    out.mkdir()
    logs = tmp_path / f"{name}-logs"
    done = subprocess.run([sys.executable, "-m", "minitorch_dist.run", "-n", "4", "--timeout",
                           "150", "--log-dir", str(logs), *launcher_options, str(script),
                           str(out)], cwd=REPO, env=child_env(env), capture_output=True,
                          text=True, timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    params = [np.load(out / f"params.{rank}.npz") for rank in range(4)]
    timelines = [json.loads((out / f"timeline.{rank}.json").read_text()) for rank in range(4)]
    return params, timelines, logs


@needs_mpi
def test_one_slot_gives_the_same_bits_and_no_two_ranks_compute_at_once(tmp_path):
    free, _, _ = _run_job(tmp_path, "free")
    slotted, timelines, logs = _run_job(tmp_path, "slotted", "--compute-slots", "1",
                                        env={compute_slots.TRACE_VARIABLE: "1"})
    for rank in range(4):
        for key in free[rank].files:
            assert np.array_equal(free[rank][key], slotted[rank][key]), (rank, key)
            assert np.array_equal(slotted[0][key], slotted[rank][key]), (rank, key)
    bursts = [tuple(b) for t in timelines for b in t["bursts"]]
    assert len(bursts) == 4 * 4 and _overlaps(bursts) == 1
    assert [t["ring"] for t in timelines] == [[(r - 1) % 4, (r + 1) % 4] for r in range(4)]
    # the slots themselves: every rank held one, and no two holds overlapped
    holds = []
    for rank in range(4):
        lines = (logs / f"compute_slot.trace.{rank}").read_text().split()
        holds += [(float(a), float(b)) for a, b in zip(lines[::2], lines[1::2])]
    assert _overlaps(holds) == 1 and len(holds) >= 4 * 4
    # waiting ranks sleep: the CPU they used while waiting is a small part of the wait
    wall = sum(w for t in timelines for w, _ in t["waits"])
    cpu = sum(c for t in timelines for _, c in t["waits"])
    assert wall > 0.3 and cpu < 0.25 * wall, (cpu, wall)


@needs_mpi
def test_two_slots_let_two_ranks_compute_at_once_at_most(tmp_path):
    _, timelines, _ = _run_job(tmp_path, "two", "--compute-slots", "2")
    bursts = [tuple(b) for t in timelines for b in t["bursts"]]
    assert _overlaps(bursts) <= 2


# ---- the command line ------------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [
    ("0", "at least 1"), ("-1", "at least 1"), ("5", "at most the number of ranks (-n 4)"),
    ("two", "whole number"), ("1.5", "whole number"), ("", "whole number")])
def test_bad_slot_counts_are_refused_with_a_clear_message(value, expected, capsys):
    assert main(["-n", "4", "--compute-slots", value, "x.py"]) == 2
    err = capsys.readouterr().err
    assert "--compute-slots" in err and expected in err and "usage:" in err


def test_slots_with_other_machines_are_refused(capsys):
    assert main(["-n", "2", "--hosts", "a,b", "--compute-slots", "1", "x.py"]) == 2
    assert "this machine only" in capsys.readouterr().err


def test_slots_default_to_off_and_parse_to_an_int():
    assert parse_options(["-n", "4", "x.py"])["compute_slots"] is None
    assert parse_options(["-n", "4", "--compute-slots", "3", "x.py"])["compute_slots"] == 3


def test_each_computing_rank_gets_its_share_of_the_cores():
    env = rank_environment({}, compute_slots=1)
    cores = len(os.sched_getaffinity(0))
    assert env[compute_slots.SLOTS_VARIABLE] == "1"
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == str(cores)
    assert rank_environment({"OMP_NUM_THREADS": "3"}, compute_slots=1)["OMP_NUM_THREADS"] == "3"
    assert rank_environment({}, compute_slots=cores * 2)["OMP_NUM_THREADS"] == "1"
    assert compute_slots.SLOTS_VARIABLE not in rank_environment({})


def test_under_slots_freed_memory_goes_back_to_the_system():
    env = rank_environment({}, compute_slots=2)
    for name, value in SLOT_MALLOC_VARIABLES.items():
        assert env[name] == value and int(value) < int(MALLOC_VARIABLES[name])
    assert rank_environment({"MALLOC_MMAP_THRESHOLD_": "7"}, compute_slots=2)[
        "MALLOC_MMAP_THRESHOLD_"] == "7"
    assert "MALLOC_MMAP_THRESHOLD_" not in rank_environment(
        {"MINITORCH_DIST_SYSTEM_MALLOC": "1"}, compute_slots=2)


def test_dry_run_shows_the_slot_setting(capsys):
    assert main(["--dry-run", "-n", "4", "--compute-slots", "2", "x.py"]) == 0
    assert f"{compute_slots.SLOTS_VARIABLE}=2" in capsys.readouterr().out


# ---- the slots (one process) -----------------------------------------------------------------
def test_a_slot_is_held_by_one_holder_and_freed_when_its_process_dies(tmp_path):
    first = compute_slots.ComputeSlots(str(tmp_path), 1, rank=0)
    second = compute_slots.ComputeSlots(str(tmp_path), 1, rank=1)
    first.acquire()
    got = threading.Event()
    thread = threading.Thread(target=lambda: (second.acquire(), got.set()), daemon=True)
    thread.start()
    assert not got.wait(0.2)
    first.release()
    assert got.wait(5)
    second.close()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from minitorch_dist.launch.compute_slots import ComputeSlots; "
        f"s = ComputeSlots({str(tmp_path)!r}, 1); s.acquire(); print('held', flush=True); "
        "time.sleep(60)")], stdout=subprocess.PIPE, text=True, env=child_env(), cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "held"
        third = compute_slots.ComputeSlots(str(tmp_path), 1, rank=2)
        got.clear()
        threading.Thread(target=lambda: (third.acquire(), got.set()), daemon=True).start()
        assert not got.wait(0.2)
        holder.kill()
        assert got.wait(5)           # the kernel released the dead holder's lock
        third.close()
    finally:
        holder.kill()
        holder.wait()


def test_waits_give_the_slot_back_and_take_one_again(tmp_path):
    slots = compute_slots.ComputeSlots(str(tmp_path), 2, rank=0)
    slots.acquire()
    hooks.set_wait_guard(slots)
    try:
        def rank_fn(comm):
            comm.barrier()
            return comm.allreduce(np.ones(3), "sum")
        assert all(np.array_equal(r, np.full(3, 2.0)) for r in run_ranks(2, rank_fn))
        assert slots.held
        with slots.released():
            assert not slots.held
            with slots.released():       # nested waits: the outer one takes it again
                assert not slots.held
            assert not slots.held
        assert slots.held
        comm = LocalCommunicator.create(1)[0]
        request = comm._released_waits(Request(lambda: slots.held))
        assert request.wait() is False and slots.held
        with pytest.raises(ValueError):       # a failed wait still takes a slot again
            with slots.released():
                raise ValueError("peer gone")
        assert slots.held
    finally:
        hooks.set_wait_guard(None)
        slots.close()


def test_install_is_off_without_the_launchers_variables(tmp_path):
    assert compute_slots.install({}) is None
    assert compute_slots.install({compute_slots.SLOTS_VARIABLE: "1"}) is None
    assert not hooks.quiet_waits()


def test_install_takes_a_slot_and_uninstall_gives_it_back(tmp_path):
    env = {compute_slots.SLOTS_VARIABLE: "1", "MINITORCH_DIST_JOB_DIR": str(tmp_path),
           "OMPI_COMM_WORLD_RANK": "3"}
    slots = compute_slots.install(env)
    try:
        assert slots.held and hooks.quiet_waits() and slots.rank == 3
        assert not hooks.overlap_allowed()
        other = compute_slots.ComputeSlots(str(tmp_path), 1)
        start = time.monotonic()
        threading.Timer(0.2, compute_slots.uninstall).start()
        other.acquire()
        assert time.monotonic() - start >= 0.15 and not hooks.quiet_waits()
        assert hooks.overlap_allowed()
        other.close()
    finally:
        compute_slots.uninstall()
