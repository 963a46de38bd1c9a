"""``nn.PipelineGradReducer``: the gradient reduction of a pipelined step.

A pipelined loss already carries the stage's gradients summed over the micro-batches (no
division by ``micro_size``: the loss is the sum of the micro-batch losses). What is left:

* a parameter shared by several stages (``Parameter.add_pipeline_stage``) got part of its
  gradient on each of them: the parts are **summed** over those stages' ranks, so that every
  copy takes the same, whole gradient and the copies stay equal;
* with ``world = stages * d`` the ``d`` replicas of a stage **average** their gradients
  (sum with ``gradients_mean=False``), like data parallelism; a parameter sliced by operator
  sharding inside the stage arrives summed over its copies already (its mirror), so it is
  only divided by ``d`` for the mean;
* ``scale_sense`` divides the result (a loss scale), as in MindSpore;
* parameters of other stages (an optimizer built from ``net.trainable_params()``, as
  MindSpore 2.x scripts do) get no gradient (None), so the optimizer leaves them alone: each
  rank updates only its own stage's parameters.

``Model`` builds one for a pipelined network. With a hand-written loop:

    grad_fn = ms.value_and_grad(net_pipeline, None, opt.parameters)
    reducer = nn.PipelineGradReducer(opt.parameters)
    loss, grads = grad_fn(x, y)
    opt(reducer(grads))
"""
from ...nn.cell import Cell
from ..context import get_auto_parallel_context
from ..data_parallel.grad_reducer import DistributedGradReducer
from .pipeline_cell import current_engine

__all__ = ["PipelineGradReducer"]


class PipelineGradReducer(Cell):
    """Sum shared parameters' gradients across stages, average over the stage's replicas."""

    def __init__(self, parameters, scale_sense=1.0, opt_shard=None):
        super().__init__()
        params = tuple(parameters)
        if not params:
            raise ValueError("PipelineGradReducer: parameters is empty; pass optimizer.parameters")
        if opt_shard:
            raise NotImplementedError("PipelineGradReducer: optimizer sharding (opt_shard) is "
                                      "not supported")
        self.parameters_ = params
        self.scale_sense = float(scale_sense)
        self._steps = None
        self._foreign = []
        self._engine = None
        self._mirrored = []
        self._divide_mirrored = False
        self._replicas = 1

    def _plan(self):
        """The reductions, from the pipeline holding the parameters: made at construction,
        or at the first call when the pipeline is set up later (MindSpore 2.x scripts build
        the reducer before the ``Pipeline`` and set the stages on ``AutoParallel``)."""
        params = self.parameters_
        engine = current_engine(params)
        if self._steps is not None and engine is self._engine:
            return
        self._engine = engine
        self._steps = []
        self._foreign = []
        self._mirrored = []
        if engine is None:           # one stage: nothing crosses processes
            return
        topology = engine.topology
        self._replicas = topology.replicas
        self._foreign = [i for i, p in enumerate(params) if p.released]
        self._mirrored = [i for i, p in enumerate(params)
                          if getattr(p, "sharding_layout", None) is not None]
        # Inside pipeline stages the loss is each rank's own (computed after the staged,
        # sharded cells), so the mirrors summed the replicas' gradients: the mean divides them.
        # With one stage the whole network, loss included, is one sharded call whose loss is
        # the mean over the replicas already: nothing to divide.
        self._divide_mirrored = hasattr(engine, "sharded_calls")
        owned = [i for i, p in enumerate(params) if not p.released and i not in self._mirrored]
        shared = {}
        for i in owned:
            p = params[i]
            stages = frozenset(p.pipeline_stages)
            if len(stages) > 1:
                shared.setdefault(tuple(sorted(stages)), []).append(i)
        for stages in sorted(shared):    # the same order on every rank: groups match
            positions = shared[stages]
            reducer = DistributedGradReducer([params[i] for i in positions], mean=False,
                                             communicator=topology.shared_group(stages))
            self._steps.append((positions, reducer))
        if topology.replicas > 1 and owned:
            mean = get_auto_parallel_context("gradients_mean")
            reducer = DistributedGradReducer([params[i] for i in owned], mean=mean,
                                             communicator=topology.data_parallel_group())
            self._steps.append((owned, reducer))

    def construct(self, grads):
        if not isinstance(grads, (tuple, list)) or len(grads) != len(self.parameters_):
            raise ValueError(f"PipelineGradReducer: expected {len(self.parameters_)} gradients "
                             "aligned with the parameters")
        self._plan()
        grads = list(grads)
        for i in self._foreign:            # another stage's parameter: not updated here
            grads[i] = None
        for positions, reducer in self._steps:
            reduced = reducer(tuple(grads[i] for i in positions))
            for i, g in zip(positions, reduced):
                grads[i] = g
        if self._mirrored and self._divide_mirrored and self._replicas > 1 \
                and get_auto_parallel_context("gradients_mean"):
            for i in self._mirrored:
                grads[i] = grads[i] * (1.0 / self._replicas)
        if self.scale_sense != 1.0:
            grads = [None if g is None else g * (1.0 / self.scale_sense) for g in grads]
        return tuple(grads)

