r"""The joint covariance of energies and energy gradients as a structured operator.

For ``m`` configurations of ``n`` atoms the covariance of ``[E_i, \nabla E_i]`` is an
``m (3n + 1)`` square matrix whose ``(i, j)`` block is
``[[k, dk/dZ], [dk/dX, d^2k/dX dZ]]`` with ``X`` configuration ``i`` and ``Z``
configuration ``j`` (Wong and Kolter, eqs. 11-13). :class:`JointCovariance`
multiplies by it without forming it: every per-pair quantity is a scalar or a 3x3
matrix (:class:`asebo.kernels.joint.PairGeometry`), and the mixed block acts through
centring and 3x3 products (eqs. 32-33), so a product costs ``O(m^2 n)`` time and
``O(m^2 + m n)`` memory. :class:`JointStructure` keeps the same per-pair data for
configurations that arrive one at a time. :func:`solve_joint` solves with the
operator by preconditioned conjugate gradients, or by Cholesky below a size
threshold.

References
----------
E. Wong and J. Z. Kolter, "An SVD and derivative kernel approach to learning from
geometric data", Carnegie Mellon University (preprint), eqs. 11-14 and 32-33.
"""

import warnings
from dataclasses import dataclass

import torch

from asebo.kernels.configuration import SVDKernel, check_kernel
from asebo.kernels.joint import (
    PairGeometry,
    assemble_dense,
    dense_parts,
    joint_dense,
    joint_diagonal,
    joint_matmul,
)
from asebo.kernels.svd import _as_tensor

with warnings.catch_warnings():
    # linear_operator (0.6) applies torch.jit.script to two functions of
    # linear_operator.utils.linear_cg when it is imported, and recent PyTorch deprecates
    # torch.jit.script: a warning about a dependency's internals that the user can do
    # nothing about. This is the package's first import of linear_operator (GPyTorch and
    # BoTorch import it too), so only this import is silenced, and only that message.
    warnings.filterwarnings(
        "ignore", message="`torch.jit.script` is deprecated", category=DeprecationWarning
    )
    from linear_operator.operators import LinearOperator
    from linear_operator.utils import linear_cg
    from linear_operator.utils.warnings import NumericalWarning

_DENSE_CHUNK_BYTES = 2**28  # intermediates of one chunk of dense block rows


class JointCovariance(LinearOperator):
    """Structured covariance of energies and gradients for ``m`` configurations.

    Rows and columns are ordered per configuration: the energy, then the ``3n``
    gradient components atom-major. Build it with :func:`joint_covariance` or
    :meth:`JointStructure.operator`.

    Parameters
    ----------
    positions : tensor (m, n, 3)
        Configurations as the kernel sees them (centred for the SVD kernel).
    distance : tensor (m, m)
    G, W, V, C : tensors (m, m, 3, 3)
        The per-pair alignment (:class:`asebo.kernels.joint.PairGeometry`).
    gamma : float
        Kernel inverse squared length scale, ``k = exp(-gamma d / 2)`` for the
        squared exponential.
    centred : bool
        SVD kernel (True) or Gaussian kernel on Cartesian positions (False).
    radial : profile, optional
        ``f`` of ``k = f(d)`` (:mod:`asebo.kernels.radial`), squared exponential by default.

    Attributes
    ----------
    n_matmuls : int
        Products computed so far (a dense form is never built by them).

    References
    ----------
    Wong and Kolter, eqs. 11-14 and 32-33.
    """

    def __init__(self, positions, distance, G, W, V, C, gamma, centred=True, radial=None):
        super().__init__(
            positions, distance, G, W, V, C, gamma=float(gamma), centred=centred, radial=radial
        )
        self.geometry = PairGeometry(positions, positions, distance, G, W, V, C, centred, radial)
        self.gamma = float(gamma)
        self.values = self.geometry.profile(self.gamma)  # (k, a, c), each (m, m)
        self.n_matmuls = 0
        self.n_configs, self.n_atoms = positions.shape[:2]

    @classmethod
    def from_geometry(cls, geometry, gamma):
        g = geometry
        return cls(g.rows, g.distance, g.G, g.W, g.V, g.C, gamma, g.centred, g.radial)

    def _size(self):
        size = self.n_configs * (3 * self.n_atoms + 1)
        return torch.Size([size, size])

    def _transpose_nonbatch(self):
        return self

    def _matmul(self, rhs):
        self.n_matmuls += 1
        if rhs.ndim == 1:
            return joint_matmul(self.geometry, self.gamma, rhs[:, None], self.values)[:, 0]
        return joint_matmul(self.geometry, self.gamma, rhs, self.values)

    def matmul(self, other):
        """``self @ other``: the structured product, through autograd only when it is needed."""
        if (
            isinstance(other, torch.Tensor)
            and other.ndim <= 2
            and not (other.requires_grad and torch.is_grad_enabled())
        ):
            if other.shape[0] != self.shape[-1]:
                raise ValueError(
                    f"cannot multiply an operator of shape {tuple(self.shape)} "
                    f"with a tensor of shape {tuple(other.shape)}"
                )
            return self._matmul(other)
        return super().matmul(other)

    def _diagonal(self):
        return joint_diagonal(self.geometry, self.gamma)

    def to_dense(self):
        """The dense matrix, built in chunks of block rows to bound the memory."""
        m, n = self.n_configs, self.n_atoms
        chunk = max(1, int(_DENSE_CHUNK_BYTES // (8 * 8 * m * 9 * n * n)))
        rows = [
            joint_dense(
                self.geometry.take(rows=slice(i, i + chunk)),
                self.gamma,
                tuple(value[i : i + chunk] for value in self.values),
            )
            for i in range(0, m, chunk)
        ]
        return torch.cat(rows, dim=0)


class JointStructure:
    """The ``gamma``-free per-pair data of a joint covariance, grown one configuration at a time.

    Stores, for ``m`` configurations of ``n`` atoms, the positions ``(m, n, 3)`` and
    per pair the aligned distance and four 3x3 alignment matrices: ``O(m^2 + m n)``
    numbers, never a ``3n x 3n`` block. A new configuration costs its own block row
    and column (``O(m)`` 3x3 SVDs for the SVD kernel). The dense covariance of any
    subset and the structured operator of all configurations are built from it for
    any ``gamma``.

    Parameters
    ----------
    kernel : asebo.kernels.configuration.ConfigurationKernel
        The kernel whose ``pair_geometry`` the data come from, with its radial
        profile; its ``gamma`` is not used.
    """

    _FIELDS = ("distance", "G", "W", "V", "C")

    def __init__(self, kernel):
        self.kernel = check_kernel(kernel)
        self.positions = None  # (m, n, 3), as given
        self._rows = None  # (m, n, 3), as the kernel sees them
        self._buffers = {}  # field -> (capacity, capacity, ...) tensor
        self._dense_parts = {}  # selected configurations -> dense_parts, for a few subsets

    def __len__(self):
        return 0 if self.positions is None else self.positions.shape[0]

    def stored_numbers(self):
        """How many numbers the per-pair and per-configuration data hold (filled or spare)."""
        return sum(b.numel() for b in self._buffers.values()) + (
            0 if self.positions is None else 2 * self.positions.numel()
        )

    def extend(self, new):
        """Add configurations ``new`` (k, n, 3)."""
        for x in new:
            positions = x[None] if self.positions is None else torch.cat([self.positions, x[None]])
            row = self.kernel.pair_geometry(x[None], positions)  # (1, m+1)
            column = self.kernel.pair_geometry(positions[:-1], x[None])  # (m, 1)
            for name in self._FIELDS:
                self._store(name, getattr(row, name)[0], getattr(column, name)[:, 0])
            self.positions = positions
            self._rows = row.cols
        self._dense_parts.clear()
        return self

    def _store(self, name, row, column):
        """Write the block row (m+1, ...) and column (m, ...) of configuration m.

        The data live in a buffer with room to spare, grown by half when full, so
        that a new configuration copies O(m) entries, not the O(m^2) already stored.
        """
        m = len(column)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.shape[0] <= m:
            capacity = m + 1 + max(8, m // 2)
            grown = row.new_empty((capacity, capacity) + tuple(row.shape[1:]))
            if buffer is not None:
                grown[:m, :m] = buffer[:m, :m]
            self._buffers[name] = buffer = grown
        buffer[m, : m + 1] = row
        buffer[:m, m] = column

    def geometry(self, rows=None, cols=None):
        """The :class:`PairGeometry` of all or some configurations (index tensors)."""
        m = len(self)
        full = PairGeometry(
            self._rows,
            self._rows,
            *(self._buffers[name][:m, :m] for name in self._FIELDS),
            centred=self.kernel.centred,
            radial=self.kernel.radial,
        )
        return full if rows is None and cols is None else full.take(rows, cols)

    @property
    def distance(self):
        """Aligned squared distances of every pair, (m, m)."""
        return self._buffers["distance"][: len(self), : len(self)]

    def dense(self, gamma, select=None):
        """Dense joint covariance at ``gamma`` of all or the ``select``-ed configurations.

        The ``gamma``-free parts of the last two subsets asked for are kept until the
        next :meth:`extend`, so a search over ``gamma`` builds them once.
        """
        key = None if select is None else tuple(select.tolist())
        geometry = self.geometry(select, select)
        if key not in self._dense_parts:
            if len(self._dense_parts) == 2:
                self._dense_parts.pop(next(iter(self._dense_parts)))
            self._dense_parts[key] = dense_parts(geometry)
        return assemble_dense(self._dense_parts[key], geometry.profile(gamma))

    def operator(self, gamma):
        """The structured :class:`JointCovariance` of all configurations at ``gamma``."""
        return JointCovariance.from_geometry(self.geometry(), gamma)

    def cross(self, x):
        """The :class:`PairGeometry` of configurations ``x`` (b, n, 3) against all stored ones."""
        return self.kernel.pair_geometry(x, self.positions)


def joint_covariance(positions, gamma, kernel=None):
    """The structured joint covariance of energies and gradients (Wong and Kolter, eqs. 11-13).

    Parameters
    ----------
    positions : list of (n, 3) arrays, or array/tensor (m, n, 3)
        The configurations.
    gamma : float
        Kernel inverse squared length scale (the kernel's own ``gamma`` is not used).
    kernel : asebo.kernels.configuration.ConfigurationKernel, optional
        ``SVDKernel()`` (proper rotations, squared exponential) by default;
        ``SVDKernel(proper=False)``, ``CartesianKernel()`` or another radial profile
        (``radial='matern52'``) otherwise.

    Returns
    -------
    JointCovariance
        A ``linear_operator.LinearOperator`` of size ``m (3n + 1)``.
    """
    if isinstance(positions, (list, tuple)):
        positions = torch.stack([_as_tensor(p, "positions")[0] for p in positions])
    positions, _ = _as_tensor(positions, "positions")
    if positions.ndim != 3:
        raise ValueError(f"positions must have shape (m, n_atoms, 3), got {tuple(positions.shape)}")
    kernel = SVDKernel() if kernel is None else check_kernel(kernel)
    geometry = kernel.pair_geometry(positions, positions)
    return JointCovariance.from_geometry(geometry, gamma)


@dataclass
class SolveInfo:
    """How :func:`solve_joint` solved.

    Attributes
    ----------
    method : {'cholesky', 'cg'}
    iterations : int
        CG iterations (products with the operator after the initial residual).
    residual : float
        ``|A x - b| / |b|``, recomputed after the solve.
    """

    method: str
    iterations: int = 0
    residual: float = 0.0


def solve_joint(
    operator,
    rhs,
    noise,
    method="auto",
    max_cholesky_size=3000,
    tolerance=1e-10,
    max_iter=2000,
    preconditioner=None,
    initial_guess=None,
):
    """Solve ``(K + diag(noise)) x = rhs`` for a joint covariance ``K``.

    Parameters
    ----------
    operator : LinearOperator (N, N)
        Typically a :class:`JointCovariance`.
    rhs : tensor (N,) or (N, t)
    noise : tensor (N,)
        Diagonal added to ``K`` (noise variances of energies and gradients).
    method : {'auto', 'cholesky', 'cg'}
        ``'auto'`` uses Cholesky up to ``max_cholesky_size`` and CG above.
    tolerance : float
        CG stops when the relative residual ``|r| / |rhs|`` falls below it.
    max_iter : int
    preconditioner : callable, optional
        ``r (N, t) -> P^{-1} r`` for a symmetric positive definite ``P`` close to
        ``K + diag(noise)``; Jacobi (the inverse diagonal) by default.
    initial_guess : tensor like ``rhs``, optional
        Where CG starts, e.g. the solution of a nearby system.

    Returns
    -------
    x : tensor like ``rhs``
    info : SolveInfo
    """
    if method == "auto":
        method = "cholesky" if operator.shape[-1] <= max_cholesky_size else "cg"
    if method not in ("cholesky", "cg"):
        raise ValueError(f"method must be 'auto', 'cholesky' or 'cg', got {method!r}")
    column = rhs[:, None] if rhs.ndim == 1 else rhs
    if method == "cholesky":
        x, info = _dense_solve(operator, column, noise), SolveInfo("cholesky")
    else:
        if preconditioner is None:
            preconditioner = _jacobi_preconditioner(operator, noise)
        x, info = _conjugate_gradients(
            operator, column, noise, tolerance, max_iter, preconditioner, initial_guess
        )
    return (x[:, 0] if rhs.ndim == 1 else x), info


def _dense_solve(operator, column, noise):
    """``(K + diag(noise))^{-1} column`` (N, t) through the Cholesky factor of the dense matrix."""
    dense = operator.to_dense()
    dense.diagonal().add_(noise)
    factor = torch.linalg.cholesky(dense)
    return torch.cholesky_solve(column, factor)


def _jacobi_preconditioner(operator, noise):
    """``r (N, t) -> r / diag(K + diag(noise))``."""
    inverse_diagonal = 1.0 / (operator._diagonal() + noise)  # (N,)

    def preconditioner(r):
        return inverse_diagonal[:, None] * r

    return preconditioner


def _conjugate_gradients(operator, column, noise, tolerance, max_iter, preconditioner, start):
    """Preconditioned CG on ``(K + diag(noise)) x = column`` (N, t) from ``start``, (N,)
    or (N, t), or zero (None): the solution (N, t) and its :class:`SolveInfo`."""
    if start is not None and start.ndim == 1:
        start = start[:, None]
    products = []

    def matmul(v):
        products.append(None)
        return operator._matmul(v) + noise[:, None] * v

    # linear_cg's absolute floors (eps, stop_updating_after) default to 1e-10, which
    # stalls float64 solves well before a tight relative tolerance: make them inert.
    # Its warning on stopping at max_iter is dropped: SolveInfo reports the residual.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        x = linear_cg(
            matmul,
            column,
            tolerance=tolerance,
            max_iter=max_iter,
            max_tridiag_iter=max_iter,  # no tridiagonalisation (n_tridiag=0); its cap <= max_iter
            eps=1e-300,
            stop_updating_after=0.0,
            preconditioner=preconditioner,
            initial_guess=start,
        )
    iterations = len(products) - 1  # the first product is the initial residual
    return x, SolveInfo("cg", iterations, _relative_residual(operator, noise, x, column))


def _relative_residual(operator, noise, x, column):
    """``|(K + diag(noise)) x - column| / |column|``."""
    residual = operator._matmul(x) + noise[:, None] * x - column
    return (residual.norm() / column.norm().clamp_min(1e-300)).item()
