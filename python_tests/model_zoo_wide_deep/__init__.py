"""A test version of the models repository's Wide&Deep (``official/recommend/Wide_and_Deep``),
written for this project with MindSpore's names and behaviour (issue 15).

``src/`` holds the model, the callbacks, the AUC metric, the MindRecord dataset, a small
preprocess and the configuration; ``train_and_eval.py``, ``train_and_eval_distribute.py`` and
``train_and_eval_auto_parallel.py`` mirror the upstream entry programs, each with a
``main(config)`` that tests call in-process or run as MPI ranks under the launcher.
See docs/model_zoo_wide_deep.md.
"""
