"""Criteo batches for Wide&Deep: ``feat_ids`` int32 (B, 39), ``feat_vals`` float32 (B, 39)
and ``label`` float32 (B, 1).

MindSpore's models repo first converts Criteo's text files to MindRecord
(``src/preprocess_data.py``: ids seen fewer than 100 times become out-of-vocabulary, values
are log-scaled) and then batches the records. ``ds.CriteoDataset`` does the same conversion
while it reads the tab-separated text, so ``create_dataset`` reads the text directly:

    data_path/train.txt   the training split (the vocabulary is built from it)
    data_path/test.txt    the held-out split (read with the training vocabulary)

(each may also be a folder of ``*.txt`` files, or gzipped ``.txt.gz``).
"""
import os

import minitorch_dist.dataset as ds

__all__ = ["create_dataset", "split_path"]


def split_path(data_path, train_mode):
    """``data_path/train.txt`` (or ``train/``, ``train.txt.gz``), or the ``test`` twin."""
    name = "train" if train_mode else "test"
    for candidate in (f"{name}.txt", f"{name}.txt.gz", name):
        path = os.path.join(data_path, candidate)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"create_dataset: no {name}.txt (or {name}.txt.gz, or a folder {name}/) "
                            f"in {data_path!r}; run generate_synthetic_data.py, or put Criteo's "
                            "text files there")


def create_dataset(data_path, train_mode=True, epochs=1, batch_size=1000, rank_size=None,
                   rank_id=None, threshold=100, vocab=None, shuffle=None, drop_remainder=None):
    """The training (``train_mode``) or held-out split of ``data_path`` in batches.

    * ``rank_size``/``rank_id``: with more than one rank every rank reads its own shard
      (row ``i`` of each epoch's order goes to rank ``i % rank_size``; the order is shuffled
      the same way on every rank), so the ranks' batches of one step together form one
      batch of ``rank_size * batch_size`` rows.
    * ``threshold``: a categorical value needs this many occurrences in the training split
      to get its own id; ``vocab``: the vocabulary of another ``create_dataset`` result (the
      held-out split must use the training split's ids).
    * ``shuffle`` (default: ``train_mode``) reshuffles every epoch; ``drop_remainder``
      (default: ``train_mode``) drops a last, smaller batch; ``epochs`` > 1 repeats the data.

    The returned dataset carries ``vocab`` and ``vocab_size`` (the embedding tables' rows).
    """
    shuffle = train_mode if shuffle is None else shuffle
    drop_remainder = train_mode if drop_remainder is None else drop_remainder
    shards = {}
    if rank_size is not None and rank_size > 1:
        shards = {"num_shards": rank_size, "shard_id": rank_id}
    source = ds.CriteoDataset(split_path(data_path, train_mode), threshold=threshold, vocab=vocab,
                              shuffle=shuffle, **shards)
    data_set = source.batch(batch_size, drop_remainder=drop_remainder)
    if epochs > 1:
        data_set = data_set.repeat(epochs)
    data_set.vocab = source.vocab
    data_set.vocab_size = source.vocab_size
    data_set.num_rows = source.num_rows
    return data_set
