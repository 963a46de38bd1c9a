"""SINGA's ``tensor`` module functions and Tensor methods, ``initializer``, optimizer states,
``lr_value`` and SINGA's optimizer semantics, checked against NumPy formulas."""
import numpy as np
import pytest

from minitorch_dist.singa import autograd, device, initializer, layer, opt, tensor
from minitorch_dist.singa.unsupported import SingaNotSupported

A = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], np.float32)


def T(a):
    return tensor.from_numpy(np.asarray(a, np.float32))


def test_arithmetic_and_methods_return_facade_tensors():
    t = T(A)
    for r in (t + 1, 2 - t, t * t, t / 2, -t, t.reshape((3, 2)), t.transpose(), t.T,
              t.copy(), t.deepcopy(), t.repeat(2, 0)):
        assert isinstance(r, tensor.Tensor) and hasattr(r, "creator")
    assert tensor.to_numpy(t.reshape((3, 2))).tolist() == A.reshape(3, 2).tolist()
    assert tensor.to_numpy(t < 2).tolist() == (A < 2).astype(float).tolist()
    assert tensor.to_numpy(t >= 3).dtype == np.float32
    assert tensor.to_numpy(t // 2).tolist() == np.floor(A / 2).tolist()
    assert t.l1() == pytest.approx(np.abs(A).mean())
    assert t.l2() == pytest.approx(np.sqrt((A ** 2).sum()) / np.sqrt(A.size))
    assert not t.is_transpose() and not t.is_dummy()
    assert tensor.product((2, 3)) == 6 and tensor.sizeof(tensor.float32) == 4
    m = T(np.zeros((2, 3)))
    m.add_row(T([1.0, 2.0, 3.0]))
    m.mult_column(T([2.0, 3.0]))
    assert tensor.to_numpy(m).tolist() == [[2.0, 4.0, 6.0], [3.0, 6.0, 9.0]]
    with pytest.raises(AssertionError):
        t.reshape((4, 2))


def test_module_functions_match_numpy():
    t = T(A)
    np.testing.assert_allclose(tensor.to_numpy(tensor.mult(t, T(A.T))), A @ A.T)
    np.testing.assert_allclose(tensor.to_numpy(tensor.exp(t)), np.exp(A), rtol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(tensor.square(t)), A ** 2)
    np.testing.assert_allclose(tensor.to_numpy(tensor.sum(t, 1)), A.sum(1))
    assert tensor.to_numpy(tensor.sum(t)).tolist() == [A.sum()]
    np.testing.assert_allclose(tensor.to_numpy(tensor.average(t, 0)), A.mean(0))
    np.testing.assert_allclose(tensor.to_numpy(tensor.pow(tensor.abs(t), 2.0)), A ** 2)
    e = np.exp(A - A.max(1, keepdims=True))
    np.testing.assert_allclose(tensor.to_numpy(tensor.softmax(t)), e / e.sum(1, keepdims=True),
                               rtol=1e-6)
    assert tensor.to_numpy(tensor.lt(t, 0)).tolist() == (A < 0).astype(float).tolist()
    np.testing.assert_allclose(tensor.to_numpy(tensor.eltwise_mult(t, t)), A * A)
    np.testing.assert_allclose(tensor.to_numpy(tensor.einsum("ij,kj->ik", t, t)), A @ A.T)
    np.testing.assert_allclose(tensor.to_numpy(tensor.tensordot(t, T(A.T), 1)), A @ A.T)
    np.testing.assert_allclose(tensor.to_numpy(tensor.concatenate([t, t], 0)),
                               np.concatenate([A, A]))
    y = T(np.ones((2, 3)))
    tensor.axpy(2.0, t, y)
    np.testing.assert_allclose(tensor.to_numpy(y), 1 + 2 * A)
    c = T(np.ones((2, 2)))
    tensor.mult(t, T(A.T), c, alpha=2.0, beta=3.0)
    np.testing.assert_allclose(tensor.to_numpy(c), 2 * A @ A.T + 3)
    assert tensor.sum_columns(t).shape == (2, 1) and tensor.sum_rows(t).shape == (1, 3)
    r = tensor.random((3, 4))
    assert r.shape == (3, 4) and 0 <= tensor.to_numpy(r).min() and tensor.to_numpy(r).max() < 1
    assert tensor.to_numpy(tensor.log(T([1.0]))).tolist() == [0.0]


@pytest.mark.parametrize("name, shape, std, limit", [
    ("he_normal", (40, 90), np.sqrt(2 / 40), None),
    ("he_uniform", (30, 50, 4, 8), None, np.sqrt(6 / (50 * 32))),
    ("glorot_normal", (40, 90), np.sqrt(2 / 130), None),
    ("glorot_uniform", (40, 90), None, np.sqrt(6 / 130)),
    ("lecun_normal", (40, 90), np.sqrt(1 / 40), None),
    ("lecun_uniform", (40, 90), None, np.sqrt(3 / 40)),
])
def test_initializers_follow_singas_fans(name, shape, std, limit):
    t = tensor.Tensor(shape)
    getattr(initializer, name)(t)
    values = tensor.to_numpy(t)
    if std is not None:
        assert values.std() == pytest.approx(std, rel=0.1)
    else:
        assert values.max() <= limit and values.max() == pytest.approx(limit, rel=0.1)


def test_eye_and_orthogonal():
    t = tensor.Tensor((3, 3))
    initializer.orthogonal(t)
    q = tensor.to_numpy(t)
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-5)
    with pytest.raises(ValueError, match="2-D"):
        initializer.eye(tensor.Tensor((2, 2, 2)))


def test_lr_value_states_and_decay_schedules():
    sgd = opt.SGD(lr=opt.ExponentialDecay(0.1, 2, 0.5, True))
    seen = []
    for _ in range(5):
        seen.append(float(tensor.to_numpy(sgd.lr_value)[0]))
        sgd.step()
    np.testing.assert_allclose(seen, [0.1, 0.1, 0.05, 0.05, 0.025], rtol=1e-6)
    assert sgd.get_states() == {"step_counter": 5.0}
    sgd.set_states({"step_counter": 1})
    assert tensor.to_numpy(sgd.step_counter).tolist() == [1.0]
    assert float(tensor.to_numpy(sgd.lr_value)[0]) == pytest.approx(0.1)
    with pytest.raises(SingaNotSupported, match="set_states"):
        sgd.set_states({"moments": 0})
    assert device.get_default_device().id() == -1


def test_backward_then_optimizer_on_the_same_loss_and_a_changed_parameter_set():
    autograd.training = True
    fc = layer.Linear(3)
    x, t = T(np.ones((2, 4))), T(np.zeros((2, 3)))
    sgd = opt.SGD(0.1)
    loss = autograd.mse_loss(fc(x), t)
    pairs = {p.name: tensor.to_numpy(g) for p, g in autograd.backward(loss)}
    w_before = tensor.to_numpy(fc.W)
    sgd(loss)                                  # SINGA: the same loss again
    np.testing.assert_allclose(tensor.to_numpy(fc.W), w_before - 0.1 * pairs["W"], rtol=1e-6)
    other = layer.Linear(3)                    # the layers swapped (e.g. for LoRA)
    loss = autograd.mse_loss(other(x), t)
    sgd(loss)
    assert sgd.get_states()["step_counter"] == 2.0


def test_distopt_low_level_calls_reduce_over_two_ranks():
    from minitorch_dist.communication import run_ranks

    def job(comm):
        sgd = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm)
        rank = sgd.global_rank
        g = T(np.full((2, 3), rank + 1.0))
        sgd.fused_all_reduce([g.data], send=False)
        sgd.fused_all_reduce([g.data])                # queued twice, reduced once
        half = T(np.full((2,), 0.5 * (rank + 1)))
        sgd.all_reduce_half(half.data)
        sparse = T([[0.01, 2.0 * (rank + 1)]])
        acc = T([[0.0, 0.0]])
        sgd.sparsification(sparse.data, acc.data, 0.5, False)
        top = T([3.0, -1.0, 0.2])
        sgd.sparsification(top.data, None, 1 / 3, True)
        p = T(np.full((2, 3), 10.0))
        sgd.update(p, g)
        return (tensor.to_numpy(g), tensor.to_numpy(half), tensor.to_numpy(sparse),
                tensor.to_numpy(acc), tensor.to_numpy(top), tensor.to_numpy(p))

    g, half, sparse, acc, top, p = run_ranks(2, job)[0]
    assert (g == 3.0).all() and half.tolist() == [1.5, 1.5]
    assert sparse.tolist() == [[0.0, 6.0]] and np.allclose(acc, [[0.01, 0.0]])
    assert top.tolist() == [6.0, 0.0, 0.0]
    np.testing.assert_allclose(p, 10 - 0.1 * 3.0 / 2)
