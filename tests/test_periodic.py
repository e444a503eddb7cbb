"""Pair springs, generalized cell coordinates, the periodic metric and prior."""

import importlib.util
import sys

import numpy as np
import pytest
import torch
from ase.build import bulk, fcc111, make_supercell
from ase.calculators.emt import EMT
from ase.calculators.fd import calculate_numerical_stress
from ase.calculators.lj import LennardJones
from ase.constraints import FixAtoms
from ase.filters import FrechetCellFilter, StrainFilter, UnitCellFilter

from asebo.model.cell_coordinates import GeneralizedCoordinates
from asebo.model.lindh import STRETCH_CONSTANT, lindh_weights
from asebo.model.periodic import (
    PeriodicMetric,
    RecentredSprings,
    automatic_periodic_prior,
    calculator_prior,
    generalized_energy,
    generalized_hessian,
)
from asebo.model.priors import CalculatorPrior
from asebo.model.springs import ExpSprings, fitted_spring_constant, springs_hessian
from calculators import get_calculator
from calculators.counting import CountingCalculator

STEP = 1e-5


def rattled_bulk(seed=0, size=(1, 1, 1)):
    atoms = bulk("Cu", cubic=True) * size  # 4 atoms a cube
    atoms.rattle(0.05, seed=seed)
    return atoms


def slab(fixed=True):
    atoms = fcc111("Cu", (2, 2, 3), vacuum=5.0)  # pbc (True, True, False)
    atoms.rattle(0.05, seed=1)
    if fixed:
        atoms.set_constraint(FixAtoms(mask=atoms.positions[:, 2] < atoms.positions[:, 2].min() + 1))
    return atoms


def moved(atoms, seed, scale=0.06):
    out = atoms.copy()
    out.positions += np.random.default_rng(seed).normal(scale=scale, size=out.positions.shape)
    return out


def strained_cell(atoms, seed=2):
    out = moved(atoms, seed)
    strain = np.eye(3) + 0.02 * np.random.default_rng(seed).normal(size=(3, 3))
    out.set_cell(out.cell @ (strain + strain.T) / 2, scale_atoms=True)
    return out


def numerical_gradient(function, x, step=STEP):
    """Central differences of a scalar function of an array."""
    gradient = np.zeros_like(x)
    for k in range(x.size):
        plus, minus = x.copy(), x.copy()
        plus.flat[k] += step
        minus.flat[k] -= step
        gradient.flat[k] = (function(plus) - function(minus)) / (2 * step)
    return gradient


# ---- the springs -----------------------------------------------------------------------


@pytest.mark.parametrize("transverse", [0.0, 0.4])
def test_spring_forces_and_stress_are_derivatives_of_the_energy(transverse):
    springs = ExpSprings(rattled_bulk(), transverse=transverse)
    atoms = strained_cell(rattled_bulk())
    atoms.calc = springs
    forces = atoms.get_forces()

    def energy(x):
        probe = atoms.copy()
        probe.positions = x
        return springs.energy_forces_stress(x, probe.cell)[0]

    assert atoms.get_potential_energy() > 1e-3
    np.testing.assert_allclose(-numerical_gradient(energy, atoms.positions), forces, atol=1e-7)
    np.testing.assert_allclose(
        atoms.get_stress(), calculate_numerical_stress(atoms, 1e-6), atol=1e-8
    )


def test_springs_hessian_is_the_derivative_of_the_forces():
    atoms = slab(fixed=False)
    springs = ExpSprings(atoms, transverse=0.3)
    probe = moved(atoms, 4)
    hessian = springs_hessian(springs, probe.positions, probe.cell.complete())

    def forces(x):
        return springs.energy_forces_stress(x, probe.cell.complete())[1].reshape(-1)

    columns = np.arange(0, 3 * len(probe), 5)
    numerical = np.stack(
        [
            -(forces(probe.positions + d) - forces(probe.positions - d)) / (2e-5)
            for d in np.eye(3 * len(probe))[columns].reshape(-1, len(probe), 3) * 1e-5
        ]
    )
    np.testing.assert_allclose(hessian[columns], numerical, atol=1e-6)


def test_spring_energy_is_zero_at_rest_and_invariant_to_translation_and_wrapping():
    reference = rattled_bulk()
    springs = ExpSprings(reference)
    assert springs.energy_forces_stress(reference.positions, reference.cell)[0] == pytest.approx(
        0.0, abs=1e-20
    )
    atoms = moved(reference, 5)
    energy = springs.energy_forces_stress(atoms.positions, atoms.cell)[0]
    shifted = atoms.positions + [0.3, -0.7, 1.1]
    wrapped = atoms.positions.copy()
    wrapped[2] += atoms.cell[0] - 2 * atoms.cell[2]
    for positions in (shifted, wrapped):
        assert springs.energy_forces_stress(positions, atoms.cell)[0] == pytest.approx(
            energy, rel=1e-12
        )


def test_spring_energy_of_equivalent_cells_and_supercells():
    reference = rattled_bulk()
    atoms = moved(reference, 6)
    energy = ExpSprings(reference).energy_forces_stress(atoms.positions, atoms.cell)[0]
    unimodular = np.array([[1, 1, 0], [0, 1, 0], [1, 0, 1]])  # determinant 1
    other = reference.copy()
    other.set_cell(unimodular @ reference.cell, scale_atoms=False)
    other.wrap()
    displaced = other.copy()
    displaced.positions += atoms.positions - reference.positions
    springs = ExpSprings(other)
    assert springs.energy_forces_stress(displaced.positions, other.cell)[0] == pytest.approx(
        energy, rel=1e-10
    )
    double = np.diag([2, 1, 1])
    supercell_reference = make_supercell(reference, double)
    supercell = make_supercell(atoms, double)
    supercell_energy = ExpSprings(supercell_reference).energy_forces_stress(
        supercell.positions, supercell.cell
    )[0]
    assert supercell_energy == pytest.approx(2 * energy, rel=1e-10)


def test_fitted_spring_constant_recovers_the_scale_of_a_spring_hessian():
    atoms = rattled_bulk()
    springs = ExpSprings(atoms, spring_constant=2.5)
    hessian = springs_hessian(springs, atoms.positions, atoms.cell)
    assert fitted_spring_constant(atoms, hessian) == pytest.approx(2.5, rel=1e-10)


def test_springs_refuse_atoms_too_close_across_the_boundary():
    atoms = bulk("Cu", cubic=True)
    atoms.positions[1] = atoms.cell[0] - [0.2, 0.0, 0.0] + atoms.positions[0]
    with pytest.raises(ValueError, match="apart"):
        ExpSprings(atoms)
    with pytest.raises(ValueError, match="apart"):
        RecentredSprings(atoms, recentre=0.3).check(atoms)


# ---- generalized coordinates -----------------------------------------------------------


@pytest.mark.parametrize("kind", [FrechetCellFilter, UnitCellFilter])
def test_generalized_coordinates_reproduce_the_filter(kind):
    atoms = rattled_bulk()
    system = kind(atoms)
    q = system.get_positions()
    q[:-3] += 0.05
    q[-3:] += 0.03 * np.random.default_rng(0).normal(size=(3, 3))
    system.set_positions(q)
    r, cell = GeneralizedCoordinates.from_optimizable(system).positions_and_cell(q[None])
    np.testing.assert_allclose(r[0].numpy(), atoms.positions, atol=1e-12)
    np.testing.assert_allclose(cell[0].numpy(), atoms.cell[:], atol=1e-12)


def test_strain_filter_is_refused():
    with pytest.raises(ValueError, match="StrainFilter is not supported"):
        GeneralizedCoordinates.from_optimizable(StrainFilter(rattled_bulk()))


@pytest.mark.parametrize("kind", [FrechetCellFilter, UnitCellFilter])
def test_filter_prior_forces_are_gradients_in_the_generalized_coordinates(kind):
    atoms = strained_cell(rattled_bulk())
    system = kind(atoms, scalar_pressure=0.01)
    springs = ExpSprings(rattled_bulk())
    prior = calculator_prior(springs, system)
    assert isinstance(prior, CalculatorPrior)
    coordinates = GeneralizedCoordinates.from_optimizable(system)
    q = system.get_positions()
    energy, forces = prior.energy_and_forces(q)

    def model(x):
        return float(generalized_energy(springs, coordinates, torch.as_tensor(x)[None])[0])

    assert energy == pytest.approx(model(q), rel=1e-10)
    np.testing.assert_allclose(-numerical_gradient(model, q, 1e-6), forces, atol=1e-6)
    hessian = generalized_hessian(springs, coordinates, q)
    columns = np.r_[0:3, q.size - 9 : q.size]  # an atom and the cell
    numerical = np.stack(
        [
            -(prior.energy_and_forces(q + d)[1] - prior.energy_and_forces(q - d)[1]).reshape(-1)
            / 2e-5
            for d in np.eye(q.size)[columns].reshape(-1, *q.shape) * 1e-5
        ]
    )
    np.testing.assert_allclose(hessian[columns], numerical, atol=2e-5)


# ---- zero modes ------------------------------------------------------------------------


def zero_modes(hessian):
    eigenvalues = np.linalg.eigvalsh(hessian)
    return int(np.sum(np.abs(eigenvalues) < 1e-8 * eigenvalues.max()))


def test_hessian_zero_modes():
    bulk_atoms = rattled_bulk()
    springs = ExpSprings(bulk_atoms)
    assert zero_modes(springs_hessian(springs, bulk_atoms.positions, bulk_atoms.cell)) == 3
    free_slab = slab(fixed=False)
    springs = ExpSprings(free_slab)
    assert zero_modes(springs_hessian(springs, free_slab.positions, free_slab.cell)) == 3
    system = FrechetCellFilter(bulk_atoms)
    coordinates = GeneralizedCoordinates.from_optimizable(system)
    hessian = generalized_hessian(ExpSprings(bulk_atoms), coordinates, system.get_positions())
    assert zero_modes(hessian) == 6  # translations, and rotations of cell and atoms
    isotropic = generalized_hessian(
        ExpSprings(bulk_atoms, transverse=1.0), coordinates, system.get_positions()
    )
    assert zero_modes(isotropic) == 3
    one_atom = bulk("Cu")
    system = FrechetCellFilter(one_atom)
    coordinates = GeneralizedCoordinates.from_optimizable(system)
    hessian = generalized_hessian(ExpSprings(one_atom), coordinates, system.get_positions())
    assert zero_modes(hessian) == 6
    assert np.linalg.eigvalsh(hessian)[-6:].min() > 0.1


# ---- the metric -------------------------------------------------------------------------


def metric_of(system, transverse=0.0):
    coordinates = GeneralizedCoordinates.from_optimizable(system)
    reference = system.get_positions()
    springs = ExpSprings(coordinates.configuration(reference), transverse=transverse)
    return PeriodicMetric.from_model(springs, coordinates, reference), reference


def squared_distance(metric, a, b):
    psi = metric.features(np.stack([a, b]))
    return float((psi[0] - psi[1]).pow(2).sum())


@pytest.mark.parametrize("build", ["bulk", "slab", "frechet", "unitcell"])
def test_pullback_and_feature_gradients_agree_with_autograd(build):
    if build == "bulk":
        system = rattled_bulk()
    elif build == "slab":
        system = slab()
    else:
        kind = FrechetCellFilter if build == "frechet" else UnitCellFilter
        system = kind(rattled_bulk())
    metric, reference = metric_of(system)
    rng = np.random.default_rng(3)
    q = torch.as_tensor(reference + 0.05 * rng.normal(size=(2, *reference.shape)))
    # the features: the described coordinates in rows of three
    assert metric.features(q).shape == (2, metric.feature_rows, 3)
    assert 3 * metric.feature_rows - 3 < len(metric.jacobian) <= 3 * metric.feature_rows
    weights = torch.as_tensor(rng.normal(size=(2, metric.feature_rows, 3)))
    x = q.clone().requires_grad_(True)
    function = (torch.sin(metric.features(x)) * weights).sum()
    (expected,) = torch.autograd.grad(function, x)
    features, pullback = metric.features_and_pullback(q)
    in_features = torch.cos(features) * weights
    (pulled,) = pullback(in_features)
    np.testing.assert_allclose(pulled.numpy(), expected.numpy(), atol=1e-12)
    r = len(metric.jacobian)
    in_features.reshape(2, -1)[:, r:] = 0.0  # padding: no function depends on it
    np.testing.assert_allclose(
        metric.feature_gradients(q, pulled).numpy(), in_features.numpy(), atol=1e-10
    )


def test_metric_dimension_counts_the_free_coordinates():
    fixed = slab()
    metric, _ = metric_of(fixed)
    n_free = len(fixed) - len(fixed.constraints[0].get_indices())
    assert len(metric.jacobian) == 3 * n_free
    metric, _ = metric_of(FrechetCellFilter(rattled_bulk()))
    assert len(metric.jacobian) == 3 * 4 - 3 + 6
    one_atom = FrechetCellFilter(bulk("Cu"))
    metric, reference = metric_of(one_atom)
    assert len(metric.jacobian) == 6
    assert metric.features(reference[None]).shape == (1, 2, 3)  # the cell's strain only


def test_metric_ignores_fixed_atoms_translations_and_wraps():
    atoms = rattled_bulk()
    metric, reference = metric_of(atoms)
    a, b = moved(atoms, 1).positions, moved(atoms, 2).positions
    distance = squared_distance(metric, a, b)
    assert distance > 1e-3
    shifted = b + [0.4, -0.2, 0.9]
    wrapped = b.copy()
    wrapped[1] -= atoms.cell[1]
    assert squared_distance(metric, a, shifted) == pytest.approx(distance, rel=1e-10)
    assert squared_distance(metric, a, wrapped) == pytest.approx(distance, rel=1e-10)
    fixed = slab()
    metric, reference = metric_of(fixed)
    held = fixed.constraints[0].get_indices()
    c = moved(fixed, 3).positions
    d = c.copy()
    d[held] += 0.3
    assert squared_distance(metric, reference, c) == pytest.approx(
        squared_distance(metric, reference, d), rel=1e-10
    )


def test_metric_distances_of_an_equivalent_cell_and_of_a_supercell():
    atoms = rattled_bulk()
    a, b = moved(atoms, 1), moved(atoms, 2)
    metric, _ = metric_of(atoms)
    distance = squared_distance(metric, a.positions, b.positions)

    unimodular = np.array([[1, 0, 0], [1, 1, 0], [0, -1, 1]])
    other = atoms.copy()
    other.set_cell(unimodular @ atoms.cell, scale_atoms=False)
    other.wrap()
    metric_other, _ = metric_of(other)
    moved_a = other.positions + (a.positions - atoms.positions)
    moved_b = other.positions + (b.positions - atoms.positions)
    assert squared_distance(metric_other, moved_a, moved_b) == pytest.approx(distance, rel=1e-9)

    double = np.diag([2, 1, 1])
    metric_super, _ = metric_of(make_supercell(atoms, double))
    assert squared_distance(
        metric_super, make_supercell(a, double).positions, make_supercell(b, double).positions
    ) == pytest.approx(2 * distance, rel=1e-9)


def test_filter_metric_of_a_supercell_and_under_rotation():
    atoms = rattled_bulk()
    double = np.diag([2, 1, 1])
    system, supercell = FrechetCellFilter(atoms), FrechetCellFilter(make_supercell(atoms, double))
    metric, reference = metric_of(system)
    metric_super, reference_super = metric_of(supercell)
    rng = np.random.default_rng(0)
    strain = 0.02 * rng.normal(size=(3, 3))
    strain = strain + strain.T
    displacement = 0.05 * rng.normal(size=(len(atoms), 3))
    q = reference.copy()
    q[:-3] += displacement
    q[-3:] += system.exp_cell_factor * strain
    q_super = reference_super.copy()
    q_super[:-3] += np.concatenate([displacement, displacement])
    q_super[-3:] += supercell.exp_cell_factor * strain
    distance = squared_distance(metric, reference, q)
    assert squared_distance(metric_super, reference_super, q_super) == pytest.approx(
        2 * distance, rel=1e-9
    )
    rotated = q.copy()
    rotated[-3:] += np.array([[0.0, 0.1, 0.0], [-0.1, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert squared_distance(metric, reference, rotated) == pytest.approx(distance, rel=1e-12)


def test_metric_scales_follow_the_hessian_relative_to_its_mean_diagonal():
    surface, _ = metric_of(slab())
    assert surface.scales.max() > 2 * surface.scales.min()  # stiff and soft directions apart
    atoms = rattled_bulk()
    coordinates = GeneralizedCoordinates.from_optimizable(atoms)
    _, reference = metric_of(atoms)
    uniform = PeriodicMetric(coordinates, reference, 7.0 * np.eye(3 * len(atoms)), 2.5)
    np.testing.assert_allclose(uniform.scales, 1.0, rtol=1e-12)
    springs = ExpSprings(atoms)
    hessian = springs_hessian(springs, atoms.positions, atoms.cell)
    squared = PeriodicMetric(coordinates, reference, hessian, 2.5, power=2.0)
    half = PeriodicMetric(coordinates, reference, hessian, 2.5, power=1.0)
    np.testing.assert_allclose(squared.scales, half.scales**2, rtol=1e-10)


# ---- the prior --------------------------------------------------------------------------


def test_recentred_springs_rebuild_around_the_best_observation():
    atoms = rattled_bulk()
    rule = RecentredSprings(atoms, recentre=0.05)
    positions = np.stack([atoms.positions, moved(atoms, 1, 0.02).positions])
    prior = rule.for_observations(positions, np.array([0.0, -0.1]))
    assert rule.centre == 0 and isinstance(prior, CalculatorPrior)
    far = moved(atoms, 2, 0.3).positions
    assert prior.energy_and_forces(far)[0] > 0.05
    positions = np.concatenate([positions, far[None]])
    rule.for_observations(positions, np.array([0.0, -0.1, -0.5]))
    assert rule.centre == 2
    assert rule.for_observations(positions, np.array([0.0, -0.1, -0.5])).energy_and_forces(far)[
        0
    ] == pytest.approx(0.0, abs=1e-20)
    replay = RecentredSprings(atoms, recentre=0.05)
    replay.for_observations(positions, np.array([0.0, -0.1, -0.5]))
    assert replay.centre == 2


def test_recentred_springs_under_a_filter_give_generalized_forces():
    system = FrechetCellFilter(rattled_bulk())
    rule = RecentredSprings(system, recentre=1.0)
    q = system.get_positions()
    prior = rule.for_observations(q[None], np.array([0.0]))
    energy, forces = prior.energy_and_forces(q + 0.01)
    assert forces.shape == q.shape
    # 4 atoms less 3 translations, and 6 strains: 15 features in 5 rows
    assert rule.metric().features(q[None]).shape == (1, 5, 3)
    assert rule.metric_reference() == (0, rule.springs)


def test_automatic_periodic_prior_chooses_emt_for_its_metals_only():
    atoms = rattled_bulk()
    atoms.calc = EMT()
    rule, reason = automatic_periodic_prior(atoms, recentre=0.3)
    assert isinstance(rule, RecentredSprings) and "EMT itself" in reason
    atoms.calc = CountingCalculator(EMT())
    rule, reason = automatic_periodic_prior(atoms, recentre=0.3)
    assert isinstance(rule, RecentredSprings) and "EMT itself" in reason
    atoms.calc = LennardJones()
    rule, reason = automatic_periodic_prior(atoms, recentre=0.3)
    assert isinstance(rule, CalculatorPrior) and "EMT" in reason
    prior = rule.for_observations(atoms.positions[None], np.zeros(1))
    reference = atoms.copy()
    reference.calc = EMT()
    assert prior.energy_and_forces(atoms.positions)[0] == pytest.approx(
        reference.get_potential_energy()
    )


def test_automatic_periodic_prior_takes_chgnet_beyond_emts_metals(monkeypatch):
    oxide = rattled_bulk()
    oxide.symbols[0] = "O"
    oxide.calc = LennardJones()
    if importlib.util.find_spec("chgnet") is not None:
        rule, reason = automatic_periodic_prior(oxide, recentre=0.3)
        assert isinstance(rule, CalculatorPrior) and rule.label == "CHGNetCalculator"
        assert "CHGNet as the prior" in reason and "'O'" in reason
        oxide.calc = get_calculator("chgnet")
        rule, reason = automatic_periodic_prior(oxide, recentre=0.3)
        assert isinstance(rule, RecentredSprings) and "the target is CHGNet" in reason
        oxide.calc = LennardJones()
    monkeypatch.setitem(sys.modules, "chgnet", None)  # as where it is not installed
    rule, reason = automatic_periodic_prior(oxide, recentre=0.3)
    assert isinstance(rule, RecentredSprings) and "pip install 'asebo[ml]'" in reason


def test_emt_prior_under_a_filter_matches_the_filter():
    atoms = strained_cell(rattled_bulk())
    atoms.calc = LennardJones()
    system = FrechetCellFilter(atoms)
    rule, _ = automatic_periodic_prior(system, recentre=0.3)
    q = system.get_positions()
    energy, forces = rule.for_observations(q[None], np.zeros(1)).energy_and_forces(q)
    target = atoms.copy()
    target.calc = EMT()
    expected = FrechetCellFilter(target)
    np.testing.assert_allclose(forces, expected.get_forces(), atol=1e-12)
    assert energy == pytest.approx(expected.get_potential_energy())


def test_covalent_pairs_of_an_adsorbate_take_lindhs_stretch_constant_where_larger():
    from asebo.benchmarks.adsorbates import adsorbate_on_copper

    atoms = adsorbate_on_copper("CO", "111")  # C at 12, O at 13
    springs, exp_only = ExpSprings(atoms), ExpSprings(atoms, covalent=False)
    i, j = springs.i.numpy(), springs.j.numpy()
    carbon_oxygen = (i == 12) & (j == 13)
    rho = lindh_weights(atoms.positions[12:], atoms.numbers[12:])[0, 1]
    lindh = STRETCH_CONSTANT * rho
    assert lindh > 10 * float(exp_only.constants[carbon_oxygen][0])  # Exp: far too soft
    np.testing.assert_allclose(springs.constants[carbon_oxygen].numpy(), lindh, rtol=1e-12)
    # every pair with a copper atom keeps Exp's constant, as do the metals alone
    metal = (atoms.numbers[i] == 29) | (atoms.numbers[j] == 29)
    assert torch.equal(springs.constants[metal], exp_only.constants[metal])
    copper = bulk("Cu", cubic=True)
    assert torch.equal(ExpSprings(copper).constants, ExpSprings(copper, covalent=False).constants)
    # still one energy: forces are minus its gradient
    moved = atoms.copy()
    moved.rattle(0.03, seed=4)
    moved.calc = springs
    forces = moved.get_forces(apply_constraint=False)
    h = 1e-5
    for atom in (12, 13, 3):
        for axis in range(3):
            shifted = [moved.copy() for _ in range(2)]
            shifted[0].positions[atom, axis] += h
            shifted[1].positions[atom, axis] -= h
            energies = []
            for configuration in shifted:
                configuration.calc = springs
                energies.append(configuration.get_potential_energy())
            assert forces[atom, axis] == pytest.approx(
                -(energies[0] - energies[1]) / (2 * h), abs=1e-6
            )
