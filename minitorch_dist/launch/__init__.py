"""The launcher: a tool beside the layers, not one of them.

``python -m minitorch_dist.run -n N script.py`` starts N ranks through ``mpiexec`` and watches
them. Nothing in the library's layers imports this package; the ranks meet it only through
the rank runner that wraps their script, which registers the watchdog with
``communication.hooks`` (where communicators announce themselves).

* ``cli``: the command line (``parse_options``, ``main``).
* ``job``: running one job (``launch()``): its directory, signals, the end and its report.
* ``mpiexec``: the ``mpiexec`` command line and the ranks' environment.
* ``multiprocess``: ``spawn()``, SINGA's multiprocessing start with the launcher's manners.
* ``rank_runner``: what every rank executes around the user's script.
* ``watchdog``, ``report``: early-exit detection, failure records and the one report.
* ``output``, ``relay``: the ranks' tagged output split per rank; records relayed through it.
* ``network``, ``bind_shim``, ``shim_release``, ``remote``: where a job listens, on one
  machine or several.
* ``teardown``: ending every process of a job, whatever happens to the launcher.
* ``compute_slots``: ``--compute-slots K``, at most K ranks compute at once (lock files;
  every wait for other ranks gives the slot back).
"""
