"""``mindspore.dtype``: MindSpore's dtype module under its short name.

``from mindspore import dtype as mstype`` (MindSpore 1.x samples) and ``ms.dtype.float32``
name the same dtypes as ``minitorch_dist.common.dtype`` and the top level.

>>> import minitorch_dist as ms
>>> from minitorch_dist import dtype as mstype
>>> mstype.float32 is ms.float32 is ms.common.dtype.float32
True
"""
from .common.dtype import *            # noqa: F401,F403
from .common.dtype import __all__      # noqa: F401
from .common.dtype import __getattr__  # noqa: F401  (unsupported MindSpore dtypes say so)
