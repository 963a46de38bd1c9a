"""examples/memory_and_communication.py through the launcher on 4 ranks: each feature's
printed saving is real (below 1 where it saves), the counts are the expected ones, and the
runs with and without the feature agree."""
import os
import re

import pytest

from mpi_jobs import REPO, launch, needs_mpi

EXAMPLE = os.path.join(REPO, "examples", "memory_and_communication.py")


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    temp = tmp_path_factory.mktemp("tmpdir")
    done, _ = launch(4, EXAMPLE, launcher_timeout=150, env={"TMPDIR": str(temp)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not re.search(r"\w+Warning\b", done.stderr), done.stderr[-3000:]
    assert sorted(p.name for p in temp.iterdir()) == []
    return done.stdout


def section(out, number):
    """The lines of section ``number`` (from its heading to the next one)."""
    match = re.search(rf"^{number}\. .*?(?=^\d\. |\Z)", out, re.S | re.M)
    assert match, f"no section {number} in:\n{out}"
    return match.group(0)


def figure(text, label):
    """(off, on, on/off) of the line that starts with ``label``."""
    match = re.search(re.escape(label) + r".*?: off ([\d,]+)(?: B)? \| on ([\d,]+)(?: B)? \| "
                      r"on/off = ([\d.]+)", text)
    assert match, f"no {label!r} figure in:\n{text}"
    off, on, ratio = match.groups()
    return int(off.replace(",", "")), int(on.replace(",", "")), float(ratio)


def differences(text):
    return [float(d) for d in re.findall(r"\|diff\| = ([\d.e+-]+)", text)] + \
        [float(d) for d in re.findall(r"vs one process ([\d.e+-]+)", text)]


@needs_mpi
def test_optimizer_parallel_slices_adam_state_to_a_quarter(printed):
    text = section(printed, 1)
    assert "4 ranks" in text
    off, on, ratio = figure(text, "optimizer state bytes per rank")
    assert ratio <= 0.25 + 0.01 and on < off and abs(on / off - ratio) < 1e-3
    assert figure(text, "parameter + state bytes per rank")[2] <= 0.5 + 0.01
    assert figure(text, "with optimizer_level='level3'")[2] <= 0.25 + 0.01
    found = differences(text)
    assert len(found) == 4 and max(found) <= 1e-5, text


@needs_mpi
def test_accumulation_reduces_once_for_four_micro_batches(printed):
    text = section(printed, 2)
    assert figure(text, "gradient collectives")[:2] == (4, 1)
    found = differences(text)
    assert len(found) == 1 and found[0] <= 1e-6, text


@needs_mpi
def test_comm_fusion_counts_one_allreduce_per_bucket(printed):
    text = section(printed, 3)
    counts = re.search(r"openstate=False\) (\d+) \| on, default buckets (\d+) \| on, "
                       r"set_comm_fusion ids \(0, 1, 2\) (\d+)", text)
    assert counts and tuple(map(int, counts.groups())) == (6, 1, 3), text


@needs_mpi
def test_copies_equal_the_plain_net_with_the_same_reductions(printed):
    text = section(printed, 4)
    calls = re.search(r"collectives per step: off (\d+) \| on (\d+)", text)
    assert calls and calls.groups() == ("1", "1"), text
    losses = re.search(r"loss off ([\d.]+) \| on ([\d.]+)", text)
    assert losses and float(losses.group(1)) == pytest.approx(float(losses.group(2)), rel=1e-6)
    assert differences(text)[0] <= 1e-5


@needs_mpi
@pytest.mark.parametrize("number", [5, 6])
def test_recompute_and_offload_lower_the_device_peak_with_identical_results(printed, number):
    text = section(printed, number)
    off, on, ratio = figure(text, "device peak")
    assert on < off and ratio < 0.6, text
    assert re.search(r"halfway between the peaks\): off out of memory \| on trains", text), text
    assert "bit-identical: True" in text
