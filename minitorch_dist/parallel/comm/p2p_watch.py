"""Point-to-point waits that the launcher's early-exit watchdog can judge.

A pipeline rank that leaves the job (``sys.exit(0)`` at step 3) used to hang its peers:
they wait for a message that will never come, in a receive the watchdog did not see (it
watched collectives only). So the messages are counted as collectives are: a communicator
the watchdog watches carries ``_p2p_counts`` (``{"sent": {peer: n}, "received": {peer:
n}}``, kept by the watchdog after the communicator is gone, and written into this rank's
exit record), and while a rank waits for a message it marks the wait in
``_p2p_pending``: ``(op, message number, since, peer)``. The watchdog judges it as it
judges a collective wait: the peer left after sending this rank no more messages than
it has received (``launch/watchdog.py``). Without a watchdog (threads, no launcher)
requests are left as they are.
"""
import time

__all__ = ["watched_request"]


def watched_request(comm, request, op, peer):
    """``request`` (an ``isend``/``irecv`` of ``comm`` with ``peer``), counted and its wait
    marked for the watchdog when ``comm`` is watched."""
    counts = getattr(comm, "_p2p_counts", None)
    if counts is None:
        return request
    peer_key = str(int(peer))
    sent = counts["sent"]
    number = None
    if op == "send":
        sent[peer_key] = sent.get(peer_key, 0) + 1
        number = sent[peer_key]
    finish = request._wait_fn
    received = counts["received"]

    def tracked():
        which = number if op == "send" else received.get(peer_key, 0) + 1
        comm._p2p_pending = (op, which, time.monotonic(), int(peer))
        try:
            result = finish()
        finally:
            comm._p2p_pending = None
        if op == "recv":
            received[peer_key] = received.get(peer_key, 0) + 1
        return result
    request._wait_fn = tracked
    return request
