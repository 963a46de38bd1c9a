"""Loading the ranks' slice files into a network laid out another way (MindSpore's
``load_distributed_checkpoint`` and ``merge_sliced_parameter``).

``load_distributed_checkpoint(network, files, predict_strategy, train_strategy_filename)``
reads every rank's file of a training run (``files[r]`` is rank ``r``'s), puts each sliced
parameter's blocks together by the training strategy file, and loads the whole values into
``network``: a parameter that is sliced here (``predict_strategy``, from
``Model.infer_predict_layout``) takes its own block, an unsliced one all of it. It works in
one process too (``predict_strategy=None``). Blocks are copied, never summed: the values
are the training run's, bit for bit.
"""
import numpy as np

from .checkpoint_transform import (_strategy, check_same_shapes, strategy_world,
                                   transformed_entries)
from ..runtime import _once
from .strategy_ckpt import strategy_ckpt_files

__all__ = ["merge_sliced_parameter", "load_distributed_checkpoint"]


def _merge_blocks(blocks, layout, name):
    """The full array from every rank's block (in rank order), by assignment."""
    if len(blocks) != layout.num_devices:
        raise ValueError(f"merge_sliced_parameter: {name!r} is laid out over "
                         f"{layout.num_devices} ranks, but {len(blocks)} slices were given")
    full = None
    for rank, block in enumerate(blocks):
        want = layout.local_shape(rank)
        if tuple(block.shape) != want:
            raise ValueError(f"merge_sliced_parameter: slice {rank} of {name!r} has shape "
                             f"{tuple(block.shape)}, but its layout gives rank {rank} {want}")
        full = np.empty(layout.shape, block.dtype) if full is None else full
        index = layout.slice_for(rank)
        if any(layout.coordinate(rank, axis) for axis in layout.replicated_axes()):
            if not np.array_equal(full[index], block):
                raise ValueError(f"merge_sliced_parameter: slices of {name!r} that should be "
                                 f"copies of one block differ (rank {rank})")
            continue
        full[index] = block
    return full


def merge_sliced_parameter(sliced_parameters, strategy=None):
    """One Parameter from the slices of a parameter held by every rank (a list in rank
    order); ``strategy``: ``build_searched_strategy``'s dict, or None to join the slices
    along dimension 0 (MindSpore's default)."""
    from ..nn.parameter import Parameter
    from ..tensor import Tensor
    if not isinstance(sliced_parameters, (list, tuple)) or not sliced_parameters:
        raise TypeError("merge_sliced_parameter: sliced_parameters must be a non-empty list of "
                        "Parameters (one per rank, in rank order)")
    if not all(isinstance(p, Parameter) for p in sliced_parameters):
        raise TypeError("merge_sliced_parameter: every slice must be a Parameter, got "
                        f"{sorted({type(p).__name__ for p in sliced_parameters})}")
    name = sliced_parameters[0].name
    if any(p.name != name for p in sliced_parameters):
        raise ValueError("merge_sliced_parameter: the slices have different names "
                         f"{sorted({p.name for p in sliced_parameters})}")
    blocks = [p.asnumpy() for p in sliced_parameters]
    if strategy is None:
        full = np.concatenate(blocks, axis=0)
    else:
        if not isinstance(strategy, dict):
            raise TypeError("merge_sliced_parameter: strategy must be build_searched_strategy's "
                            f"dict, got {type(strategy).__name__}")
        if name not in strategy:
            raise KeyError(f"merge_sliced_parameter: the strategy has no layout for {name!r}")
        full = _merge_blocks(blocks, strategy[name], name)
    return Parameter(Tensor(full), name, requires_grad=sliced_parameters[0].requires_grad)


_UNSUPPORTED = {"dec_key": None, "dec_mode": "AES-GCM", "format": "ckpt",
                "unified_safetensors_dir": None, "dst_safetensors_dir": None, "rank_id": None,
                "output_format": "safetensors", "name_map": None, "return_param_dict": False}


def _refuse_unsupported(options):
    for key, value in options.items():
        if key not in _UNSUPPORTED:
            raise TypeError(f"load_distributed_checkpoint() got an unexpected keyword argument "
                            f"{key!r}")
        if value != _UNSUPPORTED[key]:
            raise ValueError(f"load_distributed_checkpoint: {key}={value!r} is not supported "
                             "here (plain .ckpt files, no encryption, no safetensors "
                             f"conversion); leave it at {_UNSUPPORTED[key]!r}")


def _check_predict_strategy(network, predict_strategy):
    """Each parameter ``predict_strategy`` lays out must be laid out so in ``network``."""
    if predict_strategy is None:
        return
    if not isinstance(predict_strategy, dict):
        raise TypeError("load_distributed_checkpoint: predict_strategy must be the dict "
                        "Model.infer_predict_layout returns, or None")
    params = dict(network.parameters_and_names())
    by_name = {p.name: p for p in params.values()}
    for name, layout in predict_strategy.items():
        param = by_name.get(name, params.get(name))
        if param is None:
            raise ValueError(f"load_distributed_checkpoint: predict_strategy lays out {name!r}, "
                             "which the network does not have")
        have = getattr(param, "sharding_layout", None)
        if have is not None and have != layout:
            raise ValueError(f"load_distributed_checkpoint: {name!r} is laid out as {have} in "
                             f"the network but as {layout} in predict_strategy; call "
                             "Model.infer_predict_layout on this network again")


def load_distributed_checkpoint(network, checkpoint_filenames=None, predict_strategy=None,
                                train_strategy_filename=None, strict_load=False,
                                max_process_num=64, **options):
    """Load the training ranks' files ``checkpoint_filenames`` (rank order) into
    ``network`` (module docstring). ``train_strategy_filename`` defaults to the context's
    strategy load file; without either, the files must hold whole tensors."""
    from ..nn.cell import Cell
    from ..tensor import Tensor
    from ..train.checkpoint import load_param_into_net
    owner = "load_distributed_checkpoint"
    _refuse_unsupported(options)
    if max_process_num != 64:       # the merge runs in this process: same values
        _once("load_distributed_checkpoint.max_process_num", "load_distributed_checkpoint: "
              f"max_process_num={max_process_num} is served by one process")
    if not isinstance(network, Cell):
        raise TypeError(f"{owner}: network must be a Cell, got {type(network).__name__}")
    if not isinstance(checkpoint_filenames, (list, tuple)) or not checkpoint_filenames \
            or not all(isinstance(f, str) for f in checkpoint_filenames):
        raise TypeError(f"{owner}: checkpoint_filenames must be a non-empty list of file paths "
                        "(rank 0's first)")
    if train_strategy_filename is None:     # strategy_ckpt_config's load_file, or the older key
        train_strategy_filename = strategy_ckpt_files()[1] or None
    src = _strategy(train_strategy_filename, "train_strategy_filename", owner)
    src_world = strategy_world(src, "training strategy", owner)
    if src and len(checkpoint_filenames) != src_world:
        raise ValueError(f"{owner}: the training strategy lays parameters over {src_world} "
                         f"ranks, but {len(checkpoint_filenames)} checkpoint files were given")
    check_same_shapes(src, predict_strategy, owner)
    _check_predict_strategy(network, predict_strategy)
    files = dict(enumerate(checkpoint_filenames))
    whole = transformed_entries(0, files, src or {}, {}, src_world, 1, owner)
    values = {name: Tensor(value) for name, value in whole.items() if not isinstance(value, str)}
    return load_param_into_net(network, values, strict_load=strict_load)
