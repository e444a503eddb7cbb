"""A saddle search's Lindh prior knows the bonds its guess makes and breaks: the pairs
stretched beyond any equilibrium bond and not apart, each reversed into a harmonic
maximum, so that the model's lowest mode at the guess is the reaction's before any
call."""

import numpy as np
import pytest
from ase import Atoms
from ase.data import covalent_radii
from ase.io import read

from asebo.benchmarks._endpoint_audit import finite_difference_hessian, frequencies
from asebo.benchmarks.ts import DATA, SETS, guess, interpolated_midpoint
from asebo.model.lindh import LindhModel
from asebo.model.priors import RecentredLindh, make_prior
from asebo.optimize.bonding import APART, BONDED, STRETCHED, partial_bonds
from asebo.optimize.model_hessian import internal_basis
from asebo.optimize.representations import make_representation
from asebo.optimize.settings import ModelSettings
from asebo.optimize.surrogate_model import system_prior
from calculators import CountingCalculator, get_calculator


def test_a_pair_between_bonded_and_apart_is_a_bond_being_made_or_broken():
    oxygen_hydrogen = covalent_radii[8] + covalent_radii[1]
    hydrogen_nitrogen = covalent_radii[1] + covalent_radii[7]
    middle = 0.5 * (BONDED + APART)
    transfer = np.zeros((3, 3))  # O-H bonded, H...N halfway, O and N apart
    transfer[1, 0] = oxygen_hydrogen
    transfer[2, 0] = oxygen_hydrogen + middle * hydrogen_nitrogen
    assert partial_bonds([8, 1, 7], transfer) == ((1, 2),)
    for across, expected in ((middle, ((0, 1),)), (1.05, ()), (1.1 * APART, ())):
        pair = np.array([[0.0, 0.0, 0.0], [across * hydrogen_nitrogen, 0.0, 0.0]])
        assert partial_bonds([1, 7], pair) == expected


def test_no_bond_of_an_equilibrium_molecule_is_taken_for_one_being_made():
    """The molecules of Baker's set, the three drug-like sets, the large set and the S22
    dimers (106 files, 3 to 111 atoms): every bonded pair (within ``BONDED`` times its
    sum of covalent radii) is shorter than ``STRETCHED`` times it, so that no pair
    ``partial_bonds`` returns (from ``STRETCHED``) is one of their bonds."""
    folders = ("baker", "druglike", "druglike2", "druglike3", "large", "s22")
    paths = [path for folder in folders for path in sorted((DATA / folder).glob("*.xyz"))]
    assert len(paths) == 106
    for path in paths:
        atoms = read(path)
        radii = covalent_radii[atoms.numbers]
        relative = atoms.get_all_distances() / (radii[:, None] + radii[None, :])  # (n, n)
        bonded = relative[np.triu(relative < BONDED, k=1)]
        assert bonded.max() < STRETCHED, path.stem


def test_a_transferred_hydrogen_keeps_both_of_its_bonds_in_the_reaction():
    """Methoxy's guess of Baker and Chan (CH3O to CH2OH): the hydrogen 1.48 Å from the
    carbon it leaves and 1.06 Å from the oxygen it reaches, a bond longer than
    ``STRETCHED`` times O-H's covalent sum but bonded. Both pairs are reversed, and the
    prior's lowest mode before any call moves the hydrogen between them."""
    atoms = guess("04_ch3o")  # O0, C1, H2 moving, H3, H4
    oxygen_hydrogen = atoms.get_distance(0, 2) / (covalent_radii[8] + covalent_radii[1])
    assert STRETCHED < oxygen_hydrogen < BONDED
    assert partial_bonds(atoms.numbers, atoms.positions) == ((0, 2), (1, 2))
    curvature, mode = lowest_prior_mode("saddle", atoms)
    assert curvature < 0
    assert np.linalg.norm(mode[2]) > 0.7


def test_a_reversed_stretch_is_the_same_stretch_with_the_opposite_energy():
    rng = np.random.default_rng(3)
    reference = np.array([[0.0, 0.0, 0.0], [0.97, 0.0, 0.0], [1.2, 0.93, 0.0]])
    numbers = np.array([8, 1, 1])
    model = LindhModel(reference, numbers)
    pair = (0, 2)
    reversed_model = model.with_reversed_stretches([pair])
    index = [tuple(row) for row in model.stretches.tolist()].index(pair)
    positions = reference + 0.05 * rng.standard_normal((4, 3, 3))  # (b, n, 3)
    energies, gradients = model.energies_and_gradients(positions)
    reversed_energies, reversed_gradients = reversed_model.energies_and_gradients(positions)
    stretch = np.linalg.norm(positions[:, 2] - positions[:, 0], axis=-1) - np.linalg.norm(
        reference[2] - reference[0]
    )  # (b,)
    term = 0.5 * model.stretch_constants[index] * stretch**2  # (b,)
    assert reversed_energies == pytest.approx(energies - 2 * term, rel=1e-10, abs=1e-12)
    assert np.abs(reversed_gradients - gradients).max() > 1e-3
    assert np.allclose(model.stretch_constants[index], -reversed_model.stretch_constants[index])
    assert np.all(model.stretch_constants > 0)  # the model itself is left as it was


def prior_hessian(prior, positions, step=1e-4):
    """Central differences of ``prior``'s gradient at ``positions`` (n, 3): (3n, 3n)."""
    flat = positions.ravel()
    columns = []
    for k in range(flat.size):
        shift = np.zeros_like(flat)
        shift[k] = step
        plus, minus = ((flat + sign * shift).reshape(1, -1, 3) for sign in (1, -1))
        gradient = [prior.energies_and_gradients(x)[1][0].ravel() for x in (plus, minus)]
        columns.append((gradient[0] - gradient[1]) / (2 * step))
    hessian = np.array(columns).T
    return 0.5 * (hessian + hessian.T)


def lowest_prior_mode(driver, atoms):
    """The lowest curvature (eV/Å²) and unit mode (n, 3) of the Lindh prior a ``driver``
    takes for ``atoms``, before any call, the rigid motions left out."""
    representation = make_representation(None, atoms)
    prior, _ = system_prior("lindh", atoms, False, 0.3, ModelSettings(), representation, driver)
    model = prior.for_observations(atoms.positions[None], np.zeros(1), np.zeros((1, len(atoms), 3)))
    basis = internal_basis(atoms.positions, np.ones((len(atoms), 3), bool))  # (3n, k)
    hessian = prior_hessian(model, atoms.positions)
    values, vectors = np.linalg.eigh(basis.T @ hessian @ basis)
    return values[0], (basis @ vectors[:, 0]).reshape(-1, 3)


def test_at_a_hydrogen_transfer_guess_the_saddle_prior_climbs_the_hydrogen_not_a_twist():
    atoms = guess("14_vinyl_alcohol")  # H6 between C0, C1 and O2
    assert partial_bonds(atoms.numbers, atoms.positions) == ((0, 6), (1, 6), (2, 6))
    minimum_curvature, minimum_mode = lowest_prior_mode("minimum", atoms)
    saddle_curvature, saddle_mode = lowest_prior_mode("saddle", atoms)
    assert minimum_curvature > 0 and np.linalg.norm(minimum_mode[6]) < 0.1
    assert saddle_curvature < 0 and np.linalg.norm(saddle_mode[6]) > 0.7


def test_the_kernels_metric_keeps_the_models_own_stretches():
    atoms = guess("14_vinyl_alcohol")
    prior = make_prior("lindh", atoms, 0.3, reaction_pairs=((0, 6), (1, 6), (2, 6)))
    assert isinstance(prior, RecentredLindh)
    used = prior.for_observations(atoms.positions[None], np.zeros(1))
    _, metric_model = prior.metric_reference()
    assert np.all(metric_model.stretch_constants > 0)
    assert np.sum(used.model.stretch_constants < 0) == 3


def test_a_molecule_with_no_bond_being_made_or_broken_keeps_the_lindh_model():
    atoms = Atoms("H2O", positions=[[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0]])
    assert partial_bonds(atoms.numbers, atoms.positions) == ()
    curvature_minimum, _ = lowest_prior_mode("minimum", atoms)
    curvature_saddle, _ = lowest_prior_mode("saddle", atoms)
    assert curvature_saddle == pytest.approx(curvature_minimum)


def test_without_a_second_calculator_the_search_ends_at_the_hydrogen_transfer():
    """Vinyl alcohol's guess of Baker and Chan, GFN2-xTB, the Lindh model as the prior:
    the H transfer (Sella's saddle point, above 2000 cm⁻¹), not a torsion's (below
    200 cm⁻¹), as its lowest mode by finite differences and by the model's record."""
    pytest.importorskip("sella")
    from asebo.saddle import BOSaddle

    atoms = guess("14_vinyl_alcohol")
    atoms.calc = CountingCalculator(get_calculator("gfn2"))
    search = BOSaddle(atoms, prior="lindh", logfile=None)
    assert search.run(fmax=0.05, steps=60)
    hessian = finite_difference_hessian(atoms, get_calculator("gfn2"))
    lowest = frequencies(hessian, atoms)[0]
    assert lowest < -1500  # cm⁻¹, imaginary: the hydrogen moves
    assert search.result.imaginary > 1500


def test_the_interpolated_guess_fits_the_halfway_distances_better_than_the_straight_line():
    """The image-dependent pair potential's image halfway (its objective: every
    interatomic distance near the mean of the two ends', weighted by the inverse fourth
    power of that mean) fits them better than the Cartesian midpoint of the aligned
    ends, from which its optimization starts."""
    from ase.build import minimize_rotation_and_translation

    frames = read(SETS["interpolated"] / "14_meoh.xyz", index=":")
    first, last = frames[0], frames[-1].copy()
    minimize_rotation_and_translation(first, last)
    halfway = 0.5 * (first.get_all_distances() + last.get_all_distances())  # (n, n)
    weights = np.zeros_like(halfway)
    apart = halfway > 0
    weights[apart] = halfway[apart] ** -4

    def misfit(atoms):
        return float(np.sum(weights * (atoms.get_all_distances() - halfway) ** 2))

    straight = first.copy()
    straight.positions = 0.5 * (first.positions + last.positions)
    middle = interpolated_midpoint(frames[0], frames[-1])
    assert misfit(middle) < 0.5 * misfit(straight)
    assert guess("14_meoh", "interpolated").positions == pytest.approx(middle.positions)
