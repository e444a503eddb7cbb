"""geomeTRIC on ASE atoms: the minimum BFGS finds, ASE's convergence test, every call counted."""

import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms
from ase.optimize import BFGS

from asebo.campaign.relax import relax
from calculators import get_calculator

pytest.importorskip("geometric")

from asebo.campaign.geometric_optimizer import GeomeTRIC  # noqa: E402


def rattled_methanol():
    atoms = molecule("CH3OH")
    atoms.rattle(0.1, seed=1)
    return atoms


def test_geometric_reaches_the_bfgs_minimum_and_stops_on_the_largest_force():
    start = rattled_methanol()
    result = relax(start, "geometric", "gfn2", fmax=0.05, steps=100)
    reference = start.copy()
    reference.calc = get_calculator("gfn2")
    BFGS(reference, logfile=None).run(fmax=0.001, steps=500)
    assert result["converged"]
    assert result["fmax"] < 0.05
    assert result["energy"] == pytest.approx(reference.get_potential_energy(), abs=5e-3)
    # the final configuration is the last one computed: no call after the run
    assert len(result["energies"]) == result["calls"]
    assert result["energies"][-1] == result["energy"]
    assert result["steps"] == result["calls"] - 1


def test_geometric_says_when_it_ran_out_of_steps():
    atoms = rattled_methanol()
    atoms.calc = EMT()
    optimizer = GeomeTRIC(atoms)
    assert not optimizer.run(fmax=1e-6, steps=2)
    assert optimizer.nsteps == 2
    assert np.linalg.norm(atoms.get_forces(), axis=1).max() > 1e-6


def test_geometric_refuses_what_it_cannot_relax_before_any_call():
    atoms = rattled_methanol()
    with pytest.raises(ValueError, match="no calculator"):
        GeomeTRIC(atoms)
    atoms.calc = EMT()
    atoms.set_constraint(FixAtoms([0]))
    with pytest.raises(ValueError, match="takes no ASE constraints"):
        GeomeTRIC(atoms)
    crystal = rattled_methanol()
    crystal.calc = EMT()
    crystal.cell = [6.0, 6.0, 6.0]
    crystal.pbc = True
    with pytest.raises(ValueError, match="periodic cell"):
        GeomeTRIC(crystal)
