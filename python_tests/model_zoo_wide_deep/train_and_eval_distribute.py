"""Data-parallel training and evaluation, as upstream's ``train_and_eval_distribute.py``: every
rank reads its shard of the data, ``TrainStepWrap`` all-reduces the gradients (mean) through
two ``DistributedGradReducer``s, rank 0 saves checkpoints.

    python -m minitorch_dist.run -n 2 python_tests/model_zoo_wide_deep/train_and_eval_distribute.py \\
        --device_target=CPU --data_path=DIR --epochs=1 --batch_size=1000 --vocab_size=20000
"""
import os
import sys

if __package__ in (None, ""):      # run as a script: import the package from python_tests/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minitorch_dist import Model, context  # noqa: E402
from minitorch_dist.train.callback import ModelCheckpoint, CheckpointConfig, TimeMonitor  # noqa: E402
from minitorch_dist.context import ParallelMode  # noqa: E402
from minitorch_dist.communication.management import get_rank, get_group_size, init  # noqa: E402
from minitorch_dist.common import set_seed  # noqa: E402

from model_zoo_wide_deep.src.wide_and_deep import (PredictWithSigmoid, TrainStepWrap,  # noqa: E402
                                                   NetWithLossClass, WideDeepModel)
from model_zoo_wide_deep.src.callbacks import LossCallBack, EvalCallBack  # noqa: E402
from model_zoo_wide_deep.src.datasets import create_dataset, dataset_type_of  # noqa: E402
from model_zoo_wide_deep.src.metrics import AUCMetric  # noqa: E402
from model_zoo_wide_deep.src.config import get_config  # noqa: E402
from model_zoo_wide_deep.src.results import save_result  # noqa: E402


def get_WideDeep_net(config):
    """(train_net, eval_net) of the Wide&Deep model."""
    WideDeep_net = WideDeepModel(config)
    loss_net = NetWithLossClass(WideDeep_net, config)
    train_net = TrainStepWrap(loss_net, sparse=config.sparse)
    eval_net = PredictWithSigmoid(WideDeep_net)
    return train_net, eval_net


def train_and_eval(config):
    """Train and evaluate on this rank's shard; returns (train_net, loss cb, eval cb)."""
    set_seed(1000)
    sparse = config.sparse
    dataset_type = dataset_type_of(config)
    print("epochs is {}".format(config.epochs))
    shard = {"rank_id": get_rank(), "rank_size": get_group_size()}
    ds_train = create_dataset(config.data_path, train_mode=True, batch_size=config.batch_size,
                              data_type=dataset_type, line_per_sample=config.line_per_sample, **shard)
    ds_eval = create_dataset(config.data_path, train_mode=False, batch_size=config.batch_size,
                             data_type=dataset_type, line_per_sample=config.line_per_sample, **shard)
    print("ds_train.size: {}".format(ds_train.get_dataset_size()))
    print("ds_eval.size: {}".format(ds_eval.get_dataset_size()))

    train_net, eval_net = get_WideDeep_net(config)
    train_net.set_train()
    auc_metric = AUCMetric()
    model = Model(train_net, eval_network=eval_net, metrics={"auc": auc_metric})
    eval_callback = EvalCallBack(model, ds_eval, auc_metric, config)
    callback = LossCallBack(config=config)
    ckptconfig = CheckpointConfig(save_checkpoint_steps=ds_train.get_dataset_size(), keep_checkpoint_max=5)
    ckpoint_cb = ModelCheckpoint(prefix='widedeep_train',
                                 directory=config.ckpt_path + '/ckpt_' + str(get_rank()) + '/', config=ckptconfig)
    out = model.eval(ds_eval, dataset_sink_mode=(not sparse))
    print("=====" * 5 + "model.eval() initialized: {}".format(out))
    callback_list = [TimeMonitor(ds_train.get_dataset_size()), eval_callback, callback]
    if get_rank() == 0:
        callback_list.append(ckpoint_cb)
    model.train(config.epochs, ds_train, callbacks=callback_list,
                sink_size=ds_train.get_dataset_size(), dataset_sink_mode=(not sparse))
    return train_net, callback, eval_callback


def set_up(config):
    """Upstream's ``train_wide_and_deep`` before training: init, DATA_PARALLEL with mean gradients."""
    context.set_context(mode=context.GRAPH_MODE, device_target=config.device_target)
    if config.device_target == "GPU":
        context.set_context(enable_graph_kernel=True)
        context.set_context(graph_kernel_flags="--enable_cluster_ops=MatMul")
    init()
    context.set_context(save_graphs_path='./graphs_of_device_id_' + str(get_rank()))
    context.set_auto_parallel_context(parallel_mode=ParallelMode.DATA_PARALLEL, gradients_mean=True,
                                      device_num=get_group_size(), all_reduce_fusion_config=[6, 12])


def main(config):
    """Set up the context (:func:`set_up`), train and evaluate, save the result."""
    set_up(config)
    train_net, loss_cb, eval_cb = train_and_eval(config)
    save_result(config, train_net, loss_cb, eval_cb, rank=get_rank())
    return train_net, loss_cb, eval_cb


if __name__ == "__main__":
    main(get_config(sys.argv[1:]))
