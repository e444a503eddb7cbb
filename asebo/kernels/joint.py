r"""Blocks of the joint covariance of energies and gradients, from per-pair alignments.

A derivative kernel ``k = f(d)`` of the aligned squared distance ``d`` between
configurations ``X`` (rows) and ``Z`` (columns) of the same ``n`` atoms has the joint
covariance block

.. math:: \begin{bmatrix} k & \partial k/\partial Z \\ \partial k/\partial X &
          \partial^2 k/\partial X \partial Z \end{bmatrix}, \quad
          \partial k/\partial Z = -a\, e_Z, \quad
          \partial^2 k/\partial X\partial Z = c\, e_X \otimes e_Z + a (B \otimes G + T)

with ``a = -2 f'(d)`` and ``c = 4 f''(d)`` from the radial profile
(:mod:`asebo.kernels.radial`; for ``f = exp(-gamma d / 2)``, ``a = gamma k`` and
``c = gamma^2 k``: Wong and Kolter, eqs. 11-14 and 31-33; :mod:`asebo.kernels.svd`
has the notation and the corrections). Everything in it follows from the two
configurations, the profile, and five per-pair quantities that do not depend on
``gamma``: the aligned squared distance ``d`` and the 3x3 matrices ``G``, ``W``,
``V``, ``C`` of the optimal alignment.
:class:`PairGeometry` holds them, ``O(b m)`` numbers for ``b x m`` pairs, and the
functions here build from it, on demand,

- :func:`joint_matmul`: the product of the ``b (3n+1) x m (3n+1)`` block matrix with
  a vector in ``O(b m n)`` time, never forming a ``3n x 3n`` block (eqs. 32-33);
- :func:`energy_rows`: the covariances of the row energies with every column
  observation, ``(b, m (3n+1))``;
- :func:`joint_dense`: the dense matrix, for the blocks that are factorised.

A configuration kernel's :meth:`~asebo.kernels.configuration.ConfigurationKernel.pair_geometry`
gives the :class:`PairGeometry`: the SVD kernel aligns each pair, and the Gaussian
kernel on Cartesian positions is the special case of the identity alignment without
centring (``G = W = V = I``, ``C = 0``, ``B = I``), so both kernels share these
functions (:mod:`asebo.kernels.configuration`).
"""

import torch

from asebo.kernels.radial import SquaredExponential


def _t(A):
    return A.transpose(-1, -2)


class PairGeometry:
    """The ``gamma``-free parts of the joint covariance of two sets of configurations.

    Parameters
    ----------
    rows : tensor (b, n, 3)
        Row configurations, centred for the SVD kernel.
    cols : tensor (m, n, 3)
        Column configurations, centred for the SVD kernel.
    distance : tensor (b, m)
        Squared distance after the optimal alignment.
    G, W, V, C : tensors (b, m, 3, 3)
        The alignment ``G = W diag(w) V^T`` and the factors of its derivative
        (:class:`asebo.kernels.svd.Alignment`).
    centred : bool
        Whether the kernel sees centred positions aligned pair by pair (SVD kernel) or
        raw ones (``ConfigurationKernel.centred``).
    radial : profile, optional
        ``f`` of ``k = f(d)`` (:mod:`asebo.kernels.radial`); the squared exponential
        by default.
    """

    def __init__(self, rows, cols, distance, G, W, V, C, centred, radial=None):
        self.rows, self.cols = rows, cols
        self.distance = distance
        self.G, self.W, self.V, self.C = G, W, V, C
        self.centred = centred
        self.radial = SquaredExponential() if radial is None else radial

    @property
    def shape(self):
        return self.distance.shape

    def kernel(self, gamma):
        """Kernel values ``f(d)``, (b, m)."""
        return self.profile(gamma)[0]

    def profile(self, gamma):
        """``(k, a, c)``, each (b, m): the kernel and its scaled first and second
        derivatives in ``d`` (:mod:`asebo.kernels.radial`)."""
        return self.radial(self.distance, gamma)

    def take(self, rows=None, cols=None):
        """The geometry of a subset of the row and column configurations."""
        rows = slice(None) if rows is None else rows
        cols = slice(None) if cols is None else cols

        def pick(tensor):
            return tensor[rows][:, cols]

        return PairGeometry(
            self.rows[rows],
            self.cols[cols],
            pick(self.distance),
            pick(self.G),
            pick(self.W),
            pick(self.V),
            pick(self.C),
            self.centred,
            self.radial,
        )


def joint_matmul(geometry, gamma, rhs, values=None):
    """The joint covariance block matrix times ``rhs``, in ``O(b m n t)`` time.

    Parameters
    ----------
    geometry : PairGeometry
        ``b`` row and ``m`` column configurations of ``n`` atoms.
    gamma : float
    rhs : tensor (m (3n+1), t)
        Per column configuration: the energy entry, then ``3n`` gradient entries.
    values : (k, a, c), each (b, m), optional
        ``geometry.profile(gamma)`` when already computed.

    Returns
    -------
    tensor (b (3n+1), t)
        Per row configuration: the energy row times ``rhs``, then the ``3n`` gradient
        rows times ``rhs``. For ``b = 1`` and ``rhs`` the weights of a GP's posterior
        mean these are the mean and its gradient.
    """
    g = geometry
    k, a, c = g.profile(gamma) if values is None else values
    b, m = k.shape
    n = g.rows.shape[1]
    t = rhs.shape[-1]
    blocks = rhs.T.reshape(t, m, 3 * n + 1)
    e = blocks[..., 0]  # (t, m)
    v = blocks[..., 1:].reshape(t, m, n, 3)  # (t, m, n, 3)
    A, sigma = _atom_sums(g, v)  # (t, b, m, 3, 3), (t, b, m)
    energy = (k * e[:, None, :] - a * sigma).sum(dim=2)  # (t, b)
    # the e_X terms: e_X times (dk/dX . e + c e_X (x) e_Z . v) per pair
    weighted = a * e[:, None, :] - c * sigma  # (t, b, m)
    gradient = _gradient_rows(g, a, weighted, A, v)  # (t, b, n, 3)
    out = torch.cat([energy[..., None], gradient.reshape(t, b, 3 * n)], dim=-1)
    return out.reshape(t, -1).T


def _atom_sums(g, v):
    """The sums over atoms of :func:`joint_matmul`, each one matrix product over all pairs.

    Parameters
    ----------
    g : PairGeometry
        ``b`` row and ``m`` column configurations of ``n`` atoms.
    v : tensor (t, m, n, 3)
        The gradient entries of the right-hand sides, per column configuration.

    Returns
    -------
    A : tensor (t, b, m, 3, 3)
        ``X_i^T v_j``.
    sigma : tensor (t, b, m)
        ``<e_Z, v_j>`` of each pair.
    """
    b, n = g.rows.shape[:2]
    t, m = v.shape[:2]
    row_coords = _t(g.rows).reshape(3 * b, n)  # ((i, a), atom)
    A = row_coords @ v.permute(2, 0, 1, 3).reshape(n, t * m * 3)
    A = A.reshape(b, 3, t, m, 3).permute(2, 0, 3, 1, 4)  # (t, b, m, 3, 3): X_i^T v_j
    z = (g.cols[None] * v).sum(dim=(2, 3))  # (t, m): <Z_j, v_j>
    sigma = z[:, None, :] - (g.G * A).sum(dim=(-1, -2))  # (t, b, m): <e_Z, v_j>
    return A, sigma


def _gradient_rows(g, a, weighted, A, v):
    """The gradient rows of :func:`joint_matmul` (eqs. 32-33), (t, b, n, 3).

    Parameters
    ----------
    g : PairGeometry
        ``b`` row and ``m`` column configurations of ``n`` atoms.
    a : tensor (b, m)
        The scaled first derivative of the profile.
    weighted : tensor (t, b, m)
        The weight of ``e_X`` of each pair, ``a e_j - c <e_Z, v_j>``.
    A : tensor (t, b, m, 3, 3)
        ``X_i^T v_j`` (:func:`_atom_sums`).
    v : tensor (t, m, n, 3)
        The gradient entries of the right-hand sides, per column configuration.
    """
    b, n = g.rows.shape[:2]
    t, m = v.shape[:2]
    vc = v - v.mean(dim=2, keepdim=True) if g.centred else v
    Q = weighted[..., None, None] * _t(g.G)  # (t, b, m, 3, 3)
    if g.centred:
        P = _t(g.W) @ A @ g.V
        omega = g.C * (P - _t(P))
        Q = Q + a[..., None, None] * (g.V @ _t(omega) @ _t(g.W))
    col_coords = g.cols.permute(1, 0, 2).reshape(n, 3 * m)  # (atom, (j, b))
    Q_rows = Q.permute(2, 3, 0, 1, 4).reshape(3 * m, t * b * 3)
    aligned = (col_coords @ Q_rows).reshape(n, t, b, 3).permute(1, 2, 0, 3)  # (t, b, n, 3)
    H_rows = (a[..., None, None] * _t(g.G)).permute(1, 2, 0, 3).reshape(3 * m, 3 * b)
    vc_cols = vc.permute(0, 2, 1, 3).reshape(t * n, 3 * m)  # ((t, atom), (j, l))
    centred = (vc_cols @ H_rows).reshape(t, n, b, 3).transpose(1, 2)  # (t, b, n, 3)
    return -weighted.sum(dim=2)[..., None, None] * g.rows + aligned + centred


def energy_rows(geometry, gamma, values=None):
    """Covariances of the row energies with the column energies and gradients, (b, m (3n+1)).

    Row ``i`` holds, per column configuration ``j``, ``k_ij`` and then
    ``dk/dZ_j = -a_ij (Z_j - X_i G_ij)`` (Wong and Kolter, eq. 13). ``values`` is
    ``geometry.profile(gamma)`` when already computed.
    """
    g = geometry
    k, a, _ = g.profile(gamma) if values is None else values
    b, m = k.shape
    eZ = g.cols[None] - torch.einsum("ina,ijab->ijnb", g.rows, g.G)  # (b, m, n, 3)
    dk_dZ = -a[..., None, None] * eZ
    return torch.cat([k[..., None], dk_dZ.reshape(b, m, -1)], dim=-1).reshape(b, -1)


def _rotation_factors(zeta, alpha, W, V):
    """The factors of ``T = (rows * C) @ cols^T``, the rotation part of ``B (x) G + T``.

    Parameters
    ----------
    zeta, alpha : tensors (..., n, 3)
        ``Z_j V`` and ``X_i W`` of each pair.
    W, V : tensors (..., 3, 3)
        The factors of the alignment's derivative.

    Returns
    -------
    rows, cols : tensors (..., 3n, 9)
        ``rows[(a, i), (p, q)] = zeta_aq W_ip`` and
        ``cols[(b, l), (p, q)] = alpha_bp V_lq - alpha_bq V_lp``.
    """
    shape = (*zeta.shape[:-2], 3 * zeta.shape[-2], 9)
    rows = (zeta[..., :, None, None, :] * W[..., None, :, :, None]).reshape(shape)
    cols = alpha[..., :, None, :, None] * V[..., None, :, None, :]  # (..., n, 3, 3, 3)
    cols = (cols - cols.transpose(-1, -2)).reshape(shape)
    return rows, cols


def _alignment_hessian(g):
    """``B (x) G + T``, the gamma-free part of the mixed blocks, (b, m, 3n, 3n)."""
    b, m = g.shape
    n = g.rows.shape[1]
    eye_n = torch.eye(n, dtype=g.rows.dtype)
    centring = eye_n - 1.0 / n if g.centred else eye_n  # (n, n)
    hessian = centring[:, None, :, None] * g.G[:, :, None, :, None, :]
    hessian = hessian.reshape(b, m, 3 * n, 3 * n)
    if g.centred:
        zeta = g.cols[None] @ g.V  # (b, m, n, 3): Z_j V
        alpha = g.rows[:, None] @ g.W  # (b, m, n, 3): X_i W
        rows, cols = _rotation_factors(zeta, alpha, g.W, g.V)  # each (b, m, 3n, 9)
        hessian = hessian + (rows * g.C.reshape(b, m, 1, 9)) @ _t(cols)
    return hessian


def dense_parts(geometry):
    """The ``gamma``-free parts of the dense blocks: residuals and alignment Hessians.

    Returns
    -------
    eX, eZ : tensors (b, m, n, 3)
        ``X_i - Z_j G^T`` and ``Z_j - X_i G``.
    hessian : tensor (b, m, 3n, 3n)
        ``B (x) G + T``.
    """
    g = geometry
    eX = g.rows[:, None] - g.cols[None] @ _t(g.G)
    eZ = g.cols[None] - g.rows[:, None] @ g.G
    return eX, eZ, _alignment_hessian(g)


def assemble_dense(parts, values):
    """The dense joint covariance (b (3n+1), m (3n+1)) from :func:`dense_parts` and the
    profile values ``(k, a, c)``, each (b, m).

    Built one block row at a time, so that beyond the result it needs only
    ``O(m n^2)`` memory.
    """
    eX, eZ, hessian = parts
    k, a, c = values
    b, m, n, _ = eX.shape
    blocks = torch.empty(b, 3 * n + 1, m, 3 * n + 1, dtype=k.dtype)
    blocks[:, 0, :, 0] = k
    blocks[:, 0, :, 1:] = -a[..., None] * eZ.reshape(b, m, 3 * n)
    blocks[:, 1:, :, 0] = _t(-a[..., None] * eX.reshape(b, m, 3 * n))
    for i in range(b):
        mixed = eX[i].reshape(m, -1, 1) * eZ[i].reshape(m, 1, -1)  # (m, 3n, 3n)
        mixed.mul_(c[i, :, None, None]).addcmul_(hessian[i], a[i, :, None, None])
        blocks[i, 1:, :, 1:] = mixed.transpose(0, 1)
    return blocks.reshape(b * (3 * n + 1), m * (3 * n + 1))


def joint_dense(geometry, gamma, values=None):
    """The dense joint covariance, (b (3n+1), m (3n+1)): ``O(b m n^2)`` memory.

    Rows and columns are ordered per configuration: the energy, then the ``3n``
    gradient components atom-major. ``values`` is ``geometry.profile(gamma)`` when
    already computed.
    """
    values = geometry.profile(gamma) if values is None else values
    return assemble_dense(dense_parts(geometry), values)


def joint_diagonal(geometry, gamma):
    """Diagonal of the joint covariance of a set with itself (the pairs ``(i, i)``), (m (3n+1),)."""
    g = geometry
    m = g.shape[0]
    n = g.rows.shape[1]
    index = torch.arange(m)
    G, W, V, C = (t[index, index] for t in (g.G, g.W, g.V, g.C))  # (m, 3, 3)
    centring = 1.0 - 1.0 / n if g.centred else 1.0
    diagonal = (centring * torch.diagonal(G, dim1=-2, dim2=-1))[:, None, :].expand(m, n, 3)
    if g.centred:
        zeta = g.cols @ V  # (m, n, 3)
        alpha = g.rows @ W  # (m, n, 3)
        # T[a,i,a,i] = sum_pq W_ip zeta_aq C_pq (alpha_ap V_iq - alpha_aq V_ip)
        diagonal = diagonal + (
            torch.einsum("mip,maq,mpq,map,miq->mai", W, zeta, C, alpha, V)
            - torch.einsum("mip,maq,mpq,maq,mip->mai", W, zeta, C, alpha, V)
        )
    k, a, _ = (value[index, index] for value in g.profile(gamma))  # (m,)
    gradient = a[:, None, None] * diagonal  # (m, n, 3)
    return torch.cat([k[:, None], gradient.reshape(m, 3 * n)], dim=1).reshape(-1)


def block_jacobi(geometry, gamma, noise):
    """Solver with the diagonal blocks ``(i, i)`` of the joint covariance plus noise.

    A configuration's own block is ``diag(k, a (B (x) I + T_ii))``: the gradient
    part is a multiple of the identity corrected by the translations (rank 3, the
    centring ``B``) and by ``T_ii`` (rank at most 9), so with the noise it is
    inverted by the Woodbury identity in ``O(n)`` per configuration. As a
    preconditioner it takes care of the directions that Jacobi scaling gets wrong:
    rigid translations and rotations, where the kernel's own variance vanishes.

    Parameters
    ----------
    geometry : PairGeometry
        A set against itself (``rows`` and ``cols`` the same configurations).
    gamma : float
    noise : tensor (m (3n+1),)
        Added to the diagonal; uniform over each configuration's gradient rows.

    Returns
    -------
    callable
        ``r (m (3n+1), t) -> blocks^{-1} r``.
    """
    g = geometry
    m, n = g.shape[0], g.rows.shape[1]
    index = torch.arange(m)
    k, a, _ = (value[index, index] for value in g.profile(gamma))  # (m,)
    noise = noise.reshape(m, 3 * n + 1)
    energy_diagonal = k + noise[:, 0]  # (m,)
    scale = a + noise[:, 1]  # (m,): the identity part of the gradient block
    if g.centred:
        low, high, capacitance_lu = _own_block_update(g, a, scale)

    def solve(r):
        t = r.shape[-1]
        blocks = r.reshape(m, 3 * n + 1, t)
        energy = blocks[:, :1] / energy_diagonal[:, None, None]
        gradient = blocks[:, 1:] / scale[:, None, None]  # (m, 3n, t)
        if g.centred:
            correction = torch.linalg.lu_solve(*capacitance_lu, _t(high) @ blocks[:, 1:])
            gradient = gradient - (low @ correction) / scale[:, None, None]
        return torch.cat([energy, gradient], dim=1).reshape(-1, t)

    return solve


def _own_block_update(g, a, scale):
    """The low-rank part of each configuration's own gradient block, for the Woodbury
    identity: the block is ``scale I + low @ high^T`` (translations and ``T_ii``).

    Parameters
    ----------
    g : PairGeometry
        A set of ``m`` configurations of ``n`` atoms against itself, centred.
    a : tensor (m,)
        The scaled first derivative of the profile of each configuration with itself.
    scale : tensor (m,)
        The identity part of each gradient block, ``a`` plus the gradient noise.

    Returns
    -------
    low, high : tensors (m, 3n, 12)
    capacitance_lu : tuple
        ``torch.linalg.lu_factor`` of the capacitance ``scale I + high^T low``, (m, 12, 12).
    """
    m, n = g.shape[0], g.rows.shape[1]
    dtype = g.rows.dtype
    index = torch.arange(m)
    W, V, C = (t[index, index] for t in (g.W, g.V, g.C))  # (m, 3, 3)
    translations = torch.eye(3, dtype=dtype).repeat(n, 1) / n**0.5  # (3n, 3)
    translations = translations.expand(m, 3 * n, 3)
    zeta = g.cols @ V  # (m, n, 3)
    alpha = g.rows @ W  # (m, n, 3)
    rows, cols = _rotation_factors(zeta, alpha, W, V)  # each (m, 3n, 9)
    low = torch.cat(
        [
            -a[:, None, None] * translations,
            a[:, None, None] * rows * C.reshape(m, 1, 9),
        ],
        dim=-1,
    )
    high = torch.cat([translations, cols], dim=-1)  # (m, 3n, 12)
    capacitance = scale[:, None, None] * torch.eye(12, dtype=dtype) + _t(high) @ low
    return low, high, torch.linalg.lu_factor(capacitance)
