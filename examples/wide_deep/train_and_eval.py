"""Wide&Deep training and evaluation (MindSpore's ``official/recommend/Wide_and_Deep``), host-device
or data parallel, on Criteo-format click logs.

    python examples/wide_deep/train_and_eval.py --host_device_mix 1
    python -m minitorch_dist.run -n 2 examples/wide_deep/train_and_eval.py --host_device_mix 1

Without ``--data_path`` (or with ``--synthetic_data 1``) a small synthetic Criteo set is used,
written first if needed (see ``generate_synthetic_data.py``), drawn from a planted click model
whose own AUC on the held-out lines (the oracle) is printed next to the model's. A
``--data_path`` without Criteo files is an error: the script never invents data in place of
a path the user gave. The first line printed says which data is used. With ``--host_device_mix 1`` the
embedding tables, their lookups and both optimizers (FTRL, lazy Adam) run on the host and
the MLP and the loss on the device ("GPU": a real one through CuPy, else the virtual GPU).
Under the launcher every rank trains on its shard of train.txt and the gradients are
averaged (``DistributedGradReducer``); rank 0 prints.
"""
import hashlib
import os
import sys
import time

if "MINITORCH_DIST_VIRTUAL_GPU" not in os.environ:
    os.environ["MINITORCH_DIST_VIRTUAL_GPU"] = \
        "0" if __import__("minitorch_dist.backend").backend.cupy_or_none() else "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np                                                    # noqa: E402

import minitorch_dist as ms                                           # noqa: E402
from minitorch_dist import log                                        # noqa: E402
from minitorch_dist.communication import get_communicator, get_group_size, get_rank, init  # noqa: E402
from minitorch_dist.train import Auc, Model                          # noqa: E402

from generate_synthetic_data import ensure_synthetic_data, oracle_auc  # noqa: E402
from src.callbacks import EvalCallBack, LossCallBack                  # noqa: E402
from src.config import check_data_path, parse_config                   # noqa: E402
from src.datasets import create_dataset                               # noqa: E402
from src.wide_and_deep import (NetWithLossClass, PredictWithSigmoid,  # noqa: E402
                               TrainStepWrap, WideDeepModel)


def get_WideDeep_net(config):
    """``(train_net, eval_net)``: the training step and the evaluation network of one model."""
    WideDeep_net = WideDeepModel(config)
    loss_net = NetWithLossClass(WideDeep_net, config)
    train_net = TrainStepWrap(loss_net, sens=config.sens, host_device_mix=bool(config.host_device_mix),
                              sparse=config.sparse, wide_lr=config.wide_lr, deep_lr=config.deep_lr)
    eval_net = PredictWithSigmoid(WideDeep_net)
    return train_net, eval_net


def parameter_digest(net):
    """A short hash of every parameter's bytes (identical replicas give identical digests)."""
    digest = hashlib.sha1()
    for param in net.get_parameters():
        digest.update(np.ascontiguousarray(param.asnumpy()).tobytes())
    return digest.hexdigest()[:16]


def train_and_eval(config):
    """Train ``config.epochs`` epochs, evaluating AUC as ``config.eval_every`` says; returns
    ``(model, loss callback, eval callback)``."""
    data_source = check_data_path(config)      # before anything is written or started
    log.rank0_progress_only()   # under the launcher: rank 0's lines only (all in the logs)
    init()
    rank_id, rank_size = get_rank(), get_group_size()
    ms.set_context(mode=ms.GRAPH_MODE, device_target=config.device_target)
    if rank_size > 1:
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    ms.set_seed(config.seed)
    if rank_id == 0:
        print(f"data: {data_source}", flush=True)
        if config.synthetic_data:
            ensure_synthetic_data(config.data_path, config.train_rows, config.test_rows,
                                  config.data_seed)
    if rank_size > 1:
        get_communicator().barrier()            # rank 0 has written the data
    verbose = rank_id == 0

    ds_train = create_dataset(config.data_path, train_mode=True, epochs=1, batch_size=config.batch_size,
                              rank_size=rank_size, rank_id=rank_id, threshold=config.threshold)
    ds_eval = create_dataset(config.data_path, train_mode=False, epochs=1,
                             batch_size=config.eval_batch_size, vocab=ds_train.vocab)
    if config.vocab_size is None:
        config.vocab_size = ds_train.vocab_size
    elif config.vocab_size < ds_train.vocab_size:
        raise SystemExit(f"--vocab_size {config.vocab_size} is smaller than the vocabulary of "
                         f"train.txt ({ds_train.vocab_size} ids)")
    oracle = oracle_auc(config.data_path)
    if verbose:
        table_mib = config.vocab_size * (config.emb_dim + 1) * 4 / 2 ** 20
        print(f"Wide&Deep: {ds_train.num_rows} training rows on {rank_size} rank(s), "
              f"{ds_train.get_dataset_size()} steps of {config.batch_size} per epoch; vocab_size "
              f"{config.vocab_size} (tables {table_mib:.2f} MiB); host_device_mix="
              f"{int(config.host_device_mix)}, device_target={config.device_target}", flush=True)
        if oracle is not None:
            print(f"planted model's oracle AUC on test.txt: {oracle:.4f}", flush=True)

    train_net, eval_net = get_WideDeep_net(config)
    train_net.set_train()
    model = Model(train_net, eval_network=eval_net, eval_indexes=[0, 1, 2], metrics={"auc": Auc()})
    loss_file = (os.path.join(config.output_path, f"rank_{rank_id}", config.loss_file_name)
                 if config.loss_file_name else None)
    if loss_file and os.path.exists(loss_file):
        os.remove(loss_file)
    loss_callback = LossCallBack(config.print_every, loss_file=loss_file, verbose=verbose)
    eval_callback = EvalCallBack(model, ds_eval, config.eval_every, oracle, verbose=verbose)
    ms.reset_transfer_stats()
    ms.reset_placement_stats()
    start = time.perf_counter()
    model.train(config.epochs, ds_train, callbacks=[loss_callback, eval_callback],
                dataset_sink_mode=not config.host_device_mix)
    seconds = time.perf_counter() - start

    steps = len(loss_callback.history)
    if verbose:
        print(f"trained {steps} steps in {seconds:.1f}s ({1e3 * seconds / steps:.1f} ms/step, "
              "evaluation included)", flush=True)
        auc = eval_callback.results[-1][1]
        if oracle is not None:
            print(f"final eval auc: {auc:.4f}; planted model's oracle auc: {oracle:.4f} "
                  f"(gap {oracle - auc:.4f})", flush=True)
        if config.placement_report:
            print(ms.placement_report())
            stats = ms.transfer_stats()
            print(f"per training step (evaluation included): host->device "
                  f"{stats['host_to_device'] / steps:.0f} bytes, device->host "
                  f"{stats['device_to_host'] / steps:.0f} bytes; the two tables hold "
                  f"{config.vocab_size * (config.emb_dim + 1) * 4} bytes")
    if rank_size > 1:
        print(f"rank {rank_id}/{rank_size}: parameter digest {parameter_digest(train_net)}", flush=True)
    return model, loss_callback, eval_callback


if __name__ == "__main__":
    train_and_eval(parse_config())
