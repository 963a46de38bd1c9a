"""``mindspore.log``: MindSpore's logging functions over the ``"minitorch_dist"`` logger.

``logger.info(...)``, ``warning``, ``error``, ``debug``, ``critical``; ``get_level()`` gives
MindSpore's level digit (``GLOG_v``: "0" debug, "1" info, "2" warning, "3" error);
``get_log_config()`` the settings in force. ``ms.set_context(log_level=...)`` or ``GLOG_v``
set the level. ``logger`` is that logger itself: the framework's modules log through it.

>>> import minitorch_dist.log as logger
>>> logger.get_level() in ("0", "1", "2", "3")
True
"""
import logging

__all__ = ["debug", "info", "warning", "error", "critical", "get_level", "get_log_config"]

logger = logging.getLogger("minitorch_dist")
debug, info, warning, error, critical = (logger.debug, logger.info, logger.warning,
                                         logger.error, logger.critical)
_DIGITS = {logging.DEBUG: "0", logging.INFO: "1", logging.WARNING: "2", logging.ERROR: "3",
           logging.CRITICAL: "3"}


def get_level():
    """The effective level as MindSpore's digit."""
    return _DIGITS.get(logger.getEffectiveLevel(), "2")


def get_log_config():
    """``{"GLOG_v": digit}``: the one setting that applies here."""
    return {"GLOG_v": get_level()}
