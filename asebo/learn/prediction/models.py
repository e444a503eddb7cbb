"""Energy models: the mean predictor, eigenspectrum KRR and KRR with the SVD kernel.

Gradients are ``-forces``; energies in eV, positions in Å, forces in eV/Å.
"""

import warnings

import numpy as np
import torch
from ase.units import Bohr

from asebo.extras import missing_extra
from asebo.kernels import GaussianKernel, SVDKernel, joint_covariance, solve_joint
from asebo.kernels.joint import energy_rows
from asebo.kernels.svd import svd_distance
from asebo.learn.prediction._checks import check_count, check_number
from asebo.model.regression import SymmetricFactor, noise_vector, observation_vector

try:
    from sklearn.base import BaseEstimator
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.utils.validation import check_is_fitted
except ImportError as error:
    raise missing_extra(error, "learn", "asebo.learn.prediction") from error

CG_RESIDUAL_LIMIT = 1e-2
"""Relative residual ``|(K + Lambda) alpha - y| / |y|`` above which a CG fit is refused.

On water with GPAW (80 training configurations, hyperparameters of the inner CV),
CG fits that stop at residuals of 2e-3 to 4e-3 predict within 0.05 eV of the dense
fit, while residuals of 1e-2 to 6e-2 leave errors of 0.4 to 0.9 eV, more than the
model's RMSE (0.23 eV); on an indefinite ``K + Lambda``, which the SVD kernel's joint
covariance can be, CG diverges (residuals of 10 to 1e6, energies off by as much).
Between ``cg_tolerance`` and this limit the fit warns
(:class:`sklearn.exceptions.ConvergenceWarning`).
"""


def coulomb_eigenspectrum(numbers, positions):
    r"""Sorted eigenvalues of the Coulomb matrix (Rupp et al. 2012), in atomic units.

    ``C_ii = Z_i^2.4 / 2`` and ``C_ij = Z_i Z_j / |R_i - R_j|`` with distances in
    bohr; the eigenvalues, largest first, do not change under rotation, translation
    or a permutation of the atoms.

    Parameters
    ----------
    numbers : int array (n,)
    positions : array (m, n, 3) or (n, 3), Å

    Returns
    -------
    array (m, n) or (n,)
    """
    positions = np.asarray(positions, dtype=np.float64)
    single = positions.ndim == 2
    positions = positions[None] if single else positions
    charges = np.asarray(numbers, dtype=np.float64)  # (n,)
    if positions.ndim != 3 or positions.shape[1:] != (len(charges), 3):
        raise ValueError(f"positions must have shape (m, {len(charges)}, 3), got {positions.shape}")
    distances = np.linalg.norm(positions[:, :, None] - positions[:, None], axis=-1) / Bohr
    n = len(charges)
    off_diagonal = ~np.eye(n, dtype=bool)
    coulomb = np.empty_like(distances)  # (m, n, n)
    coulomb[:, off_diagonal] = np.outer(charges, charges)[off_diagonal] / distances[:, off_diagonal]
    coulomb[:, ~off_diagonal] = 0.5 * charges**2.4
    spectrum = np.linalg.eigvalsh(coulomb)[:, ::-1]  # (m, n), largest first
    return spectrum[0] if single else spectrum


def _check_positions(positions):
    positions = np.asarray(positions, dtype=np.float64)
    if positions.ndim != 3 or positions.shape[-1] != 3:
        raise ValueError(f"positions must have shape (m, n_atoms, 3), got {positions.shape}")
    if not np.isfinite(positions).all():
        raise ValueError("positions contain NaN or inf: remove those configurations")
    return positions


def _check_labels(positions, energies, forces):
    energies = np.asarray(energies, dtype=np.float64)
    if energies.shape != positions.shape[:1]:
        raise ValueError(f"expected {len(positions)} energies, got shape {energies.shape}")
    if not np.isfinite(energies).all():
        raise ValueError("energies contain NaN or inf: remove those configurations")
    if forces is not None:
        forces = np.asarray(forces, dtype=np.float64)
        if forces.shape != positions.shape:
            raise ValueError(
                f"forces must have the shape of positions {positions.shape}, got {forces.shape}"
            )
        if not np.isfinite(forces).all():
            raise ValueError("forces contain NaN or inf: remove those configurations")
    return energies, forces


def _check_training(positions, energies, forces):
    """Checked training data: positions (m, n, 3), energies (m,), forces (m, n, 3) or
    None, with ``m >= 1``."""
    positions = _check_positions(positions)
    if len(positions) == 0:
        raise ValueError("no training configurations: pass 1 or more")
    return (positions, *_check_labels(positions, energies, forces))


def _median_scale(distances, size):
    """Median of the off-diagonal squared distances (m, m), a data scale for ``gamma``.

    ValueError where it is round-off, at most ``1e-12 size``, with ``size`` the mean
    squared norm of the configurations the distances are between: half or more of
    the pairs coincide.
    """
    off = distances[~np.eye(len(distances), dtype=bool)]
    if not off.size:
        return 1.0
    median = float(np.median(off))
    if not median > 1e-12 * size:
        raise ValueError(
            f"half or more of the pairs of configurations coincide (median squared "
            f"distance {median:.3g}, round-off): no gamma scale; pass distinct configurations"
        )
    return median


# ---------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------
class MeanPredictor(BaseEstimator):
    """Predicts the mean training energy (the baseline of Wong and Kolter, Tables 1-2)."""

    name = "mean"
    uses_forces = False

    def fit(self, positions, energies, forces=None):
        """Store the mean of ``energies`` (m,), ``m >= 1``; returns self."""
        _, energies, _ = _check_training(positions, energies, None)
        self.mean_ = float(np.mean(energies))
        return self

    def predict(self, positions):
        """The mean energy for each configuration, (b,)."""
        check_is_fitted(self, "mean_")
        return np.full(len(_check_positions(positions)), self.mean_)


class _KernelRidge(BaseEstimator):
    """Kernel ridge regression on per-configuration observation blocks (Wong and Kolter, eq. 34).

    The prior mean is the mean training energy; ``lam`` regularises energies. After
    ``fit``, ``positive_definite_`` tells whether ``K + Lambda`` was positive definite
    (the improper SVD kernel need not be; the predictor only needs it invertible).
    Subclasses give the covariance of the observations (one block of ``block_size``
    rows per configuration, the energy first), the covariance of new energies with
    them, and the regularisation of each row; ``regularisations`` names the
    parameters of that regularisation, which :func:`select_hyperparameters` searches
    with ``gamma``.
    """

    uses_forces = False
    regularisations = ("lam",)

    def _check_hyperparameters(self):
        """Refuse a ``gamma`` that is not positive and finite, and a regularisation
        that is negative or not finite (ValueError)."""
        name = type(self).__name__
        check_number(self.gamma, f"{name} gamma", positive=True)
        for key in self.regularisations:
            check_number(getattr(self, key), f"{name} {key}")

    def block_size(self, n_atoms):
        """Observations per configuration."""
        return 1

    def covariance(self, positions):
        """Covariance of all observations of ``positions`` (m, n, 3), (m b, m b)."""
        raise NotImplementedError

    def cross_covariance(self, positions, training):
        """Covariance of the energies at ``positions`` with the training observations, (b, m b)."""
        raise NotImplementedError

    def regularisation(self, m, n_atoms):
        """Diagonal added to the covariance, (m b,)."""
        return np.full(m * self.block_size(n_atoms), float(self.lam))

    def gamma_scale(self, positions):
        """The ``gamma`` that puts the median pair at ``k = exp(-1)``."""
        raise NotImplementedError

    def observations(self, energies, forces, offset):
        """Targets ``[E - offset, -F]`` per configuration, (m b,)."""
        return np.asarray(energies, dtype=np.float64) - offset

    def fit(self, positions, energies, forces=None):
        """Solve ``(K + Lambda) alpha = y`` on the training observations (m >= 1
        configurations); returns self."""
        self._check_hyperparameters()
        positions, energies, forces = _check_training(positions, energies, forces)
        if self.uses_forces and forces is None:
            raise ValueError(f"{type(self).__name__} learns from forces: pass forces (m, n, 3)")
        offset = float(np.mean(energies))
        alpha = self._solve(positions, self.observations(energies, forces, offset))  # (m b,)
        self.offset_, self.training_, self.alpha_ = offset, positions, alpha
        return self

    def _solve(self, positions, y):
        K = self.covariance(positions)  # (N, N)
        K[np.diag_indices_from(K)] += self.regularisation(*positions.shape[:2])
        factor = SymmetricFactor(K, indefinite="lu")
        self.positive_definite_ = factor.positive_definite
        return factor.solve(y)

    def predict(self, positions):
        """Predicted energies (b,) by eq. 34, ``mu = k(X', X) (K + Lambda)^{-1} y``."""
        check_is_fitted(self, "alpha_")
        positions = _check_positions(positions)
        if positions.shape[1:] != self.training_.shape[1:]:
            raise ValueError(
                f"positions have {positions.shape[1]} atoms; the model was "
                f"trained on {self.training_.shape[1]}"
            )
        return self.offset_ + self.cross_covariance(positions, self.training_) @ self.alpha_


class EigenspectrumKRR(_KernelRidge):
    """KRR on Coulomb-matrix eigenspectra with ``exp(-gamma |e - e'|^2)`` (Rupp et al. 2012).

    Parameters
    ----------
    numbers : int array (n,)
        Atomic numbers of the molecule.
    gamma : float
        Gaussian kernel parameter (atomic units of the eigenvalues, squared, inverse).
    lam : float
        Ridge regularisation ``lambda`` (Wong and Kolter, eq. 34).
    """

    name = "eigenspectrum"

    def __init__(self, numbers=None, gamma=1e-3, lam=1e-6):
        self.numbers = numbers
        self.gamma = gamma
        self.lam = lam

    def _features(self, positions):
        if self.numbers is None:
            raise ValueError("EigenspectrumKRR needs the atomic numbers: pass numbers=...")
        return coulomb_eigenspectrum(self.numbers, positions)  # (m, n)

    def covariance(self, positions):
        return GaussianKernel(self.gamma)(self._features(positions))

    def cross_covariance(self, positions, training):
        return GaussianKernel(self.gamma)(self._features(positions), self._features(training))

    def gamma_scale(self, positions):
        features = self._features(positions)  # (m, n)
        distances = ((features[:, None] - features[None]) ** 2).sum(-1)  # (m, m)
        return 1.0 / _median_scale(distances, np.mean((features**2).sum(-1)))


class SVDKernelKRR(_KernelRidge):
    """KRR with the SVD kernel on energies only (Wong and Kolter, eqs. 10 and 34).

    Parameters
    ----------
    gamma : float
        ``k = exp(-gamma d / 2)``, Å⁻².
    lam : float
        Ridge regularisation ``lambda``.
    proper : bool
        Align by proper rotations only (see :mod:`asebo.kernels.svd`).
    """

    name = "svd"

    def __init__(self, gamma=1.0, lam=1e-6, proper=True):
        self.gamma = gamma
        self.lam = lam
        self.proper = proper

    def _kernel(self):
        """The :class:`asebo.kernels.SVDKernel` of the parameters."""
        return SVDKernel(self.gamma, self.proper)

    def covariance(self, positions):
        return self._kernel()(positions)

    def cross_covariance(self, positions, training):
        return self._kernel()(positions, training)

    def gamma_scale(self, positions):
        positions = _check_positions(positions)
        distances = svd_distance(positions[:, None], positions[None], proper=self.proper)
        centred = positions - positions.mean(axis=1, keepdims=True)  # (m, n, 3)
        return 2.0 / _median_scale(np.asarray(distances), np.mean((centred**2).sum((1, 2))))


class SVDDerivativeKRR(SVDKernelKRR):
    """The SVD kernel with derivatives, trained on energies and forces (Wong and Kolter, eq. 34).

    The joint covariance of energies and gradients is that of Wong and Kolter, eqs. 11-14.

    The observations of a configuration are its energy and the ``3n`` components of
    its gradient ``-F``; their joint covariance is :func:`asebo.kernels.joint_covariance`.
    The energy at new configurations is predicted by eq. 34 with
    ``k(X', X) = [k, dk/dZ]`` per training configuration.

    Parameters
    ----------
    gamma : float
        ``k = exp(-gamma d / 2)``, Å⁻².
    lam : float
        Regularisation of the energies, ``lambda`` (eV² relative to unit kernel variance).
    lam_deriv : float
        Regularisation of the gradient components, ``lambda_deriv``.
    proper : bool
        Align by proper rotations only.
    solver : {'cholesky', 'cg'}
        Dense factorisation (Cholesky, LU where the improper kernel makes the matrix
        indefinite), or conjugate gradients with the structured ``O(m^2 n)`` product
        of Wong and Kolter, eqs. 32-33 (the dense matrix is never formed).
    cg_tolerance : float
        Relative residual at which CG stops.
    cg_max_iter : int
        At most this many CG iterations. A fit that ends above ``cg_tolerance``
        warns (:class:`sklearn.exceptions.ConvergenceWarning`), and one that ends
        above :data:`CG_RESIDUAL_LIMIT` raises :class:`numpy.linalg.LinAlgError`.

    Attributes
    ----------
    solve_info_ : asebo.kernels.operators.SolveInfo
        How the last CG fit solved (iterations and residual), also where it raised.
    positive_definite_ : bool
        Whether ``K + Lambda`` of the last dense fit was positive definite.
    """

    name = "svd_deriv"
    uses_forces = True
    regularisations = ("lam", "lam_deriv")

    def __init__(
        self,
        gamma=1.0,
        lam=1e-6,
        lam_deriv=1e-4,
        proper=True,
        solver="cholesky",
        cg_tolerance=1e-8,
        cg_max_iter=5000,
    ):
        self.gamma = gamma
        self.lam = lam
        self.lam_deriv = lam_deriv
        self.proper = proper
        self.solver = solver
        self.cg_tolerance = cg_tolerance
        self.cg_max_iter = cg_max_iter

    def _check_hyperparameters(self):
        super()._check_hyperparameters()
        if self.solver not in ("cholesky", "cg"):
            raise ValueError(f"solver must be 'cholesky' or 'cg', got {self.solver!r}")
        check_number(self.cg_tolerance, "SVDDerivativeKRR cg_tolerance", positive=True)
        check_count(self.cg_max_iter, "SVDDerivativeKRR cg_max_iter")

    def block_size(self, n_atoms):
        return 3 * n_atoms + 1

    def regularisation(self, m, n_atoms):
        return noise_vector(m, n_atoms, self.lam, self.lam_deriv)  # (m (3n+1),)

    def observations(self, energies, forces, offset):
        return observation_vector(np.asarray(energies) - offset, -np.asarray(forces))

    def covariance(self, positions):
        return joint_covariance(positions, self.gamma, self._kernel()).to_dense().numpy()

    def cross_covariance(self, positions, training):
        geometry = self._kernel().pair_geometry(
            torch.as_tensor(positions), torch.as_tensor(training)
        )
        return energy_rows(geometry, self.gamma).numpy()  # (b, m (3n+1))

    def _solve(self, positions, y):
        if self.solver == "cholesky":
            return super()._solve(positions, y)
        operator = joint_covariance(positions, self.gamma, self._kernel())
        noise = torch.as_tensor(self.regularisation(*positions.shape[:2]))
        alpha, self.solve_info_ = solve_joint(
            operator,
            torch.as_tensor(y),
            noise,
            method="cg",
            tolerance=self.cg_tolerance,
            max_iter=self.cg_max_iter,
        )
        residual, iterations = self.solve_info_.residual, self.solve_info_.iterations
        if not residual <= self.cg_tolerance:
            state = (
                f"CG stopped after {iterations} iterations at relative residual "
                f"{residual:.3g}, above cg_tolerance={self.cg_tolerance:g}"
            )
            if not residual <= CG_RESIDUAL_LIMIT:
                raise np.linalg.LinAlgError(
                    f"{state} and above {CG_RESIDUAL_LIMIT:g}: the weights are too far from "
                    "a solution to predict with (K + Lambda may be indefinite: see "
                    "positive_definite_ of solver='cholesky'); raise cg_max_iter or "
                    "lam_deriv, or use solver='cholesky'"
                )
            warnings.warn(
                f"{state}: raise cg_max_iter or lam_deriv", ConvergenceWarning, stacklevel=3
            )
        return alpha.numpy()


MODELS = {
    "mean": MeanPredictor,
    "eigenspectrum": EigenspectrumKRR,
    "svd": SVDKernelKRR,
    "svd_deriv": SVDDerivativeKRR,
}
"""Model names of the benchmark (rows of Wong and Kolter, Tables 1-2)."""


def make_model(name, numbers=None, **params):
    """A model of :data:`MODELS` by name; ``numbers`` is used by the eigenspectrum model."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    if name == "eigenspectrum":
        params["numbers"] = numbers
    return MODELS[name](**params)
