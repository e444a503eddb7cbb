"""Kernel objects on configurations: their Gram matrices against independent computations,
invariance, the GP's blocks from their pair geometry, and names and refusals."""

import numpy as np
import pytest
import torch
from ase.build import molecule
from test_operators import reference_dense

from asebo.kernels import (
    CartesianKernel,
    GaussianKernel,
    SVDKernel,
    configuration_kernel,
    joint_covariance,
)
from asebo.kernels.configuration import KERNELS
from asebo.kernels.joint import joint_dense
from asebo.kernels.operators import JointStructure
from asebo.kernels.radial import Matern52, SquaredExponential

GAMMA = 0.7
# each kernel made with any options (gamma, radial): VARIANTS[name](**options)
VARIANTS = {
    "svd-proper": lambda **options: SVDKernel(proper=True, **options),
    "svd-orthogonal": lambda **options: SVDKernel(proper=False, **options),
    "cartesian": CartesianKernel,
}
variants = pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())


def configurations(name, m, scale=0.2, seed=0):
    X0 = molecule(name).positions
    rng = np.random.default_rng(seed)
    return np.stack([X0 + scale * rng.normal(size=X0.shape) for _ in range(m)])


def random_rotation(seed, proper=True):
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    Q *= np.sign(np.linalg.det(Q))
    return Q if proper else -Q


def aligned_distance(X, Z, proper):
    """``|X_c R - Z_c|^2`` for numpy's Kabsch map ``R`` (a reflection too unless ``proper``)."""
    Xc, Zc = X - X.mean(axis=0), Z - Z.mean(axis=0)
    U, _, Vt = np.linalg.svd(Xc.T @ Zc)
    D = np.eye(3)
    if proper:
        D[2, 2] = np.sign(np.linalg.det(U @ Vt))
    return ((Xc @ (U @ D @ Vt) - Zc) ** 2).sum()


def expected_gram(kernel, A, B):
    """``f(d)`` of every pair, with ``d`` and ``f`` computed without asebo."""
    if isinstance(kernel, SVDKernel):
        d = np.array([[aligned_distance(X, Z, kernel.proper) for Z in B] for X in A])
    else:
        d = np.array([[((X - Z) ** 2).sum() for Z in B] for X in A])
    if isinstance(kernel.radial, Matern52):  # Rasmussen and Williams, eq. 4.17
        rho = np.sqrt(5.0 * d * kernel.gamma)  # sqrt(5) r / l with l = gamma^-1/2
        return (1.0 + rho + rho**2 / 3.0) * np.exp(-rho)
    return np.exp(-0.5 * kernel.gamma * d)


@pytest.mark.parametrize("radial", ["se", "matern52"])
@variants
def test_gram_matrix_is_the_profile_of_the_distance(variant, radial):
    kernel = variant(gamma=GAMMA, radial=radial)
    A, B = configurations("CH3OH", 4, seed=1), configurations("CH3OH", 3, seed=2)
    gram = kernel(A, B)  # (4, 3)
    assert gram.shape == (4, 3) and gram.max() < 0.95  # far from k(X, X) = 1: a real comparison
    np.testing.assert_allclose(gram, expected_gram(kernel, A, B), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kernel(A.reshape(4, -1), B.reshape(3, -1)), gram, rtol=1e-14)
    square = kernel(A)
    np.testing.assert_allclose(square, square.T, atol=1e-14)
    np.testing.assert_allclose(kernel.diag(A), np.diagonal(square), atol=1e-14)
    np.testing.assert_allclose(kernel.diag(A), 1.0, atol=1e-14)


def test_cartesian_gram_is_the_gaussian_kernel_on_flattened_positions():
    A, B = configurations("H2O", 5, seed=3), configurations("H2O", 2, seed=4)
    expected = GaussianKernel(gamma=GAMMA / 2)(A.reshape(5, -1), B.reshape(2, -1))
    np.testing.assert_allclose(CartesianKernel(GAMMA)(A, B), expected, rtol=1e-13)


def moved(A, seed, proper=True):
    """Each configuration of A (m, n, 3) rotated (or reflected) and translated."""
    rng = np.random.default_rng(seed)
    return np.stack(
        [X @ random_rotation(seed + i, proper).T + rng.normal(size=3) for i, X in enumerate(A)]
    )


@pytest.mark.parametrize("radial", ["se", "matern52"])
def test_svd_gram_is_invariant_under_rigid_motions_and_the_cartesian_is_not(radial):
    A, B = configurations("CH3CH2OH", 3, seed=5), configurations("CH3CH2OH", 4, seed=6)
    for proper in (True, False):
        kernel = SVDKernel(GAMMA, proper, radial)
        gram = kernel(A, B)
        np.testing.assert_allclose(kernel(moved(A, 7), B), gram, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(kernel(A, moved(B, 8)), gram, rtol=1e-10, atol=1e-13)
        mirrored = kernel(moved(A, 9, proper=False), B)
        # a reflection is a rigid motion only for the paper's variant
        assert np.allclose(mirrored, gram, rtol=1e-10, atol=1e-13) == (not proper)
    cartesian = CartesianKernel(GAMMA, radial)
    gram = cartesian(A, B)
    assert np.abs(cartesian(moved(A, 7), B) - gram).max() > 0.1 * gram.max()
    assert np.abs(cartesian(A, moved(B, 8)) - gram).max() > 0.1 * gram.max()


@pytest.mark.parametrize("radial", ["se", "matern52"])
@variants
def test_gram_is_the_energy_block_of_the_gps_joint_covariance(variant, radial):
    kernel = variant(gamma=GAMMA, radial=radial)
    P = configurations("CH3OH", 5, seed=10)
    block = 3 * P.shape[1] + 1
    joint = joint_covariance(P, GAMMA, kernel).to_dense().numpy()
    np.testing.assert_allclose(kernel(P), joint[::block, ::block], rtol=0, atol=1e-15)
    X, Z = (torch.as_tensor(configurations("CH3OH", m, seed=s)) for m, s in ((2, 11), (3, 12)))
    cross = joint_dense(kernel.pair_geometry(X, Z), GAMMA).numpy()
    np.testing.assert_allclose(kernel(X, Z), cross[::block, ::block], rtol=0, atol=1e-15)


@variants
def test_blocks_from_the_pair_geometry_are_the_kernels_derivative_blocks(variant):
    # joint_dense of the pair geometry against svd_kernel_blocks (or the Cartesian blocks)
    kernel = variant()
    X, Z = configurations("C6H6", 2, 0.1, seed=13), configurations("C6H6", 3, 0.1, seed=14)
    geometry = kernel.pair_geometry(torch.as_tensor(X), torch.as_tensor(Z))
    assert geometry.centred == kernel.centred == isinstance(kernel, SVDKernel)
    assert geometry.radial is kernel.radial
    expected = reference_dense(X, Z, 0.8, kernel)
    torch.testing.assert_close(joint_dense(geometry, 0.8), expected, rtol=0, atol=1e-12)


def test_names_make_the_kernel_objects():
    assert KERNELS == {"svd": SVDKernel, "cartesian": CartesianKernel}
    svd = configuration_kernel("svd")
    assert isinstance(svd, SVDKernel) and svd.proper
    assert isinstance(svd.radial, SquaredExponential)
    made = configuration_kernel("svd", proper=False, radial="matern52")
    assert not made.proper and isinstance(made.radial, Matern52)
    cartesian = configuration_kernel("cartesian", radial=Matern52())
    assert type(cartesian) is CartesianKernel and isinstance(cartesian.radial, Matern52)
    assert configuration_kernel(made) is made


def test_wrong_kernel_arguments_are_refused_with_what_to_pass():
    with pytest.raises(ValueError, match=r"kernel must be one of \['cartesian', 'svd'\]"):
        configuration_kernel("rbf")
    with pytest.raises(TypeError, match=r"SVDKernel\(proper=True\) or CartesianKernel"):
        configuration_kernel(GaussianKernel())
    with pytest.raises(ValueError, match=r"radial belong to the kernel object: pass SVDKernel"):
        configuration_kernel(SVDKernel(), radial="se")
    with pytest.raises(ValueError, match="the 'cartesian' kernel takes no proper: its options"):
        configuration_kernel("cartesian", proper=False)
    with pytest.raises(ValueError, match="proper must be True or False"):
        configuration_kernel("svd", proper="nonsense")
    with pytest.raises(ValueError, match="radial must be one of"):
        SVDKernel(radial="rbf")
    P = configurations("H2O", 2)
    with pytest.raises(TypeError, match="configuration kernel"):
        JointStructure("svd")
    with pytest.raises(TypeError, match="configuration kernel"):
        joint_covariance(P, 1.0, kernel="cartesian")
    with pytest.raises(TypeError, match="configuration kernel"):
        joint_covariance(P, 1.0, kernel=GaussianKernel())


@variants
def test_bad_geometries_are_refused(variant):
    kernel = variant()
    with pytest.raises(ValueError, match="same atoms"):
        kernel(configurations("H2O", 2), configurations("CH4", 2))
    with pytest.raises(ValueError, match="NaN"):
        kernel(np.full((2, 3, 3), np.nan))
    with pytest.raises(ValueError, match=r"\(m, n_atoms, 3\)"):
        kernel(np.zeros((2, 3, 2)))
