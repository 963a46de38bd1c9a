"""LazyAdam: Adam that applies a sparse (``RowTensor``) gradient to the rows it names only.

The arithmetic lives in :mod:`.adam` (``Adam(use_lazy=True)`` is the same optimizer, and the
name MindSpore 2.x prefers); this class keeps MindSpore's ``nn.LazyAdam`` signature.
"""
from .adam import Adam

__all__ = ["LazyAdam"]


class LazyAdam(Adam):
    """Adam in MindSpore's fused-kernel form, lazy on sparse gradients.

    With ``g = grad / loss_scale + weight_decay * w`` and ``t`` the optimizer's step
    (``global_step + 1``, counted per optimizer, not per row)::

        m    = beta1 * m + (1 - beta1) * g
        v    = beta2 * v + (1 - beta2) * g * g
        lr_t = lr * sqrt(1 - beta2**t) / (1 - beta1**t)
        w   -= lr_t * m / (sqrt(v) + eps)

    (``use_nesterov``: ``beta1 * m + (1 - beta1) * g`` in place of ``m`` in the last line.)
    A dense gradient updates every element. A ``RowTensor`` gradient first sums its duplicate
    ids and then updates only those rows of ``w``, ``m`` and ``v``; every other row, and its
    moments, stays bit-for-bit as it was (so this is *not* Adam: untouched moments do not
    decay). On the host (``target="CPU"``, or parameters on the host) the sparse update is the
    fused, multithreaded C++ kernel ``kernels.lazy_adam``, in place; on a device it runs with
    the device's array module.

    State: ``moment1.<param name>``, ``moment2.<param name>`` (where the update runs) and
    ``beta1_power``/``beta2_power`` (shape ``[1]``, ``beta**t`` after ``t`` steps, on the
    host). ``use_locking`` is accepted for MindSpore compatibility and has no effect.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> table = ms.Parameter(ms.Tensor(np.zeros((4, 2), np.float32)), name="table")
    >>> opt = nn.LazyAdam([table], learning_rate=0.1)
    >>> grad = ms.RowTensor(ms.Tensor([2, 2]), ms.Tensor(np.ones((2, 2), np.float32)), (4, 2))
    >>> _ = opt((grad,))
    >>> [round(float(x), 4) for x in table.asnumpy()[:, 0]]      # only row 2 moves, by about lr
    [0.0, 0.0, -0.1, 0.0]
    >>> float(opt.beta1_power.asnumpy()[0])
    0.8999999761581421
    """

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 use_locking=False, use_nesterov=False, weight_decay=0.0, loss_scale=1.0):
        super().__init__(params, learning_rate, beta1, beta2, eps, use_locking, use_nesterov,
                         weight_decay, loss_scale, use_lazy=True)
