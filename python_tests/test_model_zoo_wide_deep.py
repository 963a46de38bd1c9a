"""The models repository's Wide&Deep as a test version with MindSpore's names
(python_tests/model_zoo_wide_deep/, issue 15): standalone in-process, data parallel on 2 MPI
ranks, and auto parallel with host_device_mix=1 on 2 MPI ranks over the virtual GPU (seed
001's command). Each trains on small MindRecord data, its loss falls, it prints the AUC and
its ranks agree; under host_device_mix=1 the placement report puts the tables, their lookups
and both optimizers on the host and the MLP on the device."""
import os
import re

import numpy as np
import pytest

import minitorch_dist as ms
import minitorch_dist.dataset as ds

from mpi_jobs import launch, needs_mpi
from model_zoo_wide_deep import train_and_eval
from model_zoo_wide_deep.src.config import get_config
from model_zoo_wide_deep.src.preprocess import write_criteo_mindrecord
from model_zoo_wide_deep.src.results import load_result

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_zoo_wide_deep")
VOCAB, EMB_DIM, LAYERS = 800, 8, "[32,16,8,4]"
TRAIN_RECORDS, LINES = 40, 100          # records of 100 lines, batches of 2 records
AUC_LINE = re.compile(r"^=+ auc: ([0-9.]+)$", re.M)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """46 records of 100 synthetic Criteo lines: 40 to train on, 6 to evaluate."""
    root = tmp_path_factory.mktemp("wide_deep_zoo")
    ds.write_synthetic_criteo(str(root / "train.txt"), 4600, seed=1)
    counts = write_criteo_mindrecord(str(root / "train.txt"), str(root / "mindrecord"), line_per_sample=LINES,
                                     threshold=10, test_size=0.12)
    assert counts["train_records"] == TRAIN_RECORDS and counts["test_records"] == 6
    assert counts["vocab_size"] <= VOCAB
    return str(root / "mindrecord")


def _args(data, out):
    """Upstream's command line at test size; every file the program writes goes under ``out``."""
    return [f"--data_path={data}", "--epochs=1", f"--batch_size={2 * LINES}", f"--line_per_sample={LINES}",
            f"--vocab_size={VOCAB}", f"--emb_dim={EMB_DIM}", f"--deep_layer_dim={LAYERS}",
            f"--ckpt_path={out}/ckpt", f"--stra_ckpt={out}/checkpoints", f"--loss_file_name={out}/loss.log",
            f"--eval_file_name={out}/eval.log", f"--result_file={out}/result{{rank}}.npz"]


def _assert_loss_falls(losses, steps):
    wide = np.asarray(losses)[:, 0]
    assert len(wide) == steps and np.isfinite(losses).all()
    assert wide[-3:].mean() < wide[:3].mean() - 0.02, wide


def _assert_optimizer_split(result):
    """FTRL takes exactly the parameters with 'wide' in their name, Adam all the others."""
    names = set(result["params"])
    assert len(names) == 13            # Wide_b, two tables, five (weight, bias) pairs
    assert set(result["optimizer_w"]) == {n for n in names if "wide" in n}
    assert set(result["optimizer_d"]) == {n for n in names if "wide" not in n}
    assert any("wide_embeddinglookup.embedding_table" in n for n in result["optimizer_w"])


def test_standalone_trains_improves_auc_and_writes_its_logs(tmp_path, data_dir, capsys):
    ms.set_seed(1)
    config = get_config(["--device_target=CPU", *_args(data_dir, tmp_path)])
    try:
        train_net, loss_cb, eval_cb = train_and_eval.main(config)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    out = capsys.readouterr().out
    _assert_loss_falls([row[2:] for row in loss_cb.losses], TRAIN_RECORDS // 2)
    aucs = [float(a) for a in AUC_LINE.findall(out)]
    assert len(aucs) == 2                       # before training, and at the epoch's end
    assert eval_cb.eval_values == [aucs[1]] and aucs[1] > max(aucs[0], 0.5), aucs
    assert "===loss=== 0 1 20 " in out
    assert len(open(tmp_path / "loss.log").read().splitlines()) == TRAIN_RECORDS // 2
    assert "EvalCallBack model.eval()" in open(tmp_path / "eval.log").read()
    assert os.path.exists(tmp_path / "ckpt" / "widedeep_train-1_20.ckpt")
    result = load_result(str(tmp_path / "result0.npz"))
    _assert_optimizer_split(result)
    # the float16 MLP still keeps float32 parameters; the optimizers are FTRL and Adam
    assert all(p.dtype == ms.float32 for p in train_net.network.trainable_params())
    assert type(train_net.optimizer_w).__name__ == "FTRL" and type(train_net.optimizer_d).__name__ == "Adam"
    assert np.array_equal(result["params"]["network.wide_b"], train_net.network.network.wide_b.asnumpy())


@pytest.mark.mpi
@needs_mpi
def test_distribute_two_ranks_end_with_equal_parameters(tmp_path, data_dir):
    done, _ = launch(2, os.path.join(PACKAGE, "train_and_eval_distribute.py"), "--device_target=CPU",
                     *_args(data_dir, tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(AUC_LINE.findall(done.stdout)) == 4          # 2 ranks x (before, after)
    results = [load_result(str(tmp_path / f"result{rank}.npz")) for rank in (0, 1)]
    for result in results:
        _assert_loss_falls(result["losses"], TRAIN_RECORDS // 4)
        _assert_optimizer_split(result)
        assert 0.0 < result["eval_values"][0] < 1.0
    # each rank trained on its own shard, with all-reduced gradients: the same parameters.
    # Compared in the network's order: rank 0's checkpoint save renames two tables (see
    # test_saving_a_checkpoint_leaves_parameter_names_alone).
    assert not np.array_equal(results[0]["losses"], results[1]["losses"])
    for (name, value), (_, other) in zip(results[0]["param_list"], results[1]["param_list"], strict=True):
        assert np.array_equal(value, other), name
    # only rank 0 saves checkpoints (both make their directory, as MindSpore's ModelCheckpoint does)
    saved = {rank: [f for f in os.listdir(tmp_path / "ckpt" / f"ckpt_{rank}") if f.endswith(".ckpt")]
             for rank in (0, 1)}
    assert saved == {0: ["widedeep_train-1_10.ckpt"], 1: []}


@pytest.mark.mpi
@needs_mpi
def test_auto_parallel_host_device_mix_keeps_tables_and_optimizers_on_the_host(tmp_path, data_dir):
    done, _ = launch(2, os.path.join(PACKAGE, "train_and_eval_auto_parallel.py"), "--device_target=GPU",
                     "--dropout_flag=True", "--host_device_mix=1", *_args(data_dir, tmp_path),
                     env={"MINITORCH_DIST_VIRTUAL_GPU": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(AUC_LINE.findall(done.stdout)) == 2          # each rank at its epoch's end
    results = [load_result(str(tmp_path / f"result{rank}.npz")) for rank in (0, 1)]
    # one model over both ranks: every step's loss is the global batch's, the same on both
    assert np.array_equal(results[0]["losses"], results[1]["losses"])
    _assert_loss_falls(results[0]["losses"], TRAIN_RECORDS // 4)
    for rank, result in enumerate(results):
        _assert_optimizer_split(result)
        params = result["params"]
        wide = next(v for n, v in params.items() if n.endswith("wide_embeddinglookup.embedding_table"))
        deep = next(v for n, v in params.items() if "wide" not in n and n.endswith("embedding_table"))
        assert wide.shape == (VOCAB // 2, 1) and deep.shape == (VOCAB, EMB_DIM // 2)   # row / column slices
        devices = dict(map(tuple, result["placement"]["params"]))
        tables = {n: d for n, d in devices.items() if n.endswith("embedding_table")}
        assert len(tables) == 2 and set(tables.values()) == {"CPU"}, devices     # tables on the host
        assert devices["network.dense_layer_1.weight"] == "GPU:0", devices        # the MLP on the device
        ops = dict(map(tuple, result["placement"]["ops"]))
        lookups = {k: v for k, v in ops.items() if "(EmbeddingLookup)" in k}
        assert len(lookups) == 2 and set(lookups.values()) == {"CPU"}, ops
        matmuls = {k: v for k, v in ops.items() if k.startswith("network.dense_layer_") and "(MatMul)" in k}
        assert len(matmuls) == 5 and set(matmuls.values()) == {"GPU:0"}, ops
        updates = dict(map(tuple, result["placement"]["updates"]))
        assert len(updates) == 13 and set(updates.values()) == {"CPU"}, updates
        assert any(n.startswith("FTRL.") and n.endswith("wide_embeddinglookup.embedding_table") for n in updates)
        assert any(n.startswith("Adam.") and n.endswith("embedding_table") and "wide" not in n for n in updates)
    # no checkpoints under host_device_mix, as upstream
    assert not [f for _, _, files in os.walk(tmp_path / "ckpt") for f in files if f.endswith(".ckpt")]


def test_branches_and_inputs_outside_the_test_version_are_refused(data_dir):
    from model_zoo_wide_deep.src import wide_and_deep as wd
    from model_zoo_wide_deep.src.datasets import DataType, create_dataset
    small = ["--vocab_size=50", "--emb_dim=4", "--deep_layer_dim=[8,4,4,4]", "--batch_size=4"]
    with pytest.raises(NotImplementedError, match="field_slice and parameter_server"):
        wd.WideDeepModel(get_config(small + ["--field_slice=True"]))
    with pytest.raises(NotImplementedError, match="field_slice and parameter_server"):
        wd.WideDeepModel(get_config(small + ["--parameter_server=1"]))
    with pytest.raises(ValueError, match="unknown settings \\['vocab'\\]"):
        get_config(vocab=10)
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        wd.DenseLayer(4, 2, ["normal", "normal"], "gelu")
    with pytest.raises(ValueError, match="unknown method 'xavier'"):
        wd.init_method("xavier", [2], "w")
    with pytest.raises(ValueError, match="batch_size 150 must be a multiple of line_per_sample 100"):
        create_dataset(data_dir, batch_size=150, data_type=DataType.MINDRECORD, line_per_sample=LINES)
    with pytest.raises(NotImplementedError, match="use DataType.MINDRECORD"):
        create_dataset(data_dir, data_type=DataType.TFRECORD)
    with pytest.raises(ValueError, match="need at least 2"):
        write_criteo_mindrecord(os.path.join(os.path.dirname(data_dir), "train.txt"), data_dir + "_x",
                                line_per_sample=5000)


@pytest.mark.skipif(not os.environ.get("WIDE_DEEP_UPSTREAM"),
                    reason="WIDE_DEEP_UPSTREAM does not name upstream's Wide_and_Deep (imports changed)")
def test_same_names_optimizer_split_and_losses_as_upstream():
    from model_zoo_wide_deep.compare_upstream import compare
    for argv in ([], ["--sparse=True"], ["--dropout_flag=True"]):
        problems, losses, desc = compare(os.environ["WIDE_DEEP_UPSTREAM"], steps=4, argv=argv)
        assert problems == [], (argv, problems)
        assert len(desc["names"]) == 13 and len(losses["upstream"]) == 4


def test_saving_a_checkpoint_leaves_parameter_names_alone(tmp_path):
    """Regression: listing a cell's parameters renamed auto-named ones to the longest path,
    so a checkpoint save renamed both tables, on the ranks that save only."""
    config = get_config(["--vocab_size=50", "--emb_dim=4", "--deep_layer_dim=[8,4,4,4]", "--batch_size=4"])
    from model_zoo_wide_deep.src import wide_and_deep as wd
    model = wd.WideDeepModel(config)
    train_net = wd.TrainStepWrap(wd.NetWithLossClass(model, config))
    wd.PredictWithSigmoid(model)
    before = [p.name for p in model.trainable_params()]
    ms.save_checkpoint(train_net, str(tmp_path / "w.ckpt"))
    assert [p.name for p in model.trainable_params()] == before
