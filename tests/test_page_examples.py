"""Every fenced ```python example of the user pages (docs/*.md, not docs/notes/) runs as
written.

Each block runs alone, as a reader who pastes it into a script runs it: a fresh
namespace, a folder of its own as the working directory, matplotlib without a display;
the processes it starts import this checkout. The page says, in an HTML comment on the
line before the fence, what the default tests do not run:

- ``<!-- slow: why -->``: it takes minutes (GPAW, a campaign): run with the slow tests;
- ``<!-- not run: why -->``: it needs what no test machine has (a SLURM cluster).

A block that imports an optional package (an extra) not installed here is skipped,
naming the package.
"""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```python\s*$")
MARK = re.compile(r"^<!--\s*(slow|not run):\s*(.+?)\s*-->$")
OPTIONAL = frozenset(
    {"gpaw", "chgnet", "sella", "dask", "distributed", "dask_jobqueue", "rdkit", "sklearn"}
    | {"qm9pack", "qmllib", "geometric", "matplotlib", "tqdm", "metric_learn"}
)
"""Packages of the extras: a block that needs one not installed is skipped."""


def blocks(page):
    """(line of the fence, mark or None, source) of every ```python block of ``page``; the
    mark is ``(kind, why)`` from the comment on the line before the fence."""
    lines = page.read_text().splitlines()
    found = []
    for number, line in enumerate(lines):
        if not FENCE.match(line):
            continue
        end = next(k for k in range(number + 1, len(lines)) if lines[k].startswith("```"))
        mark = MARK.match(lines[number - 1].strip()) if number else None
        source = "\n".join(lines[number + 1 : end]) + "\n"
        found.append((number + 1, None if mark is None else mark.groups(), source))
    return found


def cases():
    """One pytest parameter per block, marked slow or skipped as its page says."""
    for page in PAGES:
        for line, mark, source in blocks(page):
            marks = []
            if mark is not None and mark[0] == "slow":
                marks.append(pytest.mark.slow)
            if mark is not None and mark[0] == "not run":
                marks.append(pytest.mark.skip(reason=f"not run: {mark[1]}"))
            yield pytest.param(page, line, source, marks=marks, id=f"{page.name}:{line}")


def test_the_pages_have_examples_and_every_mark_is_known():
    every = [block for page in PAGES for block in blocks(page)]
    assert len(every) > 20
    for page in PAGES:
        text = page.read_text().splitlines()
        for number, line in enumerate(text[1:], 1):
            if FENCE.match(line) and text[number - 1].startswith("<!--"):
                assert MARK.match(text[number - 1].strip()), f"{page.name}:{number + 1}"


@pytest.mark.parametrize("page, line, source", list(cases()))
def test_the_example_runs_as_written(page, line, source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # a block's own processes import asebo
    monkeypatch.setattr(sys, "argv", [f"{page.name}:{line}"])
    code = compile(source, f"{page.relative_to(ROOT)}:{line}", "exec")
    try:
        exec(code, {"__name__": "__main__"})
    except ModuleNotFoundError as error:
        package = (error.name or "").split(".")[0]
        if package not in OPTIONAL:
            raise
        pytest.skip(f"needs {package}, not installed here")
