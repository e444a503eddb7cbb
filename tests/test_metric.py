"""The anisotropic metric from a model Hessian: the factor, invariance, the gradient maps,
and the GP on its features."""

import numpy as np
import pytest
import torch
from ase.build import molecule
from test_gp import assert_posterior_gradients_match_finite_differences

from asebo.kernels import CartesianKernel, SVDKernel
from asebo.model.gp import EnergyForceGP
from asebo.model.lindh import LindhModel
from asebo.model.metric import EIGENVALUE_FLOOR, HessianMetric, metric_factor, model_hessian
from calculators import get_calculator


def rattled(name, scale=0.05, seed=0, m=1):
    X0 = molecule(name).positions
    rng = np.random.default_rng(seed)
    return np.stack([X0 + scale * rng.normal(size=X0.shape) for _ in range(m)])


def random_rotation(seed):
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    return Q * np.sign(np.linalg.det(Q))


@pytest.fixture(scope="module")
def ethanol_metric():
    atoms = molecule("CH3CH2OH")
    model = LindhModel(atoms.positions, atoms.numbers)
    return model, HessianMetric.from_model(model, atoms.positions)


def test_model_hessian_matches_the_energy_and_has_six_rigid_modes():
    atoms = molecule("CH3CH2OH")
    x0 = atoms.positions + 0.05 * np.random.default_rng(1).normal(size=atoms.positions.shape)
    model = LindhModel(atoms.positions, atoms.numbers)
    hessian = model_hessian(model, x0)
    direction = np.random.default_rng(2).normal(size=x0.shape)
    h = 1e-3
    energies = [model.energy_and_forces(x0 + s * h * direction)[0] for s in (-1, 0, 1)]
    curvature = (energies[0] - 2 * energies[1] + energies[2]) / h**2
    assert direction.reshape(-1) @ hessian @ direction.reshape(-1) == pytest.approx(
        curvature, rel=1e-4
    )
    eigenvalues = np.linalg.eigvalsh(model_hessian(model, atoms.positions))
    assert np.abs(eigenvalues[:6]).max() < 1e-6 * eigenvalues.max()
    assert eigenvalues[6] > 1e-3 * eigenvalues.max()


@pytest.mark.parametrize("power", [0.0, 0.5, 1.0])
def test_metric_factor_is_the_normalised_hessian_power(power):
    atoms = molecule("CH3CH2OH")
    hessian = model_hessian(LindhModel(atoms.positions, atoms.numbers), atoms.positions)
    L = metric_factor(hessian, power)
    eigenvalues, vectors = np.linalg.eigh(hessian)
    floor = max(eigenvalues[6], EIGENVALUE_FLOOR * eigenvalues[-1])
    scales = np.clip(eigenvalues, floor, None) ** power
    scales /= np.exp(np.log(scales).mean())
    np.testing.assert_allclose(L.T @ L, vectors @ np.diag(scales) @ vectors.T, atol=1e-10)
    assert np.prod(np.linalg.svd(L, compute_uv=False) ** 2) == pytest.approx(1.0, rel=1e-8)
    if power == 0.0:
        np.testing.assert_allclose(L.T @ L, np.eye(len(L)), atol=1e-12)


def test_free_motions_of_a_complex_get_a_bounded_length_scale():
    water = molecule("H2O")
    other = water.copy()
    other.translate([0.0, 0.0, 2.9])
    dimer = water + other  # the model barely couples the two molecules
    hessian = model_hessian(LindhModel(dimer.positions, dimer.numbers), dimer.positions)
    eigenvalues = np.linalg.eigvalsh(hessian)
    assert eigenvalues[6] < EIGENVALUE_FLOOR * eigenvalues[-1]
    lengths = 1.0 / np.linalg.svd(metric_factor(hessian, 0.5), compute_uv=False)
    assert lengths.max() / lengths.min() == pytest.approx(EIGENVALUE_FLOOR ** (-0.25))


def test_metric_without_bonds_is_the_identity():
    np.testing.assert_array_equal(metric_factor(np.zeros((6, 6))), np.eye(6))


def test_features_are_invariant_to_rigid_motions(ethanol_metric):
    _, metric = ethanol_metric
    x = rattled("CH3CH2OH", seed=3)
    Q = random_rotation(4)
    moved = x @ Q.T + np.array([0.3, -1.2, 2.0])
    torch.testing.assert_close(metric.features(moved), metric.features(x), rtol=0, atol=1e-12)


def test_feature_gradients_are_the_gradient_in_the_features(ethanol_metric):
    model, metric = ethanol_metric
    x = rattled("CH3CH2OH", seed=5)
    Q = random_rotation(6)
    x = x @ Q.T + 1.0  # far from the reference frame: the rotation matters
    _, forces = model.energy_and_forces(x[0])
    in_features = metric.feature_gradients(x, -forces[None])[0].reshape(-1).numpy()
    psi = metric.features(x)[0].reshape(-1).numpy()
    inverse = metric.inverse.numpy()

    def energy(features):  # the model as a function of the features
        return model.energy_and_forces((inverse @ features).reshape(-1, 3))[0]

    h = 1e-5
    for i in [0, 7, 15, 26]:
        step = np.zeros_like(psi)
        step[i] = h
        fd = (energy(psi + step) - energy(psi - step)) / (2 * h)
        assert in_features[i] == pytest.approx(fd, rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("align", [True, False])
def test_pullback_is_the_chain_rule_through_the_alignment(ethanol_metric, align):
    model, _ = ethanol_metric
    reference = molecule("CH3CH2OH").positions
    metric = HessianMetric.from_model(model, reference, align=align)
    assert_pullback_matches_finite_differences(
        metric, rattled("CH3CH2OH", seed=7) @ random_rotation(8).T
    )


def assert_pullback_matches_finite_differences(metric, x):
    """The pullback of a metric at ``x`` (1, n, 3) against central differences of a
    smooth function of its features."""
    weights = torch.as_tensor(np.random.default_rng(9).normal(size=x.shape))

    def f(positions):
        psi = metric.features(positions)
        return float((weights * psi).sum() + 0.3 * (psi**2).sum())

    psi, pullback = metric.features_and_pullback(torch.as_tensor(x))
    (gradient,) = pullback(weights + 0.6 * psi)
    h = 1e-6
    for atom, axis in [(0, 0), (3, 1), (8, 2)]:
        step = np.zeros_like(x)
        step[0, atom, axis] = h
        fd = (f(x + step) - f(x - step)) / (2 * h)
        assert gradient[0, atom, axis].item() == pytest.approx(fd, rel=1e-6, abs=1e-8)


def ethanol_observations(m):
    """Positions (m, 9, 3), GFN2-xTB energies (m,) and forces (m, 9, 3) of ethanol
    rattled by 0.04 Å."""
    atoms = molecule("CH3CH2OH")
    atoms.calc = get_calculator("gfn2")
    P = rattled("CH3CH2OH", scale=0.04, seed=11, m=m)
    E, F = [], []
    for p in P:
        atoms.positions = p
        E.append(atoms.get_potential_energy())
        F.append(atoms.get_forces())
    return P, np.array(E), np.array(F)


@pytest.fixture(scope="module")
def ethanol_data():
    return ethanol_observations(6)


@pytest.fixture(scope="module")
def metric_gp(ethanol_data, ethanol_metric):
    P, E, F = ethanol_data
    _, metric = ethanol_metric
    return EnergyForceGP(kernel="cartesian", metric=metric, prior="mean").fit(P, E, F)


def test_gp_on_the_features_interpolates_cartesian_forces(ethanol_data, metric_gp):
    P, E, F = ethanol_data
    mean, gradient = metric_gp.predict(P, return_gradient=True)
    assert np.abs(mean - E).max() < 0.02 * (E.max() - E.min())
    assert np.abs(gradient + F).max() < 0.05 * np.abs(F).max()


def test_gp_on_the_features_is_invariant_and_its_gradients_match_finite_differences(
    ethanol_data, metric_gp
):
    P, _, _ = ethanol_data
    x = P[1] + 0.03 * np.random.default_rng(12).normal(size=P[1].shape)
    Q = random_rotation(13)
    mean, std, gradient = metric_gp.predict(x, return_std=True, return_gradient=True)
    mean_moved, std_moved, gradient_moved = metric_gp.predict(
        x @ Q.T + 0.5, return_std=True, return_gradient=True
    )
    assert mean_moved == pytest.approx(mean, abs=1e-10)
    assert std_moved == pytest.approx(std, rel=1e-8)
    np.testing.assert_allclose(gradient_moved, gradient @ Q.T, atol=1e-9)
    assert_posterior_gradients_match_finite_differences(metric_gp, x, [(0, 0), (4, 2), (7, 1)])


@pytest.mark.parametrize("kernel", ["svd", SVDKernel(proper=False)], ids=repr)
def test_a_metric_needs_the_cartesian_kernel(ethanol_metric, kernel):
    with pytest.raises(ValueError, match="kernel='cartesian'"):
        EnergyForceGP(kernel=kernel, metric=ethanol_metric[1])
    assert EnergyForceGP(kernel=CartesianKernel(), metric=ethanol_metric[1]).metric is not None


@pytest.mark.parametrize("kernel", ["anisotropic", "internal"])
def test_optimizer_metric_follows_the_recentred_lindh_model(kernel):
    from asebo import BOOptimizer

    atoms = molecule("CH3CH2OH")
    atoms.rattle(0.1, seed=2)
    atoms.calc = get_calculator("gfn2")
    opt = BOOptimizer(atoms, logfile=None, recentre=0.0, kernel=kernel)
    centres = set()
    for _ in opt.irun(fmax=0.05, steps=5):
        if not hasattr(opt.gp, "gamma_"):  # not fitted yet
            continue
        centre = opt.prior.centre
        centres.add(centre)
        reference = opt.positions_seen[centre]
        if kernel == "anisotropic":
            expected = torch.as_tensor(reference - reference.mean(axis=0))
            torch.testing.assert_close(opt.gp.metric.reference, expected, rtol=0, atol=0)
        else:  # the reference is the origin of the internal features
            assert opt.gp.metric.features(reference[None]).abs().max() < 1e-12
    assert len(centres) > 1  # the model was rebuilt, and the metric with it
