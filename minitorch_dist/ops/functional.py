"""Every primitive's functional form in one namespace (what ``Tensor``'s methods call)."""
from .arithmetic import *      # noqa: F401,F403
from .elementwise import *     # noqa: F401,F403
from .activation import *      # noqa: F401,F403
from .reduction import *       # noqa: F401,F403
from .shape_ops import *       # noqa: F401,F403
from .indexing import *        # noqa: F401,F403
from .cast import *            # noqa: F401,F403
from .matmul import *          # noqa: F401,F403
from .conv import *            # noqa: F401,F403
from .pooling import *         # noqa: F401,F403
from .normalization import *   # noqa: F401,F403
from .dropout import *         # noqa: F401,F403
from .embedding import *       # noqa: F401,F403
from .loss import *            # noqa: F401,F403
from .trigonometric import *   # noqa: F401,F403
from .creation import fill, ones, zeros, shape, rank, size, dtype, dyn_shape   # noqa: F401
from .legacy_names import scalar_to_array, scalar_to_tensor, tuple_to_array, scalar_cast  # noqa: F401
from .control import depend, stop_gradient   # noqa: F401
from .composite import partial   # noqa: F401
from .selection import select, where   # noqa: F401
from .repetition import tile, cumsum   # noqa: F401
from .nd_indexing import gather_nd, scatter_nd   # noqa: F401
from .math_func import *       # noqa: F401,F403
from .array_func import *      # noqa: F401,F403
from .mask_func import *       # noqa: F401,F403
from .gather_func import *     # noqa: F401,F403
from .product_func import *    # noqa: F401,F403
from .scatter_func import *    # noqa: F401,F403
from .reduce_func import *     # noqa: F401,F403
from .linalg_func import *     # noqa: F401,F403
from .nn_func import *         # noqa: F401,F403
from .random_func import *     # noqa: F401,F403
from .misc_func import *       # noqa: F401,F403
from .special_func import *    # noqa: F401,F403
