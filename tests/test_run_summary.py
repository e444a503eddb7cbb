"""``summary()`` of the three drivers: one line read from the run's record, the numbers
those of the configuration where the run stands (`asebo neb` and `asebo saddle` print it:
tests/test_commands_barriers.py)."""

import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.emt import EMT

from asebo import BOOptimizer
from asebo.optimize.run_summary import NOT_RUN
from calculators import CountingCalculator


def largest_force(atoms):
    return float(np.sqrt((atoms.get_forces() ** 2).sum(axis=1)).max())


@pytest.mark.parametrize("steps", [1, 100])
def test_the_summary_gives_the_calls_the_energy_and_the_force_where_the_run_ends(steps):
    atoms = molecule("H2O")
    atoms.rattle(0.1, seed=0)
    atoms.calc = CountingCalculator(EMT())
    opt = BOOptimizer(atoms, logfile=None)
    assert opt.summary() == NOT_RUN
    converged = opt.run(fmax=0.05, steps=steps)
    line = opt.summary()
    word = "converged" if converged else "not converged"
    assert line.startswith(f"{word} after {opt.nsteps} step")
    assert f", {atoms.calc.ncalls} calls" in line
    assert f"energy {atoms.get_potential_energy():.6f} eV" in line
    assert line.endswith(f"fmax {largest_force(atoms):.4f} eV/Å")
    assert ("(its forces are above fmax)" in line) == (largest_force(atoms) >= 0.05)
    calls = atoms.calc.ncalls
    assert opt.summary() == line and atoms.calc.ncalls == calls  # no call
