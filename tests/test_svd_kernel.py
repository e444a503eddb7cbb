"""The SVD kernel and its derivative blocks against finite differences and invariances."""

import numpy as np
import pytest
import torch
from ase.build import molecule
from scipy.spatial.transform import Rotation

from asebo.kernels import SVDKernel, svd_kernel_blocks, svd_kernel_blocks_batched
from asebo.kernels.svd import optimal_alignment, svd_distance

GAMMA = 0.6
SF6 = np.array(
    [
        [0, 0, 0],
        [1.56, 0, 0],
        [-1.56, 0, 0],
        [0, 1.56, 0],
        [0, -1.56, 0],
        [0, 0, 1.56],
        [0, 0, -1.56],
    ],
    dtype=float,
)


def geometry(name):
    return SF6.copy() if name == "SF6" else molecule(name).positions


def finite_difference_blocks(X, Z, proper, h=1e-5):
    """Central differences of k (for dk/dX, dk/dZ) and of dk/dZ (for the mixed block)."""
    n = len(X)
    dX, dZ, d2 = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((3 * n, 3 * n))
    for a in range(n):
        for i in range(3):
            step = np.zeros((n, 3))
            step[a, i] = h
            plus = svd_kernel_blocks(X + step, Z, GAMMA, proper)
            minus = svd_kernel_blocks(X - step, Z, GAMMA, proper)
            dX[a, i] = (plus[0] - minus[0]) / (2 * h)
            d2[3 * a + i] = ((plus[2] - minus[2]) / (2 * h)).ravel()
            dZ[a, i] = (
                svd_kernel_blocks(X, Z + step, GAMMA, proper)[0]
                - svd_kernel_blocks(X, Z - step, GAMMA, proper)[0]
            ) / (2 * h)
    return dX, dZ, d2


def perturbed(X, scale, seed, mirror=False):
    rng = np.random.default_rng(seed)
    Z = X * np.array([1.0, 1.0, -1.0]) if mirror else X.copy()
    return Z + scale * rng.normal(size=X.shape)


@pytest.mark.parametrize("proper", [True, False])
@pytest.mark.parametrize("name", ["H2O", "NH3", "CH3OH", "CH4", "SF6"])
@pytest.mark.parametrize("mirror", [False, True])
def test_blocks_match_finite_differences(name, proper, mirror):
    # non-planar X: the kernel is smooth here in both variants, even for the
    # degenerate singular values of the symmetric tops CH4 and SF6
    X = perturbed(geometry(name), 0.03, seed=1) if name == "H2O" else geometry(name)
    Z = perturbed(X, 0.1, seed=2, mirror=mirror)
    k, dX, dZ, d2 = svd_kernel_blocks(X, Z, GAMMA, proper)
    fdX, fdZ, fd2 = finite_difference_blocks(X, Z, proper)
    assert 0 < k <= 1
    np.testing.assert_allclose(dX, fdX, atol=1e-8)
    np.testing.assert_allclose(dZ, fdZ, atol=1e-8)
    np.testing.assert_allclose(d2, fd2, atol=1e-7)


@pytest.mark.parametrize("name", ["H2O", "C6H6", "C4H4O"])
def test_proper_blocks_match_finite_differences_for_planar_molecules(name):
    X = geometry(name)  # exactly planar
    for Z in (X.copy(), perturbed(X, 0.05, seed=3)):
        k, dX, dZ, d2 = svd_kernel_blocks(X, Z, GAMMA, proper=True)
        fdX, fdZ, fd2 = finite_difference_blocks(X, Z, proper=True)
        np.testing.assert_allclose(dX, fdX, atol=1e-8)
        np.testing.assert_allclose(dZ, fdZ, atol=1e-8)
        np.testing.assert_allclose(d2, fd2, atol=1e-7)


@pytest.mark.parametrize("proper", [True, False])
@pytest.mark.parametrize("name", ["CO2", "C2H2", "H2"])
def test_linear_molecules_are_finite_and_match_along_the_axis(name, proper):
    X = geometry(name)
    axis = X[-1] - X[0]
    axis /= np.linalg.norm(axis)
    rng = np.random.default_rng(4)
    Z = X + 0.05 * rng.normal(size=len(X))[:, None] * axis  # stretched, still linear
    for other in (Z, perturbed(X, 0.05, seed=5)):
        blocks = svd_kernel_blocks(X, other, GAMMA, proper)
        assert all(np.isfinite(b).all() for b in blocks)
    k, dX, dZ, d2 = svd_kernel_blocks(X, Z, GAMMA, proper)
    fdX, fdZ, fd2 = finite_difference_blocks(X, Z, proper)
    np.testing.assert_allclose(dX, fdX, atol=1e-8)
    np.testing.assert_allclose(dZ, fdZ, atol=1e-8)
    # second derivatives exist along the axis, where the molecule stays linear
    along = np.kron(np.eye(len(X)), axis[None, :])  # (n, 3n): axial coordinate of each atom
    np.testing.assert_allclose(along @ d2 @ along.T, along @ fd2 @ along.T, atol=1e-7)


def random_rotation(seed, proper=True):
    R = Rotation.random(random_state=seed).as_matrix()
    return R if proper else R @ np.diag([1.0, 1.0, -1.0])


@pytest.mark.parametrize("proper", [True, False])
def test_rigid_motions_leave_the_kernel_unchanged(proper):
    X = geometry("CH3OH")
    Z = perturbed(X, 0.2, seed=6)
    k, dX, dZ, _ = svd_kernel_blocks(X, Z, GAMMA, proper)
    R = random_rotation(7)
    shift = np.array([0.3, -1.2, 2.0])
    k_moved, dX_moved, dZ_moved, _ = svd_kernel_blocks(X @ R.T + shift, Z, GAMMA, proper)
    assert k_moved == pytest.approx(k, abs=1e-10)
    np.testing.assert_allclose(dX_moved, dX @ R.T, atol=1e-10)  # the gradient turns with X
    np.testing.assert_allclose(dZ_moved, dZ, atol=1e-10)
    k_z = svd_kernel_blocks(X, Z @ random_rotation(8).T - shift, GAMMA, proper)[0]
    assert k_z == pytest.approx(k, abs=1e-10)


def test_reflection_invariance_only_in_the_papers_variant():
    X = geometry("CH3OH")
    Z = perturbed(X, 0.1, seed=9)
    mirror = Z @ random_rotation(10, proper=False).T
    k = svd_kernel_blocks(X, Z, GAMMA, proper=False)[0]
    assert svd_kernel_blocks(X, mirror, GAMMA, proper=False)[0] == pytest.approx(k, abs=1e-10)
    # a chiral-looking configuration differs from its mirror image under proper rotations
    assert svd_kernel_blocks(X, mirror, GAMMA, proper=True)[0] < k - 1e-3


def test_distance_is_the_aligned_squared_distance():
    X = geometry("C2H6")
    R = random_rotation(11)
    Z = perturbed(X, 0.05, seed=12) @ R.T + 1.0
    Zc, Xc = Z - Z.mean(0), X - X.mean(0)
    G = optimal_alignment(torch.tensor(Xc.T @ Zc)).numpy()
    expected = ((Xc - Zc @ G.T) ** 2).sum()
    assert svd_distance(X, Z) == pytest.approx(expected, rel=1e-12)
    assert np.allclose(G, R.T, atol=0.05) and np.linalg.det(G) == pytest.approx(1.0)


def test_block_symmetry():
    X = geometry("CH3OH")
    Z = perturbed(X, 0.15, seed=13)
    for proper in (True, False):
        k, dX, dZ, d2 = svd_kernel_blocks(X, Z, GAMMA, proper)
        k_t, dX_t, dZ_t, d2_t = svd_kernel_blocks(Z, X, GAMMA, proper)
        assert k == pytest.approx(k_t, abs=1e-14)
        np.testing.assert_allclose(dX, dZ_t, atol=1e-14)
        np.testing.assert_allclose(d2, d2_t.T, atol=1e-12)


def test_batched_blocks_equal_pairwise_blocks():
    X0 = geometry("NH3")
    Xs = np.stack([perturbed(X0, 0.1, seed=s) for s in range(3)])
    Zs = np.stack([perturbed(X0, 0.1, seed=s) for s in range(3, 5)])
    batched = svd_kernel_blocks_batched(Xs, Zs, GAMMA)
    for i in range(3):
        for j in range(2):
            single = svd_kernel_blocks(Xs[i], Zs[j], GAMMA)
            for b, s in zip(batched, single):
                np.testing.assert_allclose(b[i, j], s, atol=1e-14)


def test_autograd_gives_the_derivative_blocks():
    X0 = geometry("CH4")
    X = torch.tensor(perturbed(X0, 0.05, seed=14), requires_grad=True)
    Z = torch.tensor(perturbed(X0, 0.05, seed=15))
    k, dX, dZ, d2 = svd_kernel_blocks(X, Z, GAMMA)
    (grad_k,) = torch.autograd.grad(k, X, retain_graph=True)
    torch.testing.assert_close(grad_k, dX, atol=1e-12, rtol=0)
    weights = torch.randn(Z.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    (grad_dZ,) = torch.autograd.grad((dZ * weights).sum(), X)
    torch.testing.assert_close(grad_dZ.reshape(-1), d2 @ weights.reshape(-1), atol=1e-12, rtol=0)


def test_autograd_through_the_alignment_is_finite_for_symmetric_tops():
    # torch.linalg.svd's own backward divides by s_i^2 - s_j^2: NaN when X = Z = CH4
    X = torch.tensor(geometry("CH4"), requires_grad=True)
    Z = torch.tensor(geometry("CH4"))
    _, _, dZ, _ = svd_kernel_blocks(X, Z, GAMMA)
    (grad,) = torch.autograd.grad(dZ.sum(), X)
    assert torch.isfinite(grad).all()


def second_difference_profile(proper, steps):
    """k along one atom of planar benzene moved out of plane, against a non-planar Z."""
    X = geometry("C6H6")
    Z = perturbed(X, 0.02, seed=16)
    values = []
    for eps in steps:
        moved = X.copy()
        moved[0, 2] += eps
        values.append(svd_kernel_blocks(moved, Z, GAMMA, proper)[0])
    return np.array(values)


def test_proper_variant_is_smooth_through_planarity_and_the_papers_is_not():
    h = 1e-4
    steps = np.array([-h, 0.0, h])
    for proper, smooth in ((True, True), (False, False)):
        minus, centre, plus = second_difference_profile(proper, steps)
        curvature = (plus - 2 * centre + minus) / h**2
        # a smooth k has a bounded second difference; a V-shaped one grows like 1/h
        assert (abs(curvature) < 10.0) == smooth, (proper, curvature)


def test_svd_kernel_object_gives_the_gram_matrix():
    X0 = geometry("H2O")
    Xs = np.stack([perturbed(X0, 0.1, seed=s) for s in range(4)])
    gram = SVDKernel(gamma=GAMMA)(Xs)
    expected = [[svd_kernel_blocks(a, b, GAMMA)[0] for b in Xs] for a in Xs]
    np.testing.assert_allclose(gram, expected, atol=1e-14)
    np.testing.assert_allclose(SVDKernel(gamma=GAMMA)(Xs.reshape(4, -1)), gram)


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="same atoms"):
        svd_kernel_blocks(np.zeros((3, 3)), np.zeros((4, 3)), GAMMA)
    with pytest.raises(ValueError, match="NaN"):
        svd_kernel_blocks(np.full((3, 3), np.nan), np.zeros((3, 3)), GAMMA)
    with pytest.raises(ValueError, match=r"\(\.\.\., n_atoms, 3\)"):
        svd_kernel_blocks(np.zeros((3, 2)), np.zeros((3, 2)), GAMMA)
