"""The linear trend kernel: its blocks in closed form, its products against the dense
matrix, and a GP with it: the slope carries beyond the data, on dense and CG paths."""

import numpy as np
import pytest
import torch
from test_gp import assert_posterior_gradients_match_finite_differences, samples

from asebo.kernels import CartesianKernel, SVDKernel
from asebo.kernels.operators import joint_covariance
from asebo.kernels.trend import CovarianceWithTerm, LinearTrend
from asebo.model.gp import EnergyForceGP


def features(b, d, seed):
    return torch.as_tensor(np.random.default_rng(seed).normal(size=(b, d)))


def test_dense_blocks_are_the_derivatives_of_the_dot_product():
    X, Z = features(2, 4, 0), features(3, 4, 1)
    c = 0.7
    K = LinearTrend(c).dense(X, Z).reshape(2, 5, 3, 5)
    for i in range(2):
        for j in range(3):
            # k = c x.z: dk/dz = c x, dk/dx = c z, d2k/dx dz = c I
            assert K[i, 0, j, 0].item() == pytest.approx(c * float(X[i] @ Z[j]))
            torch.testing.assert_close(K[i, 0, j, 1:], c * X[i])
            torch.testing.assert_close(K[i, 1:, j, 0], c * Z[j])
            torch.testing.assert_close(K[i, 1:, j, 1:], c * torch.eye(4, dtype=X.dtype))


def test_structured_products_match_the_dense_matrix():
    trend = LinearTrend(1.3)
    X, Z = features(3, 6, 2), features(5, 6, 3)
    rhs = features(5 * 7, 2, 4)
    torch.testing.assert_close(trend.matmul(X, Z, rhs), trend.dense(X, Z) @ rhs)
    torch.testing.assert_close(trend.energy_rows(X, Z), trend.dense(X, Z).reshape(3, 7, -1)[:, 0])
    variance, gradient = trend.prior_variance(X)
    torch.testing.assert_close(variance, torch.diagonal(trend.dense(X, X)).reshape(3, 7)[:, 0])
    torch.testing.assert_close(gradient, 2 * 1.3 * X)


def test_trended_covariance_is_the_sum_of_both_dense_matrices():
    P = torch.as_tensor(samples("H2O", m=4, seed=1)[1])  # (4, 3, 3)
    op = joint_covariance(P, 2.0, kernel=CartesianKernel())
    U = P.reshape(4, -1) - P[0].reshape(-1)
    trended = CovarianceWithTerm(op, LinearTrend(0.4), U)
    v = features(4 * 10, 1, 5)[:, 0]
    dense = op.to_dense() + LinearTrend(0.4).dense(U, U)
    torch.testing.assert_close(trended @ v, dense @ v)
    assert trended.shape == op.shape


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kernel_with_a_trend_is_positive_semidefinite(seed):
    P = torch.as_tensor(samples("CH4", m=6, seed=seed)[1])  # (6, 5, 3)
    U = P.reshape(6, -1) - P[seed].reshape(-1)
    for gamma, variance in [(0.5, 1e-3), (5.0, 30.0), (50.0, 1e3)]:
        dense = joint_covariance(P, gamma, kernel=CartesianKernel()).to_dense()
        dense = dense + LinearTrend(variance).dense(U, U)  # (96, 96)
        eigenvalues = torch.linalg.eigvalsh(dense)
        assert eigenvalues.min() > -1e-10 * eigenvalues.max()


def linear_energy(slope):
    """Energies and forces of E = slope . x on positions (m, n, 3)."""

    def observe(P):
        return np.einsum("mna,na->m", P, slope), -np.broadcast_to(slope, P.shape).copy()

    return observe


def test_with_a_trend_the_learned_slope_carries_beyond_the_length_scale():
    rng = np.random.default_rng(6)
    slope = rng.normal(size=(3, 3))
    P = rng.normal(scale=0.05, size=(3, 3, 3))
    E, F = linear_energy(slope)(P)
    far = P[0] + 3.0 * rng.normal(size=(3, 3))  # many length scales away
    options = {"kernel": "cartesian", "prior": 0.0, "fit_gamma": False, "gamma": 10.0}
    without = EnergyForceGP(**options).fit(P, E, F)
    trended = EnergyForceGP(trend=100.0, **options).fit(P, E, F)
    exact = float(np.sum(slope * far))
    assert abs(without.predict(far)) < 1e-3 * abs(exact)  # back to the prior mean
    assert trended.predict(far) == pytest.approx(exact, rel=0.05)
    _, gradient = trended.predict(far, return_gradient=True)
    np.testing.assert_allclose(gradient, slope, rtol=0.05, atol=0.05 * np.abs(slope).max())


@pytest.mark.parametrize("max_size", [1500, 60])
def test_posterior_with_a_trend_has_exact_gradients(max_size):
    _, P, E, F = samples("CH3OH", m=7, scale=0.05, seed=5)
    gp = EnergyForceGP(
        kernel="cartesian",
        fit_gamma=False,
        gamma=3.0,
        prior="mean",
        trend=30.0,
        max_size=max_size,
        energy_noise=0.05,
        gradient_noise=0.05,
        cg_max_iter=500,
    ).fit(P, E, F)
    assert (gp.solve_info_ is None) == (max_size == 1500)
    assert_posterior_gradients_match_finite_differences(gp, P[3] + 0.03, [(0, 0), (2, 1), (5, 2)])


def test_cg_over_every_observation_with_a_trend_agrees_with_the_dense_posterior():
    _, P, E, F = samples("CH3OH", m=7, scale=0.05, seed=7)
    options = dict(kernel="cartesian", fit_gamma=False, gamma=3.0, prior="mean", trend=30.0)
    dense = EnergyForceGP(**options).fit(P, E, F)
    cg = EnergyForceGP(max_size=60, cg_max_iter=2000, cg_tolerance=1e-11, **options).fit(P, E, F)
    assert cg.solve_info_.method == "cg" and cg.solve_info_.residual < 1e-11
    x = P[2] + 0.04
    mean_dense, grad_dense = dense.predict(x, return_gradient=True)
    mean_cg, grad_cg = cg.predict(x, return_gradient=True)
    assert mean_cg == pytest.approx(mean_dense, abs=1e-7)
    np.testing.assert_allclose(grad_cg, grad_dense, atol=1e-6)
    assert cg.predict(x, return_std=True)[1] >= dense.predict(x, return_std=True)[1] - 1e-9


@pytest.mark.parametrize("trend", [-1.0, True, "30"])
def test_a_trend_must_be_a_number_at_least_zero(trend):
    with pytest.raises(ValueError, match="trend"):
        EnergyForceGP(kernel="cartesian", trend=trend)


@pytest.mark.parametrize("kernel", ["svd", SVDKernel(radial="matern52")], ids=repr)
def test_a_trend_needs_the_cartesian_kernel(kernel):
    with pytest.raises(ValueError, match="kernel='cartesian'"):
        EnergyForceGP(kernel=kernel, trend=1.0)
    assert EnergyForceGP(kernel=CartesianKernel(radial="matern52"), trend=1.0).trend == 1.0
