"""The house: each layer imports only layers below it (DESIGN.md section 1).

``nn/``, ``train/``, ``ops/``, ``autograd``, ``tensor`` and ``backend/`` never import
``parallel/``: the parallel layer plugs itself in through ``minitorch_dist/extension.py``."""
import ast
import os

import minitorch_dist

PACKAGE = os.path.dirname(minitorch_dist.__file__)
LOWER = ["nn", "train", "ops", "backend", "common", "dataset", "autograd.py", "tensor.py",
         "gradients.py", "extension.py", "jit_compile.py"]


def _imports(path):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node.level, node.module or "", node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name, node.lineno


def _files(entry):
    path = os.path.join(PACKAGE, entry)
    if path.endswith(".py"):
        yield path
        return
    for root, _, names in os.walk(path):
        for name in names:
            if name.endswith(".py"):
                yield os.path.join(root, name)


def test_lower_layers_do_not_import_parallel():
    offenders = []
    for entry in LOWER:
        for path in _files(entry):
            rel = os.path.relpath(path, PACKAGE)
            depth = rel.count(os.sep)
            for level, module, line in _imports(path):
                if level:       # resolve a relative import against the file's package
                    parts = rel.split(os.sep)[:-1]
                    base = parts[:len(parts) - (level - 1)] if level - 1 <= depth else []
                    target = ".".join(base + ([module] if module else []))
                else:
                    target = module.replace("minitorch_dist.", "", 1) \
                        if module.startswith("minitorch_dist.") else ""
                if target == "parallel" or target.startswith("parallel."):
                    offenders.append(f"{rel}:{line} imports {target}")
    assert not offenders, offenders


def test_the_parallel_extension_is_installed():
    from minitorch_dist.extension import extension
    from minitorch_dist.parallel.extension import ParallelExtension
    assert isinstance(extension(), ParallelExtension)
