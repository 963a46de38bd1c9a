"""Every shell command in the README and the docs stays valid (issue 30).

The ```bash blocks of the pages are read command by command (continuation lines joined,
comments dropped, ``A && B`` split). For each ``python`` command: the script it names exists
(paths under the repository's own folders; ``train.py`` and the like are placeholders), a
``-m`` module can be found, ``-c`` code compiles, the launcher's options parse
(``python -m minitorch_dist.run``, without starting anything), and every ``--option`` given
to one of the repository's scripts is one that the script's ``--help`` lists. Blocks that
start with ``cd`` run in an upstream checkout (the models repository, MindSpore's sample
code) and are only parsed. Running the commands themselves is the examples' and
benchmarks' own tests' job (``test_examples*.py``, ``test_bench_*.py``, ...).
"""
import importlib.util
import os
import re
import shlex
import subprocess
import sys

import pytest

from minitorch_dist.launch.cli import parse_options
from mpi_jobs import REPO, child_env

PAGES = ["README.md", "examples/wide_deep/README.md"] + sorted(
    os.path.join(folder, name).replace(REPO + os.sep, "")
    for top in ("docs", os.path.join("docs", "notebooks"))
    for folder in [os.path.join(REPO, top)] for name in os.listdir(folder)
    if name.endswith(".md"))
OWN_FOLDERS = ("examples/", "benchmarks/", "python_tests/", "docs/")
SHELL = ("bash", "sh", "shell", "console")
_FENCE = re.compile(r"^```(\w*)\s*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def shell_blocks(text):
    """``[(line of the fence, [lines])]`` for the shell blocks of a page."""
    lines, blocks, index = text.splitlines(), [], 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if match.group(1) in SHELL:
            blocks.append((index + 1, lines[index + 1:end]))
        index = end + 1
    return blocks


def commands_of(lines):
    """The commands of a block, as word lists: continuations joined, here-documents and
    comments dropped, ``&&`` chains split."""
    commands, pending, heredoc = [], "", None
    for line in lines:
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        pending += line
        if line.rstrip().endswith("\\"):
            pending = pending.rstrip()[:-1] + " "
            continue
        marker = re.search(r"<<\s*'?(\w+)'?", pending)
        if marker:
            heredoc = marker.group(1)
        words = shlex.split(pending.replace("$", ""), comments=True) if pending.strip() else []
        pending = ""
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            commands.append(words[:cut])
            words = words[cut + 1:]
    return [command for command in commands if command]


def documented_commands():
    """``[(page:line, words, in an upstream checkout)]`` for every page."""
    found = []
    for page in PAGES:
        with open(os.path.join(REPO, page)) as handle:
            text = handle.read()
        for line, lines in shell_blocks(text):
            commands = commands_of(lines)
            elsewhere = any(words[0] == "cd" for words in commands)
            found += [(f"{page}:{line}", words, elsewhere) for words in commands]
    return found


def _python_part(words):
    """The words from ``python`` on (environment assignments dropped), or None."""
    while words and _ASSIGNMENT.match(words[0]):
        words = words[1:]
    return words[1:] if words and words[0] in ("python", "python3") else None


def _script_options(args):
    return [word.split("=", 1)[0] for word in args if word.startswith("--")]


def test_blocks_are_read_as_commands():
    lines = ["A=1 python x.py --a 1 \\", "    --b 2   # note", "mkdir d && python -c 'print(1)'",
             "python - <<'PY'", "import os", "PY", "# a comment"]
    assert commands_of(lines) == [["A=1", "python", "x.py", "--a", "1", "--b", "2"],
                                  ["mkdir", "d"], ["python", "-c", "print(1)"],
                                  ["python", "-", "<<PY"]]


def _checks():
    """``{script: set of --options the docs give it}`` and the problems found without
    running anything."""
    options, problems = {}, []
    for where, words, elsewhere in documented_commands():
        args = _python_part(words)
        if args is None or elsewhere or not args or args[0] == "-":
            continue
        if args[0] == "-c":
            try:
                compile(args[1], where, "exec")
            except SyntaxError as exc:
                problems.append(f"{where}: python -c does not compile: {exc}")
            continue
        if args[0] == "-m":
            module, rest = args[1], args[2:]
            if module == "minitorch_dist.run":
                if rest[:1] in (["--help"], ["-h"]):
                    continue            # tested in test_launcher_cli.py
                try:
                    rest = parse_options(rest)["argv"]
                except SystemExit as exc:
                    problems.append(f"{where}: the launcher refuses {rest}: {exc.code}")
                    continue
                if rest[:1] == ["-m"]:
                    module, rest = rest[1], rest[2:]
                elif rest and rest[0] != "-c":
                    args = rest
                    module = None
            if module is not None:
                if module != "pytest" and importlib.util.find_spec(module) is None:
                    problems.append(f"{where}: no module {module}")
                continue
        script = args[0]
        if not script.startswith(OWN_FOLDERS):
            continue                    # a placeholder: train.py, script.py
        if not os.path.isfile(os.path.join(REPO, script)):
            problems.append(f"{where}: {script} does not exist")
            continue
        options.setdefault(script, set()).update(_script_options(args[1:]))
    return options, problems


def test_every_documented_command_names_what_exists():
    options, problems = _checks()
    assert problems == []
    assert len(options) >= 20      # the examples, benchmarks and scripts the pages run


def _help_texts(scripts):
    env = child_env()
    started = {script: subprocess.Popen([sys.executable, os.path.join(REPO, script), "--help"],
                                        cwd=REPO, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
               for script in scripts}
    return {script: proc.communicate(timeout=240)[0] for script, proc in started.items()}


def _parses_arguments(script):
    with open(os.path.join(REPO, script)) as handle:
        text = handle.read()
    return "argparse" in text or "parse_config(" in text     # Wide&Deep: src/config.py


# options the docs use that the script accepts but hides from --help (argparse.SUPPRESS)
HIDDEN = {"benchmarks/bench_pipeline.py --batch"}     # docs/performance.md's 256-row run


def test_every_documented_option_is_one_the_script_takes():
    """A script given ``--options`` in the docs lists each of them in its ``--help`` (run
    only for scripts that parse their arguments: ``--help`` must not start a benchmark)."""
    options, _ = _checks()
    wanted = {script: given for script, given in options.items() if given}
    unparsed = sorted(script for script in wanted if not _parses_arguments(script))
    assert unparsed == [], "documented with options, but no argument parser"
    missing = []
    for script, text in _help_texts(sorted(wanted)).items():
        assert "usage:" in text, f"{script} --help: {text[-1500:]}"
        missing += [f"{script} {option}" for option in sorted(wanted[script])
                    if not re.search(re.escape(option) + r"\b", text)]
    assert sorted(set(missing) - HIDDEN) == []


@pytest.mark.parametrize("name", ["README.md", "docs/distributed.md"])
def test_pages_with_commands_are_read(name):
    assert any(where.startswith(name + ":") for where, _, _ in documented_commands())
