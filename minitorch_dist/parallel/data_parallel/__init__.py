"""Data parallelism: every rank holds a whole replica and gradients are averaged.

* ``dist_opt``: SINGA's ``DistOpt`` (fp32, fp16, partial update, sparse top-K/threshold).
* ``grad_reducer``: MindSpore's ``DistributedGradReducer``.
* ``buckets``, ``bucket_fill``: gradient fusion into flat buffers and their allreduce.
* ``sparsification``, ``partial_update``, ``loss_scale``: the options' own arithmetic.
"""
