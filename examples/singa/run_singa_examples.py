"""Run Apache SINGA's own ``examples/cnn`` and ``examples/mlp`` on minitorch_dist.

    python examples/singa/run_singa_examples.py --singa PATH/TO/singa [--only REGEX]
        [--python PYTHON] [--quick] [--timeout SECONDS] [--list]

``PATH/TO/singa`` is a checkout of apache/singa (or any folder holding its ``examples/``).
The examples are copied to a scratch folder and changed in two ways only:

1. imports: ``from singa import x`` becomes ``from minitorch_dist.singa import x``;
2. data: MNIST and CIFAR-10 are small synthetic files in the original formats
   (``upstream_data.py``), and the loaders point at them.

Two more things the scripts need are supplied next to them, not changed in them: the
``resnet`` module that ``examples/cnn/autograd/resnet_*.py`` import (SINGA no longer ships
it; ``examples/singa/resnet.py`` is a SINGA-style one), and, with ``--quick``, shorter
hard-coded loops and batches (``niters = 100`` becomes 2, ``max_epoch = 5`` becomes 1,
``batch_size = 32`` or ``16`` becomes 8): a ResNet-50 step at 224x224 takes tens of seconds
on a CPU, and Xception at 299x299 with a batch of 16 needs more than 24 GB here. Every run is reported with its command, exit code,
time and last line.

SINGA's scripts format one-element NumPy arrays with ``%f``, which NumPy 2.4 refuses; give
``--python`` an interpreter with NumPy < 2.4 to run those lines as SINGA wrote them.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import upstream_data  # noqa: E402

# (folder, command after the interpreter, launcher): launcher "mpi" runs through
# python -m minitorch_dist.run -n 2 (mpiexec underneath)
RUNS = [
    ("cnn", "train_cnn.py cnn mnist -m 2", None),
    ("cnn", "train_cnn.py mlp mnist -m 2", None),
    ("cnn", "train_cnn.py alexnet cifar10 -m 1 -b 8", None),
    ("cnn", "train_cnn.py resnet cifar10 -m 1 -b 8", None),
    ("cnn", "train_cnn.py xceptionnet cifar10 -m 1 -b 8", None),
    ("cnn", "train_cnn.py cnn mnist -m 1 -g", None),
    ("cnn", "train_mpi.py cnn mnist -m 2 -d plain", "mpi"),
    ("cnn", "train_mpi.py cnn mnist -m 2 -d half", "mpi"),
    ("cnn", "train_mpi.py cnn mnist -m 2 -d partialUpdate", "mpi"),
    ("cnn", "train_mpi.py cnn mnist -m 2 -d sparseTopK -s 0.05", "mpi"),
    ("cnn", "train_mpi.py cnn mnist -m 2 -d sparseThreshold -s 0.05", "mpi"),
    ("cnn", "train_mpi.py resnet cifar10 -m 1 -b 4", "mpi"),
    ("cnn", "train_mpi.py xceptionnet cifar10 -m 1 -b 4", "mpi"),
    ("cnn", "train_multiprocess.py cnn mnist -m 2 -w 2", None),
    ("cnn", "benchmark.py", None),
    ("cnn", "benchmark.py --dist", "mpi"),
    ("cnn/autograd", "mnist_cnn.py", None),
    ("cnn/autograd", "mnist_dist.py", "mpi"),
    ("cnn/autograd", "mnist_multiprocess.py 2", None),
    ("cnn/autograd", "sparsification_mnist.py 2", None),
    ("cnn/autograd", "resnet_cifar10.py", None),
    ("cnn/autograd", "resnet_dist.py", "mpi"),
    ("cnn/autograd", "cifar10_multiprocess.py 2", None),
    ("cnn/autograd", "xceptionnet.py", None),
    ("mlp", "model.py -m 201", None),
    ("mlp", "native.py -m 201", None),
]

_QUICK = [(r"\bniters = \d+", "niters = 2"), (r"\bmax_epoch = \d+", "max_epoch = 1"),
          (r"\bbatch_size = (32|16)\b", "batch_size = 8")]


def rewrite_imports(text):
    """SINGA's imports, pointed at the facade (the only code change)."""
    text = re.sub(r"^(\s*)from singa import ", r"\1from minitorch_dist.singa import ", text,
                  flags=re.M)
    text = re.sub(r"^(\s*)from singa\.(\w+) import ", r"\1from minitorch_dist.singa.\2 import ",
                  text, flags=re.M)
    return re.sub(r"^(\s*)import singa\b", r"\1import minitorch_dist.singa as singa", text,
                  flags=re.M)


def prepare(singa_root, work, quick):
    """Copy ``examples/cnn`` and ``examples/mlp`` into ``work`` and apply the changes."""
    source = os.path.join(singa_root, "examples") if os.path.isdir(
        os.path.join(singa_root, "examples")) else singa_root
    examples = os.path.join(work, "examples")
    for part in ("cnn", "mlp"):
        shutil.copytree(os.path.join(source, part), os.path.join(examples, part))
    for folder, _, files in os.walk(examples):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as f:
                    text = f.read()
                new = rewrite_imports(text)
                if quick:
                    for pattern, repl in _QUICK:
                        new = re.sub(pattern, repl, new)
                if new != text:
                    with open(path, "w") as f:
                        f.write(new)
    data = os.path.join(work, "data")
    upstream_data.write_mnist(data)
    upstream_data.write_cifar10(os.path.join(data, "cifar"), train=16, test=16)
    upstream_data.swap_data(examples, data, os.path.join(data, "cifar"))
    shutil.copy(os.path.join(HERE, "resnet.py"), os.path.join(examples, "cnn", "autograd"))
    return examples


def run_one(python, examples, folder, command, launcher, timeout):
    """(exit code, seconds, last output line) of one example run."""
    argv = command.split()
    if launcher == "mpi":
        argv = [python, "-m", "minitorch_dist.run", "-n", "2", "--timeout", str(timeout)] + argv
    else:
        argv = [python] + argv
    env = dict(os.environ, PYTHONWARNINGS="ignore", MPLBACKEND="Agg")
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=os.path.join(examples, folder), env=env, text=True,
                              capture_output=True, timeout=timeout + 30)
        code, out = done.returncode, (done.stdout + done.stderr).strip()
    except subprocess.TimeoutExpired as err:
        code, out = 124, f"timed out after {timeout} s: {err}"
    lines = [line for line in out.splitlines() if line.strip()]
    return code, time.monotonic() - start, lines[-1][-150:] if lines else ""


def main(argv=None):
    """Parse the command line, prepare the copy, run and report each example."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--singa", required=True, help="a checkout of apache/singa")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--only", default=None, help="run the commands matching this regex")
    parser.add_argument("--quick", action="store_true", help="shorten hard-coded loops")
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--work", default=None, help="scratch folder (default: a new temp)")
    parser.add_argument("--list", action="store_true", help="print the commands and stop")
    args = parser.parse_args(argv)
    runs = [r for r in RUNS if args.only is None or re.search(args.only, f"{r[0]}/{r[1]}")]
    if args.list:
        for folder, command, launcher in runs:
            print(f"{'mpi -n 2 ' if launcher else ''}{folder}/{command}")
        return 0
    work = args.work or tempfile.mkdtemp(prefix="singa-examples-")
    examples = prepare(args.singa, work, args.quick)
    print(f"examples copied to {examples}", flush=True)
    failed = 0
    for folder, command, launcher in runs:
        code, seconds, last = run_one(args.python, examples, folder, command, launcher,
                                      args.timeout)
        failed += code != 0
        shown = f"{'mpiexec -n 2 ' if launcher else ''}{folder}/{command}"
        print(f"rc={code:<3} {seconds:7.1f}s  {shown:<58} | {last}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
