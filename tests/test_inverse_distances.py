"""The inverse-distance features: values, invariance, the gradient maps against finite
differences, and the GP on them."""

import numpy as np
import pytest
import torch
from ase.build import molecule
from test_gp import assert_posterior_gradients_match_finite_differences
from test_metric import ethanol_observations, random_rotation, rattled

from asebo.model.gp import EnergyForceGP
from asebo.model.inverse_distances import InverseDistanceMetric
from asebo.model.observed_directions import ObservedDirections
from asebo.optimize.representations import InverseDistancePositions, make_representation

RADII = {6: 0.76, 8: 0.66, 1: 0.31}  # Å, ase.data.covalent_radii


def test_features_are_scaled_inverse_distances_of_every_pair():
    atoms = molecule("CH3OH")
    x = rattled("CH3OH", seed=1)[0]
    metric = InverseDistanceMetric(atoms.numbers)
    features = metric.features(x[None]).numpy().reshape(-1)
    n = len(atoms)
    assert metric.features(x[None]).shape == (1, -(-n * (n - 1) // 6), 3)
    expected = [
        (RADII[atoms.numbers[i]] + RADII[atoms.numbers[j]]) / np.linalg.norm(x[i] - x[j])
        for i in range(n)
        for j in range(i + 1, n)
    ]
    np.testing.assert_allclose(features[: len(expected)], expected, rtol=1e-12)
    np.testing.assert_array_equal(features[len(expected) :], 0.0)


def test_features_are_invariant_to_rigid_motions():
    metric = InverseDistanceMetric(molecule("CH3OH").numbers)
    x = rattled("CH3OH", scale=0.1, seed=2)[0]
    moved = x @ random_rotation(3).T + np.array([0.4, -1.0, 2.0])
    np.testing.assert_allclose(
        metric.features(moved[None]).numpy(), metric.features(x[None]).numpy(), atol=1e-12
    )


def energy_of_features(metric, x):
    """An invariant function of the features, and its gradient in them (1, k, 3)."""
    features = metric.features(x[None])
    return float(torch.sin(3 * features).sum()), 3 * torch.cos(3 * features)


def finite_difference_gradient(function, x, step=1e-6):
    gradient = np.zeros_like(x)
    for atom in range(len(x)):
        for axis in range(3):
            up, down = x.copy(), x.copy()
            up[atom, axis] += step
            down[atom, axis] -= step
            gradient[atom, axis] = (function(up) - function(down)) / (2 * step)
    return gradient


@pytest.mark.parametrize("name", ["CH3OH", "HCN"])
def test_gradients_map_to_the_features_and_back_as_the_chain_rule(name):
    metric = InverseDistanceMetric(molecule(name).numbers)
    x = rattled(name, scale=0.08, seed=5)[0]
    _, in_features = energy_of_features(metric, x)
    _, pullback = metric.features_and_pullback(torch.as_tensor(x)[None])
    in_positions = pullback(in_features)[0][0].numpy()  # (n, 3)
    expected = finite_difference_gradient(lambda y: energy_of_features(metric, y)[0], x)
    np.testing.assert_allclose(in_positions, expected, atol=1e-7)
    # mapped to the features, the positions' gradient comes back unchanged through B^T
    mapped = metric.feature_gradients(x[None], in_positions[None])
    _, pullback = metric.features_and_pullback(torch.as_tensor(x)[None])
    np.testing.assert_allclose(pullback(mapped)[0][0].numpy(), in_positions, atol=1e-10)


def test_a_straight_molecule_maps_its_gradient_without_its_bends():
    # at a straight HCN the bends change no distance: the stretches' gradient maps alone
    atoms = molecule("HCN")
    metric = InverseDistanceMetric(atoms.numbers)
    x = atoms.positions
    gradient = np.zeros_like(x)
    gradient[0, 2], gradient[2, 2] = 0.7, -0.7  # a stretch of the straight molecule
    mapped = metric.feature_gradients(x[None], gradient[None])
    assert np.isfinite(mapped.numpy()).all()
    _, pullback = metric.features_and_pullback(torch.as_tensor(x)[None])
    np.testing.assert_allclose(pullback(mapped)[0][0].numpy(), gradient, atol=1e-10)


def test_gp_on_inverse_distances_is_invariant_and_its_gradients_match_finite_differences():
    P, E, F = ethanol_observations(6)
    metric = InverseDistanceMetric(molecule("CH3CH2OH").numbers)
    gp = EnergyForceGP(kernel="cartesian", metric=metric, prior="mean").fit(P, E, F)
    mean, gradient = gp.predict(P, return_gradient=True)
    assert np.abs(mean - E).max() < 0.02 * (E.max() - E.min())
    assert np.abs(gradient + F).max() < 0.05 * np.abs(F).max()
    x = P[1] + 0.03 * np.random.default_rng(12).normal(size=P[1].shape)
    Q = random_rotation(13)
    mean, gradient = gp.predict(x, return_gradient=True)
    mean_moved, gradient_moved = gp.predict(x @ Q.T + 0.5, return_gradient=True)
    assert mean_moved == pytest.approx(mean, abs=1e-10)
    np.testing.assert_allclose(gradient_moved, gradient @ Q.T, atol=1e-9)
    assert_posterior_gradients_match_finite_differences(gp, x, [(0, 0), (4, 2), (7, 1)])


def test_representation_gives_the_metric_of_the_molecule_and_keeps_it():
    atoms = molecule("HCN")  # straight: the features need no configuration they describe
    representation = make_representation("inverse", atoms)
    positions = atoms.positions[None]
    current, _ = representation.metric(positions, atoms.numbers, 0, None, None)
    assert isinstance(current[1], InverseDistanceMetric)
    assert representation.invariant(current[1])
    assert representation.metric(positions, atoms.numbers, 0, None, current)[0] is current


@pytest.mark.parametrize(
    "atoms, words",
    [
        (molecule("H2"), "three atoms or more"),
        (molecule("CH4", cell=[8, 8, 8], pbc=True), "periodic"),
    ],
    ids=["two atoms", "periodic"],
)
def test_representation_refuses_what_it_cannot_describe(atoms, words):
    with pytest.raises(ValueError, match=words):
        InverseDistancePositions().check(atoms)


def test_booptimizer_on_inverse_distances_reaches_the_lbfgs_minimum():
    from ase.optimize import LBFGS

    from asebo import BOOptimizer
    from calculators import get_calculator

    start = molecule("CH3OH")
    start.rattle(0.1, seed=1)
    reference = start.copy()
    reference.calc = get_calculator("gfn2")
    LBFGS(reference, logfile=None).run(fmax=0.01, steps=200)
    atoms = start.copy()
    atoms.calc = get_calculator("gfn2")
    optimizer = BOOptimizer(atoms, kernel="inverse", logfile=None)
    assert optimizer.run(fmax=0.05, steps=60)
    assert isinstance(optimizer.gp.metric, InverseDistanceMetric)
    assert atoms.get_potential_energy() < reference.get_potential_energy() + 2e-3


def _chain_rule_posterior(P, E, F, x, gamma, noise):
    """Reference: the GP with the Gaussian kernel on the scaled inverse distances and
    the observed Cartesian gradients' covariances ``B_a^T (d^2 k / dp dp') B_b``
    (Koistinen et al., J. Chem. Theory Comput. 15, 6738 (2019), eq. 5), dense, prior
    mean the highest energy, signal variance one: mean, gradient (n, 3) and variance
    at x (n, 3)."""
    numbers = molecule("CH3CH2OH").numbers
    pairs = np.array([(i, j) for i in range(len(numbers)) for j in range(i + 1, len(numbers))])
    radii = np.array([RADII[z] for z in numbers])[pairs].sum(axis=1)

    def features(positions):  # p (d,), B = dp/dx (d, 3n)
        vectors = positions[pairs[:, 0]] - positions[pairs[:, 1]]
        r = np.linalg.norm(vectors, axis=1)
        slope = (-radii / r**3)[:, None] * vectors
        B = np.zeros((len(pairs), len(numbers), 3))
        B[np.arange(len(pairs)), pairs[:, 0]] = slope
        B[np.arange(len(pairs)), pairs[:, 1]] = -slope
        return radii / r, B.reshape(len(pairs), -1)

    def blocks(a, b):  # the (3n + 1)-square covariance of (E, dE/dx) at a and b
        (pa, Ba), (pb, Bb) = a, b
        delta = pa - pb
        k = np.exp(-0.5 * gamma * delta @ delta)
        hh = gamma * k * (np.eye(len(delta)) - gamma * np.outer(delta, delta))
        top = np.concatenate([[k], gamma * k * delta @ Bb])
        rest = np.concatenate([(-gamma * k * Ba.T @ delta)[:, None], Ba.T @ hh @ Bb], axis=1)
        return np.vstack([top, rest])

    observed = [features(p) for p in P]
    K = np.block([[blocks(a, b) for b in observed] for a in observed])
    block = 3 * len(numbers) + 1
    K += np.diag(np.tile([noise**2] + [noise**2 * gamma] * (block - 1), len(P)))
    prior = E.max()
    y = np.concatenate([np.concatenate([[e - prior], -f.ravel()]) for e, f in zip(E, F)])
    cross = np.hstack([blocks(features(x), b) for b in observed])  # (3n + 1, N)
    mean = cross @ np.linalg.solve(K, y)
    variance = 1.0 - cross[0] @ np.linalg.solve(K, cross[0])
    return prior + mean[0], mean[1:].reshape(-1, 3), variance


def test_gp_on_inverse_distances_observes_cartesian_gradients_as_the_chain_rule():
    """The gradients fix the features' gradient only where the features move: the
    posterior is the one of Cartesian gradient observations through the Jacobian."""
    P, E, F = ethanol_observations(6)
    gamma, noise = 4.0, 1e-5
    metric = InverseDistanceMetric(molecule("CH3CH2OH").numbers)
    gp = EnergyForceGP(
        kernel="cartesian",
        metric=metric,
        prior="max",
        gamma=gamma,
        fit_gamma=False,
        energy_noise=noise,
        gradient_noise=noise,
    ).fit(P, E, F)
    x = P[2] + 0.1 * np.random.default_rng(3).normal(size=P[2].shape)
    mean, gradient, variance = _chain_rule_posterior(P, E, F, x, gamma, noise)
    predicted, std, predicted_gradient = gp.predict(x, return_std=True, return_gradient=True)
    assert predicted == pytest.approx(mean, abs=1e-6)
    np.testing.assert_allclose(predicted_gradient, gradient, atol=1e-5 * np.abs(F).max())
    assert std**2 / gp.outputscale_ == pytest.approx(variance, rel=1e-4)


@pytest.mark.parametrize("trend", [0.0, 30.0])
def test_gp_on_inverse_distances_solves_beyond_max_size_as_densely(trend):
    """Conjugate gradients over every observation, beyond ``max_size`` rows, give the
    dense posterior mean, with and without an added term (the linear trend); the
    variance conditions on the selected configurations."""
    P, E, F = ethanol_observations(6)
    metric = InverseDistanceMetric(molecule("CH3CH2OH").numbers)
    options = dict(
        kernel="cartesian", metric=metric, prior="max", gamma=4.0, fit_gamma=False, trend=trend
    )
    dense = EnergyForceGP(**options).fit(P, E, F)
    iterative = EnergyForceGP(**options, max_size=90, cg_max_iter=500).fit(P, E, F)
    assert len(iterative.selected_) < len(P) and iterative.solve_info_.iterations > 0
    assert iterative.solve_info_.residual <= iterative.cg_tolerance
    x = P[2] + 0.1 * np.random.default_rng(3).normal(size=P[2].shape)
    mean, gradient = dense.predict(x, return_gradient=True)
    mean_cg, gradient_cg = iterative.predict(x, return_gradient=True)
    assert mean_cg == pytest.approx(mean, abs=1e-5)
    np.testing.assert_allclose(gradient_cg, gradient, atol=1e-4)


def test_covariances_of_a_later_fit_take_over_products_and_equal_those_formed_anew():
    """The products ``U_a^T U_b`` an earlier fit formed serve a later fit on more
    configurations (whose first bases are the earlier ones) and give its covariances as
    formed anew; an earlier fit on other configurations serves nothing."""
    rattle = rattled("CH3CH2OH", scale=0.05, seed=5, m=9)
    metric = InverseDistanceMetric(molecule("CH3CH2OH").numbers)
    bases = metric.observation_bases(rattle)  # (9, D, R)
    features = metric.features(rattle).reshape(len(rattle), -1)  # (9, D)
    rng = np.random.default_rng(0)

    def covariance(directions, select):
        select = torch.as_tensor(select)
        values = [torch.as_tensor(rng.uniform(0.5, 1.0, (len(select),) * 2)) for _ in "kac"]
        values = [v + v.T for v in values]  # symmetric, as a kernel's profile
        return directions.joint_dense(features[select], values, select), values

    def fresh(select, values):
        select = torch.as_tensor(select)
        return ObservedDirections(bases).joint_dense(features[select], values, select)

    earlier = ObservedDirections(bases[:6])
    for select in ([0, 1, 2, 3], [2, 3, 4, 5]):
        covariance(earlier, select)
    later = ObservedDirections(bases, earlier)
    for select in ([1, 2, 3, 6], [2, 4, 5, 7, 8], [0, 8]):  # partly, mostly, barely shared
        K, values = covariance(later, select)
        np.testing.assert_allclose(K, fresh(select, values), rtol=1e-13, atol=1e-15)
    # bases[3:] do not begin with the earlier bases[:6]: their products are not taken
    other = ObservedDirections(bases[3:], earlier)
    select = torch.tensor([0, 1, 2])
    values = [torch.as_tensor(rng.uniform(0.5, 1.0, (3, 3))) for _ in "kac"]
    values = [v + v.T for v in values]
    K = other.joint_dense(features[3:6], values, select)
    expected = ObservedDirections(bases[3:]).joint_dense(features[3:6], values, select)
    np.testing.assert_allclose(K, expected, rtol=1e-13, atol=1e-15)
