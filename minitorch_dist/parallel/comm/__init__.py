"""Differentiable communication: the one layer that pipelines and sharding share.

* ``collectives``: all-reduce, all-gather, reduce-scatter, all-to-all and broadcast as
  primitives with a backward.
* ``p2p``: Send/Recv between pipeline stages, and the header that announces the arrays.
* ``rows``: the one row-gather of a sparse ``RowTensor`` gradient over a group.
"""
