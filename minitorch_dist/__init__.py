"""minitorch_dist: a small deep-learning framework that teaches and runs parallel training.

>>> import minitorch_dist as ms
>>> x = ms.Tensor([1.0, 2.0], requires_grad=True)
>>> (x * 3).sum().backward()
>>> x.grad.asnumpy().tolist()
[3.0, 3.0]
"""
from .backend.allocator import tune_malloc as _tune_malloc
_tune_malloc()          # keep freed blocks for reuse (see backend/allocator.py)
from .backend import (Device, DeviceOutOfMemoryError, get_device, transfer_stats,
                      reset_transfer_stats)
from .backend.dtypes import (float16, float32, float64, int8, uint8, int32, uint32, int64, bool_)
from .context import (set_context, get_context, GRAPH_MODE, PYNATIVE_MODE, STRICT, COMPATIBLE,
                      LAX)
from .random import set_seed, get_seed
from .tensor import Tensor
from .row_tensor import RowTensor
from .autograd import no_grad, enable_grad, is_grad_enabled
from . import ops
from .gradients import grad, value_and_grad
from .jit_compile import jit, JitConfig
from .placement import placement_report, reset_placement_stats
from .dlpack import from_dlpack
from . import nn, common, dataset, dtype
from .nn import Parameter, ParameterTuple
from . import train
from . import amp
from .amp import custom_mixed_precision, get_black_list, get_white_list
from .train import (Model, save_checkpoint, load_checkpoint, load_param_into_net)
# MindSpore 2.x exports the callbacks at the top too (``from mindspore import LossMonitor``)
from .train import (Callback, CheckpointConfig, History, LambdaCallback, LossMonitor,
                    ModelCheckpoint, RunContext, TimeMonitor)
from .train.model_export import export, load
from .parallel.context import (ParallelMode, set_auto_parallel_context,
                               get_auto_parallel_context, reset_auto_parallel_context)
from . import communication, parallel, runtime
from .parallel import DistOpt
from .parallel.shard_function import shard
from .offload_config import set_offload_context, get_offload_context
from .recompute import recompute
from .parallel import (Symbol, build_searched_strategy, rank_list_for_transform,
                       transform_checkpoint_by_rank, transform_checkpoints,
                       load_distributed_checkpoint, merge_sliced_parameter)
from .parallel import merge_pipeline_strategys

__version__ = "0.1.0"
