"""``set_auto_parallel_context(strategy_ckpt_config={...})``: where the strategy file of a
sharded run is written and read (MindSpore's dict option, which supersedes the older
``strategy_ckpt_save_file``/``strategy_ckpt_load_file``).

* ``save_file``: after every plan, the layouts of the sliced parameters are written there
  (the file ``transform_checkpoints`` and ``load_distributed_checkpoint`` read);
* ``load_file``: every plan is checked against it (``strategy_file.check_strategy_file``);
* ``only_trainable_params`` (default True): the saved file lists the trainable parameters
  only; False adds the sliced parameters that are not trained.

In a pipelined job (``pipeline_stages > 1``) the pipeline does both for the rank's stage
(``strategy_ckpt_pipeline``): ``save_file`` receives the stage's file (merge the stages'
files with ``merge_pipeline_strategys``), and the stage's plan is checked against
``load_file``.

An empty file name leaves the older option of that name in force.
"""
from .context import get_auto_parallel_context
from .sharding.strategy_file import check_strategy_file, write_strategy_file
from .strategy_ckpt_options import DEFAULT_STRATEGY_CKPT_CONFIG, check_strategy_ckpt_config

__all__ = ["DEFAULT_STRATEGY_CKPT_CONFIG", "check_strategy_ckpt_config", "strategy_ckpt_files",
           "save_and_check_strategy"]


def _config():
    try:
        return get_auto_parallel_context("strategy_ckpt_config")
    except ValueError:          # a context that does not have the option yet
        return dict(DEFAULT_STRATEGY_CKPT_CONFIG)


def strategy_ckpt_files():
    """``(save file, load file, only_trainable_params)`` in force ("" for none)."""
    config = check_strategy_ckpt_config(_config())     # a scoped value may be partial
    save = config["save_file"] or get_auto_parallel_context("strategy_ckpt_save_file")
    load = config["load_file"] or get_auto_parallel_context("strategy_ckpt_load_file")
    return save, load, config["only_trainable_params"]


def save_and_check_strategy():
    """After a plan: write the strategy file, and check the plan against the loaded one."""
    save, load, only_trainable = strategy_ckpt_files()
    if get_auto_parallel_context("pipeline_stages") > 1:
        return          # a stage's cell planned: the pipeline handles the whole stage's files
    if save:
        write_strategy_file(save, only_trainable)
    if load:
        check_strategy_file(load)
