"""Embedding tables sliced by rows across ranks, and merging their checkpoints."""
