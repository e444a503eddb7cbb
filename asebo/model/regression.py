r"""The energy-and-force regression core shared by the GP optimizer and the prediction models.

Both :class:`asebo.model.gp.EnergyForceGP` and :class:`asebo.learn.prediction.SVDDerivativeKRR`
regress energies and forces of configurations of one molecule on the joint
covariance of :mod:`asebo.kernels.operators`, one block of ``3n + 1`` observations
per configuration: the energy, then the ``3n`` gradient components ``-F``
(Wong and Kolter, eqs. 11 and 34). This module holds what they share: the
observation vector and its noise, the rows of chosen configurations, the
factorisation of a covariance that the improper SVD kernel may leave indefinite,
and the marginal likelihood with the signal variance profiled out.

References
----------
E. Wong and J. Z. Kolter, "An SVD and derivative kernel approach to learning from
geometric data", Carnegie Mellon University (preprint), eqs. 11 and 34.
C. E. Rasmussen and C. K. I. Williams, "Gaussian Processes for Machine Learning",
MIT Press (2006), eq. 2.30.
"""

import numpy as np
import scipy.linalg


def observation_vector(energies, gradients):
    """Observations per configuration, the energy then its gradient: (m (3n+1),).

    Parameters
    ----------
    energies : array (m,)
    gradients : array (m, n, 3)
        ``-forces``.
    """
    energies = np.asarray(energies, dtype=np.float64)
    gradients = np.asarray(gradients, dtype=np.float64).reshape(len(energies), -1)
    return np.concatenate([energies[:, None], gradients], axis=1).ravel()


def noise_vector(m, n_atoms, energy_variance, gradient_variance):
    """Noise variances of the observations of ``m`` configurations, (m (3n+1),)."""
    per_configuration = np.concatenate([[energy_variance], np.full(3 * n_atoms, gradient_variance)])
    return np.tile(per_configuration, m).astype(np.float64)


def observation_rows(configurations, block):
    """Rows of the observations of ``configurations`` (k,) in blocks of ``block``, (k block,)."""
    return (np.asarray(configurations)[:, None] * block + np.arange(block)).ravel()


def profiled_nll(y, alpha, logdet, count=None):
    r"""Negative log marginal likelihood per observation with the signal variance profiled out.

    For the covariance ``s^2 A`` the likelihood is largest at
    ``s^2 = y^T A^{-1} y / N``, where ``-log p(y) / N = (log s^2 + log|A| / N) / 2``
    up to a constant (Rasmussen and Williams, eq. 2.30).

    Parameters
    ----------
    y : array (N,)
    alpha : array (N,)
        ``A^{-1} y``.
    logdet : float
        ``log|A|``.
    count : int, optional
        ``N``, where fewer than ``len(y)`` entries are observations (the others carry
        zero with unit variance and no covariance, as
        :mod:`asebo.model.observed_directions` sets them); ``len(y)`` by default.
    """
    count = len(y) if count is None else count
    outputscale = max(float(np.dot(y, alpha)) / count, 1e-300)
    return 0.5 * (np.log(outputscale) + logdet / count)


class SymmetricFactor:
    """Factorisation of a symmetric covariance that the improper SVD kernel may leave indefinite.

    Cholesky when the matrix is positive definite. Otherwise, with
    ``indefinite='jitter'``, diagonal jitter from ``1e-6`` of the mean diagonal,
    tripled until a Cholesky factor exists (a uniform shift keeps the solve well
    conditioned, where raising only the negative eigenvalues to a floor would amplify
    the data along them); with ``indefinite='lu'``, an LU factorisation of the
    matrix as it is, which is all a kernel ridge predictor needs.

    Parameters
    ----------
    matrix : array (N, N)
        Not modified.
    indefinite : {'jitter', 'lu'}

    Attributes
    ----------
    lower : array (N, N) or None
        The lower Cholesky factor (None after LU).
    jitter : float
        Diagonal added, relative to the mean diagonal (0 when none was needed).
    positive_definite : bool
        Whether ``matrix + jitter`` has a Cholesky factor.
    """

    _JITTER_TRIES = 12

    def __init__(self, matrix, indefinite="jitter"):
        if indefinite not in ("jitter", "lu"):
            raise ValueError(f"indefinite must be 'jitter' or 'lu', got {indefinite!r}")
        matrix = np.asarray(matrix, dtype=np.float64)
        self.jitter, self._lu = 0.0, None
        self.lower = _cholesky(matrix)
        if self.lower is None and indefinite == "lu":
            self._lu = scipy.linalg.lu_factor(matrix, check_finite=False)
        elif self.lower is None:
            self._add_jitter(matrix)
        self.positive_definite = self.lower is not None

    def _add_jitter(self, matrix):
        scale = float(np.mean(np.diag(matrix)))
        work = matrix.copy()
        diagonal = np.diag(matrix).copy()
        for attempt in range(self._JITTER_TRIES):
            self.jitter = 1e-6 * 3.0**attempt
            np.fill_diagonal(work, diagonal + self.jitter * scale)
            self.lower = _cholesky(work)
            if self.lower is not None:
                return
        self.jitter = float(-np.linalg.eigvalsh(matrix).min()) / scale + 1e-6
        np.fill_diagonal(work, diagonal + self.jitter * scale)
        self.lower = scipy.linalg.cholesky(work, lower=True, check_finite=False)

    def solve(self, b):
        """``matrix^{-1} b`` (with the jitter), b (N,) or (N, t)."""
        if self.lower is None:
            return scipy.linalg.lu_solve(self._lu, b, check_finite=False)
        half = scipy.linalg.solve_triangular(self.lower, b, lower=True, check_finite=False)
        return scipy.linalg.solve_triangular(self.lower.T, half, lower=False, check_finite=False)

    def logdet(self):
        """``log|matrix|`` (with the jitter); NaN after LU, where it need not exist."""
        if self.lower is None:
            return np.nan
        return 2.0 * float(np.log(np.diag(self.lower)).sum())


def _cholesky(matrix):
    """The lower Cholesky factor, or None when the matrix is not positive definite."""
    try:
        return scipy.linalg.cholesky(matrix, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
