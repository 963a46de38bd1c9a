"""Model: the high-level training and evaluation loop (MindSpore's ``mindspore.train.Model``).

``Model(network, loss_fn, optimizer, metrics)`` wraps the network into
``TrainOneStepCell(WithLossCell(network, loss_fn), optimizer)`` and drives it over a dataset
with callbacks; ``eval`` runs ``WithEvalCell`` and the metrics; ``predict`` runs the network.

Datasets are ``minitorch_dist.dataset`` pipelines (anything with ``create_tuple_iterator``
and ``get_dataset_size``) or plain re-iterable sequences of batches (a list of
``(data, label)`` tuples of Tensors or NumPy arrays).

``dataset_sink_mode=True`` is accepted and runs exactly like ``False`` (one Python step per
batch; ``sink_size`` does not apply), which is also what MindSpore does on CPU; a one-time
note says so. ``boost_level`` other than "O0" warns and trains as "O0".
"""
import contextlib
import warnings

from ..autograd import no_grad
from ..communication.hooks import set_step as _set_step
from ..extension import extension
from ..log import note
from ..nn.cell import Cell
from ..nn.wrappers import TrainOneStepCell, WithEvalCell, WithLossCell
from ..tensor import Tensor
from .callback import CallbackList, CallbackParams, RunContext
from .metrics import Loss, get_metrics

__all__ = ["Model"]

_AMP_LEVELS = ("O0", "O1", "O2", "O3", "auto")
_IGNORED_KWARGS = ("boost_config_dict",)
_AMP_KWARGS = ("loss_scale_manager", "keep_batchnorm_fp32")   # act through amp.build_train_network


class Model:
    """Train, evaluate and run a network.

    * ``Model(net, loss_fn, optimizer)``: trains ``WithLossCell(net, loss_fn)`` with a
      ``TrainOneStepCell``; ``Model(net_with_loss, optimizer=opt)``: the network returns the
      loss itself; ``Model(train_step_cell)`` (no optimizer): the network is a complete
      training step and is called as is.
    * ``metrics``: ``{"accuracy", "loss"}`` or ``{"name": Metric()}`` for ``eval``; they need a
      ``loss_fn`` (evaluation then runs ``WithEvalCell(net, loss_fn)``) or an ``eval_network``.
    * ``eval_network`` with ``eval_indexes=[loss, prediction, label]``: which outputs of the
      eval network feed the metrics (``Loss`` takes the first, others the last two); without
      ``eval_indexes`` every metric gets all outputs.
    * ``amp_level`` ("O0"-"O3", "auto") with ``loss_scale_manager`` and
      ``keep_batchnorm_fp32``: mixed precision and loss scaling through
      ``amp.build_train_network``, as MindSpore builds its training network.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn
    >>> from minitorch_dist.train import Model
    >>> ms.set_seed(0)
    >>> x = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
    >>> y = (x[:, 0] > 0).astype(np.int32)
    >>> batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    >>> net = nn.Dense(2, 2)
    >>> model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
    ...               nn.Momentum(net.trainable_params(), 0.5, 0.9), metrics={"accuracy"})
    >>> model.train(5, batches)
    >>> model.eval(batches)["accuracy"] > 0.9
    True
    """

    def __init__(self, network, loss_fn=None, optimizer=None, metrics=None, eval_network=None,
                 eval_indexes=None, amp_level="O0", boost_level="O0", **kwargs):
        if not isinstance(network, Cell):
            raise TypeError(f"Model: network must be a Cell, got {type(network).__name__}")
        if loss_fn is not None and not callable(loss_fn):
            raise TypeError("Model: loss_fn must be callable (e.g. nn.MSELoss()), "
                            f"got {type(loss_fn).__name__}")
        if optimizer is not None and not callable(optimizer):
            raise TypeError("Model: optimizer must be an optimizer such as nn.SGD, "
                            f"got {type(optimizer).__name__}")
        if eval_network is not None and not isinstance(eval_network, Cell):
            raise TypeError(f"Model: eval_network must be a Cell, got {type(eval_network).__name__}")
        _check_amp(amp_level, kwargs)
        _check_boost(boost_level)
        self._network = network
        self._loss_fn = loss_fn
        self._optimizer = optimizer
        self._amp_level = amp_level
        self._amp_kwargs = {k: v for k, v in kwargs.items() if k in _AMP_KWARGS and v is not None}
        self._metric_fns = get_metrics(metrics)
        self._pipeline = _pipeline_of(network)
        if self._metric_fns and loss_fn is None and eval_network is None and self._pipeline is None:
            raise ValueError("Model: metrics need a loss_fn (evaluation then uses WithEvalCell) or an "
                             "eval_network; pass one of them")
        self._train_network = self._build_train_network()
        self._eval_network, self._eval_indexes = self._build_eval_network(eval_network, eval_indexes)
        # under semi/auto parallel every network call runs sharded (parallel/extension.py)
        self._predict_network = self._network

    # ---- construction -------------------------------------------------------------------
    def _build_train_network(self):
        network = self._network
        if self._optimizer is not None and (self._amp_level != "O0" or self._amp_kwargs):
            return _amp_train_network(self)
        if self._loss_fn is not None:
            network = WithLossCell(network, self._loss_fn)
        if self._optimizer is not None:
            wiring = extension().model_wiring()
            if wiring is not None:    # grad_accumulation_step: micro-batches before one step
                network = wiring.accumulated(network)
            network = TrainOneStepCell(network, self._optimizer)
            if self._pipeline is not None and self._loss_fn is None:
                # MindSpore builds its pipeline training cell here too: the reduction of a
                # pipelined step (shared parameters across stages, replicas of a stage).
                network.grad_reducer = extension().model_wiring().pipeline_reducer(
                    self._optimizer.parameters)
        return network

    def _build_eval_network(self, eval_network, eval_indexes):
        if eval_indexes is not None:
            if not isinstance(eval_indexes, (list, tuple)) or len(eval_indexes) != 3 \
                    or not all(isinstance(i, int) and not isinstance(i, bool) for i in eval_indexes):
                raise ValueError("Model: eval_indexes must be a list of 3 ints (positions of the loss, "
                                 "the prediction and the label in the eval network's outputs), "
                                 f"got {eval_indexes!r}")
            eval_indexes = list(eval_indexes)
        if eval_network is not None:
            return eval_network, eval_indexes
        if self._loss_fn is not None:
            return WithEvalCell(self._network, self._loss_fn), [0, 1, 2]
        if self._pipeline is not None and self._metric_fns:
            return extension().model_wiring().pipeline_eval_cell(self._pipeline), [0, 1, 2]
        return None, None

    @property
    def train_network(self):
        """The Cell that ``train`` calls once per batch."""
        return self._train_network

    @property
    def eval_network(self):
        return self._eval_network

    @property
    def predict_network(self):
        return self._predict_network

    # ---- training -----------------------------------------------------------------------
    def train(self, epoch, train_dataset, callbacks=None, dataset_sink_mode=False, sink_size=-1,
              initial_epoch=0):
        """Train for epochs ``initial_epoch + 1`` to ``epoch`` over ``train_dataset``.

        ``callbacks``: a Callback or a list (``LossMonitor()``, ``ModelCheckpoint(...)``, ...).
        ``dataset_sink_mode``/``sink_size`` are accepted for MindSpore compatibility; data
        is always fed step by step.
        """
        self._run(epoch, train_dataset, callbacks, dataset_sink_mode, sink_size, initial_epoch)

    def fit(self, epoch, train_dataset, valid_dataset=None, valid_frequency=1, callbacks=None,
            dataset_sink_mode=False, valid_dataset_sink_mode=False, sink_size=-1, initial_epoch=0):
        """``train``, evaluating on ``valid_dataset`` after every ``valid_frequency`` epochs
        (an int, or a list of epoch numbers). The result goes to ``cb_params.metrics`` before
        ``on_train_epoch_end`` (``LossMonitor`` prints it, ``History`` records it)."""
        _note_sink("valid_dataset_sink_mode", valid_dataset_sink_mode)
        valid = None
        if valid_dataset is not None:
            if not self._metric_fns:
                raise ValueError("Model.fit: a valid_dataset needs metrics; build the Model with "
                                 "metrics={'accuracy'} (or others)")
            valid = (valid_dataset, _check_frequency(valid_frequency))
        self._run(epoch, train_dataset, callbacks, dataset_sink_mode, sink_size, initial_epoch, valid)

    def _scope(self):
        """The parallel options the network carries (``AutoParallel``), or none."""
        scope = getattr(self._network, "parallel_scope", None)
        return scope() if scope is not None else contextlib.nullcontext()

    def _run(self, *args, **kwargs):
        with self._scope():
            self._run_epochs(*args, **kwargs)

    def _run_epochs(self, epoch, dataset, callbacks, sink_mode, sink_size, initial_epoch, valid=None):
        _check_epochs(epoch, initial_epoch)
        if isinstance(sink_size, bool) or not isinstance(sink_size, int) \
                or (sink_size < 1 and sink_size != -1):
            raise ValueError(f"Model.train: sink_size must be -1 or a positive int, got {sink_size!r}")
        _note_sink("dataset_sink_mode", sink_mode)
        if sink_size != -1:
            _note_sink("sink_size", sink_size)
        if initial_epoch and getattr(dataset, "get_epoch", None) and dataset.get_epoch() == 0:
            dataset.set_epoch(initial_epoch)    # a resumed run shuffles as epoch initial_epoch+1
        source = _BatchSource(dataset, epoch - initial_epoch, "train_dataset")
        if self._pipeline is not None:
            source = extension().model_wiring().replica_batches(source, self._pipeline, dataset)
        net = self._train_network
        callbacks = CallbackList(callbacks)
        cb_params = CallbackParams(
            mode="train", network=self._network, train_network=net, loss_fn=self._loss_fn,
            optimizer=self._optimizer if self._optimizer is not None else getattr(net, "optimizer", None),
            train_dataset=dataset, epoch_num=epoch, batch_num=source.size, initial_epoch=initial_epoch,
            cur_epoch_num=initial_epoch, cur_step_num=initial_epoch * (source.size or 0),
            cur_step_in_epoch=0, net_outputs=None, train_dataset_element=None,
            dataset_sink_mode=bool(sink_mode), list_callback=callbacks.callbacks, metrics=None,
            eval_results=None)
        run_context = RunContext(cb_params)
        with callbacks:
            net.set_train(True)
            callbacks.on_train_begin(run_context)
            for cur_epoch in range(initial_epoch + 1, epoch + 1):
                cb_params.cur_epoch_num = cur_epoch
                cb_params.metrics = cb_params.eval_results = None   # set by this epoch's evaluation
                net.set_train(True)   # an evaluation in fit() switched to eval mode
                callbacks.on_train_epoch_begin(run_context)
                steps = self._train_epoch(net, source, callbacks, cb_params, run_context)
                if steps == 0:
                    raise ValueError(f"Model.train: train_dataset yielded no batches in epoch {cur_epoch}"
                                     f"{source.empty_hint()}")
                if valid is not None and _eval_due(cur_epoch, valid[1]):
                    eval_params = self._eval_params(valid[0], callbacks)
                    cb_params.metrics = self._eval_loop(valid[0], callbacks, eval_params)
                    cb_params.eval_results = cb_params.metrics
                callbacks.on_train_epoch_end(run_context)
                if run_context.get_stop_requested():
                    break
            callbacks.on_train_end(run_context)

    @staticmethod
    def _train_epoch(net, source, callbacks, cb_params, run_context):
        steps = 0
        for batch in source.epoch():
            steps += 1
            cb_params.cur_step_num += 1
            cb_params.cur_step_in_epoch = steps
            _set_step(cb_params.cur_step_num)     # named if a peer leaves the job early
            cb_params.train_dataset_element = batch
            callbacks.on_train_step_begin(run_context)
            cb_params.net_outputs = net(*batch)
            callbacks.on_train_step_end(run_context)
            if run_context.get_stop_requested():
                break
        if not cb_params.batch_num:
            cb_params.batch_num = steps   # learnt from the first epoch of an iterable without len()
        return steps

    # ---- evaluation ---------------------------------------------------------------------
    def eval(self, valid_dataset, callbacks=None, dataset_sink_mode=False):
        """Evaluate the metrics on one pass over ``valid_dataset``; returns ``{name: value}``.

        The network runs in evaluation mode (``set_train(False)``) without recording
        gradients. Callbacks get the ``on_eval_*`` hooks.
        """
        if not self._metric_fns:
            raise ValueError("Model.eval needs metrics: build the Model with metrics={'accuracy'} "
                             "(and a loss_fn or an eval_network)")
        _note_sink("dataset_sink_mode", dataset_sink_mode)
        callbacks = CallbackList(callbacks)
        with callbacks, self._scope():
            return self._eval_loop(valid_dataset, callbacks, self._eval_params(valid_dataset, callbacks))

    def _eval_params(self, dataset, callbacks):
        return CallbackParams(mode="eval", network=self._network, eval_network=self._eval_network,
                              valid_dataset=dataset, batch_num=None, cur_epoch_num=0, cur_step_num=0,
                              cur_step_in_epoch=0, net_outputs=None, metrics=None,
                              list_callback=callbacks.callbacks)

    def _eval_loop(self, dataset, callbacks, cb_params):
        source = _BatchSource(dataset, 1, "valid_dataset")
        cb_params.batch_num = source.size
        run_context = RunContext(cb_params)
        net = self._eval_network
        for metric in self._metric_fns.values():
            metric.clear()
        net.set_train(False)
        with no_grad():
            callbacks.on_eval_begin(run_context)
            callbacks.on_eval_epoch_begin(run_context)
            for batch in source.epoch():
                cb_params.cur_step_num += 1
                cb_params.cur_step_in_epoch = cb_params.cur_step_num
                callbacks.on_eval_step_begin(run_context)
                outputs = net(*batch)
                cb_params.net_outputs = outputs
                callbacks.on_eval_step_end(run_context)
                self._update_metrics(outputs)
            if cb_params.cur_step_num == 0:
                raise ValueError(f"Model.eval: valid_dataset yielded no batches{source.empty_hint()}")
            callbacks.on_eval_epoch_end(run_context)
            metrics = {name: metric.eval() for name, metric in self._metric_fns.items()}
            cb_params.metrics = metrics
            callbacks.on_eval_end(run_context)
        return metrics

    def _update_metrics(self, outputs):
        if not isinstance(outputs, (tuple, list)):
            outputs = (outputs,)
        indexes = self._eval_indexes
        for metric in self._metric_fns.values():
            if indexes is None:
                metric.update(*outputs)
            elif isinstance(metric, Loss):
                metric.update(outputs[indexes[0]])
            else:
                metric.update(outputs[indexes[1]], outputs[indexes[2]])

    # ---- inference ----------------------------------------------------------------------
    def predict(self, *predict_data):
        """The network's output for ``predict_data`` (Tensors or arrays), in evaluation mode
        and without recording gradients."""
        inputs = [_as_tensor(x) for x in predict_data]
        self._network.set_train(False)
        with no_grad(), self._scope():
            if self._pipeline is not None:
                return self._pipeline.predict(*inputs)
            return self._predict_network(*inputs)


    # ---- parameter layouts (distributed checkpoints) -------------------------------------
    def infer_train_layout(self, train_dataset, dataset_sink_mode=True, sink_size=-1):
        """MindSpore's ``Model.infer_train_layout``: plan the network on the first batch of
        ``train_dataset`` (one forward of the network on the data columns, without the
        loss: no gradient, no update) and return ``{parameter name: TensorLayout}`` of the
        sliced parameters, {} when nothing is sliced; training keeps these layouts.
        Sinking options do not apply here (see ``train``)."""
        if self._pipeline is not None or getattr(self._network, "_runs_training_step", False):
            raise ValueError("Model.infer_train_layout needs Model(network, loss_fn, optimizer) "
                             "over a network that is not pipelined; this Model trains "
                             f"{type(self._network).__name__} as a whole")
        source = _BatchSource(train_dataset, 1, "train_dataset")
        if source.empty_hint():
            raise TypeError("Model.infer_train_layout: train_dataset is a one-shot iterator, and "
                            "reading its first batch would lose it; pass a dataset or a list")
        batch = next(iter(source.epoch()), None)
        if batch is None:
            raise ValueError("Model.infer_train_layout: train_dataset yielded no batch")
        data = batch[:-1] if self._loss_fn is not None and len(batch) > 1 else batch
        return self._infer_layout(self._network, data)

    def infer_predict_layout(self, *predict_data, skip_backend_compile=False):
        """MindSpore's ``Model.infer_predict_layout``: plan the network on ``predict_data``
        (one forward) and return ``{parameter name: TensorLayout}`` of the sliced
        parameters, for ``load_distributed_checkpoint``; {} when nothing is sliced.
        ``skip_backend_compile`` changes nothing: there is no backend compile here."""
        self._network.set_train(False)
        return self._infer_layout(self._predict_network, [_as_tensor(x) for x in predict_data])

    def _infer_layout(self, network, inputs):
        with no_grad(), self._scope():
            network(*inputs)
        return {p.name: p.sharding_layout for p in network.get_parameters()
                if getattr(p, "sharding_layout", None) is not None}


class _BatchSource:
    """Batches of a dataset, epoch after epoch, as tuples of Tensors."""

    def __init__(self, dataset, num_epochs, what):
        self.what = what
        if hasattr(dataset, "create_tuple_iterator"):
            self._iterator = dataset.create_tuple_iterator(num_epochs=num_epochs)
            self._iterable = None
            size = dataset.get_dataset_size() if hasattr(dataset, "get_dataset_size") else None
        elif hasattr(dataset, "__iter__"):
            self._iterator = None
            self._iterable = dataset
            size = len(dataset) if hasattr(dataset, "__len__") else None
        else:
            raise TypeError(f"Model: {what} must be a minitorch_dist.dataset Dataset or an iterable "
                            f"of batches, got {type(dataset).__name__}")
        self.size = int(size) if isinstance(size, int) and size > 0 else None
        reset = getattr(dataset, "reset", None)
        self._reset = reset if callable(reset) else None    # MindSpore's Dataset.reset()
        self._epochs = 0

    def epoch(self):
        if self._epochs and self._reset is not None:
            self._reset()       # between epochs: an iterator-like dataset starts over
        self._epochs += 1
        if self._iterator is not None:
            for row in self._iterator:
                yield row
            return
        for row in self._iterable:
            yield _as_batch(row, self.what)

    def empty_hint(self):
        if self._iterable is not None and iter(self._iterable) is self._iterable:
            return ": an iterator or generator can be used only once; pass a list or a dataset"
        return ""


def _pipeline_of(network):
    """The PipelineCell that ``network`` is, or None."""
    wiring = extension().model_wiring()
    return None if wiring is None else wiring.pipeline_of(network)


def _as_batch(row, what):
    if isinstance(row, dict):
        row = list(row.values())
    elif not isinstance(row, (tuple, list)):
        row = (row,)
    try:
        return [_as_tensor(x) for x in row]
    except TypeError as err:
        raise TypeError(f"Model: every batch of {what} must hold Tensors or arrays: {err}") from None


def _as_tensor(x):
    return x if isinstance(x, Tensor) else Tensor(x)


def _check_epochs(epoch, initial_epoch):
    for name, value in (("epoch", epoch), ("initial_epoch", initial_epoch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"Model.train: {name} must be a non-negative int, got {value!r}")
    if epoch < 1:
        raise ValueError(f"Model.train: epoch must be >= 1, got {epoch}")
    if initial_epoch >= epoch:
        raise ValueError(f"Model.train: initial_epoch ({initial_epoch}) must be smaller than epoch "
                         f"({epoch}): epochs initial_epoch+1 .. epoch are run")


def _check_frequency(valid_frequency):
    if isinstance(valid_frequency, int) and not isinstance(valid_frequency, bool) and valid_frequency >= 1:
        return valid_frequency
    if isinstance(valid_frequency, (list, tuple)) and valid_frequency and \
            all(isinstance(e, int) and not isinstance(e, bool) and e >= 1 for e in valid_frequency):
        return set(valid_frequency)
    raise ValueError("Model.fit: valid_frequency must be a positive int or a list of epoch numbers, "
                     f"got {valid_frequency!r}")


def _eval_due(epoch, frequency):
    return epoch in frequency if isinstance(frequency, set) else epoch % frequency == 0


def _amp_train_network(model):
    """``amp_level`` and the loss-scale options act as in MindSpore: the step comes from
    ``amp.build_train_network``; "auto" is O0 on CPU and O2 on a GPU, as MindSpore picks."""
    from ..amp import build_train_network
    from ..context import get_context
    if model._pipeline is not None:
        raise ValueError("Model: amp_level/loss_scale_manager with a pipelined network is not "
                         "supported; cast the stages with amp.auto_mixed_precision instead")
    level = model._amp_level
    if level == "auto":
        level = "O2" if get_context("device_target") == "GPU" else "O0"
    return build_train_network(model._network, model._optimizer, model._loss_fn, level=level,
                               **model._amp_kwargs)


def _check_amp(amp_level, kwargs):
    if amp_level not in _AMP_LEVELS:
        raise ValueError(f"Model: amp_level must be one of {list(_AMP_LEVELS)}, got {amp_level!r}")
    for key, value in kwargs.items():
        if key in _AMP_KWARGS:
            continue
        if key not in _IGNORED_KWARGS:
            raise TypeError(f"Model got an unexpected keyword argument {key!r}")
        if value is not None:
            warnings.warn(f"Model: {key} is accepted for MindSpore compatibility and ignored",
                          stacklevel=3)


_BOOST_LEVELS = ("O0", "O1", "O2")


def _check_boost(boost_level):
    if boost_level not in _BOOST_LEVELS:
        raise ValueError(f"Model: boost_level must be one of {list(_BOOST_LEVELS)}, got "
                         f"{boost_level!r}")
    if boost_level != "O0":
        warnings.warn(f"Model: boost_level={boost_level!r} is not implemented (MindSpore's boost "
                      "algorithms target Ascend); training runs as with 'O0'", stacklevel=3)


def _note_sink(name, value):
    """Data sinking: MindSpore does not sink on CPU either, so data is fed step by step and
    ``sink_size`` does not reshape epochs. A set value is noted (once per call site)."""
    if name.endswith("sink_mode"):
        if not isinstance(value, bool):
            raise TypeError(f"Model: {name} must be True or False, got {value!r}")
        if not value:
            return
    note(f"Model: {name}={value!r} is accepted and changes nothing: data is fed one batch "
         "per step, as MindSpore does on CPU (sink_size then does not apply)")
