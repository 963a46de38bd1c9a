"""The package metadata is in the current format, and the README's test command is the one
CI runs (it never reinstalls)."""
import os

import pytest

from mpi_jobs import REPO


def test_license_metadata_is_an_spdx_expression():
    try:
        import tomllib
    except ImportError:                      # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)
    assert project["project"]["license"] == "MIT"
    requires = project["build-system"]["requires"]
    assert any(r.startswith("setuptools>=") and int(r.split(">=")[1].split(".")[0]) >= 77
               for r in requires)


def test_readme_test_command_does_not_reinstall():
    with open(os.path.join(REPO, "README.md")) as handle:
        text = handle.read()
    assert "```bash\npython -m pytest -q\n```" in text
    assert 'pip install -e ".[dev]" && python -m pytest' not in text
    with open(os.path.join(REPO, ".ci", "run")) as handle:
        ci = handle.read()
    assert "python -m pytest -q" in ci and '"$status" -eq 5' in ci


def test_ci_runs_the_pinned_tidy_guard_before_the_tests():
    """``.ci/run`` runs ruff, pinned to one version, over every Python folder before the
    test suite, with the defect rules of ``pyproject.toml`` (``__init__`` re-exports exempt)."""
    try:
        import tomllib
    except ImportError:                      # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(REPO, ".ci", "run")) as handle:
        ci = handle.read()
    guard = ci.index("python -m ruff check minitorch_dist python_tests examples benchmarks docs")
    assert guard < ci.index("python -m pytest -q")
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)
    assert [r for r in project["project"]["optional-dependencies"]["dev"]
            if r.startswith("ruff")] == ["ruff==0.17.6"]
    lint = project["tool"]["ruff"]["lint"]
    assert {"F401", "F841", "F821", "E722"} <= set(lint["select"])
    assert lint["per-file-ignores"] == {"__init__.py": ["F401"]}


def test_the_suite_runs_files_side_by_side_on_the_usable_cores(monkeypatch):
    """The README's one test command runs test files in parallel workers (pytest-xdist, in
    the ``dev`` extra), a file's tests in one worker, one worker per usable core up to
    ``MAX_WORKERS``: the suite's wall time on CI's two cores depends on it."""
    try:
        import tomllib
    except ImportError:                      # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    import conftest
    from minitorch_dist.launch import mpiexec
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)
    dev = project["project"]["optional-dependencies"]["dev"]
    assert any(r.startswith("pytest-xdist") for r in dev)
    assert "-n auto --dist loadfile" in project["tool"]["pytest"]["ini_options"]["addopts"]
    for cores, workers in ((1, 1), (2, 2), (conftest.MAX_WORKERS + 12, conftest.MAX_WORKERS)):
        monkeypatch.setattr(mpiexec, "usable_cores", lambda cores=cores: cores)
        assert conftest.pytest_xdist_auto_num_workers(None) == workers
