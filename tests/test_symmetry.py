"""Point groups of molecules, the displacements that break them, and the probe at a
symmetric endpoint."""

import io

import numpy as np
import pytest
from ase.build import molecule

from asebo import BOOptimizer
from asebo.benchmarks._symmetric_starts import symmetric_saddle
from asebo.optimize.model_hessian import internal_basis
from asebo.optimize.settings import SpecialCases
from asebo.optimize.symmetry import (
    held_symmetry,
    is_symmetric,
    symmetry_breaking_basis,
    symmetry_operations,
)
from calculators import CountingCalculator, get_calculator

# name: (order of the point group, totally symmetric Cartesian displacements), from
# the character tables (Wilson, Decius and Cross, Molecular Vibrations, 1955): the
# totally symmetric vibrations, plus a translation or rotation where one is
# totally symmetric. CO2's infinite group stands in as D4h.
GROUPS = {
    "H2O": (4, 3),  # C2v: 2 A1 vibrations, T_z
    "NH3": (6, 3),  # C3v: 2 A1, T_z
    "CH4": (24, 1),  # Td: 1 A1
    "C6H6": (24, 2),  # D6h: 2 A1g
    "C2H6": (12, 3),  # D3d: 3 A1g
    "CO2": (16, 1),  # D4h for D-infinity-h: the symmetric stretch
    "CH3OH": (2, 11),  # Cs: 8 A' vibrations, T_x, T_y, R_z
}


@pytest.mark.parametrize("name", GROUPS)
def test_operations_form_the_point_group_and_map_the_molecule_onto_itself(name):
    atoms = molecule(name)
    operations = symmetry_operations(atoms.positions, atoms.numbers)
    order = GROUPS[name][0]
    if name == "CO2":  # the linear stand-in: three generators of D4h
        assert len(operations) == 3
    else:
        assert len(operations) + 1 == order
    for rotation, permutation in operations:
        np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-10)
        assert np.all(atoms.numbers[permutation] == atoms.numbers)
    assert is_symmetric(atoms.positions, operations)
    rotated = atoms.copy()
    rotated.rotate(37, (1, 2, 3))
    rotated.translate((0.3, -2.0, 1.0))
    found = symmetry_operations(rotated.positions, rotated.numbers)
    assert len(found) == len(operations)  # the group does not depend on the frame


@pytest.mark.parametrize("name", GROUPS)
def test_the_kept_displacements_number_as_the_character_table_says(name):
    atoms = molecule(name)
    operations = symmetry_operations(atoms.positions, atoms.numbers)
    breaking = symmetry_breaking_basis(operations, len(atoms))  # (3n, b)
    np.testing.assert_allclose(breaking.T @ breaking, np.eye(breaking.shape[1]), atol=1e-10)
    assert 3 * len(atoms) - breaking.shape[1] == GROUPS[name][1]


def test_the_gradient_at_a_symmetric_configuration_has_no_breaking_part():
    atoms = molecule("CH3OH")
    atoms.calc = get_calculator("gfn2")
    forces = atoms.get_forces().ravel()  # far from zero: g2's geometry is not GFN2's
    operations = symmetry_operations(atoms.positions, atoms.numbers)
    breaking = symmetry_breaking_basis(operations, len(atoms))
    assert np.linalg.norm(forces) > 0.1
    assert np.linalg.norm(breaking.T @ forces) < 1e-4 * np.linalg.norm(forces)
    kept = np.linalg.svd(np.eye(3 * len(atoms)) - breaking @ breaking.T)[0][:, :11]  # (3n, 11)
    along_kept = atoms.positions + 0.05 * (kept @ np.ones(11)).reshape(-1, 3)
    along_breaking = atoms.positions + 0.05 * breaking[:, 0].reshape(-1, 3)
    assert is_symmetric(along_kept, operations)
    assert not is_symmetric(along_breaking, operations)


def test_a_configuration_turned_as_a_whole_keeps_its_symmetry():
    atoms = molecule("C2H6")
    operations = symmetry_operations(atoms.positions, atoms.numbers)
    turned = atoms.copy()
    turned.rotate(23, (0.3, 1, 0))
    turned.translate((1.0, 0.0, -0.5))
    assert is_symmetric(turned.positions, operations)
    bent = turned.positions.copy()
    bent[2] += 0.01  # one hydrogen moved
    assert not is_symmetric(bent, operations)


def test_a_distorted_molecule_has_no_symmetry():
    atoms = molecule("C6H6")
    atoms.rattle(0.01, seed=3)
    assert symmetry_operations(atoms.positions, atoms.numbers) == []
    assert symmetry_breaking_basis([], len(atoms)).shape == (3 * len(atoms), 0)


def test_held_symmetry_gives_the_softest_breaking_mode_only_where_every_configuration_keeps_it():
    atoms = symmetric_saddle("C2H6", 6)
    x = atoms.positions
    free = np.ones(x.shape, dtype=bool)
    basis = internal_basis(x, free)  # (3n, k)
    operations = symmetry_operations(x, atoms.numbers)
    breaking = symmetry_breaking_basis(operations, len(atoms))
    soft = basis @ (basis.T @ breaking[:, 4])
    soft /= np.linalg.norm(soft)
    hessian = np.eye(3 * len(atoms)) - 1.5 * np.outer(soft, soft)  # (3n, 3n)

    def projected(directions):  # (3n, c) -> (c, c)
        return directions.T @ hessian @ directions

    stretched = x.copy()
    stretched[:, 2] *= 1.05  # along the C-C axis: keeps D3h
    held = held_symmetry(np.array([stretched, x]), atoms.numbers, projected, basis)
    assert held.order == 12
    assert held.breaking == 15  # D3h: 21 breaking displacements, the 6 rigid motions among them
    assert held.curvature == pytest.approx(-0.5)
    assert abs(held.mode @ soft) == pytest.approx(1.0)
    rattled = x + 0.01 * np.random.default_rng(0).normal(size=x.shape)
    assert held_symmetry(np.array([rattled, x]), atoms.numbers, projected, basis) is None


def test_the_symmetric_starts_keep_their_point_group_and_the_near_symmetric_ones_none():
    """The starts of the symmetric-start comparison are what it says they are: the
    eclipsed rotors D3h, C3v and D3h (11, 5 and 11 operations besides the identity),
    a methyl turned about its own axis keeps a mirror, turned about its bond nothing."""
    from asebo.benchmarks import _symmetric_starts as starts

    def others(atoms):
        return len(symmetry_operations(atoms.positions, atoms.numbers))

    saddles = [starts.symmetric_saddle(*made) for made in starts.SYMMETRIC_SADDLES.values()]
    assert [others(atoms) for atoms in saddles] == [11, 5, 11]
    for name in starts.SYMMETRIC_METHYL_ROTORS:
        assert others(starts.methyl_turned_about_its_axis(name)) >= 1, name
    for name in starts.NEAR_SYMMETRIC_SADDLES:
        assert others(starts.methyl_turned(name)) == 0, name
        # the methyl hydrogens moved, the rest of the molecule did not
        moved = np.abs(starts.methyl_turned(name).positions - molecule(name).positions)
        assert np.count_nonzero(moved.max(axis=1) > 1e-9) == 3, name


def test_a_probe_leads_an_eclipsed_rotor_to_the_staggered_minimum():
    from ase.optimize import LBFGS

    staggered = molecule("C2H6")
    staggered.calc = get_calculator("gfn2")
    LBFGS(staggered, logfile=None).run(fmax=0.005)
    atoms = symmetric_saddle("C2H6", 6)
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    log = io.StringIO()
    optimizer = BOOptimizer(atoms, logfile=log, special_cases=SpecialCases(symmetry_probe=0.1))
    assert optimizer.run(fmax=0.05)
    assert "probe" in optimizer.reasons
    assert atoms.get_potential_energy() - staggered.get_potential_energy() < 0.005
    assert "a probe 0.1 Å along the softest" in log.getvalue()


def test_without_the_probe_the_log_says_the_breaking_modes_keep_the_prior():
    atoms = symmetric_saddle("C2H6", 6)
    atoms.calc = get_calculator("gfn2")
    log = io.StringIO()
    optimizer = BOOptimizer(atoms, logfile=log)
    assert optimizer.run(fmax=0.05)
    assert "probe" not in optimizer.reasons
    assert "keep a symmetry of order 12" in log.getvalue()


def test_a_resumed_run_does_not_probe_again(tmp_path):
    restart = tmp_path / "ethane.json"
    probe = SpecialCases(symmetry_probe=0.1)
    atoms = symmetric_saddle("C2H6", 6)
    atoms.calc = get_calculator("gfn2")
    assert BOOptimizer(atoms, logfile=None, restart=restart, special_cases=probe).run(fmax=0.05)
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    resumed = BOOptimizer(atoms, logfile=None, restart=restart, special_cases=probe)
    assert resumed.run(fmax=0.05)
    assert resumed.reasons.count("probe") == 1
    assert atoms.calc.ncalls == 0
