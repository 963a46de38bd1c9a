"""``mindspore.parallel.set_algo_parameters``: the knobs of MindSpore's strategy search.

Here every AUTO_PARALLEL search is sharding propagation (``docs/sharding.md``), so the knobs
are checked and recorded, and each says once what it does here:

* ``fully_use_devices=True`` (the default) is what propagation does already: ties go to the
  strategy that uses more devices. ``False`` cannot be honoured (candidates using fewer
  devices still lose ties) and says so.
* ``elementwise_op_strategy_follow``, ``tensor_slice_align_enable``,
  ``tensor_slice_align_size``, ``enable_algo_approxi``, ``algo_approxi_epsilon`` shape
  MindSpore's dynamic-programming search, which does not exist here.

>>> from minitorch_dist.parallel import set_algo_parameters, get_algo_parameters
>>> set_algo_parameters(fully_use_devices=True)
>>> get_algo_parameters("fully_use_devices")
True
"""
import logging

logger = logging.getLogger("minitorch_dist")

__all__ = ["set_algo_parameters", "get_algo_parameters", "reset_algo_parameters"]

_DEFAULTS = {"fully_use_devices": True, "elementwise_op_strategy_follow": False,
             "tensor_slice_align_enable": False, "tensor_slice_align_size": 16,
             "enable_algo_approxi": False, "algo_approxi_epsilon": 0.1}
_values = dict(_DEFAULTS)
_noted = set()


def _check(key, value):
    if key not in _DEFAULTS:
        raise ValueError(f"set_algo_parameters: unknown option {key!r}; expected one of "
                         f"{sorted(_DEFAULTS)}")
    if key == "tensor_slice_align_size":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024 \
                or value & (value - 1):
            raise ValueError("set_algo_parameters: tensor_slice_align_size must be a power of "
                             f"two in [1, 1024], got {value!r}")
    elif key == "algo_approxi_epsilon":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ValueError("set_algo_parameters: algo_approxi_epsilon must be in (0, 1], got "
                             f"{value!r}")
    elif not isinstance(value, bool):
        raise ValueError(f"set_algo_parameters: {key} must be True or False, got {value!r}")


def set_algo_parameters(**kwargs):
    """Check and record the search knobs (see the module docstring)."""
    for key, value in kwargs.items():
        _check(key, value)
    for key, value in kwargs.items():
        _values[key] = value
        if key == "fully_use_devices" and value:
            continue
        if (key, value) not in _noted:
            _noted.add((key, value))
            if key == "fully_use_devices":
                logger.warning("set_algo_parameters(fully_use_devices=False): sharding "
                               "propagation still prefers strategies that use more devices")
            else:
                logger.warning("set_algo_parameters(%s=...) is recorded and has no effect: it "
                               "shapes MindSpore's dynamic-programming search, and searches "
                               "here are sharding propagation", key)


def get_algo_parameters(key):
    """The recorded value of one knob."""
    if key not in _DEFAULTS:
        raise ValueError(f"get_algo_parameters: unknown option {key!r}; expected one of "
                         f"{sorted(_DEFAULTS)}")
    return _values[key]


def reset_algo_parameters():
    """Every knob back to its default."""
    _values.clear()
    _values.update(_DEFAULTS)
