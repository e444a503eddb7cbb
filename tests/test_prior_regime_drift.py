"""The force calls of BOOptimizer under a GFN1-xTB prior, held to the committed figures.

``asebo/data/regression/prior_regime.json`` records, per set, the command of
``asebo bench`` that measures the calls of ``bo+gfn1`` (a GFN1-xTB prior under the
GFN2-xTB target), the calls per molecule, their total and a history whose entries say
why each figure changed. Each test here runs a set's recorded command in a fresh
process with one thread and compares its calls with the committed ones, molecule by
molecule: on one machine with one thread the calls are the same in every run, so any
difference is a change of the optimizer's path.
"""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import asebo

RECORD = Path(asebo.__file__).parent / "data" / "regression" / "prior_regime.json"


def recorded_sets():
    """The sets of the committed file, by name."""
    return json.loads(RECORD.read_text())["sets"]


def run_recorded_command(command, folder):
    """The calls per molecule of ``command`` (``OMP_NUM_THREADS=1 asebo bench ...``),
    run in ``folder`` with this interpreter; a cell with a mark (``7*``, not converged)
    kept as its text."""
    words = shlex.split(command)
    environment = dict(os.environ)
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        environment[name] = value
    assert words[0] == "asebo", f"the recorded command {command!r} is not an asebo command"
    table = folder / "table.md"
    arguments = [sys.executable, "-m", "asebo.cli", *words[1:], "--markdown", str(table)]
    done = subprocess.run(
        arguments, cwd=folder, env=environment, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    calls = {}
    for line in table.read_text().splitlines()[2:]:
        name, cell = (c.strip() for c in line.strip("| ").split(" | ")[:2])
        if name.startswith("**"):  # the totals' rows
            break
        calls[name] = int(cell) if cell.isdigit() else cell
    return calls


def drift(name, committed, measured):
    """The message that lists the molecules of set ``name`` whose calls moved, or ''."""
    moved = []
    for molecule in sorted(committed.keys() | measured.keys()):
        before, after = committed.get(molecule, "absent"), measured.get(molecule, "absent")
        if before != after:
            counted = isinstance(before, int) and isinstance(after, int)
            by = f" ({after - before:+d})" if counted else ""
            moved.append(f"{molecule} {before} -> {after}{by}")
    if not moved:
        return ""
    total_before = sum(c for c in committed.values() if isinstance(c, int))
    total_after = sum(c for c in measured.values() if isinstance(c, int))
    return (
        f"bo+gfn1 calls on {name} moved: {'; '.join(moved)}; total {total_before} -> "
        f"{total_after}. A change that moves them on purpose updates "
        f"asebo/data/regression/{RECORD.name}: the new calls and total of '{name}' and a "
        "history entry with the date, the commit and a 'why' line"
    )


def test_the_committed_figures_add_up_and_each_history_ends_at_the_total():
    sets = recorded_sets()
    for name, record in sets.items():
        assert sum(record["calls"].values()) == record["total"], name
        history = record["history"]
        assert history[0]["why"] == "measured", name
        assert history[-1]["total"] == record["total"], name
        assert all(entry["why"] and len(entry["commit"]) == 40 for entry in history), name
    # the subset's molecules are Baker molecules, measured by the same command
    subset, baker = sets["baker_subset"]["calls"], sets["baker"]["calls"]
    message = drift("baker", subset, {molecule: baker[molecule] for molecule in subset})
    assert not message, f"the subset's figures differ from Baker's: {message}"


def test_the_drift_message_names_each_molecule_that_moved_and_by_how_much():
    message = drift("baker", {"a": 3, "b": 4, "c": 2}, {"a": 3, "b": 6, "c": "2*"})
    assert "b 4 -> 6 (+2)" in message and "c 2 -> 2*" in message
    assert "a 3" not in message and "total 9 -> 9" in message and "'why'" in message
    assert drift("baker", {"a": 3}, {"a": 3}) == ""


def test_the_baker_subset_takes_the_committed_calls(tmp_path):
    """Six small Baker molecules (4 to 9 atoms, 23 calls), about 12 s on two shared cores."""
    record = recorded_sets()["baker_subset"]
    measured = run_recorded_command(record["command"], tmp_path)
    message = drift("baker_subset", record["calls"], measured)
    assert not message, message


@pytest.mark.slow  # the whole sets: minutes (docs/notes/prior-regime-drift.md)
@pytest.mark.parametrize("name", ["baker", "druglike"])
def test_a_whole_set_takes_the_committed_calls(name, tmp_path):
    record = recorded_sets()[name]
    measured = run_recorded_command(record["command"], tmp_path)
    message = drift(name, record["calls"], measured)
    assert not message, message
    assert sum(measured.values()) == record["total"]
