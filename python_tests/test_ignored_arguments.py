"""Arguments MindSpore/SINGA code sets either act, are refused, or are noted once.

One test per decision (the project's rule: nothing is silently ignored). Notes go to the
"minitorch_dist" logger once per process, so each test forgets the notes it checks first.
"""
import logging

import numpy as np
import pytest

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist import runtime


@pytest.fixture
def notes(caplog):
    """The "minitorch_dist" warnings logged during a test, as strings, with the once-only
    notes forgotten first."""
    runtime._said.clear()
    with caplog.at_level(logging.WARNING, logger="minitorch_dist"):
        yield lambda: [r.getMessage() for r in caplog.records if r.name == "minitorch_dist"]


def _slices():
    return ds.NumpySlicesDataset({"x": np.arange(6, dtype=np.float32)}, shuffle=False)


# ---- dataset ------------------------------------------------------------------------------
def test_more_than_one_worker_is_noted_once(notes):
    ds.NumpySlicesDataset({"x": np.arange(4)}, num_parallel_workers=4)
    _slices().map(lambda x: x, num_parallel_workers=8)
    said = [n for n in notes() if "num_parallel_workers" in n]
    assert len(said) == 1 and "num_parallel_workers=4" in said[0]


def test_default_worker_counts_say_nothing(notes):
    ds.NumpySlicesDataset({"x": np.arange(4)})
    ds.NumpySlicesDataset({"x": np.arange(4)}, num_parallel_workers=1)
    _slices().map(lambda x: x).batch(2)
    list(_slices().create_tuple_iterator())
    assert notes() == []


@pytest.mark.parametrize("make", [
    lambda: ds.NumpySlicesDataset({"x": np.arange(4)}, num_parallel_workers=0),
    lambda: _slices().map(lambda x: x, num_parallel_workers=-1),
    lambda: _slices().batch(2, num_parallel_workers="8"),
])
def test_a_bad_worker_count_is_refused(make):
    with pytest.raises(ValueError, match="num_parallel_workers"):
        make()


def test_python_multiprocessing_is_noted_and_checked(notes):
    data = _slices().map(lambda x: x * 2, python_multiprocessing=True)
    assert [float(x) for (x,) in data.create_tuple_iterator(output_numpy=True)][:2] == [0.0, 2.0]
    assert any("python_multiprocessing=True" in n for n in notes())
    with pytest.raises(TypeError, match="python_multiprocessing"):
        _slices().map(lambda x: x, python_multiprocessing="yes")


@pytest.mark.parametrize("kwargs", [{"cache": object()}, {"callbacks": [object()]}])
def test_map_refuses_cache_and_callbacks(kwargs):
    with pytest.raises(NotImplementedError, match=next(iter(kwargs))):
        _slices().map(lambda x: x, **kwargs)


def test_map_refuses_an_unknown_keyword():
    with pytest.raises(TypeError):
        _slices().map(lambda x: x, per_batch_map=len)


def test_batch_refuses_per_batch_map():
    with pytest.raises(NotImplementedError, match="per_batch_map"):
        _slices().batch(2, per_batch_map=lambda x, info: (x,), input_columns=["x"])


def test_batch_refuses_an_unknown_keyword():
    with pytest.raises(TypeError, match="drop_reminder"):
        _slices().batch(2, drop_reminder=True)


def test_batch_accepts_mindspore_speed_keywords(notes):
    data = _slices().batch(4, python_multiprocessing=True, max_rowsize=32)
    assert [len(x) for (x,) in data.create_tuple_iterator(output_numpy=True)] == [4, 2]
    assert any("python_multiprocessing" in n for n in notes())


def test_do_copy_false_is_noted_and_gives_the_same_values(notes):
    same = [x.asnumpy().tolist() for (x,) in _slices().create_tuple_iterator(do_copy=False)]
    assert same == [float(i) for i in range(6)]
    rows = list(_slices().create_dict_iterator(do_copy=False, output_numpy=True))
    assert [float(r["x"]) for r in rows] == [float(i) for i in range(6)]
    assert len([n for n in notes() if "do_copy=False" in n]) == 1
    with pytest.raises(TypeError, match="do_copy"):
        _slices().create_tuple_iterator(do_copy=None)


@pytest.mark.parametrize("cls", ["MnistDataset", "Cifar10Dataset"])
def test_file_sources_refuse_cache(cls, tmp_path):
    with pytest.raises(ValueError, match="cache"):
        getattr(ds, cls)(str(tmp_path), cache=object())


# ---- jit ------------------------------------------------------------------------------------
def test_jit_input_signature_checks_the_inputs():
    f = ms.jit(lambda a: a * 2, input_signature=(ms.Tensor(np.zeros((2, 3), np.float32)),))
    assert f(ms.Tensor(np.ones((2, 3), np.float32))).asnumpy().sum() == 12.0
    with pytest.raises(TypeError, match=r"input 0 must be a Tensor of shape \[2, 3\]"):
        f(ms.Tensor(np.ones((2, 4), np.float32)))
    with pytest.raises(TypeError, match="dtype float32"):
        f(ms.Tensor(np.ones((2, 3), np.int32)))
    with pytest.raises(TypeError, match="has 1 inputs, the call gave 2"):
        f(ms.Tensor(np.ones((2, 3), np.float32)), 1)


def test_jit_input_signature_must_describe_tensors():
    with pytest.raises(TypeError, match="input_signature"):
        ms.jit(lambda a: a, input_signature=[3])


@pytest.mark.parametrize("kwargs", [{"hash_args": 1}, {"compile_once": True},
                                    {"jit_level": "O1"}, {"infer_boost": "on"}])
def test_jit_compiler_options_are_noted_once(notes, kwargs):
    name = next(iter(kwargs))
    f = ms.jit(lambda a: a + 1, **kwargs)
    ms.jit(lambda a: a, **kwargs)
    assert f(ms.Tensor([1.0])).asnumpy().tolist() == [2.0]
    assert [n for n in notes() if f"jit({name}=" in n] == [
        f"minitorch_dist: note: jit({name}=...) is accepted and changes nothing: it steers MindSpore's graph compiler, "
        "and here the function runs eagerly with the same results"]


def test_jit_defaults_say_nothing(notes):
    ms.jit(lambda a: a)(ms.Tensor([1.0]))
    assert notes() == []


# ---- Cell ---------------------------------------------------------------------------------
def test_cell_flags_are_set_as_attributes():
    cell = ms.nn.Cell(flags={"for_dataset": True})
    assert cell.for_dataset is True and cell.get_flags() == {"for_dataset": True}
    with pytest.raises(TypeError, match="flags must be a dict"):
        ms.nn.Cell(flags=["x"])


def test_set_grad_false_is_recorded_and_noted(notes):
    net = ms.nn.Dense(2, 2)
    assert net.set_grad() is net and net.requires_grad is True and notes() == []
    net.set_grad(False)
    assert net.requires_grad is False
    assert any("set_grad(False)" in n for n in notes())
    with pytest.raises(TypeError, match="requires_grad"):
        net.set_grad("no")


# ---- Profiler -----------------------------------------------------------------------------
def _profiler(tmp_path):
    from minitorch_dist.profiler import Profiler
    return Profiler(output_path=str(tmp_path))


@pytest.mark.parametrize("kwargs", [{"offline_path": "/tmp/run"}, {"step_list": [1, 2]}])
def test_profiler_analyse_refuses_what_it_cannot_honour(tmp_path, kwargs):
    with pytest.raises(NotImplementedError, match=next(iter(kwargs))):
        _profiler(tmp_path).analyse(**kwargs)


def test_profiler_analyse_notes_pretty_and_async(tmp_path, notes):
    from minitorch_dist import profiler
    profiler._noted.difference_update({"analyse.pretty", "analyse.mode"})
    path = _profiler(tmp_path).analyse(pretty=True, mode="async")
    assert open(path).read().strip()
    said = notes()
    assert any("pretty=True" in n for n in said) and any("mode='async'" in n for n in said)
    with pytest.raises(ValueError, match="mode"):
        _profiler(tmp_path).analyse(mode="later")


# ---- runtime ------------------------------------------------------------------------------
def test_module_to_cpu_dict_is_checked_and_noted(notes):
    import os
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    runtime.set_cpu_affinity(True, cpus, module_to_cpu_dict={"minddata": cpus or [0]})
    assert any("module_to_cpu_dict changes nothing" in n for n in notes())
    with pytest.raises(TypeError, match="module_to_cpu_dict"):
        runtime.set_cpu_affinity(True, module_to_cpu_dict={"dataset": [0]})


# ---- checkpoint ---------------------------------------------------------------------------
def test_save_checkpoint_integrated_save_must_be_a_bool(tmp_path):
    from minitorch_dist.train import save_checkpoint
    save_checkpoint(ms.nn.Dense(2, 2), str(tmp_path / "a.ckpt"), integrated_save=False)
    assert (tmp_path / "a.ckpt").exists()
    with pytest.raises(TypeError, match="integrated_save"):
        save_checkpoint(ms.nn.Dense(2, 2), str(tmp_path / "b.ckpt"), integrated_save="yes")


# ---- Model --------------------------------------------------------------------------------
def _model(**kwargs):
    from minitorch_dist.train import Model
    net = ms.nn.Dense(2, 2)
    return Model(net, ms.nn.MSELoss(), ms.nn.SGD(net.trainable_params(), 0.1),
                 metrics={"loss"}, **kwargs)


_BATCHES = [(np.ones((2, 2), np.float32), np.zeros((2, 2), np.float32))]


def test_model_boost_level_warns_and_is_checked():
    with pytest.warns(UserWarning, match="boost_level='O1' is not implemented"):
        _model(boost_level="O1")
    with pytest.raises(ValueError, match="boost_level"):
        _model(boost_level="O5")


def test_model_sink_mode_notes_that_it_changes_nothing(notes, recwarn):
    from minitorch_dist import log
    log._noted.clear()
    model = _model()
    model.train(1, _BATCHES, dataset_sink_mode=True)
    model.fit(1, _BATCHES, _BATCHES, valid_dataset_sink_mode=True)
    assert "loss" in model.eval(_BATCHES, dataset_sink_mode=True)
    model.train(1, _BATCHES, sink_size=4)
    said = notes()
    for text in ("dataset_sink_mode=True", "valid_dataset_sink_mode=True", "sink_size=4"):
        assert any(text in n and n.startswith("minitorch_dist: note: ") for n in said), said
    assert not [w for w in recwarn if "sink" in str(w.message)]
    with pytest.raises(TypeError, match="dataset_sink_mode"):
        model.eval(_BATCHES, dataset_sink_mode="yes")


def test_model_defaults_do_not_warn():
    import warnings
    model = _model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(1, _BATCHES, _BATCHES)
        model.eval(_BATCHES)


# ---- ops ----------------------------------------------------------------------------------
def test_hypermap_reverse_calls_from_the_last_element():
    from minitorch_dist.ops import composite as C
    calls = []
    out = C.HyperMap(lambda a: calls.append(a) or a * 10, reverse=True)((1, 2, 3))
    assert out == (10, 20, 30) and calls == [3, 2, 1]
    calls.clear()
    C.HyperMap(lambda a: calls.append(a) or a)((1, 2, 3))
    assert calls == [1, 2, 3]


def test_multitype_read_value_is_noted(notes):
    from minitorch_dist.ops import composite as C
    f = C.MultitypeFuncGraph("f", read_value=True)
    f.register("Number")(lambda x: x + 1)
    assert f(1) == 2 and f.read_value is True
    assert any("read_value=True" in n for n in notes())
    with pytest.raises(TypeError, match="read_value"):
        C.MultitypeFuncGraph("g", read_value="yes")


def test_dropout_refuses_per_operator_seeds():
    from minitorch_dist import ops
    ops.Dropout(keep_prob=0.9)
    with pytest.raises(NotImplementedError, match="seed0=1"):
        ops.Dropout(keep_prob=0.9, seed0=1)


# ---- SINGA --------------------------------------------------------------------------------
def test_singa_dropout_refuses_a_seed():
    from minitorch_dist.singa import autograd, tensor
    x = tensor.from_numpy(np.ones((2, 2), np.float32))
    autograd.dropout(x, 0, 0.5)
    with pytest.raises(NotImplementedError, match="seed=7"):
        autograd.dropout(x, seed=7)


def test_singa_requires_grad_false_keeps_gradients_out():
    from minitorch_dist.singa import tensor
    assert tensor.Tensor((2,), stores_grad=True).requires_grad is True
    frozen = tensor.Tensor((2,), stores_grad=True, requires_grad=False)
    assert frozen.requires_grad is False and frozen.stores_grad is True
    with pytest.raises(TypeError, match="requires_grad"):
        tensor.Tensor((2,), requires_grad=None)


# ---- communication ------------------------------------------------------------------------
def test_mpi_split_names_the_communicator():
    import subprocess
    import sys
    code = ("from mpi4py import MPI\n"
            "from minitorch_dist.communication.mpi import MPICommunicator\n"
            "print(MPICommunicator(MPI.COMM_WORLD).split([0], name='grads').comm.Get_name())\n")
    pytest.importorskip("mpi4py")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "grads", done.stderr


# ---- SINGA graph mode -----------------------------------------------------------------------
def test_singa_graph_mode_says_once_that_it_runs_eagerly(monkeypatch):
    import warnings
    from minitorch_dist.singa import device, layer, model, tensor
    monkeypatch.setattr(device, "_graph_noted", [])

    class Net(model.Model):
        def __init__(self):
            super().__init__()
            self.fc = layer.Linear(2)

        def forward(self, x):
            return self.fc(x)

    x = tensor.Tensor((3, 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Net().compile([x], is_train=True, use_graph=False)
        assert not caught                                 # the default says nothing
        Net().compile([x], is_train=True, use_graph=True, sequential=True)
        device.get_default_device().EnableGraph(True)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "graph mode runs eagerly" in messages[0]
