"""Seed 004 (MindSpore's pipeline-parallel ResNet tutorial) as ``examples/pipeline_resnet.py``.

* the synthetic CIFAR-10 writer (``examples/cifar10_synthetic.py``) makes files that
  ``ds.Cifar10Dataset`` reads back with the right shapes, labels and pixels;
* the network keeps the tutorial's structure (ResNet-50's parameter count at full size) and
  its stage assignment for 2 stages;
* one process: the loss falls over a few epochs on the synthetic set (read via DATA_PATH);
* 2 and 4 MPI ranks (2 and 4 stages): every rank prints the same LossMonitor lines, and they
  equal a one-process run of the same script (1 stage, same seed, data and micro-batching).

Every process runs under a timeout; the network is narrowed (``--width 4``) and the runs
are a few steps long so that the whole file takes seconds on a 2-core machine.
"""
import collections
import doctest
import importlib.util
import os
import re
import sys

import numpy as np
import pytest

import minitorch_dist.dataset as ds
from minitorch_dist.parallel import get_auto_parallel_context, set_auto_parallel_context
from mpi_jobs import REPO, launch, needs_mpi, run_process

EXAMPLES = os.path.join(REPO, "examples")
EXAMPLE = os.path.join(EXAMPLES, "pipeline_resnet.py")
YIELD = {"OMPI_MCA_mpi_yield_when_idle": "1"}     # idle ranks must not starve busy ones
NO_DATA_PATH = {"DATA_PATH": ""}                   # the script writes its own synthetic set
SMALL = ["--width", "4", "--num-samples", "128", "--seed", "1"]   # 4 steps per epoch
LOSS_LINE = re.compile(r"^epoch: (\d+) step: (\d+), loss is (\S+)$", re.M)
SUMMARY = re.compile(r"^PIPELINE_RESNET rank=(\d+) world=(\d+) stages=(\d+) stage=(\d+) "
                     r"micro_size=(\d+) params=(\d+)$", re.M)
TIMEOUT = 90


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def losses_of(stdout):
    """[((epoch, step), loss)] in printed order."""
    return [((int(e), int(s)), float(v)) for e, s, v in LOSS_LINE.findall(stdout)]


def run_one_process(*args, env=None):
    done, seconds = run_process([sys.executable, EXAMPLE, *args], timeout=TIMEOUT,
                                env=env or NO_DATA_PATH)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def assert_close(got, want):
    assert [k for k, _ in got] == [k for k, _ in want], (got, want)
    for (key, g), (_, w) in zip(got, want):
        assert abs(g - w) <= 1e-5 * abs(w), (key, got, want)


# ---- the synthetic CIFAR-10 set -----------------------------------------------------------
def test_synthetic_writer_makes_files_the_cifar10_reader_reads(tmp_path):
    synthetic = _load("cifar10_synthetic")
    folder = synthetic.write_synthetic_cifar10(str(tmp_path), num_train=30, num_test=10,
                                               num_train_files=3, seed=5)
    names = sorted(os.listdir(folder))
    assert names == ["data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "test_batch.bin"]
    assert all(os.path.getsize(os.path.join(folder, n)) == 10 * 3073 for n in names)

    rng = np.random.default_rng(5)       # the writer's draws, in its order
    want_images, want_labels = synthetic.make_images(30, rng)
    want_test_images, want_test_labels = synthetic.make_images(10, rng)
    for usage, images, labels in (("train", want_images, want_labels),
                                  ("test", want_test_images, want_test_labels)):
        data = ds.Cifar10Dataset(folder, usage=usage, shuffle=False)
        rows = list(data.create_tuple_iterator(output_numpy=True))
        assert len(rows) == len(labels)
        got_images = np.stack([image for image, _ in rows])
        got_labels = np.array([int(label) for _, label in rows])
        assert got_images.shape == (len(labels), 32, 32, 3) and got_images.dtype == np.uint8
        np.testing.assert_array_equal(got_images, images)
        np.testing.assert_array_equal(got_labels, labels)
    assert sorted(collections.Counter(want_labels.tolist()).values()) == [3] * 10   # balanced
    # the planted pattern: the most saturated pixel of each image has its class's colour
    for image, label in zip(want_images, want_labels):
        pixels = image.reshape(-1, 3).astype(float)
        nearest = np.argmin(((synthetic.PALETTE[None] - pixels[:, None]) ** 2).sum(-1), axis=1)
        assert np.bincount(nearest, minlength=10)[label] >= 14 * 14 // 2, label
    failures, _ = doctest.testmod(synthetic)
    assert failures == 0


# ---- the network ----------------------------------------------------------------------------
def test_network_is_the_tutorials_resnet_and_uses_its_stage_assignment():
    example = _load("pipeline_resnet")
    before = get_auto_parallel_context("pipeline_stages")
    try:
        set_auto_parallel_context(pipeline_stages=2)
        net = example.resnet50(32, 10)
        stages = {name: getattr(net, name).pipeline_stage
                  for name in ("head", "layer1", "layer2", "layer3", "layer4", "fc")}
        assert stages == {"head": 0, "layer1": 0, "layer2": 0, "layer3": 1, "layer4": 1, "fc": 1}
        set_auto_parallel_context(pipeline_stages=1)
        # full size (64-channel stem, 3/4/6/3 blocks per layer) is ResNet-50: 23,508,032
        # parameters without the classifier, plus 2048 * 10 + 10 for 10 classes
        full = example.ResNet(example.ResidualBlock, 10, 32, width=64, blocks=(2, 3, 5, 2))
        assert sum(int(np.prod(p.shape)) for p in full.trainable_params()) == 23_528_522
    finally:
        set_auto_parallel_context(pipeline_stages=before)


# ---- one process ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def one_process_micro2(tmp_path_factory):
    """8 epochs, micro_size 2, reading a synthetic set written here through DATA_PATH (the
    same bytes the script writes for itself with --seed 1)."""
    folder = str(tmp_path_factory.mktemp("cifar10"))
    _load("cifar10_synthetic").write_synthetic_cifar10(folder, num_train=320, num_test=64, seed=1)
    return run_one_process(*SMALL, "--epochs", "8", "--micro-size", "2",
                           env={"DATA_PATH": folder})


@pytest.fixture(scope="module")
def one_process_micro4():
    return run_one_process(*SMALL, "--epochs", "2", "--micro-size", "4")


def test_one_process_loss_falls_on_the_synthetic_set(one_process_micro2):
    rows = losses_of(one_process_micro2)
    assert [k for k, _ in rows] == [(e, s) for e in range(1, 9) for s in range(1, 5)]
    per_epoch = [np.mean([v for (e, _), v in rows if e == epoch]) for epoch in range(1, 9)]
    # the loss is the sum of 2 micro-batch means: 2 ln 10 = 4.61 at chance
    assert abs(per_epoch[0] - 2 * np.log(10)) < 0.2, per_epoch
    assert per_epoch[-1] < per_epoch[0] - 0.3, per_epoch
    assert min(per_epoch[-2:]) < min(per_epoch[:4]), per_epoch
    (summary,) = SUMMARY.findall(one_process_micro2)
    assert summary[:5] == ("0", "1", "1", "0", "2")


# ---- MPI ranks ------------------------------------------------------------------------------
def check_ranks(done, world, reference):
    """Every rank printed the same loss lines, equal to ``reference`` (a one-process run);
    each stage trains its own part of the network. Returns the distinct loss lines."""
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    summaries = sorted(SUMMARY.findall(out))
    assert [(r, w, s, st) for r, w, s, st, _, _ in summaries] == \
        [(str(r), str(world), str(world), str(r)) for r in range(world)], out
    lines = LOSS_LINE.findall(out)
    counts = collections.Counter(lines)
    assert set(counts.values()) == {world}, counts          # each line once per rank
    values = collections.defaultdict(set)
    for epoch, step, value in lines:
        values[int(epoch), int(step)].add(float(value))
    assert all(len(v) == 1 for v in values.values()), values   # one loss per step on all ranks
    rows = [(key, values[key].pop()) for key in sorted(values)]
    want = losses_of(reference)
    assert_close(rows, want[:len(rows)])
    assert len(rows) == 8                                   # 2 epochs of 4 steps
    (one,) = SUMMARY.findall(reference)
    assert sum(int(s[5]) for s in summaries) == int(one[5])   # the stages partition the model
    return rows


@pytest.mark.mpi
@needs_mpi
def test_two_ranks_two_stages_match_one_process(one_process_micro2):
    done, seconds = launch(2, EXAMPLE, *SMALL, "--epochs", "2", launcher_timeout=TIMEOUT,
                           env={**YIELD, **NO_DATA_PATH})
    check_ranks(done, 2, one_process_micro2)
    assert "micro_size=2" in done.stdout                  # the seed's micro_size for 2 stages


@pytest.mark.mpi
@needs_mpi
def test_four_ranks_four_stages_match_one_process(one_process_micro4):
    done, seconds = launch(4, EXAMPLE, *SMALL, "--epochs", "2", launcher_timeout=TIMEOUT,
                           env={**YIELD, **NO_DATA_PATH})
    check_ranks(done, 4, one_process_micro4)
    assert "micro_size=4" in done.stdout                  # default max(2, stages)
