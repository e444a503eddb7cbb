r"""The rotation- and translation-invariant SVD kernel and its derivative blocks.

For two configurations of the same ``n`` atoms, ASE-style positions ``X, Z`` of shape
``(n, 3)``, centred as ``Xc, Zc``, and the cross moment ``M = Xc^T Zc = U S V^T``
(Wong and Kolter, eq. 2 in ``(n, 3)`` layout), the squared distance after the best rigid
alignment is

.. math:: d(X, Z) = \lVert X_c\rVert^2 + \lVert Z_c\rVert^2 - 2 f(M),
          \qquad k(X, Z) = \exp(-\gamma d / 2)        \quad\text{(eqs. 3, 10)}

with ``f(M) = s1 + s2 + s3`` (the nuclear norm: any orthogonal alignment, the
paper's variant) or ``f(M) = s1 + s2 + det(U V^T) s3`` (proper rotations only: the
determinant-corrected Kabsch alignment). The gradient of ``f`` is the optimal
alignment ``G = U D V^T`` with ``D = diag(1, 1, det(U V^T))`` for proper rotations
(the proof of Theorem 1 is right, ``R = U V^T``; its statement ``V U^T`` is a typo).
Hence

.. math:: \partial k/\partial X = -\gamma k (X_c - Z_c G^T), \qquad
          \partial k/\partial Z = -\gamma k (Z_c - X_c G)

(eq. 14 writes ``U V^T`` where ``G^T`` belongs in ``\bar K_{12}``). The derivative of
the alignment is ``dG = W \Omega V^T`` with ``W = U D``, ``F = W^T dM V`` and
``\Omega_{pq} = (F_{pq} - F_{qp}) / (s'_p + s'_q)``, ``s' = D s`` the signed singular
values (eqs. 15-29): only sums of singular values are divided by, so the blocks stay
finite for symmetric tops, where singular values coincide. The mixed block is

.. math:: \frac{\partial^2 k}{\partial X \partial Z} =
          k\left[\gamma^2 e_X \otimes e_Z + \gamma\,(B \otimes G + T)\right],
          \quad T_{(a i),(b l)} = \sum_{pq} W_{ip} (Z_c V)_{aq} C_{pq}
          (\alpha_{bp} V_{lq} - \alpha_{bq} V_{lp})

with ``e_X = X_c - Z_c G^T``, ``e_Z = Z_c - X_c G``, ``\alpha = X_c W``,
``C_{pq} = 1/(s'_p + s'_q)`` off the diagonal, and ``B`` the centring matrix
(eqs. 31-33).

Where the alignment is not unique the kernel has a cusp and no derivative; the
blocks then take the central (symmetric) one-sided average, which is what a central
finite difference sees: a rank-one cross moment (a linear molecule) keeps only the
first singular pair, and the paper's variant drops zero singular values (a planar
configuration against a non-planar one). ``C`` is zero where a sum of singular values
vanishes. Nothing divides by zero, so no NaN appears.

Positions are ``(n, 3)`` arrays; derivative blocks are flattened atom-major
(index ``3 * atom + axis``). The kernel as an object, for the GP's blocks and for Gram
matrices, is :class:`asebo.kernels.configuration.SVDKernel`.
"""

import numpy as np
import torch

_RANK_RTOL = 1e-10


def _det3(A):
    """Determinants of a batch of 3x3 matrices (...): the triple product of the columns."""
    return (torch.linalg.cross(A[..., :, 0], A[..., :, 1], dim=-1) * A[..., :, 2]).sum(dim=-1)


class Alignment:
    """The optimal alignment of a batch of cross moments ``M`` (..., 3, 3).

    Attributes
    ----------
    G : tensor (..., 3, 3)
        Gradient of ``f`` with respect to ``M``: the optimal rotation ``U D V^T``
        (weighted down to the unique part where the alignment is not unique).
    W : tensor (..., 3, 3)
        ``U D``, the left singular vectors with the determinant correction.
    V : tensor (..., 3, 3)
        Right singular vectors.
    C : tensor (..., 3, 3)
        ``1 / (s'_p + s'_q)`` off the diagonal, zero on it and where the sum vanishes.
    trace : tensor (...)
        ``f(M) = sum(G * M)``, the maximised trace.
    """

    def __init__(self, M, proper=True):
        with torch.no_grad():
            U, s, Vh = torch.linalg.svd(M)  # (..., 3, 3), (..., 3), (..., 3, 3)
            V = Vh.transpose(-1, -2)
            scale = s[..., :1].clamp_min(torch.finfo(M.dtype).tiny)  # (..., 1)
            nonzero = s > _RANK_RTOL * scale  # (..., 3)
            sign = torch.ones_like(s)
            if proper:
                det = _det3(U) * _det3(V)  # (...)
                sign[..., 2] = torch.where(det < 0, -1.0, 1.0)
                # rank two or more: the proper rotation is unique even with s3 = 0
                weight = torch.ones_like(s)
                rank_one = ~nonzero[..., 1]
                weight[..., 1:] = torch.where(rank_one[..., None], 0.0, 1.0)
            else:
                weight = nonzero.to(s.dtype)
            signed = s * sign  # (..., 3)
            pair_sum = signed[..., :, None] + signed[..., None, :]  # (..., 3, 3)
            off_diagonal = ~torch.eye(3, dtype=torch.bool, device=M.device)
            active = weight > 0  # (..., 3)
            usable = (
                off_diagonal
                & (pair_sum > _RANK_RTOL * scale[..., None])
                & active[..., :, None]
                & active[..., None, :]
            )
            self.C = torch.where(usable, 1.0 / torch.where(usable, pair_sum, 1.0), 0.0)
            self.W = U * sign[..., None, :]
            self.V = V
            self.G = (self.W * weight[..., None, :]) @ Vh


class _OptimalAlignment(torch.autograd.Function):
    """``G(M)`` with the backward of the polar-factor derivative (``dG = W Omega V^T``)."""

    @staticmethod
    def forward(ctx, M, alignment):
        ctx.save_for_backward(alignment.W, alignment.V, alignment.C)
        return alignment.G

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_G):
        W, V, C = ctx.saved_tensors
        Q = W.transpose(-1, -2) @ grad_G @ V  # (..., 3, 3)
        grad_M = W @ (C * (Q - Q.transpose(-1, -2))) @ V.transpose(-1, -2)
        return grad_M, None


def optimal_alignment(M, proper=True, alignment=None):
    """Optimal alignment ``G`` of cross moments ``M`` (..., 3, 3), differentiable by autograd.

    ``G`` is the rotation ``R`` that minimises ``|Xc - Zc R^T|`` for ``M = Xc^T Zc``
    (Wong and Kolter, Theorem 1, with ``R = U V^T`` as its proof shows). The backward pass
    divides only by sums of singular values (Wong and Kolter, eq. 15). ``alignment``, the
    :class:`Alignment` of ``M`` when already computed, saves a second SVD.
    """
    if alignment is None:
        alignment = Alignment(M, proper)
    return _OptimalAlignment.apply(M, alignment)


def _centre(X):
    return X - X.mean(dim=-2, keepdim=True)


def _as_tensor(X, name):
    is_numpy = not isinstance(X, torch.Tensor)
    tensor = torch.as_tensor(np.asarray(X) if is_numpy else X, dtype=torch.float64)
    if tensor.ndim < 2 or tensor.shape[-1] != 3:
        raise ValueError(f"{name} must have shape (..., n_atoms, 3), got {tuple(tensor.shape)}")
    if not torch.isfinite(tensor).all():
        raise ValueError(f"{name} contains NaN or inf positions")
    return tensor, is_numpy


class _PairTerms:
    """Per-pair quantities shared by the kernel value and its derivative blocks.

    ``X`` and ``Z`` are broadcastable (..., n, 3) tensors.
    """

    def __init__(self, X, Z, gamma, proper):
        self.Xc, self.Zc = _centre(X), _centre(Z)  # (..., n, 3)
        M = self.Xc.transpose(-1, -2) @ self.Zc  # (..., 3, 3)
        self.alignment = Alignment(M, proper)
        G = optimal_alignment(M, proper, self.alignment)
        self.G = G
        trace = (G * M).sum(dim=(-1, -2))  # (...)
        self.distance = (
            (self.Xc**2).sum(dim=(-1, -2)) + (self.Zc**2).sum(dim=(-1, -2)) - 2.0 * trace
        ).clamp_min(0.0)
        self.gamma = gamma
        self.k = torch.exp(-0.5 * gamma * self.distance)  # (...)
        self.eX = self.Xc - self.Zc @ G.transpose(-1, -2)  # (..., n, 3)
        self.eZ = self.Zc - self.Xc @ G  # (..., n, 3)

    def dk_dX(self):
        return -self.gamma * self.k[..., None, None] * self.eX  # (..., n, 3)

    def dk_dZ(self):
        return -self.gamma * self.k[..., None, None] * self.eZ  # (..., n, 3)

    def alignment_hessian(self):
        """``B (x) G + T``, the gamma-free part of the mixed block, (..., 3n, 3n).

        ``T = sum_pq C_pq r_pq (c_pq - c_qp)^T`` with ``r_pq[a,i] = zeta_aq W_ip`` and
        ``c_pq[b,l] = alpha_bp V_lq``: a product of (3n, 9) and (9, 3n) matrices.
        """
        a = self.alignment
        n = self.Xc.shape[-2]
        zeta = self.Zc @ a.V  # (..., n, 3)
        alpha = self.Xc @ a.W  # (..., n, 3)
        batch = zeta.shape[:-2]
        rows = (zeta[..., :, None, None, :] * a.W[..., None, :, :, None]).reshape(*batch, 3 * n, 9)
        cols = alpha[..., :, None, :, None] * a.V[..., None, :, None, :]  # (..., n, 3, 3p, 3q)
        cols = (cols - cols.transpose(-1, -2)).reshape(*batch, 3 * n, 9)
        T = (rows * a.C.reshape(*batch, 1, 9)) @ cols.transpose(-1, -2)  # (..., 3n, 3n)
        centring = torch.eye(n, dtype=self.Xc.dtype) - 1.0 / n  # (n, n)
        BG = (centring[:, None, :, None] * a.G[..., None, :, None, :]).reshape(*batch, 3 * n, 3 * n)
        return BG + T

    def d2k_dXdZ(self):
        """The dense mixed block, (..., 3n, 3n)."""
        return mixed_block(self.k, self.gamma, self.eX, self.eZ, self.alignment_hessian())


def mixed_block(k, gamma, eX, eZ, alignment_hessian):
    """``k [gamma^2 e_X (x) e_Z + gamma (B (x) G + T)]`` from its gamma-free parts.

    Parameters
    ----------
    k : (...)
    gamma : float
    eX, eZ : (..., n, 3)
    alignment_hessian : (..., 3n, 3n)

    Returns
    -------
    (..., 3n, 3n)
    """
    batch = eX.shape[:-2]
    outer = eX.reshape(*batch, -1, 1) * eZ.reshape(*batch, 1, -1)
    return k[..., None, None] * (gamma**2 * outer + gamma * alignment_hessian)


def _prepare_pair(X, Z):
    X, x_numpy = _as_tensor(X, "X")
    Z, z_numpy = _as_tensor(Z, "Z")
    if X.shape[-2] != Z.shape[-2]:
        raise ValueError(
            f"X has {X.shape[-2]} atoms and Z has {Z.shape[-2]}: "
            "the SVD kernel compares configurations of the same atoms"
        )
    return X, Z, x_numpy and z_numpy


def _output(tensors, as_numpy):
    if not as_numpy:
        return tensors
    return tuple(t.detach().numpy() for t in tensors)


def svd_kernel_blocks(X, Z, gamma, proper=True):
    """The SVD kernel of two configurations and its derivative blocks (Wong and Kolter, eqs 10-14).

    Parameters
    ----------
    X, Z : array or tensor of shape (n, 3)
        Positions in Å, ASE layout. Numpy arrays give numpy results, float64 torch
        tensors give tensors that autograd can differentiate (first order).
    gamma : float
        Inverse squared length scale, ``k = exp(-gamma d / 2)``.
    proper : bool
        Align by proper rotations only (smooth through planarity, the default) or by
        any orthogonal map (the paper's variant).

    Returns
    -------
    k : scalar, shape ()
    dk_dX : (n, 3)
    dk_dZ : (n, 3)
    d2k_dXdZ : (3n, 3n)
        ``d2k_dXdZ[3a + i, 3b + l] = d^2 k / dX[a, i] dZ[b, l]``.

    References
    ----------
    E. Wong and J. Z. Kolter, "An SVD and derivative kernel approach to learning from
    geometric data", Carnegie Mellon University (preprint), eqs. 1-3, 10, 13-31, with the
    corrections in the module docstring.
    """
    X, Z, as_numpy = _prepare_pair(X, Z)
    if X.ndim != 2 or Z.ndim != 2:
        raise ValueError(
            "svd_kernel_blocks takes two (n, 3) configurations; "
            "use svd_kernel_blocks_batched for many"
        )
    terms = _PairTerms(X, Z, float(gamma), proper)
    return _output((terms.k, terms.dk_dX(), terms.dk_dZ(), terms.d2k_dXdZ()), as_numpy)


def svd_kernel_blocks_batched(Xs, Zs, gamma, proper=True, second=True):
    """All blocks of :func:`svd_kernel_blocks` for every pair of two sets at once.

    Parameters
    ----------
    Xs : (m, n, 3)
    Zs : (m', n, 3)
    gamma, proper
        As in :func:`svd_kernel_blocks`.
    second : bool
        Also return the mixed blocks, ``m * m' * 9 n^2`` numbers.

    Returns
    -------
    k : (m, m')
    dk_dX, dk_dZ : (m, m', n, 3)
    d2k_dXdZ : (m, m', 3n, 3n), only if ``second``
    """
    Xs, Zs, as_numpy = _prepare_pair(Xs, Zs)
    terms = _PairTerms(Xs[:, None], Zs[None, :], float(gamma), proper)
    out = (terms.k, terms.dk_dX(), terms.dk_dZ())
    if second:
        out = out + (terms.d2k_dXdZ(),)
    return _output(out, as_numpy)


def svd_distance(X, Z, proper=True):
    """Squared distance after optimal alignment, ``d(X, Z)`` of Wong and Kolter, eq. 3, (...)."""
    X, Z, as_numpy = _prepare_pair(X, Z)
    Xc, Zc = _centre(X), _centre(Z)
    M = Xc.transpose(-1, -2) @ Zc
    trace = (optimal_alignment(M, proper) * M).sum(dim=(-1, -2))
    d = ((Xc**2).sum(dim=(-1, -2)) + (Zc**2).sum(dim=(-1, -2)) - 2.0 * trace).clamp_min(0.0)
    return d.detach().numpy() if as_numpy else d
