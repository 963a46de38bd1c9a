"""nn layers: forward and gradients against PyTorch (same initial weights), parameter
registration and names, train/eval switching, and errors for bad input."""
from collections import OrderedDict

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops

torch = pytest.importorskip("torch")
F = torch.nn.functional


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def ms_grads(net, x, upstream, params=None):
    """Output of ``net(x)`` and the gradients of ``sum(out * upstream)`` w.r.t. x and params."""
    params = net.trainable_params() if params is None else params
    up = ms.Tensor(upstream)

    def objective(inp):
        return (net(inp) * up).sum()

    out = net(ms.Tensor(x)).asnumpy()
    if not params:
        _, gx = ms.value_and_grad(objective, 0)(ms.Tensor(x))
        return out, gx.asnumpy(), []
    _, (gx, gparams) = ms.value_and_grad(objective, 0, params)(ms.Tensor(x))
    return out, gx.asnumpy(), [g.asnumpy() for g in gparams]


def torch_grads(module_fn, x, upstream, params):
    tx = torch.tensor(x, requires_grad=True)
    out = module_fn(tx)
    (out * torch.tensor(upstream)).sum().backward()
    return out.detach().numpy(), tx.grad.numpy(), [p.grad.numpy() for p in params]


def to_torch(param):
    return torch.tensor(param.asnumpy(), requires_grad=True)


def assert_same(ms_result, torch_result, atol=1e-10):
    (out, gx, gps), (t_out, t_gx, t_gps) = ms_result, torch_result
    np.testing.assert_allclose(out, t_out, rtol=1e-7, atol=atol)
    np.testing.assert_allclose(gx, t_gx, rtol=1e-7, atol=atol)
    assert len(gps) == len(t_gps)
    for g, t_g in zip(gps, t_gps):
        np.testing.assert_allclose(g, t_g, rtol=1e-7, atol=atol)


# ---- Dense ---------------------------------------------------------------------------------

TORCH_ACTIVATIONS = {None: lambda y: y, "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
                     "gelu": lambda y: F.gelu(y, approximate="tanh"),
                     "softmax": lambda y: F.softmax(y, dim=-1)}


@pytest.mark.parametrize("activation", list(TORCH_ACTIVATIONS))
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)], ids=["2d", "3d", "1d"])
def test_dense_matches_torch(activation, shape):
    ms.set_seed(0)
    fc = nn.Dense(4, 3, activation=activation, dtype=ms.float64)
    w, b = to_torch(fc.weight), to_torch(fc.bias)
    x = rand(*shape)
    upstream = rand(*shape[:-1], 3, seed=1)
    assert_same(ms_grads(fc, x, upstream),
                torch_grads(lambda t: TORCH_ACTIVATIONS[activation](F.linear(t, w, b)), x, upstream, [w, b]))


def test_dense_without_bias_and_with_an_activation_cell():
    fc = nn.Dense(3, 2, has_bias=False, activation=nn.Tanh())
    assert fc.bias is None and [p.name for p in fc.trainable_params()] == ["weight"]
    x = rand(4, 3).astype(np.float32)
    np.testing.assert_allclose(fc(ms.Tensor(x)).asnumpy(), np.tanh(x @ fc.weight.asnumpy().T), rtol=1e-5)


def test_dense_default_init_is_kaiming_uniform_bounded_by_one_over_sqrt_fan_in():
    ms.set_seed(3)
    fc = nn.Dense(100, 50)
    bound = 1 / np.sqrt(100)
    w, b = fc.weight.asnumpy(), fc.bias.asnumpy()
    assert w.shape == (50, 100) and b.shape == (50,) and w.dtype == np.float32
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.9 * bound and w.std() == pytest.approx(bound / np.sqrt(3), rel=0.05)


def test_dense_wrong_input_width_is_a_clear_error():
    with pytest.raises(ValueError, match=r"Dense expected input with last dimension 4, got shape \(2, 5\)"):
        nn.Dense(4, 3)(ms.Tensor(np.zeros((2, 5), np.float32)))


def test_dense_bad_arguments():
    with pytest.raises(ValueError, match="in_channels must be a positive int"):
        nn.Dense(0, 3)
    with pytest.raises(ValueError, match="unknown activation 'swishy'"):
        nn.Dense(2, 3, activation="swishy")
    with pytest.raises(ValueError, match=r"expected \(3, 2\)"):
        nn.Dense(2, 3, weight_init=ms.Tensor(np.zeros((2, 3), np.float32)))


def test_dense_primitives_can_be_placed_and_are_named():
    fc = nn.Dense(2, 2)
    assert fc.matmul.set_device("CPU") is fc.matmul
    assert isinstance(fc.bias_add, ops.Add)
    net = nn.SequentialCell(OrderedDict(hidden=fc))
    assert fc.matmul.name == "hidden.matmul"
    assert net(ms.Tensor(np.ones((1, 2), np.float32))).shape == (1, 2)


# ---- activations and Flatten ---------------------------------------------------------------

@pytest.mark.parametrize("cell, reference", [
    (nn.ReLU(), F.relu), (nn.Sigmoid(), torch.sigmoid), (nn.Tanh(), torch.tanh),
    (nn.GELU(), lambda t: F.gelu(t, approximate="tanh")),
    (nn.GELU(approximate=False), F.gelu),
    (nn.Softmax(), lambda t: F.softmax(t, dim=-1)), (nn.Softmax(axis=0), lambda t: F.softmax(t, dim=0)),
    (nn.LogSoftmax(), lambda t: F.log_softmax(t, dim=-1)),
    (nn.LeakyReLU(), lambda t: F.leaky_relu(t, 0.2)),
], ids=["relu", "sigmoid", "tanh", "gelu", "gelu_exact", "softmax", "softmax0", "logsoftmax", "leaky"])
def test_activation_cells_match_torch(cell, reference):
    x, upstream = rand(3, 5), rand(3, 5, seed=1)
    exact_gelu = isinstance(cell, nn.GELU) and not cell.approximate   # an erfc fit good to ~1e-7
    assert_same(ms_grads(cell, x, upstream, params=[]), torch_grads(reference, x, upstream, []),
                atol=1e-7 if exact_gelu else 1e-10)


def test_get_activation_names():
    assert isinstance(nn.get_activation("ReLU"), nn.ReLU)
    relu = nn.ReLU()
    assert nn.get_activation(relu) is relu and nn.get_activation(None) is None


def test_flatten_keeps_the_batch_axis_and_back_propagates():
    x = rand(2, 3, 4, 5)
    out, gx, _ = ms_grads(nn.Flatten(), x, rand(2, 60, seed=1), params=[])
    np.testing.assert_array_equal(out, x.reshape(2, 60))
    np.testing.assert_array_equal(gx, rand(2, 60, seed=1).reshape(2, 3, 4, 5))
    assert nn.Flatten(start_dim=1, end_dim=2)(ms.Tensor(x)).shape == (2, 12, 5)
    assert nn.Flatten(start_dim=0)(ms.Tensor(x)).shape == (120,)


# ---- Conv2d --------------------------------------------------------------------------------

def _same_pads(size, kernel, stride, dilation=1):
    out = -(-size // stride)
    total = max((out - 1) * stride + dilation * (kernel - 1) + 1 - size, 0)
    return total // 2, total - total // 2


CONV_CASES = {
    "valid": dict(kernel_size=3, pad_mode="valid", has_bias=True),
    "same": dict(kernel_size=3, pad_mode="same"),
    "same_stride2_even_kernel": dict(kernel_size=4, stride=2, pad_mode="same", has_bias=True),
    "pad_int_stride2": dict(kernel_size=3, stride=2, pad_mode="pad", padding=1, has_bias=True),
    "pad_four": dict(kernel_size=(3, 2), pad_mode="pad", padding=(1, 0, 2, 1), has_bias=True),
    "dilation": dict(kernel_size=3, dilation=2, pad_mode="valid", has_bias=True),
    "group": dict(kernel_size=3, group=2, pad_mode="same", has_bias=True),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv2d_matches_torch(case):
    kw = dict(CONV_CASES[case])
    ms.set_seed(1)
    conv = nn.Conv2d(4, 6, dtype=ms.float64, **kw)
    params = [to_torch(conv.weight)] + ([to_torch(conv.bias)] if conv.has_bias else [])
    stride, dilation, group = conv.stride, conv.dilation, conv.group
    kh, kw_ = conv.kernel_size
    x = rand(2, 4, 7, 8)

    def reference(t):
        if conv.pad_mode == "same":
            top, bottom = _same_pads(7, kh, stride[0], dilation[0])
            left, right = _same_pads(8, kw_, stride[1], dilation[1])
            t = F.pad(t, (left, right, top, bottom))
        elif conv.pad_mode == "pad":
            top, bottom, left, right = conv.padding
            t = F.pad(t, (left, right, top, bottom))
        return F.conv2d(t, params[0], params[1] if conv.has_bias else None, stride=stride,
                        dilation=dilation, groups=group)

    expected_shape = reference(torch.tensor(x)).shape
    upstream = rand(*expected_shape, seed=2)
    assert_same(ms_grads(conv, x, upstream), torch_grads(reference, x, upstream, params))


def test_conv2d_defaults_are_mindsporés_same_padding_without_bias():
    conv = nn.Conv2d(3, 5, 3, stride=2)
    assert conv.pad_mode == "same" and conv.bias is None and conv.weight.shape == (5, 3, 3, 3)
    assert conv(ms.Tensor(np.zeros((1, 3, 7, 8), np.float32))).shape == (1, 5, 4, 4)
    assert [p.name for p in conv.trainable_params()] == ["weight"]
    bound = 1 / np.sqrt(3 * 9)
    assert np.abs(conv.weight.asnumpy()).max() <= bound


def test_conv2d_wrong_channel_count_names_expected_and_given():
    conv = nn.Conv2d(3, 8, 3)
    with pytest.raises(ValueError, match=r"Conv2d expected NCHW input with 3 channels, got shape "
                                         r"\(2, 4, 5, 5\) \(4 channels\)"):
        conv(ms.Tensor(np.zeros((2, 4, 5, 5), np.float32)))
    with pytest.raises(ValueError, match=r"got shape \(4, 5, 5\)"):
        conv(ms.Tensor(np.zeros((4, 5, 5), np.float32)))


def test_conv2d_bad_arguments():
    with pytest.raises(ValueError, match=r"pad_mode must be one of \['same', 'valid', 'pad'\], got 'full'"):
        nn.Conv2d(3, 8, 3, pad_mode="full")
    with pytest.raises(ValueError, match="padding=1 needs pad_mode='pad'"):
        nn.Conv2d(3, 8, 3, padding=1)
    with pytest.raises(ValueError, match=r"divisible by group \(2\)"):
        nn.Conv2d(3, 8, 3, group=2)
    with pytest.raises(ValueError, match="kernel_size must be a positive int"):
        nn.Conv2d(3, 8, 0)
    with pytest.raises(ValueError, match="padding must hold non-negative ints"):
        nn.Conv2d(3, 8, 3, pad_mode="pad", padding=(1, -1, 0, 0))
    with pytest.raises(ValueError, match="data_format='NCHW'"):
        nn.Conv2d(3, 8, 3, data_format="NHWC")


# ---- pooling -------------------------------------------------------------------------------

def _torch_same_pool(kind, kernel, stride, height, width):
    top, bottom = _same_pads(height, kernel, stride)
    left, right = _same_pads(width, kernel, stride)
    pads = (left, right, top, bottom)

    def pool(t):
        if kind == "max":
            return F.max_pool2d(F.pad(t, pads, value=-np.inf), kernel, stride)
        summed = F.avg_pool2d(F.pad(t, pads), kernel, stride)      # padding left out of the mean:
        counts = F.avg_pool2d(F.pad(torch.ones_like(t), pads), kernel, stride)
        return summed / counts
    return pool


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("kernel, stride, pad_mode", [(2, 2, "valid"), (3, 1, "valid"), (3, 2, "valid"),
                                                      (3, 2, "same"), (2, 1, "same")])
def test_pooling_matches_torch(kind, kernel, stride, pad_mode):
    cell = (nn.MaxPool2d if kind == "max" else nn.AvgPool2d)(kernel, stride, pad_mode)
    x = rand(2, 3, 7, 6)
    if pad_mode == "valid":
        reference = (lambda t: F.max_pool2d(t, kernel, stride)) if kind == "max" else \
            (lambda t: F.avg_pool2d(t, kernel, stride))
    else:
        reference = _torch_same_pool(kind, kernel, stride, 7, 6)
    upstream = rand(*reference(torch.tensor(x)).shape, seed=3)
    assert_same(ms_grads(cell, x, upstream, params=[]), torch_grads(reference, x, upstream, []))


def test_pooling_defaults_and_errors():
    pool = nn.MaxPool2d()
    assert pool.kernel_size == (1, 1) and pool.stride == (1, 1) and pool.pad_mode == "valid"
    with pytest.raises(ValueError, match="MaxPool2d: pad_mode must be 'valid' or 'same', got 'pad'"):
        nn.MaxPool2d(2, 2, pad_mode="pad")
    with pytest.raises(ValueError, match=r"AvgPool2d expected NCHW input \(4 dimensions\), "
                                         r"got shape \(3, 4\)"):
        nn.AvgPool2d(2, 2)(ms.Tensor(np.zeros((3, 4), np.float32)))


# ---- BatchNorm -----------------------------------------------------------------------------

def _torch_bn(cell, cls=torch.nn.BatchNorm2d):
    ref = cls(cell.num_features, eps=cell.eps, momentum=1 - cell.momentum).double()
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(cell.gamma.asnumpy()))
        ref.bias.copy_(torch.tensor(cell.beta.asnumpy()))
    return ref


def test_batchnorm2d_training_matches_torch_including_moving_statistics():
    ms.set_seed(2)
    bn = nn.BatchNorm2d(3, momentum=0.8, gamma_init="normal", beta_init="normal", dtype=ms.float64)
    ref = _torch_bn(bn)   # torch momentum 0.2: the weight of the new batch
    for step in range(3):
        x = rand(4, 3, 5, 5, seed=step) * (step + 1) + step
        upstream = rand(4, 3, 5, 5, seed=10 + step)
        ref.zero_grad()
        assert_same(ms_grads(bn, x, upstream),
                    torch_grads(ref, x, upstream, [ref.weight, ref.bias]), atol=1e-9)
    # each ms_grads call runs the cell twice (value, then value_and_grad): torch saw 3 batches
    ms.set_seed(2)
    bn2 = nn.BatchNorm2d(3, momentum=0.8, dtype=ms.float64)
    ref2 = _torch_bn(bn2)
    for step in range(3):
        x = rand(4, 3, 5, 5, seed=step) * (step + 1) + step
        bn2(ms.Tensor(x))
        ref2(torch.tensor(x))
    np.testing.assert_allclose(bn2.moving_mean.asnumpy(), ref2.running_mean.numpy(), rtol=1e-10)
    np.testing.assert_allclose(bn2.moving_variance.asnumpy(), ref2.running_var.numpy(), rtol=1e-10)
    assert not np.allclose(bn2.moving_mean.asnumpy(), 0)


def test_batchnorm2d_eval_mode_uses_the_moving_statistics():
    ms.set_seed(3)
    bn = nn.BatchNorm2d(2, gamma_init="normal", beta_init="normal", dtype=ms.float64)
    ref = _torch_bn(bn)
    for step in range(4):
        x = rand(3, 2, 4, 4, seed=step) * 2 + 1
        bn(ms.Tensor(x))
        ref(torch.tensor(x))
    bn.set_train(False)
    ref.eval()
    x, upstream = rand(3, 2, 4, 4, seed=9), rand(3, 2, 4, 4, seed=8)
    before = bn.moving_mean.asnumpy()
    assert_same(ms_grads(bn, x, upstream), torch_grads(ref, x, upstream, [ref.weight, ref.bias]))
    np.testing.assert_array_equal(bn.moving_mean.asnumpy(), before)   # eval does not update them


def test_batchnorm_use_batch_statistics_overrides_the_mode():
    x = ms.Tensor(rand(4, 2, 3, 3).astype(np.float32) * 3 + 5)
    forced = nn.BatchNorm2d(2, use_batch_statistics=True).set_train(False)
    out = forced(x).asnumpy()
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    moving = nn.BatchNorm2d(2, use_batch_statistics=False)   # training mode, moving statistics
    np.testing.assert_allclose(moving(x).asnumpy(), x.asnumpy() / np.sqrt(1 + 1e-5), rtol=1e-5)
    np.testing.assert_array_equal(moving.moving_mean.asnumpy(), 0)


def test_batchnorm_parameters_names_and_trainability():
    bn = nn.BatchNorm2d(4)
    names = [(p.name, p.requires_grad) for p in bn.get_parameters()]
    assert names == [("gamma", True), ("beta", True), ("moving_mean", False), ("moving_variance", False)]
    assert [p.name for p in bn.trainable_params()] == ["gamma", "beta"]
    assert nn.BatchNorm2d(4, affine=False).trainable_params() == []


def test_batchnorm1d_matches_torch():
    ms.set_seed(4)
    bn = nn.BatchNorm1d(3, gamma_init="normal", dtype=ms.float64)
    ref = _torch_bn(bn, torch.nn.BatchNorm1d)
    x, upstream = rand(6, 3), rand(6, 3, seed=1)
    assert_same(ms_grads(bn, x, upstream), torch_grads(ref, x, upstream, [ref.weight, ref.bias]))


def test_batchnorm_bad_input_and_arguments():
    with pytest.raises(ValueError, match=r"BatchNorm2d expected 4-D input with 3 channels on axis 1, "
                                         r"got shape \(2, 4, 5, 5\)"):
        nn.BatchNorm2d(3)(ms.Tensor(np.zeros((2, 4, 5, 5), np.float32)))
    with pytest.raises(ValueError, match="momentum must be in"):
        nn.BatchNorm2d(3, momentum=1.5)
    with pytest.raises(ValueError, match="eps must be a positive number"):
        nn.BatchNorm2d(3, eps=0)


# ---- Dropout and set_train -----------------------------------------------------------------

def test_dropout_is_active_only_in_training_mode():
    ms.set_seed(5)
    drop = nn.Dropout(keep_prob=0.75)
    x = ms.Tensor(np.ones((200, 50), np.float32))
    out = drop(x).asnumpy()
    kept = out != 0
    assert 0.70 < kept.mean() < 0.80
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    drop.set_train(False)
    assert drop(x) is x


def test_dropout_gradient_follows_the_mask():
    ms.set_seed(6)
    drop = nn.Dropout(p=0.5)
    x = ms.Tensor(np.full((40, 30), 3.0, np.float32))

    def objective(t):
        dropped = drop(t)
        return dropped.sum(), dropped

    (_, dropped), grad = ms.value_and_grad(objective, has_aux=True)(x)
    # d(sum(dropout(x)))/dx is the scaled mask of that very call: dropped / x
    np.testing.assert_allclose(grad.asnumpy(), dropped.asnumpy() / 3.0, rtol=1e-6)
    assert set(np.unique(grad.asnumpy()).tolist()) == {0.0, 2.0}


def test_dropout_arguments():
    assert nn.Dropout(p=0.1).keep_prob == pytest.approx(0.9)
    assert nn.Dropout(keep_prob=0.3).p == pytest.approx(0.7)
    with pytest.raises(ValueError, match=r"p \(the probability of dropping\) must be in \[0, 1\)"):
        nn.Dropout(p=1.0)
    with pytest.raises(ValueError, match=r"keep_prob must be in \(0, 1\]"):
        nn.Dropout(keep_prob=0.0)
    x = ms.Tensor(np.ones(4, np.float32))
    assert nn.Dropout(p=0.0)(x) is x


def test_set_train_toggles_nested_dropout_and_batchnorm():
    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(4)
            self.drop = nn.Dropout(p=0.5)

        def construct(self, x):
            return self.drop(self.bn(x))

    net = nn.SequentialCell(nn.Dense(4, 4), Block())
    x = ms.Tensor(rand(16, 4).astype(np.float32))
    net.set_train(False)
    assert not net[1].drop.training and not net[1].bn.training
    np.testing.assert_array_equal(net(x).asnumpy(), net(x).asnumpy())    # deterministic in eval
    np.testing.assert_array_equal(net[1].bn.moving_mean.asnumpy(), 0)    # no statistics update
    net.set_train(True)
    assert net[1].drop.training
    out = net(x).asnumpy()
    assert (out == 0).mean() > 0.3
    assert not np.allclose(net[1].bn.moving_mean.asnumpy(), 0)


# ---- containers and parameter registration -------------------------------------------------

def test_sequential_cell_names_indexing_and_append():
    seq = nn.SequentialCell([nn.Dense(4, 3), nn.ReLU()])
    seq.append(nn.Dense(3, 2))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Dense) and isinstance(seq[1], nn.ReLU)
    assert [n for n, _ in seq.parameters_and_names()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = ms.Tensor(rand(5, 4).astype(np.float32))
    manual = seq[2](seq[1](seq[0](x)))
    np.testing.assert_allclose(seq(x).asnumpy(), manual.asnumpy(), rtol=1e-6)
    head = seq[:2]
    assert isinstance(head, nn.SequentialCell) and len(head) == 2
    del seq[1]
    assert [n for n, _ in seq.parameters_and_names()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    with pytest.raises(IndexError, match="index 5 is out of range for 2 cells"):
        seq[5]
    with pytest.raises(TypeError, match="SequentialCell holds Cells, got int"):
        seq.append(3)


def test_sequential_cell_from_ordered_dict_keeps_the_names():
    seq = nn.SequentialCell(OrderedDict([("fc", nn.Dense(2, 2)), ("act", nn.ReLU()),
                                         ("out", nn.Dense(2, 1))]))
    assert [n for n, _ in seq.parameters_and_names()] == ["fc.weight", "fc.bias", "out.weight", "out.bias"]
    del seq[1]
    assert list(seq.name_cells()) == ["fc", "out"]


def test_cell_list_append_extend_insert_and_iteration():
    blocks = nn.CellList([nn.Dense(2, 2)])
    blocks.append(nn.Dense(2, 3))
    blocks.extend([nn.ReLU(), nn.Dense(3, 1)])
    blocks.insert(1, nn.Tanh())
    assert [type(c).__name__ for c in blocks] == ["Dense", "Tanh", "Dense", "ReLU", "Dense"]
    assert [n for n, _ in blocks.parameters_and_names()] == \
        ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    blocks[1] = nn.Sigmoid()
    assert isinstance(blocks[1], nn.Sigmoid) and len(blocks) == 5
    with pytest.raises(NotImplementedError, match="CellList is a container"):
        blocks(ms.Tensor([1.0]))
    with pytest.raises(TypeError, match="expects an iterable of Cells"):
        blocks.extend(nn.ReLU())


def test_nested_names_shared_parameters_and_primitive_names():
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            shared = nn.Dense(3, 3)
            self.body = nn.SequentialCell(shared, nn.ReLU(), shared)   # the same layer twice
            self.heads = nn.CellList([nn.Dense(3, 1), nn.Dense(3, 2)])
            self.scale = ms.Parameter(ms.Tensor([1.0]))
            self.tied = nn.Dense(3, 3)
            self.tied.weight = self.body[0].weight                      # one Parameter, two cells

        def construct(self, x):
            h = self.tied(self.body(x))
            return self.heads[0](h) * self.scale, self.heads[1](h)

    net = Net()
    names = [n for n, _ in net.parameters_and_names()]
    assert names == ["scale", "body.0.weight", "body.0.bias", "heads.0.weight", "heads.0.bias",
                     "heads.1.weight", "heads.1.bias", "tied.bias"]
    params = net.trainable_params()
    assert len(params) == len({id(p) for p in params}) == 8
    assert net.body[0].matmul.name == "body.0.matmul" and net.heads[1].matmul.name == "heads.1.matmul"
    # gradients of the shared weight add up over its three uses
    x = ms.Tensor(rand(2, 3).astype(np.float32))
    _, grads = ms.value_and_grad(lambda t: net(t)[0].sum() + net(t)[1].sum(), None, params)(x)
    assert len(grads) == 8 and all(g.shape == p.shape for g, p in zip(grads, params))


# ---- embeddings ----------------------------------------------------------------------------

def test_embedding_lookup_forward_and_sparse_gradient_match_torch():
    ms.set_seed(7)
    emb = nn.EmbeddingLookup(10, 4, param_init="normal", target="CPU")
    ids = np.array([[1, 3, 3], [9, 0, 1]])
    table = emb.embedding_table.asnumpy()
    upstream = rand(2, 3, 4, seed=1).astype(np.float32)
    out = emb(ms.Tensor(ids))
    np.testing.assert_array_equal(out.asnumpy(), table[ids])
    _, (grad,) = ms.value_and_grad(lambda i: (emb(i) * ms.Tensor(upstream)).sum(), None,
                                   [emb.embedding_table])(ms.Tensor(ids))
    assert isinstance(grad, ms.RowTensor)
    t_table = torch.tensor(table, requires_grad=True)
    (F.embedding(torch.tensor(ids), t_table) * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(grad.to_dense().asnumpy(), t_table.grad.numpy(), rtol=1e-6)


def test_embedding_lookup_placement_and_names():
    emb = nn.EmbeddingLookup(8, 2, target="CPU")
    assert emb.embedding_table.device.is_host and emb.lookup.primitive_target == "CPU"
    assert [p.name for p in emb.trainable_params()] == ["embedding_table"]
    dense = nn.EmbeddingLookup(8, 2, target="DEVICE", sparse=False)
    assert dense.lookup.primitive_target is None
    assert dense.embedding_table.device is ms.get_device(None)
    _, (grad,) = ms.value_and_grad(lambda i: dense(i).sum(), None, [dense.embedding_table])(ms.Tensor([1, 1]))
    assert isinstance(grad, ms.Tensor) and grad.asnumpy()[1].tolist() == [2.0, 2.0]
    net = nn.SequentialCell(OrderedDict(emb=emb))
    assert [n for n, _ in net.parameters_and_names()] == ["emb.embedding_table"]


def test_embedding_lookup_max_norm_clips_long_rows():
    emb = nn.EmbeddingLookup(3, 2, param_init=ms.Tensor(np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]],
                                                                  np.float32)), max_norm=1.0)
    out = emb(ms.Tensor([0, 1, 2])).asnumpy()
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]], rtol=1e-6)


def test_embedding_lookup_errors():
    emb = nn.EmbeddingLookup(5, 2)
    with pytest.raises(IndexError, match="5"):
        emb(ms.Tensor([0, 5]))
    with pytest.raises(TypeError, match="ids must be integer"):
        emb(ms.Tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="target='CPU' needs sparse=True"):
        nn.EmbeddingLookup(5, 2, target="CPU", sparse=False)
    with pytest.raises(ValueError, match="target must be 'CPU' or 'DEVICE'"):
        nn.EmbeddingLookup(5, 2, target="TPU")
    with pytest.raises(ValueError, match="slice_mode must be one of"):
        nn.EmbeddingLookup(5, 2, slice_mode="rows")
    with pytest.raises(ValueError, match="max_norm must be a positive number"):
        nn.EmbeddingLookup(5, 2, max_norm=-1.0)


def test_embedding_matches_torch_with_a_dense_gradient():
    ms.set_seed(8)
    emb = nn.Embedding(6, 3, padding_idx=2)
    table = emb.embedding_table.asnumpy()
    assert np.all(table[2] == 0) and not np.all(table == 0)
    ids = np.array([[2, 5], [5, 0]])
    upstream = rand(2, 2, 3, seed=1).astype(np.float32)
    out = emb(ms.Tensor(ids))
    np.testing.assert_array_equal(out.asnumpy(), table[ids])
    _, (grad,) = ms.value_and_grad(lambda i: (emb(i) * ms.Tensor(upstream)).sum(), None,
                                   emb.trainable_params())(ms.Tensor(ids))
    t_table = torch.tensor(table, requires_grad=True)
    (F.embedding(torch.tensor(ids), t_table) * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(grad.asnumpy(), t_table.grad.numpy(), rtol=1e-6)


def test_embedding_errors():
    emb = nn.Embedding(4, 2)
    with pytest.raises(IndexError, match=r"id -1 is out of range for a table of 4 rows"):
        emb(ms.Tensor([-1, 0]))
    with pytest.raises(IndexError, match="4"):
        emb(ms.Tensor([0, 4]))
    with pytest.raises(ValueError, match=r"padding_idx must be None or an int in \[0, 4\)"):
        nn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(TypeError, match="must be an integer type"):
        nn.Embedding(4, 2, dtype=ms.float32)


def test_host_embedding_feeds_a_device_network(virtual_gpu):
    ms.set_context(device_target="GPU")
    ms.set_seed(9)
    emb = nn.EmbeddingLookup(20, 4, target="CPU")
    fc = nn.Dense(4, 1)
    assert emb.embedding_table.device.is_host and fc.weight.device is virtual_gpu
    ids = ms.Tensor(np.array([[1, 2], [3, 1]]), device="CPU")
    ms.reset_transfer_stats()
    _, (g_table, g_weight) = ms.value_and_grad(lambda i: fc(emb(i)).sum(), None,
                                               [emb.embedding_table, fc.weight])(ids)
    assert isinstance(g_table, ms.RowTensor) and g_table.device.is_host
    assert g_weight.device is virtual_gpu
    assert emb.lookup.device_used.is_host and fc.matmul.device_used is virtual_gpu
    # only the 4 looked-up rows (4 x 4 float32) cross the bus, and their gradient comes back
    stats = ms.transfer_stats()
    assert stats["host_to_device"] == 64 and stats["device_to_host"] == 64
    on_device = nn.EmbeddingLookup(20, 4, target="DEVICE")
    assert on_device.embedding_table.device is virtual_gpu and on_device(ids).device is virtual_gpu

