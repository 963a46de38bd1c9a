"""The sharded network's closing all-reduce, deferred until after backward under compute
slots (``parallel/comm/final_reduction.py``): the same values and gradients as an ordinary
all-reduce, refused where the deferral's assumption (every rank's seed gradient the same)
does not hold, and settled at once where something reads the total early."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel.comm.collectives import AllReduce
from minitorch_dist.parallel.comm.final_reduction import FinalReductions


def _partial(comm):
    return ms.Tensor(np.array([0.1, 0.7, -2.5], np.float32) * (comm.rank + 1),
                     requires_grad=True)


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_deferred_equals_an_ordinary_all_reduce_bit_for_bit(op):
    def rank(comm):
        x, plain = _partial(comm), _partial(comm)
        finals = FinalReductions()
        y = finals.defer(x, comm, op)
        held = y.asnumpy().copy()          # before finish: this rank's part only
        (y * 0.25).sum().backward()
        finals.finish()
        z = AllReduce(op, group=comm)(plain)
        (z * 0.25).sum().backward()
        return held, y.asnumpy(), z.asnumpy(), x.grad.asnumpy(), plain.grad.asnumpy()

    for rank_id, (held, got, want, grad, plain_grad) in enumerate(run_ranks(4, rank)):
        assert np.array_equal(held, _partial_values(rank_id))
        assert np.array_equal(got, want) and np.array_equal(grad, plain_grad)


def _partial_values(rank_id):
    return np.array([0.1, 0.7, -2.5], np.float32) * (rank_id + 1)


def test_seeds_that_differ_between_ranks_are_an_error_not_a_wrong_gradient():
    def rank(comm):
        finals = FinalReductions()
        y = finals.defer(_partial(comm), comm)
        (y * float(comm.rank + 1)).sum().backward()    # a different seed on every rank
        with pytest.raises(RuntimeError, match="every rank's loss gradient is the same"):
            finals.finish()
        return y.asnumpy()

    for got in run_ranks(2, rank):              # the totals are still delivered
        assert np.array_equal(got, _partial_values(0) + _partial_values(1))


def test_a_total_read_early_is_reduced_at_once_and_backward_reduces_as_usual():
    def rank(comm):
        x, plain = _partial(comm), _partial(comm)
        finals = FinalReductions()
        y = finals.defer(x, comm)
        finals.settle(y.data)
        early = y.asnumpy().copy()
        (y * float(comm.rank + 1)).sum().backward()    # seeds may differ once settled
        finals.finish()
        (AllReduce("sum", group=comm)(plain) * float(comm.rank + 1)).sum().backward()
        return early, x.grad.asnumpy(), plain.grad.asnumpy()

    for early, grad, plain_grad in run_ranks(2, rank):
        assert np.array_equal(early, _partial_values(0) + _partial_values(1))
        assert np.array_equal(grad, plain_grad)


def test_only_power_of_two_groups_and_sum_or_mean_are_deferred():
    sizes = run_ranks(3, lambda comm: FinalReductions.accepts(comm))
    assert sizes == [False] * 3
    assert run_ranks(2, lambda comm: FinalReductions.accepts(comm)) == [True, True]
    with pytest.raises(ValueError, match="sums or averages, got op 'max'"):
        run_ranks(1, lambda comm: FinalReductions().defer(_partial(comm), comm, "max"))
