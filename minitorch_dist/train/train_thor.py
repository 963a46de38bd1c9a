"""``mindspore.train.train_thor``: the THOR second-order optimizer's converters.

Model-zoo scripts import ``ConvertModelUtils`` and ``ConvertNetUtils`` always and call them
when their config asks for THOR. ``ConvertModelUtils.convert_to_thor_model`` returns the
model unchanged when the optimizer is not a THOR optimizer, as MindSpore's does; since this
framework has no THOR optimizer (``nn.thor`` is not provided), that is always the case.
``ConvertNetUtils.convert_to_thor_net`` would rewrite layers into THOR layers, and is
refused with an error.

>>> from minitorch_dist.train.train_thor import ConvertModelUtils
>>> ConvertModelUtils.convert_to_thor_model(model="m", network=None, loss_fn=None, optimizer=None)
'm'
"""

__all__ = ["ConvertModelUtils", "ConvertNetUtils"]


class ConvertModelUtils:
    """MindSpore's converter of a ``Model`` for THOR training."""

    @staticmethod
    def convert_to_thor_model(model, network, loss_fn=None, optimizer=None, metrics=None,
                              amp_level="O0", loss_scale_manager=None, keep_batchnorm_fp32=False):
        """``model`` itself: ``optimizer`` is not a THOR optimizer (none exists here)."""
        return model


class ConvertNetUtils:
    """MindSpore's converter of a network's layers into THOR layers."""

    def convert_to_thor_net(self, net):
        raise NotImplementedError("ConvertNetUtils.convert_to_thor_net is not implemented in "
                                  "minitorch_dist: there is no THOR optimizer or THOR layers here; "
                                  "train with nn.Momentum (the model zoo's default)")
