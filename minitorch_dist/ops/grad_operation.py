"""``GradOperation``: MindSpore's higher-order gradient function, over ``value_and_grad``.

``GradOperation(get_all=False, get_by_list=False, sens_param=False)(network, weights)``
returns a function of the network's inputs that gives gradients:

* of the first input (the default), of every input (``get_all``), of ``weights``
  (``get_by_list``), or ``(input grads, weight grads)`` with both;
* with ``sens_param=True`` the last argument is the sensitivity, the gradient the output
  is seeded with (a loss scale, as Wide&Deep's ``TrainStepWrap`` passes).

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> square = lambda x: x * x
>>> ops.GradOperation(sens_param=True)(square)(ms.Tensor([3.0]), ms.Tensor([2.0])).asnumpy().tolist()
[12.0]
"""
from ..tensor import Tensor

__all__ = ["GradOperation"]


class GradOperation:
    def __init__(self, get_all=False, get_by_list=False, sens_param=False):
        self.get_all = bool(get_all)
        self.get_by_list = bool(get_by_list)
        self.sens_param = bool(sens_param)

    def __call__(self, fn, weights=None):
        if self.get_by_list and weights is None:
            raise ValueError("GradOperation(get_by_list=True) needs the weights: "
                             "grad_op(network, weights)")
        from ..gradients import value_and_grad

        def gradients(*inputs):
            sens = None
            if self.sens_param:
                if not inputs:
                    raise ValueError("GradOperation(sens_param=True): the last input must be the sensitivity")
                inputs, sens = inputs[:-1], inputs[-1]
            count = len(inputs)
            if self.get_all:
                positions = tuple(range(count))
            elif self.get_by_list:
                positions = None
            else:
                positions = 0

            def seeded(*args):
                out = fn(*args)
                if sens is None:
                    return out
                outs, seeds = (out, sens) if isinstance(out, tuple) else ((out,), (sens,))
                total = None
                for o, s in zip(outs, seeds):
                    term = (o * (s if isinstance(s, Tensor) else Tensor(s))).sum()
                    total = term if total is None else total + term
                return total

            seeded.__wrapped__ = fn     # the network: parallel executors shard its calls
            return value_and_grad(seeded, positions, weights if self.get_by_list else None)(*inputs)[1]
        return gradients
