"""``mindspore.train.amp``: MindSpore 1.x's path of the mixed-precision functions, and its
``AMP_WHITE_LIST``/``AMP_BLACK_LIST`` (the classes this framework has; see ``amp/lists.py``)."""
from ..amp import (auto_mixed_precision, build_train_network, custom_mixed_precision,  # noqa: F401
                   get_black_list, get_white_list)

AMP_WHITE_LIST = get_white_list()
AMP_BLACK_LIST = get_black_list()

__all__ = ["auto_mixed_precision", "build_train_network", "custom_mixed_precision",
           "get_white_list", "get_black_list", "AMP_WHITE_LIST", "AMP_BLACK_LIST"]
