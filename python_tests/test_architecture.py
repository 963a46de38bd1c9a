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


# ---- import circles -----------------------------------------------------------------------
# Only the core's circle may remain: a Tensor's methods call primitives and the tape, and
# primitives and the tape make Tensors (with the device copy and RowTensor in between).
CORE_CIRCLE = {"minitorch_dist.tensor", "minitorch_dist.autograd", "minitorch_dist.ops.primitive",
               "minitorch_dist.ops.device_copy", "minitorch_dist.row_tensor"}
LAUNCHER = ("minitorch_dist.launch", "minitorch_dist.run")   # a tool beside the layers
MAX_LINES = 600


def _module_paths(package_dir):
    """``{dotted name: path}`` of the Python files under ``package_dir``; a package is
    named by itself and stands for its ``__init__.py``."""
    root = os.path.dirname(package_dir)
    modules = {}
    for folder, _, names in os.walk(package_dir):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, root)[:-3].split(os.sep)
                modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


class ImportGraph:
    """Who imports whom among a package's modules: ``edges[module] = {imported: line}``.

    Every import counts, at module level or inside a function (a deferred import is still a
    dependency; deferring it only hides a circle). Relative imports are resolved against the
    importing file's package. ``from pkg import name`` is an edge to ``pkg.name`` when that
    is a module. Otherwise ``name`` is an object that ``pkg/__init__.py`` re-exports, and the
    edge follows the re-export to the module that defines it: ``from ..backend import
    get_device`` depends on ``backend/device.py``, not on everything the backend's
    ``__init__`` imports (if it did, every ``from .. import x`` would close a circle through
    ``minitorch_dist/__init__``, which imports the whole package). Re-exports are read from
    the ``__init__``'s own ``from .x import name`` and ``from .x import *`` lines; a name the
    ``__init__`` defines itself (or may produce through a module ``__getattr__``) is an edge
    to the ``__init__``; a name no Python file binds is a compiled module (``_C``): no edge.
    """

    def __init__(self, package_dir):
        self.paths = _module_paths(package_dir)
        self.trees = {m: ast.parse(open(p).read(), p) for m, p in self.paths.items()}
        self.edges = {m: {} for m in self.paths}
        for module, tree in self.trees.items():
            for node in ast.walk(tree):
                for target in self._targets(module, node):
                    if target is not None and target != module:
                        self.edges[module].setdefault(target, node.lineno)

    def _is_package(self, module):
        return self.paths[module].endswith("__init__.py")

    def _absolute(self, module, node):
        """The module a ``from ... import`` names, made absolute."""
        if not node.level:
            return node.module
        parts = module.split(".") if self._is_package(module) else module.split(".")[:-1]
        parts = parts[:len(parts) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))

    def _targets(self, module, node):
        if isinstance(node, ast.Import):
            return [alias.name if alias.name in self.paths else None for alias in node.names]
        if not isinstance(node, ast.ImportFrom):
            return []
        base = self._absolute(module, node)
        return [(base if base in self.paths else None) if alias.name == "*"
                else self._provider(base, alias.name) for alias in node.names]

    def _provider(self, base, name, seen=frozenset()):
        """The module that ``from base import name`` depends on (None: outside the package)."""
        if f"{base}.{name}" in self.paths:
            return f"{base}.{name}"
        if base not in self.paths:
            return None
        if not self._is_package(base) or (base, name) in seen:
            return base
        seen = seen | {(base, name)}
        bound, stars = self._bindings(base)
        if name in bound:
            origin = bound[name]
            return base if origin is None else self._provider(*origin, seen)
        for star in stars:
            if self._binds(star, name):
                return self._provider(star, name, seen)
        return base if "__getattr__" in bound else None

    def _binds(self, module, name):
        if module not in self.paths:
            return False
        bound, stars = self._bindings(module)
        return name in bound or any(self._binds(star, name) for star in stars if star != module)

    def _bindings(self, module):
        """Top-level names of ``module``: ``{name: (base, name) it imports, or None when
        defined there}``, and the modules it star-imports."""
        bound, stars, pending = {}, [], list(self.trees[module].body)
        while pending:
            node = pending.pop()
            if isinstance(node, (ast.If, ast.Try)):
                pending += node.body + node.orelse + getattr(node, "finalbody", []) + [
                    stmt for handler in getattr(node, "handlers", []) for stmt in handler.body]
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(module, node)
                for alias in node.names:
                    if alias.name == "*":
                        stars.append(base)
                    else:
                        bound[alias.asname or alias.name] = (base, alias.name)
            elif isinstance(node, ast.Import):
                bound.update({(a.asname or a.name.split(".")[0]): None for a in node.names})
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound[node.name] = None
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound.update({n.id: None for t in targets for n in ast.walk(t)
                              if isinstance(n, ast.Name)})
        return bound, stars


def circles(edges):
    """The import circles of ``edges``: its strongly connected components of two or more
    modules (Tarjan's algorithm), each sorted, in sorted order."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = set()
            while module not in component:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(found)


def _describe(graph, circle):
    return [f"{a} -> {b} (line {graph.edges[a][b]})" for a in circle for b in graph.edges[a]
            if b in circle]


def test_no_import_circles_but_the_core_one():
    graph = ImportGraph(PACKAGE)
    extra = [_describe(graph, c) for c in circles(graph.edges) if not set(c) <= CORE_CIRCLE]
    assert not extra, extra


def test_the_circle_finder_sees_deferred_imports_and_re_exports(tmp_path):
    """The finder can fail: a function-level import of a name that the package's
    ``__init__`` re-exports closes a circle; a mere re-export and a compiled module do not."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .a import A\n")
    (pkg / "a.py").write_text("from .b import helper\n\nclass A:\n    pass\n")
    (pkg / "b.py").write_text("def helper():\n    from pkg import A\n    return A\n")
    (pkg / "c.py").write_text("import pkg.a\nfrom . import _C\n")
    graph = ImportGraph(str(pkg))
    assert graph.edges["pkg.b"] == {"pkg.a": 2} and graph.edges["pkg.c"] == {"pkg.a": 1}
    assert circles(graph.edges) == [["pkg.a", "pkg.b"]]
    (pkg / "b.py").write_text("def helper():\n    return None\n")
    assert circles(ImportGraph(str(pkg)).edges) == []


def _in_launcher(module):
    return any(module == name or module.startswith(name + ".") for name in LAUNCHER)


def test_the_library_layers_import_nothing_from_the_launcher():
    """``launch/`` watches the layers through ``communication.hooks``; they never import it."""
    graph = ImportGraph(PACKAGE)
    offenders = [f"{module}:{line} imports {target}"
                 for module, targets in graph.edges.items() if not _in_launcher(module)
                 for target, line in targets.items() if _in_launcher(target)]
    assert not offenders, offenders


def test_no_library_file_passes_600_lines():
    """One concept per file (DESIGN.md section 1): split a file before it passes 600 lines."""
    long = {}
    for path in _module_paths(PACKAGE).values():
        with open(path) as handle:
            count = sum(1 for _ in handle)
        if count > MAX_LINES:
            long[os.path.relpath(path, PACKAGE)] = count
    assert not long, long
