"""Real GPAW (PBE) calculations through the preset: H2O in a box, bulk Al, an Al slab
and a band of an Al adatom hopping on it.

For H2O the grid spacing is h = 0.2 Å: at h = 0.25 Å the egg-box effect of GPAW's
oxygen PAW setup moves the energy of H2O by about 0.1 eV under sub-grid
translations, too rough for a force check or a relaxation. The periodic tests use
LCAO with the single-zeta part of the dzp basis on a coarse grid (h = 0.25 Å), where
the forces are still the exact gradient of the discretised free energy; at h = 0.3 Å
the H setup gives forces of 17 eV/Å on a relaxed H on Al(100).
"""

from functools import partial

import numpy as np
import pytest
from ase.build import bulk, fcc100, molecule
from ase.constraints import FixAtoms
from ase.optimize import BFGS

from calculators import CountingCalculator, get_calculator

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

    reference = perturbed_water()
    reference.calc = gpaw_calculator
    BFGS(reference, logfile=None).run(fmax=0.05, steps=30)
    atoms = perturbed_water()
    atoms.calc = CountingCalculator(gpaw_calculator)
    optimizer = BOOptimizer(atoms, logfile=None)
    # the default prior under GPAW: GFN2-xTB, whose difference to PBE the GP learns
    assert optimizer.prior.calculator.parameters["method"] == "GFN2-xTB"
    assert optimizer.run(fmax=0.05, steps=30)
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


# periodic atoms

FAST_LCAO = "gpaw:basis=sz(dzp),h=0.25"


def free_energy(atoms, calc):
    atoms = atoms.copy()
    atoms.calc = calc
    return atoms.get_potential_energy(force_consistent=True)


def test_periodic_forces_are_minus_the_gradient_of_the_free_energy():
    atoms = bulk("Al", "fcc", a=4.05) * (2, 1, 1)
    atoms.positions[0] += [0.1, -0.05, 0.07]
    calc = get_calculator(FAST_LCAO, kpts=(2, 3, 3))
    atoms.calc = CountingCalculator(calc)
    forces = atoms.get_forces()  # (2, 3)
    assert calc.kpts_ == (2, 3, 3)
    # with smearing, the free energy is the one the forces belong to
    assert atoms.get_potential_energy(force_consistent=True) == calc.get_property(
        "free_energy", atoms
    )
    assert atoms.get_potential_energy() != pytest.approx(
        atoms.get_potential_energy(force_consistent=True), abs=1e-4
    )
    step = 0.01  # Å
    shifted = []
    for sign in (1, -1):
        moved = atoms.copy()
        moved.positions[0, 0] += sign * step
        shifted.append(free_energy(moved, calc))
    # |F| ~ 0.2 eV/Å; the difference of the two was below 5e-4 eV/Å when measured
    assert forces[0, 0] == pytest.approx(-(shifted[0] - shifted[1]) / (2 * step), abs=3e-3)
    # no net force on a periodic cell but the grid's egg-box effect (7 meV/Å measured)
    np.testing.assert_allclose(forces.sum(axis=0), 0.0, atol=0.02)


def test_plane_wave_stress_is_the_strain_derivative_of_the_free_energy():
    atoms = bulk("Al", "fcc", a=4.0)
    calc = get_calculator("gpaw:mode=pw,ecut=300,kpts=4")
    atoms.calc = calc
    stress = atoms.get_stress(voigt=False)  # (3, 3) eV/Å³
    assert calc.kpts_ == (4, 4, 4)
    strain = 0.005
    shifted = []
    for sign in (1, -1):
        deformation = np.eye(3)
        deformation[0, 0] += sign * strain
        strained = atoms.copy()
        strained.set_cell(atoms.cell @ deformation, scale_atoms=True)
        shifted.append(free_energy(strained, calc))
    # the k-point grid is kept for the strained cells, so the energy is smooth in them
    assert calc.kpts_ == (4, 4, 4)
    derivative = (shifted[0] - shifted[1]) / (2 * strain * atoms.get_volume())
    assert abs(stress[0, 0]) > 0.01  # a = 4.0 Å is compressed (PBE: 4.04 Å)
    assert stress[0, 0] == pytest.approx(derivative, abs=3e-4)


def hydrogen_on_aluminium_100():
    """Two layers of Al(100) 1x1, the bottom one fixed, H near a bridge site."""
    slab = fcc100("Al", (1, 1, 2), a=4.05, vacuum=3.0)
    slab.append("H")
    top = slab.positions[1]
    slab.positions[-1] = top + [slab.cell[0, 0] / 2 + 0.1, 0.05, 1.2]
    slab.set_constraint(FixAtoms(indices=[atom.index for atom in slab if atom.tag == 2]))
    return slab


@pytest.mark.slow
def test_booptimizer_relaxes_an_adatom_on_a_slab():
    from asebo import BOOptimizer

    atoms = hydrogen_on_aluminium_100()
    fixed = atoms.positions[0].copy()
    calc = get_calculator(FAST_LCAO, kpts=3)
    atoms.calc = CountingCalculator(calc)
    start = atoms.get_potential_energy(force_consistent=True)
    fmax = 0.1
    assert BOOptimizer(atoms, logfile=None).run(fmax=fmax, steps=25)
    assert calc.kpts_ == (3, 3, 1)
    assert np.linalg.norm(atoms.get_forces(), axis=1).max() <= fmax
    assert atoms.get_potential_energy(force_consistent=True) < start
    np.testing.assert_array_equal(atoms.positions[0], fixed)
    assert atoms.cell[2, 2] == pytest.approx(hydrogen_on_aluminium_100().cell[2, 2])


# The hop of the slow band test: an Al adatom on a held Al(100) slab, hollow to
# hollow, in a 2x1 surface cell (rows of adatoms along y, half the benchmark's 2x2
# cell) with 2x4x1 k-points, about 7 s a call on one core.
BAND_SIZE = (2, 1)
BAND_KPTS = (2, 4, 1)
BAND_FMAX = 0.05  # eV/Å
# Both bands end with their climbing image within BAND_FMAX of one saddle point. A
# force f left along a mode of curvature k moves the energy by f**2 / (2 |k|): 1-3 meV
# for 0.5-1 eV/Å² at 0.05 eV/Å; 0.01 eV leaves room for the other images' residual.
BARRIER_TOLERANCE = 0.01  # eV


def computed_band_forces(neb):
    """ASE's NEB forces (moving images, atoms, 3) on the band's computed results."""
    calls = [image.calc.calls for image in neb.images[1:-1]]
    forces = neb.get_forces().reshape(len(neb.images) - 2, len(neb.images[0]), 3)
    assert [image.calc.calls for image in neb.images[1:-1]] == calls, "a new call"
    return forces


def barrier(neb):
    """The highest image above the first endpoint (eV)."""
    energies = [image.get_potential_energy() for image in neb.images]
    return max(energies) - energies[0]


@pytest.mark.slow
def test_boneb_reaches_the_bfgs_barrier_of_a_gpaw_hop_in_fewer_calls():
    from asebo import BONEB
    from asebo.benchmarks.neb import al_on_al100, band, idpp_band, lcao_gpaw

    make = partial(lcao_gpaw, kpts=BAND_KPTS)
    initial, final, moving = al_on_al100(size=BAND_SIZE, make=make)
    positions = idpp_band(initial, final, moving)  # (moving + 2, 5, 3)
    reference = band(initial, final, positions, make)
    assert BFGS(reference, logfile=None).run(fmax=BAND_FMAX, steps=150)
    bfgs_calls = sum(image.calc.calls for image in reference.images[1:-1])
    neb = band(initial, final, positions, make)
    assert BONEB(neb, logfile=None).run(fmax=BAND_FMAX, steps=bfgs_calls - 1)
    forces = computed_band_forces(neb)  # (moving, 5, 3)
    assert np.linalg.norm(forces, axis=2).max() < BAND_FMAX
    assert sum(image.calc.calls for image in neb.images[1:-1]) < bfgs_calls
    climbing = neb.images[neb.imax]  # set by get_forces: the highest image
    assert climbing.get_potential_energy() - final.get_potential_energy() > 0.0
    assert barrier(neb) > 0.0
    assert barrier(neb) == pytest.approx(barrier(reference), abs=BARRIER_TOLERANCE)


MOLECULE_GPAW = "gpaw:mode=lcao,basis=dzp,h=0.2,vacuum=4"


def test_one_box_gives_the_images_of_a_band_one_energy_surface():
    from ase.io import read

    from asebo.benchmarks.neb import REACTIONS
    from calculators.box import band_box

    frames = read(REACTIONS / "02_hcn.xyz", index=":")  # HCN, the guess, HNC
    target = frames[1]
    box = band_box([frame.positions for frame in frames])  # (3,)
    by_own_box, by_band_box = [], []
    for first in frames:  # a calculator per image, first called at its own image
        for energies, options in ((by_own_box, {}), (by_band_box, {"box": box})):
            calculator = get_calculator(MOLECULE_GPAW, **options)
            calculator.get_potential_energy(first)
            energies.append(calculator.get_potential_energy(target))
    assert np.ptp(by_own_box) > 0.01  # eV: each box its own surface
    assert np.ptp(by_band_box) < 1e-4  # eV: one box, one surface (SCF tolerance)


@pytest.mark.slow
def test_a_gpaw_molecule_band_takes_a_gfn2_prior_and_reaches_the_bfgs_barrier_in_fewer_calls():
    pytest.importorskip("tblite")
    from asebo import BONEB
    from asebo.benchmarks.neb import REACTIONS, band, idpp_band, reaction
    from asebo.model.priors import CalculatorPrior
    from calculators.box import band_box

    relax = partial(get_calculator, MOLECULE_GPAW)
    initial, final, moving = reaction(REACTIONS / "11_h2co.xyz", relax)  # H2CO -> H2 + CO
    positions = idpp_band(initial, final, moving)  # (moving + 2, 4, 3)
    make = partial(get_calculator, MOLECULE_GPAW, box=band_box(positions))  # one box
    reference = band(initial, final, positions, make)
    assert BFGS(reference, logfile=None).run(fmax=BAND_FMAX, steps=100)
    bfgs_calls = sum(image.calc.calls for image in reference.images[1:-1])
    neb = band(initial, final, positions, make)
    optimizer = BONEB(neb, logfile=None)
    assert isinstance(optimizer.prior, CalculatorPrior)  # GFN2-xTB under GPAW
    assert optimizer.run(fmax=BAND_FMAX, steps=bfgs_calls // 2)
    assert np.linalg.norm(computed_band_forces(neb), axis=2).max() < BAND_FMAX
    assert barrier(neb) == pytest.approx(barrier(reference), abs=2 * BARRIER_TOLERANCE)
