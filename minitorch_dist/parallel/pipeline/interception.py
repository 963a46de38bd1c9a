"""How one rank runs ``construct`` for one (virtual) stage and one micro-batch.

While a stage runs, every cell call and primitive call goes through the hooks below:

* a staged cell of an **earlier** stage is skipped: it returns a ``Placeholder``;
* a staged cell of **this** stage runs; the placeholders among its inputs are replaced by
  the activations received from the previous stage (through ``Recv``); a cell holding
  primitives with sharding strategies runs operator-sharded over the ranks of its stage
  (``Engine.sharded_call``);
* a staged cell of a **later** stage is skipped too, and the tensors this stage computed
  that it takes as inputs go to the next stage (through ``Send``);
* a cell without a stage and without staged cells inside, or a primitive, given a
  placeholder returns a placeholder; otherwise it runs (so the loss runs on the last stage,
  and code between two staged cells runs on the stage before the border).

Tensors computed by this stage are marked with it, so that only they cross the border and
the inputs that every rank already has (labels, masks from the data) are never sent.

A cell that runs here honours ``Cell.recompute()`` and ``memory_offload`` as ``Cell.__call__``
does outside a pipeline (``_run_cell``), and a primitive its ``Primitive.recompute()``: the
recomputed block runs under plain hooks (cells construct, primitives run) both times, so
its second run in backward (outside this interception) computes exactly what the first did.
"""
from contextlib import contextmanager

from ...autograd import no_grad
from ...nn.cell import set_cell_hook
from ...offload import offload_on, offloaded_call
from ...ops.primitive import set_primitive_hook
from ...recompute import recomputed_call
from ...runtime import _once
from ...tensor import Tensor
from .placeholder import Placeholder, first_placeholder
from .stage_plan import PipelineConfigError

__all__ = ["StageRun", "TraceRun", "intercepting"]

_MARK = "_pipeline_stage_of"


@contextmanager
def intercepting(run):
    """Install ``run``'s cell and primitive hooks for the duration of the block."""
    old_cell = set_cell_hook(run.cell_hook)
    old_prim = set_primitive_hook(run.primitive_hook)
    try:
        yield run
    finally:
        set_cell_hook(old_cell)
        set_primitive_hook(old_prim)


class _PlainRun:
    """Hooks for a block recomputed or offloaded inside a stage: nested cells run (with
    their own recompute/offload), primitives run; nothing is staged or marked."""

    @staticmethod
    def cell_hook(cell, inputs, kwargs):
        return _run_cell(cell, inputs, kwargs)

    @staticmethod
    def primitive_hook(prim, inputs, attrs):
        return _run_primitive(prim, inputs, attrs)


def _plainly(cell):
    """``cell.construct`` under ``_PlainRun``'s hooks, whichever hooks are installed."""
    def construct(*inputs, **kwargs):
        with intercepting(_PlainRun):
            return cell.construct(*inputs, **kwargs)
    return construct


def _run_cell(cell, inputs, kwargs):
    """``cell.construct(*inputs, **kwargs)``, recomputed (``Cell.recompute()``) or with its
    saved activations offloaded (``memory_offload``, a layer) as outside a pipeline."""
    if cell.__dict__.get("_recompute"):
        return recomputed_call(_plainly(cell), inputs, kwargs, owner=cell)
    if not cell._cells and offload_on():
        return offloaded_call(_plainly(cell), cell, inputs, kwargs)
    return cell.construct(*inputs, **kwargs)


def _run_primitive(prim, inputs, attrs):
    """``prim.run``, recomputed when ``Primitive.recompute()`` asked for it."""
    if prim._recompute:
        return recomputed_call(lambda *xs: prim.run(*xs, **attrs), inputs)
    return prim.run(*inputs, **attrs)


def _flat_tensors(values):
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, Tensor):
            yield v
        elif type(v) in (tuple, list):
            stack.extend(v)
        elif type(v) is dict:
            stack.extend(v.values())


def _replace(values, fn):
    """``values`` (nested tuples/lists/dicts) with every Placeholder ``p`` replaced by ``fn(p)``."""
    if type(values) is Placeholder:
        return fn(values)
    if type(values) in (tuple, list):
        return type(values)(_replace(v, fn) for v in values)
    if type(values) is dict:
        return {k: _replace(v, fn) for k, v in values.items()}
    return values


class _Run:
    """Shared by tracing and stage runs: unstaged leaf cells and primitives on placeholders."""

    def __init__(self, plan):
        self.plan = plan
        self.depth = 0           # > 0 inside a staged cell that runs here
        self.call_index = 0      # staged cells called at depth 0 so far

    def cell_hook(self, cell, inputs, kwargs):
        stage = cell._pipeline_stage
        if self.depth or stage is None:
            if stage is None and not self.plan.holds_stages(cell):
                found = first_placeholder((inputs, kwargs))
                if found is not None:
                    return Placeholder(found.origin)
                return self.run_cell(cell, inputs, kwargs)
            if self.depth:
                return self.run_cell(cell, inputs, kwargs)
            if cell.__dict__.get("_recompute"):
                _once("pipeline.recompute_spans_stages",
                      f"Cell.recompute: {type(cell).__name__} holds cells of several pipeline "
                      "stages, so it is not recomputed as a whole; its cells inside one stage "
                      "are, where recompute() was called on them")
            return cell.construct(*inputs, **kwargs)
        index = self.call_index
        self.call_index += 1
        return self.staged_call(cell, stage, index, inputs, kwargs)

    def primitive_hook(self, prim, inputs, attrs):
        found = first_placeholder(inputs)
        if found is not None:
            return Placeholder(found.origin)
        return self.run_primitive(prim, inputs, attrs)

    def run_primitive(self, prim, inputs, attrs):
        return prim.run(*inputs, **attrs)

    def run_cell(self, cell, inputs, kwargs):
        return cell.construct(*inputs, **kwargs)


class TraceRun(_Run):
    """Records the staged cells in call order without computing any of them."""

    def __init__(self, plan):
        super().__init__(plan)
        self.calls = []

    def staged_call(self, cell, stage, index, inputs, kwargs):
        self.calls.append((cell, stage))
        return Placeholder(stage)

    def run_primitive(self, prim, inputs, attrs):
        with no_grad():
            return prim.run(*inputs, **attrs)


class StageRun(_Run):
    """Runs virtual stage ``stage`` of micro-batch ``microbatch`` for a ``StepRunner``."""

    def __init__(self, runner, stage, microbatch):
        super().__init__(runner.plan)
        self.runner = runner
        self.stage = stage
        self.microbatch = microbatch
        self.received = {}       # id(placeholder) -> Tensor
        self.used = 0            # received activations consumed
        self.sent_ids = {}       # id(tensor) -> index
        self.sent = []           # tensors posted for the next stage
        self.tokens = []         # Send outputs: where this stage's backward starts

    def staged_call(self, cell, stage, index, inputs, kwargs):
        chunk = self.plan.chunk_of_call(index)
        if chunk < self.stage:
            return Placeholder(chunk)
        if chunk > self.stage:
            self._send_inputs(cell, chunk, (inputs, kwargs))
            return Placeholder(chunk)
        inputs = _replace(inputs, lambda p: self._received(cell, p))
        kwargs = _replace(kwargs, lambda p: self._received(cell, p))
        self.depth += 1
        try:
            sharded = self.runner.engine.sharded_call(cell)
            if sharded is not None and not kwargs:    # operator sharding inside the stage
                out = sharded(*inputs)
            else:
                out = _run_cell(cell, inputs, kwargs)
        finally:
            self.depth -= 1
        for t in _flat_tensors((out,)):
            setattr(t, _MARK, self.stage)
        return out

    def run_cell(self, cell, inputs, kwargs):
        return _run_cell(cell, inputs, kwargs)

    def run_primitive(self, prim, inputs, attrs):
        out = _run_primitive(prim, inputs, attrs)
        if not self.depth and any(getattr(t, _MARK, None) == self.stage
                                  for t in _flat_tensors(inputs)):
            for t in _flat_tensors((out,)):
                setattr(t, _MARK, self.stage)
        return out

    # ---- the borders ------------------------------------------------------------------
    def _received(self, cell, placeholder):
        if placeholder.origin != self.stage - 1:
            raise PipelineConfigError(
                f"cell '{self.plan.name(cell)}' (stage {self.stage}) uses the output of stage "
                f"{placeholder.origin}; activations can only pass from a stage to the next one")
        key = id(placeholder)
        if key not in self.received:
            self.received[key] = self.runner.receive(self.stage, self.microbatch, self.used)
            self.used += 1
        return self.received[key]

    def _send_inputs(self, cell, chunk, values):
        for t in _flat_tensors(values):
            if getattr(t, _MARK, None) != self.stage or id(t) in self.sent_ids:
                continue
            if chunk != self.stage + 1:
                raise PipelineConfigError(
                    f"cell '{self.plan.name(cell)}' (stage {chunk}) uses an output of stage "
                    f"{self.stage}; activations can only pass from a stage to the next one")
            self.sent_ids[id(t)] = len(self.sent)
            self.sent.append(t)
            self.tokens.append(self.runner.send(t, self.stage, self.microbatch,
                                                len(self.sent) - 1))
