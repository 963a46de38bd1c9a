"""MindSpore's mixed-precision lists, by name (resolved when used, so layers added later join).

White list (level O1 runs these in float16): MindSpore's ``AMP_WHITE_LIST``. Black list
(level O2 keeps these in float32): ``AMP_BLACK_LIST``. Names this framework does not have
(``Conv3d``, ``LSTMCell``, ...) are listed by ``missing_names()``.
"""
WHITE_CELLS = ("Conv1d", "Conv2d", "Conv3d", "Conv1dTranspose", "Conv2dTranspose",
               "Conv3dTranspose", "Dense", "LSTMCell", "RNNCell", "GRUCell")
WHITE_PRIMITIVES = ("Conv2D", "Conv3D", "Conv2DTranspose", "Conv3DTranspose",
                    "Conv2DBackpropInput", "MatMul", "BatchMatMul", "PReLU", "ReLU", "Ger")
BLACK_CELLS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm")


def _resolve(module, names):
    return [getattr(module, n) for n in names if isinstance(getattr(module, n, None), type)]


def white_cells():
    from .. import nn
    return _resolve(nn, WHITE_CELLS)


def white_primitives():
    from .. import ops
    return _resolve(ops, WHITE_PRIMITIVES)


def black_cells():
    from .. import nn
    return _resolve(nn, BLACK_CELLS)


def get_white_list():
    """The cells and primitives that level O1 runs in float16 (a copy: editing it changes
    nothing; pass your own list to ``custom_mixed_precision``)."""
    return white_cells() + white_primitives()


def get_black_list():
    """The cells that level O2 keeps in float32."""
    return black_cells()


def missing_names():
    """MindSpore's list entries that this framework does not have."""
    from .. import nn, ops
    return ([n for n in WHITE_CELLS + BLACK_CELLS if not hasattr(nn, n)]
            + [n for n in WHITE_PRIMITIVES if not hasattr(ops, n)])
