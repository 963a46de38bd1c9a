"""Weight gradients computed straight into their bucket slots (issue 29): an observer's
``gradient_slot`` offers memory, ``MatMul``'s backward writes its product there, scaled by an
exact power of two, and nothing is copied. The bits must be those of the copy path; a slot is
offered only where the node's gradient is the whole of the target's."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.autograd import run_backward
from minitorch_dist.backward_observer import BackwardObserver
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistOpt
from minitorch_dist.parallel.data_parallel.buckets import BucketedAllreduce, BucketExchange

TIMEOUT = 30


class Offer(BackwardObserver):
    """Offers a fresh array (times ``scale``) for every target; records what it was asked."""

    def __init__(self, scale=0.25, dtype=None, shape=None, array_type=None, fortran=False):
        self.scale, self.dtype, self.shape, self.array_type = scale, dtype, shape, array_type
        self.fortran = fortran      # memory in the other order: the shape fits, the layout not
        self.offered, self.final = {}, {}

    def gradient_slot(self, target):
        array = np.full(self.shape or target.shape, np.nan, self.dtype or target.dtype,
                        order="F" if self.fortran else "C")
        if self.array_type is not None:
            array = array.view(self.array_type)
        self.offered[id(target)] = array
        return array, self.scale

    def on_gradient_final(self, target, grad):
        self.final[id(target)] = grad


@pytest.fixture
def puts(monkeypatch):
    """One entry per ``BucketExchange.put``: whether the gradient was in its slot already."""
    seen = []
    original = BucketExchange.put

    def put(self, pos, grad):
        seen.append(grad is self.slots[pos][1])
        return original(self, pos, grad)
    monkeypatch.setattr(BucketExchange, "put", put)
    return seen


def _equal_to_the_copy_path(world, train, with_slots, puts, monkeypatch):
    """``train`` again with every slot refused: each rank's parameters must be
    ``with_slots``'s, bit for bit, and no gradient may have been in its slot."""
    monkeypatch.setattr(BucketExchange, "slot_for", lambda self, pos: None)
    del puts[:]
    copied = run_ranks(world, train, timeout=TIMEOUT)
    assert True not in puts
    for mine, theirs in zip(with_slots, copied):
        for a, b in zip(mine, theirs):
            np.testing.assert_array_equal(a, b)


def leaf(rng, shape, dtype=np.float32):
    return ms.Tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)


def plain_gradients(loss_fn, targets):
    return run_backward([loss_fn()], [np.ones((), np.float32)], targets=targets)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_writes_both_gradients_into_their_slots_with_the_scaled_bits(ta, tb):
    rng = np.random.default_rng(0)
    a = leaf(rng, (7, 5) if ta else (5, 7))
    b = leaf(rng, (3, 7) if tb else (7, 3))
    matmul = ops.MatMul(transpose_a=ta, transpose_b=tb)

    def loss():
        return (matmul(a, b) * 1.5).sum()
    expected = plain_gradients(loss, [a, b])
    offer = Offer(scale=0.25)
    got = run_backward([loss()], [np.ones((), np.float32)], targets=[a, b], observer=offer)
    for target, grad, want in zip((a, b), got, expected):
        assert grad is offer.offered[id(target)]          # computed there, not copied
        assert offer.final[id(target)] is grad
        np.testing.assert_array_equal(grad, want * np.float32(0.25))   # bit for bit


def test_no_slot_for_a_weight_used_twice_a_root_or_an_intermediate():
    rng = np.random.default_rng(1)
    x, w, v = leaf(rng, (4, 6)), leaf(rng, (6, 6)), leaf(rng, (6, 2))
    h = ops.matmul(ops.matmul(x, w), w)              # w consumed by two nodes
    out = ops.matmul(h, v)
    offer = Offer()
    roots, seeds = [out.sum(), v], [np.ones((), np.float32), np.ones((6, 2), np.float32)]
    got = run_backward(roots, seeds, targets=[w, v, h], observer=offer, retain_graph=True)
    # w: two consumers; v: also a root (its gradient starts there); h: not a leaf
    assert offer.offered == {}
    for grad, want in zip(got, run_backward(roots, seeds, targets=[w, v, h])):
        np.testing.assert_array_equal(grad, want)


def test_the_slots_are_withdrawn_after_the_call():
    rng = np.random.default_rng(2)
    x, w = leaf(rng, (4, 6)), leaf(rng, (6, 3))
    product = ops.matmul(x, w)
    node = product.grad_fn
    y = product.sum()
    offer = Offer()
    first = run_backward([y], [np.ones((), np.float32)], targets=[w], observer=offer,
                         retain_graph=True)[0]
    assert first is offer.offered[id(w)] and node.ctx.grad_slots is None
    again = run_backward([y], [np.ones((), np.float32)], targets=[w])[0]   # no observer
    assert again is not first
    np.testing.assert_array_equal(first, again * np.float32(0.25))


class OtherModule(np.ndarray):
    """Stands for another device's array type (a CuPy array beside NumPy's)."""


@pytest.mark.parametrize("case", ["shape", "dtype", "float16", "array type"])
def test_a_slot_that_does_not_fit_is_left_and_the_gradient_copied(case):
    rng = np.random.default_rng(3)
    dtype = np.float16 if case == "float16" else np.float32
    x, w = leaf(rng, (4, 6), dtype), leaf(rng, (6, 3), dtype)
    offer = Offer(shape=(3, 6) if case == "shape" else None,
                  dtype=np.float64 if case == "dtype" else None,
                  array_type=OtherModule if case == "array type" else None)
    grad = run_backward([ops.matmul(x, w).sum()], [np.ones((), dtype)], targets=[w],
                        observer=offer)[0]
    assert grad is not offer.offered[id(w)] and np.isnan(offer.offered[id(w)]).all()
    np.testing.assert_array_equal(grad, plain_gradients(lambda: ops.matmul(x, w).sum(), [w])[0])


@pytest.mark.parametrize("prescale, half, offered", [
    (0.25, False, True), (1.0, False, True), (1 / 3, False, False), (0.25, True, False)])
def test_the_exchange_offers_a_slot_only_where_the_scale_is_exact(prescale, half, offered):
    params = [ms.Parameter(ms.Tensor(np.ones((4, 3), np.float32)), name="w")]
    exchange = BucketExchange(BucketedAllreduce(None, buff_size=1024), params, threshold=100,
                              half=half, prescale=prescale, launch=False)
    slot = exchange.slot_for(0)
    assert (slot is not None) == offered
    if offered:
        assert slot[0] is exchange.slots[0][1] and slot[1] == prescale
        exchange.put(0, slot[0])             # already in place: recorded, not written again
        assert 0 in exchange.filled and exchange.slot_for(0) is None


def _dense_params(rank):
    rng = np.random.default_rng(rank)
    return [ms.Parameter(ms.Tensor(rng.standard_normal(s).astype(np.float32) * 0.3), name=f"p{i}")
            for i, s in enumerate([(6, 8), (8,), (8, 3)])]


def _loss(params, rank, step):
    rng = np.random.default_rng(10 * step + rank)
    x = ms.Tensor(rng.standard_normal((5, 6)).astype(np.float32))
    h = ops.matmul(x, params[0]) + params[1]
    return (ops.matmul(h.tanh(), params[2]) ** 2).mean()


@pytest.mark.parametrize("world, half, direct", [
    (2, False, 2), (3, False, 2), (4, False, 2), (2, True, 0)])
def test_dist_opt_computes_matmul_weights_in_their_slots(world, half, direct, puts,
                                                         monkeypatch):
    """Per rank and step, the two MatMul weights are computed in their slots (fp32 on any
    world: the pre-division is 1/world for a power of two, none otherwise) and the bias is
    copied; an fp16 wire copies all three. The parameters after 3 steps equal the copy
    path's (slots refused) bit for bit."""

    def train(comm):
        params = _dense_params(comm.rank)
        opt = DistOpt(nn.SGD(params, 0.1, momentum=0.9), communicator=comm)
        for step in range(3):
            loss = _loss(params, comm.rank, step)
            opt.backward_and_update_half(loss) if half else opt.backward_and_update(loss)
        return [p.asnumpy().copy() for p in params]

    with_slots = run_ranks(world, train, timeout=TIMEOUT)
    assert (puts.count(True), puts.count(False)) == (3 * world * direct, 3 * world * (3 - direct))
    _equal_to_the_copy_path(world, train, with_slots, puts, monkeypatch)


def test_a_node_whose_backward_writes_no_slots_is_not_asked():
    """Regression: the engine read ``needs_input_grad`` from the context of every node that
    alone consumes a target, and the nodes that hand out gradients computed elsewhere
    (gradient accumulation's and PipelineCell's loss) have contexts without it; only
    primitives that write slots (``writes_gradient_slots``) are offered any now."""
    from minitorch_dist.autograd import Node
    from minitorch_dist.ops.primitive import Context
    from minitorch_dist.parallel.preset_gradients import PresetGradients
    from minitorch_dist.tensor import Tensor
    w = ms.Parameter(ms.Tensor(np.ones((2, 2), np.float32)), name="w")
    ctx = Context(w.device)
    ctx.grads = (np.full((2, 2), 3.0, np.float32),)
    loss = Tensor._make(np.zeros((), np.float32), w.device, True,
                        Node(PresetGradients("preset", "a test loss"), ctx, (w,)))
    offer = Offer()
    grad = run_backward([loss], [np.ones((), np.float32)], targets=[w], observer=offer)[0]
    assert offer.offered == {} and grad.tolist() == [[3.0, 3.0], [3.0, 3.0]]


@pytest.mark.parametrize("rows", [2, 50])
def test_the_scale_goes_where_it_costs_least_and_the_bits_stay(rows):
    """A batch of 2 rows: its gradient is the smallest array, scaled before the product; a
    batch of 50 against a 3x2 weight: the product is, scaled in place after it."""
    rng = np.random.default_rng(4)
    x, w = leaf(rng, (rows, 3)), leaf(rng, (3, 2))

    def loss():
        return (ops.matmul(x, w) * 1.5).sum()
    expected = plain_gradients(loss, [w])[0]
    offer = Offer(scale=0.125)
    grad = run_backward([loss()], [np.ones((), np.float32)], targets=[w], observer=offer)[0]
    assert grad is offer.offered[id(w)]
    np.testing.assert_array_equal(grad, expected * np.float32(0.125))


def _conv_case(layout, rng):
    """(input, weight) leaves whose Conv2D takes ``layout``'s im2col path (``_im2col``)."""
    if layout == "taps":        # few channels, NCHW: tap-major patches
        x, w = rng.standard_normal((2, 1, 9, 9)), rng.standard_normal((4, 1, 3, 2))
    elif layout == "cij":       # NCHW with at least as many channels as output columns
        x, w = rng.standard_normal((2, 8, 5, 5)), rng.standard_normal((3, 8, 2, 2))
    elif layout == "ijc":       # channels-last memory (a transposed view, as convs return)
        x, w = rng.standard_normal((2, 6, 7, 3)), rng.standard_normal((4, 3, 2, 3))
    else:                       # "1x1": the channels-last input itself is the patches
        x, w = rng.standard_normal((2, 6, 4, 5)), rng.standard_normal((3, 5, 1, 1))
    x = ms.Tensor(x.astype(np.float32))
    if layout in ("ijc", "1x1"):
        x = ops.transpose(x, (0, 3, 1, 2))
    return x, ms.Tensor(w.astype(np.float32), requires_grad=True)


def _check_conv_slot(conv, x, w, algorithm, scale, fortran=False):
    """``conv``'s weight gradient with a slot offered (``Offer``): for a contiguous slot it is
    the slot, holding the plain gradient times ``scale``; a slot in Fortran order is left
    alone (its writes would go through reshaped copies) and the gradient is a new array."""
    def loss():
        return (conv(x, w) * 1.5).sum()
    ctx = conv(x, w).grad_fn.ctx
    assert (ctx.algorithm if algorithm in ("depthwise", "winograd") else ctx.order) == algorithm
    expected = plain_gradients(loss, [w])[0]
    offer = Offer(scale=scale, fortran=fortran)
    grad = run_backward([loss()], [np.ones((), np.float32)], targets=[w], observer=offer)[0]
    slot = offer.offered[id(w)]
    assert (grad is slot) != fortran and (not fortran or np.isnan(slot).all())
    np.testing.assert_array_equal(grad, expected * np.float32(1 if fortran else scale))


@pytest.mark.parametrize("layout, scale, group, fortran", [
    *[(layout, scale, 1, False) for layout in ("taps", "ijc", "1x1", "cij") for scale in (0.5, 1.0)],
    ("cij", 0.25, 2, False), *[(layout, 0.5, 1, True) for layout in ("taps", "ijc", "cij")]])
def test_conv_puts_its_weight_gradient_in_the_slot_for_every_patch_layout(layout, scale, group,
                                                                         fortran):
    """Tap-major and channels-last patches give dW in another order: the copy into (OC, C,
    kh, kw) memory goes into the slot, scaled (the copy a bucket would make). NCHW patches
    give it in that order: the products are made in the slot, then scaled there. Grouped
    convolutions fill the slot block by block."""
    x, w = _conv_case(layout, np.random.default_rng(5))
    if group > 1:       # four filters, two per half of the input's 8 channels
        w = ms.Tensor(np.random.default_rng(6).standard_normal((4, 4, 2, 2)).astype(np.float32),
                      requires_grad=True)
    conv = ops.Conv2D(out_channel=w.shape[0], kernel_size=w.shape[2:], group=group)
    _check_conv_slot(conv, x, w, "ijc" if layout == "1x1" else layout, scale, fortran)


@pytest.mark.parametrize("scale, fortran", [(0.5, False), (1.0, False), (0.5, True)])
def test_a_depthwise_conv_writes_its_weight_gradient_in_the_slot(scale, fortran):
    """One filter per channel (``ops/depthwise.py``): every tap's sums go straight into the
    slot, then the scale."""
    rng = np.random.default_rng(8)
    x = ms.Tensor(rng.standard_normal((2, 4, 6, 6)).astype(np.float32))
    w = ms.Tensor(rng.standard_normal((4, 1, 3, 3)).astype(np.float32), requires_grad=True)
    conv = ops.Conv2D(out_channel=4, kernel_size=3, pad_mode="pad", pad=1, group=4)
    _check_conv_slot(conv, x, w, "depthwise", scale, fortran)


@pytest.mark.parametrize("scale, fortran", [(0.5, False), (1.0, False), (0.5, True)])
def test_a_winograd_conv_copies_its_weight_gradient_into_the_slot(scale, fortran):
    """Winograd's weight gradient leaves the tile domain through a transposing copy: that copy
    goes into the slot, scaled."""
    rng = np.random.default_rng(9)
    x = ms.Tensor(rng.standard_normal((1, 16, 32, 32)).astype(np.float32))
    w = ms.Tensor((rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32),
                  requires_grad=True)
    conv = ops.Conv2D(out_channel=16, kernel_size=3, pad_mode="pad", pad=1)
    _check_conv_slot(conv, x, w, "winograd", scale, fortran)


@pytest.mark.parametrize("world", [2, 3])
def test_dist_opt_on_a_cnn_equals_the_copy_path_bit_for_bit(world, puts, monkeypatch):
    """Tap-major first convolution, channels-last second one, a dense layer: with slots, the
    three weights go straight into the buckets (the biases are copied); the parameters after
    3 steps are the copy path's."""
    conv1 = ops.Conv2D(out_channel=4, kernel_size=(3, 2))
    conv2 = ops.Conv2D(out_channel=3, kernel_size=2)

    def train(comm):
        rng = np.random.default_rng(comm.rank)
        shapes = [(4, 1, 3, 2), (3, 4, 2, 2), (90, 2), (2,)]
        params = [ms.Parameter(ms.Tensor((np.random.default_rng(7 + i).standard_normal(s) * 0.3)
                                         .astype(np.float32)), name=f"p{i}")
                  for i, s in enumerate(shapes)]
        opt = DistOpt(nn.SGD(params, 0.05, momentum=0.9), communicator=comm)
        for step in range(3):
            x = ms.Tensor(rng.standard_normal((2, 1, 9, 7)).astype(np.float32))
            h = conv2(ops.relu(conv1(x, params[0])), params[1])
            out = ops.matmul(ops.reshape(h, (2, -1)), params[2]) + params[3]
            opt.backward_and_update((out ** 2).mean())
        return [p.asnumpy().copy() for p in params]

    with_slots = run_ranks(world, train, timeout=TIMEOUT)
    assert (puts.count(True), puts.count(False)) == (3 * world * 3, 3 * world)
    _equal_to_the_copy_path(world, train, with_slots, puts, monkeypatch)
