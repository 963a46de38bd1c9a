"""Primitives: one small class per operation, plus lower-case functional forms.

MindSpore style classes (``ops.MatMul()``, ``ops.ReduceMean(keep_dims=True)``) are callables
with ``set_device`` and ``shard``; ``ops.matmul(a, b)`` and friends are the functional forms.
"""
from .primitive import Primitive, Context
from .device_copy import DeviceCopy, copy_to
from .arithmetic import *      # noqa: F401,F403
from .elementwise import *     # noqa: F401,F403
from .activation import *      # noqa: F401,F403
from .reduction import *       # noqa: F401,F403
from .shape_ops import *       # noqa: F401,F403
from .indexing import *        # noqa: F401,F403
from .cast import *            # noqa: F401,F403
from .matmul import *          # noqa: F401,F403
from .conv import *            # noqa: F401,F403
from .pooling import *         # noqa: F401,F403
from .normalization import *   # noqa: F401,F403
from .dropout import *         # noqa: F401,F403
from .embedding import *       # noqa: F401,F403
from .loss import *            # noqa: F401,F403
from .grad_operation import GradOperation
from .debug import Print, TensorDump
from .trigonometric import *   # noqa: F401,F403
from .creation import *        # noqa: F401,F403
from .control import *         # noqa: F401,F403
from .selection import *       # noqa: F401,F403
from .repetition import *      # noqa: F401,F403
from .nd_indexing import *     # noqa: F401,F403
from .layer_norm import *      # noqa: F401,F403
from .legacy_names import *    # noqa: F401,F403
from .math_func import *       # noqa: F401,F403
from .array_func import *      # noqa: F401,F403
from .mask_func import *       # noqa: F401,F403
from .gather_func import *     # noqa: F401,F403
from .product_func import *    # noqa: F401,F403
from .scatter_func import *    # noqa: F401,F403
from .reduce_func import *     # noqa: F401,F403
from .linalg_func import *     # noqa: F401,F403
from .nn_func import *         # noqa: F401,F403
from .random_func import *     # noqa: F401,F403
from .misc_func import *       # noqa: F401,F403
from .special_func import *    # noqa: F401,F403
from .composite import HyperMap, MultitypeFuncGraph, Partial
from .activation import GeLU as Gelu    # MindSpore's older name
from . import functional
from .. import tensor as _tensor

_tensor.F = functional
from .lazy_init import lazy_values as _lazy_values
_tensor.lazy_maker = _lazy_values
from .tensor_methods import install as _install_methods
_install_methods(_tensor.Tensor)
from ..gradients import grad, value_and_grad   # ops.value_and_grad, ops.grad: MindSpore's aliases
from ..recompute import recompute      # ops.recompute: MindSpore's functional form
