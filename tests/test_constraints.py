"""BOOptimizer under the linear constraints and filter options of materials work:
FixedPlane and FixedLine, a cell filter's hydrostatic_strain and constant_volume, and
FixSymmetry. Each run reaches BFGS's minimum under the same constraint, which it keeps."""

import warnings

import numpy as np
import pytest
from ase.build import add_adsorbate, bulk, fcc111
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms, FixedLine, FixedPlane, FixSymmetry
from ase.filters import ExpCellFilter, FrechetCellFilter, UnitCellFilter
from ase.optimize import BFGS
from ase.spacegroup.symmetrize import check_symmetry

from asebo import BOOptimizer
from asebo.model.cell_coordinates import GeneralizedCoordinates
from asebo.optimize.observations import RestartError
from asebo.optimize.subspace import free_subspace
from calculators import CountingCalculator

FMAX = 0.01
ENERGY = 1e-3  # eV: BOOptimizer's endpoint against BFGS's


def adatom(constraint):
    """Au on a Cu(111) slab, off its top site, its lowest layer held, the adatom under
    ``constraint(index)``."""
    slab = fcc111("Cu", (2, 2, 3), vacuum=6.0)
    add_adsorbate(slab, "Au", 2.2, "ontop")
    slab.positions[-1, :2] += [0.4, 0.3]
    bottom = np.flatnonzero(slab.positions[:, 2] < slab.positions[:, 2].min() + 1)
    slab.set_constraint([FixAtoms(bottom), constraint(len(slab) - 1)])
    slab.calc = CountingCalculator(EMT())
    return slab


def strained_aluminium():
    """Four Al atoms, rattled, in a cubic cell strained unevenly."""
    atoms = bulk("Al", cubic=True, a=4.0)
    atoms.rattle(0.05, seed=0)
    atoms.set_cell(atoms.cell @ np.diag([1.04, 0.98, 1.01]), scale_atoms=True)
    atoms.calc = CountingCalculator(EMT())
    return atoms


def symmetric_defect():
    """A Cu supercell with an Au atom, a vacancy beside it and a tetragonal strain, under
    FixSymmetry (space group Pm), its atoms rattled along what the symmetry allows."""
    atoms = bulk("Cu", cubic=True, a=3.65) * (2, 2, 2)
    atoms.symbols[0] = "Au"
    atoms.set_cell(atoms.cell @ np.diag([1.0, 1.0, 1.03]), scale_atoms=True)
    del atoms[1]
    atoms.set_constraint(FixSymmetry(atoms, symprec=1e-3))
    rng = np.random.default_rng(2)
    atoms.set_positions(atoms.positions + 0.08 * rng.normal(size=atoms.positions.shape))
    atoms.calc = CountingCalculator(EMT())
    return atoms


def relaxed(make, wrap, optimizer):
    """The atoms of ``make()`` relaxed through ``wrap`` by ``optimizer`` to FMAX, their
    start, and the optimizer."""
    atoms = make()
    start = atoms.copy()
    run = optimizer(wrap(atoms), logfile=None)
    assert run.run(fmax=FMAX, steps=300)
    return atoms, start, run


def against_bfgs(make, wrap=lambda atoms: atoms):
    """BOOptimizer's and BFGS's endpoints (atoms, start) from ``make()``."""
    ours, start, _ = relaxed(make, wrap, BOOptimizer)
    theirs, _, _ = relaxed(make, wrap, BFGS)
    assert abs(ours.get_potential_energy() - theirs.get_potential_energy()) < ENERGY
    return ours, start


def test_fixed_plane_along_an_axis_keeps_the_height_and_reaches_bfgs_minimum():
    ours, start = against_bfgs(lambda: adatom(lambda i: FixedPlane(i, [0, 0, 1])))
    moved = ours.positions[-1] - start.positions[-1]
    assert moved[2] == 0.0
    assert np.linalg.norm(moved[:2]) > 0.3  # it slid towards a hollow site


def test_fixed_line_off_the_axes_keeps_its_line_and_reaches_bfgs_minimum():
    direction = np.array([1.0, 1.0, 0.5]) / 1.5
    ours, start = against_bfgs(lambda: adatom(lambda i: FixedLine(i, direction)))
    moved = ours.positions[-1] - start.positions[-1]
    assert np.linalg.norm(moved - (moved @ direction) * direction) < 1e-10
    assert abs(moved @ direction) > 0.01


def test_hydrostatic_strain_keeps_the_cell_shape_and_reaches_bfgs_minimum():
    ours, start = against_bfgs(
        strained_aluminium, lambda atoms: FrechetCellFilter(atoms, hydrostatic_strain=True)
    )
    scaling = np.linalg.solve(start.cell, ours.cell)  # cell = start's cell @ scaling
    assert np.allclose(scaling, scaling[0, 0] * np.eye(3), rtol=0.0, atol=1e-12)
    assert abs(scaling[0, 0] - 1.0) > 1e-3  # the volume relaxed


def test_hydrostatic_strain_of_the_unit_cell_filter_keeps_the_shape():
    ours, start = against_bfgs(
        strained_aluminium, lambda atoms: UnitCellFilter(atoms, hydrostatic_strain=True)
    )
    scaling = np.linalg.solve(start.cell, ours.cell)
    assert np.allclose(scaling, scaling[0, 0] * np.eye(3), rtol=0.0, atol=1e-12)


def test_constant_volume_keeps_the_volume_and_reaches_bfgs_minimum():
    ours, start = against_bfgs(
        strained_aluminium, lambda atoms: FrechetCellFilter(atoms, constant_volume=True)
    )
    assert abs(ours.get_volume() / start.get_volume() - 1.0) < 1e-6
    assert not np.allclose(ours.cell, start.cell, atol=1e-3)  # the shape relaxed


def test_fix_symmetry_keeps_the_space_group_of_a_cell_relaxation():
    ours, start = against_bfgs(symmetric_defect, FrechetCellFilter)
    group = check_symmetry(start, 1e-5).number
    assert group == 6  # Pm: far fewer allowed moves than coordinates
    assert check_symmetry(ours, 1e-5).number == group
    assert not np.allclose(ours.cell, start.cell, atol=1e-3)


def test_fix_symmetry_keeps_the_space_group_of_the_atoms():
    def vacancy():
        atoms = bulk("Cu", cubic=True, a=3.7) * (2, 2, 2)
        del atoms[0]
        atoms.set_constraint(FixSymmetry(atoms))
        atoms.calc = CountingCalculator(EMT())
        return atoms

    ours, start = against_bfgs(vacancy)
    assert check_symmetry(ours, 1e-5).number == check_symmetry(start, 1e-5).number == 221
    assert np.abs(ours.positions - start.positions).max() > 1e-3


def test_the_subspace_projects_as_the_constraints_adjust_the_forces():
    atoms = symmetric_defect()
    system = FrechetCellFilter(atoms, hydrostatic_strain=True)
    coordinates = GeneralizedCoordinates.from_optimizable(system)
    subspace = free_subspace(coordinates, coordinates.free())
    forces = np.random.default_rng(0).normal(size=(len(atoms) + 3, 3))
    projected = subspace.project(forces)
    expected = forces[: len(atoms)].copy()
    atoms.constraints[0].adjust_forces(atoms, expected)
    assert np.allclose(projected[: len(atoms)], expected, atol=1e-12)
    cell = projected[len(atoms) :]
    assert np.allclose(cell, np.trace(forces[len(atoms) :]) / 3 * np.eye(3), atol=1e-12)
    assert np.allclose(subspace.project(projected), projected, atol=1e-12)


def test_the_free_coordinates_count_the_subspace():
    atoms = strained_aluminium()
    run = BOOptimizer(FrechetCellFilter(atoms, hydrostatic_strain=True), logfile=None)
    assert run.subspace.dimension == 3 * len(atoms) + 1
    plane = BOOptimizer(adatom(lambda i: FixedPlane(i, [0, 0, 1])), logfile=None)
    assert plane.subspace is None  # along an axis: a mask, as FixCartesian
    assert plane.engine.free[-1].tolist() == [True, True, False]


@pytest.mark.parametrize("kind", [UnitCellFilter, ExpCellFilter])
def test_constant_volume_without_the_frechet_filter_is_refused_before_any_call(kind):
    atoms = strained_aluminium()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ExpCellFilter's
        system = kind(atoms, constant_volume=True)
    with pytest.raises(ValueError, match=f"not {kind.__name__}: use FrechetCellFilter"):
        BOOptimizer(system, logfile=None)
    assert atoms.calc.ncalls == 0


def test_a_plane_under_a_cell_filter_is_refused_before_any_call():
    atoms = strained_aluminium()
    atoms.set_constraint(FixedPlane(0, [0, 0, 1]))
    with pytest.raises(TypeError, match="FixedPlane with a cell filter.*FixAtoms or FixSymmetry"):
        BOOptimizer(FrechetCellFilter(atoms), logfile=None)
    assert atoms.calc.ncalls == 0


def test_a_restart_file_of_a_hydrostatic_run_needs_the_same_option(tmp_path):
    restart = tmp_path / "r.json"
    atoms = strained_aluminium()
    BOOptimizer(
        FrechetCellFilter(atoms, hydrostatic_strain=True), restart=restart, logfile=None
    ).run(fmax=FMAX, steps=2)
    with pytest.raises(RestartError, match="whose hydrostatic_strain differ"):
        BOOptimizer(FrechetCellFilter(strained_aluminium()), restart=restart, logfile=None)


def test_the_hessian_has_no_curvature_along_a_tilted_plane_s_held_normal():
    # held coordinates have zero rows; a plane along no axis held its normal in the
    # search only, and vibrations() gave that motion a frequency of its own
    normal = np.array([0.3, 0.0, 1.0]) / np.linalg.norm([0.3, 0.0, 1.0])
    slab = adatom(lambda i: FixedPlane(i, normal))
    optimizer = BOOptimizer(slab, logfile=None)
    assert optimizer.run(fmax=FMAX)
    rows = optimizer.hessian()[-3:]  # (3, 3N): the adatom's
    assert np.abs(normal @ rows).max() < 1e-10
    frequencies = np.abs(optimizer.vibrations().get_frequencies())
    assert frequencies.min() < 1e-3  # cm⁻¹: the held normal
    assert np.sort(frequencies)[1] > 1.0  # the other motions vibrate
