"""``ms.value_and_grad`` and ``ms.grad`` with MindSpore's semantics: positions, weights,
both, has_aux; zeros for unused weights; ``.grad`` left alone; clear errors."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, ops


def weight(array, name):
    w = ms.Parameter(Tensor(np.asarray(array, np.float64)), name=name)
    assert w.requires_grad
    return w


A = np.array([[1.0, 2.0], [3.0, -1.0]])
B = np.array([0.5, -2.0])
X = np.array([[0.3, -0.7], [1.1, 0.2], [-0.4, 0.9]])


def f_xy(x, y):
    """sum(x * y) + sum(x * x): d/dx = y + 2x, d/dy = x."""
    return (x * y).sum() + (x * x).sum()


def test_default_position_is_the_first_input():
    x, y = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    value, g = ms.value_and_grad(f_xy)(Tensor(x), Tensor(y))
    assert isinstance(g, Tensor)
    np.testing.assert_allclose(value.asnumpy(), (x * y).sum() + (x * x).sum())
    np.testing.assert_allclose(g.asnumpy(), y + 2 * x)


@pytest.mark.parametrize("position, expected", [(0, "x"), (1, "y"), (-1, "y")])
def test_int_position(position, expected):
    x, y = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    _, g = ms.value_and_grad(f_xy, grad_position=position)(Tensor(x), Tensor(y))
    np.testing.assert_allclose(g.asnumpy(), y + 2 * x if expected == "x" else x)


def test_tuple_position_gives_a_tuple():
    x, y = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    _, grads = ms.value_and_grad(f_xy, grad_position=(0, 1))(Tensor(x), Tensor(y))
    assert isinstance(grads, tuple) and len(grads) == 2
    np.testing.assert_allclose(grads[0].asnumpy(), y + 2 * x)
    np.testing.assert_allclose(grads[1].asnumpy(), x)
    _, single = ms.value_and_grad(f_xy, grad_position=(1,))(Tensor(x), Tensor(y))
    assert isinstance(single, tuple) and len(single) == 1


def test_inputs_may_be_numpy_arrays_and_are_not_modified():
    x = Tensor([1.0, 2.0])
    _, g = ms.value_and_grad(lambda t: (t * t).sum())(x)
    assert not x.requires_grad and x.grad is None
    _, g2 = ms.value_and_grad(lambda t: (t * t).sum())(np.array([1.0, 2.0]))
    np.testing.assert_allclose(g2.asnumpy(), g.asnumpy())


def test_weights_only_none_position():
    w, b = weight(A, "w"), weight(B, "b")
    fn = ms.value_and_grad(lambda x: ops.matmul(x, w).sum() + (b * b).sum(), None, [w, b])
    value, grads = fn(Tensor(X))
    assert isinstance(grads, tuple) and len(grads) == 2
    np.testing.assert_allclose(value.asnumpy(), (X @ A).sum() + (B * B).sum())
    np.testing.assert_allclose(grads[0].asnumpy(), X.T @ np.ones((3, 2)))
    np.testing.assert_allclose(grads[1].asnumpy(), 2 * B)


def test_single_tensor_as_weights():
    w = weight(A, "w")
    _, grads = ms.value_and_grad(lambda x: (x * w).sum(), None, w)(Tensor(A))
    assert isinstance(grads, tuple) and len(grads) == 1
    np.testing.assert_allclose(grads[0].asnumpy(), A)


def test_positions_and_weights_together():
    w = weight(A, "w")
    fn = ms.value_and_grad(lambda x: ops.matmul(x, w).sum(), 0, [w])
    _, (gx, gw) = fn(Tensor(X))
    np.testing.assert_allclose(gx.asnumpy(), np.ones((3, 2)) @ A.T)
    assert isinstance(gw, tuple)
    np.testing.assert_allclose(gw[0].asnumpy(), X.T @ np.ones((3, 2)))
    fn2 = ms.value_and_grad(lambda x: ops.matmul(x, w).sum(), (0,), [w])
    _, (gxs, gws) = fn2(Tensor(X))
    assert isinstance(gxs, tuple) and isinstance(gws, tuple)


def test_unused_weights_get_zeros_and_grad_is_untouched():
    used, unused = weight(A, "used"), weight(B, "unused")
    previous = Tensor(np.full(2, 7.0))
    unused.grad = previous
    _, (g_used, g_unused) = ms.value_and_grad(lambda x: (x * used).sum(), None, [used, unused])(Tensor(A))
    assert g_unused.shape == B.shape and g_unused.dtype == np.float64
    np.testing.assert_array_equal(g_unused.asnumpy(), np.zeros(2))
    np.testing.assert_allclose(g_used.asnumpy(), A)
    assert used.grad is None
    assert unused.grad is previous and previous.tolist() == [7.0, 7.0]


def test_output_that_does_not_depend_on_anything_gives_zeros():
    w = weight(B, "w")
    _, (g,) = ms.value_and_grad(lambda x: x * 2.0, None, [w])(Tensor([1.0]))
    np.testing.assert_array_equal(g.asnumpy(), [0.0, 0.0])


def test_has_aux_differentiates_only_the_first_output():
    w = weight(A, "w")

    def forward_fn(x):
        logits = ops.matmul(x, w)
        loss = (logits * logits).mean()
        return loss, logits

    grad_fn = ms.value_and_grad(forward_fn, None, [w], has_aux=True)
    (loss, logits), grads = grad_fn(Tensor(X))
    np.testing.assert_allclose(logits.asnumpy(), X @ A)
    np.testing.assert_allclose(loss.asnumpy(), ((X @ A) ** 2).mean())
    np.testing.assert_allclose(grads[0].asnumpy(), X.T @ (2 * (X @ A) / 6))


def test_outputs_are_returned_without_their_graph():
    """Regression: the returned loss used to hold the whole step's tape (and activations)."""
    w = weight(A, "w")
    (loss, logits), _ = ms.value_and_grad(lambda x: ((x * w).sum(), x * w), None, [w], has_aux=True)(
        Tensor(A))
    for out in (loss, logits):
        assert not out.requires_grad and out.grad_fn is None
    np.testing.assert_allclose(logits.asnumpy(), A * A)
    value, _ = ms.value_and_grad(lambda x: [x * 2.0, x * 3.0])(Tensor([1.0]))
    assert isinstance(value, list) and not value[0].requires_grad


def test_several_outputs_without_aux_sum_their_gradients():
    _, g = ms.value_and_grad(lambda x: ((x * 2.0).sum(), (x * x).sum()))(Tensor(np.array([1.0, 3.0])))
    np.testing.assert_allclose(g.asnumpy(), [2 + 2, 2 + 6])


def test_non_scalar_output_uses_a_ones_seed():
    _, g = ms.value_and_grad(lambda x: x * x)(Tensor(np.array([1.0, 3.0])))
    np.testing.assert_allclose(g.asnumpy(), [2.0, 6.0])


def test_grad_returns_only_gradients():
    g = ms.grad(lambda x: (x ** 3).sum())(Tensor(np.array([2.0])))
    np.testing.assert_allclose(g.asnumpy(), [12.0])
    g, aux = ms.grad(lambda x: ((x * x).sum(), x * 10), has_aux=True)(Tensor(np.array([2.0])))
    np.testing.assert_allclose(g.asnumpy(), [4.0])
    assert isinstance(aux, tuple) and aux[0].tolist() == [20.0]
    w = weight(B, "w")
    (gw,) = ms.grad(lambda x: (x * w).sum(), None, [w])(Tensor(B))
    np.testing.assert_allclose(gw.asnumpy(), B)


def test_seed_training_pattern_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((4, 5)), rng.standard_normal(5)
    w2 = rng.standard_normal((5, 3))
    x, y = rng.standard_normal((6, 4)), rng.standard_normal((6, 3))
    params = [weight(w1, "w1"), weight(b1, "b1"), weight(w2, "w2")]

    def forward_fn(data, target):
        hidden = ops.relu(ops.matmul(data, params[0]) + params[1])
        logits = ops.matmul(hidden, params[2])
        diff = logits - target
        return (diff * diff).mean(), logits

    grad_fn = ms.value_and_grad(forward_fn, None, params, has_aux=True)
    (loss, logits), grads = grad_fn(Tensor(x), Tensor(y))

    tw = [torch.tensor(a, requires_grad=True) for a in (w1, b1, w2)]
    t_logits = torch.relu(torch.tensor(x) @ tw[0] + tw[1]) @ tw[2]
    t_loss = ((t_logits - torch.tensor(y)) ** 2).mean()
    t_loss.backward()
    np.testing.assert_allclose(loss.asnumpy(), t_loss.item(), rtol=1e-12)
    np.testing.assert_allclose(logits.asnumpy(), t_logits.detach().numpy(), rtol=1e-12)
    for g, t in zip(grads, tw):
        np.testing.assert_allclose(g.asnumpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert all(p.grad is None for p in params)


# ---- errors -----------------------------------------------------------------------------
def test_both_none_is_an_error():
    with pytest.raises(ValueError, match="grad_position or weights"):
        ms.value_and_grad(f_xy, None, None)
    with pytest.raises(ValueError, match="grad_position or weights"):
        ms.grad(f_xy, None)


def test_has_aux_without_a_tuple_is_an_error():
    fn = ms.value_and_grad(lambda x: (x * x).sum(), has_aux=True)
    with pytest.raises(ValueError, match="has_aux=True needs fn to return a tuple"):
        fn(Tensor([1.0]))
    fn1 = ms.value_and_grad(lambda x: ((x * x).sum(),), has_aux=True)
    with pytest.raises(ValueError, match="at least two outputs"):
        fn1(Tensor([1.0]))


@pytest.mark.parametrize("position", ["0", 1.5, (0, "1")])
def test_bad_grad_position_type(position):
    with pytest.raises(TypeError, match="grad_position"):
        ms.value_and_grad(f_xy, position)


def test_grad_position_out_of_range():
    with pytest.raises(ValueError, match="grad_position 2 is out of range for 2"):
        ms.value_and_grad(f_xy, 2)(Tensor([1.0]), Tensor([2.0]))


def test_bad_weights():
    with pytest.raises(TypeError, match="weights must be"):
        ms.value_and_grad(f_xy, None, [np.ones(2)])


def test_fn_must_return_tensors():
    with pytest.raises(TypeError, match="fn must return Tensors"):
        ms.value_and_grad(lambda x: 3.0)(Tensor([1.0]))


def test_integer_input_cannot_be_differentiated():
    with pytest.raises(TypeError, match="floating-point"):
        ms.value_and_grad(lambda x: x * 2)(Tensor([1, 2]))


def test_grad_operation_forms_match_value_and_grad():
    """MindSpore's GradOperation: first input, all inputs, weights, both, and a sensitivity."""
    import numpy as np
    from minitorch_dist import nn, ops
    net = nn.Dense(3, 2)
    x = ms.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    weights = net.trainable_params()
    _, (gx,) = ms.value_and_grad(lambda a: net(a).sum(), (0,))(x)
    _, gw = ms.value_and_grad(lambda a: net(a).sum(), None, weights)(x)
    np.testing.assert_allclose(ops.GradOperation()(lambda a: net(a).sum())(x).asnumpy(), gx.asnumpy())
    (only,) = ops.GradOperation(get_all=True)(lambda a: net(a).sum())(x)
    np.testing.assert_allclose(only.asnumpy(), gx.asnumpy())
    by_list = ops.GradOperation(get_by_list=True)(lambda a: net(a).sum(), weights)(x)
    for a, b in zip(by_list, gw):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy())
    sens = ms.Tensor(np.full((2, 2), 1024.0, np.float32))
    scaled = ops.GradOperation(get_by_list=True, sens_param=True)(net, weights)(x, sens)
    for a, b in zip(scaled, gw):
        np.testing.assert_allclose(a.asnumpy(), 1024.0 * b.asnumpy(), rtol=1e-6)
    inputs_and_weights = ops.GradOperation(get_all=True, get_by_list=True)(lambda a: net(a).sum(), weights)(x)
    np.testing.assert_allclose(inputs_and_weights[0][0].asnumpy(), gx.asnumpy())
    with pytest.raises(ValueError, match="needs the weights"):
        ops.GradOperation(get_by_list=True)(net)
