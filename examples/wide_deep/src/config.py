"""Command-line options of the Wide&Deep example, with the names of MindSpore's
``default_config.yaml`` (``--data_path``, ``--epochs``, ``--batch_size``, ``--host_device_mix``,
...). The defaults are sized for the small synthetic Criteo set on a laptop; MindSpore's
defaults for the real Criteo set are in brackets in ``--help``."""
import argparse
import os

EXAMPLE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA_PATH = os.path.join(os.path.dirname(EXAMPLE_DIR), "output", "wide_deep_data")


def _flag(text):
    """0/1/true/false for MindSpore's integer and boolean switches."""
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected 0/1 or True/False, got {text!r}")


def argparse_init():
    """The parser; ``parse_config(argv)`` also fills in the derived values."""
    parser = argparse.ArgumentParser(
        description="Wide&Deep on Criteo-format click logs (minitorch_dist port of MindSpore's "
                    "official/recommend/Wide_and_Deep)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    data = parser.add_argument_group("data")
    data.add_argument("--data_path", "--data-path", "--data-dir", "--data_dir", default=None,
                      help="folder with train.txt and test.txt in Criteo's tab-separated format; "
                           "it must exist (the script never invents data in place of a path you "
                           "gave). Left out: a synthetic set in " + DEFAULT_DATA_PATH)
    data.add_argument("--synthetic_data", "--synthetic-data", type=_flag, nargs="?", const=True, default=False,
                      help="1: use (and if needed write) a synthetic set in --data_path; the "
                           "default when --data_path is left out")
    data.add_argument("--train_rows", "--train-rows", type=int, default=None,
                      help="rows of the synthetic training split (default 60000 when it is "
                           "written; a value other than the existing set's rewrites it)")
    data.add_argument("--test_rows", "--test-rows", type=int, default=None,
                      help="rows of the synthetic held-out split (default 10000)")
    data.add_argument("--data_seed", "--data-seed", type=int, default=None,
                      help="the planted model's seed for the synthetic set (default 0)")
    data.add_argument("--threshold", type=int, default=5,
                      help="occurrences a categorical value needs in train.txt to get its own id "
                           "[MindSpore's preprocessing: 100 on 45M rows]")
    train = parser.add_argument_group("training")
    train.add_argument("--device_target", "--device-target", default="GPU", choices=["CPU", "GPU"],
                       help="where the network runs; without a real GPU, 'GPU' is the virtual GPU "
                            "(MINITORCH_DIST_VIRTUAL_GPU=1, set by this script)")
    train.add_argument("--epochs", type=int, default=5, help="training epochs [15]")
    train.add_argument("--batch_size", "--batch-size", type=int, default=500,
                       help="rows per step on each rank [16000]")
    train.add_argument("--eval_batch_size", "--eval-batch-size", type=int, default=4000, help="rows per evaluation batch")
    train.add_argument("--host_device_mix", "--host-device-mix", type=_flag, default=False,
                       help="1: tables, lookups and both optimizers on the host, the MLP and the "
                            "loss on the device (MindSpore's host-device Wide&Deep)")
    train.add_argument("--sparse", type=_flag, default=False,
                       help="sparse table gradients (RowTensor) and lazy Adam; forced on by "
                            "--host_device_mix 1")
    train.add_argument("--table_slice_mode", "--table-slice-mode", default="batch", choices=["batch", "row"],
                       help="EmbeddingLookup slice_mode: batch_slice or table_row_slice")
    train.add_argument("--wide_lr", "--wide-lr", type=float, default=5e-2, help="FTRL learning rate [5e-2]")
    train.add_argument("--deep_lr", "--deep-lr", type=float, default=3.5e-4, help="Adam learning rate [3.5e-4]")
    train.add_argument("--sens", type=float, default=1024.0, help="fixed loss scale [1024]")
    train.add_argument("--l2_coef", "--l2-coef", type=float, default=8e-5,
                       help="L2 on the deep table (dropped with sparse tables) [8e-5]")
    train.add_argument("--seed", type=int, default=1, help="ms.set_seed")
    model = parser.add_argument_group("model")
    model.add_argument("--vocab_size", "--vocab-size", type=int, default=None,
                       help="embedding table rows (default: the vocabulary of train.txt; a larger "
                            "value makes a bigger table) [200000]")
    model.add_argument("--emb_dim", "--emb-dim", type=int, default=8, help="deep embedding width [80]")
    model.add_argument("--deep_layer_dim", "--deep-layer-dim", type=int, nargs="+", default=[64, 32],
                       help="hidden widths of the deep MLP [1024 512 256 128]")
    model.add_argument("--deep_layer_act", "--deep-layer-act", default="relu", choices=["relu", "sigmoid", "tanh"])
    model.add_argument("--keep_prob", "--keep-prob", type=float, default=1.0, help="dropout keep probability")
    model.add_argument("--dropout_flag", "--dropout-flag", type=_flag, default=False, help="dropout in the deep MLP")
    output = parser.add_argument_group("output")
    output.add_argument("--print_every", "--print-every", type=int, default=20,
                        help="print the losses every N steps (0: never) [1]")
    output.add_argument("--eval_every", "--eval-every", type=int, default=1,
                        help="evaluate AUC on test.txt every N epochs (0: only at the end)")
    output.add_argument("--loss_file_name", "--loss-file-name", default="",
                        help="also write each rank's loss lines to OUTPUT_PATH/rank_<r>/<this name>")
    output.add_argument("--output_path", "--output-path", default=os.path.join(os.path.dirname(EXAMPLE_DIR), "output",
                                                              "wide_deep"),
                        help="where loss files go")
    output.add_argument("--placement_report", "--placement-report", type=_flag, default=False,
                        help="print ms.placement_report() and the transfer counters at the end")
    return parser


def parse_config(argv=None):
    """Parsed options; ``field_size`` (39: 13 integer + 26 categorical Criteo fields) added.

    Without ``--data_path`` the synthetic set in ``DEFAULT_DATA_PATH`` is used
    (``synthetic_data`` becomes True); with it, ``check_data_path`` must find the files unless
    ``--synthetic_data 1`` asks for a synthetic set there."""
    config = argparse_init().parse_args(argv)
    if config.data_path is None:
        config.data_path, config.synthetic_data = DEFAULT_DATA_PATH, True
    config.field_size = 39
    if config.host_device_mix:
        config.sparse = True          # as MindSpore's config loader does
    for name in ("epochs", "batch_size", "eval_batch_size", "emb_dim"):
        if getattr(config, name) < 1:
            raise SystemExit(f"--{name} must be >= 1, got {getattr(config, name)}")
    if not 0 < config.keep_prob <= 1:
        raise SystemExit(f"--keep_prob must lie in (0, 1], got {config.keep_prob}")
    return config


def check_data_path(config):
    """Refuse a ``--data_path`` without Criteo files (unless synthetic data was asked for):
    a clear ``SystemExit`` instead of a synthetic set written in place of the user's data.
    Returns a one-line description of the data used."""
    path = config.data_path
    if config.synthetic_data:
        return f"synthetic Criteo set in {path} (a planted click model; see generate_synthetic_data.py)"
    missing = [name for name in ("train", "test")
               if not any(os.path.exists(os.path.join(path, name + suffix))
                          for suffix in (".txt", ".txt.gz", ""))]
    if not os.path.isdir(path) or missing:
        what = "does not exist" if not os.path.isdir(path) else \
            "has no " + " and no ".join(f"{name}.txt" for name in missing)
        raise SystemExit(f"--data_path {path} {what}: expected train.txt and test.txt in "
                         "Criteo's tab-separated format (or .txt.gz files, or folders train/ "
                         "and test/). Leave --data_path out to train on a synthetic set, or add "
                         "--synthetic_data 1 to write one into this folder.")
    return f"Criteo files in {path}"
