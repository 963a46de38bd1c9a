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


class _Layer(nn.Cell):
    def __init__(self):
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor([1.0]), name="weight")    # a given name


class _Model(nn.Cell):
    def __init__(self):
        super().__init__()
        self.wide_b = ms.Parameter(ms.Tensor([0.0]), name="Wide_b")
        self.dense_layer_1, self.dense_layer_2 = _Layer(), _Layer()


class _LossNet(nn.Cell):
    def __init__(self, network):
        super().__init__(auto_prefix=False)
        self.network = network


class _TrainStep(nn.Cell):
    def __init__(self, network):
        super().__init__()
        self.network = network
        params = network.trainable_params()
        self.weights_w = [p for p in params if "wide" in p.name]
        self.optimizer = nn.Adam([p for p in params if "wide" not in p.name])


def test_given_names_take_the_path_when_a_parent_with_auto_prefix_holds_the_cell():
    """MindSpore renames every parameter prefix + its path when a cell is assigned to a
    parent built with auto_prefix=True (given names included); a parent built with
    auto_prefix=False renames nothing. Upstream Wide&Deep depends on it: its TrainStepWrap
    picks FTRL's parameters by 'wide' in the name, which holds for 'network.network.wide_b'
    but not for the given name 'Wide_b'; and its five layers all name their weight 'weight'."""
    model = _Model()
    assert [p.name for p in model.trainable_params()] == [
        "Wide_b", "dense_layer_1.weight", "dense_layer_2.weight"]
    loss = _LossNet(model)
    assert [p.name for p in loss.trainable_params()] == [
        "Wide_b", "dense_layer_1.weight", "dense_layer_2.weight"]
    step = _TrainStep(loss)
    assert [p.name for p in step.weights_w] == ["network.network.wide_b"]
    assert [p.name for p in step.optimizer.parameters] == [
        "network.network.dense_layer_1.weight", "network.network.dense_layer_2.weight"]
    # the optimizer's state keeps the names it was given; its own global_step is renamed
    names = [p.name for p in step.get_parameters()]
    assert "moment1.network.network.dense_layer_1.weight" in names
    assert "optimizer.global_step" in names


def test_library_wrappers_rename_nothing():
    """WithLossCell and TrainOneStepCell are built with auto_prefix=False in MindSpore."""
    layer = _Layer()
    net = nn.TrainOneStepCell(nn.WithLossCell(layer, nn.MSELoss()),
                              nn.SGD(layer.trainable_params(), 0.1))
    assert layer.weight.name == "weight" and net is not None
