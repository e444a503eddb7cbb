"""A linear molecule, relaxed and so bent by a trace, has five rigid motions: its
model vibrations keep both bends."""

import numpy as np
import pytest
from ase.build import molecule
from ase.vibrations import Vibrations

from asebo import BOOptimizer
from asebo.optimize.model_hessian import internal_basis, mass_weighted_internal_basis
from asebo.optimize.rigid import is_linear, rigid_modes, rigid_part
from calculators import get_calculator


def bent_co2(degrees):
    """CO2 along z, both oxygens moved across the line by the bend ``degrees``."""
    half = np.radians(180.0 - degrees) / 2.0
    return np.array(
        [
            [0.0, 0.0, 0.0],
            [1.16 * np.cos(half), 0.0, 1.16 * np.sin(half)],
            [1.16 * np.cos(half), 0.0, -1.16 * np.sin(half)],
        ]
    )


@pytest.mark.parametrize(("degrees", "rigid"), [(0.0, 5), (0.2, 5), (1.0, 5), (10.0, 6)])
def test_a_nearly_straight_molecule_has_five_rigid_motions_and_a_bent_one_six(degrees, rigid):
    positions = bent_co2(degrees)
    masses = molecule("CO2").get_masses()
    free = np.ones(positions.shape, dtype=bool)
    assert is_linear(positions) == (rigid == 5)
    assert rigid_modes(positions).shape == (9, rigid)
    assert internal_basis(positions, free).shape == (9, 9 - rigid)
    assert mass_weighted_internal_basis(positions, masses).shape == (9, 9 - rigid)


def test_a_force_across_a_nearly_straight_molecule_is_no_torque():
    """The bend of a CO2 bent by 0.2° across its plane looks like a turn about its
    line; it bends the molecule and is no rigid part of the forces."""
    positions = bent_co2(0.2)
    bend = np.array([[0.0, -2.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])  # no net force
    assert np.abs(rigid_part(positions, bend)).max() < 1e-12
    turn = np.cross([1.0, 0.0, 0.0], positions - positions.mean(axis=0))
    np.testing.assert_allclose(rigid_part(positions, turn), turn, atol=1e-12)


def frequencies(name, tmp_path):
    """The model's vibrations of ``name`` relaxed with GFN2-xTB and the finite
    differences' there, cm^-1, the rigid motions left out (|f| below 50 cm^-1)."""
    atoms = molecule(name)
    atoms.rattle(0.02, seed=0)
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, logfile=None)
    assert optimizer.run(fmax=0.01, steps=50)
    model = optimizer.vibrations().get_frequencies()
    reference = Vibrations(atoms, name=str(tmp_path / name), delta=0.005)
    reference.run()
    target = reference.get_frequencies()
    return [f[np.abs(f) > 50.0] for f in (model, target)]


@pytest.mark.parametrize(("name", "modes"), [("HCN", 4), ("C2H2", 7), ("CO2", 4), ("H2O", 3)])
def test_the_model_keeps_every_vibration_of_a_relaxed_molecule(name, modes, tmp_path):
    model, target = frequencies(name, tmp_path)
    assert len(target) == modes
    assert len(model) == modes
    assert np.abs(model.imag).max() == 0.0  # a minimum: no imaginary mode


@pytest.mark.parametrize(("name", "within"), [("HCN", 0.03), ("C2H2", 0.03), ("CO2", 0.08)])
def test_the_zero_point_energy_of_a_linear_molecule_counts_both_bends(name, within, tmp_path):
    model, target = frequencies(name, tmp_path)
    assert np.abs(model).sum() == pytest.approx(np.abs(target).sum(), rel=within)
