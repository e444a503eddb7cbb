"""The structured joint covariance against its dense form, and its solvers."""

import numpy as np
import pytest
import torch
from ase.build import molecule

from asebo.kernels import (
    CartesianKernel,
    SVDKernel,
    joint_covariance,
    solve_joint,
    svd_kernel_blocks,
)
from asebo.kernels.euclidean import cartesian_rbf_blocks_batched
from asebo.kernels.joint import block_jacobi, energy_rows, joint_matmul
from asebo.kernels.operators import JointStructure
from asebo.kernels.svd import svd_kernel_blocks_batched

VARIANTS = [SVDKernel(proper=True), SVDKernel(proper=False), CartesianKernel()]
KERNELS = [SVDKernel(), CartesianKernel()]


def configurations(name, m, scale=0.1, seed=0):
    X0 = molecule(name).positions
    rng = np.random.default_rng(seed)
    return np.stack([X0 + scale * rng.normal(size=X0.shape) for _ in range(m)])


def reference_dense(X, Z, gamma, kernel=SVDKernel()):
    """The joint covariance assembled from the per-pair derivative blocks of the kernel
    (:func:`svd_kernel_blocks_batched` or :func:`cartesian_rbf_blocks_batched`)."""
    X, Z = torch.as_tensor(X), torch.as_tensor(Z)
    if isinstance(kernel, SVDKernel):
        k, dk_dX, dk_dZ, d2k = svd_kernel_blocks_batched(X, Z, gamma, kernel.proper)
    else:
        k, dk_dX, dk_dZ, d2k = cartesian_rbf_blocks_batched(X, Z, gamma)
    b, m, n, _ = dk_dX.shape
    blocks = torch.empty(b, 3 * n + 1, m, 3 * n + 1, dtype=torch.float64)
    blocks[:, 0, :, 0] = k
    blocks[:, 0, :, 1:] = dk_dZ.reshape(b, m, 3 * n)
    blocks[:, 1:, :, 0] = dk_dX.reshape(b, m, 3 * n).transpose(1, 2)
    blocks[:, 1:, :, 1:] = d2k.transpose(1, 2)
    return blocks.reshape(b * (3 * n + 1), m * (3 * n + 1))


@pytest.mark.parametrize("kernel", VARIANTS, ids=repr)
@pytest.mark.parametrize("name", ["H2O", "CH4", "C6H6", "CH3CH2OH"])
def test_structured_product_equals_dense_product(name, kernel):
    P = configurations(name, 5)
    op = joint_covariance(P, gamma=0.8, kernel=kernel)
    dense = reference_dense(P, P, 0.8, kernel)
    assert torch.allclose(op.to_dense(), dense, atol=1e-12)
    rhs = torch.randn(
        dense.shape[0], 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    product = op @ rhs
    assert (product - dense @ rhs).norm() <= 1e-10 * (dense @ rhs).norm()
    assert torch.allclose(op @ rhs[:, 0], product[:, 0], atol=1e-14)
    assert torch.allclose(op._diagonal(), torch.diagonal(dense), atol=1e-12)


@pytest.mark.parametrize("kernel", VARIANTS, ids=repr)
def test_rectangular_products_equal_the_dense_cross_covariance(kernel):
    X, Z = configurations("CH3CH2OH", 3, seed=1), configurations("CH3CH2OH", 4, seed=2)
    dense = reference_dense(X, Z, 0.6, kernel)  # (3 * 28, 4 * 28)
    geometry = kernel.pair_geometry(torch.as_tensor(X), torch.as_tensor(Z))
    rhs = torch.randn(
        dense.shape[1], 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3)
    )
    product = joint_matmul(geometry, 0.6, rhs)
    assert (product - dense @ rhs).norm() <= 1e-10 * (dense @ rhs).norm()
    assert torch.allclose(energy_rows(geometry, 0.6), dense[::28], atol=1e-14)


def test_public_product_takes_the_structured_path_and_keeps_autograd():
    P = configurations("CH3OH", 4)
    op = joint_covariance(P, gamma=0.8)
    rhs = torch.randn(op.shape[0], dtype=torch.float64, requires_grad=True)
    before = op.n_matmuls
    with torch.no_grad():
        op @ rhs
    assert op.n_matmuls == before + 1  # the operator's own product, not a rebuilt copy's
    (op @ rhs).sum().backward()  # through linear_operator when a gradient is needed
    dense = reference_dense(P, P, 0.8)
    assert torch.allclose(rhs.grad, dense.sum(dim=0), atol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_structure_grown_in_pieces_gives_the_dense_joint_covariance(kernel):
    # 1 + 1 + 9 + 9 configurations: the storage grows past its first capacity twice
    P = torch.as_tensor(configurations("CH3OH", 20, seed=3))
    structure = JointStructure(kernel)
    for piece in (P[:1], P[1:2], P[2:11], P[11:]):
        structure.extend(piece)
    assert len(structure) == 20
    expected = reference_dense(P, P, 0.7, kernel)
    assert torch.allclose(structure.dense(0.7), expected, atol=1e-12)
    select = torch.tensor([0, 4, 11, 19])
    rows = (select[:, None] * 19 + torch.arange(19)).reshape(-1)  # 3n + 1 = 19 rows each
    assert torch.allclose(structure.dense(0.7, select), expected[rows][:, rows], atol=1e-12)
    rhs = torch.randn(expected.shape[0], dtype=torch.float64)
    assert torch.allclose(structure.operator(0.7) @ rhs, expected @ rhs, atol=1e-11)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_structure_stores_per_pair_data_independent_of_the_atoms(kernel):
    # the storage of m configurations of n atoms is O(m^2 + m n): from 3 to 12 atoms
    # at the same m only the positions grow, never a (3n, 3n) block per pair
    sizes = {}
    for name in ("H2O", "C6H6", "C2H6CHOH"):
        structure = JointStructure(kernel).extend(torch.as_tensor(configurations(name, 30)))
        n = structure.positions.shape[1]
        per_pair = sum(buffer[0, 0].numel() for buffer in structure._buffers.values())
        capacity = next(iter(structure._buffers.values())).shape[0]
        assert per_pair == 37  # the distance and four 3x3 alignment matrices
        assert capacity <= 1.5 * 30 + 9
        sizes[n] = structure.stored_numbers()
        assert sizes[n] == 37 * capacity**2 + 2 * 30 * n * 3


def test_joint_covariance_is_symmetric_with_unit_energy_variance():
    op = joint_covariance(configurations("CH3OH", 4), gamma=0.5)
    dense = op.to_dense()
    n = 6
    assert torch.allclose(dense, dense.T, atol=1e-12)
    assert torch.allclose(torch.diagonal(dense)[:: 3 * n + 1], torch.ones(4, dtype=torch.float64))


def test_list_of_arrays_is_accepted_and_order_is_energy_then_gradient():
    positions = configurations("NH3", 3)
    op = joint_covariance(list(positions), gamma=0.7)
    assert op.shape == torch.Size([3 * 13, 3 * 13])
    k, dX, dZ, d2 = svd_kernel_blocks(positions[0], positions[2], 0.7)
    dense = op.to_dense().numpy()
    block = dense[0:13, 26:39]
    assert block[0, 0] == pytest.approx(k)
    np.testing.assert_allclose(block[0, 1:], dZ.ravel(), atol=1e-14)
    np.testing.assert_allclose(block[1:, 0], dX.ravel(), atol=1e-14)
    np.testing.assert_allclose(block[1:, 1:], d2, atol=1e-14)


def test_conjugate_gradients_run_and_agree_with_cholesky():
    op = joint_covariance(configurations("CH3CH2OH", 6), gamma=0.8)
    size = op.shape[0]
    noise = torch.full((size,), 1e-2, dtype=torch.float64)
    rhs = torch.randn(size, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    direct, info_direct = solve_joint(op, rhs, noise, method="cholesky")
    iterative, info_cg = solve_joint(op, rhs, noise, method="cg", tolerance=1e-12)
    assert info_direct.method == "cholesky" and info_cg.method == "cg"
    assert info_cg.residual < 1e-11
    assert (iterative - direct).norm() <= 1e-9 * direct.norm()


def test_a_few_cg_iterations_stop_there_and_report_their_residual():
    # fewer iterations than linear_operator's tridiagonalisation cap (20)
    op = joint_covariance(configurations("CH3CH2OH", 6), gamma=0.8)
    size = op.shape[0]
    noise = torch.full((size,), 1e-3, dtype=torch.float64)
    rhs = torch.randn(size, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x, info = solve_joint(op, rhs, noise, method="cg", tolerance=1e-12, max_iter=5)
    assert info.iterations == 5
    dense = op.to_dense() + torch.diag(noise)
    assert info.residual == pytest.approx(float((dense @ x - rhs).norm() / rhs.norm()), rel=1e-8)
    assert info.residual > 1e-6  # not converged, and said so


def test_a_better_preconditioner_and_a_warm_start_save_iterations():
    op = joint_covariance(configurations("CH3CH2OH", 6), gamma=0.8)
    size = op.shape[0]
    noise = torch.full((size,), 1e-3, dtype=torch.float64)
    rhs = torch.randn(size, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    _, jacobi = solve_joint(op, rhs, noise, method="cg", tolerance=1e-10)
    # the dense factor of the first half of the configurations, Jacobi on the rest
    dense = op.to_dense() + torch.diag(noise)
    half = size // 2
    factor = torch.linalg.cholesky(dense[:half, :half])
    inverse_diagonal = 1.0 / dense.diagonal()

    def block(r):
        out = inverse_diagonal[:, None] * r
        out[:half] = torch.cholesky_solve(r[:half], factor)
        return out

    x, blocked = solve_joint(op, rhs, noise, method="cg", tolerance=1e-10, preconditioner=block)
    assert blocked.residual < 1e-9 and blocked.iterations < jacobi.iterations
    nearby = x + 1e-6 * torch.randn(size, dtype=torch.float64)
    _, warm = solve_joint(
        op, rhs, noise, method="cg", tolerance=1e-10, preconditioner=block, initial_guess=nearby
    )
    assert warm.residual < 1e-9 and warm.iterations < blocked.iterations


def test_auto_switches_to_cg_above_the_cholesky_threshold():
    op = joint_covariance(configurations("H2O", 3), gamma=0.8)
    noise = torch.full((op.shape[0],), 1e-2, dtype=torch.float64)
    rhs = torch.ones(op.shape[0], dtype=torch.float64)
    assert solve_joint(op, rhs, noise, max_cholesky_size=10)[1].method == "cg"
    assert solve_joint(op, rhs, noise, max_cholesky_size=100)[1].method == "cholesky"


def test_cartesian_rbf_blocks_match_finite_differences():
    Xs = torch.tensor(configurations("H2O", 2, seed=3))
    Zs = torch.tensor(configurations("H2O", 1, seed=4))
    gamma, h = 0.9, 1e-6
    k, dX, dZ, d2 = cartesian_rbf_blocks_batched(Xs, Zs, gamma)
    X, Z = Xs[0], Zs[0]
    for a in range(3):
        for i in range(3):
            step = torch.zeros_like(X)
            step[a, i] = h
            fd = (
                cartesian_rbf_blocks_batched((X + step)[None], Z[None], gamma)[2]
                - cartesian_rbf_blocks_batched((X - step)[None], Z[None], gamma)[2]
            ) / (2 * h)
            assert torch.allclose(fd.reshape(-1), d2[0, 0, 3 * a + i], atol=1e-8)
            fdk = (
                cartesian_rbf_blocks_batched((X + step)[None], Z[None], gamma)[0]
                - cartesian_rbf_blocks_batched((X - step)[None], Z[None], gamma)[0]
            ) / (2 * h)
            assert fdk.item() == pytest.approx(dX[0, 0, a, i].item(), abs=1e-8)
    dense = reference_dense(Xs, Xs, gamma, CartesianKernel())
    assert torch.allclose(dense, dense.T, atol=1e-14)
    assert torch.linalg.eigvalsh(dense).min() > -1e-10  # a proper kernel


def test_bad_positions_are_refused():
    with pytest.raises(ValueError, match="n_atoms, 3"):
        joint_covariance(np.zeros((3, 3)), gamma=1.0)
    with pytest.raises(ValueError, match="NaN"):
        joint_covariance(np.full((2, 3, 3), np.nan), gamma=1.0)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_block_jacobi_solves_with_each_configurations_own_block(kernel):
    # Woodbury on the identity minus translations plus T_ii against a dense solve of
    # the block diagonal, with noise as small as the GP's: the translation
    # directions then have eigenvalues near the noise alone
    P = torch.as_tensor(configurations("CH3CH2OH", 4, seed=5))
    geometry = kernel.pair_geometry(P, P)
    block = 3 * 9 + 1
    dense = reference_dense(P, P, 0.7, kernel)
    noise = torch.full((dense.shape[0],), 4e-6, dtype=torch.float64)
    noise[::block] = 1e-6
    diagonal_blocks = torch.block_diag(
        *[dense[i * block : (i + 1) * block, i * block : (i + 1) * block] for i in range(4)]
    ) + torch.diag(noise)
    rhs = torch.randn(
        dense.shape[0], 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4)
    )
    expected = torch.linalg.solve(diagonal_blocks, rhs)
    solved = block_jacobi(geometry, 0.7, noise)(rhs)
    assert (solved - expected).norm() <= 1e-9 * expected.norm()
