"""Every script in ``examples/`` answers ``--help`` with its purpose and refuses an option
it does not know, before any computation: run in one process, each as ``python
examples/NAME.py`` runs it."""

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))


def run_as_script(path, argv, monkeypatch):
    """Run ``path`` as ``__main__`` with ``argv``; the exit status of its SystemExit."""
    monkeypatch.setattr(sys, "argv", [str(path), *argv])
    monkeypatch.syspath_prepend(str(path.parent))
    with pytest.raises(SystemExit) as stopped:
        runpy.run_path(str(path), run_name="__main__")
    return stopped.value.code


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_an_example_prints_its_purpose_and_refuses_an_unknown_option(path, monkeypatch, capsys):
    try:
        status = run_as_script(path, ["--help"], monkeypatch)
    except ModuleNotFoundError as missing:
        pytest.skip(f"{path.name} needs {missing.name}")
    printed = capsys.readouterr().out
    assert status == 0
    assert printed.startswith(f"usage: {path.name}")
    purpose = " ".join(path.read_text().split('"""')[1].split("\n\n")[0].split())
    assert purpose[:40] in " ".join(printed.split())
    assert run_as_script(path, ["--no-such-option"], monkeypatch) == 2
    assert f"{path.name}: error:" in capsys.readouterr().err
