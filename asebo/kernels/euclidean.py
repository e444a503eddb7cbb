"""Kernels on feature vectors: Gaussian (isotropic or Mahalanobis), Laplacian, linear, Tanimoto.

Every kernel is a small object with one job: ``kernel(X, Y=None)`` returns the
``(len(X), len(Y))`` Gram matrix as a float64 numpy array (``Y = X`` when omitted) and
``kernel.diag(X)`` its diagonal. The objects only store their parameters, so the
estimators of :mod:`asebo.learn.mlkrr`, :mod:`asebo.learn.iokr` and :mod:`asebo.learn.diffusion` can
take any of them, the SVD kernel on geometries (:class:`asebo.kernels.SVDKernel`)
included.
"""

import numpy as np
import torch
from scipy.spatial.distance import cdist


def _as_2d(X):
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"expected a 2-D array (n_samples, n_features), got shape {X.shape}")
    return X


def squared_distances(X, Y):
    """Squared Euclidean distances between the rows of two arrays, by one matrix product.

    ``|x|^2 + |y|^2 - 2 x.y``, clipped at 0 against rounding: for large arrays much
    faster than pairwise differences, at a rounding error of order ``eps |x|^2``.

    Parameters
    ----------
    X : array (n1, d)
    Y : array (n2, d)

    Returns
    -------
    array (n1, n2)
    """
    X, Y = _as_2d(X), _as_2d(Y)
    sq_x = np.einsum("ij,ij->i", X, X)  # (n1,)
    sq_y = np.einsum("ij,ij->i", Y, Y)  # (n2,)
    return np.maximum(sq_x[:, None] + sq_y[None, :] - 2.0 * (X @ Y.T), 0.0)


class Kernel:
    """Base class: ``__call__(X, Y=None)`` gives the Gram matrix, ``diag(X)`` its diagonal."""

    def __call__(self, X, Y=None):
        X = self._prepare(X)
        Y = X if Y is None else self._prepare(Y)
        return self._gram(X, Y)

    def diag(self, X):
        """The diagonal ``k(x_i, x_i)``, shape ``(n,)``, without the full matrix."""
        X = self._prepare(X)
        return np.array([self._gram(x[None], x[None])[0, 0] for x in X])

    def _prepare(self, X):
        return _as_2d(X)

    def _gram(self, X, Y):
        raise NotImplementedError

    def __repr__(self):
        params = ", ".join(
            f"{k}={v!r}" for k, v in vars(self).items() if not isinstance(v, np.ndarray)
        )
        return f"{type(self).__name__}({params})"


class GaussianKernel(Kernel):
    r"""Gaussian kernel :math:`k(x, y) = \exp(-\gamma \lVert A x - A y \rVert^2)`.

    Parameters
    ----------
    gamma : float
        Inverse squared length scale; ``gamma = 1 / (2 sigma**2)`` for a width sigma,
        ``gamma = 1 / epsilon`` in the diffusion-map convention.
    A : array of shape (p, d), optional
        Linear map applied to both arguments: the Mahalanobis form that MLKR and
        MLKRR learn (Fabregat et al. 2022, eq. 2). The identity when omitted.
    """

    def __init__(self, gamma=1.0, A=None):
        self.gamma = float(gamma)
        self.A = None if A is None else np.asarray(A, dtype=np.float64)

    def _prepare(self, X):
        X = _as_2d(X)
        return X if self.A is None else X @ self.A.T

    def _gram(self, X, Y):
        return np.exp(-self.gamma * cdist(X, Y, "sqeuclidean"))

    def diag(self, X):
        return np.ones(len(_as_2d(X)))


class LaplacianKernel(Kernel):
    r"""Laplacian kernel :math:`k(x, y) = \exp(-\gamma \lVert x - y \rVert_1)`."""

    def __init__(self, gamma=1.0):
        self.gamma = float(gamma)

    def _gram(self, X, Y):
        return np.exp(-self.gamma * cdist(X, Y, "cityblock"))

    def diag(self, X):
        return np.ones(len(_as_2d(X)))


class LinearKernel(Kernel):
    r"""Linear kernel :math:`k(x, y) = x^\top y + c`."""

    def __init__(self, offset=0.0):
        self.offset = float(offset)

    def _gram(self, X, Y):
        return X @ Y.T + self.offset

    def diag(self, X):
        X = _as_2d(X)
        return np.einsum("ij,ij->i", X, X) + self.offset


class TanimotoKernel(Kernel):
    r"""Tanimoto (Jaccard) kernel on binary or count fingerprints.

    :math:`k(x, y) = \frac{x^\top y}{\lVert x\rVert^2 + \lVert y\rVert^2 - x^\top y}`,
    which for 0/1 vectors is the size of the intersection over the size of the union.
    Two all-zero fingerprints have similarity 1 (they are identical).
    """

    def _gram(self, X, Y):
        inner = X @ Y.T
        union = np.einsum("ij,ij->i", X, X)[:, None] + np.einsum("ij,ij->i", Y, Y)[None, :] - inner
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(union > 0, inner / np.where(union > 0, union, 1.0), 1.0)

    def diag(self, X):
        return np.ones(len(_as_2d(X)))


def cartesian_rbf_blocks_batched(Xs, Zs, gamma):
    r"""Gaussian kernel on Cartesian positions with its derivative blocks, for all pairs.

    :math:`k = \exp(-\gamma \lVert X - Z\rVert^2 / 2)`: not rotation invariant, so
    it stays right for periodic systems, where the SVD kernel's alignment is
    meaningless. Same layout as :func:`asebo.kernels.svd_kernel_blocks_batched`.

    Parameters
    ----------
    Xs : tensor (m, n, 3)
    Zs : tensor (m', n, 3)
    gamma : float

    Returns
    -------
    k : (m, m')
    dk_dX, dk_dZ : (m, m', n, 3)
    d2k_dXdZ : (m, m', 3n, 3n)
        ``k (gamma I - gamma^2 (X - Z)(X - Z)^T)``.
    """
    diff = Xs[:, None] - Zs[None, :]  # (m, m', n, 3)
    k = torch.exp(-0.5 * gamma * (diff**2).sum(dim=(-1, -2)))  # (m, m')
    dk_dX = -gamma * k[..., None, None] * diff
    flat = diff.reshape(*diff.shape[:2], -1)  # (m, m', 3n)
    eye = torch.eye(flat.shape[-1], dtype=flat.dtype)
    d2 = k[..., None, None] * (gamma * eye - gamma**2 * flat[..., :, None] * flat[..., None, :])
    return k, dk_dX, -dk_dX, d2
