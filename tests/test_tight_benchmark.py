"""`asebo bench tight`: its runs and table, a failed run as a row."""

import pytest
from ase import Atoms
from ase.calculators.emt import EMT

from asebo.benchmarks.tight import relax_tight, small_set, table


@pytest.mark.slow  # three relaxations of H2 to 1e-3 eV/Å, about 30 s on two shared cores
def test_the_table_gives_each_optimizers_calls_convergence_and_energy_above_the_lowest():
    hydrogen = Atoms("H2", positions=[[0, 0, 0], [0, 0, 0.9]])
    results = {("H2", 1e-3): {}}
    for optimizer in ("bo", "bfgs", "sella"):
        name, fmax, label, result = relax_tight(("H2", hydrogen, optimizer, 1e-3, "gfn2", 100))
        assert (name, fmax, label) == ("H2", 1e-3, optimizer)
        assert result["converged"] and result["fmax"] < 1e-3
        assert result["calls"] >= 2
        results[("H2", 1e-3)][optimizer] = result
    lines = table(results, ["bo", "bfgs", "sella"]).splitlines()
    rows = {line.split(" | ")[2]: line.strip("| ").split(" | ") for line in lines[2:5]}
    runs = results[("H2", 1e-3)]
    lowest = min(r["energy"] for r in runs.values())
    for optimizer, row in rows.items():
        assert row[:2] == ["H2", "0.001"]
        assert int(row[3]) == runs[optimizer]["calls"] and row[4] == "yes"
        assert float(row[6]) == round(1000 * (runs[optimizer]["energy"] - lowest), 3)
    assert min(float(row[6]) for row in rows.values()) == 0.0
    assert "| 0.001 | bfgs | 1/1 | " in "\n".join(lines)


def test_a_run_that_raises_is_a_row_that_says_so():
    iron = Atoms("Fe2", positions=[[0, 0, 0], [0, 0, 2.3]])
    name, fmax, label, failed = relax_tight(("Fe2", iron, "bfgs", 1e-3, EMT(), 10))
    assert failed == {"error": "NotImplementedError: No EMT-potential for Fe", "calls": 0}
    text = table({("Fe2", 1e-3): {"bfgs": failed}}, ["bfgs"])
    assert (
        "| Fe2 | 0.001 | bfgs | 0 | failed: NotImplementedError: No EMT-potential for Fe |" in text
    )
    assert "| 0.001 | bfgs | 0/1 | 0 | - |" in text


def test_the_small_set_is_rattled_the_same_each_time():
    first, second = small_set(["water", "benzene"]), small_set(["water", "benzene"])
    assert list(first) == ["water", "benzene"]
    assert (first["water"].positions == second["water"].positions).all()
    assert len(first["benzene"]) == 12
