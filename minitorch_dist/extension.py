"""How a higher layer steps into the work of the lower ones: the parallel layer's way in.

``nn``, ``train`` and ``gradients`` run single-process training by themselves. Parallel
training changes a few of their decisions: how a network call runs (operator-sharded over
ranks), how a training step reduces its gradients (data parallel, mirrors), which parameters
a pipeline rank trains, what a checkpoint records about sliced parameters, and how ``Model``
wraps a pipelined network. Those decisions are the methods of ``Extension`` below. The lower
layers call ``extension()``; the defaults are the single-process answers. ``parallel``
installs its subclass when it is imported (``minitorch_dist`` imports it), so a reader of
``nn/`` meets no parallel code and a reader of ``parallel/`` sees every way in, in
``parallel/extension.py``.

The methods, each with who calls it:

* ``call_cell(cell, inputs, kwargs)``: ``Cell.__call__`` (no per-thread cell hook) runs a cell.
* ``call_differentiated(fn, args)``: ``value_and_grad`` (``grad``, ``GradOperation``) runs ``fn``.
* ``call_function(fn, args)``: ``jit`` and ``AutoParallel`` run a function.
* ``gradient_scope(fn, weights)``: ``value_and_grad``'s context around forward and
  backward (the parallel layer fuses deferred mirror reductions in its ``finish``).
* ``check_primitive_call(prim)``: ``Primitive.apply``, before a primitive with a strategy runs.
* ``train_step_reducer(weights, network)``: ``TrainOneStepCell``'s gradient reduction, or None.
* ``stage_parameters(cell)``: ``Cell.infer_param_pipeline_stage``'s parameters of this rank.
* ``model_wiring()``: how ``Model`` runs a pipelined network, or None.
* ``sliced_embedding(...)``: ``EmbeddingLookup``'s table split across ranks, or None.
* ``checkpoint_entries(entries)``: ``save_checkpoint``'s extra entries (slice layouts).
* ``integrated_entries(entries)``: ``save_checkpoint(integrated_save=True)``'s whole tensors.
* ``local_value(param, value)``: ``load_param_into_net``'s block of a value for ``param``.

>>> from minitorch_dist.extension import Extension, extension
>>> isinstance(extension(), Extension)
True
"""

__all__ = ["Extension", "extension", "install_extension"]


class Extension:
    """The single-process answers. Subclasses override what they change."""

    # ---- calls ------------------------------------------------------------------------
    def call_cell(self, cell, inputs, kwargs):
        """Run ``cell`` on ``inputs`` (``Cell.__call__`` when no per-thread hook is set)."""
        return cell.construct(*inputs, **kwargs)

    def call_differentiated(self, fn, args):
        """Run ``fn(*args)`` for ``value_and_grad`` (and so ``grad``, ``GradOperation``)."""
        return fn(*args)

    def gradient_scope(self, fn, weights):
        """A context around ``value_and_grad``'s forward; its ``finish(targets, grads)`` runs
        after the backward and returns the gradients."""
        return _PlainGradientScope()

    def call_function(self, fn, args):
        """Run ``fn(*args)`` for ``jit`` and ``AutoParallel``."""
        return fn(*args)

    def shard_function(self, fn, in_strategy, out_strategy, parameter_plan, device, level):
        """``Cell.shard`` / ``ms.shard``: served by the parallel layer."""
        raise RuntimeError("Cell.shard needs the parallel layer (import minitorch_dist)")

    def declare_inputs(self, cell, inputs, kwargs):
        """``Cell.set_inputs``: served by the parallel layer."""
        raise RuntimeError("Cell.set_inputs needs the parallel layer (import minitorch_dist)")

    def check_primitive_call(self, prim):
        """Called before a primitive with a sharding strategy runs outside any parallel
        executor; the default accepts it (one process runs the whole operator)."""

    # ---- training wrappers ------------------------------------------------------------
    def train_step_reducer(self, weights, network):
        """The gradient reduction of a ``TrainOneStepCell`` over ``weights``: a callable on
        the gradient tuple, or None for none."""
        return None

    def stage_parameters(self, cell):
        """The trainable parameters this process trains (``infer_param_pipeline_stage``)."""
        return cell.trainable_params()

    def model_wiring(self):
        """How ``Model`` runs pipelined networks: an object with ``pipeline_of(network)``,
        ``pipeline_reducer(parameters)``, ``pipeline_eval_cell(pipeline)`` and
        ``replica_batches(source, pipeline, dataset)``, or None (no pipelines)."""
        return None

    def sliced_embedding(self, slice_mode, shape, dtype, param_init, home, group, sparse,
                         manual_shapes=None):
        """``(table Parameter, lookup primitive)`` of an ``EmbeddingLookup`` table split across
        ranks by ``slice_mode`` (``manual_shapes``: field_slice's row counts per rank), or
        None to keep it whole (always, in one process)."""
        return None

    # ---- checkpoints ------------------------------------------------------------------
    def checkpoint_entries(self, entries):
        """Extra ``(name, value)`` entries describing ``entries`` (e.g. slice layouts)."""
        return []

    def integrated_entries(self, entries):
        """``entries`` with every sliced value replaced by the whole tensor
        (``save_checkpoint(integrated_save=True)``); in one process nothing is sliced."""
        return entries

    def local_value(self, param, value):
        """The part of a checkpoint ``value`` that ``param`` holds in this process (a
        sliced parameter takes its block of a whole tensor); by default all of it."""
        return value


_installed = [Extension()]
installed_extensions = _installed   # read-only view for hot paths: [0] is extension()


def extension():
    """The installed ``Extension``."""
    return _installed[0]


def install_extension(ext):
    """Install ``ext`` (an ``Extension``); returns the previous one."""
    if not isinstance(ext, Extension):
        raise TypeError(f"install_extension needs an Extension, got {type(ext).__name__}")
    previous, _installed[0] = _installed[0], ext
    return previous


class _PlainGradientScope:
    """The single-process ``gradient_scope``: nothing around forward, gradients as found."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def finish(self, targets, grads):
        return grads
