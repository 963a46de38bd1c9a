"""``mindspore.nn.wrap``: the training wrappers under their MindSpore 1.x module path.

``nn.wrap.TrainOneStepCell`` is ``nn.TrainOneStepCell``; ``nn.wrap.grad_reducer`` holds
``DistributedGradReducer``.
"""
from ..wrappers import TrainOneStepCell, WithEvalCell, WithLossCell  # noqa: F401
from . import grad_reducer  # noqa: F401

__all__ = ["TrainOneStepCell", "WithEvalCell", "WithLossCell", "grad_reducer"]
