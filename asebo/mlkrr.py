r"""Metric learning for kernel regression: MLKR and MLKRR.

Both estimators learn a linear map :math:`A` of the features such that the Gaussian
kernel of the transformed features,

.. math:: k(x, x') = \exp\!\left(-\lVert A (x - x') \rVert^2 / \sigma^2\right),

predicts a target well (seed 000, eq. 2, without its constant prefactor
:math:`1/(\sqrt{2\pi}\sigma)`, which for kernel ridge regression only rescales
:math:`\lambda`: the paper's :math:`\lambda` is ours times that prefactor).

* :class:`MLKR` (Weinberger and Tesauro) minimises the leave-one-out error of the
  Nadaraya-Watson estimator, eq. 3, by the gradient of eq. 5.
* :class:`MLKRR` (seed 000) splits the training set into an alpha-half, which gives
  the kernel ridge regression coefficients :math:`\alpha = (K + \lambda I)^{-1} y^{(\alpha)}`
  (eq. 8), and an A-half, on which the squared error of the KRR predictions (eq. 9) is
  minimised with the gradient of eq. 10. The halves are drawn anew every
  ``shuffle_every`` iterations (section "Optimization details").

Both gradients are sums over pairs, :math:`\sum_{ij} W_{ij} x_{ij} x_{ij}^\top`; the
appendix lemma of seed 000 writes them as matrix products (:func:`pair_outer_sum`), so
one gradient costs a few matrix products and, for MLKRR, one Cholesky factorisation.
Both losses are divided by the total sum of squares of the targets, a constant, so
that tolerances do not depend on the units of ``y``. Predictions of both estimators
are those of kernel ridge regression on the whole training set with the learned
metric, :class:`asebo.kernels.GaussianKernel` with ``gamma = 1 / sigma**2`` and
``A = components_``.

References
----------
.. [1] R. Fabregat, P. van Gerwen, M. Haeberle, F. Eisenbrand, C. Corminboeuf,
   "Metric learning for kernel ridge regression: assessment of molecular similarity",
   Mach. Learn.: Sci. Technol. 3, 035015 (2022) (seed 000).
.. [2] K. Q. Weinberger, G. Tesauro, "Metric learning for kernel regression",
   AISTATS 2007.
"""

import math
import numbers
import warnings

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize
from scipy.special import softmax
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from asebo.kernels import GaussianKernel

__all__ = ["MLKR", "MLKRR", "mlkr_loss", "mlkrr_loss", "pair_outer_sum"]


def pair_outer_sum(W, X_left, X_right, Z_left=None, Z_right=None):
    r"""Sum over pairs :math:`\sum_{ij} W_{ij} (z_i - z'_j)(x_i - x'_j)^\top` by matrix products.

    This is the lemma of the appendix of seed 000: with :math:`R = \mathrm{diag}(W 1)`
    and :math:`S = \mathrm{diag}(W^\top 1)`,
    :math:`\sum_{ij} W_{ij} x_{ij} x_{ij}^\top = X^\top R X + X'^\top S X' - X^\top W X'
    - X'^\top W^\top X`. When the rows of ``Z`` are ``A x``, the result is ``A`` times
    that sum, which is how the gradients use it (``Z = X A^T`` is already at hand, and
    ``p x d`` products are cheaper than ``d x d`` ones).

    Parameters
    ----------
    W : ndarray of shape (n, m)
        Pair weights.
    X_left : ndarray of shape (n, d)
        Rows :math:`x_i`.
    X_right : ndarray of shape (m, d)
        Rows :math:`x'_j`.
    Z_left : ndarray of shape (n, p), optional
        Rows :math:`z_i`; ``X_left`` when omitted.
    Z_right : ndarray of shape (m, p), optional
        Rows :math:`z'_j`; ``X_right`` when omitted.

    Returns
    -------
    ndarray of shape (p, d)
    """
    Z_left = X_left if Z_left is None else Z_left
    Z_right = X_right if Z_right is None else Z_right
    row_sums = W.sum(axis=1)  # (n,)
    col_sums = W.sum(axis=0)  # (m,)
    return ((Z_left * row_sums[:, None]).T @ X_left  # (p, d)
            + (Z_right * col_sums[:, None]).T @ X_right
            - Z_left.T @ (W @ X_right)
            - Z_right.T @ (W.T @ X_left))
