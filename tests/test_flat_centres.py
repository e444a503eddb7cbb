"""Flat pyramidal centres: found in symmetric starts, tilted, and left by BOOptimizer."""

import io

import numpy as np
import pytest
from ase.build import molecule
from ase.constraints import FixAtoms
from ase.io import read
from ase.optimize import BFGS

from asebo import BOOptimizer
from asebo.benchmarks import baker
from asebo.model.priors import resolve_prior
from asebo.optimize.flat_centres import flat_centres, tilted
from asebo.optimize.proposal import CURVATURE
from asebo.optimize.settings import SpecialCases
from calculators import get_calculator


def flat_methylamine():
    """The Baker start of methylamine: its nitrogen flat with C and the two H."""
    return read(baker.DEFAULT_DIR / "07_methylamine.xyz")


def angle_sum(atoms, centre, neighbours):
    """Sum (degrees) of the three bond angles at ``centre``: 360 when it is flat."""
    first, second, third = neighbours
    return (
        atoms.get_angle(first, centre, second)
        + atoms.get_angle(second, centre, third)
        + atoms.get_angle(first, centre, third)
    )


def nitrogen_neighbours(atoms):
    nitrogen = atoms.get_chemical_symbols().index("N")
    distances = atoms.get_distances(nitrogen, range(len(atoms)))
    return nitrogen, np.argsort(distances)[1:4]


def test_a_flat_amine_is_found_with_the_normal_of_its_neighbours():
    atoms = flat_methylamine()
    nitrogen, neighbours = nitrogen_neighbours(atoms)
    assert angle_sum(atoms, nitrogen, neighbours) == pytest.approx(360.0, abs=1e-3)
    centres, normals = flat_centres(atoms.positions, atoms.numbers)
    assert centres.tolist() == [nitrogen]
    bonds = atoms.positions[neighbours] - atoms.positions[nitrogen]  # (3, 3)
    np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1.0)
    np.testing.assert_allclose(bonds @ normals[0], 0.0, atol=1e-3)


def test_pyramids_rings_and_held_centres_are_left_out():
    pyramidal = molecule("H3CNH2")
    assert len(flat_centres(pyramidal.positions, pyramidal.numbers)[0]) == 0
    pyrrole = molecule("C4H4NH")  # flat, its nitrogen in the ring
    nitrogen, neighbours = nitrogen_neighbours(pyrrole)
    assert angle_sum(pyrrole, nitrogen, neighbours) == pytest.approx(360.0, abs=1e-3)
    assert len(flat_centres(pyrrole.positions, pyrrole.numbers)[0]) == 0
    atoms = flat_methylamine()
    free = np.ones((len(atoms), 3), dtype=bool)
    free[nitrogen_neighbours(atoms)[0], 2] = False
    assert len(flat_centres(atoms.positions, atoms.numbers, free)[0]) == 0


def test_a_flat_centre_that_the_forces_push_out_of_plane_is_left_out():
    symmetric = flat_methylamine()
    symmetric.calc = get_calculator("gfn2")
    forces = symmetric.get_forces()
    assert len(flat_centres(symmetric.positions, symmetric.numbers, forces=forces)[0]) == 1

    # the methyl hydrogens lie off the plane of the nitrogen's neighbours: no mirror there
    atoms = molecule("H3CNH2")
    nitrogen, neighbours = nitrogen_neighbours(atoms)
    first, second, third = atoms.positions[neighbours]
    normal = np.cross(second - first, third - first)
    normal /= np.linalg.norm(normal)
    atoms.positions[nitrogen] -= np.dot(atoms.positions[nitrogen] - first, normal) * normal
    atoms.calc = get_calculator("gfn2")
    forces = atoms.get_forces()
    assert flat_centres(atoms.positions, atoms.numbers)[0].tolist() == [nitrogen]
    assert len(flat_centres(atoms.positions, atoms.numbers, forces=forces)[0]) == 0


def test_neighbours_on_a_line_span_no_plane_and_give_no_centre():
    numbers = np.array([7, 1, 1, 6])
    positions = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [-1.4, 0.0, 0.0]])
    with np.errstate(all="raise"):
        centres, normals = flat_centres(positions, numbers)
    assert len(centres) == 0 and normals.shape == (0, 3)


def test_tilted_moves_each_centre_along_its_normal_and_nothing_else():
    atoms = flat_methylamine()
    centres, normals = flat_centres(atoms.positions, atoms.numbers)
    tilt = SpecialCases().flat_centre_tilt
    moved = tilted(atoms.positions, centres, normals, tilt)
    displacement = moved - atoms.positions
    np.testing.assert_allclose(displacement[centres], tilt * normals)
    np.testing.assert_array_equal(np.delete(displacement, centres, axis=0), 0.0)
    atoms.positions = moved
    nitrogen, neighbours = nitrogen_neighbours(atoms)
    assert angle_sum(atoms, nitrogen, neighbours) < 359.0


def test_a_flat_amine_relaxes_to_its_pyramid_where_bfgs_stays_on_the_saddle():
    saddle = flat_methylamine()
    saddle.calc = get_calculator("gfn2")
    BFGS(saddle, logfile=None).run(fmax=0.05, steps=100)
    nitrogen, neighbours = nitrogen_neighbours(saddle)
    assert angle_sum(saddle, nitrogen, neighbours) == pytest.approx(360.0, abs=1e-2)

    atoms = flat_methylamine()
    atoms.calc = get_calculator("gfn2")
    log = io.StringIO()
    optimizer = BOOptimizer(atoms, logfile=log)
    assert optimizer.run(fmax=0.05, steps=50)
    assert optimizer.reasons[0] == "tilt" and "tilt" not in optimizer.reasons[1:]
    assert "N0 flat in the start" in log.getvalue()  # the note names the atoms
    assert angle_sum(atoms, nitrogen, neighbours) < 345.0
    # the inversion barrier of methylamine: a few tenths of an eV
    assert atoms.get_potential_energy() < saddle.get_potential_energy() - 0.2


def test_under_a_prior_calculator_a_flat_amine_leaves_its_plane_by_the_curvature_step():
    """The prior calculator's own curvature at the flat saddle leads the step at
    convergence (reason ``'curvature'``) down to the pyramid."""
    atoms = flat_methylamine()
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None, prior=resolve_prior("gfn1"))
    assert optimizer.run(fmax=0.05, steps=50)
    assert CURVATURE in optimizer.reasons
    nitrogen, neighbours = nitrogen_neighbours(atoms)
    assert angle_sum(atoms, nitrogen, neighbours) < 345.0


def test_a_fixed_flat_centre_stays_flat():
    atoms = flat_methylamine()
    atoms.calc = get_calculator("gfn2")
    nitrogen, neighbours = nitrogen_neighbours(atoms)
    atoms.set_constraint(FixAtoms(indices=[nitrogen]))
    log = io.StringIO()
    optimizer = BOOptimizer(atoms, logfile=log)
    optimizer.run(fmax=0.05, steps=3)
    assert "tilt" not in optimizer.reasons
    assert "flat in the start" not in log.getvalue()
    assert angle_sum(atoms, nitrogen, neighbours) == pytest.approx(360.0, abs=1e-2)


def test_the_tilted_first_step_keeps_within_maxstep():
    atoms = flat_methylamine()
    atoms.calc = get_calculator("gfn2")
    start = atoms.get_positions()
    optimizer = BOOptimizer(atoms, logfile=None, maxstep=0.05)
    optimizer.run(fmax=0.05, steps=1)
    step = optimizer.positions_seen[1] - start  # (n, 3)
    assert np.linalg.norm(step, axis=1).max() == pytest.approx(0.05)
    nitrogen, neighbours = nitrogen_neighbours(atoms)
    moved = atoms.copy()
    moved.positions = optimizer.positions_seen[1]
    assert angle_sum(moved, nitrogen, neighbours) < 359.9
