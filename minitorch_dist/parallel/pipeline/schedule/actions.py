"""The vocabulary of a pipeline schedule: one ``Action`` is one step of one rank.

A pipeline cuts a model into ``num_stages`` consecutive stages. With ``num_ranks`` ranks and
``chunks`` stages per rank (``num_stages = num_ranks * chunks``), stage ``s`` lives on rank
``s % num_ranks``: round robin, as in Megatron's and MindSpore's interleaving. With
``chunks == 1`` stage and rank are the same number.

An action is a ``(kind, stage, microbatch)`` triple, written compactly as
``{stage}{kind}{microbatch}`` (PyTorch's notation): ``2F0`` is the forward of micro-batch 0
on stage 2. The eight kinds, and exactly what the runtime does for each:

========  ==================================================================================
``F``     forward of ``microbatch`` through ``stage`` (the last stage also computes the loss)
``B``     backward of ``microbatch`` through ``stage`` (the last stage starts from the loss)
SEND_F    stage ``s`` sends the forward output of micro-batch ``i`` to stage ``s + 1``
RECV_F    stage ``s`` posts the receive of its forward input of micro-batch ``i`` from
          stage ``s - 1``
SEND_B    stage ``s`` sends the gradient of its input of micro-batch ``i`` to stage ``s - 1``
RECV_B    stage ``s`` posts the receive of the gradient of its output of micro-batch ``i``
          from stage ``s + 1``
WAIT_F    stage ``s`` completes its ``SEND_F(s, i)`` (MPI ``Wait``): the receiver has the
          activations, and their buffers may go
WAIT_B    stage ``s`` completes its ``SEND_B(s, i)``
========  ==================================================================================

SEND and RECV only *post* a message (MPI ``Isend``/``Irecv``); the compute that needs a
received tensor is the one that waits for it, and a send is completed by its WAIT (or, for
a hand-written schedule without one, at the end of the step). Posting receives early and
completing sends late is what lets messages travel while the rank computes: the
schedule says where each of them happens, and the validator and the simulator see it. A
WAIT may block: a large message leaves only once its receive is posted (MPI's rendezvous),
so ``WAIT_F(s, i)`` depends on ``RECV_F(s + 1, i)`` on the other rank, which the validator's
deadlock check takes into account. So the message ``SEND_F(s, i)`` →
``RECV_F(s + 1, i)`` crosses the boundary between stages ``s`` and ``s + 1``, and so does
``SEND_B(s + 1, i)`` → ``RECV_B(s, i)`` in the other direction. ``Action.tag`` gives both
ends of one message the same number, ready to be used as an MPI tag.

>>> a = Action.parse("1RECV_B0")
>>> a.kind, a.stage, a.microbatch
('RECV_B', 1, 0)
>>> str(Action(F, 2, 0)), a.peer_stage
('2F0', 2)
"""
import re
from collections import namedtuple

__all__ = ["Action", "F", "B", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "WAIT_F", "WAIT_B",
           "KINDS", "COMPUTE_KINDS", "COMM_KINDS", "WAIT_KINDS"]

F, B = "F", "B"
SEND_F, RECV_F, SEND_B, RECV_B = "SEND_F", "RECV_F", "SEND_B", "RECV_B"
WAIT_F, WAIT_B = "WAIT_F", "WAIT_B"
COMPUTE_KINDS = (F, B)
WAIT_KINDS = (WAIT_F, WAIT_B)
COMM_KINDS = (SEND_F, RECV_F, SEND_B, RECV_B) + WAIT_KINDS
KINDS = COMPUTE_KINDS + COMM_KINDS

# Longest names first is not needed (the digits anchor both ends), but it reads clearly.
_PATTERN = re.compile(r"^(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|WAIT_F|WAIT_B|F|B)(\d+)$")

# Which neighbour each communication action talks to, as a stage offset.
_PEER_OFFSET = {SEND_F: +1, RECV_F: -1, SEND_B: -1, RECV_B: +1, WAIT_F: +1, WAIT_B: -1}
# The SEND a WAIT completes, and the RECV at the other end of each message's sender side.
_SEND_OF_WAIT = {WAIT_F: SEND_F, WAIT_B: SEND_B}
_PARTNER = {SEND_F: RECV_F, RECV_F: SEND_F, SEND_B: RECV_B, RECV_B: SEND_B,
            WAIT_F: RECV_F, WAIT_B: RECV_B}


def _check_index(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Action: {name} must be a non-negative int, got {value!r}")
    return int(value)


class Action(namedtuple("_ActionBase", ["kind", "stage", "microbatch"])):
    """One step of one rank: ``(kind, stage, microbatch)``, immutable and hashable.

    ``kind`` is one of ``KINDS``; ``stage`` is the (virtual) stage index and ``microbatch``
    the micro-batch index, both non-negative ints. ``str`` and ``repr`` give the compact form
    (``2F0``, ``0SEND_F1``) so that lists of actions print like a timetable;
    ``Action.parse`` inverts it.

    >>> [Action(F, 0, 1), Action.parse("0B1")]
    [0F1, 0B1]
    >>> Action(F, 0, 1) == ("F", 0, 1)      # still a tuple underneath
    True
    """

    __slots__ = ()

    def __new__(cls, kind, stage, microbatch):
        # schedules hold many thousands of actions: one cheap test on the common path
        if type(stage) is not int or type(microbatch) is not int or stage < 0 \
                or microbatch < 0 or kind not in KINDS:
            if kind not in KINDS:
                raise ValueError(f"Action: kind must be one of {KINDS}, got {kind!r}")
            stage = _check_index("stage", stage)
            microbatch = _check_index("microbatch", microbatch)
        return tuple.__new__(cls, (kind, stage, microbatch))

    @classmethod
    def parse(cls, text):
        """The action written as ``text`` (``"2F0"``, ``"1RECV_B3"``); inverse of ``str``."""
        if isinstance(text, Action):
            return text
        match = _PATTERN.match(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"Action.parse: expected '<stage><kind><microbatch>' with kind in "
                             f"{KINDS}, such as '2F0' or '1RECV_B3', got {text!r}")
        stage, kind, microbatch = match.groups()
        return cls(kind, int(stage), int(microbatch))

    def __str__(self):
        return f"{self.stage}{self.kind}{self.microbatch}"

    __repr__ = __str__

    @property
    def is_compute(self):
        """True for ``F`` and ``B``: the actions that take time on the rank's device."""
        return self.kind in COMPUTE_KINDS

    @property
    def is_comm(self):
        """True for the SEND/RECV/WAIT kinds. SEND and RECV only post a message and never
        wait; a WAIT completes a SEND."""
        return self.kind in COMM_KINDS

    @property
    def is_wait(self):
        """True for ``WAIT_F``/``WAIT_B``: the completion of this rank's SEND."""
        return self.kind in WAIT_KINDS

    def send(self):
        """The SEND that a WAIT completes (``0WAIT_F1`` → ``0SEND_F1``).

        >>> Action.parse("1WAIT_B2").send()
        1SEND_B2
        """
        if not self.is_wait:
            raise ValueError(f"{self} is not a WAIT; only WAIT_F/WAIT_B complete a SEND")
        return Action(_SEND_OF_WAIT[self.kind], self.stage, self.microbatch)

    @property
    def peer_stage(self):
        """The stage at the other end of a SEND/RECV/WAIT (``s + 1`` for SEND_F, RECV_B and
        WAIT_F)."""
        if not self.is_comm:
            raise ValueError(f"{self} is a compute action; only SEND/RECV/WAIT actions have a peer")
        return self.stage + _PEER_OFFSET[self.kind]

    def matching(self):
        """The other end of this message: ``0SEND_F1`` ↔ ``1RECV_F1``, ``2SEND_B0`` ↔
        ``1RECV_B0``; for a WAIT, the receive its send needs (``0WAIT_F1`` → ``1RECV_F1``).

        >>> Action.parse("0SEND_F1").matching(), Action.parse("1RECV_B0").matching()
        (1RECV_F1, 2SEND_B0)
        >>> Action.parse("0WAIT_F1").matching()
        1RECV_F1
        """
        peer = self.peer_stage      # raises for compute actions
        return Action(_PARTNER[self.kind], peer, self.microbatch)

    def tag(self, num_microbatches):
        """A number shared by both ends of one message, unique within a schedule.

        It encodes (boundary, direction, micro-batch), where ``boundary`` is the lower stage
        of the two the message travels between; a runtime can use it as the MPI tag. Stage
        indices matter: with ``chunks > 1`` two ranks exchange messages for several stage
        pairs of the same micro-batch. The largest tag is below ``2 * num_stages *
        num_microbatches``.

        >>> Action.parse("0SEND_F3").tag(4) == Action.parse("1RECV_F3").tag(4)
        True
        """
        if not self.is_comm:
            raise ValueError(f"{self} is a compute action; only SEND/RECV/WAIT actions have a tag")
        boundary = min(self.stage, self.peer_stage)
        direction = 0 if self.kind in (SEND_F, RECV_F, WAIT_F) else 1
        return (2 * boundary + direction) * num_microbatches + self.microbatch
