r"""The joint covariance of energies and energy gradients under the SVD kernel.

For ``m`` configurations of ``n`` atoms the covariance of ``[E_i, \nabla E_i]`` is an
``m (3n + 1)`` square matrix whose ``(i, j)`` block is
``[[k, dk/dZ], [dk/dX, d^2k/dX dZ]]`` with ``X`` configuration ``i`` and ``Z``
configuration ``j`` (seed 003, eqs. 11-13). :class:`SVDJointCovariance` multiplies by
it without forming it: every per-pair quantity is a scalar or a 3x3 matrix, and the
mixed block acts through centring and 3x3 products (seed 003, eqs. 32-33), so a
product costs ``O(m^2 n)`` time and ``O(m^2 + m n)`` memory. :func:`solve_joint`
solves with it by Jacobi-preconditioned conjugate gradients, or by Cholesky below a
size threshold.
"""

from dataclasses import dataclass

import torch
from linear_operator.operators import LinearOperator
from linear_operator.utils import linear_cg

from asebo.kernels.svd import (
    Alignment,
    _as_tensor,
    _centre,
    _PairTerms,
    mixed_block,
    svd_kernel_blocks_batched,
)


def _t(A):
    return A.transpose(-1, -2)


class SVDJointCovariance(LinearOperator):
    """Structured covariance of energies and gradients for ``m`` configurations.

    Rows and columns are ordered per configuration: the energy, then the ``3n``
    gradient components atom-major.

    Parameters
    ----------
    positions : tensor (m, n, 3)
        Configurations, float64.
    gamma : float
        Kernel inverse squared length scale, ``k = exp(-gamma d / 2)``.
    proper : bool
        Proper rotations only (see :mod:`asebo.kernels.svd`).

    Attributes
    ----------
    n_matmuls : int
        Products computed so far (a dense form is never built by them).

    References
    ----------
    Seed 003 (Wong and Kolter), eqs. 11-14 and 32-33.
    """

    def __init__(self, positions, gamma, proper=True):
        super().__init__(positions, gamma=float(gamma), proper=proper)
        self.positions = positions
        self.gamma = float(gamma)
        self.proper = proper
        self.n_matmuls = 0
        m, n, _ = positions.shape
        self.n_configs, self.n_atoms = m, n
        Xc = _centre(positions)  # (m, n, 3)
        M = torch.einsum("ina,jnb->ijab", Xc, Xc)  # (m, m, 3, 3)
        self.alignment = Alignment(M, proper)
        sq = (Xc ** 2).sum(dim=(-1, -2))  # (m,)
        trace = (self.alignment.G * M).sum(dim=(-1, -2))  # (m, m)
        distance = (sq[:, None] + sq[None, :] - 2.0 * trace).clamp_min(0.0)
        self.k = torch.exp(-0.5 * self.gamma * distance)  # (m, m)
        self.Xc = Xc

    def _size(self):
        size = self.n_configs * (3 * self.n_atoms + 1)
        return torch.Size([size, size])

    def _transpose_nonbatch(self):
        return self

    def _matmul(self, rhs):
        self.n_matmuls += 1
        vector = rhs.ndim == 1
        if vector:
            rhs = rhs[:, None]
        m, n, gamma = self.n_configs, self.n_atoms, self.gamma
        a, k, Xc = self.alignment, self.k, self.Xc
        t = rhs.shape[-1]
        blocks = rhs.T.reshape(t, m, 3 * n + 1)
        e = blocks[..., 0]  # (t, m)
        g = blocks[..., 1:].reshape(t, m, n, 3)  # (t, m, n, 3)
        gc = g - g.mean(dim=2, keepdim=True)  # (t, m, n, 3)

        # Every product over atoms is one matrix product with all pairs at once.
        Xc_rows = Xc.transpose(1, 2).reshape(3 * m, n)  # (3m, n): rows (i, a)
        g_cols = g.permute(2, 0, 1, 3).reshape(n, 3 * m * t)  # (n, t m 3)
        A = (Xc_rows @ g_cols).reshape(m, 3, t, m, 3).permute(2, 0, 3, 1, 4)  # (t, m, m, 3, 3)
        z = (Xc[None] * g).sum(dim=(2, 3))  # (t, m): <Zc_j, g_j>
        sigma = z[:, None, :] - (a.G * A).sum(dim=(-1, -2))  # (t, m, m): <e_Z, g_j>
        weighted = k * (e[:, None, :] - gamma * sigma)  # (t, m, m)

        energy = weighted.sum(dim=2)  # (t, m)
        P = _t(a.W) @ A @ a.V  # (t, m, m, 3, 3)
        omega = a.C * (P - _t(P))
        Q = gamma * (weighted[..., None, None] * _t(a.G)
                     + k[..., None, None] * (a.V @ _t(omega) @ _t(a.W)))  # (t, m, m, 3, 3)
        Xc_cols = Xc.permute(1, 0, 2).reshape(n, 3 * m)  # (n, (j, b))
        Q_rows = Q.permute(2, 3, 0, 1, 4).reshape(3 * m, t * m * 3)  # ((j, b), (t, i, a))
        aligned = (Xc_cols @ Q_rows).reshape(n, t, m, 3).permute(1, 2, 0, 3)  # (t, m, n, 3)
        H_rows = (gamma * k[..., None, None] * _t(a.G)).permute(1, 2, 0, 3).reshape(3 * m, 3 * m)
        gc_cols = gc.permute(0, 2, 1, 3).reshape(t * n, 3 * m)  # ((t, n), (j, b))
        centred = (gc_cols @ H_rows).reshape(t, n, m, 3).transpose(1, 2)  # (t, m, n, 3)
        gradient = -gamma * weighted.sum(dim=2)[..., None, None] * Xc + aligned + centred

        out = torch.cat([energy[..., None], gradient.reshape(t, m, 3 * n)], dim=-1)
        out = out.reshape(t, -1).T
        return out[:, 0] if vector else out

    def _diagonal(self):
        m, n, gamma = self.n_configs, self.n_atoms, self.gamma
        index = torch.arange(m)
        W = self.alignment.W[index, index]  # (m, 3, 3)
        V = self.alignment.V[index, index]
        C = self.alignment.C[index, index]
        G = self.alignment.G[index, index]
        zeta = self.Xc @ V  # (m, n, 3)
        alpha = self.Xc @ W  # (m, n, 3)
        # T[a,i,a,i] = sum_pq W_ip zeta_aq C_pq (alpha_ap V_iq - alpha_aq V_ip)
        T = (torch.einsum("mip,maq,mpq,map,miq->mai", W, zeta, C, alpha, V)
             - torch.einsum("mip,maq,mpq,maq,mip->mai", W, zeta, C, alpha, V))
        centring = 1.0 - 1.0 / n
        mixed = gamma * (centring * torch.diagonal(G, dim1=-2, dim2=-1)[:, None, :] + T)
        return torch.cat([torch.ones(m, 1, dtype=self.Xc.dtype),
                          mixed.reshape(m, 3 * n)], dim=1).reshape(-1)

    def to_dense(self):
        """The dense matrix, built block by block from the kernel's derivative blocks."""
        m, n = self.n_configs, self.n_atoms
        # block rows in chunks of about 256 MiB of intermediates bound the memory
        chunk = max(1, int(2 ** 28 // (8 * 8 * m * 9 * n * n)))
        rows = [assemble_joint(*svd_kernel_blocks_batched(self.positions[i:i + chunk],
                                                          self.positions, self.gamma,
                                                          self.proper))
                for i in range(0, m, chunk)]
        return torch.cat(rows, dim=0)


def assemble_joint(k, dk_dX, dk_dZ, d2k_dXdZ):
    """Dense joint covariance from batched blocks (m, m', ...) of any derivative kernel.

    Returns the ``(m (3n+1), m' (3n+1))`` matrix ordered per configuration as
    energy, then the ``3n`` gradient components.
    """
    m, m_prime, n, _ = dk_dX.shape
    blocks = torch.empty(m, 3 * n + 1, m_prime, 3 * n + 1, dtype=k.dtype)
    blocks[:, 0, :, 0] = k
    blocks[:, 0, :, 1:] = dk_dZ.reshape(m, m_prime, 3 * n)
    blocks[:, 1:, :, 0] = dk_dX.reshape(m, m_prime, 3 * n).transpose(1, 2)
    blocks[:, 1:, :, 1:] = d2k_dXdZ.transpose(1, 2)
    return blocks.reshape(m * (3 * n + 1), m_prime * (3 * n + 1))


class JointStructure:
    """The gamma-free parts of a joint covariance, grown one configuration at a time.

    Every block of the joint covariance of a derivative kernel ``exp(-gamma d / 2)``
    is ``k [1, -gamma e_Z; -gamma e_X, gamma^2 e_X (x) e_Z + gamma H]`` with
    ``k = exp(-gamma d / 2)``, where the distance ``d``, the residuals ``e_X``, ``e_Z``
    and the curvature ``H`` do not depend on ``gamma``. Storing them makes the dense
    covariance for a new ``gamma`` an elementwise operation, and a new
    configuration costs only its own block row. For the SVD kernel ``H = B (x) G + T``
    (see :mod:`asebo.kernels.svd`); for the Cartesian Gaussian kernel ``H = I``,
    ``e_X = X - Z = -e_Z``.

    Parameters
    ----------
    kernel : {'svd', 'cartesian'}
    proper : bool
        SVD kernel aligned by proper rotations only.
    """

    def __init__(self, kernel="svd", proper=True):
        self.kernel = kernel
        self.proper = proper
        self.positions = None  # (m, n, 3)
        self._buffers = {}  # name -> (capacity, capacity, ...) tensor

    def __len__(self):
        return 0 if self.positions is None else self.positions.shape[0]

    def _row(self, x, positions):
        """Blocks of configuration x (n, 3) against every configuration (m, n, 3)."""
        if self.kernel == "svd":
            terms = _PairTerms(x[None, None], positions[None], 1.0, self.proper)
            with torch.no_grad():
                return (terms.distance[0], terms.eX[0], terms.eZ[0], terms.alignment_hessian()[0])
        diff = x[None] - positions  # (m, n, 3)
        eye = torch.eye(diff.shape[1] * 3, dtype=diff.dtype).expand(len(positions), -1, -1)
        return (diff ** 2).sum(dim=(-1, -2)), diff, -diff, eye

    def extend(self, new):
        """Add configurations ``new`` (k, n, 3)."""
        for x in new:
            positions = x[None] if self.positions is None else torch.cat([self.positions, x[None]])
            distance, eX, eZ, hessian = self._row(x, positions)  # (m+1,), (m+1, n, 3), ...
            # block (j, new) is block (new, j) transposed: e_X and e_Z swap
            self._store("distance", distance, distance[:-1])
            self._store("eX", eX, eZ[:-1])
            self._store("eZ", eZ, eX[:-1])
            self._store("hessian", hessian, hessian[:-1].transpose(-1, -2))
            self.positions = positions
        return self

    def _store(self, name, row, column):
        """Write the block row (m+1, ...) and column (m, ...) of configuration m.

        The blocks live in a buffer with room to spare, grown by half when full, so
        that a new configuration copies O(m) blocks, not the O(m^2) already stored;
        the attribute ``name`` is the (m+1, m+1, ...) view of what is filled.
        """
        m = len(column)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.shape[0] <= m:
            capacity = m + 1 + max(8, m // 2)
            grown = row.new_empty((capacity, capacity) + tuple(row.shape[1:]))
            if buffer is not None:
                grown[:m, :m] = buffer[:m, :m]
            self._buffers[name] = buffer = grown
        buffer[m, :m + 1] = row
        buffer[:m, m] = column
        setattr(self, name, buffer[:m + 1, :m + 1])

    def dense(self, gamma, select=None):
        """Dense joint covariance at ``gamma`` of all or the ``select``-ed configurations."""
        index = slice(None) if select is None else select
        distance = self.distance[index][:, index]
        eX, eZ = self.eX[index][:, index], self.eZ[index][:, index]
        k = torch.exp(-0.5 * gamma * distance)  # (m, m)
        d2 = mixed_block(k, gamma, eX, eZ, self.hessian[index][:, index])
        return assemble_joint(k, -gamma * k[..., None, None] * eX,
                              -gamma * k[..., None, None] * eZ, d2)


def joint_covariance(positions, gamma, proper=True):
    """The structured joint covariance of energies and gradients (seed 003, eqs. 11-13, 32-33).

    Parameters
    ----------
    positions : list of (n, 3) arrays, or array/tensor (m, n, 3)
        The configurations.
    gamma : float
        Kernel inverse squared length scale.
    proper : bool
        Proper rotations only (see :mod:`asebo.kernels.svd`).

    Returns
    -------
    SVDJointCovariance
        A ``linear_operator.LinearOperator`` of size ``m (3n + 1)``.
    """
    if isinstance(positions, (list, tuple)):
        positions = torch.stack([_as_tensor(p, "positions")[0] for p in positions])
    positions, _ = _as_tensor(positions, "positions")
    if positions.ndim != 3:
        raise ValueError(f"positions must have shape (m, n_atoms, 3), got {tuple(positions.shape)}")
    return SVDJointCovariance(positions, gamma, proper)


@dataclass
class SolveInfo:
    """How :func:`solve_joint` solved: ``method`` is ``'cholesky'`` or ``'cg'``."""

    method: str
    iterations: int = 0
    residual: float = 0.0


def solve_joint(operator, rhs, noise, method="auto", max_cholesky_size=3000,
                tolerance=1e-10, max_iter=2000):
    """Solve ``(K + diag(noise)) x = rhs`` for a joint covariance ``K``.

    Parameters
    ----------
    operator : LinearOperator (N, N)
        Typically an :class:`SVDJointCovariance`, possibly scaled.
    rhs : tensor (N,) or (N, t)
    noise : tensor (N,)
        Diagonal added to ``K`` (noise variances of energies and gradients).
    method : {'auto', 'cholesky', 'cg'}
        ``'auto'`` uses Cholesky up to ``max_cholesky_size`` and CG above.
    tolerance : float
        CG stops when the relative residual ``|r| / |rhs|`` falls below it.

    Returns
    -------
    x : tensor like ``rhs``
    info : SolveInfo
    """
    size = operator.shape[-1]
    if method == "auto":
        method = "cholesky" if size <= max_cholesky_size else "cg"
    if method == "cholesky":
        dense = operator.to_dense()
        dense.diagonal().add_(noise)
        factor = torch.linalg.cholesky(dense)
        x = torch.cholesky_solve(rhs[:, None] if rhs.ndim == 1 else rhs, factor)
        return (x[:, 0] if rhs.ndim == 1 else x), SolveInfo("cholesky")
    if method != "cg":
        raise ValueError(f"method must be 'auto', 'cholesky' or 'cg', got {method!r}")
    inverse_diagonal = 1.0 / (operator._diagonal() + noise)  # (N,)
    column = rhs[:, None] if rhs.ndim == 1 else rhs
    before = getattr(operator, "n_matmuls", 0)

    def matmul(v):
        return operator._matmul(v) + noise[:, None] * v

    # linear_cg's absolute floors (eps, stop_updating_after) default to 1e-10, which
    # stalls float64 solves well before a tight relative tolerance: make them inert.
    x = linear_cg(matmul, column, tolerance=tolerance, max_iter=max_iter, eps=1e-300,
                  stop_updating_after=0.0,
                  preconditioner=lambda r: inverse_diagonal[:, None] * r)
    residual = ((matmul(x) - column).norm() / column.norm().clamp_min(1e-300)).item()
    iterations = getattr(operator, "n_matmuls", 0) - before - 1
    return (x[:, 0] if rhs.ndim == 1 else x), SolveInfo("cg", iterations, residual)
