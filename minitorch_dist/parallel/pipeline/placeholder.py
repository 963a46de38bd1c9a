"""Placeholder: the value a rank sees where another rank computes.

Every rank runs the network's whole ``construct``. A cell of an earlier stage is skipped and
returns a Placeholder; so is a cell of a later stage. Anything computed from a Placeholder
(a primitive call, a method, an index, arithmetic) is a Placeholder again, so the Python code
of ``construct`` runs through without computing another rank's work. ``origin`` is the
(virtual) stage whose output it stands for: the runtime checks that a stage only consumes
placeholders of the stage right before it.

>>> p = Placeholder(0)
>>> q = (p + 1).reshape(p.shape[0], -1)
>>> isinstance(q, Placeholder), q.origin
(True, 0)
"""

__all__ = ["Placeholder", "is_placeholder", "first_placeholder"]


class Placeholder:
    """Stands for the output of (virtual) stage ``origin`` computed on another rank."""

    __slots__ = ("origin",)

    def __init__(self, origin):
        object.__setattr__(self, "origin", origin)

    def _absorb(self, *args, **kwargs):
        return self

    # Whatever construct does with it yields a placeholder.
    __call__ = __getitem__ = _absorb
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _absorb
    __truediv__ = __rtruediv__ = __floordiv__ = __matmul__ = __rmatmul__ = __pow__ = _absorb
    __neg__ = __pos__ = __abs__ = __invert__ = _absorb
    __lt__ = __le__ = __gt__ = __ge__ = _absorb

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __setattr__(self, name, value):
        pass

    def __iter__(self):
        raise TypeError("a pipeline Placeholder (another stage's output) cannot be unpacked: "
                        "return a single tensor from a cell whose output crosses a stage border")

    def __index__(self):
        return 1        # shapes computed from another stage's output only feed placeholders

    __int__ = __index__

    def __bool__(self):
        raise TypeError("construct branches on a value that another pipeline stage computes; "
                        "pipelined networks need control flow that does not depend on data")

    def __len__(self):
        return 1

    def __repr__(self):
        return f"Placeholder(stage {self.origin})"


def is_placeholder(value):
    return type(value) is Placeholder


def first_placeholder(values):
    """The placeholder of the latest stage among ``values`` (nested tuples/lists/dicts), or None."""
    found = None
    stack = list(values)
    while stack:
        v = stack.pop()
        if type(v) is Placeholder:
            if found is None or v.origin > found.origin:
                found = v
        elif type(v) in (tuple, list):
            stack.extend(v)
        elif type(v) is dict:
            stack.extend(v.values())
    return found
