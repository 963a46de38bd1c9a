"""The SINGA facade (``minitorch_dist.singa``) and the guide's scripts (``examples/singa``).

* the guide's CNN written with the facade trains exactly like the Cell version of the same
  model (``examples/mnist_cnn.py``'s CNN with the core SGD and DistOpt);
* layers infer their input sizes, optimizers bind to the model at ``compile``, ``DistOpt``
  across in-process ranks equals one process on the whole batch;
* ``mnist_cnn.py`` (one process), ``mnist_dist.py`` under ``mpiexec -n 2`` and
  ``mnist_multiprocess.py 2`` print the guide's lines, and both 2-rank launches end with the
  parameters of one process trained on the concatenated batches.

Bad arguments and unsupported SINGA names are in ``test_singa_facade_errors.py``.
Every subprocess runs under a timeout; MPI jobs go through ``mpi_jobs.launch``.
"""
import importlib.util
import os
import re
import sys
import threading

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import LocalCommunicator, run_ranks
from minitorch_dist.parallel import DistOpt as CoreDistOpt
from minitorch_dist.singa import autograd, device, layer, model, opt, tensor

from mpi_jobs import REPO, launch, needs_mpi, run_process

EXAMPLES = os.path.join(REPO, "examples", "singa")
LR, MOMENTUM, DECAY = 0.005, 0.9, 1e-5
EPOCH_LINES = re.compile(r"^Starting Epoch (\d+):\n"
                         r"Training loss = (\d+\.\d{6}), training accuracy = ([01]\.\d{6})\n"
                         r"Evaluation accuracy = ([01]\.\d{6})$", re.M)


_LOADING = threading.Lock()


def _load(filename, name):
    """Load ``filename`` once as module ``name``; thread ranks may ask at the same moment, and
    one of them must not take the other's half-executed module."""
    with _LOADING:
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, filename)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
        return module


def guide():
    """``examples/singa/mnist_cnn.py`` (its sibling ``mnist_data`` registered first)."""
    _load(os.path.join(EXAMPLES, "mnist_data.py"), "mnist_data")
    return _load(os.path.join(EXAMPLES, "mnist_cnn.py"), "singa_guide_mnist_cnn")


def _cuda_visible():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:       # no CuPy, or no driver: no CUDA GPU
        return False


def world_of_one():
    return LocalCommunicator.create(1)[0]


def compiled_guide_cnn(batch, optimizer=None, seed=0):
    net = guide().CNN()
    net.set_optimizer(optimizer or opt.SGD(lr=LR, momentum=MOMENTUM, weight_decay=DECAY))
    dev = device.create_cpu_device()
    dev.SetRandSeed(seed)
    tx = tensor.Tensor((batch, 1, 28, 28), dev, tensor.float32)
    ty = tensor.Tensor((batch, 10), dev, tensor.int32)
    net.compile([tx], is_train=True, use_graph=True, sequential=True)
    return net, tx, ty


def batches(count, batch, seed=3):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield (rng.standard_normal((batch, 1, 28, 28)).astype(np.float32),
               rng.integers(0, 10, batch))


def one_hot(labels):
    return np.eye(10, dtype=np.int32)[labels]


# ---- the guide's CNN against the Cell version ------------------------------------------------
def test_guide_cnn_trains_exactly_like_the_cell_version():
    cells = _load(os.path.join(REPO, "examples", "mnist_cnn.py"), "cell_mnist_cnn_example")
    batch = 16
    facade, tx, ty = compiled_guide_cnn(
        batch, opt.DistOpt(opt.SGD(lr=LR, momentum=MOMENTUM, weight_decay=DECAY),
                           communicator=world_of_one()))
    net = cells.CNN()

    def facade_values(name):        # Cell names (linear1.weight) -> SINGA's (linear1.W)
        cell, kind = name.split(".")
        value = facade.get_params()[f"{cell}.{'W' if kind == 'weight' else 'b'}"].asnumpy()
        return value.T if cell.startswith("linear") and kind == "weight" else value

    for name, p in net.parameters_and_names():
        p.set_data(facade_values(name))
    core_opt = CoreDistOpt(nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM,
                                  weight_decay=DECAY), communicator=world_of_one())
    loss_fn = nn.CrossEntropyLoss()
    for x, labels in batches(6, batch):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(one_hot(labels))
        out, loss = facade(tx, ty, "fp32", 0)
        cell_loss = loss_fn(net(ms.Tensor(x)), ms.Tensor(labels.astype(np.int32)))
        core_opt(cell_loss)
        assert loss.shape == (1,) and out.shape == (batch, 10)
        assert float(loss.asnumpy()[0]) == pytest.approx(float(cell_loss.asnumpy()), abs=1e-6)
        worst = max(float(np.abs(facade_values(name) - p.asnumpy()).max())
                    for name, p in net.parameters_and_names())
        assert worst <= 1e-6
    assert facade.optimizer.opt.step_counter == 6


def test_the_guide_model_has_singa_parameter_names_and_shapes():
    net, _, _ = compiled_guide_cnn(4)
    shapes = {name: p.shape for name, p in net.get_params().items()}
    assert shapes == {"conv1.W": (20, 1, 5, 5), "conv1.b": (20,), "conv2.W": (50, 20, 5, 5),
                      "conv2.b": (50,), "linear1.W": (800, 500), "linear1.b": (500,),
                      "linear2.W": (500, 10), "linear2.b": (10,)}
    assert guide().CNN().get_params() == {}        # nothing before the first call
    std = float(net.get_params()["linear1.W"].asnumpy().std())
    assert std == pytest.approx(np.sqrt(2 / (800 + 500)), rel=0.02)   # SINGA's init
    assert not net.get_params()["conv1.b"].asnumpy().any()


# ---- layers ---------------------------------------------------------------------------------
def test_linear_infers_its_input_size_at_the_first_call():
    fc = layer.Linear(500)
    assert fc.get_params() == {}
    out = fc(tensor.from_numpy(np.ones((3, 800), np.float32)))
    assert out.shape == (3, 500) and fc.in_features == 800
    assert {k: p.shape for k, p in fc.get_params().items()} == {"W": (800, 500), "b": (500,)}
    with pytest.raises(ValueError, match=r"layer.Linear: expected 800 input features"):
        fc(tensor.from_numpy(np.ones((3, 700), np.float32)))
    legacy = layer.Linear(800, 500, False)                 # SINGA's older (in, out, bias)
    legacy(tensor.from_numpy(np.ones((2, 800), np.float32)))
    assert list(legacy.get_params()) == ["W"]
    with pytest.raises(ValueError, match=r"declared in_features=10 but the input has 800"):
        layer.Linear(10, 5)(tensor.from_numpy(np.ones((2, 800), np.float32)))


def test_conv_pooling_flatten_follow_singa_conventions():
    x = tensor.from_numpy(np.random.default_rng(0).standard_normal((2, 3, 9, 9)))
    conv = layer.Conv2d(4, 3, stride=2, padding=1, activation="RELU", bias=False)
    y = conv(x)
    assert y.shape == (2, 4, 5, 5) and float(y.asnumpy().min()) >= 0
    assert list(conv.get_params()) == ["W"]
    same = layer.Conv2d(3, 4, pad_mode="SAME_LOWER")(x)
    assert same.shape == (2, 3, 9, 9)
    assert layer.MaxPool2d(3, 2, padding=1)(x).shape == (2, 3, 5, 5)
    assert layer.MaxPool2d(2, pad_mode="SAME_UPPER")(x).shape == (2, 3, 5, 5)
    assert layer.AvgPool2d(3)(x).shape == (2, 3, 3, 3)
    assert layer.Flatten()(x).shape == (2, 243) and layer.Flatten(2)(x).shape == (6, 81)
    drop = layer.Dropout(0.5)
    drop.set_train(False)
    assert np.array_equal(drop(x).asnumpy(), x.asnumpy())


def test_custom_layer_with_a_stores_grad_tensor_gets_a_trainable_parameter():
    class Scale(layer.Layer):
        def initialize(self, x):
            self.W = tensor.Tensor((x.shape[1],), x.device, stores_grad=True)
            self.W.set_value(2.0)

        def forward(self, x):
            return x * self.W

    scale = Scale()
    out = scale(tensor.from_numpy(np.ones((2, 3), np.float32)))
    assert out.asnumpy().tolist() == [[2.0] * 3] * 2
    assert list(scale.get_params()) == ["W"] and scale.trainable_params()[0] is scale.W


def test_softmax_cross_entropy_accepts_indices_one_hot_and_soft_targets():
    logits = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    labels = np.array([0, 2, 1, 2])
    expected = np.mean(np.log(np.exp(logits).sum(1)) - logits[np.arange(4), labels])
    ce = layer.SoftMaxCrossEntropy()
    x = tensor.from_numpy(logits)
    for target in (labels.astype(np.int32), labels.astype(np.int32)[:, None],
                   np.eye(3, dtype=np.int32)[labels] * 7, np.eye(3, dtype=np.float32)[labels]):
        loss = ce(x, tensor.Tensor(data=target, dtype=target.dtype))
        assert loss.shape == (1,)
        assert float(loss.asnumpy()[0]) == pytest.approx(expected, rel=1e-5)


# ---- tensors and devices ----------------------------------------------------------------------
def test_tensor_copies_keep_the_buffer_and_convert_values():
    tx = tensor.Tensor((2, 2), None, tensor.float32)
    buffer = tx.data
    tx.copy_from_numpy(np.array([1, 2, 3, 4], np.int64))       # SINGA copied raw bytes
    assert tx.data is buffer and tensor.to_numpy(tx).tolist() == [[1, 2], [3, 4]]
    assert tx.dtype == tensor.float32 and tx.size() == tx.size == 4 and tx.ndim() == 2
    assert tensor.Tensor((3,), dtype=2).dtype == tensor.int32          # SINGA's code for int32
    assert not tx.requires_grad and tensor.Tensor((1,), stores_grad=True).requires_grad
    assert tensor.from_numpy(np.zeros(2)).dtype == tensor.float32      # float64 -> float32
    t = tensor.Tensor((1000,)).gaussian(1.0, 0.5)
    assert abs(float(t.asnumpy().mean()) - 1.0) < 0.1 and t.clone().shape == (1000,)


def test_create_cuda_gpu_on_without_a_gpu_warns_and_uses_the_host(no_gpu):
    with pytest.warns(RuntimeWarning, match=r"create_cuda_gpu_on\(1\): no CUDA GPU here"):
        dev = device.create_cuda_gpu_on(1)
    assert dev is device.create_cpu_device() and dev.id() == -1


def test_on_the_virtual_gpu_parameters_and_data_live_on_the_device(virtual_gpu):
    dev = device.create_cuda_gpu_on(0)
    assert dev.core is virtual_gpu and dev.id() == 0
    gpu_net = guide().CNN()
    gpu_net.set_optimizer(opt.SGD(lr=LR))
    gx = tensor.Tensor((4, 1, 28, 28), dev, tensor.float32)
    gy = tensor.Tensor((4,), dev, tensor.int32)
    gpu_net.compile([gx], is_train=True, use_graph=False, sequential=False)
    assert {p.device for p in gpu_net.get_params().values()} == {virtual_gpu}
    before = ms.transfer_stats()["host_to_device"]
    gx.copy_from_numpy(np.ones((4, 1, 28, 28), np.float32))
    gy.copy_from_numpy(np.array([1, 2, 3, 4], np.int32))
    assert ms.transfer_stats()["host_to_device"] - before == 4 * 784 * 4 + 4 * 4
    out, loss = gpu_net(gx, gy)
    assert out.device is virtual_gpu and np.isfinite(tensor.to_numpy(loss)).all()


# ---- optimizers and the model ------------------------------------------------------------------
def test_sgd_follows_singas_rule_momentum_starts_at_zero():
    class One(model.Model):
        def __init__(self):
            super().__init__()
            self.fc = layer.Linear(1, bias=False)

        def forward(self, x):
            return self.fc(x)

    net = One()
    sgd = opt.SGD(lr=0.1, momentum=0.5, dampening=0.5, weight_decay=0.1)
    net.set_optimizer(sgd)
    net.compile([tensor.Tensor((1, 1))])
    w = net.get_params()["fc.W"]
    p, v = float(w.asnumpy()[0, 0]), 0.0
    for g in (1.0, -2.0, 0.5):
        sgd.apply("fc.W", w, np.array([[g]], np.float32))
        sgd.step()
        g = g + 0.1 * p                 # SINGA: weight decay, then v = m v + (1 - d) g
        v = 0.5 * v + 0.5 * g
        p -= 0.1 * v
    assert float(w.asnumpy()[0, 0]) == pytest.approx(p, rel=1e-6) and sgd.step_counter == 3


def _compiled_tiny():
    class Tiny(model.Model):
        def __init__(self):
            super().__init__()
            self.fc = layer.Linear(3)

        def forward(self, x):
            return self.fc(x)

    net = Tiny()
    net.compile([tensor.Tensor((2, 4))])
    return net


def test_an_optimizer_set_after_compile_binds_at_once_and_only_to_one_model():
    net = _compiled_tiny()
    sgd = opt.DistOpt(opt.SGD(lr=0.1), communicator=world_of_one())
    assert repr(sgd).endswith("not yet bound)") and sgd.local_rank == 0
    net.set_optimizer(sgd)                  # compiled already: DistOpt binds (and syncs) now
    assert [p.name for p in sgd.parameters] == ["fc.W", "fc.b"] and sgd.partial_period >= 1
    with pytest.raises(RuntimeError, match="already updates another model's parameters"):
        _compiled_tiny().set_optimizer(sgd)


def test_states_round_trip_and_eval_runs_forward_without_gradients(tmp_path):
    net, tx, ty = compiled_guide_cnn(2)
    states = {k: v.asnumpy() for k, v in net.get_states().items()}
    path = str(tmp_path / "cnn.zip")
    net.save_states(path, {"epoch": tensor.from_numpy(np.array([3], np.int32))})
    with pytest.raises(FileExistsError, match="exists"):
        net.save_states(path)
    other, _, _ = compiled_guide_cnn(2, seed=5)
    aux = other.load_states(path)
    assert tensor.to_numpy(aux["epoch"]).tolist() == [3]
    for name, value in other.get_params().items():
        assert np.array_equal(value.asnumpy(), states[name])
    other.set_params({k: np.zeros_like(v) for k, v in states.items()})
    assert not other.get_params()["conv1.W"].asnumpy().any()
    net.eval()
    out = net(tx)
    assert out.shape == (2, 10) and not out.requires_grad
    net.train()
    assert net.training and net.conv1.training


def _two_ranks(train):
    return run_ranks(2, train)


@pytest.fixture
def one_blas_thread():
    """Thread ranks share the process's BLAS thread count, which a Conv2D's pieces set to one
    while they run: the other rank's product then runs on one or two threads by timing, and
    on some CPUs those round differently. One thread for the whole test removes the race."""
    ms.set_context(num_threads=1)
    yield
    ms.set_context(num_threads=None)


def _accumulate_halves(start, data, halves=2):
    """One process doing the ranks' arithmetic: each step a forward and backward on every
    rank's rows, the mean of their gradients, one update of the facade's SGD."""
    reference, _, _ = compiled_guide_cnn(8)
    reference.set_params(start)
    sgd, rows = reference.optimizer, 8 // halves
    autograd.training = True
    for x, labels in data:
        total = {}
        for lo in range(0, 8, rows):
            out = reference.forward(tensor.from_numpy(x[lo:lo + rows]))
            loss = reference.softmax_cross_entropy(
                out, tensor.from_numpy(one_hot(labels[lo:lo + rows])))
            for param, grad in autograd.backward(loss):
                total[param.name] = (total.get(param.name, 0)
                                     + tensor.to_numpy(grad) / np.float32(halves))
        for name, param in reference.get_params().items():
            sgd.update(param, tensor.from_numpy(total[name]))
        sgd.step()
    return {k: v.asnumpy() for k, v in reference.get_params().items()}


def test_dist_opt_on_two_in_process_ranks_equals_one_process_on_the_whole_batch(one_blas_thread):
    """Two ranks against one process, from one seeded start.

    Over several steps the comparison is with one process doing the ranks' arithmetic (a
    forward and backward on each rank's 4 rows, gradients averaged), bit for bit. The whole
    batch of 8 rounds its products differently in the last bits, and one such bit is enough
    to flip a ReLU sitting at zero, after which the trajectories part by 1e-5 (a start drawn
    that way did so at the second step). The whole batch is compared over one step, where
    that cannot compound."""
    data = list(batches(3, 8, seed=11))
    fixed, _, _ = compiled_guide_cnn(8, seed=5)
    fixed = {k: v.asnumpy() for k, v in fixed.get_params().items()}

    def train(comm):
        net = guide().CNN()
        sgd = opt.DistOpt(opt.SGD(lr=LR, momentum=MOMENTUM, weight_decay=DECAY),
                          communicator=comm)
        assert (sgd.global_rank, sgd.world_size) == (comm.rank, 2)
        net.set_optimizer(sgd)
        tx = tensor.Tensor((4, 1, 28, 28))
        ty = tensor.Tensor((4, 10), dtype=tensor.int32)
        net.compile([tx], is_train=True, use_graph=True, sequential=True)   # rank 0's values
        compiled = {k: v.asnumpy() for k, v in net.get_params().items()}
        net.set_params(fixed)
        total = sgd.all_reduce(tensor.from_numpy(np.array([comm.rank + 1.0])))   # in place
        assert tensor.to_numpy(total).tolist() == [3.0]
        after = []
        for x, labels in data:
            lo = 4 * comm.rank
            tx.copy_from_numpy(x[lo:lo + 4])
            ty.copy_from_numpy(one_hot(labels[lo:lo + 4]))
            net(tx, ty, "fp32", 0)
            after.append({k: v.asnumpy() for k, v in net.get_params().items()})
        return compiled, after

    (compiled0, after0), (compiled1, after1) = _two_ranks(train)
    assert all(np.array_equal(compiled0[k], compiled1[k]) for k in compiled0)
    for name, value in _accumulate_halves(fixed, data).items():     # to the last bit
        assert np.array_equal(value, after0[-1][name]), name
        assert np.array_equal(after0[-1][name], after1[-1][name])
    whole, tx, ty = compiled_guide_cnn(8)
    whole.set_params(fixed)
    tx.copy_from_numpy(data[0][0])
    ty.copy_from_numpy(one_hot(data[0][1]))
    whole(tx, ty)
    for name, p in whole.get_params().items():
        assert np.abs(p.asnumpy() - after0[0][name]).max() <= 1e-6, name


@pytest.mark.parametrize("option, spars", [("fp16", 0), ("partialUpdate", 0),
                                           ("sparseTopK", 0.05), ("sparseThreshold", 1e-3),
                                           ("plain", 0)])
def test_every_dist_option_of_the_guide_runs_through_the_facade(option, spars):
    def train(comm):
        net = guide().CNN()
        sgd = opt.DistOpt(opt.SGD(lr=LR, momentum=MOMENTUM), communicator=comm)
        net.set_optimizer(sgd)
        tx = tensor.Tensor((2, 1, 28, 28))
        net.compile([tx], is_train=True, use_graph=False, sequential=True)
        before = net.get_params()["linear2.W"].asnumpy()
        x, labels = next(batches(1, 2, seed=comm.rank))
        tx.copy_from_numpy(x)
        name = {"plain": "fp32"}.get(option, option)     # the guide's spellings and 3.2's
        net(tx, tensor.from_numpy(labels.astype(np.int32)), name, spars)
        return sgd.comm_stats()["by_option"], before, net.get_params()["linear2.W"].asnumpy()

    for stats, before, after in _two_ranks(train):
        assert list(stats) == [{"plain": "fp32"}.get(option, option)]
        assert not np.array_equal(before, after)


def test_training_without_compile_binds_at_the_first_step_and_catches_unsynced_ranks():
    def train(comm):
        device.create_cpu_device().SetRandSeed(comm.rank + 1)    # the ranks draw differently
        net = guide().CNN()
        net.set_optimizer(opt.DistOpt(opt.SGD(lr=LR), communicator=comm))
        tx = tensor.from_numpy(np.zeros((2, 1, 28, 28), np.float32))
        ty = tensor.from_numpy(np.array([1, 2], np.int32))
        try:
            net(tx, ty)            # the layers (and the binding) come with the first step
        except RuntimeError as err:
            return str(err)
        return sorted(net.optimizer.opt.core.parameters[0].name for _ in [0])

    assert run_ranks(1, train) == [["conv1.W"]]
    # two ranks seeded differently draw different initial values: the first forward ran on
    # unsynchronised parameters, which every rank reports (no hang)
    for message in run_ranks(2, train):
        assert "call model.compile([tx], ...) before training" in message


# ---- the guide's three scripts ---------------------------------------------------------------
def _epochs(stdout):
    return [(int(e), float(loss), float(tr), float(ev))
            for e, loss, tr, ev in EPOCH_LINES.findall(stdout)]


SMALL = ["--epochs", "2", "--batches-per-epoch", "3"]


def _one_process_reference(world=2, batch=32, epochs=2, batches_per_epoch=3):
    """The facade trained in this process on the 2-rank job's batches, concatenated."""
    example = guide()
    train_x, train_y, _, _ = sys.modules["mnist_data"].load_dataset()
    shards = [example.data_partition(train_x, train_y, r, world) for r in range(world)]
    net, tx, ty = compiled_guide_cnn(world * batch)
    np.random.seed(0)
    idx = np.arange(shards[0][0].shape[0], dtype=np.int32)
    for _ in range(epochs):
        np.random.shuffle(idx)
        for b in range(batches_per_epoch):
            chosen = idx[b * batch:(b + 1) * batch]
            tx.copy_from_numpy(np.concatenate([x[chosen] for x, _ in shards]))
            ty.copy_from_numpy(np.concatenate([y[chosen] for _, y in shards]))
            net(tx, ty, "fp32", 0)
    return {name: p.asnumpy() for name, p in net.get_params().items()}


@pytest.fixture(scope="module")
def reference_params():
    pytest.importorskip("sklearn", reason="the scripts train on scikit-learn's digits")
    return _one_process_reference()


def _assert_equal_to_reference(path, reference):
    saved = np.load(path)
    assert sorted(saved.files) == sorted(reference)
    worst = max(float(np.abs(saved[k] - reference[k]).max()) for k in reference)
    assert worst <= 1e-6, worst


def test_mnist_cnn_on_one_process_prints_the_guide_lines_and_learns():
    pytest.importorskip("sklearn", reason="the scripts train on scikit-learn's digits")
    done, _ = run_process([sys.executable, os.path.join(EXAMPLES, "mnist_cnn.py"),
                           "--epochs", "2"], timeout=120,
                          env={"MINITORCH_DIST_VIRTUAL_GPU": "0"})   # also in a virtual-GPU run
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _epochs(done.stdout)
    assert [r[0] for r in rows] == [0, 1], done.stdout
    assert rows[1][1] < rows[0][1] and rows[1][3] >= 0.9, rows
    if not _cuda_visible():
        assert "create_cuda_gpu_on(0): no CUDA GPU here" in done.stderr


@pytest.mark.mpi
@needs_mpi
def test_mpiexec_2_of_mnist_dist_equals_one_process_on_the_full_batch(tmp_path, reference_params):
    path = str(tmp_path / "mpi.npz")
    done, _ = launch(2, os.path.join(EXAMPLES, "mnist_dist.py"), *SMALL, "--save-params", path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r[0] for r in _epochs(done.stdout)] == [0, 1], done.stdout     # rank 0 only
    _assert_equal_to_reference(path, reference_params)


def test_mnist_multiprocess_2_runs_on_cpu_and_equals_one_process(tmp_path, reference_params):
    path = str(tmp_path / "mp.npz")
    done, _ = run_process([sys.executable, os.path.join(EXAMPLES, "mnist_multiprocess.py"), "2",
                           *SMALL, "--save-params", path, "--timeout", "100"], timeout=130)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r[0] for r in _epochs(done.stdout)] == [0, 1], done.stdout
    _assert_equal_to_reference(path, reference_params)


def test_scripts_reject_bad_command_lines_and_report_failed_children():
    script = os.path.join(EXAMPLES, "mnist_cnn.py")
    done, _ = run_process([sys.executable, script, "--epochs", "0"], timeout=60)
    assert done.returncode == 2 and "--epochs must be a positive integer" in done.stderr
    multi = os.path.join(EXAMPLES, "mnist_multiprocess.py")
    done, _ = run_process([sys.executable, multi, "0"], timeout=60)
    assert done.returncode == 2 and "world_size must be a positive integer" in done.stderr
    done, _ = run_process([sys.executable, multi, "2", "--batch-size", "5000", "--timeout", "60"],
                          timeout=90)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "exceeds the" in done.stderr and "a process failed" in done.stderr
