"""Run the notebooks of ``examples/notebooks/`` and write each, with its outputs and plots,
as a Markdown page under ``docs/notebooks/`` (the notebooks themselves are committed without
outputs). A reader browsing the repository sees every plot without running anything.

    python docs/render_notebooks.py            # every notebook
    python docs/render_notebooks.py 03 05      # those whose file name starts with 03 or 05
    python docs/render_notebooks.py --check    # only say which pages are out of date

Each page records a hash of its notebook's cells (``source_hash``);
``python_tests/test_notebook_render.py`` fails when a notebook changed after its page was
rendered. Needs nbformat, nbclient and ipykernel (the ``dev`` extra).
"""
import argparse
import base64
import hashlib
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "examples" / "notebooks"
PAGES = ROOT / "docs" / "notebooks"
CELL_TIMEOUT_S = 300
_HASH_LINE = re.compile(r"<!-- source_hash: ([0-9a-f]{64}) -->")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LINK = re.compile(r"(\]\()([^)#\s:]+)(#[^)\s]*)?(\))")


def source_hash(notebook):
    """The hash of a notebook's cells (type and source): outputs and metadata do not count."""
    cells = [(cell.cell_type, cell.source) for cell in notebook.cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def recorded_hash(page):
    """The ``source_hash`` a rendered page records, or None."""
    match = _HASH_LINE.search(Path(page).read_text()) if Path(page).exists() else None
    return match.group(1) if match else None


def page_path(notebook_path):
    return PAGES / (Path(notebook_path).stem + ".md")


def _relink(markdown, source_dir, page_dir):
    """Relative links of a notebook's text, rewritten to work from the page's folder."""
    def fix(match):
        target = (source_dir / match.group(2)).resolve()
        if not target.exists():
            return match.group(0)
        new = os.path.relpath(target, page_dir)
        return f"{match.group(1)}{new}{match.group(3) or ''}{match.group(4)}"
    return _LINK.sub(fix, markdown)


def _text_block(text):
    # the repository's path on the machine that rendered the page says nothing to a reader
    text = _ANSI.sub("", text).replace(str(ROOT), "<repository>").rstrip("\n")
    return f"```text\n{text}\n```\n" if text.strip() else ""


def _render_output(output, stem, image_dir, counter):
    """Markdown for one output of a code cell; images are written to ``image_dir``."""
    kind = output.get("output_type")
    if kind == "stream":
        return _text_block(output.get("text", ""))
    if kind == "error":
        return _text_block("\n".join(output.get("traceback", [])))
    data = output.get("data", {})
    if "image/png" in data:
        counter[0] += 1
        name = f"{stem}_{counter[0]}.png"
        image_dir.mkdir(parents=True, exist_ok=True)
        (image_dir / name).write_bytes(base64.b64decode(data["image/png"]))
        return f"![output {counter[0]}]({image_dir.name}/{name})\n"
    if "text/markdown" in data:
        return data["text/markdown"] + "\n"
    if "text/plain" in data:
        return _text_block(data["text/plain"])
    return ""


def render(notebook, notebook_path, page, title_note=True):
    """Write ``page`` (a Markdown file) from the executed ``notebook``."""
    page = Path(page)
    stem = page.stem
    image_dir = page.parent / f"{stem}_files"
    for old in image_dir.glob("*.png") if image_dir.exists() else ():
        old.unlink()
    try:
        shown = Path(notebook_path).resolve().relative_to(ROOT)
    except ValueError:
        shown = Path(notebook_path).name
    link = os.path.relpath(Path(notebook_path).resolve(), page.parent.resolve())
    parts = [f"<!-- rendered from {shown} by docs/render_notebooks.py: do not edit -->\n"
             f"<!-- source_hash: {source_hash(notebook)} -->\n"]
    if title_note:
        parts.append(f"*This page is the notebook [`{Path(notebook_path).name}`]"
                     f"({link}) after a run, with its outputs. Run it yourself with "
                     "`jupyter notebook` or re-render it with `python docs/render_notebooks.py`.*\n")
    counter = [0]
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            parts.append(_relink(cell.source, Path(notebook_path).resolve().parent,
                                 page.parent.resolve()) + "\n")
        elif cell.cell_type == "code":
            parts.append(f"```python\n{cell.source.rstrip()}\n```\n")
            for output in cell.get("outputs", []):
                rendered = _render_output(output, stem, image_dir, counter)
                if rendered:
                    parts.append(rendered)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("\n".join(parts))
    return page


def execute(notebook_path):
    """The notebook run top to bottom in a python3 kernel started in the repository root
    (plots inline); a failing cell raises nbclient's CellExecutionError."""
    import nbclient
    import nbformat
    notebook = nbformat.read(notebook_path, as_version=4)
    os.environ.pop("MPLBACKEND", None)            # the kernel's inline backend draws the plots
    os.environ.pop("MINITORCH_DIST_VIRTUAL_GPU", None)
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=CELL_TIMEOUT_S,
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    return notebook


def write_index(paths):
    """``docs/notebooks/README.md``: the list of rendered pages."""
    lines = ["# The notebooks, rendered\n",
             "Each page is a notebook of [`examples/notebooks/`](../../examples/notebooks/) after "
             "a run, with its printed output and plots (made by `python docs/render_notebooks.py`)."
             " The reading order is in [the documentation index](../README.md).\n"]
    for path in paths:
        import nbformat
        notebook = nbformat.read(path, as_version=4)
        title = next((line.lstrip("# ").strip() for cell in notebook.cells
                      if cell.cell_type == "markdown" for line in cell.source.splitlines()
                      if line.startswith("# ")), path.stem)
        lines.append(f"- [{title}]({path.stem}.md)")
    (PAGES / "README.md").write_text("\n".join(lines) + "\n")


def stale_pages():
    """The notebooks whose rendered page is missing or older than the notebook's cells."""
    import nbformat
    return [path for path in sorted(NOTEBOOKS.glob("*.ipynb"))
            if recorded_hash(page_path(path)) != source_hash(nbformat.read(path, as_version=4))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prefixes", nargs="*", metavar="PREFIX",
                        help="render only notebooks whose file name starts with PREFIX")
    parser.add_argument("--check", action="store_true",
                        help="list the pages that are out of date (exit 1 if any) and run nothing")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages()
        for path in stale:
            print(f"out of date: {page_path(path).relative_to(ROOT)} ({path.name} changed)")
        return 1 if stale else 0
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    chosen = [p for p in notebooks if not args.prefixes
              or any(p.name.startswith(prefix) for prefix in args.prefixes)]
    if not chosen:
        parser.error(f"no notebook in {NOTEBOOKS} starts with {' or '.join(args.prefixes)}")
    for path in chosen:
        print(f"running {path.name} ...", flush=True)
        page = render(execute(path), path, page_path(path))
        print(f"  wrote {page.relative_to(ROOT)}", flush=True)
    write_index(notebooks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
