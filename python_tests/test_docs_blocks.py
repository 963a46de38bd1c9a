"""Every ```python block of the documentation runs as written.

The blocks of one page run in order in one fresh Python process sharing one namespace, as a
reader pasting them into one session would (a later block may use an earlier block's names).
A block that cannot run on its own (an excerpt of a larger script, a placeholder path) is
marked by the line ``<!-- fragment -->`` just before its fence, and is skipped; the marker is
invisible on rendered pages.

``PAGES`` lists the pages checked; every page under ``docs/`` must be there. The rendered
notebook pages (``docs/notebooks/NN_*.md``) are not: their code is the notebooks', which
``docs/render_notebooks.py`` runs and ``test_notebook_render.py`` keeps current.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from mpi_jobs import REPO, child_env

PAGES = [
    "README.md",
    "docs/README.md",
    "docs/tensors_autograd_devices.md",
    "docs/cells_and_training.md",
    "docs/optimizers.md",
    "docs/distributed.md",
    "docs/host_device.md",
    "docs/embedding_slicing.md",
    "docs/architecture.md",
    "docs/model_zoo_wide_deep.md",
    "docs/performance.md",
    "docs/sharding.md",
    "docs/failures.md",
    "docs/porting_mindspore.md",
    "docs/memory_and_communication.md",
    "docs/datasets.md",
    "docs/pipeline.md",
    "docs/singa.md",
    "docs/notebooks/README.md",
]
FRAGMENT = "<!-- fragment -->"
_FENCE = re.compile(r"^```(\w*)\s*$")


def python_blocks(text):
    """``[(line number of the fence, code, is_fragment), ...]`` for the ```python blocks."""
    lines, blocks, index = text.splitlines(), [], 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        start, language = index, match.group(1)
        end = start + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if language == "python":
            before = next((line.strip() for line in reversed(lines[:start]) if line.strip()), "")
            blocks.append((start + 1, "\n".join(lines[start + 1:end]) + "\n",
                           before == FRAGMENT))
        index = end + 1
    return blocks


def test_blocks_are_found_and_fragments_recognised():
    text = ("x\n```python\na = 1\n```\n\n<!-- fragment -->\n\n```python\nb = a\n```\n"
            "```bash\nls\n```\n")
    assert python_blocks(text) == [(2, "a = 1\n", False), (8, "b = a\n", True)]


_RUNNER = r"""
import json, sys, traceback
page, blocks = sys.argv[1], json.load(sys.stdin)
sys.argv = [page]                  # as a script started without arguments sees it
namespace = {"__name__": "__main__"}
for line, code in blocks:
    try:
        exec(compile(code, f"{page}:{line}", "exec"), namespace)
    except BaseException:
        print(f"block at {page} line {line} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def test_every_documentation_page_is_checked():
    docs = os.path.join(REPO, "docs")
    pages = {os.path.relpath(os.path.join(folder, name), REPO)
             for folder, _, names in os.walk(docs) for name in names if name.endswith(".md")}
    rendered = {page for page in pages if re.match(r"docs/notebooks/\d\d_", page)}
    assert sorted(pages - rendered - set(PAGES)) == []


@pytest.mark.parametrize("page", PAGES)
def test_every_python_block_of_the_page_runs(page, tmp_path):
    with open(os.path.join(REPO, page)) as handle:
        blocks = [(line, code) for line, code, fragment in python_blocks(handle.read())
                  if not fragment]
    if not blocks:
        return
    env = child_env()
    env.pop("MINITORCH_DIST_VIRTUAL_GPU", None)     # a page that wants it says so
    done = subprocess.run([sys.executable, "-c", _RUNNER, page], input=json.dumps(blocks),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_of_the_page_resolve(page):
    with open(os.path.join(REPO, page)) as handle:
        text = re.sub(r"```.*?```", "", handle.read(), flags=re.S)
    folder = os.path.dirname(os.path.join(REPO, page))
    missing = [target for target in _LINK.findall(text)
               if "://" not in target and not target.startswith("mailto:")
               and not os.path.exists(os.path.join(folder, target))]
    assert not missing, f"{page} links to missing files: {missing}"
