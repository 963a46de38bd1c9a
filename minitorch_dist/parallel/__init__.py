"""Parallel training: the SINGA-style distributed optimizer ``DistOpt`` and its pieces."""
from .dist_opt import DistOpt, DIST_OPTIONS
from .loss_scale import DynamicLossScale

__all__ = ["DistOpt", "DIST_OPTIONS", "DynamicLossScale"]
