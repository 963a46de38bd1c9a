"""MindSpore's ``mindspore.train.serialization`` spelling of the checkpoint functions."""
from .checkpoint import save_checkpoint, load_checkpoint, load_param_into_net  # noqa: F401
