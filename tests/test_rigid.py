"""The rigid-motion part of forces (asebo.optimize.rigid) and BOOptimizer's rigid step."""

import io

import numpy as np
import pytest
from ase.build import molecule
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.lj import LennardJones
from ase.constraints import FixAtoms
from ase.optimize import BFGS

from asebo import BOOptimizer
from asebo.optimize.rigid import moved_rigidly, rigid_modes, rigid_motion, rigid_part, rigid_step
from asebo.optimize.settings import SpecialCases
from calculators import get_calculator


def random_configuration(n=6, seed=0):
    return np.random.default_rng(seed).normal(scale=1.5, size=(n, 3))


def shape_only(positions, forces):
    """``forces`` with their projection on the rigid modes removed, by QR."""
    basis, _ = np.linalg.qr(rigid_modes(positions))
    flat = forces.ravel()
    return (flat - basis @ (basis.T @ flat)).reshape(forces.shape)


def test_rigid_motion_recovers_translation_and_rotation_of_a_rigid_field():
    positions = random_configuration()
    rng = np.random.default_rng(1)
    velocity, angular = rng.normal(size=3), rng.normal(size=3)
    rigid = velocity + np.cross(angular, positions - positions.mean(axis=0))  # (n, 3)
    forces = rigid + shape_only(positions, rng.normal(size=positions.shape))
    found_velocity, found_angular = rigid_motion(positions, forces)
    np.testing.assert_allclose(found_velocity, velocity, atol=1e-12)
    np.testing.assert_allclose(found_angular, angular, atol=1e-12)
    np.testing.assert_allclose(rigid_part(positions, forces), rigid, atol=1e-12)


def test_forces_of_an_invariant_energy_have_no_rigid_part():
    atoms = molecule("CH3CH2OH")
    atoms.positions += np.random.default_rng(2).normal(scale=0.1, size=atoms.positions.shape)
    atoms.calc = LennardJones(sigma=1.0, epsilon=0.01, rc=6.0)
    forces = atoms.get_forces()
    assert np.abs(forces).max() > 1e-2
    assert np.abs(rigid_part(atoms.positions, forces)).max() < 1e-12 * np.abs(forces).max() + 1e-14


def test_linear_molecule_gets_no_turn_about_its_axis():
    positions = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.2], [0.0, 0.0, 2.4]])
    forces = np.array([[0.1, 0.0, 0.3], [0.0, 0.2, 0.0], [0.0, 0.0, -0.1]])
    velocity, angular = rigid_motion(positions, forces)
    assert np.isfinite(angular).all()
    assert abs(angular[2]) < 1e-12
    np.testing.assert_allclose(velocity, forces.mean(axis=0), atol=1e-12)


def egg_box(positions, amplitude=0.003, spacing=0.2):
    """Energy and forces (n, 3) of a periodic field on every coordinate, a grid's ripple."""
    phase = 2.0 * np.pi * positions / spacing
    energy = amplitude * np.cos(phase).sum()
    forces = amplitude * 2.0 * np.pi / spacing * np.sin(phase)
    return energy, forces


def test_rigid_step_keeps_the_shape_and_descends_to_first_order():
    positions = random_configuration(seed=3)
    _, forces = egg_box(positions)
    rigid = rigid_part(positions, forces)
    for length in (1e-3, 1e-4):
        translation, rotation = rigid_step(positions, forces, length)
        moved = moved_rigidly(positions, translation, rotation)
        pairwise = np.linalg.norm(positions[:, None] - positions[None], axis=-1)
        moved_pairwise = np.linalg.norm(moved[:, None] - moved[None], axis=-1)
        np.testing.assert_allclose(moved_pairwise, pairwise, atol=1e-12)
        assert np.linalg.norm(moved - positions, axis=1).max() == pytest.approx(
            length, rel=10 * length
        )
        scale = length / np.linalg.norm(rigid, axis=1).max()
        change = egg_box(moved)[0] - egg_box(positions)[0]
        assert change == pytest.approx(-scale * (rigid**2).sum(), rel=100 * length)


def test_rigid_step_without_net_force_or_torque_is_an_error():
    positions = random_configuration(seed=4)
    forces = shape_only(positions, np.random.default_rng(5).normal(size=positions.shape))
    with pytest.raises(ValueError, match="no net force or torque"):
        rigid_step(positions, forces, 0.02)


class GFN2InEggBox(Calculator):
    """GFN2-xTB plus :func:`egg_box`: an energy that depends a little on where the
    molecule sits and how it is turned, as on a real-space grid."""

    implemented_properties = ("energy", "forces")

    def __init__(self, **ripple):
        super().__init__()
        self.gfn2 = get_calculator("gfn2")
        self.ripple = ripple  # egg_box's amplitude (eV) and spacing (Å), if given

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        molecule_copy = self.atoms.copy()
        molecule_copy.calc = self.gfn2
        ripple, ripple_forces = egg_box(self.atoms.positions, **self.ripple)
        self.results = {
            "energy": molecule_copy.get_potential_energy() + ripple,
            "forces": molecule_copy.get_forces() + ripple_forces,
        }


def water_at_gfn2_minimum(**ripple):
    atoms = molecule("H2O")
    atoms.positions += [0.03, -0.07, 0.05]
    atoms.calc = get_calculator("gfn2")
    BFGS(atoms, logfile=None).run(fmax=1e-4, steps=200)
    atoms.calc = GFN2InEggBox(**ripple)
    return atoms


def fmax_between_shape_and_total(atoms):
    """An ``fmax`` that the forces meet without their rigid part but not with it."""
    forces = atoms.get_forces()
    shape = np.linalg.norm(forces - rigid_part(atoms.positions, forces), axis=1).max()
    total = np.linalg.norm(forces, axis=1).max()
    assert shape < 0.8 * total
    return 0.5 * (shape + total)


def test_optimizer_moves_a_converged_shape_along_its_net_force_and_torque():
    atoms = water_at_gfn2_minimum()
    fmax = fmax_between_shape_and_total(atoms)
    start, forces = atoms.get_positions(), atoms.get_forces()
    log = io.StringIO()
    opt = BOOptimizer(atoms, logfile=log)
    opt.run(fmax=fmax, steps=1)
    assert opt.reasons == ["rigid_move"]
    assert "moves rigidly along them" in log.getvalue()  # the note says so
    step = atoms.get_positions() - start
    rigid_step_taken, rigid_forces = rigid_part(start, step), rigid_part(start, forces)
    cosine = (rigid_step_taken * rigid_forces).sum() / (
        np.linalg.norm(rigid_step_taken) * np.linalg.norm(rigid_forces)
    )
    assert cosine > 0.99
    assert np.linalg.norm(rigid_step_taken, axis=1).max() > 0.01


def test_optimizer_converges_where_only_the_ripple_keeps_it_from_converging():
    atoms = water_at_gfn2_minimum()
    fmax = fmax_between_shape_and_total(atoms)
    assert BOOptimizer(atoms, logfile=None).run(fmax=fmax, steps=10)


def test_a_rigid_step_that_overshoots_a_short_ripple_is_halved():
    """On a ripple of period 0.05 Å the full rigid step of 0.02 Å overshoots and finds
    no lower energy; the next one from the same configuration is half as long and the
    run converges. Repeated at full length (``rigid_shrink = 1``), the step overshoots
    again and the run needs more calls."""
    ripple = {"amplitude": 0.0005, "spacing": 0.05}
    halving, calls = SpecialCases().rigid_shrink, {}
    for shrink in (halving, 1.0):
        atoms = water_at_gfn2_minimum(**ripple)
        fmax = fmax_between_shape_and_total(atoms)
        log = io.StringIO()
        opt = BOOptimizer(atoms, logfile=log, special_cases=SpecialCases(rigid_shrink=shrink))
        assert opt.run(fmax=fmax, steps=12)
        calls[shrink] = len(opt.energies)
        if shrink < 1:
            assert opt.reasons[0] == "rigid_move" and opt.reasons.count("rigid_move") >= 2
            assert "rigidly along them, 0.01 Å at most" in log.getvalue()
    assert calls[halving] <= 6 < calls[1.0]


def test_no_rigid_step_when_an_atom_is_fixed():
    atoms = water_at_gfn2_minimum()
    fmax = fmax_between_shape_and_total(atoms)
    atoms.set_constraint(FixAtoms(indices=[0]))
    log = io.StringIO()
    opt = BOOptimizer(atoms, logfile=log)
    opt.run(fmax=fmax, steps=1)
    assert "rigid_move" not in opt.reasons
    assert "moves rigidly" not in log.getvalue()
