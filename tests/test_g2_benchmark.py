"""`asebo bench g2`: each molecule against L-BFGS, failures and ratios in the table."""

import pytest

from asebo.benchmarks.g2 import compare_one, g2_names, table


def test_names_are_the_g2_molecules_with_two_atoms_or_more():
    names = g2_names()
    assert len(names) == 148 and "C2H2" in names and "H" not in names
    assert sorted(g2_names(["CO2", "H2O"])) == ["CO2", "H2O"]
    with pytest.raises(SystemExit, match="not in the G2 set: acetylene"):
        g2_names(["acetylene"])


def test_one_molecule_is_relaxed_by_both_and_bo_within_its_budget():
    name, result = compare_one(("HCN", "gfn2", None, 0.1, 0, 0.05, 3.0, True, None))
    assert name == "HCN" and result["atoms"] == 3
    reference, bo = result["lbfgs"], result["bo"]
    assert reference["converged"] and bo["converged"]
    assert reference["imaginary"] == [] and bo["imaginary"] == []  # audited: both minima
    assert bo["calls"] <= 3 * reference["calls"]
    assert len(bo["energies"]) == bo["calls"]


def test_the_symmetry_probe_reaches_bo_on_an_unrattled_start():
    runs = [compare_one(("C2H6", "gfn2", None, 0.0, 0, 0.05, 3.0, False, p)) for p in (None, 0.1)]
    without, probed = (result["bo"] for _, result in runs)
    assert without["converged"] and probed["converged"]
    assert probed["calls"] > without["calls"]  # G2's ethane is D3d: the probe costs calls
    assert probed["energy"] <= without["energy"] + 1e-3


def run(calls, converged=True, energy=-1.0):
    return {"calls": calls, "converged": converged, "energy": energy, "energies": [energy] * calls}


def test_table_counts_failures_and_ratios_of_the_converged_runs():
    results = {
        "A": {"atoms": 3, "lbfgs": run(10), "bo": run(5)},
        "B": {"atoms": 4, "lbfgs": run(10), "bo": run(20)},
        "C": {"atoms": 5, "lbfgs": run(10), "bo": run(30, converged=False)},
        "D": {"atoms": 6, "lbfgs": run(4), "bo": run(4, energy=-0.9)},
        "E": {"error": "CalculationFailed: SCF did not converge"},
    }
    text = table(results, limit=3.0)
    assert "| A | 3 | 10 | 5 | 0.50 | +0.0000 |" in text
    assert "| C | 5 | 10 | 30* | 3.00 |" in text
    assert "- molecules: 5, failures: 3" in text
    # converged: A, B, D; totals 24 and 29, median of 0.5, 2.0, 1.0
    assert "total calls L-BFGS 24, bo 29 (ratio 1.21); median ratio 1.00, largest 2.00" in text
    assert "- C: not converged in 30 calls (L-BFGS 10)" in text
    assert "- D: minimum 0.100 eV above L-BFGS's" in text
    assert "- E: CalculationFailed: SCF did not converge" in text
