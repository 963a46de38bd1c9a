"""(Semi-)auto-parallel training and evaluation, as upstream's ``train_and_eval_auto_parallel.py``.

With ``sparse`` (set by ``host_device_mix=1``) and ``use_sp`` the job runs AUTO_PARALLEL with
sharding propagation: the wide table is row-sliced and the deep table column-sliced over the
ranks, the first MatMul split to match; under ``host_device_mix=1`` the tables, their
lookups and both optimizers stay on the host while the MLP runs on the device. Seed 001's
command (``MINITORCH_DIST_VIRTUAL_GPU=1`` stands in for a GPU):

    MINITORCH_DIST_VIRTUAL_GPU=1 python -m minitorch_dist.run -n 2 \\
        python_tests/model_zoo_wide_deep/train_and_eval_auto_parallel.py --device_target=GPU \\
        --dropout_flag=True --host_device_mix=1 --data_path=DIR --epochs=1 --batch_size=1000
"""
import os
import sys

if __package__ in (None, ""):      # run as a script: import the package from python_tests/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import minitorch_dist.dataset as ds  # noqa: E402
from minitorch_dist import Model, context  # noqa: E402
from minitorch_dist.train.callback import ModelCheckpoint, CheckpointConfig, TimeMonitor  # noqa: E402
from minitorch_dist.context import ParallelMode  # noqa: E402
from minitorch_dist.parallel import set_algo_parameters  # noqa: E402
from minitorch_dist.communication.management import get_rank, get_group_size, init  # noqa: E402

from model_zoo_wide_deep.src.wide_and_deep import (PredictWithSigmoid, TrainStepWrap,  # noqa: E402
                                                   NetWithLossClass, WideDeepModel)
from model_zoo_wide_deep.src.callbacks import LossCallBack, EvalCallBack  # noqa: E402
from model_zoo_wide_deep.src.datasets import create_dataset, dataset_type_of  # noqa: E402
from model_zoo_wide_deep.src.metrics import AUCMetric  # noqa: E402
from model_zoo_wide_deep.src.config import get_config  # noqa: E402
from model_zoo_wide_deep.src.results import save_result  # noqa: E402


def get_WideDeep_net(config):
    """(train_net, eval_net); the optimizers go to the host under host_device_mix."""
    WideDeep_net = WideDeepModel(config)
    loss_net = NetWithLossClass(WideDeep_net, config)
    train_net = TrainStepWrap(loss_net, host_device_mix=bool(config.host_device_mix), sparse=config.sparse)
    eval_net = PredictWithSigmoid(WideDeep_net)
    return train_net, eval_net


def train_and_eval(config):
    """Train and evaluate; returns (train_net, loss cb, eval cb)."""
    if config.field_slice:
        raise NotImplementedError("train_and_eval_auto_parallel (test version): field_slice is not part of it")
    dataset_type = dataset_type_of(config)
    host_device_mix = bool(config.host_device_mix)
    sparse = config.sparse
    print("epochs is {}".format(config.epochs))
    common = {"data_type": dataset_type, "line_per_sample": config.line_per_sample}
    if config.full_batch:         # every rank reads the whole (global) batch
        context.set_auto_parallel_context(full_batch=True)
        ds.config.set_seed(1)
        size = config.batch_size * get_group_size()
        ds_train = create_dataset(config.data_path, train_mode=True, batch_size=size, **common)
        ds_eval = create_dataset(config.data_path, train_mode=False, batch_size=size, **common)
    else:
        shard = {"rank_id": get_rank(), "rank_size": get_group_size()}
        ds_train = create_dataset(config.data_path, train_mode=True, batch_size=config.batch_size,
                                  **shard, **common)
        ds_eval = create_dataset(config.data_path, train_mode=False, batch_size=config.batch_size,
                                 **shard, **common)
    print("ds_train.size: {}".format(ds_train.get_dataset_size()))
    print("ds_eval.size: {}".format(ds_eval.get_dataset_size()))

    train_net, eval_net = get_WideDeep_net(config)
    train_net.set_train()
    auc_metric = AUCMetric()
    model = Model(train_net, eval_network=eval_net, metrics={"auc": auc_metric})
    # Strategy checkpoints per rank, named before the callbacks are made (as upstream).
    config.stra_ckpt = os.path.join(config.stra_ckpt + "-{}".format(get_rank()), "strategy.ckpt")
    eval_callback = EvalCallBack(model, ds_eval, auc_metric, config)
    callback = LossCallBack(config=config, per_print_times=20)
    ckptconfig = CheckpointConfig(save_checkpoint_steps=ds_train.get_dataset_size() * config.epochs,
                                  keep_checkpoint_max=5, integrated_save=False)
    ckpoint_cb = ModelCheckpoint(prefix='widedeep_train',
                                 directory=os.path.join(config.ckpt_path, 'ckpt_' + str(get_rank())),
                                 config=ckptconfig)
    context.set_auto_parallel_context(strategy_ckpt_save_file=config.stra_ckpt)
    callback_list = [TimeMonitor(ds_train.get_dataset_size()), eval_callback, callback]
    if not host_device_mix:
        callback_list.append(ckpoint_cb)
    model.train(config.epochs, ds_train, callbacks=callback_list, dataset_sink_mode=(not sparse))
    return train_net, callback, eval_callback


def set_up(config):
    """Upstream's ``train_wide_and_deep``: init, then AUTO_PARALLEL with sharding propagation
    (sparse, use_sp), SEMI_AUTO_PARALLEL (sparse) or AUTO_PARALLEL (dense)."""
    context.set_context(mode=context.GRAPH_MODE, device_target=config.device_target)
    if config.device_target == "GPU":
        context.set_context(enable_graph_kernel=True)
    context.set_context(max_device_memory="24GB")
    init()
    if config.sparse and config.use_sp:
        context.set_auto_parallel_context(parallel_mode=ParallelMode.AUTO_PARALLEL, enable_alltoall=True,
                                          search_mode="sharding_propagation", gradients_mean=True,
                                          strategy_ckpt_save_file='strategy.ckpt')
        set_algo_parameters(elementwise_op_strategy_follow=False, fully_use_devices=False)
    elif config.sparse:
        context.set_auto_parallel_context(parallel_mode=ParallelMode.SEMI_AUTO_PARALLEL, gradients_mean=True)
    else:
        context.set_auto_parallel_context(parallel_mode=ParallelMode.AUTO_PARALLEL, gradients_mean=True)


def main(config):
    """Set up the context (:func:`set_up`), train and evaluate, save the result."""
    set_up(config)
    train_net, loss_cb, eval_cb = train_and_eval(config)
    save_result(config, train_net, loss_cb, eval_cb, rank=get_rank())
    return train_net, loss_cb, eval_cb


if __name__ == "__main__":
    main(get_config(sys.argv[1:]))
