"""Radial profiles k = f(d): closed forms, derivative blocks against finite differences,
invariance and positive semidefiniteness of the joint covariance, and the GP with them."""

import numpy as np
import pytest
import torch
from ase.build import molecule
from test_gp import assert_posterior_gradients_match_finite_differences

from asebo.kernels import CartesianKernel, SVDKernel, joint_covariance
from asebo.kernels.joint import joint_dense
from asebo.kernels.radial import Matern52, SquaredExponential, radial_profile
from asebo.kernels.svd import svd_distance
from asebo.model.gp import EnergyForceGP
from calculators import get_calculator

PROFILES = [SquaredExponential(), Matern52()]
# the configuration kernels, each made with a radial profile: VARIANTS[i](profile)
VARIANTS = [
    lambda radial: SVDKernel(proper=True, radial=radial),
    lambda radial: SVDKernel(proper=False, radial=radial),
    lambda radial: CartesianKernel(radial=radial),
]
VARIANT_IDS = ["svd-proper", "svd-orthogonal", "cartesian"]


def configurations(name, m, scale=0.1, seed=0):
    X0 = molecule(name).positions
    rng = np.random.default_rng(seed)
    return np.stack([X0 + scale * rng.normal(size=X0.shape) for _ in range(m)])


def kernel_value(kernel, X, Z, gamma):
    """``f(d(X, Z))`` from the distance alone: the reference the blocks must differentiate."""
    if kernel.centred:
        d = svd_distance(X, Z, kernel.proper)
    else:
        d = ((X - Z) ** 2).sum()
    return kernel.radial(torch.as_tensor(d, dtype=torch.float64), gamma)[0].item()


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_profile_derivatives_are_the_scaled_derivatives_of_f(profile):
    gamma, h = 1.7, 1e-6
    d = torch.tensor([0.05, 0.3, 1.0, 2.5], dtype=torch.float64)
    k, a, c = profile(d, gamma)
    kp, ap, _ = profile(d + h, gamma)
    km, am, _ = profile(d - h, gamma)
    torch.testing.assert_close(a, -2.0 * (kp - km) / (2 * h), rtol=1e-7, atol=0)
    torch.testing.assert_close(c, -2.0 * (ap - am) / (2 * h), rtol=1e-6, atol=0)
    k0, a0, _ = profile(torch.zeros(1, dtype=torch.float64), gamma)
    assert k0.item() == 1.0
    assert a0.item() == pytest.approx(profile.slope_at_zero(gamma), rel=1e-15)


def test_matern_closed_form():
    r, ell = 0.7, 0.9
    rho = np.sqrt(5.0) * r / ell
    expected = (1 + rho + rho**2 / 3) * np.exp(-rho)
    k, _, _ = Matern52()(torch.tensor([r**2], dtype=torch.float64), 1.0 / ell**2)
    assert k.item() == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_joint_blocks_match_finite_differences(profile, variant):
    kernel = variant(profile)
    X, Z = configurations("CH3OH", 2, scale=0.15, seed=3)
    gamma, h = 0.9, 1e-5
    geometry = kernel.pair_geometry(torch.as_tensor(X[None]), torch.as_tensor(Z[None]))
    dense = joint_dense(geometry, gamma).numpy()  # (3n + 1, 3n + 1)
    assert dense[0, 0] == pytest.approx(kernel_value(kernel, X, Z, gamma))

    def energy_row(X_, Z_):
        g = kernel.pair_geometry(torch.as_tensor(X_[None]), torch.as_tensor(Z_[None]))
        return joint_dense(g, gamma).numpy()[0]  # k, then dk/dZ

    for atom, axis in [(0, 0), (1, 2), (4, 1)]:
        step = np.zeros_like(X)
        step[atom, axis] = h
        index = 1 + 3 * atom + axis
        dk_dZ = (
            kernel_value(kernel, X, Z + step, gamma) - kernel_value(kernel, X, Z - step, gamma)
        ) / (2 * h)
        dk_dX = (
            kernel_value(kernel, X + step, Z, gamma) - kernel_value(kernel, X - step, Z, gamma)
        ) / (2 * h)
        assert dense[0, index] == pytest.approx(dk_dZ, rel=1e-6, abs=1e-10)
        assert dense[index, 0] == pytest.approx(dk_dX, rel=1e-6, abs=1e-10)
        mixed = (energy_row(X + step, Z) - energy_row(X - step, Z))[1:] / (2 * h)
        np.testing.assert_allclose(dense[index, 1:], mixed, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_matern_structured_product_equals_its_dense_form(variant):
    kernel = variant(Matern52())
    P = torch.as_tensor(configurations("CH3CH2OH", 5))
    op = joint_covariance(P, gamma=0.8, kernel=kernel)
    dense = joint_dense(kernel.pair_geometry(P, P), 0.8)
    rhs = torch.randn(
        dense.shape[0], 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )
    assert (op @ rhs - dense @ rhs).norm() <= 1e-10 * (dense @ rhs).norm()
    torch.testing.assert_close(op._diagonal(), torch.diagonal(dense), rtol=0, atol=1e-12)
    torch.testing.assert_close(op.to_dense(), dense, rtol=0, atol=1e-12)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_joint_covariance_is_invariant_under_rigid_motions(profile):
    P = configurations("CH3CH2OH", 4, seed=4)
    rng = np.random.default_rng(5)
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    Q *= np.sign(np.linalg.det(Q))
    moved = P.copy()
    moved[1] = P[1] @ Q.T + rng.normal(size=3)
    K = joint_covariance(P, gamma=1.1, kernel=SVDKernel(radial=profile)).to_dense()
    K_moved = joint_covariance(moved, gamma=1.1, kernel=SVDKernel(radial=profile)).to_dense()
    block = 3 * P.shape[1] + 1
    rotate = torch.block_diag(torch.eye(1), *[torch.as_tensor(Q)] * P.shape[1]).double()
    expected = K.clone()
    expected[block : 2 * block] = rotate @ K[block : 2 * block]
    expected[:, block : 2 * block] = K[:, block : 2 * block] @ rotate.T
    expected[block : 2 * block, block : 2 * block] = (
        rotate @ K[block : 2 * block, block : 2 * block] @ rotate.T
    )
    torch.testing.assert_close(K_moved, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_matern_covariance_is_positive_semidefinite_where_the_squared_exponential_is(seed):
    for variant, name in zip(VARIANTS, VARIANT_IDS):
        P = configurations("CH3CH2OH", 6, scale=0.1, seed=seed)
        eigenvalues = {}
        for profile in PROFILES:
            K = joint_covariance(P, gamma=1.0, kernel=variant(profile))
            eigenvalues[profile.name] = torch.linalg.eigvalsh(K.to_dense())
        scale = eigenvalues["matern52"].max()
        if eigenvalues["se"].min() >= -1e-10 * eigenvalues["se"].max():
            assert eigenvalues["matern52"].min() >= -1e-10 * scale, name


def test_gp_with_the_matern_profile_interpolates_and_differentiates():
    atoms = molecule("H2O")
    atoms.calc = get_calculator("gfn2")
    rng = np.random.default_rng(0)
    P, E, F = [], [], []
    for _ in range(6):
        atoms.positions = molecule("H2O").positions + 0.05 * rng.normal(size=(3, 3))
        P.append(atoms.get_positions())
        E.append(atoms.get_potential_energy())
        F.append(atoms.get_forces())
    P, E, F = np.array(P), np.array(E), np.array(F)
    gp = EnergyForceGP(radial="matern52", prior="mean").fit(P, E, F)
    mean, gradient = gp.predict(P, return_gradient=True)
    assert np.abs(mean - E).max() < 0.02 * (E.max() - E.min())
    assert np.abs(gradient + F).max() < 0.05 * np.abs(F).max()
    x = P[0] + 0.05 * rng.normal(size=(3, 3))
    assert_posterior_gradients_match_finite_differences(gp, x, [(0, 0), (1, 2), (2, 1)])


def test_profiles_are_named_and_bad_names_refused():
    assert isinstance(radial_profile("matern52"), Matern52)
    assert isinstance(radial_profile("se"), SquaredExponential)
    with pytest.raises(ValueError, match="radial must be one of"):
        radial_profile("gaussian")
    with pytest.raises(TypeError):
        radial_profile(3)
    with pytest.raises(ValueError, match="radial must be one of"):
        EnergyForceGP(radial="rbf")
