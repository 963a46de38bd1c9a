"""Every way the parallel layer enters the single-process code (``minitorch_dist/extension.py``).

* **Network calls.** Under ``SEMI_AUTO_PARALLEL``/``AUTO_PARALLEL`` (without pipeline
  stages, on more than one rank) the outermost call of a network runs operator-sharded through
  its ``ShardedCall`` (kept here per cell and per function, weakly: nothing is written on the
  user's objects): a Cell called from a script, ``Model``'s networks, the network a
  ``TrainOneStepCell`` or a user's ``GradOperation`` cell differentiates, the function given
  to ``value_and_grad``, and functions under ``jit`` or ``AutoParallel``. While it runs, the
  cells it calls run their ``construct`` directly (its own cell hook). A callable whose
  trace reaches a gradient computation (``call_differentiated`` notes it) or an optimizer is
  a training step: after the trace it runs as written, and the network calls inside it are
  the ones sharded.
* **Strategies nobody runs.** A primitive with a sharding strategy that runs outside a
  sharded call raises ``ShardingError`` naming it and the reason (a semi/auto job calling
  it outside a network, a split on a one-rank semi/auto job, a pipelined job, or a
  multi-rank job in another mode); in one process outside semi/auto it runs whole, with a
  one-time warning.
* **Training steps.** ``TrainOneStepCell`` reduces gradients with
  ``DistributedGradReducer`` under data parallel; sharded networks need no reducer (their
  parameters enter through mirrors).
* **Pipelines**: which parameters a stage trains, and how ``Model`` runs a ``PipelineCell``.
* **Checkpoints**: sliced parameters record their layouts.
* ``nn.DistributedGradReducer``, ``nn.PipelineCell`` and ``nn.PipelineGradReducer`` are
  added to ``nn`` here.
"""
import logging
import math
import weakref

from .. import communication, nn, ops
from ..extension import Extension, install_extension
from ..nn.cell import Cell
from ..nn.optim.optimizer import Optimizer
from .auto_parallel import AutoParallel
from .context import (ParallelMode, check_job_size, get_auto_parallel_context, is_data_parallel,
                      shards_operators)
from .embedding.row_slice import sliced_embedding
from .data_parallel.grad_reducer import DistributedGradReducer
from .pipeline import (PipelineCell, PipelineEvalCell, PipelineGradReducer, replica_batches)
from .pipeline.membership import stage_parameters
from .sharding.checkpoint import integrated_entries, layout_entries, local_value
from .sharding.rules import ShardingError
from .sharding.scope import current_world, note_training_step, running, tracing
from .sharding.sharded_call import ShardedCall
from .shard_function import ShardFunction
from .dynamic_shape import declare_inputs
from .comm import collective_ops
from .comm_fusion import FusedMirrors

logger = logging.getLogger("minitorch_dist")

__all__ = ["ParallelExtension", "sharded_call_of"]

_SEMI_AUTO = (ParallelMode.SEMI_AUTO_PARALLEL, ParallelMode.AUTO_PARALLEL)
_NOT_NETWORKS = (Optimizer, DistributedGradReducer, PipelineGradReducer, PipelineCell,
                 PipelineEvalCell)
_cell_calls = weakref.WeakKeyDictionary()       # Cell -> its ShardedCall
_function_calls = weakref.WeakKeyDictionary()   # function -> {id(world): its ShardedCall}
_warned = weakref.WeakSet()                     # primitives warned about (one process)


class _ModelWiring:
    """What ``Model`` needs to run a ``PipelineCell``."""

    @staticmethod
    def pipeline_of(network):
        # AutoParallel(pipeline) is pipelined too: without its reducer, other stages'
        # (released, read-only) parameters would reach the optimizer with gradients
        if isinstance(network, AutoParallel):
            network = network.network
        return network if isinstance(network, PipelineCell) else None

    @staticmethod
    def accumulated(network):
        """``grad_accumulation_step`` = k > 1: the loss network runs k micro-batches of each
        batch and accumulates their gradients before one reduction and one update."""
        from .grad_accumulation import GradAccumulation
        k = get_auto_parallel_context("grad_accumulation_step")
        if k == 1 or isinstance(network, (GradAccumulation, PipelineCell, AutoParallel)):
            return network
        return GradAccumulation(network, k)

    pipeline_reducer = staticmethod(PipelineGradReducer)
    pipeline_eval_cell = staticmethod(PipelineEvalCell)
    replica_batches = staticmethod(replica_batches)


class ParallelExtension(Extension):
    """The parallel layer's answers (see the module docstring)."""

    # ---- calls ------------------------------------------------------------------------
    def call_cell(self, cell, inputs, kwargs):
        # a sharded run and a trace install cell hooks of their own: their calls never come here
        if not shards_operators() or _passes_through(cell) or _one_rank():
            return cell.construct(*inputs, **kwargs)
        if kwargs:
            raise ShardingError(f"{type(cell).__name__}: a sharded network takes its tensors as "
                                f"positional arguments; got keyword arguments {sorted(kwargs)}")
        call = _cell_calls.get(cell)
        if call is None:
            call = _cell_calls[cell] = ShardedCall(cell)
        return call(*inputs)

    def gradient_scope(self, fn, weights):
        return FusedMirrors(weights, fn)

    def call_differentiated(self, fn, args):
        if not shards_operators():
            return fn(*args)
        if tracing():                # the traced call is a training step: its caller decides
            note_training_step("value_and_grad")
            return fn(*args)
        return self.call_function(fn, args)

    def call_function(self, fn, args):
        """``fn(*args)``, sharded when ``fn`` is a network function (``jit``,
        ``AutoParallel`` and ``value_and_grad`` come here)."""
        target = getattr(fn, "__wrapped__", fn)   # GradOperation's seeding wrapper
        if (not shards_operators() or running() or tracing() or isinstance(target, Cell)
                or _one_rank()):
            return fn(*args)
        world = current_world()
        calls = _function_calls.setdefault(target, {})     # per world: ranks may be threads
        call = calls.get(id(world))
        if call is None:
            call = calls[id(world)] = ShardedCall(fn)
        call.fn = fn
        return call(*args)      # a training step runs as written (ShardedCall.training_step)

    def check_primitive_call(self, prim):
        if running() or tracing():
            return
        split = any(n != 1 for s in prim.in_strategy for n in s)
        mode = get_auto_parallel_context("parallel_mode")
        strategy = f"strategy {prim.in_strategy}"
        if mode in _SEMI_AUTO and get_auto_parallel_context("pipeline_stages") > 1:
            if split:
                raise ShardingError(
                    f"{prim.name}: {strategy} would run unsharded: a pipelined job "
                    f"(pipeline_stages={get_auto_parallel_context('pipeline_stages')}) splits "
                    "operators over the ranks of a stage only inside staged cells (cells with "
                    "pipeline_stage set, run by a PipelineCell); move it into one")
            return
        if mode in _SEMI_AUTO and _one_rank():
            if split:
                raise ShardingError(
                    f"{prim.name}: {strategy} splits over "
                    f"{max(math.prod(s) for s in prim.in_strategy)} devices but this job has one "
                    "rank; start it on that many (python -m minitorch_dist.run -n N script.py) "
                    "or remove the split")
            return
        if mode in _SEMI_AUTO:
            raise ShardingError(
                f"{prim.name}: {strategy} under {mode}, but it was called outside a network call "
                "(a Cell, a function given to value_and_grad, jit or AutoParallel), where it "
                "would run unsharded; call it from a Cell's construct or such a function")
        world = current_world()
        if split and world is not None and world.size > 1:
            raise ShardingError(
                f"{prim.name}: {strategy} is set but parallel_mode is {mode!r}, so each of the "
                f"{world.size} ranks would run the whole operator (replicated, not sharded); set "
                "ms.set_auto_parallel_context(parallel_mode='semi_auto_parallel') (or "
                "'auto_parallel'), or remove the strategy")
        if split and prim not in _warned:
            _warned.add(prim)
            logger.warning("%s: %s is ignored: parallel_mode is %s and this is one process, "
                           "which runs the whole operator", prim.name, strategy, mode)

    # ---- training wrappers ------------------------------------------------------------
    def train_step_reducer(self, weights, network):
        if shards_operators() or getattr(network, "_runs_sharded", False) \
                or not is_data_parallel():
            return None       # one process, or sharded (parameters enter through mirrors)
        if not communication.GlobalComm.INITED:
            raise RuntimeError("TrainOneStepCell: data-parallel mode is set but the "
                               "communication is not initialized; call "
                               "minitorch_dist.communication.init() first")
        check_job_size(communication.get_group_size(), communication.get_rank(),
                       "TrainOneStepCell")
        if communication.get_group_size() == 1:
            return None
        reducer = DistributedGradReducer(weights)
        if get_auto_parallel_context("parameter_broadcast"):
            reducer.broadcast_parameters()
        return reducer

    def stage_parameters(self, cell):
        return stage_parameters(cell)

    def shard_function(self, fn, in_strategy, out_strategy, parameter_plan, device, level):
        return ShardFunction(fn, in_strategy, out_strategy, parameter_plan, device, level)

    def declare_inputs(self, cell, inputs, kwargs):
        declare_inputs(cell, inputs, kwargs)

    def model_wiring(self):
        return _ModelWiring

    def sliced_embedding(self, *args, **kwargs):
        return sliced_embedding(*args, **kwargs)

    # ---- checkpoints ------------------------------------------------------------------
    def checkpoint_entries(self, entries):
        return layout_entries(entries)

    def integrated_entries(self, entries):
        return integrated_entries(entries)

    def local_value(self, param, value):
        return local_value(param, value)


def _one_rank():
    """A job of one rank: every operator runs whole, so calls run as written (no trace)."""
    world = current_world()
    return world is None or world.size == 1


def _passes_through(cell):
    """Cells that are not networks, training steps by class (``TrainOneStepCell``) and
    cells that run their own ``ShardedCall`` (``ShardedCell``, ``AutoParallel``)."""
    return (isinstance(cell, _NOT_NETWORKS) or getattr(cell, "_runs_training_step", False)
            or getattr(cell, "_runs_sharded", False))


def sharded_call_of(cell):
    """The ``ShardedCall`` that runs ``cell`` under semi/auto parallel, or None before its
    first sharded call (the tests read its program)."""
    return _cell_calls.get(cell)


nn.DistributedGradReducer = DistributedGradReducer
nn.PipelineCell = PipelineCell
nn.PipelineGradReducer = PipelineGradReducer
for _name in collective_ops.__all__:     # ops.AllReduce, ops.AllGather, ..., ops.ReduceOp
    setattr(ops, _name, getattr(collective_ops, _name))
install_extension(ParallelExtension())
