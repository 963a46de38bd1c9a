"""The ``strategy_ckpt_config`` option's value: its keys, defaults and check (kept apart from
``strategy_ckpt.py`` so that the auto-parallel context can check it without importing the
sharding layer)."""

__all__ = ["DEFAULT_STRATEGY_CKPT_CONFIG", "check_strategy_ckpt_config"]

DEFAULT_STRATEGY_CKPT_CONFIG = {"load_file": "", "save_file": "", "only_trainable_params": True}


def check_strategy_ckpt_config(value):
    """The full config (defaults filled in) of a ``strategy_ckpt_config`` value; anything
    else is a ``ValueError`` naming the key and what it takes."""
    if not isinstance(value, dict):
        raise ValueError("strategy_ckpt_config must be a dict such as {'save_file': "
                         f"'./strategy.ckpt'}}, got {type(value).__name__}")
    unknown = sorted(set(value) - set(DEFAULT_STRATEGY_CKPT_CONFIG))
    if unknown:
        raise ValueError(f"strategy_ckpt_config: unknown key(s) {unknown}; expected "
                         f"{sorted(DEFAULT_STRATEGY_CKPT_CONFIG)}")
    for key in ("load_file", "save_file"):
        if key in value and not isinstance(value[key], str):
            raise ValueError(f"strategy_ckpt_config: {key} must be a file path (str), got "
                             f"{value[key]!r}")
    if not isinstance(value.get("only_trainable_params", True), bool):
        raise ValueError("strategy_ckpt_config: only_trainable_params must be True or False, "
                         f"got {value['only_trainable_params']!r}")
    return dict(DEFAULT_STRATEGY_CKPT_CONFIG, **value)
