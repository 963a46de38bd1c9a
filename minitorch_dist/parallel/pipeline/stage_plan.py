"""The stage plan: which cells and parameters belong to which stage, checked before any
message is sent, so that a mistake is the same clear error on every rank.

Static checks (on construction), MindSpore's rules:

* a ``pipeline_stage`` is an int in ``[0, pipeline_stages)``;
* every cell holding trainable parameters has a stage, its own or an ancestor's;
* a cell inside a staged cell has no other stage.

The call order is known only by running ``construct``: the first step traces it (every
staged cell skipped, nothing computed) and checks that stages run in execution order. With
``pipeline_interleave`` the stages must cycle ``0..p-1`` several times; each pass is a chunk
(a virtual stage ``k``, on rank stage ``k % p``).
"""

__all__ = ["StagePlan", "PipelineConfigError"]


class PipelineConfigError(ValueError):
    """A pipelined network or its settings break a pipeline rule (the message says which)."""


class StagePlan:
    """Stages of the cells and parameters of ``network`` for ``stages`` pipeline stages."""

    def __init__(self, network, stages, interleave=False):
        self.network = network
        self.stages = stages
        self.interleave = bool(interleave)
        self.names = {}
        for path, cell in network.cells_and_names():
            self.names.setdefault(id(cell), path or type(cell).__name__)
        self.staged_below = {}       # id(cell) -> does it or a descendant have a stage
        self.param_stages = {}       # id(param) -> set of stages that use it
        self._walk(network, None)
        self.call_chunks = None      # virtual stage of each top-level staged call, once traced
        self.chunks = 1

    # ---- static checks ----------------------------------------------------------------
    def name(self, cell):
        return self.names.get(id(cell), type(cell).__name__)

    def _walk(self, cell, inherited):
        own = cell._pipeline_stage
        if own is not None and not own < self.stages:
            raise PipelineConfigError(
                f"cell '{self.name(cell)}' has pipeline_stage {own}, but pipeline_stages is "
                f"{self.stages}: stages are 0..{self.stages - 1}")
        if own is not None and inherited is not None and own != inherited:
            raise PipelineConfigError(
                f"cell '{self.name(cell)}' has pipeline_stage {own} inside a cell of stage "
                f"{inherited}: a staged cell runs whole on one stage")
        stage = own if own is not None else inherited
        trainable = [p for p in cell._params.values() if p.requires_grad]
        if stage is None and trainable:
            raise PipelineConfigError(
                f"cell '{self.name(cell)}' holds trainable parameters ({trainable[0].name}) but "
                "has no pipeline_stage; set pipeline_stage on it or on a cell that contains "
                "it: every cell with parameters needs a stage")
        for param in cell._params.values():
            stages = self.param_stages.setdefault(id(param), set(param.pipeline_stages))
            if stage is not None:
                stages.add(stage)
        below = own is not None
        for child in cell._cells.values():
            below = self._walk(child, stage) or below
        self.staged_below[id(cell)] = below
        return below

    def stages_of(self, param):
        """The stages that use ``param`` (empty for an untrainable parameter outside stages)."""
        return self.param_stages.get(id(param), set(param.pipeline_stages))

    def holds_stages(self, cell):
        """True when ``cell`` or a cell inside it has a stage (it must run to reach them)."""
        return self.staged_below.get(id(cell), True)

    # ---- the traced call order --------------------------------------------------------
    def record_trace(self, calls):
        """Check ``calls`` (``(cell, stage)`` in execution order) and give each a chunk."""
        if not calls:
            raise PipelineConfigError("the pipelined network called no cell with a "
                                      "pipeline_stage; set pipeline_stage on its layers")
        runs = []                    # [stage, first cell] per maximal run of one stage
        for cell, stage in calls:
            if not runs or runs[-1][0] != stage:
                runs.append([stage, cell])
        chunks = []
        if self.interleave and len(runs) > self.stages:
            self._check_cycles(runs)
            run_index = 0
            for k, (cell, stage) in enumerate(calls):
                if k and stage != calls[k - 1][1]:
                    run_index += 1
                chunks.append(run_index)
            self.chunks = len(runs) // self.stages
        else:
            for (cell, stage), (prev_cell, prev_stage) in zip(calls[1:], calls[:-1]):
                if stage < prev_stage:
                    raise PipelineConfigError(
                        f"pipeline stages out of execution order: cell '{self.name(cell)}' "
                        f"(stage {stage}) runs after cell '{self.name(prev_cell)}' (stage "
                        f"{prev_stage}); stages must not decrease along construct")
            chunks = [stage for _, stage in calls]
            self.chunks = 1
        missing = sorted(set(range(self.stages)) - {stage for _, stage in calls})
        if missing:
            raise PipelineConfigError(f"pipeline stage {missing[0]} has no cell: with "
                                      f"pipeline_stages={self.stages} every stage needs work")
        self.call_chunks = chunks

    def _check_cycles(self, runs):
        p = self.stages
        stages = [stage for stage, _ in runs]
        expected = [k % p for k in range(len(runs))]
        if stages != expected or len(runs) % p:
            bad = next((k for k, (s, e) in enumerate(zip(stages, expected)) if s != e), len(runs))
            where = f"cell '{self.name(runs[bad][1])}' " if bad < len(runs) else ""
            raise PipelineConfigError(
                f"with pipeline_interleave the stages must cycle 0..{p - 1} a whole number of "
                f"times in execution order; {where}breaks the cycle: stage order is {stages}")

    def chunk_of_call(self, index):
        return self.call_chunks[index]
