"""How cells name their parameters: the attribute path, stable whichever cell lists them."""
import minitorch_dist as ms
from minitorch_dist import nn


def test_auto_parameter_names_do_not_flip_with_the_listing_cell():
    """Regression: listing a sub-cell after its parent renamed 'inner.w' back to 'w', so an
    optimizer built in between kept state named after a name the parameter no longer had."""
    class A(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = ms.Parameter(ms.Tensor([1.0]))

    class B(nn.Cell):
        def __init__(self, a):
            super().__init__()
            self.inner = a

    a = A()
    assert [p.name for p in a.trainable_params()] == ["w"]
    b = B(a)
    assert [p.name for p in b.trainable_params()] == ["inner.w"]
    assert [p.name for p in a.trainable_params()] == ["inner.w"]
    adam = nn.Adam(b.trainable_params())
    assert [p.name for p in a.trainable_params()] == ["inner.w"]
    assert any(name.endswith("inner.w") for name, _ in adam.parameters_and_names())
