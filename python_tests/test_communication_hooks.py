"""``communication.hooks``: how the launcher's watchdog learns of communicators and of the
training step while the library layers import nothing from ``launch/``."""
import subprocess
import sys

import numpy as np
import pytest

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import nn
from minitorch_dist.communication import hooks
from minitorch_dist.launch import watchdog
from minitorch_dist.train import Model

from mpi_jobs import REPO, child_env, needs_mpi


@pytest.fixture
def registered():
    """Functions registered by the test, removed afterwards (hooks are process-wide)."""
    added = []

    def register(fn):
        hooks.on_communicator_created(fn)
        added.append(fn)
    yield register
    for fn in added:
        hooks.remove_communicator_hook(fn)


def test_a_hook_is_called_once_per_communicator_and_registers_once(registered):
    seen = []
    registered(seen.append)
    registered(seen.append)              # the same function again: still called once
    hooks.communicator_created("a")
    hooks.remove_communicator_hook(seen.append)
    hooks.communicator_created("b")
    hooks.remove_communicator_hook(seen.append)          # absent: no error
    assert seen == ["a"]


def test_the_step_lives_below_the_launcher_and_the_watchdog_reads_it():
    try:
        hooks.set_step(7)
        assert watchdog.current_step() == 7
        watchdog.set_step("8")                   # the watchdog's name is the same function
        assert hooks.current_step() == 8
    finally:
        hooks.set_step(None)
    assert watchdog.current_step() is None


def test_model_train_records_its_step_where_the_watchdog_reads_it():
    ms.set_seed(0)
    net = nn.Dense(3, 1)
    model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.1))
    data = ds.NumpySlicesDataset({"x": np.ones((6, 3), np.float32),
                                  "y": np.zeros((6, 1), np.float32)}, shuffle=False).batch(2)
    try:
        model.train(2, data)
        assert watchdog.current_step() == 6          # 2 epochs x 3 batches
    finally:
        hooks.set_step(None)


def test_install_registers_the_watch_once():
    try:
        watchdog.install()
        watchdog.install()
        assert hooks._created_hooks.count(watchdog.watch) == 1
    finally:
        hooks.remove_communicator_hook(watchdog.watch)


def test_the_rank_runner_watches_the_programs_communicators():
    code = ("from minitorch_dist.communication import hooks\n"
            "from minitorch_dist.launch import watchdog\n"
            "print(watchdog.watch in hooks._created_hooks)\n")
    done = subprocess.run([sys.executable, "-m", "minitorch_dist.launch.rank_runner", "-c", code],
                          capture_output=True, text=True, timeout=120, cwd=REPO, env=child_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]


@needs_mpi
def test_an_mpi_communicator_announces_itself():
    code = ("from minitorch_dist.communication import hooks, MPICommunicator\n"
            "seen = []\n"
            "hooks.on_communicator_created(seen.append)\n"
            "comm = MPICommunicator()\n"
            "print(seen == [comm], comm.size)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=child_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1"]
