"""The SINGA facade's (``minitorch_dist.singa``) bad arguments and unsupported names: every
bad call to ``layer``, ``opt``, ``device``, ``tensor`` and ``model`` is a clear error naming
the SINGA call, and every SINGA name the facade does not provide raises
``SingaNotSupported`` naming itself."""
import re

import numpy as np
import pytest

from minitorch_dist import nn
from minitorch_dist.singa import NcclIdHolder, SingaNotSupported, device, layer, opt, tensor
from test_singa_facade import _compiled_tiny

BAD_CALLS = [
    (lambda: layer.Conv2d(20, 5, activation="TANH"), ValueError, "layer.Conv2d: activation"),
    (lambda: layer.Conv2d(20, 0), ValueError, "layer.Conv2d: kernel_size"),
    (lambda: layer.Conv2d(20, 5, cudnn="x"), TypeError, "layer.Conv2d: unexpected keyword"),
    (lambda: layer.Conv2d(1, 20, 5, padding=(1, 1, 1, 1)), NotImplementedError,
     r"layer.Conv2d\(padding=\(1, 1, 1, 1\)\) is not supported"),
    (lambda: layer.Conv2d(3, 20, 5)(tensor.Tensor((1, 1, 8, 8))), ValueError,
     "declared 3 input channels but the input has 1"),
    (lambda: layer.Conv2d(20, 5)(tensor.Tensor((1, 8, 8))), ValueError,
     "layer.Conv2d: expected a 4-D input"),
    (lambda: layer.Linear(0), ValueError, "layer.Linear: out_features must be a positive int"),
    (lambda: layer.Linear(3, 4, True, 5), TypeError, "layer.Linear: at most"),
    (lambda: layer.Linear(4)(tensor.Tensor((2, 3, 4))), ValueError,
     "layer.Linear: expected a 2-D input"),
    (lambda: layer.MaxPool2d(2, pad_mode="FULL"), ValueError, "layer.MaxPool2d: pad_mode"),
    (lambda: layer.AvgPool2d(2, padding=2), ValueError,
     r"layer.AvgPool2d: padding \(2, 2\) must be smaller than the kernel size"),
    (lambda: layer.Dropout(1.5), ValueError, "layer.Dropout: ratio"),
    (lambda: layer.SoftMaxCrossEntropy()(tensor.Tensor((2, 3)),
                                         tensor.from_numpy(np.array([0, 5], np.int32))),
     ValueError, "layer.SoftMaxCrossEntropy: .*label 5 is out of range"),
    (lambda: layer.SoftMaxCrossEntropy()(tensor.Tensor((2, 3)),
                                         tensor.from_numpy(np.array([0.5, 1.0], np.float32))),
     TypeError, "class-index targets must be integers"),
    (lambda: layer.SoftMaxCrossEntropy()(tensor.Tensor((2, 3)), tensor.Tensor((2, 2))),
     ValueError, r"must hold 2 class indices or be \(2, 3\)"),
    (lambda: opt.SGD(lr="fast"), ValueError, "opt.SGD: lr must be a finite number"),
    (lambda: opt.SGD(momentum=-1), ValueError, "opt.SGD: momentum"),
    (lambda: opt.SGD(nesterov=True), ValueError, "opt.SGD: nesterov=True needs momentum"),
    (lambda: opt.SGD(dtype=tensor.int32), ValueError, "opt.SGD: dtype must be a floating"),
    (lambda: opt.SGD()(tensor.Tensor((1,))), ValueError,
     r"opt.SGD\(loss\): the loss does not depend on any trainable tensor"),
    (lambda: opt.DistOpt(object()), TypeError, r"opt.DistOpt\(opt\): expected an optimizer"),
    (lambda: opt.DistOpt(opt.SGD(), buffSize=0), ValueError, "opt.DistOpt: buffSize"),
    (lambda: opt.DistOpt(opt.SGD(), spars=0.1), TypeError, "opt.DistOpt: unexpected keyword"),
    (lambda: opt.DistOpt(opt.SGD(), nccl_id="abc", local_rank=0, world_size=1), TypeError,
     r"nccl_id must come from singa.NcclIdHolder\(\)"),
    (lambda: opt.DistOpt(opt.SGD(), nccl_id=NcclIdHolder(), local_rank=2, world_size=2),
     ValueError, "need 0 <= local_rank < world_size"),
    (lambda: opt.DistOpt(opt.SGD(), nccl_id=NcclIdHolder(), world_size=2), ValueError,
     "local_rank must be an int"),
    (lambda: device.create_cuda_gpu_on(-1), ValueError, "device.create_cuda_gpu_on"),
    (lambda: device.create_cpu_device().SetRandSeed(-3), ValueError, "Device.SetRandSeed"),
    (lambda: tensor.Tensor("abc"), TypeError, "tensor.Tensor: shape"),
    (lambda: tensor.Tensor((2,), dtype=7), ValueError, "dtype code 7 is not one of SINGA's"),
    (lambda: tensor.Tensor((2,), device=3), TypeError, "tensor.Tensor: device must be"),
    (lambda: tensor.Tensor((2, 5)).copy_from_numpy(np.zeros(5)), ValueError,
     r"copy_from_numpy: the array has 5 elements .* the tensor has 10"),
    (lambda: tensor.Tensor((2,), dtype=tensor.int32).copy_from_numpy(np.array([0.5, 1.0])), TypeError,
     "cannot go into a int32 tensor"),
    (lambda: tensor.Tensor((2,)).copy_from_numpy([1, 2]), TypeError, "expected a NumPy array"),
    (lambda: tensor.to_numpy([1, 2]), TypeError, r"tensor.to_numpy\(t\): expected a Tensor"),
    (lambda: tensor.from_numpy(np.zeros(2, np.uint16)), TypeError, "tensor.from_numpy"),
    (lambda: _compiled_tiny().compile(tensor.Tensor((2, 4))), TypeError,
     r"model.Model.compile\(inputs\): expected a non-empty list"),
    (lambda: _compiled_tiny()(tensor.Tensor((2, 4))), NotImplementedError,
     "must define train_one_batch"),
    (lambda: _compiled_tiny().optimizer, AttributeError, r"call model.set_optimizer\(sgd\)"),
    (lambda: _compiled_tiny().set_optimizer(nn.SGD), TypeError,
     "expected an optimizer from minitorch_dist.singa.opt"),
    (lambda: _compiled_tiny().set_params({"fc.X": np.zeros(3)}), KeyError,
     r"no parameter named \['fc.X'\]"),
    (lambda: _compiled_tiny().set_params({"fc.W": np.zeros(3), "fc.b": np.zeros(3)}),
     ValueError, r"'fc.W' has shape \(4, 3\)"),
]


@pytest.mark.parametrize("call, error, message", BAD_CALLS)
def test_bad_arguments_are_clear_errors_naming_the_singa_call(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("reach, name", [
    (lambda: layer.CudnnRNN, "layer.CudnnRNN"),
    (lambda: opt.DecayScheduler, "opt.DecayScheduler"),
    (lambda: tensor.float64, "tensor.float64"), (lambda: device.device_query, "device.device_query"),
    (lambda: device.create_cpu_device().RunGraph(), "Device.RunGraph"),
    (lambda: opt.SGD().set_states({"m": 1}), "opt.SGD.set_states(['m'])"),
])
def test_unsupported_singa_calls_name_themselves(reach, name):
    with pytest.raises(SingaNotSupported, match=rf"singa {re.escape(name)} is not supported"):
        reach()
    assert not hasattr(layer, "CudnnRNN")
