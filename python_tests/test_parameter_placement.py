"""A new Parameter settles, once, on the device of the first primitive that uses it elsewhere."""
import numpy as np

import minitorch_dist as ms
from minitorch_dist import nn, ops


class HostDense(nn.Cell):
    def __init__(self):
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(np.ones((4, 3), np.float32)))
        self.matmul = ops.MatMul().set_device("CPU")

    def construct(self, x):
        return self.matmul(x, self.weight)


def test_weight_of_a_host_matmul_moves_to_the_host_once(virtual_gpu):
    ms.set_context(device_target="GPU")
    net = HostDense()
    assert net.weight.device is virtual_gpu           # created on the context's device
    x = ms.Tensor(np.ones((2, 4), np.float32))          # lives on the (virtual) GPU too
    ms.reset_transfer_stats()
    for _ in range(3):
        loss_grad = ms.value_and_grad(lambda a: net(a).sum(), None, net.trainable_params())
        _, (g,) = loss_grad(x)
    assert net.weight.device.name == "CPU"
    assert g.device.name == "CPU"
    # weight once (48 B) + x each step (3 x 32 B) host-bound; nothing else crosses back
    stats = ms.transfer_stats()
    assert stats["device_to_host"] == 48 + 3 * 32
    assert net.matmul.bytes_in == 48 + 3 * 32


def test_explicitly_placed_parameter_is_copied_not_moved(virtual_gpu):
    w = ms.Parameter(ms.Tensor(np.ones((4, 3), np.float32)), device="GPU")
    out = ops.MatMul().set_device("CPU")(ms.Tensor(np.ones((2, 4), np.float32)), w)
    assert w.device is virtual_gpu and out.device.name == "CPU"


def test_cell_to_moves_every_parameter(virtual_gpu):
    net = HostDense().to("GPU")
    assert all(p.device is virtual_gpu for p in net.get_parameters())
    net.to("CPU")
    assert all(p.device.name == "CPU" for p in net.get_parameters())
