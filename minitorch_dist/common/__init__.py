"""MindSpore-compatible ``common`` namespace (initializers)."""
from . import initializer
