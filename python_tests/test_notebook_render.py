"""The notebooks rendered to ``docs/notebooks/`` (``docs/render_notebooks.py``) are current,
and the renderer writes a notebook's text, outputs and plots."""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
nbformat = pytest.importorskip("nbformat", reason="nbformat reads notebooks (the dev extra)")


def _renderer():
    spec = importlib.util.spec_from_file_location("render_notebooks",
                                                  ROOT / "docs" / "render_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render_notebooks = _renderer()
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_rendered_page_is_current(path):
    page = render_notebooks.page_path(path)
    assert page.exists(), f"{page} is missing: run python docs/render_notebooks.py {path.name[:2]}"
    notebook = nbformat.read(path, as_version=4)
    assert render_notebooks.recorded_hash(page) == render_notebooks.source_hash(notebook), (
        f"{path.name} changed after {page.name} was rendered: run "
        f"python docs/render_notebooks.py {path.name[:2]}")
    text = page.read_text()
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (page.parent / image).is_file(), f"{page.name} shows a missing image {image}"
    assert "Traceback (most recent call last)" not in text, \
        f"{page.name} was rendered from a failing run"


def test_notebooks_that_plot_show_their_plots():
    for path in NOTEBOOKS:
        plots = "plt.show()" in path.read_text() or "plt.subplots" in path.read_text()
        page = render_notebooks.page_path(path)
        if plots and page.exists():
            assert "![output" in page.read_text(), f"{page.name} has no plot"


def test_the_index_lists_every_rendered_page():
    index = (ROOT / "docs" / "notebooks" / "README.md").read_text()
    for path in NOTEBOOKS:
        assert f"]({path.stem}.md)" in index


def test_the_hash_ignores_outputs_but_not_sources():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    before = render_notebooks.source_hash(notebook)
    notebook.cells[0].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    assert render_notebooks.source_hash(notebook) == before
    notebook.cells[0].source = "print(2)"
    assert render_notebooks.source_hash(notebook) != before


def test_a_page_shows_text_outputs_and_images(tmp_path):
    png = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJ"
           "RU5ErkJggg==")
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.v4.new_output("stream", text="loss 0.5\n"),
                    nbformat.v4.new_output("display_data", data={"image/png": png,
                                                                 "text/plain": "<Figure>"})]
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title\n\nSee [the index](../../docs/README.md)."),
        cell])
    source = ROOT / "examples" / "notebooks" / "99_test.ipynb"     # never written
    page = render_notebooks.render(notebook, source, tmp_path / "99_test.md")
    text = page.read_text()
    assert render_notebooks.recorded_hash(page) == render_notebooks.source_hash(notebook)
    assert "```python\nplot()\n```" in text and "```text\nloss 0.5\n```" in text
    assert "![output 1](99_test_files/99_test_1.png)" in text
    assert (tmp_path / "99_test_files" / "99_test_1.png").read_bytes().startswith(b"\x89PNG")
    assert "# Title" in text


def test_check_mode_runs_nothing_and_lists_stale_pages(capsys):
    code = render_notebooks.main(["--check"])
    out = capsys.readouterr().out
    assert (code == 0) == (out == "")
