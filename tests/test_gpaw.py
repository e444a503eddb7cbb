"""A real GPAW (PBE, finite-difference grid) calculation on H2O through the preset.

The grid spacing is h = 0.2 Å: at h = 0.25 Å the egg-box effect of GPAW's
oxygen PAW setup moves the energy of H2O by about 0.1 eV under sub-grid
translations, too rough for a force check or a relaxation.
"""

import numpy as np
import pytest
from ase.build import molecule
from ase.optimize import BFGS

from calculators import get_calculator

pytest.importorskip("gpaw")
pytest.importorskip("gpaw_data")

pytestmark = pytest.mark.gpaw

# PBE equilibrium of H2O: r(OH) = 0.970 Å, angle HOH = 104.2° (basis-set limit).
PBE_BOND = 0.970  # Å
PBE_ANGLE = 104.2  # degrees
# Tolerances. Bending force constant ~4.4 eV/rad², so a residual force of
# fmax = 0.05 eV/Å on an H (lever 0.97 Å) leaves up to ~0.6° in the angle;
# plus grid error at h = 0.2 Å, about 0.5°. The stretch (~50 eV/Å²) leaves
# ~0.001 Å; grid error, a few mÅ.
BOND_TOLERANCE = 0.01  # Å
ANGLE_TOLERANCE = 1.5  # degrees


@pytest.fixture(scope="module")
def gpaw_calculator():
    return get_calculator("gpaw", mode="fd", h=0.2, vacuum=3.0)


def perturbed_water():
    atoms = molecule("H2O")
    atoms.rattle(stdev=0.05, seed=1)
    atoms.positions[1] *= 1.05
    return atoms


def energy_derivative(atoms, calc, step=0.01):
    """Central difference (eV/Å) of the energy along the y coordinate of atom 1."""
    shifted = []
    for sign in (1, -1):
        moved = atoms.copy()
        moved.positions[1, 1] += sign * step
        moved.calc = calc
        shifted.append(moved.get_potential_energy())
    return (shifted[0] - shifted[1]) / (2 * step)


def test_energy_is_finite_and_forces_match_finite_difference(gpaw_calculator):
    atoms = perturbed_water()
    atoms.calc = gpaw_calculator
    energy = atoms.get_potential_energy()
    forces = atoms.get_forces()  # (3, 3)
    assert np.isfinite(energy)
    assert np.isfinite(forces).all()
    # SCF convergence and the grid leave a few 0.01 eV/Å; |F| here is ~4 eV/Å
    assert forces[1, 1] == pytest.approx(-energy_derivative(atoms, gpaw_calculator), abs=0.03)


@pytest.mark.slow
def test_bfgs_relaxation_reaches_the_pbe_geometry(gpaw_calculator):
    atoms = perturbed_water()
    atoms.calc = gpaw_calculator
    optimizer = BFGS(atoms, logfile=None)
    assert optimizer.run(fmax=0.05, steps=30)
    for hydrogen in (1, 2):
        assert atoms.get_distance(0, hydrogen) == pytest.approx(PBE_BOND, abs=BOND_TOLERANCE)
    assert atoms.get_angle(1, 0, 2) == pytest.approx(PBE_ANGLE, abs=ANGLE_TOLERANCE)


@pytest.mark.slow
def test_booptimizer_with_gpaw_reaches_the_bfgs_minimum(gpaw_calculator):
    from asebo import BOOptimizer
    from calculators import CountingCalculator

    reference = perturbed_water()
    reference.calc = gpaw_calculator
    BFGS(reference, logfile=None).run(fmax=0.05, steps=30)
    atoms = perturbed_water()
    atoms.calc = CountingCalculator(gpaw_calculator)
    assert BOOptimizer(atoms, logfile=None).run(fmax=0.05, steps=30)
    # both stop within fmax = 0.05 eV/Å of one minimum: energies agree to a few meV
    assert atoms.get_potential_energy() == pytest.approx(
        reference.get_potential_energy(), abs=0.005
    )
    for hydrogen in (1, 2):
        assert atoms.get_distance(0, hydrogen) == pytest.approx(
            reference.get_distance(0, hydrogen), abs=BOND_TOLERANCE
        )
    assert atoms.get_angle(1, 0, 2) == pytest.approx(
        reference.get_angle(1, 0, 2), abs=ANGLE_TOLERANCE
    )


@pytest.mark.slow
def test_aligned_box_makes_gpaw_invariant_under_rotation_without_torque():
    from scipy.spatial.transform import Rotation

    calc = get_calculator("gpaw", mode="fd", h=0.2, vacuum=3.0, align=True)
    atoms = perturbed_water()
    atoms.calc = calc
    energy, forces = atoms.get_potential_energy(), atoms.get_forces()  # (3, 3)
    rotation = Rotation.from_rotvec([0.4, -0.3, 0.9]).as_matrix()
    turned = atoms.copy()
    turned.positions = atoms.positions @ rotation.T + [0.3, 0.1, -0.2]
    turned.calc = calc
    # the turned copy is aligned back onto the first: GPAW sees the same positions
    assert turned.get_potential_energy() == pytest.approx(energy, abs=1e-6)
    np.testing.assert_allclose(turned.get_forces(), forces @ rotation.T, atol=1e-4)
    centred = atoms.positions - atoms.positions.mean(axis=0)
    np.testing.assert_allclose(np.cross(centred, forces).sum(axis=0), 0.0, atol=1e-10)
    assert forces[1, 1] == pytest.approx(-energy_derivative(atoms, calc), abs=0.03)
