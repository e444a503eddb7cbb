"""A sheared cell under a cell filter: the search keeps the deformation symmetric, so
the cell does not turn where the model sees no change, and the run converges."""

import numpy as np
import pytest
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.filters import FrechetCellFilter, UnitCellFilter

from asebo import BOOptimizer
from asebo.model.cell_coordinates import GeneralizedCoordinates
from asebo.optimize.subspace import search_subspace, unturned_cell_projector
from calculators import CountingCalculator


def sheared_copper(shear):
    """Four copper atoms in their cubic cell sheared by ``shear`` (the first lattice
    vector tilted along the second), rattled by 0.05 Å."""
    atoms = bulk("Cu", cubic=True)
    cell = atoms.cell.array.copy()
    cell[0, 1] += shear * cell[1, 1]
    atoms.set_cell(cell, scale_atoms=True)
    atoms.rattle(0.05, seed=0)
    atoms.calc = CountingCalculator(EMT())
    return atoms


@pytest.mark.parametrize(
    ("cell_filter", "shear", "calls"), [(UnitCellFilter, 0.05, 10), (FrechetCellFilter, 0.2, 15)]
)
def test_a_sheared_cell_converges_without_turning(cell_filter, shear, calls):
    # before the search kept the deformation symmetric: 120 calls and more, the cell
    # forces stuck at 0.03-0.04 eV/Å while the steps shrank to 1e-5 Å
    atoms = sheared_copper(shear)
    system = cell_filter(atoms)
    assert BOOptimizer(system, logfile=None).run(fmax=0.01, steps=40)
    assert atoms.calc.ncalls <= calls
    assert np.linalg.norm(system.get_forces(), axis=1).max() < 0.01
    deformation = np.linalg.solve(system.orig_cell, atoms.cell.array).T
    np.testing.assert_allclose(deformation, deformation.T, rtol=0, atol=1e-12)


def test_the_search_moves_the_cell_by_symmetric_deformations_only():
    system = UnitCellFilter(sheared_copper(0.05))
    coordinates = GeneralizedCoordinates.from_optimizable(system)
    subspace = search_subspace(coordinates, coordinates.free())
    assert subspace.dimension == 3 * len(system.atoms) + 6
    moves = np.random.default_rng(0).normal(size=(len(system.atoms) + 3, 3))
    projected = subspace.project(moves)
    np.testing.assert_allclose(projected[:-3], moves[:-3], rtol=0, atol=1e-12)
    np.testing.assert_allclose(projected[-3:], (moves[-3:] + moves[-3:].T) / 2, atol=1e-12)


def test_a_mask_that_holds_one_shear_of_a_pair_leaves_the_cell_moves_as_they_were():
    mask = np.ones((3, 3))
    mask[1, 0] = 0
    system = UnitCellFilter(sheared_copper(0.05), mask=mask)
    coordinates = GeneralizedCoordinates.from_optimizable(system)
    assert unturned_cell_projector(coordinates) is None
    assert search_subspace(coordinates, coordinates.free()) is None
