"""The Lindh model prior: forces, closed-form force constants, invariances, defaults."""

import numpy as np
import pytest
from ase import Atoms
from ase.build import molecule
from ase.calculators.lj import LennardJones
from ase.optimize import BFGS
from ase.units import Bohr, Hartree
from scipy.spatial.transform import Rotation

from asebo.model.internals import TORSION_FADE
from asebo.model.lindh import LindhModel, lindh_weights
from asebo.model.periodic import RecentredSprings
from asebo.model.priors import RecentredLindh
from asebo.optimize.optimizer import BOOptimizer
from asebo.optimize.representations import InternalCoordinates
from calculators import get_calculator


def numerical_forces(model, positions, h=1e-5):
    forces = np.zeros_like(positions)
    for index in np.ndindex(positions.shape):
        up, down = positions.copy(), positions.copy()
        up[index] += h
        down[index] -= h
        forces[index] = -(model.energy_and_forces(up)[0] - model.energy_and_forces(down)[0]) / (
            2 * h
        )
    return forces


@pytest.mark.parametrize(
    "name", ["CH3CH2OH", "C2H2", "SiH4", "CH3COCH3", "C6H6", "H2O2", "C3H4_C3v"]
)  # benzene planar, propyne straight
def test_forces_are_minus_the_gradient(name):
    atoms = molecule(name)
    model = LindhModel(atoms.positions, atoms.numbers)
    moved = atoms.positions + 0.08 * np.random.default_rng(1).normal(size=atoms.positions.shape)
    energy, forces = model.energy_and_forces(moved)
    assert energy > 0
    np.testing.assert_allclose(forces, numerical_forces(model, moved), atol=1e-6)


def test_a_batch_of_configurations_gives_each_ones_energy_and_forces():
    atoms = molecule("CH3CH2OH")
    model = LindhModel(atoms.positions, atoms.numbers, out_of_plane_constant=0.1)
    rng = np.random.default_rng(5)
    batch = atoms.positions + 0.1 * rng.normal(size=(4, *atoms.positions.shape))  # (4, n, 3)
    energies, gradients = model.energies_and_gradients(batch)
    assert energies.shape == (4,) and gradients.shape == batch.shape
    for configuration, energy, gradient in zip(batch, energies, gradients):
        alone, forces = model.energy_and_forces(configuration)
        assert energy == pytest.approx(alone, rel=1e-13)
        np.testing.assert_allclose(gradient, -forces, atol=1e-12)
        np.testing.assert_allclose(-gradient, numerical_forces(model, configuration), atol=1e-6)


def test_minimum_at_the_reference_and_invariant_to_rigid_motion():
    atoms = molecule("CH3CH2OH")
    model = LindhModel(atoms.positions, atoms.numbers)
    energy, forces = model.energy_and_forces(atoms.positions)
    assert energy == pytest.approx(0.0, abs=1e-20)
    np.testing.assert_allclose(forces, 0.0, atol=1e-12)
    moved = atoms.positions + 0.1 * np.random.default_rng(2).normal(size=atoms.positions.shape)
    rotation = Rotation.from_euler("xyz", [0.3, -1.1, 2.0]).as_matrix()
    energy, forces = model.energy_and_forces(moved)
    energy_r, forces_r = model.energy_and_forces(moved @ rotation.T + [1.0, -2.0, 0.5])
    assert energy_r == pytest.approx(energy, rel=1e-12)
    np.testing.assert_allclose(forces_r, forces @ rotation.T, atol=1e-10)
    np.testing.assert_allclose(forces.sum(axis=0), 0.0, atol=1e-10)  # no net force


PEROXIDE_ANGLE = np.radians(100.0)  # O-O-H


def hydrogen_peroxide(dihedral, oxygen_angle=PEROXIDE_ANGLE):
    """H-O-O-H with O-O 1.45 Å, O-H 0.97 Å, both O-O-H angles ``oxygen_angle`` and
    the dihedral ``dihedral`` (rad); the O-O bond on the z axis."""
    oo, oh = 1.45, 0.97
    along, across = -oh * np.cos(oxygen_angle), oh * np.sin(oxygen_angle)
    return np.array(
        [
            [0, 0, 0],
            [0, 0, oo],
            [across, 0, -along],
            [across * np.cos(dihedral), across * np.sin(dihedral), oo + along],
        ]
    )


def test_torsions_are_the_bonded_chains_and_can_be_left_out():
    positions = hydrogen_peroxide(np.radians(115.0))
    model = LindhModel(positions, [8, 8, 1, 1])
    assert [2, 0, 1, 3] in model.torsions.tolist()  # H-O-O-H about the O-O bond
    assert len(LindhModel(positions, [8, 8, 1, 1], torsion_constant=0).torsions) == 0


@pytest.mark.parametrize("twist", [0.01, 0.4])
def test_torsion_force_constant_is_twice_lindhs(twist):
    # rotating one H about the O-O axis changes the H-O-O-H dihedral alone among the
    # terms above the cutoff: k_tau rho_OH rho_OO rho_OH twist^2 / 2, the default
    # k_tau twice the 0.005 Ha/rad^2 of Lindh et al. (1995)
    numbers, start = [8, 8, 1, 1], np.radians(115.0)
    model = LindhModel(hydrogen_peroxide(start), numbers, cutoff=0.1)
    oo, oh = 1.45 / Bohr, 0.97 / Bohr
    rho_oo = np.exp(0.2800 * (2.87**2 - oo**2))
    rho_oh = np.exp(0.3949 * (2.10**2 - oh**2))
    energy, _ = model.energy_and_forces(hydrogen_peroxide(start + twist))
    expected = 0.5 * 2 * 0.005 * Hartree * rho_oh**2 * rho_oo * twist**2
    assert energy == pytest.approx(expected, rel=1e-10)


def test_torsion_difference_is_wrapped_across_pi():
    numbers = [8, 8, 1, 1]
    model = LindhModel(hydrogen_peroxide(np.radians(170.0)), numbers, cutoff=0.1)
    across = model.energy_and_forces(hydrogen_peroxide(np.radians(-170.0)))[0]
    direct = model.energy_and_forces(hydrogen_peroxide(np.radians(150.0)))[0]
    assert across == pytest.approx(direct, rel=1e-10)  # both 20 degrees away


@pytest.mark.parametrize("folded", [False, True])
def test_torsion_fades_smoothly_as_a_bend_straightens_or_folds(folded):
    # a dihedral is undefined at a straight bend and at a folded one (as between a
    # bond and a 1-3 pair through the same atom); the fade switches it off at both
    numbers = [8, 8, 1, 1]
    model = LindhModel(hydrogen_peroxide(np.radians(115.0)), numbers)
    full = LindhModel(hydrogen_peroxide(np.radians(115.0)), numbers, torsion_constant=0)
    twisted = np.radians(60.0)
    on, off = TORSION_FADE
    inside, outside = 0.5 * (on + off), 0.5 * (off + np.pi)
    if folded:
        inside, outside = np.pi - inside, np.pi - outside
    # inside the fade: forces still minus the gradient of the energy
    fading = hydrogen_peroxide(twisted, inside)
    np.testing.assert_allclose(
        model.energy_and_forces(fading)[1], numerical_forces(model, fading), atol=1e-6
    )
    assert model.energy_and_forces(fading)[0] > full.energy_and_forces(fading)[0]
    # beyond it: the torsion is off and the forces finite
    for angle in (outside, 0.0 if folded else np.pi):
        ends = hydrogen_peroxide(twisted, angle)
        energy, forces = model.energy_and_forces(ends)
        assert np.isfinite(forces).all()
        assert energy == pytest.approx(full.energy_and_forces(ends)[0], rel=1e-12)


@pytest.mark.parametrize("name", ["H2CO", "C6H6", "CH3CONH2"])
def test_out_of_plane_forces_are_minus_the_gradient(name):
    atoms = molecule(name)
    model = LindhModel(atoms.positions, atoms.numbers, out_of_plane_constant=1.0)
    assert len(model.out_of_plane) > 0
    moved = atoms.positions + 0.08 * np.random.default_rng(4).normal(size=atoms.positions.shape)
    np.testing.assert_allclose(
        model.energy_and_forces(moved)[1], numerical_forces(model, moved), atol=1e-6
    )


def test_out_of_plane_term_makes_a_planar_centre_harmonic():
    # bends alone hold a planar centre to fourth order only: lifting the oxygen of
    # formaldehyde off the plane by 2 eps costs 16 times what eps costs; with the
    # out-of-plane term it costs 4 times, harmonic
    atoms = molecule("H2CO")
    carbon, first, second = atoms.positions[1:]  # oxygen first
    normal = np.cross(first - carbon, second - carbon)
    lift = np.zeros_like(atoms.positions)
    lift[0] = 1e-3 * normal / np.linalg.norm(normal)
    for constant, ratio in ((0.0, 16.0), (1.0, 4.0)):
        model = LindhModel(
            atoms.positions, atoms.numbers, torsion_constant=0, out_of_plane_constant=constant
        )
        small = model.energy_and_forces(atoms.positions + lift)[0]
        large = model.energy_and_forces(atoms.positions + 2 * lift)[0]
        assert large / small == pytest.approx(ratio, rel=1e-2)


def test_stretch_force_constant_is_lindhs():
    # H2 at 0.74 Å: k = 0.45 Ha/bohr² exp(1.0 (1.35² - r²)), r in bohr (Lindh et al. 1995)
    r0, delta = 0.74, 1e-3
    model = LindhModel([[0, 0, 0], [0, 0, r0]], [1, 1])
    expected = 0.45 * Hartree / Bohr**2 * np.exp(1.35**2 - (r0 / Bohr) ** 2)
    energy, _ = model.energy_and_forces(np.array([[0, 0, 0], [0, 0, r0 + delta]]))
    assert energy == pytest.approx(0.5 * expected * delta**2, rel=1e-12)


def test_bend_force_constant_is_lindhs():
    # water: the H-H weight is below the cutoff, so opening the angle at fixed O-H
    # lengths costs k_phi rho_OH^2 delta^2 / 2
    length, angle, delta = 0.96, np.radians(104.5), 0.01

    def water(theta):
        return np.array(
            [[0, 0, 0], [length, 0, 0], [length * np.cos(theta), length * np.sin(theta), 0]]
        )

    model = LindhModel(water(angle), [8, 1, 1])
    assert len(model.stretches) == 2 and len(model.bends) == 1
    rho = lindh_weights(water(angle), [8, 1, 1])[0, 1]
    assert rho == pytest.approx(np.exp(0.3949 * (2.10**2 - (length / Bohr) ** 2)))
    energy, _ = model.energy_and_forces(water(angle + delta))
    assert energy == pytest.approx(0.5 * 0.15 * Hartree * rho**2 * delta**2, rel=1e-10)


@pytest.mark.parametrize("length", [0.96, 1.3])
def test_capped_bends_are_no_stiffer_than_k_phi_and_the_rest_is_kept(length):
    # water's bend weight rho_OH^2: 2.4 at 0.96 Å (capped to 1), 0.28 at 1.3 Å (kept)
    angle, delta = np.radians(104.5), 0.01

    def water(theta, stretch=0.0):
        r = length + stretch
        return np.array([[0, 0, 0], [r, 0, 0], [length * np.cos(theta), length * np.sin(theta), 0]])

    model = LindhModel(water(angle), [8, 1, 1])
    capped = model.with_capped_bends()
    rho = lindh_weights(water(angle), [8, 1, 1])[0, 1]
    k_phi = 0.15 * Hartree
    bent, stretched = water(angle + delta), water(angle, stretch=1e-3)
    assert capped.energy_and_forces(bent)[0] == pytest.approx(
        0.5 * k_phi * min(rho**2, 1.0) * delta**2, rel=1e-10
    )
    assert model.energy_and_forces(bent)[0] == pytest.approx(
        0.5 * k_phi * rho**2 * delta**2, rel=1e-10
    )  # the model it came from is left as it was
    assert capped.energy_and_forces(stretched)[0] == model.energy_and_forces(stretched)[0]
    assert capped.energy_and_forces(stretched)[0] > 0


def test_straight_angles_give_finite_forces():
    atoms = molecule("C2H2")  # H-C-C-H on a line: the bend directions are undefined
    model = LindhModel(atoms.positions, atoms.numbers)
    energy, forces = model.energy_and_forces(atoms.positions)
    assert energy == 0.0 and np.isfinite(forces).all()


def test_bad_reference_is_refused():
    with pytest.raises(ValueError, match="shape"):
        LindhModel(np.zeros((3, 2)), [1, 1, 8])
    with pytest.raises(ValueError, match="finite"):
        LindhModel([[0, 0, 0], [0, 0, np.nan]], [1, 1])


def test_default_prior_is_lindh_for_molecules_and_springs_for_periodic_cells():
    atoms = molecule("H2O")
    atoms.calc = LennardJones()
    assert isinstance(BOOptimizer(atoms, logfile=None).prior, RecentredLindh)
    assert BOOptimizer(atoms, logfile=None).todict()["prior"] == "lindh"
    crystal = Atoms("Ar", positions=[[0, 0, 0]], cell=[3, 3, 3], pbc=True).repeat(2)
    crystal.calc = LennardJones()
    assert isinstance(BOOptimizer(crystal, logfile=None).prior, RecentredSprings)
    assert BOOptimizer(crystal, logfile=None).todict()["prior"] == "springs"
    with pytest.raises(ValueError, match="periodic"):
        BOOptimizer(crystal, logfile=None, prior="lindh")
    with pytest.raises(ValueError, match="prior must be"):
        BOOptimizer(atoms, logfile=None, prior="harmonic")
    for bad in (-0.1, np.nan):
        with pytest.raises(ValueError, match="recentre"):
            BOOptimizer(atoms, logfile=None, recentre=bad)


def distorted_water():
    atoms = molecule("H2O")
    atoms.positions += 0.25 * np.random.default_rng(3).normal(size=(3, 3))
    atoms.calc = get_calculator("gfn2")
    return atoms


def test_model_is_recentred_on_the_best_configuration_and_restart_rebuilds_it(tmp_path):
    restart = str(tmp_path / "bo.json")
    atoms = distorted_water()
    opt = BOOptimizer(atoms, logfile=None, restart=restart, recentre=0.3)
    opt.run(fmax=0.01, steps=6)
    opt.fit_model()  # the rule replayed over the last configuration too, as on resuming
    first, model = opt.positions_seen[0], opt.lindh_model
    centre = [i for i, p in enumerate(opt.positions_seen) if np.array_equal(p, model.reference)]
    assert centre and centre[0] > 0  # moved off the distorted start...
    best_so_far = int(np.argmin(opt.energies[: centre[0] + 1]))
    assert centre[0] == best_so_far  # ...to the lowest energy seen at that time
    assert not np.array_equal(model.reference, first)
    resumed = BOOptimizer(distorted_water(), logfile=None, restart=restart, recentre=0.3)
    resumed.fit_model()
    np.testing.assert_array_equal(resumed.lindh_model.reference, model.reference)


def test_by_default_the_model_stays_on_the_first_configuration_close_to_it():
    atoms = molecule("H2O")
    atoms.positions += 0.1 * np.random.default_rng(3).normal(size=(3, 3))
    atoms.calc = get_calculator("gfn2")
    opt = BOOptimizer(atoms, logfile=None)
    assert isinstance(opt.representation, InternalCoordinates)
    assert opt.recentre == InternalCoordinates.default_recentre
    opt.run(fmax=0.01, steps=6)
    np.testing.assert_array_equal(opt.lindh_model.reference, opt.positions_seen[0])


def test_a_start_far_from_the_model_is_recentred_and_reaches_the_minimum():
    """PF3 drawn flat: 1.9 eV above its pyramid, further than the start's model holds."""
    pyramid = molecule("PF3")
    pyramid.calc = get_calculator("gfn2")
    BFGS(pyramid, logfile=None).run(fmax=0.01, steps=200)
    atoms = molecule("PF3")
    first, second, third = atoms.positions[1:]
    normal = np.cross(second - first, third - first)
    normal /= np.linalg.norm(normal)
    atoms.positions[0] -= np.dot(atoms.positions[0] - first, normal) * normal
    atoms.calc = get_calculator("gfn2")
    opt = BOOptimizer(atoms, logfile=None)
    assert opt.run(fmax=0.05, steps=40)
    assert atoms.get_potential_energy() == pytest.approx(pyramid.get_potential_energy(), abs=2e-3)
    assert not np.array_equal(opt.lindh_model.reference, opt.positions_seen[0])
