"""Dynamic shapes (issue 26 item 5): ``Symbol``, input placeholders and ``set_inputs``
(calls checked against the declared shapes), and sharded networks whose batch size changes
between steps: re-planned while the ranks agree, refused on every rank when they do not,
and a batch that a strategy cannot split refused naming the dimension. Ranks are threads."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.extension import extension
from minitorch_dist.parallel.dynamic_shape import (Symbol, declare_inputs, declared_inputs,
                                                   input_placeholder)
from minitorch_dist.parallel.sharding.rules import ShardingError
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell

RNG = np.random.default_rng(3)
W = RNG.standard_normal((6, 4)).astype(np.float32)


class Net(nn.Cell):
    def __init__(self, strategy=None):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(W.copy()), "w")
        self.matmul = ops.MatMul().shard(strategy) if strategy else ops.MatMul()

    def construct(self, x):
        return self.matmul(x, self.w)


class Outer(nn.Cell):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def construct(self, x):
        return self.inner(x)


def _x(*shape):
    return ms.Tensor(RNG.random(shape, np.float32))


def test_symbol_checks_its_arguments():
    with pytest.raises(TypeError, match="max must be an int"):
        Symbol(max=2.5)
    with pytest.raises(TypeError, match="unique must be True or False"):
        Symbol(unique=1)
    with pytest.raises(ValueError, match="min must be positive"):
        Symbol(min=0)
    with pytest.raises(ValueError, match="divisor must be positive"):
        Symbol(divisor=0)
    with pytest.raises(ValueError, match=r"remainder must be in \[0, divisor=4\)"):
        Symbol(divisor=4, remainder=4)
    s = Symbol(max=32, min=2, divisor=8, remainder=1)
    assert s.problem(9) is None and s.problem(17) is None
    assert "above the symbol's max=32" in s.problem(33)
    assert "8 * N + 1" in s.problem(10)
    assert "8 * N + 1" in Symbol(divisor=8, remainder=1).problem(1)      # N >= 1


def test_calls_are_checked_against_the_declared_shapes():
    net = Net()
    declare_inputs(net, (input_placeholder([Symbol(divisor=2), 6], ms.float32),))
    assert isinstance(net, Net) and type(net).__name__ == "Net"
    assert net(_x(4, 6)).shape == (4, 4)
    assert net(_x(8, 6)).shape == (8, 4)         # another batch size: fine
    with pytest.raises(ValueError, match=r"dimension 0 is 3, which is not of the form 2 \* N"):
        net(_x(3, 6))
    with pytest.raises(ValueError, match="dimension 1 is 5, but set_inputs declared it fixed at 6"):
        net(_x(2, 5))
    with pytest.raises(ValueError, match=r"has 3 dimension\(s\), but set_inputs declared 2"):
        net(_x(2, 6, 1))
    with pytest.raises(ValueError, match="has dtype Float64, but set_inputs declared Float32|"
                                         "has dtype float64, but set_inputs declared float32"):
        net(ms.Tensor(np.ones((2, 6))))
    with pytest.raises(ValueError, match=r"declared 1 input\(s\), but the call passes 2"):
        net(_x(2, 6), _x(2, 6))
    # called from inside another cell it is not the compiled cell: not checked, as in MindSpore
    assert Outer(net)(_x(3, 6)).shape == (3, 4)


def test_unique_symbols_and_none_dimensions():
    class Add(nn.Cell):
        def construct(self, a, b):
            return a + b

    s = Symbol(unique=True)
    add = Add()
    declare_inputs(add, (input_placeholder([s, None]), input_placeholder([s, None])))
    assert add(_x(3, 5), _x(3, 5)).shape == (3, 5)
    with pytest.raises(ValueError, match="input 1 of shape.*dimension 0 is 2, but input 0's "
                                         "dimension 0 is 3, and both use one unique Symbol"):
        add(_x(3, 5), _x(2, 5))
    with pytest.raises(ValueError, match="must be an int >= 0, None or -1"):
        input_placeholder([-2, 3])
    with pytest.raises(ValueError, match="needs at least one input placeholder"):
        declare_inputs(add, ())


def test_a_real_tensor_declares_a_fixed_shape():
    net = Net()
    declare_inputs(net, (_x(2, 6),))
    assert declared_inputs(net)[0][0] == (2, 6)
    with pytest.raises(ValueError, match="fixed at 2"):
        net(_x(4, 6))


@pytest.mark.skipif(not hasattr(extension(), "declare_inputs"),
                    reason="the extension does not route Cell.set_inputs yet")
def test_cell_set_inputs_declares():
    net = Net()
    net.set_inputs(input_placeholder([None, 6], ms.float32))
    assert declared_inputs(net)[0][0] == (None, 6)
    with pytest.raises(ValueError, match="fixed at 6"):
        net(_x(2, 5))


@pytest.fixture()
def semi_auto():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    yield
    ms.reset_auto_parallel_context()


def test_a_sharded_network_replans_when_the_batch_changes(semi_auto):
    xs = {4: RNG.random((4 * 4, 6), np.float32), 2: RNG.random((2 * 4, 6), np.float32)}

    def rank(comm):
        net = Net(((2, 2), (2, 1)))
        declare_inputs(net, (input_placeholder([None, 6], ms.float32),))
        cell = ShardedCell(net, group=comm)
        outs = []
        for batch in (4, 2, 4):
            local = xs[batch][comm.rank * batch:(comm.rank + 1) * batch]
            outs.append(cell(ms.Tensor(local)).asnumpy())
        return outs, len(cell.call.programs)

    for r, (outs, programs) in enumerate(run_ranks(4, rank, timeout=60)):
        assert programs == 2                       # one plan per batch size, reused after
        for out, batch in zip(outs, (4, 2, 4)):
            want = xs[batch][r * batch:(r + 1) * batch] @ W
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_ranks_with_different_batches_are_refused_on_every_rank(semi_auto):
    def rank(comm):
        net = Net(((2, 1), (1, 1)))
        declare_inputs(net, (input_placeholder([None, 6], ms.float32),))
        cell = ShardedCell(net, group=comm)
        cell(_x(4, 6))
        with pytest.raises(ShardingError, match=r"dimension 0 of input 0 is 4 on rank 0, 3 on "
                                                r"rank 1\); every rank must pass the same shapes"):
            cell(_x(4 - comm.rank, 6))             # rank 1's last batch is short
        return True

    assert run_ranks(2, rank, timeout=60) == [True, True]


def test_a_batch_the_strategy_cannot_split_is_refused_naming_it(semi_auto):
    ms.set_auto_parallel_context(full_batch=True)

    def rank(comm):
        cell = ShardedCell(Net(((2, 1), (1, 1))), group=comm)
        assert cell(_x(4, 6)).shape == (4, 4)
        with pytest.raises(ShardingError, match=r"dimension 0 of tensor input 0 \(shape \(3, 6\)\) "
                                                "has size 3, which cannot be split into 2"):
            cell(_x(3, 6))
        return True

    assert run_ranks(2, rank, timeout=60) == [True, True]
