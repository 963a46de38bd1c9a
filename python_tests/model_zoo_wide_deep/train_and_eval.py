"""Standalone training and evaluation, as upstream's ``train_and_eval.py``: evaluate once,
train ``epochs`` epochs with the loss, evaluation, time and checkpoint callbacks.

    python python_tests/model_zoo_wide_deep/train_and_eval.py --device_target=CPU \\
        --data_path=DIR --epochs=1 --batch_size=1000 --vocab_size=20000
"""
import os
import sys

if __package__ in (None, ""):      # run as a script: import the package from python_tests/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minitorch_dist import Model, context  # noqa: E402
from minitorch_dist.train.callback import ModelCheckpoint, CheckpointConfig, TimeMonitor  # noqa: E402

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


def test_train_eval(config):
    """Train and evaluate; returns (train_net, loss callback, eval callback).

    (Upstream's name; ``__test__ = False`` below keeps pytest from collecting it.)
    """
    sparse = config.sparse
    dataset_type = dataset_type_of(config)
    ds_train = create_dataset(config.data_path, train_mode=True, batch_size=config.batch_size,
                              data_type=dataset_type, line_per_sample=config.line_per_sample)
    ds_eval = create_dataset(config.data_path, train_mode=False, batch_size=config.batch_size,
                             data_type=dataset_type, line_per_sample=config.line_per_sample)
    print("ds_train.size: {}".format(ds_train.get_dataset_size()))
    print("ds_eval.size: {}".format(ds_eval.get_dataset_size()))

    train_net, eval_net = get_WideDeep_net(config)
    train_net.set_train()
    auc_metric = AUCMetric()
    model = Model(train_net, eval_network=eval_net, metrics={"auc": auc_metric})
    eval_callback = EvalCallBack(model, ds_eval, auc_metric, config)
    callback = LossCallBack(config=config)
    ckptconfig = CheckpointConfig(save_checkpoint_steps=ds_train.get_dataset_size(), keep_checkpoint_max=5)
    ckpoint_cb = ModelCheckpoint(prefix='widedeep_train', directory=config.ckpt_path, config=ckptconfig)

    out = model.eval(ds_eval, dataset_sink_mode=(not sparse))
    print("=====" * 5 + "model.eval() initialized: {}".format(out))
    model.train(config.epochs, ds_train,
                callbacks=[TimeMonitor(ds_train.get_dataset_size()), eval_callback, callback, ckpoint_cb],
                dataset_sink_mode=(not sparse))
    return train_net, callback, eval_callback


test_train_eval.__test__ = False


def set_up(config):
    """Upstream's ``train_wide_and_deep``: GRAPH_MODE on ``config.device_target``, before training."""
    _enable_graph_kernel = config.device_target == "GPU"
    context.set_context(mode=context.GRAPH_MODE, enable_graph_kernel=_enable_graph_kernel,
                        device_target=config.device_target)
    if _enable_graph_kernel:
        context.set_context(graph_kernel_flags="--enable_cluster_ops=MatMul")


def main(config):
    """Set up the context (:func:`set_up`), train and evaluate, save the result."""
    set_up(config)
    train_net, loss_cb, eval_cb = test_train_eval(config)
    save_result(config, train_net, loss_cb, eval_cb)
    return train_net, loss_cb, eval_cb


if __name__ == "__main__":
    main(get_config(sys.argv[1:]))
