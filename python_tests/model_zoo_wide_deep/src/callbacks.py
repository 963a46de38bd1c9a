"""The training and evaluation callbacks of upstream Wide&Deep: ``LossCallBack`` prints
``===loss=== rank epoch step wide_loss deep_loss`` after every step (and appends a line to
``config.loss_file_name`` every ``per_print_times`` steps); ``EvalCallBack`` runs
``model.eval`` at the end of every epoch and appends its result to ``config.eval_file_name``.

Both also keep what they printed (``losses``, ``eval_values``) so tests can check it.
"""
import time

from minitorch_dist.train.callback import Callback
from minitorch_dist import context
from minitorch_dist.context import ParallelMode
from minitorch_dist.communication.management import get_rank

_RANKED = (ParallelMode.SEMI_AUTO_PARALLEL, ParallelMode.AUTO_PARALLEL, ParallelMode.DATA_PARALLEL)


def add_write(file_path, out_str):
    """Append one line to ``file_path``."""
    with open(file_path, 'a+', encoding="utf-8") as file_out:
        file_out.write(out_str + "\n")


def _rank_id():
    return get_rank() if context.get_auto_parallel_context("parallel_mode") in _RANKED else 0


class LossCallBack(Callback):
    """Print both losses after every step; ``per_print_times`` (>= 0, 0: never) sets how
    often a line also goes to ``config.loss_file_name`` (when a config is given)."""

    def __init__(self, config=None, per_print_times=1):
        super(LossCallBack, self).__init__()
        if not isinstance(per_print_times, int) or per_print_times < 0:
            raise ValueError("per_print_times must be in and >= 0.")
        self._per_print_times = per_print_times
        self.config = config
        self.losses = []      # (epoch, step in epoch, wide_loss, deep_loss) per step

    def step_end(self, run_context):
        cb_params = run_context.original_args()
        if cb_params.net_outputs is None:
            return
        wide_loss = cb_params.net_outputs[0].asnumpy()
        deep_loss = cb_params.net_outputs[1].asnumpy()
        cur_step_in_epoch = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
        cur_num = cb_params.cur_step_num
        self.losses.append((cb_params.cur_epoch_num, cur_step_in_epoch, float(wide_loss), float(deep_loss)))
        print("===loss===", _rank_id(), cb_params.cur_epoch_num, cur_step_in_epoch,
              wide_loss, deep_loss, flush=True)
        if self._per_print_times != 0 and cur_num % self._per_print_times == 0 and self.config is not None:
            line = "epoch: %s, step: %s, wide_loss: %s, deep_loss: %s" % (
                cb_params.cur_epoch_num, cur_step_in_epoch, wide_loss, deep_loss)
            add_write(self.config.loss_file_name, line)
            print(line)


class EvalCallBack(Callback):
    """Evaluate ``model`` on ``eval_dataset`` with ``auc_metric`` at each epoch's end."""

    def __init__(self, model, eval_dataset, auc_metric, config, print_per_step=1):
        super(EvalCallBack, self).__init__()
        if not isinstance(print_per_step, int) or print_per_step < 0:
            raise ValueError("print_per_step must be int and >= 0.")
        self.print_per_step = print_per_step
        self.model = model
        self.eval_dataset = eval_dataset
        self.aucMetric = auc_metric
        self.aucMetric.clear()
        self.eval_file_name = config.eval_file_name
        self.eval_values = []
        self.sparse = config.sparse
        self.config = config

    def epoch_end(self, run_context):
        self.aucMetric.clear()
        parallel_mode = context.get_auto_parallel_context("parallel_mode")
        if parallel_mode in (ParallelMode.SEMI_AUTO_PARALLEL, ParallelMode.AUTO_PARALLEL):
            context.set_auto_parallel_context(strategy_ckpt_save_file="",
                                              strategy_ckpt_load_file=self.config.stra_ckpt)
        enable_data_sink = not self.sparse or bool(self.config.parameter_server)
        start_time = time.time()
        out = self.model.eval(self.eval_dataset, dataset_sink_mode=enable_data_sink)
        eval_time = int(time.time() - start_time)
        time_str = time.strftime("%Y-%m-%d %H:%M%S", time.localtime())
        out_str = "{} == Rank: {} == EvalCallBack model.eval(): {}; eval_time: {}s".format(
            time_str, _rank_id(), out.values(), eval_time)
        print(out_str)
        self.eval_values = list(out.values())
        add_write(self.eval_file_name, out_str)
