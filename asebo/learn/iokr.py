r"""Input Output Kernel Regression (IOKR), and what it shares with magnitude-preserving IOKR.

:class:`IOKR` and :class:`IOKRCV` live here; :class:`~asebo.learn.mpiokr.MPIOKR` and
:class:`~asebo.learn.mpiokr.MPIOKRCV` in :mod:`asebo.learn.mpiokr`. Both kinds of estimators learn
a map :math:`h` from inputs to the feature space :math:`\mathcal F_y` of an output
kernel :math:`k_y` and predict by ranking a set of candidate outputs by their distance
to :math:`h(x)` (Brouard et al. 2017, eq. 3).

* :class:`IOKR` is kernel ridge regression into :math:`\mathcal F_y`:
  :math:`h(x) = \Psi_S (\lambda I + K_{X_S})^{-1} k^x_{X_S}` (eq. 2).
* :class:`MPIOKR` fits, for each training example :math:`i` and each of its
  candidates :math:`j \in C_i`, the difference :math:`h(x_i) - h(x_j)` to
  :math:`\psi(y_i) - \psi(y_j)` (eq. 4). By Theorem 2 this is IOKR on inputs and
  outputs centred on the mean of a candidate set (eqs. 6-7). Three settings:

  - the inputs of the candidates are known: Prop. 3, a system of size
    :math:`\ell + n`;
  - they are approximated from the candidate outputs by a reverse regression
    :math:`g(y) = \Phi_S (\gamma I + K_{Y_S})^{-1} k^y_{Y_S}` (eqs. 8-10), one
    :math:`\gamma` for the combined input kernel: Prop. 4, eq. 11, a system of
    size :math:`\ell`;
  - each input kernel :math:`k^k_x` is approximated with its own :math:`\gamma_k`
    (eq. 12): Prop. 5, eq. 13, a system of size :math:`\ell G` where the :math:`G`
    groups are the kernels sharing a :math:`\gamma` (section 2.3.2). With one
    :math:`\gamma` for all kernels this is Prop. 4.

:class:`IOKRCV` selects :math:`\lambda` by the closed-form leave-one-out squared error
(:func:`loo_squared_errors`), by its K-fold version, or, given candidate sets, by the
K-fold mean reciprocal rank of held-out training examples among their candidates;
:class:`MPIOKRCV` selects :math:`\gamma` by the leave-one-out error of the reverse
regression, then :math:`\lambda` by that ranking criterion.

Implementation notes (each checked numerically in ``tests/test_iokr.py``):

* Identical candidate sets are merged: a set shared by :math:`m_u` training examples
  enters eq. 6 once with weight :math:`m_u / n_u` instead of :math:`m_u` times with
  weight :math:`1 / n_u`, so with candidate sets defined by a molecular formula the
  cost grows with the number of distinct sets, not of training examples. The
  candidate outputs of all sets are one *pool*; a set is a list of row indices into it.
* The solutions are written as dual coefficients over the output *basis*: the
  training outputs followed by the pool (IOKR: the training outputs only). A score is
  ``K_Y(candidates, basis) @ coef_ @ v(x)`` with ``v(x)`` the vector of input kernel
  values of :math:`x`.
* Eq. 13 misses the kernel weights on the right-hand side: with
  :math:`\phi = [\sqrt{\mu_k} \phi^k]_k`, :math:`\Phi'^\top \phi(x)` has blocks
  :math:`\mu_k k^{kx}_{X_S}` (summed within a group), not :math:`k^{kx}_{X_S}`.
* The MP-IOKR model only fits differences: trained on :math:`\phi(x) - \bar\phi_C`
  it predicts :math:`\psi(y) - \bar\psi_C`. With ``centre=True`` (default) the
  prediction for a test input with candidate set :math:`C` is
  :math:`\hat h(x) = W(\phi(x) - \bar\phi_C) + \bar\psi_C`; with known candidate
  inputs the ranking is then, like eq. 4, invariant to shifts of either feature space
  (the approximation :math:`g` of eq. 10 is not). ``centre=False`` gives the paper's
  :math:`h(x) = W \phi(x)` (eqs. 11 and 13 as written). For IOKR, ``centre=True``
  centres both kernels on the training set, as in Brouard et al. (2016a); the output
  mean is then an unpenalised intercept, which the leave-one-out formula must include.

Kernels
-------
Each side takes a kernel object of :mod:`asebo.kernels` (called as
``kernel(A, B)``) or the string ``"precomputed"``. Several input kernels are given as a
list and combined as :math:`\sum_k \mu_k k^k_x` with weights ``kernel_weights``
(uniform by default); their data are one array shared by all of them or a list with
one numpy array per kernel (a list of numpy arrays is always read as one per kernel).
Precomputed matrices always hold kernel values *against the
basis*, rows being the objects:

===================  ========================================  ============================
argument             IOKR                                      MP-IOKR
===================  ========================================  ============================
``X`` (fit)          ``K_X(S, S)``                             ``K_X(S, S)``
``Y`` (fit)          ``K_Y(S, S)``                             ``K_Y(S, S)``
``candidates`` (fit)                                           ``K_Y(P, [S, P])``
``candidate_inputs`` (fit, Prop. 3)                            ``K_X(P, [S, P])``
``X`` (predict)      ``K_X(test, S)``                          ``K_X(test, S)``; Prop. 3:
                                                               ``K_X(test, [S, P])``
``candidates``       ``K_Y(C, S)``                             ``K_Y(C, [S, P])``
``candidate_inputs`` (predict, Prop. 3)                        ``K_X(C, [S, P])``
``candidate_gram``   ``K_Y(C, C)``                             ``K_Y(C, C)``
===================  ========================================  ============================

with :math:`S` the training examples, :math:`P` the candidate pool of the training
sets and :math:`C` the candidate set to rank. With several precomputed input kernels
each input argument is a list of such matrices, one per kernel.

References
----------
.. [1] C. Brouard, E. Bach, S. Böcker, J. Rousu, "Magnitude-preserving ranking for
   structured outputs", Proc. ACML, PMLR 77, 407-422 (2017).
.. [2] C. Brouard, H. Shen, K. Dührkop, F. d'Alché-Buc, S. Böcker, J. Rousu, "Fast
   metabolite identification with Input Output Kernel Regression", Bioinformatics
   32(12), i28-i36 (2016).
"""

import numbers

import numpy as np
from scipy.linalg import cho_factor, cho_solve, eigh

from asebo.extras import missing_extra
from asebo.kernels import GaussianKernel, LinearKernel

try:
    from sklearn.base import BaseEstimator
    from sklearn.model_selection import KFold, check_cv
    from sklearn.preprocessing import KernelCenterer
    from sklearn.utils.validation import check_array, check_is_fitted
except ImportError as error:
    raise missing_extra(error, "learn", "asebo.learn.iokr") from error

__all__ = ["IOKR", "IOKRCV", "PRECOMPUTED", "loo_squared_errors"]

#: The value of ``input_kernel`` or ``output_kernel`` meaning "kernel matrices given".
PRECOMPUTED = "precomputed"

_SCORES = ("distance", "inner")
_GRAM_CHUNK = 2048  # rows of a candidate Gram matrix computed at once


def _matrix(A, name, n_rows=None, n_cols=None):
    """``A`` as a finite float64 2-D array, with a clear error on a wrong shape."""
    A = check_array(A, dtype=np.float64, input_name=name)
    if n_rows is not None and A.shape[0] != n_rows:
        raise ValueError(f"{name} has {A.shape[0]} rows; expected {n_rows}")
    if n_cols is not None and A.shape[1] != n_cols:
        raise ValueError(
            f"{name} has {A.shape[1]} columns; expected {n_cols} "
            "(precomputed kernels hold values against the fitted basis, "
            "see the asebo.learn.iokr module docstring)"
        )
    return A


def _data(A, name, n_rows=None):
    """Data for a kernel object: finite float64, 2-D or more (geometries are (m, n, 3))."""
    A = check_array(A, dtype=np.float64, allow_nd=True, input_name=name)
    if n_rows is not None and A.shape[0] != n_rows:
        raise ValueError(f"{name} has {A.shape[0]} rows; expected {n_rows}")
    return A


def _same_width(A, basis, name):
    """``A``, refused in one line where its rows are not shaped as ``basis``'s (the
    training data the kernel compares them with)."""
    if np.shape(A)[1:] != np.shape(basis)[1:]:
        raise ValueError(
            f"{name} has rows of shape {np.shape(A)[1:]}, the training data "
            f"{np.shape(basis)[1:]}: give {name} as the model was fitted on"
        )
    return A


def _positive_float(value, name):
    if not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _check_score(score):
    if score not in _SCORES:
        raise ValueError(f"score must be one of {_SCORES}, got {score!r}")


class _InputKernels:
    """The input kernels of an estimator and their weights :math:`\\mu_k`."""

    def __init__(self, input_kernel, kernel_weights):
        input_kernel = GaussianKernel() if input_kernel is None else input_kernel
        kernels = list(input_kernel) if isinstance(input_kernel, (list, tuple)) else [input_kernel]
        is_precomputed = [isinstance(k, str) and k == PRECOMPUTED for k in kernels]
        if not kernels or (any(is_precomputed) and not all(is_precomputed)):
            raise ValueError(
                "input_kernel must be a kernel, 'precomputed', or a non-empty "
                "list of kernels, or of 'precomputed' only"
            )
        for k in kernels:
            if not (isinstance(k, str) and k == PRECOMPUTED) and not callable(k):
                raise ValueError(f"input kernel {k!r} is neither callable nor 'precomputed'")
        self.kernels = kernels
        self.precomputed = all(is_precomputed)
        if kernel_weights is None:
            weights = np.full(len(kernels), 1.0 / len(kernels))
        else:
            weights = np.asarray(kernel_weights, dtype=np.float64).reshape(-1)
            if (
                len(weights) != len(kernels)
                or not np.all(np.isfinite(weights))
                or np.any(weights < 0)
                or not np.any(weights > 0)
            ):
                raise ValueError(
                    f"kernel_weights must be {len(kernels)} non-negative numbers, not all zero"
                )
        self.weights = weights  # (K,)

    def split(self, X, name, n_rows=None):
        """One 2-D array per kernel: a list of numpy arrays is split, anything else shared."""
        if isinstance(X, (list, tuple)) and all(isinstance(p, np.ndarray) for p in X):
            parts = list(X)
            if len(parts) != len(self.kernels):
                raise ValueError(
                    f"{name} is a list of {len(parts)} arrays for {len(self.kernels)} input kernels"
                )
        else:
            if self.precomputed and len(self.kernels) > 1:
                raise ValueError(f"{name}: give one precomputed matrix per input kernel, as a list")
            parts = [X] * len(self.kernels)
        check = _matrix if self.precomputed else _data
        return [check(p, name, n_rows=n_rows) for p in parts]

    def weighted_grams(self, parts, basis, name):
        """The matrices :math:`\\mu_k K^k(X, \\text{basis})`, one per kernel.

        ``basis`` is a list of data arrays, one per kernel, or, for precomputed
        kernels, the number of basis objects (columns expected).
        """
        if self.precomputed:
            return [w * _matrix(p, name, n_cols=basis) for w, p in zip(self.weights, parts)]
        return [
            w * np.asarray(k(_same_width(p, b, name), b), dtype=np.float64)
            for w, k, p, b in zip(self.weights, self.kernels, parts, basis)
        ]


def _training_inputs(inputs, X):
    """The training inputs, one array per kernel, and their weighted Grams over S."""
    parts = inputs.split(X, "X")
    parts = inputs.split(parts, "X", n_rows=len(parts[0]))
    l = len(parts[0])
    return parts, inputs.weighted_grams(parts, l if inputs.precomputed else parts, "X")


class _OutputKernel:
    """The output kernel :math:`k_y`: an object or precomputed matrices."""

    def __init__(self, output_kernel):
        output_kernel = LinearKernel() if output_kernel is None else output_kernel
        self.precomputed = isinstance(output_kernel, str) and output_kernel == PRECOMPUTED
        if not self.precomputed and not callable(output_kernel):
            raise ValueError("output_kernel must be a kernel or 'precomputed'")
        self.kernel = output_kernel

    def gram(self, Y, basis, name):
        """:math:`K_Y(Y, \\text{basis})`; ``basis`` is data, or a column count if precomputed."""
        if self.precomputed:
            return _matrix(Y, name, n_cols=basis)
        return np.asarray(
            self.kernel(_same_width(_data(Y, name), basis, name), basis), dtype=np.float64
        )

    def self_terms(self, candidates, candidate_gram, need_diag, need_mean):
        """Per candidate: :math:`k_y(y, y)` and :math:`\\langle \\psi(y), \\bar\\psi_C \\rangle`."""
        if not (need_diag or need_mean):
            return None, None
        if self.precomputed:
            if candidate_gram is None:
                raise ValueError(
                    "with a precomputed output kernel, pass candidate_gram = "
                    "K_Y(C, C): the ranking needs k_y(y, y) or the candidate "
                    "mean (score='inner' with centre=False needs neither)"
                )
            n = len(candidates)
            gram = _matrix(candidate_gram, "candidate_gram", n_rows=n, n_cols=n)
            diag = np.diag(gram).copy() if need_diag else None
            return diag, gram.mean(axis=1) if need_mean else None
        C = _data(candidates, "candidates")
        diag = np.asarray(self.kernel.diag(C), dtype=np.float64) if need_diag else None
        mean = None
        if need_mean:
            mean = np.concatenate(
                [
                    self.kernel(C[s : s + _GRAM_CHUNK], C).mean(axis=1)
                    for s in range(0, len(C), _GRAM_CHUNK)
                ]
            )
        return diag, mean


def _folds(cv, random_state, n):
    """Train/test index pairs: ``cv`` shuffled folds, or any scikit-learn splitter or list."""
    if isinstance(cv, numbers.Integral):
        if not 2 <= cv <= n:
            raise ValueError(f"cv must be between 2 and the {n} training examples, got {cv}")
        return list(KFold(int(cv), shuffle=True, random_state=random_state).split(np.arange(n)))
    return list(check_cv(cv).split(np.arange(n)))


def _combine_scores(inner, diag, score):
    """Eq. 3 as a score, :math:`2\\langle \\hat h, \\psi\\rangle - k_y(y, y)`, or the inner one."""
    return inner if score == "inner" else 2.0 * inner - diag[None, :]


def loo_squared_errors(K_in, K_out, regs, centre=False):
    r"""Closed-form leave-one-out error of kernel ridge regression into a feature space.

    For :math:`h(x) = \Psi (\rho I + K_{in})^{-1} k^x` (Brouard et al. 2017, eq. 2 with
    :math:`\rho = \lambda`; eq. 10 with the roles of inputs and outputs swapped and
    :math:`\rho = \gamma`) the leave-one-out residual of example :math:`i` is
    :math:`(\psi_i - h(x_i)) / (1 - H_{ii})` with :math:`H = K_{in}(K_{in} + \rho I)^{-1}`,
    because every output coordinate is a ridge regression with the same hat matrix.
    Its squared norm in the feature space of ``K_out`` is
    :math:`[(I - H) K_{out} (I - H)]_{ii} / (1 - H_{ii})^2`. One eigendecomposition of
    :math:`K_{in}` serves all values of :math:`\rho`.

    With ``centre=True`` the regression is that of :class:`IOKR` with centred kernels:
    ridge regression on centred features plus the mean of the outputs, an
    unpenalised intercept, refitted (and recentred) without example :math:`i`. Its hat
    matrix is :math:`J + G` with :math:`J = 1 1^\top / \ell` and
    :math:`G = K_c (K_c + \rho I)^{-1}` on the centred Gram :math:`K_c`; leaving out the
    :math:`J` would drive the error to 0 as :math:`\rho \to 0`.

    Parameters
    ----------
    K_in : ndarray of shape (l, l)
        Gram matrix of the regression's inputs.
    K_out : ndarray of shape (l, l)
        Gram matrix of its outputs (the kernel of the feature space).
    regs : array-like of shape (r,)
        Positive regularisation parameters.
    centre : bool
        Centre both Gram matrices and fit the intercept, as ``IOKR(centre=True)``.

    Returns
    -------
    ndarray of shape (r,)
        Mean over the examples of the squared leave-one-out error, for each value.
    """
    K_in = _matrix(K_in, "K_in")
    l = len(K_in)
    K_out = _matrix(K_out, "K_out", n_rows=l, n_cols=l)
    if K_in.shape != (l, l):
        raise ValueError(f"K_in must be square, got shape {K_in.shape}")
    regs = [_positive_float(r, "each regularisation parameter") for r in np.atleast_1d(regs)]
    intercept = 0.0
    if centre:
        K_in = KernelCenterer().fit_transform(K_in)
        K_out = KernelCenterer().fit_transform(K_out)
        intercept = 1.0 / l  # the diagonal of J
    eigvals, Q = eigh(K_in)  # (l,), (l, l)
    eigvals = np.clip(eigvals, 0.0, None)
    K_out_eig = Q.T @ K_out @ Q  # (l, l) K_out in the eigenbasis of K_in
    errors = []
    for reg in regs:
        QS = Q * (reg / (eigvals + reg))  # (l, l); I - H = QS Q^T
        residual_sq = np.einsum("ij,ij->i", QS @ K_out_eig, QS)  # (l,) diag of (I-H)K(I-H)
        diag = np.einsum("ij,ij->i", QS, Q) - intercept  # (l,) diag of I - H
        errors.append(np.mean(residual_sq / diag**2))
    return np.array(errors)


class _RankingMixin:
    """``rank`` from ``decision_function``: candidate indices, best first."""

    def rank(self, X, candidates, **candidate_data):
        """Candidates ranked for each input, best first (the pre-image of eq. 3).

        Parameters are those of ``decision_function``.

        Returns
        -------
        ndarray of shape (m, n_candidates), int
            Row ``i`` lists the candidate indices from best to worst for input ``i``.
        """
        scores = self.decision_function(X, candidates, **candidate_data)  # (m, n_c)
        return np.argsort(-scores, axis=1, kind="stable")


def _iokr_coef(K, lam, centre):
    """Dual coefficients of IOKR (eq. 2) and the kernel centerer, from the input Gram."""
    l = len(K)
    centerer = KernelCenterer().fit(K) if centre else None
    K_fit = centerer.transform(K) if centre else K
    factor = cho_factor(K_fit + lam * np.eye(l))
    coef = cho_solve(factor, np.eye(l))  # (l, l)
    if centre:
        coef = coef - coef.mean(axis=0)  # H (lam I + K_c)^{-1}: centred output features
    return coef, centerer


class IOKR(_RankingMixin, BaseEstimator):
    r"""Input Output Kernel Regression with candidate ranking (Brouard et al. 2017, eqs. 2-3).

    Parameters
    ----------
    input_kernel : kernel, "precomputed", or list of them, optional
        Input kernel :math:`k_x`; a list is combined as :math:`\sum_k \mu_k k^k_x`.
        None: a new ``GaussianKernel()`` at each fit.
    output_kernel : kernel or "precomputed", optional
        Output kernel :math:`k_y`; None: a new ``LinearKernel()`` at each fit.
    kernel_weights : array-like of shape (K,), optional
        The weights :math:`\mu_k` of several input kernels; uniform by default.
    lam : float
        Ridge parameter :math:`\lambda` of eq. 1.
    centre : bool
        Centre input and output features on the training means (Brouard et al. 2016a);
        the prediction is then :math:`\bar\psi_S + h_c(x)`.
    score : {"distance", "inner"}
        ``"distance"``: :math:`2\langle \hat h(x), \psi(y)\rangle - k_y(y, y)
        = \lVert \hat h(x) \rVert^2 - \lVert \hat h(x) - \psi(y) \rVert^2`, which ranks
        as eq. 3; ``"inner"``: :math:`\langle \hat h(x), \psi(y) \rangle`.

    Attributes
    ----------
    coef_ : ndarray of shape (l, l)
        Dual coefficients: the score of candidate :math:`y` is
        ``K_Y(y, S) @ coef_ @ v(x)`` plus centring terms.
    n_train_ : int
        Number of training examples :math:`\ell`.
    """

    def __init__(
        self,
        input_kernel=None,
        output_kernel=None,
        kernel_weights=None,
        lam=1.0,
        centre=True,
        score="distance",
    ):
        self.input_kernel = input_kernel
        self.output_kernel = output_kernel
        self.kernel_weights = kernel_weights
        self.lam = lam
        self.centre = centre
        self.score = score

    def fit(self, X, Y):
        """Fit eq. 2.

        Parameters
        ----------
        X : array of shape (l, d), list of arrays, or precomputed (l, l) matrices
            Training inputs.
        Y : array of shape (l, p) or precomputed (l, l)
            Training outputs.

        Returns
        -------
        self
        """
        lam = _positive_float(self.lam, "lam")
        _check_score(self.score)
        inputs = _InputKernels(self.input_kernel, self.kernel_weights)
        outputs = _OutputKernel(self.output_kernel)
        parts, grams = _training_inputs(inputs, X)
        K, l = sum(grams), len(parts[0])  # (l, l)
        if outputs.precomputed:
            _matrix(Y, "Y", n_rows=l, n_cols=l)
            self.Y_fit_ = None
        else:
            self.Y_fit_ = _data(Y, "Y", n_rows=l)
        self.X_fit_ = None if inputs.precomputed else parts
        self.n_train_ = l
        self.coef_, self.centerer_ = _iokr_coef(K, lam, bool(self.centre))
        return self

    def input_vectors(self, X):
        r"""The vectors :math:`v(x)` such that :math:`\hat h(x) = \Psi_S\, \text{coef}\, v(x)`.

        Parameters
        ----------
        X : array of shape (m, d), list of arrays, or precomputed (m, l) matrices

        Returns
        -------
        ndarray of shape (m, l)
            The combined input kernel values against the training set, centred on the
            training means when ``centre`` is true.
        """
        check_is_fitted(self, "coef_")
        inputs = _InputKernels(self.input_kernel, self.kernel_weights)
        parts = inputs.split(X, "X")
        basis = self.n_train_ if inputs.precomputed else self.X_fit_
        V = sum(inputs.weighted_grams(parts, basis, "X"))  # (m, l)
        return self.centerer_.transform(V) if self.centre else V

    def decision_function(self, X, candidates, candidate_gram=None):
        """Score each candidate output for each input; higher ranks first.

        Parameters
        ----------
        X : array of shape (m, d), list of arrays, or precomputed (m, l) matrices
            Test inputs; they share the candidate set.
        candidates : array of shape (n_c, p) or precomputed ``K_Y(C, S)`` of shape (n_c, l)
            The candidate set :math:`C`.
        candidate_gram : ndarray of shape (n_c, n_c), optional
            ``K_Y(C, C)``; needed only with a precomputed output kernel and
            ``score="distance"`` (for :math:`k_y(y, y)`).

        Returns
        -------
        ndarray of shape (m, n_c)
        """
        V = self.input_vectors(X)  # (m, l)
        outputs = _OutputKernel(self.output_kernel)
        basis = self.n_train_ if outputs.precomputed else self.Y_fit_
        KY = outputs.gram(candidates, basis, "candidates")  # (n_c, l)
        diag, _ = outputs.self_terms(candidates, candidate_gram, self.score == "distance", False)
        return _iokr_scores(V @ self.coef_.T, KY, diag, self.centre, self.score)


def _iokr_scores(projected, KY, diag, centre, score):
    """IOKR scores from ``V @ coef.T`` (m, l) and ``K_Y(C, S)`` (n_c, l)."""
    inner = projected @ KY.T  # (m, n_c)
    if centre:
        inner = inner + KY.mean(axis=1)[None, :]  # <psi_bar_S, psi(y)>
    return _combine_scores(inner, diag, score)


def _reciprocal_rank(scores):
    """1 / rank of candidate 0 (the right one) in a score vector, ties counted against
    it (the pessimistic rank, as the benchmark ranks): a model that scores every
    candidate alike ranks the right one last, not first."""
    return 1.0 / (1 + np.sum(scores[1:] >= scores[0]))


def _other_than_the_truth(k_tt, k_cc, k_tc):
    r"""Which candidates (n,) differ from the right output in the output feature space:
    :math:`\lVert \psi(y) - \psi(c) \rVert^2 = k_y(y, y) + k_y(c, c) - 2 k_y(y, c)`
    above rounding. A set that holds the right output holds it once more, as a
    candidate that would tie with it."""
    squared = k_tt + k_cc - 2.0 * k_tc  # (n,)
    return squared > 1e-10 * (abs(k_tt) + np.abs(k_cc))


def _iokr_fold_reciprocal_ranks(
    K, KY_S, KY_PS, diag_S, diag_P, sets, train, test, lams, centre, score
):
    """Mean reciprocal rank of held-out examples among their candidates, for each λ."""
    K_tr, K_te = K[np.ix_(train, train)], K[np.ix_(test, train)]
    if centre:
        centerer = KernelCenterer().fit(K_tr)
        K_tr, K_te = centerer.transform(K_tr), centerer.transform(K_te)
    reciprocal = np.zeros((len(test), len(lams)))
    for j, lam in enumerate(lams):
        factor = cho_factor(K_tr + lam * np.eye(len(train)))
        projected = cho_solve(factor, K_te.T).T  # (m, l_train) V (lam I + K)^-1
        if centre:
            projected -= projected.mean(axis=1, keepdims=True)  # ... H, as in _iokr_coef
        for row, i in enumerate(test):
            members = sets.sets[sets.set_of[i]]
            members = members[_other_than_the_truth(diag_S[i], diag_P[members], KY_PS[members, i])]
            KY_c = np.vstack([KY_S[i, train], KY_PS[np.ix_(members, train)]])  # (n_c, l_tr)
            diag = np.concatenate([[diag_S[i]], diag_P[members]])
            s = _iokr_scores(projected[row : row + 1], KY_c, diag, centre, score)[0]
            reciprocal[row, j] = _reciprocal_rank(s)
    return reciprocal.mean(axis=0)


def _heldout_squared_errors(K, KY, train, test, lams, centre):
    """Squared error in the output feature space of IOKR fits on ``train``, on ``test``."""
    K_tr, K_te = K[np.ix_(train, train)], K[np.ix_(test, train)]
    KY_tr, KY_te = KY[np.ix_(train, train)], KY[np.ix_(test, train)]  # (l_tr, l_tr), (m, l_tr)
    target_sq = np.diag(KY)[test]  # (m,) ||psi(y)||^2
    if centre:
        out_centerer = KernelCenterer().fit(KY_tr)
        target_sq = target_sq - 2 * KY_te.mean(axis=1) + KY_tr.mean()
        KY_te, KY_tr = out_centerer.transform(KY_te), out_centerer.transform(KY_tr)
    errors = []
    for lam in lams:
        coef, centerer = _iokr_coef(K_tr, lam, centre)
        V = centerer.transform(K_te) if centre else K_te  # (m, l_tr)
        B = V @ coef.T  # (m, l_tr): h(x) = Psi_tr B^T
        err = (
            target_sq - 2 * np.einsum("ij,ij->i", B, KY_te) + np.einsum("ij,jk,ik->i", B, KY_tr, B)
        )
        errors.append(np.mean(err))
    return np.array(errors)


class _CandidateSets:
    r"""The training candidate sets :math:`C_i` as index lists into a pool, merged.

    Holds the linear maps of eq. 7 on the pool: the set means
    :math:`\bar\Phi_C = \Phi_P \bar E` and the weighted deviations
    :math:`\Phi'_C = \Phi_P R`, where :math:`\bar E` (pool x l) has column
    :math:`1_{C_i} / n_i` and :math:`R` (pool x n_pairs) has, for each distinct set
    :math:`u` shared by :math:`m_u` examples, the columns
    :math:`\sqrt{m_u / n_u}\,(e_c - 1_u / n_u)`, :math:`c \in u`.
    """

    def __init__(self, candidate_sets, n_pool, n_train):
        if len(candidate_sets) != n_train:
            raise ValueError(
                f"candidate_sets has {len(candidate_sets)} sets for {n_train} training examples"
            )
        index = {}
        self.set_of = np.empty(n_train, dtype=np.int64)  # (l,) distinct set of each example
        for i, members in enumerate(candidate_sets):
            members = np.asarray(members)
            if (
                members.ndim != 1
                or len(members) == 0
                or not np.issubdtype(members.dtype, np.integer)
            ):
                raise ValueError(
                    f"candidate set {i} must be a non-empty 1-D array of pool row indices"
                )
            if members.min() < 0 or members.max() >= n_pool:
                raise ValueError(f"candidate set {i} indexes outside the pool of {n_pool} rows")
            key = tuple(np.unique(members).tolist())
            if len(key) != len(members):
                raise ValueError(f"candidate set {i} lists a pool row twice")
            self.set_of[i] = index.setdefault(key, len(index))
        self.sets = [np.array(key, dtype=np.int64) for key in index]
        self.multiplicity = np.bincount(self.set_of, minlength=len(self.sets))  # (n_sets,)
        self.n_pool = n_pool
        self.n_train = n_train
        self.n_pairs = sum(len(s) for s in self.sets)

    def means(self, Z):
        """:math:`\\bar E^\\top Z`: the means of the rows of ``Z`` (pool, k) over each set."""
        set_means = np.stack([Z[s].mean(axis=0) for s in self.sets])  # (n_sets, k)
        return set_means[self.set_of]  # (l, k)

    def spread_means(self, Z):
        """:math:`\\bar E Z`: ``Z`` (l, k) spread uniformly over the members of each :math:`C_i`."""
        per_set = np.zeros((len(self.sets), Z.shape[1]))
        np.add.at(per_set, self.set_of, Z)
        out = np.zeros((self.n_pool, Z.shape[1]))
        for u, s in enumerate(self.sets):
            out[s] += per_set[u] / len(s)
        return out  # (pool, k)

    def deviations(self, Z):
        """:math:`R^\\top Z`: weighted deviations from the set means, (pool, k) -> (n_pairs, k)."""
        return np.concatenate(
            [
                np.sqrt(m / len(s)) * (Z[s] - Z[s].mean(axis=0))
                for s, m in zip(self.sets, self.multiplicity)
            ]
        )

    def spread_deviations(self, Z):
        """:math:`R Z`: (n_pairs, k) -> (pool, k); the adjoint of :meth:`deviations`."""
        out = np.zeros((self.n_pool, Z.shape[1]))
        start = 0
        for s, m in zip(self.sets, self.multiplicity):
            block = Z[start : start + len(s)]
            out[s] += np.sqrt(m / len(s)) * (block - block.mean(axis=0))
            start += len(s)
        return out

    def basis_map(self, Z):
        """:math:`T Z` with :math:`T = [[I, 0], [-\\bar E, R]]`: (l + n_pairs, k) -> (l + pool, k).

        :math:`\\Phi' = [\\Phi_S, \\Phi_P]\\, T` (eq. 7), and likewise :math:`\\Psi'`.
        """
        top = Z[: self.n_train]
        return np.vstack([top, self.spread_deviations(Z[self.n_train :]) - self.spread_means(top)])

    def basis_map_T(self, Z):
        """:math:`T^\\top Z`: (l + pool, k) -> (l + n_pairs, k)."""
        top, pool = Z[: self.n_train], Z[self.n_train :]
        return np.vstack([top - self.means(pool), self.deviations(pool)])


class IOKRCV(_RankingMixin, BaseEstimator):
    """IOKR with :math:`\\lambda` chosen by leave-one-out or K-fold cross-validation.

    The criterion is the squared error :math:`\\lVert \\psi(y_i) - \\hat h(x_i) \\rVert^2`
    in the output feature space (eq. 1), the loss IOKR minimises; with ``cv=None`` it
    is the closed-form leave-one-out error (:func:`loo_squared_errors`), equal to that of
    refits without each example, centring included. When :meth:`fit` is given the
    candidate sets of the training examples, the criterion is instead the one of
    :class:`MPIOKRCV`: the mean reciprocal rank of held-out examples among their
    candidates, in K-fold cross-validation (a set's members equal to the example's own
    output left out, as in :class:`MPIOKRCV`). The squared error does not see the
    ranking; on the QM9 benchmark it chooses a much larger :math:`\\lambda`.

    Parameters
    ----------
    input_kernel, output_kernel, kernel_weights, centre, score
        As in :class:`IOKR`.
    lams : array-like of shape (r,)
        Candidate values of :math:`\\lambda`.
    cv : None, int, splitter or iterable of (train, test) index arrays
        ``None``: closed-form leave-one-out; an integer: that many shuffled folds;
        otherwise as scikit-learn's ``cv`` arguments.
    random_state : int or None
        Seed of the fold shuffling.

    Attributes
    ----------
    lam_ : float
        Selected :math:`\\lambda`.
    cv_errors_ : ndarray of shape (r,) or None
        Mean held-out squared error for each value of ``lams`` (squared-error criterion).
    cv_scores_ : ndarray of shape (r,) or None
        Mean reciprocal rank for each value of ``lams`` (ranking criterion).
    best_estimator_ : IOKR
        Refitted on the whole training set with ``lam_``.
    """

    def __init__(
        self,
        input_kernel=None,
        output_kernel=None,
        kernel_weights=None,
        lams=(1e-4, 1e-3, 1e-2, 1e-1, 1.0),
        cv=None,
        centre=True,
        score="distance",
        random_state=None,
    ):
        self.input_kernel = input_kernel
        self.output_kernel = output_kernel
        self.kernel_weights = kernel_weights
        self.lams = lams
        self.cv = cv
        self.centre = centre
        self.score = score
        self.random_state = random_state

    def fit(self, X, Y, candidates=None, candidate_sets=None):
        """Select :math:`\\lambda` and refit.

        Parameters
        ----------
        X, Y
            As in :meth:`IOKR.fit`.
        candidates : array of shape (pool, p) or precomputed ``K_Y(P, [S, P])``, optional
            A pool of candidate outputs, as in :meth:`MPIOKR.fit`; with
            ``candidate_sets``, :math:`\\lambda` maximises the mean reciprocal rank.
        candidate_sets : sequence of l integer arrays, optional
            The candidates of each training example, as rows of the pool.

        Returns
        -------
        self
        """
        lams = [_positive_float(v, "each of lams") for v in np.atleast_1d(self.lams)]
        _check_score(self.score)
        inputs = _InputKernels(self.input_kernel, self.kernel_weights)
        outputs = _OutputKernel(self.output_kernel)
        parts, grams = _training_inputs(inputs, X)
        K, l = sum(grams), len(parts[0])  # (l, l)
        if outputs.precomputed:
            KY = _matrix(Y, "Y", n_rows=l, n_cols=l)  # (l, l)
        else:
            Y_data = _data(Y, "Y", n_rows=l)
            KY = np.asarray(outputs.kernel(Y_data, Y_data), dtype=np.float64)  # (l, l)
        self.cv_errors_, self.cv_scores_ = None, None
        if (candidates is None) != (candidate_sets is None):
            raise ValueError("give both candidates and candidate_sets, or neither")
        if candidates is not None:
            if self.cv is None:
                raise ValueError(
                    "the ranking criterion needs folds: set cv (cv=None is the "
                    "closed-form leave-one-out of the squared error)"
                )
            if outputs.precomputed:
                n_pool = len(_matrix(candidates, "candidates"))
                KY_P = _matrix(candidates, "candidates", n_cols=l + n_pool)  # (pool, l + pool)
                KY_PS, diag_P = KY_P[:, :l], np.diag(KY_P[:, l:]).copy()
            else:
                pool = _data(candidates, "candidates")
                n_pool = len(pool)
                KY_PS = np.asarray(outputs.kernel(pool, Y_data), dtype=np.float64)
                diag_P = np.asarray(outputs.kernel.diag(pool), dtype=np.float64)
            sets = _CandidateSets(candidate_sets, n_pool, l)
            self.cv_scores_ = np.mean(
                [
                    _iokr_fold_reciprocal_ranks(
                        K,
                        KY,
                        KY_PS,
                        np.diag(KY),
                        diag_P,
                        sets,
                        tr,
                        te,
                        lams,
                        self.centre,
                        self.score,
                    )
                    for tr, te in _folds(self.cv, self.random_state, l)
                ],
                axis=0,
            )
            self.lam_ = lams[int(np.argmax(self.cv_scores_))]
        else:
            if self.cv is None:
                self.cv_errors_ = loo_squared_errors(K, KY, lams, centre=bool(self.centre))
            else:
                self.cv_errors_ = np.mean(
                    [
                        _heldout_squared_errors(K, KY, tr, te, lams, self.centre)
                        for tr, te in _folds(self.cv, self.random_state, l)
                    ],
                    axis=0,
                )
            self.lam_ = lams[int(np.argmin(self.cv_errors_))]
        self.best_estimator_ = IOKR(
            self.input_kernel,
            self.output_kernel,
            self.kernel_weights,
            self.lam_,
            self.centre,
            self.score,
        ).fit(X, Y)
        return self

    def decision_function(self, X, candidates, candidate_gram=None):
        """Scores of the refitted :class:`IOKR`; see :meth:`IOKR.decision_function`."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decision_function(X, candidates, candidate_gram)
