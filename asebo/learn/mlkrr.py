r"""Metric learning for kernel regression: MLKR and MLKRR.

Both estimators learn a linear map :math:`A` of the features such that the Gaussian
kernel of the transformed features,

.. math:: k(x, x') = \exp\!\left(-\lVert A (x - x') \rVert^2 / \sigma^2\right),

predicts a target well (Fabregat et al. 2022, eq. 2, without its constant prefactor
:math:`1/(\sqrt{2\pi}\sigma)`, which for kernel ridge regression only rescales
:math:`\lambda`: the paper's :math:`\lambda` is ours times that prefactor).

* :class:`MLKR` (Weinberger and Tesauro) minimises the leave-one-out error of the
  Nadaraya-Watson estimator, eq. 3, by the gradient of eq. 5.
* :class:`MLKRR` (Fabregat et al. 2022) splits the training set into an alpha-half, which gives
  the kernel ridge regression coefficients :math:`\alpha = (K + \lambda I)^{-1} y^{(\alpha)}`
  (eq. 8), and an A-half, on which the squared error of the KRR predictions (eq. 9) is
  minimised with the gradient of eq. 10. The halves are drawn anew every
  ``shuffle_every`` iterations (section "Optimization details").

Both gradients are sums over pairs, :math:`\sum_{ij} W_{ij} x_{ij} x_{ij}^\top`; the
appendix lemma of Fabregat et al. (2022) writes them as matrix products (:func:`pair_outer_sum`), so
one gradient costs a few matrix products and, for MLKRR, one Cholesky factorisation.
For L-BFGS both losses are divided by their value at the start of a run, so that
tolerances do not depend on the units of ``y``. Predictions of both estimators
are those of kernel ridge regression on the whole training set with the learned
metric, :class:`asebo.kernels.GaussianKernel` with ``gamma = 1 / sigma**2`` and
``A = components_``.

References
----------
.. [1] R. Fabregat, P. van Gerwen, M. Haeberle, F. Eisenbrand, C. Corminboeuf,
   "Metric learning for kernel ridge regression: assessment of molecular similarity",
   Mach. Learn.: Sci. Technol. 3, 035015 (2022).
.. [2] K. Q. Weinberger, G. Tesauro, "Metric learning for kernel regression",
   AISTATS 2007.
"""

import functools
import math
import numbers
import warnings

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize
from scipy.special import softmax

from asebo.extras import missing_extra
from asebo.kernels import GaussianKernel, squared_distances

try:
    from sklearn.base import (
        BaseEstimator,
        ClassNamePrefixFeaturesOutMixin,
        RegressorMixin,
        TransformerMixin,
    )
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.utils import check_random_state
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError as error:
    raise missing_extra(error, "learn", "asebo.learn.mlkrr") from error

__all__ = ["MLKR", "MLKRR", "mlkr_loss", "mlkrr_loss", "pair_outer_sum"]


def pair_outer_sum(W, X, Z=None):
    r"""Sum over pairs :math:`\sum_{ij} W_{ij} (z_i - z_j)(x_i - x_j)^\top` by matrix products.

    This is the lemma of the appendix of Fabregat et al. (2022) with both sets of rows equal: with
    :math:`R = \mathrm{diag}(W 1)` and :math:`S = \mathrm{diag}(W^\top 1)`,

    .. math:: \sum_{ij} W_{ij} x_{ij} x_{ij}^\top = X^\top (R + S - W - W^\top) X.

    A sum over pairs between two sets (the lemma's general form) is the same sum over
    their union with ``W`` nonzero in one off-diagonal block. When the rows of ``Z``
    are ``A x``, the result is ``A`` times that sum, which is how the gradients use it:
    ``Z = X A^T`` is already at hand, so no ``d x d`` product is needed.

    Parameters
    ----------
    W : ndarray of shape (n, n)
        Pair weights.
    X : ndarray of shape (n, d)
        Rows :math:`x_i`.
    Z : ndarray of shape (n, p), optional
        Rows :math:`z_i`; ``X`` when omitted.

    Returns
    -------
    ndarray of shape (p, d)
    """
    Z = X if Z is None else Z
    laplacian = -(W + W.T)  # (n, n)
    laplacian[np.diag_indices_from(laplacian)] += W.sum(axis=0) + W.sum(axis=1)
    return Z.T @ (laplacian @ X)


def mlkr_loss(A, X, y, sigma):
    r"""Leave-one-out Nadaraya-Watson error of MLKR and its gradient (Fabregat et al., eqs. 3-5).

    .. math::
        \hat y_i = \frac{\sum_{j \ne i} k_{ij} y_j}{\sum_{j \ne i} k_{ij}},\qquad
        \mathcal{L} = \sum_i (\hat y_i - y_i)^2,\qquad
        \frac{\partial \mathcal{L}}{\partial A} = \frac{4}{\sigma^2} A \sum_{ij}
        (\hat y_i - y_i) \frac{k_{ij}}{Z_i} (\hat y_i - y_j)\, x_{ij} x_{ij}^\top.

    The weights :math:`k_{ij} / Z_i` are a softmax over :math:`j \ne i`, computed with
    the largest exponent subtracted, so that far-apart points do not underflow.

    Parameters
    ----------
    A : ndarray of shape (p, d)
        The linear map.
    X : ndarray of shape (n, d)
        Features, ``n >= 2``.
    y : ndarray of shape (n,)
        Targets.
    sigma : float
        Kernel width.

    Returns
    -------
    cost : float
    grad : ndarray of shape (p, d)
    """
    Z = X @ A.T  # (n, p)
    logits = -squared_distances(Z, Z) / sigma**2  # (n, n)
    np.fill_diagonal(logits, -np.inf)
    weights = softmax(logits, axis=1)  # (n, n), k_ij / Z_i
    y_hat = weights @ y  # (n,)
    residual = y_hat - y  # (n,)
    W = residual[:, None] * weights * (y_hat[:, None] - y[None, :])  # (n, n)
    grad = 4.0 / sigma**2 * pair_outer_sum(W, X, Z)  # (p, d)
    return float(residual @ residual), grad


def mlkrr_loss(A, X_A, y_A, X_alpha, y_alpha, sigma, krr_lambda):
    r"""KRR error on the A-half with coefficients from the alpha-half, and its gradient.

    Fabregat et al. (2022), eqs. 8-10: with :math:`K = k(X^{(\alpha)}, X^{(\alpha)})`,
    :math:`Q = k(X^{(A)}, X^{(\alpha)})`, :math:`H = K + \lambda I`,
    :math:`\alpha = H^{-1} y^{(\alpha)}`, :math:`\hat y = Q \alpha` and
    :math:`r = \hat y - y^{(A)}`,

    .. math::
        \mathcal{L}_A = r^\top r,\qquad
        \frac{\partial \mathcal{L}_A}{\partial A} = -\frac{4}{\sigma^2} A \sum_{ij} W_{ij}
        x_{ij} x_{ij}^\top + \frac{4}{\sigma^2} A \sum_{ab} \tilde W_{ab} x_{ab} x_{ab}^\top,

    :math:`W_{ij} = r_i \alpha_j Q_{ij}` over A-half by alpha-half pairs and
    :math:`\tilde W_{ab} = K_{ab} \alpha_b [H^{-1} Q^\top r]_a` over alpha-half pairs,
    each sum evaluated by :func:`pair_outer_sum` (the appendix lemma).

    Parameters
    ----------
    A : ndarray of shape (p, d)
        The linear map.
    X_A : ndarray of shape (n_A, d)
        Features of the points whose error is measured.
    y_A : ndarray of shape (n_A,)
        Their targets.
    X_alpha : ndarray of shape (n_alpha, d)
        Features of the points that define the KRR coefficients.
    y_alpha : ndarray of shape (n_alpha,)
        Their targets.
    sigma : float
        Kernel width.
    krr_lambda : float
        Ridge parameter, > 0.

    Returns
    -------
    cost : float
    grad : ndarray of shape (p, d)
    """
    Z_A = X_A @ A.T  # (n_A, p)
    Z_alpha = X_alpha @ A.T  # (n_alpha, p)
    K = np.exp(-squared_distances(Z_alpha, Z_alpha) / sigma**2)  # (n_alpha, n_alpha)
    Q = np.exp(-squared_distances(Z_A, Z_alpha) / sigma**2)  # (n_A, n_alpha)
    H_factor = _cholesky(K + krr_lambda * np.eye(len(K)))
    alpha = cho_solve(H_factor, y_alpha)  # (n_alpha,)
    residual = Q @ alpha - y_A  # (n_A,)
    u = cho_solve(H_factor, Q.T @ residual)  # (n_alpha,), H^{-T} Q^T r
    n_A = len(X_A)
    W_all = np.zeros((n_A + len(X_alpha),) * 2)  # pairs over [A-half; alpha-half]
    W_all[:n_A, n_A:] = -residual[:, None] * alpha[None, :] * Q  # -W
    W_all[n_A:, n_A:] = K * u[:, None] * alpha[None, :]  # W_tilde
    grad = (
        4.0 / sigma**2 * pair_outer_sum(W_all, np.vstack([X_A, X_alpha]), np.vstack([Z_A, Z_alpha]))
    )  # (p, d)
    return float(residual @ residual), grad


DEGENERATE = 1e-6
"""A learned kernel is degenerate where, for most training points, its largest value at
another training point is below this (a delta: each prediction falls back to the mean)
or its smallest is above one less this (flat: every point alike)."""


def _warn_if_degenerate(K, X, name):
    """Warn where the Gram matrix ``K`` (n, n) of the learned metric on the training
    points ``X`` (n, d) is a delta or flat (:data:`DEGENERATE`): the loss's gradient
    vanishes there, so the optimiser stops where nothing was learned. The warning names
    the median distance from a training point to its nearest other one, a width to start
    from."""
    off = K[~np.eye(len(K), dtype=bool)].reshape(len(K), -1)  # (n, n - 1)
    if np.median(off.max(axis=1)) < DEGENERATE:
        shape = "a delta: no training point sees another"
    elif np.median(off.min(axis=1)) > 1.0 - DEGENERATE:
        shape = "flat: every training point alike"
    else:
        return
    squared = squared_distances(X, X) + np.diag(np.full(len(X), np.inf))  # (n, n)
    nearest = float(np.median(np.sqrt(np.maximum(squared.min(axis=1), 0.0))))
    warnings.warn(
        f"{name}'s learned kernel is {shape}, and its predictions are about the mean of "
        f"the targets: start from a sigma near the distance between neighbouring "
        f"training points ({nearest:.3g} in the features given), with learn_sigma=False "
        "to keep it",
        ConvergenceWarning,
        stacklevel=3,
    )


def _cholesky(H):
    try:
        return cho_factor(H, lower=True, check_finite=False)
    except np.linalg.LinAlgError as error:
        raise ValueError(
            "K + krr_lambda I is not numerically positive definite: increase krr_lambda"
        ) from error


class _MetricLearningRegressor(
    ClassNamePrefixFeaturesOutMixin, RegressorMixin, TransformerMixin, BaseEstimator
):
    """Shared parts of MLKR and MLKRR: validation, the L-BFGS objective, KRR prediction;
    the transformed features named ``mlkr0``, ``mlkr1``, ... (``mlkrr0``, ...) for
    scikit-learn's ``get_feature_names_out`` and ``set_output``."""

    def fit(self, X, y):
        """Learn the metric on ``(X, y)``, then fit KRR with it on the same data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, at least 2 samples.
        y : array-like of shape (n_samples,)
            Targets.

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, y_numeric=True, ensure_min_samples=2, dtype=np.float64)
        try:
            y = y.astype(np.float64)  # (n,) strings are not converted by y_numeric
        except ValueError as error:
            raise ValueError(f"y must hold numbers, a regression target: {error}") from error
        self._check_hyperparameters()
        self.y_offset_ = float(np.mean(y))
        y_centred = y - self.y_offset_  # (n,)
        # the losses depend on differences of features only: centred, their distances
        # (one matrix product each) keep their precision where the features lie far
        # from the origin, as the kernel's pairwise ones do
        A, sigma, n_iter, converged = self._learn_metric(X - X.mean(axis=0), y_centred)
        if not converged:
            warnings.warn(
                f"{type(self).__name__} did not converge in {n_iter} iterations: "
                "raise max_iter or tol",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.components_ = A  # (d, d)
        self._n_features_out = A.shape[0]
        self.sigma_ = sigma
        self.n_iter_ = n_iter
        K = self.kernel(X)  # (n, n)
        _warn_if_degenerate(K, X - X.mean(axis=0), type(self).__name__)
        H = K + self.krr_lambda * np.eye(len(X))  # (n, n)
        self.dual_coef_ = cho_solve(_cholesky(H), y_centred)  # (n,)
        self.X_fit_ = X
        return self

    def transform(self, X):
        """Features in the learned metric, ``X A^T``, shape ``(n_samples, n_features)``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.components_.T

    def predict(self, X):
        """Kernel ridge regression with the learned metric (Fabregat et al. 2022, eq. 7).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.kernel(X, self.X_fit_) @ self.dual_coef_ + self.y_offset_

    def kernel(self, X, Y=None):
        """Gram matrix of the learned metric, ``GaussianKernel(1 / sigma_**2, components_)``.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        Y : array-like of shape (m, n_features), optional
            ``X`` when omitted.

        Returns
        -------
        ndarray of shape (n, m)
        """
        check_is_fitted(self)
        return GaussianKernel(gamma=1.0 / self.sigma_**2, A=self.components_)(X, Y)

    def _check_hyperparameters(self):
        _check_positive(self.sigma, "sigma")
        _check_positive(self.krr_lambda, "krr_lambda")
        _check_positive(self.tol, "tol")
        if not isinstance(self.learn_sigma, (bool, np.bool_)):
            raise ValueError(f"learn_sigma must be True or False, got {self.learn_sigma!r}")
        if not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")

    def _minimize(self, loss, params, n_features, max_iter):
        """L-BFGS on ``params = [A.ravel(), (log sigma)]`` for ``loss(A, sigma)``.

        The loss is divided by its value at ``params``, so that ``tol`` bounds the
        relative decrease of one iteration whatever the units of ``y``. With
        ``learn_sigma`` the last parameter is ``log sigma``; the kernel depends on
        ``A / sigma`` only, so ``dL/dlog(sigma) = -sum(A * dL/dA)`` comes free.
        """
        scale = loss(*self._unpack(params, n_features))[0] or 1.0

        def objective(theta):
            A, sigma = self._unpack(theta, n_features)
            cost, grad = loss(A, sigma)
            grad = grad.ravel()
            if self.learn_sigma:
                grad = np.append(grad, -np.dot(A.ravel(), grad))
            return cost / scale, grad / scale

        return minimize(
            objective,
            params,
            jac=True,
            method="L-BFGS-B",
            tol=self.tol,
            options={"maxiter": max_iter},
        )

    def _initial_parameters(self, n_features):
        A = np.eye(n_features).ravel()  # identity, as in Fabregat et al. (2022)
        return np.append(A, math.log(self.sigma)) if self.learn_sigma else A

    def _unpack(self, params, n_features):
        if self.learn_sigma:
            return params[:-1].reshape(n_features, n_features), math.exp(params[-1])
        return params.reshape(n_features, n_features), float(self.sigma)


class MLKR(_MetricLearningRegressor):
    """Metric learning for kernel regression with the Nadaraya-Watson estimator.

    Minimises the leave-one-out error of the Nadaraya-Watson estimator in the metric
    ``A`` (Fabregat et al. 2022, eqs. 3-5, after Weinberger and Tesauro) by L-BFGS from the
    identity; :meth:`predict` then uses kernel ridge regression with that metric, the
    comparison made in Fabregat et al. (2022).

    Parameters
    ----------
    sigma : float, default=1.0
        Width of the Gaussian kernel ``exp(-|A(x - x')|^2 / sigma^2)``.
    krr_lambda : float, default=1e-6
        Ridge parameter of the kernel ridge regression used by :meth:`predict`.
    learn_sigma : bool, default=False
        Optimise ``log sigma`` together with ``A``. The kernel depends on ``A / sigma``
        only, so this changes the path of the optimiser, not what it can reach; a path
        from a wide kernel can end at a delta, which :meth:`fit` warns of.
    max_iter : int, default=500
        Most L-BFGS iterations.
    tol : float, default=1e-6
        L-BFGS tolerance (``ftol`` and ``gtol``) on the loss divided by its value at the
        start of the L-BFGS run.

    Attributes
    ----------
    components_ : ndarray of shape (n_features, n_features)
        The learned map ``A``.
    sigma_ : float
        The kernel width used with it.
    dual_coef_ : ndarray of shape (n_samples,)
        KRR coefficients on the training set.
    X_fit_ : ndarray of shape (n_samples, n_features)
        The training features.
    y_offset_ : float
        Mean of the training targets, subtracted before the regression.
    n_iter_ : int
        L-BFGS iterations done.
    n_features_in_ : int

    References
    ----------
    Fabregat et al., Mach. Learn.: Sci. Technol. 3, 035015 (2022), eqs. 3-5
    and the appendix; K. Q. Weinberger, G. Tesauro, AISTATS 2007.
    """

    def __init__(self, sigma=1.0, krr_lambda=1e-6, learn_sigma=False, max_iter=500, tol=1e-6):
        self.sigma = sigma
        self.krr_lambda = krr_lambda
        self.learn_sigma = learn_sigma
        self.max_iter = max_iter
        self.tol = tol

    def _learn_metric(self, X, y):
        n_features = X.shape[1]
        loss = functools.partial(_mlkr_loss_at, X=X, y=y)
        result = self._minimize(
            loss, self._initial_parameters(n_features), n_features, self.max_iter
        )
        A, sigma = self._unpack(result.x, n_features)
        return A, sigma, int(result.nit), bool(result.success)


class MLKRR(_MetricLearningRegressor):
    """Metric learning for kernel ridge regression (Fabregat et al. 2022).

    The training set is split at random into an alpha-half, whose KRR coefficients
    ``alpha = (K + lambda I)^{-1} y_alpha`` define the model, and an A-half, on which the
    squared error of that model is minimised over ``A`` (eqs. 8-10) by L-BFGS from the
    identity. The split is drawn anew every ``shuffle_every`` iterations, which
    restarts L-BFGS; the fit stops when one L-BFGS run converges or after ``max_iter``
    iterations in all. :meth:`predict` is KRR on the whole training set in the learned
    metric.

    Parameters
    ----------
    sigma : float, default=1.0
        Width of the Gaussian kernel ``exp(-|A(x - x')|^2 / sigma^2)``; Fabregat et al. (2022) take
        the best width of plain KRR.
    krr_lambda : float, default=1e-6
        Ridge parameter, in the loss and in :meth:`predict`. The ``1e-9`` of Fabregat et al.
        (2022) with its kernel prefactor ``1 / (sqrt(2 pi) sigma)`` is ``1e-9 sqrt(2 pi)
        sigma`` here.
    learn_sigma : bool, default=False
        Optimise ``log sigma`` together with ``A`` (see :class:`MLKR`).
    shuffle_every : int, default=30
        Iterations between two random splits, 30 in Fabregat et al. (2022).
    alpha_fraction : float, default=0.5
        Fraction of the training set in the alpha-half (Fabregat et al. 2022: half).
    max_iter : int, default=500
        Most L-BFGS iterations in all.
    tol : float, default=1e-6
        L-BFGS tolerance (``ftol`` and ``gtol``) on the loss divided by its value at the
        start of the L-BFGS run.
    random_state : int, RandomState instance or None, default=None
        Seed of the random splits.

    Attributes
    ----------
    components_ : ndarray of shape (n_features, n_features)
        The learned map ``A``.
    sigma_ : float
        The kernel width used with it.
    dual_coef_ : ndarray of shape (n_samples,)
        KRR coefficients on the whole training set.
    X_fit_ : ndarray of shape (n_samples, n_features)
        The training features.
    y_offset_ : float
        Mean of the training targets, subtracted before the regression.
    n_iter_ : int
        L-BFGS iterations done, over all splits.
    n_features_in_ : int

    References
    ----------
    Fabregat et al., Mach. Learn.: Sci. Technol. 3, 035015 (2022), eqs. 7-10,
    the appendix lemma, and the section "Optimization details".
    """

    def __init__(
        self,
        sigma=1.0,
        krr_lambda=1e-6,
        learn_sigma=False,
        shuffle_every=30,
        alpha_fraction=0.5,
        max_iter=500,
        tol=1e-6,
        random_state=None,
    ):
        self.sigma = sigma
        self.krr_lambda = krr_lambda
        self.learn_sigma = learn_sigma
        self.shuffle_every = shuffle_every
        self.alpha_fraction = alpha_fraction
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _check_hyperparameters(self):
        super()._check_hyperparameters()
        if not isinstance(self.shuffle_every, numbers.Integral) or self.shuffle_every < 1:
            raise ValueError(
                f"shuffle_every must be a positive integer, got {self.shuffle_every!r}"
            )
        if not 0.0 < self.alpha_fraction < 1.0:
            raise ValueError(f"alpha_fraction must lie in (0, 1), got {self.alpha_fraction!r}")

    def _learn_metric(self, X, y):
        n_samples, n_features = X.shape
        rng = check_random_state(self.random_state)
        n_alpha = min(max(round(self.alpha_fraction * n_samples), 1), n_samples - 1)
        params = self._initial_parameters(n_features)
        n_iter = 0
        for _ in range(math.ceil(self.max_iter / self.shuffle_every)):
            order = rng.permutation(n_samples)
            alpha_half, a_half = order[:n_alpha], order[n_alpha:]
            loss = functools.partial(
                _mlkrr_loss_at,
                X_A=X[a_half],
                y_A=y[a_half],
                X_alpha=X[alpha_half],
                y_alpha=y[alpha_half],
                krr_lambda=self.krr_lambda,
            )
            budget = min(self.shuffle_every, self.max_iter - n_iter)
            result = self._minimize(loss, params, n_features, budget)
            params = result.x
            n_iter += int(result.nit)
            if result.success:
                A, sigma = self._unpack(params, n_features)
                return A, sigma, n_iter, True
            if n_iter >= self.max_iter:
                break
        A, sigma = self._unpack(params, n_features)
        return A, sigma, n_iter, False


def _mlkr_loss_at(A, sigma, X, y):
    return mlkr_loss(A, X, y, sigma)


def _mlkrr_loss_at(A, sigma, X_A, y_A, X_alpha, y_alpha, krr_lambda):
    return mlkrr_loss(A, X_A, y_A, X_alpha, y_alpha, sigma, krr_lambda)


def _check_positive(value, name):
    if not isinstance(value, numbers.Real) or not value > 0 or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
