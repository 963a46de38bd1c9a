"""SINGA's distributed MNIST examples (seed 003) run as users run them, and DistOpt's five
options are compared on a real 2-rank job.

* ``examples/singa_mnist_dist.py`` under MPI and ``examples/singa_mnist_multiprocess.py``
  print the seed's per-epoch lines, learn, and agree with each other;
* ``mpi_scripts/dist_options_accuracy.py`` trains the same MLP under every option: each must
  end within 2 accuracy points of fp32, and the bytes per step must shrink as promised;
* bad command lines fail fast with a clear message, and a failed child stops the others.

Every process runs under a timeout. Open MPI is told to yield when idle: its ranks otherwise
spin in collectives and starve each other on a busy 2-core machine.
"""
import os
import re
import sys

import pytest

from mpi_jobs import REPO, SCRIPTS, launch, mpi_missing, needs_mpi, run_process

pytest.importorskip("sklearn", reason="the examples train on scikit-learn's digits")

EXAMPLE = os.path.join(REPO, "examples", "singa_mnist_dist.py")
MULTIPROCESS = os.path.join(REPO, "examples", "singa_mnist_multiprocess.py")
ACCURACY = os.path.join(SCRIPTS, "dist_options_accuracy.py")
YIELD = {"OMPI_MCA_mpi_yield_when_idle": "1"}
CNN_PARAMETERS = (20 * 25 + 20) + (50 * 20 * 25 + 50) + (800 * 500 + 500) + (500 * 10 + 10)

EPOCH_LINES = re.compile(r"^Starting Epoch (\d+):\n"
                         r"Training loss = (\d+\.\d{6}), training accuracy = ([01]\.\d{6})\n"
                         r"Evaluation accuracy = ([01]\.\d{6})$", re.M)
SUMMARY = re.compile(r"^SUMMARY option=(\S+) world=(\d+) steps=(\d+) eval_acc=([01]\.\d{6}) "
                     r"bytes_per_step=(\d+)$", re.M)


def epochs_of(stdout):
    """[(epoch, loss, train_acc, eval_acc)] in printed order."""
    return [(int(e), float(loss), float(tr), float(ev))
            for e, loss, tr, ev in EPOCH_LINES.findall(stdout)]


def check_seed_format(done, epochs):
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    rows = epochs_of(out)
    assert [r[0] for r in rows] == list(range(epochs)), out   # printed once: rank 0 only
    assert out.count("Starting Epoch") == epochs
    summary = SUMMARY.findall(out)
    assert len(summary) == 1, out
    return rows, summary[0]


@pytest.fixture(scope="module")
def mpi_fp32_run():
    done, _ = launch(2, EXAMPLE, "--epochs", "3", env=YIELD)
    return done


@pytest.mark.mpi
@needs_mpi
def test_mpi_launch_prints_the_seed_lines_and_learns_the_digits(mpi_fp32_run):
    rows, (option, world, steps, eval_acc, per_step) = check_seed_format(mpi_fp32_run, 3)
    losses = [r[1] for r in rows]
    assert losses[0] > losses[1] > losses[2], rows
    assert rows[-1][3] >= 0.9, rows
    assert (option, world, steps, float(eval_acc)) == ("fp32", "2", "66", rows[-1][3])
    # fp32: every gradient, 4 bytes each, leaves this rank once per step
    assert int(per_step) == 4 * CNN_PARAMETERS


def test_multiprocessing_launch_prints_the_same_figures_as_mpi(request):
    done, _ = run_process([sys.executable, MULTIPROCESS, "2", "--epochs", "2", "--timeout",
                           "100"], timeout=130)
    rows, (option, world, steps, _, per_step) = check_seed_format(done, 2)
    assert (option, world, steps, int(per_step)) == ("fp32", "2", "44", 4 * CNN_PARAMETERS)
    assert rows[1][1] < rows[0][1] and rows[1][3] > rows[0][3], rows
    if mpi_missing() is None:    # same seed, shards and sums: TCP and MPI ranks agree
        mpi_rows = epochs_of(request.getfixturevalue("mpi_fp32_run").stdout)[:2]
        for mine, theirs in zip(rows, mpi_rows):
            assert mine == pytest.approx(theirs, rel=1e-4), (rows, mpi_rows)


@pytest.fixture(scope="module")
def option_table():
    done, _ = launch(2, ACCURACY, env=YIELD)
    assert done.returncode == 0, done.stdout + done.stderr
    table = {}
    for option, acc, per_step in re.findall(
            r"^OPTION (\S+) spars=\S+ eval_acc=([0-9.]+) bytes_per_step=(\d+) ", done.stdout,
            re.M):
        table[option] = (float(acc), int(per_step))
    assert sorted(table) == sorted(["fp32", "fp16", "partialUpdate", "sparseTopK",
                                    "sparseThreshold"]), done.stdout
    return table


@pytest.mark.mpi
@needs_mpi
def test_every_dist_option_trains_within_two_points_of_fp32(option_table):
    reference = option_table["fp32"][0]
    assert reference >= 0.95, option_table
    for option, (acc, _) in option_table.items():
        assert abs(acc - reference) <= 0.02, (option, option_table)


@pytest.mark.mpi
@needs_mpi
def test_compressed_options_send_fewer_bytes_per_step(option_table):
    fp32 = option_table["fp32"][1]
    assert fp32 == 4 * (64 * 128 + 128 + 128 * 10 + 10)
    assert option_table["fp16"][1] <= 0.5 * fp32
    # top-K at 1%: int32 index + float32 value per kept entry = 2% of the dense bytes
    assert option_table["sparseTopK"][1] <= 0.025 * fp32
    assert option_table["partialUpdate"][1] <= 0.26 * fp32      # one chunk of four per step
    assert option_table["sparseThreshold"][1] < 0.5 * fp32


@pytest.mark.parametrize("args, message", [
    (["--dist-option", "fp64"], "invalid choice: 'fp64'"),
    (["--dist-option", "sparseTopK", "--spars", "1.5"], "out of range for sparseTopK"),
    (["--dist-option", "sparseThreshold", "--spars", "0"], "out of range for sparseThreshold"),
    (["--epochs", "0"], "--epochs must be a positive integer"),
])
def test_bad_command_lines_exit_nonzero_with_a_clear_message(args, message):
    done, elapsed = run_process([sys.executable, EXAMPLE, *args], timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "usage:" in done.stderr


@pytest.mark.mpi
@needs_mpi
def test_a_bad_option_under_mpi_ends_the_job_instead_of_hanging():
    done, _ = launch(2, EXAMPLE, "--dist-option", "sparseTopK", "--spars", "-0.1", env=YIELD,
                     launcher_timeout=60)
    assert done.returncode not in (0, 124), done.stdout + done.stderr
    assert "out of range for sparseTopK" in done.stderr


def test_multiprocess_launcher_rejects_bad_input_and_reports_failed_children():
    done, _ = run_process([sys.executable, MULTIPROCESS, "0"], timeout=60)
    assert done.returncode == 2 and "world_size must be a positive integer" in done.stderr
    # a batch larger than each rank's shard fails inside both children: exit 1, not a hang
    done, _ = run_process([sys.executable, MULTIPROCESS, "2", "--batch-size", "5000",
                           "--timeout", "60"], timeout=90)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "exceeds the" in done.stderr and "a process failed" in done.stderr


def test_one_failed_child_stops_the_others_at_once():
    code = ("import multiprocessing, os, sys, time\n"
            "from minitorch_dist.run import wait_processes as wait_all\n"
            "ctx = multiprocessing.get_context('fork')\n"
            "procs = [ctx.Process(target=time.sleep, args=(60,)),\n"
            "         ctx.Process(target=os._exit, args=(3,))]\n"
            "for p in procs: p.start()\n"
            "start = time.monotonic()\n"
            "codes = wait_all(procs, timeout=50)\n"
            "print('CODES', codes, 'SECONDS', round(time.monotonic() - start, 1))\n")
    done, elapsed = run_process([sys.executable, "-c", code], timeout=60)
    assert done.returncode == 0, done.stderr
    match = re.search(r"CODES \[(-?\d+), 3\] SECONDS ([0-9.]+)", done.stdout)
    assert match, done.stdout
    assert int(match.group(1)) != 0 and float(match.group(2)) < 10   # terminated, not awaited
