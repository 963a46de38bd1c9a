"""The runtime: executes one rank's action list for one step, and nothing else.

The schedule (``schedule.py``) decides the order; this file only knows what each action
means on this rank:

* ``RECV_F`` posts the receive of the header announcing a micro-batch's activations;
* ``F`` runs ``construct`` for one stage and micro-batch (``interception.StageRun``): the
  received activations enter through ``Recv``, this stage's outputs leave through ``Send``;
* ``SEND_F`` posts the activations (nonblocking);
* ``RECV_B`` posts the receives of the gradients of those activations;
* ``B`` waits for them and runs the tape backward from the ``Send`` tokens (or from the
  loss on the last stage), adding the parameter gradients up over the micro-batches;
* ``SEND_B`` posts the gradients of the received activations to the previous stage.
  With ``split_backward`` (the default) ``B`` computes those input gradients first and
  posts them right away, then the weight gradients (zero-bubble's split of the backward);
  ``SEND_B`` then finds them sent;
* ``WAIT_F``/``WAIT_B`` complete a SEND_F/SEND_B (``MPI_Wait``) and let its buffers go. A
  send that the schedule never waits for is completed at the end of the step.

Nothing else waits: a compute waits only for the message it consumes, so receives posted
early and sends completed late overlap the computes in between, as the schedule placed
them.

Time is measured too, per action kind: the seconds each kind took (``seconds``) and the
part of them spent blocked on a message (``waited``: a receive not there yet, a send not
complete), so that a step can be compared with the simulator fed the measured compute times.

Activation memory is measured, not simulated: after ``F`` the bytes that the micro-batch's
tape keeps for backward (every array saved by a primitive, each counted once, parameters
not counted) are added to the live total, and ``B`` frees them; ``peak_activation_bytes``
is the high-water mark.
"""
from time import perf_counter

import numpy as np

from ...autograd import _topological_nodes, enable_grad, no_grad, run_backward
from ...backward_observer import DeferGradients
from ...row_tensor import RowTensor
from ...tensor import Tensor
from .interception import StageRun, intercepting
from ..comm.p2p import anchor_on
from .placeholder import Placeholder
from .stage_plan import PipelineConfigError

__all__ = ["StepRunner"]


class StepRunner:
    """One step of one rank. ``engine`` is the PipelineCell's shared state (plan, topology,
    channel, primitives, parameters); ``micro_inputs[i]`` are micro-batch i's inputs."""

    def __init__(self, engine, micro_inputs, train, network=None):
        self.engine = engine
        self.plan = engine.plan
        self.network = engine.network if network is None else network
        self.micro = micro_inputs
        self.train = train
        self.num_stages = engine.num_virtual_stages
        self.mailbox = engine.mailbox
        self.mailbox.clear()
        self.headers = {}        # (stage, mb) -> posted header request
        self.incoming = {}       # (stage, mb) -> [(array, device)] received activations
        self.outgoing = {}       # (stage, mb) -> [(array, device)] sent activations
        self.grad_posts = {}     # (stage, mb) -> [(request, device)]
        self.deferred_grad_posts = set()
        self.roots = {}          # (stage, mb) -> tensors backward starts from
        self.received_count = {}
        self.results = {}        # mb -> last stage's output
        self.forward_sends = {}  # (stage, mb) -> requests of its SEND_F, until its WAIT_F
        self.backward_sends = {}  # (stage, mb) -> requests of its SEND_B, until its WAIT_B
        self.sent_backward = set()
        self.grads = {}          # id(param) -> accumulated gradient
        self.live_bytes = 0
        self.peak_bytes = 0
        self.activation_bytes = {}
        self.live_microbatches = 0
        self.peak_microbatches = 0
        self.seconds = {}        # action kind -> seconds spent executing it this step
        self.waited = {}         # action kind -> of which blocked on messages
        self._kind = None        # the kind being executed (whose waits are being timed)

    def rank_of(self, stage):
        return self.engine.topology.rank_of_stage(stage % self.engine.topology.stages)

    # ---- the actions --------------------------------------------------------------------
    def execute(self, actions):
        handlers = {"F": self._forward, "B": self._backward, "SEND_F": self._send_forward,
                    "RECV_F": self._recv_forward, "SEND_B": self._send_backward,
                    "RECV_B": self._recv_backward, "WAIT_F": self._wait_forward,
                    "WAIT_B": self._wait_backward}
        seconds = self.seconds
        for action in actions:
            kind = self._kind = action.kind
            start = perf_counter()
            handlers[kind](action.stage, action.microbatch)
            seconds[kind] = seconds.get(kind, 0.0) + perf_counter() - start
        self._kind = "end"
        start = perf_counter()
        for sends in (self.forward_sends, self.backward_sends):    # those never waited for
            for requests in sends.values():
                for request in requests:
                    self._wait(request)
            sends.clear()
        seconds["end"] = perf_counter() - start

    def _wait(self, request):
        """``request.wait()``, its blocked time added to the current action kind's."""
        start = perf_counter()
        result = request.wait()
        self.waited[self._kind] = self.waited.get(self._kind, 0.0) + perf_counter() - start
        return result

    def _recv_forward(self, stage, mb):
        self.headers[(stage, mb)] = self.engine.channel.post_header(
            self.rank_of(stage - 1), stage - 1, mb)

    def _send_forward(self, stage, mb):
        sent = self.outgoing[(stage, mb)]
        self.forward_sends[(stage, mb)] = self.engine.channel.send_activations(
            [a for a, _ in sent], [d for _, d in sent], self.rank_of(stage + 1), stage, mb)

    def _recv_backward(self, stage, mb):
        if (stage, mb) not in self.outgoing:       # posted before its F: shapes come with F
            self.deferred_grad_posts.add((stage, mb))
            return
        self.grad_posts[(stage, mb)] = self.engine.channel.post_gradients(
            self.outgoing[(stage, mb)], self.rank_of(stage + 1), stage, mb)

    def _send_backward(self, stage, mb):
        if (stage, mb) in self.sent_backward:      # sent early, inside B
            return
        self.sent_backward.add((stage, mb))
        received = self.incoming.pop((stage, mb), [])
        grads = []
        for i, (array, device) in enumerate(received):
            g = self.mailbox.gradients_out.pop((stage, mb, i), None)
            grads.append(device.xp.zeros(array.shape, array.dtype) if g is None else g)
        self.backward_sends[(stage, mb)] = self.engine.channel.send_gradients(
            grads, [d for _, d in received], self.rank_of(stage - 1), stage - 1, mb)

    def _wait_forward(self, stage, mb):
        for request in self.forward_sends.pop((stage, mb), ()):
            self._wait(request)

    def _wait_backward(self, stage, mb):
        for request in self.backward_sends.pop((stage, mb), ()):
            self._wait(request)

    def _forward(self, stage, mb):
        run = StageRun(self, stage, mb)
        grad_mode = enable_grad() if self.train else no_grad()
        with grad_mode, intercepting(run):
            out = self.network(*self.micro[mb])
        received = self.incoming.get((stage, mb), [])
        if run.used != len(received):
            raise PipelineConfigError(
                f"stage {stage} used {run.used} of the {len(received)} activations that stage "
                f"{stage - 1} sent for micro-batch {mb}; construct must take the same path on "
                "every rank")
        self.outgoing[(stage, mb)] = [(self.mailbox.activations_out.pop((stage, mb, i)), t.device)
                                      for i, t in enumerate(run.sent)]
        if stage == self.num_stages - 1:
            if isinstance(out, Placeholder) or not _all_tensors(out):
                raise PipelineConfigError(
                    "the pipelined network's output does not come from its last stage; the "
                    "last staged cells (and the loss) must produce what construct returns")
            self.results[mb] = out
            roots = [out] if isinstance(out, Tensor) else list(out)
        else:
            if not run.sent:
                raise PipelineConfigError(
                    f"stage {stage} passes nothing to stage {stage + 1}: the next stage's cells "
                    "must take this stage's output as input")
            roots = run.tokens
        if self.train:
            self.roots[(stage, mb)] = roots
            nbytes = _saved_bytes(roots, {id(p.data) for p in self.engine.own_params})
            self.activation_bytes[(stage, mb)] = nbytes
            self.live_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            self.live_microbatches += 1
            self.peak_microbatches = max(self.peak_microbatches, self.live_microbatches)
        if (stage, mb) in self.deferred_grad_posts:
            self.deferred_grad_posts.discard((stage, mb))
            self._recv_backward(stage, mb)

    def _backward(self, stage, mb):
        for i, (request, _) in enumerate(self.grad_posts.pop((stage, mb), [])):
            self.mailbox.gradients_in[(stage, mb, i)] = self._wait(request)
        # The gradients came back, so the next stage has received the activations: their
        # sends are complete (the schedule's WAIT_F normally did it just before) and the
        # buffers can go (1F1B's memory bound depends on it).
        self._wait_forward(stage, mb)
        self.outgoing.pop((stage, mb), None)
        roots = [r for r in self.roots.pop((stage, mb)) if r.requires_grad]
        params = self.engine.own_params
        if roots and params:
            # Input gradients first, sent on at once; the weight gradients after (the
            # zero-bubble split): the previous stage starts its backward sooner.
            split = None
            if stage > 0 and self.engine.split_backward:
                split = DeferGradients(params, before=lambda: self._send_backward(stage, mb))
            # Recv's backward hands the input gradient to SEND_B and reaches no parameter:
            # it runs only because Recv and Send are marked backward_always_runs (a
            # backward asked for targets skips the nodes that reach none of them).
            found = run_backward(roots, [r.device.xp.ones(r.shape, r.dtype) for r in roots],
                                 targets=params, observer=split)
            for param, g in zip(params, found):
                if g is not None:
                    self._accumulate(param, g)
        for key in [k for k in self.mailbox.gradients_in if k[:2] == (stage, mb)]:
            del self.mailbox.gradients_in[key]     # a token that needed no backward
        self.live_bytes -= self.activation_bytes.pop((stage, mb))
        self.live_microbatches -= 1

    def _accumulate(self, param, grad):
        key = id(param)
        total = self.grads.get(key)
        if total is None:
            self.grads[key] = grad
        elif isinstance(total, RowTensor) or isinstance(grad, RowTensor):
            self.grads[key] = RowTensor.add(total, grad)
        else:
            total += grad

    # ---- called by the stage run (interception) -------------------------------------
    def receive(self, stage, mb, index):
        key = (stage, mb)
        if key not in self.incoming:
            if key not in self.headers:
                raise RuntimeError(f"schedule error: F of stage {stage}, micro-batch {mb} "
                                   "runs before its RECV_F was posted")
            start = perf_counter()       # the header's wait and the activations' receive
            self.incoming[key] = self.engine.channel.receive_activations(
                self.headers.pop(key), self.rank_of(stage - 1), stage - 1, mb)
            self.waited[self._kind] = (self.waited.get(self._kind, 0.0) + perf_counter()
                                       - start)
        received = self.incoming[key]
        if index >= len(received):
            raise PipelineConfigError(
                f"stage {stage} needs more activations than the {len(received)} stage "
                f"{stage - 1} sent for micro-batch {mb}")
        array, device = received[index]
        anchor = anchor_on(device, self.engine.anchors)
        return self.engine.recv_prim.run(anchor, payload=array, key=(stage, mb, index))

    def send(self, tensor, stage, mb, index):
        return self.engine.send_prim.run(tensor, key=(stage, mb, index))


def _all_tensors(out):
    if isinstance(out, Tensor):
        return True
    return type(out) in (tuple, list) and all(isinstance(o, Tensor) for o in out)


def _saved_bytes(roots, parameter_arrays):
    """Bytes of the arrays that the tape behind ``roots`` keeps for backward: the activations
    this micro-batch holds. Each memory block counts once; the stage's parameter arrays
    (``parameter_arrays``: their ids), which a primitive may save too (MatMul keeps its
    weight for the input gradient), live once per process and are not counted."""
    seen, total = set(parameter_arrays), 0
    for node in _topological_nodes([r for r in roots if r.grad_fn is not None]):
        if node.ctx is None:
            continue
        for value in _arrays_in(list(node.ctx.saved) + list(vars(node.ctx).values())):
            owner = value.base if getattr(value, "base", None) is not None else value
            if id(owner) not in seen:
                seen.add(id(owner))
                total += int(owner.nbytes)
    return total


def _arrays_in(values, depth=3):
    """The arrays among ``values``, looking into tuples and lists and through Tensors (a
    recomputed block keeps its input tensors in a tuple) down to ``depth`` levels."""
    for value in values:
        if isinstance(value, Tensor):
            value = value.data
        if hasattr(value, "nbytes") and hasattr(value, "dtype") and not np.isscalar(value):
            yield value
        elif depth and type(value) in (tuple, list):
            yield from _arrays_in(value, depth - 1)
