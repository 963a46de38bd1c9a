"""Data parallelism: every rank holds a whole replica and gradients are averaged.

* ``dist_opt``: SINGA's ``DistOpt`` (fp32, fp16, partial update, sparse top-K/threshold).
* ``grad_reducer``: MindSpore's ``DistributedGradReducer``.
* ``buckets``: gradient fusion, the one dense bucket path (plans, slots, the allreduce);
  ``bucket_fill``: the backward observer that fills the slots as gradients become final.
* ``sparsification``, ``partial_update``, ``loss_scale``: the options' own arithmetic.
"""
