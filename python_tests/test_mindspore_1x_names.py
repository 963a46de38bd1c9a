"""MindSpore 1.x names that model code still uses: ``ms.dtype`` the module, ``ops.RealDiv``,
``ops.TensorAdd``, ``ops.scalar_to_array``, ``ops.tuple_to_array``, ``ops.shape``/``F.shape``
as functions, and the primitives module's new path (``ops.shape_ops``)."""
import importlib

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops, Tensor


def test_dtype_is_a_module_with_mindspores_names():
    from minitorch_dist import dtype as mstype
    import minitorch_dist.common.dtype as common_dtype
    assert importlib.import_module("minitorch_dist.dtype") is mstype
    assert mstype.float32 is ms.float32 is common_dtype.float32
    assert (mstype.float_, mstype.int_, mstype.half, mstype.double) == (
        ms.float32, ms.int32, ms.float16, ms.float64)
    assert mstype.dtype_to_nptype(mstype.float16) is np.float16
    assert mstype.dtype_to_pytype(mstype.int32) is int
    assert mstype.pytype_to_dtype(bool) == ms.bool_
    with pytest.raises(AttributeError, match="int16 is a MindSpore dtype this framework does not support"):
        mstype.int16


def test_ops_shape_is_mindsporess_function_and_the_primitives_moved():
    x = Tensor(np.zeros((2, 3), np.float32))
    import minitorch_dist.ops.functional as F
    assert ops.shape(x) == F.shape(x) == (2, 3)
    assert ops.shape(x) + (1, 1) == (2, 3, 1, 1)          # the model zoo's SE block
    assert (ops.rank(x), ops.size(x), F.dtype(x)) == (2, 6, ms.float32)
    assert ops.dyn_shape(x).asnumpy().tolist() == [2, 3]
    from minitorch_dist.ops import shape_ops
    assert shape_ops.Reshape is ops.Reshape
    with pytest.raises(TypeError, match="expected a Tensor"):
        ops.shape([1, 2])


def test_realdiv_tensoradd_and_conversions():
    a, b = Tensor([3.0, 1.0]), Tensor([2.0, 4.0])
    assert ops.RealDiv()(a, b).asnumpy().tolist() == [1.5, 0.25]
    assert ops.TensorAdd()(a, b).asnumpy().tolist() == [5.0, 5.0]
    assert issubclass(ops.RealDiv, ops.Div) and issubclass(ops.TensorAdd, ops.Add)
    s = ops.scalar_to_array(-1.0)
    assert s.shape == () and s.dtype == ms.float32 and s.item() == -1.0
    assert ops.tuple_to_array((1, 2, 3)).asnumpy().tolist() == [1, 2, 3]
    assert ops.tuple_to_array((1.0, 2)).dtype == ms.float32
    assert ops.scalar_to_tensor(3, ms.int32).dtype == ms.int32
    assert ops.scalar_cast(2.7, ms.int32) == 2
    with pytest.raises(TypeError, match="TupleToArray"):
        ops.tuple_to_array("abc")
    with pytest.raises(TypeError, match="ScalarToArray: expected a Python number"):
        ops.scalar_to_array("1")
    # the gradient of RealDiv is Div's
    g = ms.grad(lambda x: ops.RealDiv()(x, Tensor([2.0, 4.0])).sum())(Tensor([1.0, 1.0]))
    assert g.asnumpy().tolist() == [0.5, 0.25]


def test_squeeze_expanddims_and_legacy_module_paths():
    from minitorch_dist.ops import operations as P
    from minitorch_dist.ops import functional as F
    x = Tensor(np.ones((1, 3), np.float32))
    assert P.Squeeze(0)(x).shape == (3,)
    assert P.ExpandDims()(x, 0).shape == (1, 1, 3)
    assert P.RealDiv is ops.RealDiv and P.TensorAdd is ops.TensorAdd
    assert F.scalar_to_array is ops.scalar_to_array


class _SoftmaxLossExpand(nn.Cell):
    """A loss written the way the r1.6 pipeline sample writes its own: the 1.x primitives,
    ``ops.shape`` and ``ops.scalar_to_array`` inside ``construct``."""

    def __init__(self):
        super().__init__()
        self.exp, self.log, self.div = ops.Exp(), ops.Log(), ops.RealDiv()
        self.sum = ops.ReduceSum(keep_dims=True)
        self.sum_ce = ops.ReduceSum(keep_dims=False)
        self.max = ops.ReduceMax(keep_dims=True)
        self.onehot = ops.OneHot()
        self.mean = ops.ReduceMean(keep_dims=False)
        self.on, self.off = Tensor(1.0, ms.float32), Tensor(0.0, ms.float32)

    def construct(self, logit, label):
        e = self.exp(logit - self.max(logit, -1))
        p = self.div(e, self.sum(e, -1))
        label = self.onehot(label, ops.shape(logit)[1], self.on, self.off)
        loss = ops.scalar_to_array(-1.0) * self.sum_ce(self.log(p + 1e-24) * label, -1)
        return self.mean(loss, -1)


def test_a_1x_style_loss_matches_the_closed_form():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(4, 5)).astype(np.float32)
    labels = np.array([0, 4, 2, 1], np.int32)
    got = _SoftmaxLossExpand()(Tensor(logits), Tensor(labels)).item()
    shifted = logits - logits.max(1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    assert got == pytest.approx(-logp[np.arange(4), labels].mean(), rel=1e-5)


def test_jit_syntax_level_is_checked_and_noted(caplog):
    assert (ms.STRICT, ms.COMPATIBLE, ms.LAX) == (0, 1, 2)
    ms.set_context(jit_syntax_level=ms.LAX)
    ms.set_context(mode=ms.GRAPH_MODE, jit_syntax_level=ms.STRICT)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    with pytest.raises(ValueError, match="jit_syntax_level must be ms.STRICT, ms.COMPATIBLE or ms.LAX"):
        ms.set_context(jit_syntax_level="strict")
    with pytest.raises(ValueError, match="jit_syntax_level"):
        ms.set_context(jit_syntax_level=True)


def test_import_only_module_paths():
    from minitorch_dist.train.train_thor import ConvertModelUtils, ConvertNetUtils
    from minitorch_dist.train.loss_scale_manager import FixedLossScaleManager
    from minitorch_dist.train import amp as train_amp
    from minitorch_dist.train.dataset_helper import DatasetHelper, connect_network_with_dataset
    import minitorch_dist.dataset as ds
    from minitorch_dist import amp
    assert FixedLossScaleManager is amp.FixedLossScaleManager
    assert nn.Dense in train_amp.AMP_WHITE_LIST and nn.BatchNorm2d in train_amp.AMP_BLACK_LIST
    model = object()
    assert ConvertModelUtils.convert_to_thor_model(model=model, network=None, loss_fn=None,
                                                   optimizer=nn.SGD(nn.Dense(1, 1).trainable_params())) is model
    with pytest.raises(NotImplementedError, match="no THOR optimizer"):
        ConvertNetUtils().convert_to_thor_net(nn.Dense(1, 1))
    data = ds.NumpySlicesDataset({"x": np.arange(6.0)}, shuffle=False).batch(3)
    helper = DatasetHelper(data, dataset_sink_mode=True, epoch_num=2)
    assert [b[0].asnumpy().tolist() for b in helper] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] * 2
    net = nn.Dense(1, 1)
    assert connect_network_with_dataset(net, helper) is net
    with pytest.raises(TypeError, match="DatasetHelper"):
        connect_network_with_dataset(net, data)


def test_dataset_config_settings_are_checked_and_stored():
    import minitorch_dist.dataset as ds
    before = ds.config.get_prefetch_size()
    try:
        ds.config.set_prefetch_size(4)
        assert ds.config.get_prefetch_size() == 4
        ds.config.set_enable_shared_mem(False)
        assert ds.config.get_enable_shared_mem() is False
        with pytest.raises(ValueError, match="set_prefetch_size: expected a positive int"):
            ds.config.set_prefetch_size(0)
        with pytest.raises(ValueError, match="set_numa_enable: expected a bool"):
            ds.config.set_numa_enable(1)
        ds.config.set_error_samples_mode(ds.config.ErrorSamplesMode.SKIP)
        assert ds.config.get_error_samples_mode() == "SKIP"
    finally:
        ds.config.set_prefetch_size(before)
        ds.config.set_enable_shared_mem(True)
        ds.config.set_error_samples_mode("RETURN_ERROR")


def test_dataset_config_load_reads_mindspores_json(tmp_path):
    import json
    import minitorch_dist.dataset as ds
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"prefetchSize": 8, "numParallelWorkers": 2, "seed": 11}))
    try:
        ds.config.load(str(path))
        assert (ds.config.get_prefetch_size(), ds.config.get_num_parallel_workers(),
                ds.config.get_seed()) == (8, 2, 11)
    finally:
        ds.config.set_prefetch_size(16)
        ds.config.set_num_parallel_workers(1)
        ds.config.set_seed(None)
    with pytest.raises(OSError, match="no such file"):
        ds.config.load(str(tmp_path / "missing.json"))


def test_callbacks_are_exported_at_the_top_as_in_mindspore_2():
    # resnet50_distributed_training_gpu.py: `from mindspore import LossMonitor`
    from minitorch_dist import (Callback, CheckpointConfig, LossMonitor, ModelCheckpoint,
                                RunContext, TimeMonitor)
    from minitorch_dist import train
    assert (LossMonitor, TimeMonitor, ModelCheckpoint) == \
        (train.LossMonitor, train.TimeMonitor, train.ModelCheckpoint)
    assert issubclass(LossMonitor, Callback) and CheckpointConfig and RunContext
