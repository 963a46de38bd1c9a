"""sonnx's backend on single ONNX nodes with the options SINGA's test_onnx_backend selects
(auto_pad, asymmetric pads, Split into equal parts, Shape start/end, Pad axes, narrow casts,
training-mode batch norm, ...), checked against onnx.reference (issue 27)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from minitorch_dist.singa import autograd, sonnx  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def inference():
    """ONNX nodes run as inference (SINGA's backend tests switch training off too)."""
    saved, autograd.training = autograd.training, False
    yield
    autograd.training = saved


def _model(op, inputs, n_out=1, out_types=None, **attrs):
    """One ``op`` node over the named (array) inputs, with ``n_out`` outputs."""
    names = list(inputs)
    outs = [f"y{i}" for i in range(n_out)]
    types = out_types or [None] * n_out
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(o, t if t is not None else F, None)
         for o, t in zip(outs, types)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _same(op, inputs, n_out=1, out_types=None, rtol=1e-5, **attrs):
    model = _model(op, inputs, n_out, out_types, **attrs)
    want = ReferenceEvaluator(model).run(None, inputs)
    got = sonnx.SingaBackend.run_model(model, list(inputs.values()))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=1e-6)


def x4(*shape):
    return RNG.random(shape).astype(np.float32)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("settings", [
    {"kernel_shape": [2, 2]},                                    # ONNX's default stride 1
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [3, 3], "pads": [0, 1, 2, 1]},             # asymmetric
])
def test_pooling_options(op, settings):
    x = x4(1, 2, 5, 5)
    if op == "AveragePool":
        _same(op, {"x": x}, **settings)
        return
    # onnx.reference's MaxPool mis-sizes padded outputs (AveragePool's is right), so the
    # max is checked against windows taken here
    model = _model(op, {"x": x}, **settings)
    got = sonnx.SingaBackend.run_model(model, [x])[0]
    np.testing.assert_allclose(got, _max_pool(x, settings))


def _max_pool(x, settings):
    k, s = settings["kernel_shape"][0], settings.get("strides", [1, 1])[0]
    mode = settings.get("auto_pad", "NOTSET")
    if mode == "NOTSET":
        pads = settings.get("pads", [0, 0, 0, 0])
        (top, left), (bottom, right) = pads[:2], pads[2:]
    else:
        total = max((-(-5 // s) - 1) * s + k - 5, 0)
        small, large = total // 2, total - total // 2
        top = left = small if mode == "SAME_UPPER" else large
        bottom = right = total - top
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)),
                    constant_values=-np.inf)
    rows = (padded.shape[2] - k) // s + 1
    cols = (padded.shape[3] - k) // s + 1
    return np.array([[padded[:, :, i * s:i * s + k, j * s:j * s + k].max(axis=(2, 3))
                      for j in range(cols)] for i in range(rows)]).transpose(2, 3, 0, 1)


def test_matmul_with_vectors():
    _same("MatMul", {"a": x4(3), "b": x4(3)})
    _same("MatMul", {"a": x4(3), "b": x4(2, 3, 4)})
    _same("MatMul", {"a": x4(2, 2, 3, 4), "b": x4(4)})


def test_split_into_equal_parts_and_by_count():
    _same("Split", {"x": x4(6, 2)}, n_out=3, axis=0)
    _same("Split", {"x": x4(2, 7)}, n_out=3, axis=1, num_outputs=3)     # 3, 3, 1


def test_shape_slices_pad_axes_and_onehot_out_of_range():
    _same("Shape", {"x": x4(2, 3, 4)}, out_types=[TensorProto.INT64], start=1, end=-1)
    _same("Pad", {"x": x4(2, 3), "pads": np.array([1, 2], np.int64),
                  "value": np.array(1.5, np.float32), "axes": np.array([-1], np.int64)})
    _same("OneHot", {"i": np.array([0, -1, 5], np.int64), "d": np.array(3, np.int64),
                     "v": np.array([0.0, 2.0], np.float32)})


def test_reduce_sum_noop_and_reshape_allowzero():
    _same("ReduceSum", {"x": x4(2, 3), "axes": np.zeros(0, np.int64)}, noop_with_empty_axes=1)
    _same("Reshape", {"x": np.zeros((0, 3, 4), np.float32),
                      "s": np.array([3, 4, 0], np.int64)}, allowzero=1)


def test_dropout_returns_its_mask_and_scatter_reductions():
    _same("Dropout", {"x": x4(2, 3)}, n_out=2, out_types=[F, TensorProto.BOOL])
    for reduction in ("add", "max", "mul"):
        _same("ScatterElements", {"x": x4(2, 3), "i": np.array([[0, 0, 2]], np.int64),
                                  "u": x4(1, 3)}, axis=1, reduction=reduction)


@pytest.mark.parametrize("to", [TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN,
                                TensorProto.FLOAT8E5M2, TensorProto.INT4, TensorProto.DOUBLE,
                                TensorProto.FLOAT16])
def test_casts_to_narrow_types_round_as_onnx_does(to):
    x = (RNG.standard_normal((3, 4)) * 4).astype(np.float32)
    _same("Cast", {"x": x}, out_types=[to], to=to)


def test_castlike_takes_the_type_of_a_narrow_input():
    like = helper.tensor_dtype_to_np_dtype(TensorProto.FLOAT8E4M3FN)
    _same("CastLike", {"x": x4(2, 3) * 3, "t": np.zeros(1, like)},
          out_types=[TensorProto.FLOAT8E4M3FN])


def test_batchnorm_epsilon_and_training_mode():
    c = 3
    stats = {"x": x4(2, c, 2, 2), "s": x4(c), "b": x4(c), "m": x4(c), "v": x4(c) + 0.5}
    _same("BatchNormalization", stats, epsilon=1e-2)
    _same("BatchNormalization", stats, n_out=3, training_mode=1, momentum=0.8, rtol=1e-4)


def test_sequences_and_optionals_are_refused_by_name():
    seq = helper.make_tensor_sequence_value_info("s", F, None)
    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["y"])], "g", [seq],
                              [helper.make_tensor_sequence_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(NotImplementedError, match="'s' is an ONNX sequence_type"):
        sonnx.SingaBackend.prepare(model)
