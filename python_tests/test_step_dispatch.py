"""Dispatch's one-pass common case and the fused optimizer's bulk placement record (issue 29,
"thinner calls"): each shortcut gives what the general path gives, and every other case
still takes the general path."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.nn.optim import fused
from minitorch_dist.ops import primitive
from minitorch_dist.ops.primitive import Primitive

needs_fused = pytest.mark.skipif(fused.native_kernels() is None, reason="C++ kernels not built")


class _Counted(ms.Tensor):
    """A tensor that counts its ``prepare_use`` calls."""

    def prepare_use(self, device, owner):
        self.uses = getattr(self, "uses", 0) + 1
        super().prepare_use(device, owner)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_calling_a_primitive_is_its_apply_in_every_subclass():
    # __call__ is apply itself (one Python call less per primitive call): a subclass that
    # overrides apply must be called through its own apply
    assert Primitive.__call__ is Primitive.apply
    for sub in _subclasses(Primitive):
        if "apply" in vars(sub):
            assert sub.__call__ is sub.apply, sub


@pytest.mark.parametrize("second", ["tensor", "constant", "no-grad tensor"])
def test_one_pass_and_general_path_record_the_same(second):
    mul = ops.Mul()
    x = _Counted(np.array([1.0, 2.0], np.float32), requires_grad=True)
    other = {"tensor": ms.Tensor(np.array([3.0, 4.0], np.float32), requires_grad=True),
             "constant": 3.0,
             "no-grad tensor": ms.Tensor(np.array([3.0, 4.0], np.float32))}[second]
    out = mul(x, other)
    assert x.uses == 1                      # prepared once, whichever path ran
    assert out.requires_grad and out.grad_fn.prim is mul
    wants = (True, second == "tensor")
    assert out.grad_fn.ctx.needs_input_grad == wants
    assert out.grad_fn.ctx.needs_input_grad is primitive._needs_patterns[wants]   # shared
    assert mul.calls == 1 and mul.device_used is x.device and mul.forward_time > 0
    assert mul in ms.ops.primitive.primitives_that_ran()
    assert out.asnumpy().tolist() == ([3.0, 6.0] if second == "constant" else [3.0, 8.0])


def test_one_pass_records_nothing_under_no_grad_and_counts_the_call():
    add = ops.Add()
    x = ms.Tensor(np.ones(2, np.float32), requires_grad=True)
    with ms.no_grad():
        out = add(x, x)
    assert out.grad_fn is None and not out.requires_grad
    assert add.calls == 1


def test_one_pass_error_still_names_the_primitive():
    add = ops.Add()     # NumPy's broadcasting error, rewritten by dispatch
    with pytest.raises(ValueError, match=r"^Add-op\d+: .*\(inputs: float32\[2, 3\], float32\[4\]\)"):
        add(ms.Tensor(np.ones((2, 3), np.float32)), ms.Tensor(np.ones(4, np.float32)))


@pytest.mark.host_default
@needs_fused
def test_fused_update_rows_match_the_per_parameter_record():
    rng = np.random.default_rng(0)
    params = [nn.Parameter(ms.Tensor(rng.normal(size=s).astype(np.float32)), name=f"w{i}")
              for i, s in enumerate(((4, 3), (3,)))]
    opt = nn.SGD(params, 0.1)
    assert opt._fused_ready()
    ms.reset_placement_stats()
    for _ in range(2):
        opt(tuple(ms.Tensor(np.ones(p.shape, np.float32)) for p in params))
    rows = {row["name"]: row for row in ms.placement_report().updates}
    assert set(rows) == {"SGD.w0", "SGD.w1"}
    for name, nbytes in (("SGD.w0", 48), ("SGD.w1", 12)):
        assert rows[name]["device"] == "CPU"
        assert rows[name]["calls"] == 2 and rows[name]["bytes"] == 2 * nbytes
    # the call's time is shared by gradient bytes: 48 to 12
    assert rows["SGD.w0"]["update_ms"] == pytest.approx(4 * rows["SGD.w1"]["update_ms"], rel=0.02)


def test_a_user_subclass_that_overrides_apply_is_called_through_it():
    seen = []

    class Traced(Primitive):
        def forward(self, ctx, x):
            return x * 2

        def apply(self, *inputs, **attrs):
            seen.append(len(inputs))
            return super().apply(*inputs, **attrs)

    out = Traced()(ms.Tensor([1.0, 2.0]))
    assert seen == [1] and out.asnumpy().tolist() == [2.0, 4.0]
