"""``mindspore.Profiler``: what ran where and for how long, from the placement statistics.

``Profiler(output_path="./data", start_profile=True, **options)`` resets the per-primitive
statistics (calls, time, bytes moved) at ``start()`` (or at construction), and ``analyse()``
writes ``ms.placement_report()`` and the transfer counters to
``<output_path>/profiler/placement_report.txt``. Options for Ascend/GPU tracing
(``profile_memory``, ``aicore_metrics``, ...) are accepted with a one-time note that they do
not apply here.

>>> import os, tempfile
>>> import minitorch_dist as ms
>>> from minitorch_dist.profiler import Profiler
>>> scratch = tempfile.TemporaryDirectory()      # removed at the end
>>> prof = Profiler(output_path=scratch.name)
>>> _ = ms.ops.MatMul()(ms.Tensor([[1.0]]), ms.Tensor([[2.0]]))
>>> os.path.basename(prof.analyse())
'placement_report.txt'
>>> scratch.cleanup()
"""
import logging
import os

logger = logging.getLogger("minitorch_dist")

__all__ = ["Profiler"]

_noted = set()


class Profiler:
    """See the module docstring."""

    def __init__(self, output_path="./data", start_profile=True, **options):
        if not isinstance(output_path, str) or not output_path:
            raise ValueError(f"Profiler: output_path must be a non-empty str, got {output_path!r}")
        self.output_path = output_path
        ignored = sorted(set(options) - _noted)
        if ignored:
            _noted.update(ignored)
            logger.warning("Profiler: options %s trace Ascend/GPU kernels and do not apply here; "
                           "the report lists each primitive's calls, time and bytes moved", ignored)
        self.running = False
        if start_profile:
            self.start()

    def start(self):
        """Reset the statistics and start counting."""
        from .backend import reset_transfer_stats
        from .placement import reset_placement_stats
        reset_placement_stats()
        reset_transfer_stats()
        self.running = True

    def stop(self):
        self.running = False

    def analyse(self, offline_path=None, pretty=False, step_list=None, mode="sync"):
        """Write the report; returns its path.

        The report covers this process since ``start()``: ``offline_path`` (another run's
        data) and ``step_list`` (some steps only) cannot be honoured and are refused;
        ``pretty`` (indented JSON) and ``mode="async"`` (analysis in the background) are
        noted once: the report is one text file, written before ``analyse`` returns.
        """
        if offline_path is not None:
            raise NotImplementedError(f"Profiler.analyse: offline_path={offline_path!r} analyses "
                                      "another run's data, which this profiler does not record; "
                                      "call analyse() in the process that profiled")
        if step_list is not None:
            raise NotImplementedError(f"Profiler.analyse: step_list={step_list!r} needs per-step "
                                      "data; the report covers everything since start(), so "
                                      "call start() before the steps you want and analyse() "
                                      "after them")
        if mode not in ("sync", "async"):
            raise ValueError(f"Profiler.analyse: mode must be 'sync' or 'async', got {mode!r}")
        if not isinstance(pretty, bool):
            raise TypeError(f"Profiler.analyse: pretty must be True or False, got {pretty!r}")
        for name, value, default in (("pretty", pretty, False), ("mode", mode, "sync")):
            if value != default and ("analyse." + name) not in _noted:
                _noted.add("analyse." + name)
                logger.warning("Profiler.analyse(%s=%r) changes nothing: the report is one text "
                               "file, written before analyse returns", name, value)
        from .backend import transfer_stats
        from .placement import placement_report
        folder = os.path.join(self.output_path, "profiler")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "placement_report.txt")
        with open(path, "w") as f:
            f.write(str(placement_report()) + "\n\ntransfers: " + str(transfer_stats()) + "\n")
        return path
