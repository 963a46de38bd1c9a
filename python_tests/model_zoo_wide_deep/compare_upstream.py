"""Check the test version against upstream's own ``src/wide_and_deep.py`` (a copy of the models
repository's ``official/recommend/Wide_and_Deep`` with its imports changed to
``minitorch_dist``): both are built from the same seed and config, then trained on the same
batches, in one process.

    python python_tests/model_zoo_wide_deep/compare_upstream.py /path/to/Wide_and_Deep [--steps 5]

It compares the parameter names, shapes and order, which parameters each optimizer takes
(FTRL: 'wide' in the name), the initial values, and the losses step by step; it prints what
differs and exits 1 when anything does. ``python_tests/test_model_zoo_wide_deep.py`` runs it
when ``WIDE_DEEP_UPSTREAM`` names such a copy.
"""
import argparse
import importlib.util
import os
import sys

import numpy as np

if __package__ in (None, ""):      # run as a script: import the package from python_tests/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import minitorch_dist as ms  # noqa: E402
from model_zoo_wide_deep.src import wide_and_deep as mine  # noqa: E402
from model_zoo_wide_deep.src.config import get_config  # noqa: E402


def load_upstream(upstream_dir):
    """Upstream's ``src/wide_and_deep.py`` as a module of its own name."""
    path = os.path.join(upstream_dir, "src", "wide_and_deep.py")
    if not os.path.exists(path):
        raise FileNotFoundError(f"compare_upstream: no {path}; expected a Wide_and_Deep directory")
    with open(path, encoding="utf-8") as f:
        text = f.read()
        if "import mindspore" in text or "from mindspore" in text:
            raise ValueError(f"compare_upstream: {path} still imports mindspore; change its imports first")
    spec = importlib.util.spec_from_file_location("upstream_wide_and_deep", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(module, config, seed):
    ms.set_seed(seed)
    model = module.WideDeepModel(config)
    train_net = module.TrainStepWrap(module.NetWithLossClass(model, config), sparse=config.sparse)
    module.PredictWithSigmoid(model)
    return train_net


def _describe(train_net):
    params = train_net.network.trainable_params()
    return {"names": [p.name for p in params], "shapes": [tuple(p.shape) for p in params],
            "values": [p.asnumpy().copy() for p in params],
            "optimizer_w": [p.name for p in train_net.optimizer_w.parameters],
            "optimizer_d": [p.name for p in train_net.optimizer_d.parameters]}


def compare(upstream_dir, steps=5, seed=7, argv=()):
    """A list of differences (empty: the two agree), the two loss trajectories and upstream's
    parameters; ``argv`` adds command-line settings (e.g. ``["--dropout_flag=True"]``)."""
    upstream = load_upstream(upstream_dir)
    config = get_config(["--vocab_size=300", "--emb_dim=8", "--deep_layer_dim=[32,16,8,4]", "--batch_size=64",
                         *argv])
    nets = {"upstream": _build(upstream, config, seed), "test version": _build(mine, config, seed)}
    desc = {name: _describe(net) for name, net in nets.items()}
    problems = []
    for key in ("names", "shapes", "optimizer_w", "optimizer_d"):
        if desc["upstream"][key] != desc["test version"][key]:
            problems.append(f"{key}: upstream {desc['upstream'][key]} != test version {desc['test version'][key]}")
    for name, a, b in zip(desc["upstream"]["names"], desc["upstream"]["values"], desc["test version"]["values"]):
        if a.shape != b.shape or not np.array_equal(a, b):
            problems.append(f"initial value of {name} differs")
    rng = np.random.default_rng(seed)
    losses = {name: [] for name in nets}
    for step in range(steps):
        ids = ms.Tensor(rng.integers(0, config.vocab_size, (config.batch_size, 39)).astype(np.int32))
        wts = ms.Tensor(rng.random((config.batch_size, 39), dtype=np.float32))
        labels = ms.Tensor((rng.random((config.batch_size, 1)) < 0.3).astype(np.float32))
        for name, net in nets.items():
            ms.set_seed(seed + 1 + step)       # the same dropout masks for both
            loss_w, loss_d = net(ids, wts, labels)
            losses[name].append((float(loss_w.asnumpy()), float(loss_d.asnumpy())))
    if losses["upstream"] != losses["test version"]:
        problems.append(f"losses differ: upstream {losses['upstream']} != test version {losses['test version']}")
    return problems, losses, desc["upstream"]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Compare the test version of Wide&Deep with upstream's")
    parser.add_argument("upstream_dir", help="the Wide_and_Deep directory, imports changed to minitorch_dist")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    problems, losses, desc = compare(args.upstream_dir, args.steps)
    for extra in (["--sparse=True"], ["--dropout_flag=True"]):
        more, _, _ = compare(args.upstream_dir, args.steps, argv=extra)
        print(f"with {extra[0]}: " + ("agrees" if not more else "; ".join(more)))
        problems += more
    print(f"{len(desc['names'])} parameters: {desc['names']}")
    print(f"FTRL (optimizer_w): {desc['optimizer_w']}")
    print(f"Adam (optimizer_d): {len(desc['optimizer_d'])} parameters")
    for step, (a, b) in enumerate(zip(losses["upstream"], losses["test version"]), 1):
        print(f"step {step}: upstream wide/deep loss {a[0]:.7f} {a[1]:.7f}; test version {b[0]:.7f} {b[1]:.7f}")
    print("\n".join(problems) if problems else "the test version agrees with upstream")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
