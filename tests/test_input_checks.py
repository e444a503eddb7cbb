"""Input the optimizer refuses before any call, and calculators it takes as ASE's
optimizers do."""

import numpy as np
import pytest
from ase.build import bulk, molecule
from ase.calculators.emt import EMT
from ase.calculators.qmmm import RescaledCalculator
from ase.filters import FrechetCellFilter
from ase.optimize import BFGS

from asebo import BOOptimizer
from calculators import CountingCalculator


def counted_water():
    water = molecule("H2O")
    water.calc = CountingCalculator(EMT())
    return water


def nan_position(atoms):
    atoms.positions[1, 2] = np.nan
    return atoms


def inf_position(atoms):
    atoms.positions[2, 0] = np.inf
    return atoms


def coincident_atoms(atoms):
    atoms.positions[2] = atoms.positions[1] + [0.0, 0.0, 0.2]
    return atoms


def nan_cell():
    copper = bulk("Cu", cubic=True)
    copper.calc = CountingCalculator(EMT())
    copper.cell[0, 1] = np.nan
    return FrechetCellFilter(copper)


@pytest.mark.parametrize(
    ("system", "match"),
    [
        (lambda: nan_position(counted_water()), r"atom 1 has a position that is not a finite"),
        (lambda: inf_position(counted_water()), r"atom 2 has a position that is not a finite"),
        (lambda: coincident_atoms(counted_water()), r"atoms 1 and 2 are 0.200 Å apart, closer"),
        (nan_cell, r"the cell holds a number that is not finite"),
    ],
)
def test_non_finite_or_coincident_input_is_refused_in_one_line_before_any_call(system, match):
    system = system()
    with pytest.raises(ValueError, match=match) as error:
        BOOptimizer(system, logfile=None)
    assert "\n" not in str(error.value)
    assert getattr(system, "atoms", system).calc.ncalls == 0


def rescaled_copper():
    """Bulk copper, strained and rattled, under EMT rescaled to another lattice constant:
    a calculator that gives no ``free_energy``."""
    atoms = bulk("Cu", cubic=True) * (2, 1, 1)
    atoms.rattle(0.05, seed=3)
    atoms.cell *= 1.03
    atoms.calc = RescaledCalculator(EMT(), 3.65, 140.0, 3.61, 134.0)
    return atoms


def test_a_cell_filter_relaxes_with_a_calculator_without_free_energy_as_bfgs_does():
    reference = rescaled_copper()
    assert "free_energy" not in reference.calc.implemented_properties
    assert BFGS(FrechetCellFilter(reference), logfile=None).run(fmax=0.01, steps=200)
    atoms = rescaled_copper()
    assert BOOptimizer(FrechetCellFilter(atoms), logfile=None).run(fmax=0.01, steps=100)
    volume = atoms.get_volume() / reference.get_volume()
    assert volume == pytest.approx(1.0, abs=2e-3)
    assert atoms.get_potential_energy() == pytest.approx(reference.get_potential_energy(), abs=1e-3)
