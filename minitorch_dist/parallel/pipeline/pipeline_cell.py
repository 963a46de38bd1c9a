"""``nn.PipelineCell``: micro-batches through pipeline stages, MindSpore's semantics.

``PipelineCell(net_with_loss, micro_size)`` cuts every input into ``micro_size`` equal slices
on axis 0 and returns the **sum** of the micro-batch losses. With ``pipeline_stages = p > 1``
each rank runs only its stage (``rank // (world // p)``) through a schedule (1F1B by default,
GPipe, or interleaved 1F1B with ``pipeline_config``), and the loss is broadcast from the last
stage so that every rank reports the same value.

Gradients: under ``value_and_grad`` (``TrainOneStepCell``, ``Model.train``) the whole
schedule, forwards and backwards, runs inside the call; the returned loss carries the
stage's accumulated parameter gradients, so the ordinary gradient machinery hands them
out. Without gradients (``Model.eval``) only the forwards run.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> dense = nn.Dense(3, 1, weight_init="ones", bias_init="zeros")
>>> net = nn.PipelineCell(nn.WithLossCell(dense, nn.MSELoss()), 2)
>>> x, y = ms.Tensor(np.ones((4, 3), np.float32)), ms.Tensor(np.zeros((4, 1), np.float32))
>>> float(net(x, y).asnumpy())          # two micro-batch losses of 9.0, summed
18.0
"""
import numpy as np

from ... import communication
from ...autograd import Node, is_grad_enabled, no_grad
from ...nn.cell import Cell
from ...ops.primitive import Context
from ...tensor import Tensor
from ..context import get_auto_parallel_context
from .broadcast import broadcast_values
from .interception import TraceRun, intercepting
from .membership import this_rank_topology
from ..preset_gradients import PresetGradients
from .replicas import start_replicas_equal
from ..data_parallel.accumulation_shard import refuse_in_pipeline
from ..comm.p2p import Channel, Mailbox, Recv, Send
from .runner import StepRunner
from .schedule.generate import generate_schedule
from .stage_plan import PipelineConfigError, StagePlan

__all__ = ["PipelineCell", "split_microbatches", "current_engine"]

_engines = []    # the pipelines built in this process, newest last


def current_engine(params=()):
    """The pipeline (its ``topology`` and ``param_ids``) whose network holds ``params`` (the
    newest one by default), or None."""
    wanted = {id(p) for p in params}
    for engine in reversed(_engines):
        if not wanted or wanted & engine.param_ids:
            return engine
    return None


def stage_strategy_files(engine):
    """``strategy_ckpt_config`` in a pipelined run (or the older ``strategy_ckpt_save_file``/
    ``strategy_ckpt_load_file``), once ``engine``'s stage has run and its layouts are known:
    ``save_file`` receives this rank's stage file, and the stage's plan is checked against
    ``load_file`` (``strategy_ckpt_pipeline``). Each is done once per file."""
    from ..strategy_ckpt import strategy_ckpt_files
    from ..strategy_ckpt_pipeline import check_stage_strategy_file, write_stage_strategy_file
    save, load, only_trainable = strategy_ckpt_files()
    if save and engine.strategy_file != (save, only_trainable):
        write_stage_strategy_file(save, engine.network, engine.topology, engine.plan.stages_of,
                                  only_trainable)
        engine.strategy_file = (save, only_trainable)
    if load and engine.strategy_checked != load:
        check_stage_strategy_file(load, engine.network, engine.topology, engine.plan.stages_of)
        engine.strategy_checked = load


def _check_micro_size(micro_size):
    if isinstance(micro_size, bool) or not isinstance(micro_size, int) or micro_size < 1:
        raise ValueError(f"PipelineCell: micro_size must be a positive int, got {micro_size!r}")


def split_microbatches(inputs, micro_size):
    """Every Tensor input cut into ``micro_size`` equal slices on axis 0 (others repeated)."""
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            if x.ndim == 0 or x.shape[0] % micro_size:
                raise ValueError(
                    f"PipelineCell: input {i} has shape {x.shape}; its axis 0 (the batch) must "
                    f"be divisible by micro_size={micro_size}")
    micro = []
    for k in range(micro_size):
        row = []
        for x in inputs:
            if isinstance(x, Tensor):
                n = x.shape[0] // micro_size
                row.append(Tensor._make(x.data[k * n:(k + 1) * n], x.device))
            else:
                row.append(x)
        micro.append(tuple(row))
    return micro


class _Replicas:
    """A one-stage PipelineCell on several ranks: only its replicas matter (no runtime)."""

    def __init__(self, topology, network):
        self.topology = topology
        self.param_ids = {id(p) for p in network.get_parameters()}


class _Engine:
    """What every step of one PipelineCell shares on this rank."""

    def __init__(self, network, topology, interleave):
        self.network = network
        self.topology = topology
        self.plan = StagePlan(network, topology.stages, interleave)
        self.mailbox = Mailbox()
        self.send_prim = Send(self.mailbox)
        self.recv_prim = Recv(self.mailbox)
        self.anchors = {}
        self.schedules = {}
        self.channel = None
        all_params = list(network.get_parameters())
        self.param_ids = {id(p) for p in all_params}
        stage = topology.stage
        self.own_params = []
        for param in all_params:
            used_by = self.plan.stages_of(param)
            param.pipeline_stages.update(used_by)
            if used_by and stage not in used_by:
                param.release()
            elif param.requires_grad:
                self.own_params.append(param)
        self.grad_node_prim = PresetGradients("pipeline.gradients", "a pipelined loss")
        self.split_backward = True
        self.sharded_calls = {}
        self.strategy_file = None       # (path, only_trainable) of the stage file written
        self.strategy_checked = None    # the strategy load file checked
        topology.pipeline_group()       # made now, in the same order on every rank

    def sharded_call(self, cell):
        """The ``ShardedCall`` running ``cell`` over the ranks of this stage when it holds
        primitives with sharding strategies (pipeline x operator sharding x data parallel:
        each stage's replicas are the devices its operators are split over), else None."""
        key = id(cell)
        if key not in self.sharded_calls:
            call = None
            if any(prim.in_strategy is not None for _, prim in cell.primitives_and_names()):
                from ..sharding.sharded_call import ShardedCall
                call = ShardedCall(cell, group=self.topology.data_parallel_group())
            self.sharded_calls[key] = call
        return self.sharded_calls[key]

    @property
    def num_virtual_stages(self):
        return self.topology.stages * self.plan.chunks

    def start(self, micro_inputs, network):
        """Before the first step: the stage's replicas take equal parameters (processes
        without a common seed drew different ones), then ``construct`` is traced."""
        start_replicas_equal(self.topology, self.network.get_parameters(), self.plan.stages_of)
        self.trace(micro_inputs, network)

    def trace(self, micro_inputs, network):
        run = TraceRun(self.plan)
        with no_grad(), intercepting(run):
            network(*micro_inputs)
        self.plan.record_trace(run.calls)
        self.channel = Channel(self.topology.communicator, self.num_virtual_stages)

    def schedule(self, kind, micro_size):
        key = (kind, micro_size, self.plan.chunks)
        if key not in self.schedules:
            schedule = generate_schedule(kind, self.topology.stages, micro_size,
                                         chunks=self.plan.chunks)
            schedule.validate()
            self.schedules[key] = schedule
        return self.schedules[key]


class PipelineCell(Cell):
    """Pipeline parallelism over micro-batches: ``PipelineCell(net_with_loss, micro_size)``.

    * ``micro_size``: the number of micro-batches; at least ``pipeline_stages``, and it must
      divide the batch.
    * Each rank keeps and updates only its stage's parameters: the others are released
      (their memory is freed; see ``Parameter.release``).
    * ``stats``: after a step, what the runtime measured on this rank (peak activation
      bytes and micro-batches held, parameter bytes of this stage and of the whole model,
      and the seconds per action kind, ``action_seconds``, of which ``waited_seconds``
      were spent blocked on messages).
    """

    _name_scope = False

    def __init__(self, network, micro_size, stage_config=None):
        super().__init__()
        if not isinstance(network, Cell):
            raise TypeError(f"PipelineCell: network must be a Cell (e.g. nn.WithLossCell), got "
                            f"{type(network).__name__}")
        _check_micro_size(micro_size)
        if stage_config is not None:
            raise NotImplementedError("PipelineCell: stage_config is not supported; set "
                                      "cell.pipeline_stage on the cells instead")
        self.network = network
        self.micro_size = micro_size
        self._engine = None
        self._topology = None
        self._stages_built = None
        self.stats = {}
        self._build()

    def _build(self):
        """Set up for the pipeline options in force: at construction, and again at a call
        made under more stages (``AutoParallel(...).pipeline(stages=2)`` sets them for its
        calls only, after the network was built). Once pipelined, it stays as built."""
        stages = get_auto_parallel_context("pipeline_stages")
        if self._engine is not None or stages == self._stages_built:
            return
        micro_size = self.micro_size
        network = self.network
        if micro_size < stages:
            raise ValueError(f"PipelineCell: micro_size ({micro_size}) must be at least "
                             f"pipeline_stages ({stages}), so that every stage has work")
        config = get_auto_parallel_context("pipeline_config")
        self.scheduler = config["pipeline_scheduler"]
        self._stages_built = stages
        if stages > 1:
            engine = _Engine(network, this_rank_topology(), config["pipeline_interleave"])
            object.__setattr__(self, "_engine", engine)
            self._topology = engine.topology
            _engines.append(engine)
        elif communication.GlobalComm.INITED and communication.get_group_size() > 1:
            # one stage on several ranks: every rank is a replica (plain data parallelism)
            self._topology = this_rank_topology()
            _engines.append(_Replicas(self._topology, network))
        self.stats = _parameter_stats(network)

    @property
    def topology(self):
        """This rank's ``PipelineTopology`` (None in a single process without stages)."""
        self._build()
        return self._topology

    # ---- running --------------------------------------------------------------------------
    def construct(self, *inputs):
        self._build()
        micro = split_microbatches(inputs, self.micro_size)
        if self._engine is None:           # one stage: micro-batching only
            total = None
            for row in micro:
                loss = self.network(*row)
                total = loss if total is None else total + loss
            return total
        train = is_grad_enabled()
        if train:
            refuse_in_pipeline()
        results, runner = self._run(self.network, micro, train)
        stage_strategy_files(self._engine)      # the stage's layouts are known now
        total = None if results is None else _summed(results)
        (loss,) = broadcast_values(self._engine.topology, [total])
        if not train:
            return loss
        return self._with_gradients(loss, runner.grads)

    def _run(self, network, micro, train):
        engine = self._engine
        if engine.channel is None:
            engine.start(micro[0], network)
        if train:
            kind = "interleaved_1f1b" if engine.plan.chunks > 1 else self.scheduler
            if engine.plan.chunks > 1 and self.scheduler != "1f1b":
                raise PipelineConfigError("pipeline_interleave needs pipeline_scheduler '1f1b'")
        else:
            kind = "forward"
        schedule = engine.schedule(kind, self.micro_size)
        runner = StepRunner(engine, micro, train, network)
        runner.execute(schedule.actions[engine.topology.stage])
        if train:
            self.stats.update(peak_activation_bytes=runner.peak_bytes,
                              peak_live_microbatches=runner.peak_microbatches, schedule=kind,
                              action_seconds=dict(runner.seconds),
                              waited_seconds=dict(runner.waited))
        last = engine.topology.is_last_stage
        return ([runner.results[k] for k in range(self.micro_size)] if last else None), runner

    def _with_gradients(self, loss, grads):
        engine = self._engine
        params = [p for p in engine.own_params if id(p) in grads]
        ctx = Context(loss.device)
        ctx.grads = tuple(grads[id(p)] for p in params)
        node = Node(engine.grad_node_prim, ctx, tuple(params))
        return Tensor._make(loss.data, loss.device, bool(params), node if params else None)

    # ---- evaluation -----------------------------------------------------------------------
    def forward_only(self, network, *inputs):
        """Run ``network`` (a cell built on the same staged backbone) over the micro-batches,
        forwards only, and return its outputs on every rank: each output concatenated over
        the micro-batches on axis 0, a 0-d output (a loss) averaged."""
        self._build()
        micro = split_microbatches(inputs, self.micro_size)
        if self._engine is None:
            with no_grad():
                outs = [network(*row) for row in micro]
            return _combine(outs)
        with no_grad():
            results, _ = self._run(network, micro, train=False)
        stage_strategy_files(self._engine)
        combined = _combine(results) if results is not None else None
        single = combined is not None and not isinstance(combined, tuple)
        values = [combined] if single else (list(combined) if combined is not None else None)
        values = broadcast_values(self._engine.topology, values)
        return values[0] if len(values) == 1 else tuple(values)

    def predict(self, *inputs):
        """The backbone's output for ``inputs`` (no labels), pipelined, on every rank."""
        backbone = getattr(self.network, "backbone_network", self.network)
        return self.forward_only(backbone, *inputs)


def _combine(outs):
    first = outs[0]
    if isinstance(first, (tuple, list)):
        return tuple(_combine([o[i] for o in outs]) for i in range(len(first)))
    if first.ndim == 0:
        total = _summed(outs)
        total /= len(outs)           # in place: a 0-d array stays an array
        return Tensor._make(total, first.device)
    xp = first.device.xp
    return Tensor._make(xp.concatenate([o.data for o in outs], axis=0), first.device)


def _summed(tensors):
    """The elementwise sum of ``tensors``' arrays, in micro-batch order, as a new array."""
    total = tensors[0].data.copy()
    for t in tensors[1:]:
        total += t.data
    return total


def _parameter_stats(network):
    held = sum(p.data.nbytes if not p.released else 0 for p in network.get_parameters())
    total = sum(int(np.prod(p.shape)) * p.dtype.itemsize for p in network.get_parameters())
    return {"parameter_bytes_held": int(held), "parameter_bytes_model": int(total)}


class PipelineEvalCell(Cell):
    """Evaluation of a pipelined ``WithLossCell``: ``(loss, outputs, label)`` on every rank,
    like ``nn.WithEvalCell``, computed through the pipeline with forwards only."""

    _name_scope = False

    def __init__(self, pipeline):
        super().__init__()
        from ...nn.wrappers import WithEvalCell
        inner = pipeline.network
        if not hasattr(inner, "backbone_network") or not hasattr(inner, "_loss_fn"):
            raise TypeError("evaluating a PipelineCell needs it to wrap an nn.WithLossCell "
                            "(or pass Model an eval_network)")
        object.__setattr__(self, "pipeline", pipeline)
        self.eval_network = WithEvalCell(inner.backbone_network, inner._loss_fn)

    def construct(self, data, label):
        return self.pipeline.forward_only(self.eval_network, data, label)
