"""The Wide&Deep configuration without PyYAML: upstream's ``default_config.yaml`` values as a
plain object, and its command line (one ``--name=value`` option per scalar setting).

Upstream reads the YAML, adds an argparse option per scalar key (``bool`` options parsed with
``ast.literal_eval``), merges, and then turns ``sparse`` on when ``host_device_mix == 1``;
:func:`get_config` does the same from :data:`DEFAULTS`.

>>> cfg = get_config(["--host_device_mix=1", "--vocab_size=500"])
>>> cfg.sparse, cfg.vocab_size, cfg.deep_layer_dim
(True, 500, [1024, 512, 256, 128])
>>> get_config(["--deep_layer_dim=[64, 32, 16, 8]"], emb_dim=8).deep_layer_dim
[64, 32, 16, 8]
"""
import argparse
import ast
import copy
from pprint import pformat

# The training settings of upstream's default_config.yaml (the ModelArts, export and
# preprocessing keys are left out), plus ``result_file`` for tests: where an entry program
# saves its losses, AUC and parameters (empty: nowhere).
DEFAULTS = {
    "data_path": "/cache/data", "output_path": "/cache/train", "device_target": "Ascend",
    "epochs": 15, "full_batch": False, "batch_size": 16000, "eval_batch_size": 16000,
    "field_size": 39, "vocab_size": 200000, "vocab_cache_size": 0, "emb_dim": 80,
    "deep_layer_dim": [1024, 512, 256, 128], "deep_layer_act": "relu", "keep_prob": 1.0,
    "dropout_flag": False, "ckpt_path": "./ckpt", "stra_ckpt": "./checkpoints",
    "eval_file_name": "eval.log", "loss_file_name": "loss.log", "host_device_mix": 0,
    "dataset_type": "mindrecord", "parameter_server": 0, "field_slice": False, "sparse": False,
    "use_sp": True, "deep_table_slice_mode": "column_slice",
    "weight_bias_init": ["normal", "normal"], "emb_init": "normal", "init_args": [-0.01, 0.01],
    "l2_coef": 0.00008, "manual_shape": None, "line_per_sample": 1000, "result_file": "",
}
CHOICES = {"device_target": ["Ascend", "GPU", "CPU"],
           "dataset_type": ["tfrecord", "mindrecord", "hd5"],
           "deep_table_slice_mode": ["column_slice", "row_slice"]}


class Config:
    """Settings as attributes (upstream's ``Config``: a dict turned into members)."""

    def __init__(self, cfg_dict):
        for key, value in cfg_dict.items():
            setattr(self, key, copy.deepcopy(value))

    def __str__(self):
        return pformat(self.__dict__)

    __repr__ = __str__


def _parser():
    parser = argparse.ArgumentParser(description="Wide&Deep (test version of the models repository's)")
    for key, value in DEFAULTS.items():
        if value is None:
            continue
        # Lists (deep_layer_dim, ...) are Python literals here: --deep_layer_dim=[64,32,16,8];
        # upstream offers no command-line option for them.
        kind = ast.literal_eval if isinstance(value, (bool, list)) else type(value)
        parser.add_argument("--" + key, type=kind, default=value, choices=CHOICES.get(key))
    return parser


def get_config(argv=None, **overrides):
    """The configuration from the defaults, the command line ``argv`` and ``overrides``.

    As upstream, ``host_device_mix == 1`` turns ``sparse`` on. An unknown override is an
    error (a typo would otherwise leave the default in place silently).
    """
    args = vars(_parser().parse_args([] if argv is None else argv))
    settings = dict(DEFAULTS)
    settings.update(args)
    unknown = sorted(set(overrides) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"get_config: unknown settings {unknown}; expected names from DEFAULTS")
    settings.update(overrides)
    config = Config(settings)
    if config.host_device_mix == 1:
        config.sparse = True
    return config
