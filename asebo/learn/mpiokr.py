r"""Magnitude-preserving IOKR (MP-IOKR) with its cross-validation.

:class:`MPIOKR` fits, for each training example :math:`i` and each of its candidates
:math:`j \in C_i`, the difference :math:`h(x_i) - h(x_j)` to :math:`\psi(y_i) - \psi(y_j)`
(Brouard et al. 2017, eq. 4); :class:`MPIOKRCV` selects :math:`\gamma` by the
leave-one-out error of the reverse regression, then :math:`\lambda` by the K-fold mean
reciprocal rank. The three settings (Props. 3-5), the kernel arguments and the
implementation notes are described in :mod:`asebo.learn.iokr`, which holds the plain IOKR
estimators and the helpers both share.
"""

import numpy as np
from scipy.linalg import cho_factor, cho_solve, lu_factor, lu_solve

from asebo.extras import missing_extra
from asebo.learn.iokr import (
    _CandidateSets,
    _check_score,
    _combine_scores,
    _data,
    _folds,
    _InputKernels,
    _matrix,
    _other_than_the_truth,
    _OutputKernel,
    _positive_float,
    _RankingMixin,
    _reciprocal_rank,
    _training_inputs,
    loo_squared_errors,
)

try:
    from sklearn.base import BaseEstimator
    from sklearn.utils.validation import check_is_fitted
except ImportError as error:
    raise missing_extra(error, "learn", "asebo.learn.mpiokr") from error

__all__ = ["MPIOKR", "MPIOKRCV"]


class _KnownInputsModel:
    r"""MP-IOKR with known candidate inputs (Prop. 3), deduplicated.

    :math:`h(x) = \Psi' (\lambda I + \Phi'^\top\Phi')^{-1} \Phi'^\top \phi(x)` with
    :math:`\Phi' = [\Phi_S, \Phi_P] T`, so with ``K`` the input Gram over
    :math:`[S, P]` the dual coefficients over the basis are
    :math:`T (\lambda I + T^\top K T)^{-1} T^\top`.
    """

    def __init__(self, K, sets):
        self.sets = sets
        self.TKT = sets.basis_map_T(sets.basis_map_T(K).T)  # (l + n_pairs, l + n_pairs)
        self.n_inputs = len(K)

    def apply(self, lam, V):
        """``V @ coef.T`` for input vectors ``V`` (m, l + pool), without forming ``coef``."""
        factor = cho_factor(self.TKT + lam * np.eye(len(self.TKT)))
        return self.sets.basis_map(cho_solve(factor, self.sets.basis_map_T(V.T))).T


class _ApproximatedInputsModel:
    r"""MP-IOKR with candidate inputs approximated from their outputs (Props. 4-5).

    With :math:`\bar B = \Psi_S^\top \bar\Psi_C`, :math:`L = \Psi_S^\top \Psi'_C` and
    :math:`M_g = (\gamma_g I + K_{Y_S})^{-1}`, :math:`A` has the row blocks
    :math:`A_g = [I - M_g \bar B,\; M_g L]`, and
    :math:`h(x) = \Psi' A^\top (\lambda I + D_K A A^\top)^{-1} v(x)` (eqs. 11, 13) with
    :math:`D_K = \mathrm{diag}(K^g)`, :math:`K^g = \sum_{k \in g} \mu_k K^k_{X_S}` and
    :math:`v(x) = [K^g(S, x)]_g`. :math:`L L^\top = \sum_u m_u \mathrm{Cov}_u` is the
    covariance statistic of the candidate sets: the cost is
    :math:`O(\ell^2 (\ell G + n_{pairs}))`.
    """

    def __init__(self, K_groups, KY, KY_pool, gammas, sets):
        l, G = len(KY), len(gammas)
        set_means = sets.means(KY_pool)  # (l, l): row i = mean_{c in C_i} K_Y(c, S)
        B = set_means.T  # (l, l) column i = Psi_S^T psi_bar_{C_i}
        L = sets.deviations(KY_pool).T  # (l, n_pairs)
        cov = L @ L.T  # (l, l)
        RLt = sets.spread_deviations(L.T)  # (pool, l) R L^T
        M = [cho_solve(cho_factor(g * np.eye(l) + KY), np.eye(l)) for g in gammas]  # G x (l, l)
        first = [np.eye(l) - Mg @ B for Mg in M]  # A_g first block, (l, l)
        AAt = np.block(
            [[first[g] @ first[h].T + M[g] @ cov @ M[h] for h in range(G)] for g in range(G)]
        )  # (lG, lG)
        self.DK_AAt = np.vstack([K_groups[g] @ AAt[g * l : (g + 1) * l] for g in range(G)])
        self.TAt = np.hstack(
            [np.vstack([first[g].T, RLt @ M[g] - sets.spread_means(first[g].T)]) for g in range(G)]
        )  # (l + pool, lG)
        self.centring_maps = [Kg @ Mg for Kg, Mg in zip(K_groups, M)]  # K^g M_g
        self.n_inputs = l * G

    def apply(self, lam, V):
        """``V @ coef.T`` for input vectors ``V`` (m, lG); ``coef`` is :math:`T A^\\top Q^{-1}`."""
        Q = lam * np.eye(self.n_inputs) + self.DK_AAt  # (lG, lG)
        return (self.TAt @ lu_solve(lu_factor(Q), V.T)).T


def _gamma_groups(gamma, n_kernels):
    """Kernel groups sharing a gamma (section 2.3.2): list of (gamma, [kernel indices])."""
    gammas = np.atleast_1d(np.asarray(gamma, dtype=np.float64))
    if len(gammas) == 1:
        gammas = np.repeat(gammas, n_kernels)
    if len(gammas) != n_kernels:
        raise ValueError(
            f"gamma must be one number or {n_kernels} numbers (one per input "
            f"kernel), got {len(gammas)}"
        )
    for g in gammas:
        _positive_float(g, "gamma")
    groups = {}
    for k, g in enumerate(gammas):
        groups.setdefault(float(g), []).append(k)
    return list(groups.items())


class _MPGrams:
    """Kernel matrices of an MP-IOKR problem over the universe :math:`[S, P]`.

    Output side: ``KY_S`` (l, l), ``KY_PS`` (pool, l) and, for cross-validation,
    ``KY`` over the whole universe. Input side: ``KX``, the weighted Grams of each
    kernel over :math:`[S, P]` (known inputs) or over :math:`S` (approximated).
    """

    def __init__(self, estimator, X, Y, candidates, candidate_inputs, need_pool_gram):
        inputs = _InputKernels(estimator.input_kernel, estimator.kernel_weights)
        outputs = _OutputKernel(estimator.output_kernel)
        parts, grams = _training_inputs(inputs, X)
        l = len(parts[0])
        self.known = candidate_inputs is not None
        if outputs.precomputed:
            self.KY_S = _matrix(Y, "Y", n_rows=l, n_cols=l)
            n_pool = len(_matrix(candidates, "candidates"))
            KY_P = _matrix(candidates, "candidates", n_cols=l + n_pool)  # (pool, l + pool)
            self.KY_PS, KY_PP = KY_P[:, :l], KY_P[:, l:]
            self.Y_data, self.pool_data = None, None
        else:
            self.Y_data = _data(Y, "Y", n_rows=l)
            self.pool_data = _data(candidates, "candidates")
            n_pool = len(self.pool_data)
            self.KY_S = outputs.kernel(self.Y_data, self.Y_data)
            self.KY_PS = outputs.kernel(self.pool_data, self.Y_data)
            KY_PP = outputs.kernel(self.pool_data, self.pool_data) if need_pool_gram else None
        self.KY = (
            None if KY_PP is None else np.block([[self.KY_S, self.KY_PS.T], [self.KY_PS, KY_PP]])
        )
        self.l, self.n_pool = l, n_pool
        if self.known:
            cparts = inputs.split(candidate_inputs, "candidate_inputs", n_rows=n_pool)
            if inputs.precomputed:
                bottom = inputs.weighted_grams(cparts, l + n_pool, "candidate_inputs")
                self.KX = [
                    np.vstack([np.hstack([t, b[:, :l].T]), b]) for t, b in zip(grams, bottom)
                ]
                self.X_data = None
            else:
                self.X_data = [np.vstack([p, c]) for p, c in zip(parts, cparts)]
                self.KX = inputs.weighted_grams(self.X_data, self.X_data, "X")
        else:
            self.KX = grams
            self.X_data = None if inputs.precomputed else parts

    def model(self, train, sets, groups):
        """The part of the fit on the training examples ``train`` that λ does not change."""
        if self.known:
            basis = np.concatenate([train, self.l + np.arange(self.n_pool)])
            return _KnownInputsModel(sum(self.KX)[np.ix_(basis, basis)], sets)
        K_groups = [sum(self.KX[k] for k in members)[np.ix_(train, train)] for _, members in groups]
        return _ApproximatedInputsModel(
            K_groups,
            self.KY_S[np.ix_(train, train)],
            self.KY_PS[:, train],
            [g for g, _ in groups],
            sets,
        )


def _mp_input_vectors(KX_parts, groups, centring_maps, KY_candidates_train, KX_candidates, centre):
    """:math:`v(x)` for MP-IOKR inputs, centred on the candidate set when ``centre``.

    Known setting (``groups`` None): the combined kernel against :math:`[S, P]` minus
    its mean over the candidates. Approximated: :math:`[K^g(S, x)]_g` minus
    :math:`[K^g M_g \bar k_S(C)]_g`, the same for the approximated candidate inputs.
    """
    if groups is None:
        V = sum(KX_parts)  # (m, l + pool)
        return V - sum(KX_candidates).mean(axis=0)[None, :] if centre else V
    V = np.hstack([sum(KX_parts[k] for k in members) for _, members in groups])  # (m, lG)
    if centre:
        mean = KY_candidates_train.mean(axis=0)  # (l,) k_bar_S(C)
        V = V - np.concatenate([Km @ mean for Km in centring_maps])[None, :]
    return V


class MPIOKR(_RankingMixin, BaseEstimator):
    r"""Magnitude-preserving IOKR (Brouard et al. 2017, eq. 4), in the three settings of the paper.

    The setting follows from the arguments of :meth:`fit`: with ``candidate_inputs``
    the candidate inputs are known (Prop. 3); without, they are approximated from
    the candidate outputs with one :math:`\gamma` (``gamma`` a number: Prop. 4 on the
    combined input kernel) or one per input kernel (``gamma`` a sequence: Prop. 5,
    kernels with equal :math:`\gamma` grouped).

    Parameters
    ----------
    input_kernel : kernel, "precomputed", or list of them, optional
        Input kernel(s), combined as :math:`\sum_k \mu_k k^k_x`; None: a new
        ``GaussianKernel()`` at each fit.
    output_kernel : kernel or "precomputed", optional
        Output kernel :math:`k_y`; None: a new ``LinearKernel()`` at each fit.
    kernel_weights : array-like of shape (K,), optional
        The weights :math:`\mu_k`; uniform by default.
    lam : float
        Ridge parameter :math:`\lambda` of eq. 4.
    gamma : float or sequence of float
        Ridge parameter(s) :math:`\gamma` of the input approximation (eqs. 9, 12);
        unused when the candidate inputs are known.
    centre : bool
        Predict :math:`W(\phi(x) - \bar\phi_C) + \bar\psi_C` for a test candidate set
        :math:`C` (default) instead of :math:`W\phi(x)`; see the module notes.
    score : {"distance", "inner"}
        As in :class:`IOKR`.

    Attributes
    ----------
    coef_ : ndarray of shape (l + pool, l + pool) or (l + pool, l G)
        Dual coefficients over the output basis :math:`[S, P]`.
    setting_ : {"known", "approximated"}
    groups_ : list of (float, list of int)
        The :math:`\gamma` of each group and its input kernels (approximated setting).
    """

    def __init__(
        self,
        input_kernel=None,
        output_kernel=None,
        kernel_weights=None,
        lam=1.0,
        gamma=1.0,
        centre=True,
        score="distance",
    ):
        self.input_kernel = input_kernel
        self.output_kernel = output_kernel
        self.kernel_weights = kernel_weights
        self.lam = lam
        self.gamma = gamma
        self.centre = centre
        self.score = score

    def fit(self, X, Y, candidates, candidate_sets, candidate_inputs=None):
        """Fit eq. 6 (Theorem 2) with the candidate sets of the training examples.

        Parameters
        ----------
        X : array of shape (l, d), list of arrays, or precomputed ``K_X(S, S)``
            Training inputs.
        Y : array of shape (l, p) or precomputed ``K_Y(S, S)``
            Training outputs.
        candidates : array of shape (pool, p) or precomputed ``K_Y(P, [S, P])``
            The pool :math:`P` of candidate outputs of all training sets.
        candidate_sets : sequence of l integer arrays
            :math:`C_i` as row indices into the pool.
        candidate_inputs : array of shape (pool, d), list, or ``K_X(P, [S, P])``, optional
            Inputs of the pool, when known (Prop. 3); precomputed as shown.

        Returns
        -------
        self
        """
        grams = _MPGrams(self, X, Y, candidates, candidate_inputs, need_pool_gram=False)
        return self._fit_grams(grams, candidate_sets)

    def _fit_grams(self, grams, candidate_sets):
        lam = _positive_float(self.lam, "lam")
        _check_score(self.score)
        inputs = _InputKernels(self.input_kernel, self.kernel_weights)
        self.groups_ = None if grams.known else _gamma_groups(self.gamma, len(inputs.kernels))
        sets = _CandidateSets(candidate_sets, grams.n_pool, grams.l)
        model = grams.model(np.arange(grams.l), sets, self.groups_)
        self.coef_ = model.apply(lam, np.eye(model.n_inputs)).T
        self.setting_ = "known" if grams.known else "approximated"
        self.centring_maps_ = None if grams.known else model.centring_maps
        self.n_train_, self.n_pool_ = grams.l, grams.n_pool
        self.X_basis_ = grams.X_data
        self.Y_basis_ = None if grams.Y_data is None else np.vstack([grams.Y_data, grams.pool_data])
        return self

    def decision_function(self, X, candidates, candidate_inputs=None, candidate_gram=None):
        """Score each candidate output for each input; higher ranks first.

        Parameters
        ----------
        X : array of shape (m, d), list of arrays, or precomputed matrices
            Test inputs sharing the candidate set; precomputed: ``K_X(test, S)``, or
            ``K_X(test, [S, P])`` in the known setting.
        candidates : array of shape (n_c, p) or precomputed ``K_Y(C, [S, P])``
            The candidate set :math:`C`.
        candidate_inputs : array of shape (n_c, d), list, or precomputed ``K_X(C, [S, P])``
            Inputs of the candidates; needed in the known setting with ``centre=True``.
        candidate_gram : ndarray of shape (n_c, n_c), optional
            ``K_Y(C, C)``; needed with a precomputed output kernel unless
            ``score="inner"`` and ``centre=False``.

        Returns
        -------
        ndarray of shape (m, n_c)
        """
        check_is_fitted(self, "coef_")
        inputs = _InputKernels(self.input_kernel, self.kernel_weights)
        outputs = _OutputKernel(self.output_kernel)
        l, known = self.n_train_, self.setting_ == "known"
        n_basis = l + self.n_pool_
        KY = outputs.gram(
            candidates, n_basis if outputs.precomputed else self.Y_basis_, "candidates"
        )  # (n_c, l + pool)
        in_basis = (
            (n_basis if known else l)
            if inputs.precomputed
            else (self.X_basis_ if known else [b[:l] for b in self.X_basis_])
        )
        KX = inputs.weighted_grams(inputs.split(X, "X"), in_basis, "X")
        KX_candidates = None
        if known and self.centre:
            if candidate_inputs is None:
                raise ValueError(
                    "with known candidate inputs and centre=True, pass "
                    "candidate_inputs for the candidate set"
                )
            KX_candidates = inputs.weighted_grams(
                inputs.split(candidate_inputs, "candidate_inputs", n_rows=len(KY)),
                in_basis,
                "candidate_inputs",
            )
        V = _mp_input_vectors(
            KX, self.groups_, self.centring_maps_, KY[:, :l], KX_candidates, self.centre
        )
        diag, mean = outputs.self_terms(
            candidates, candidate_gram, self.score == "distance", bool(self.centre)
        )
        return _mp_scores(V @ self.coef_.T, KY, diag, mean, self.score)


def _mp_scores(projected, KY, diag, mean, score):
    """Scores from the dual coefficients ``V @ coef.T`` (m, basis) and ``K_Y(C, basis)``."""
    inner = projected @ KY.T  # (m, n_c)
    if mean is not None:
        inner = inner + mean[None, :]  # <psi_bar_C, psi(y)>
    return _combine_scores(inner, diag, score)


class MPIOKRCV(_RankingMixin, BaseEstimator):
    r"""MP-IOKR with :math:`\gamma` and :math:`\lambda` chosen by cross-validation.

    As in the paper (section 3.2), :math:`\gamma` is chosen first and then
    :math:`\lambda`. :math:`\gamma` minimises the closed-form leave-one-out error of the
    reverse regression :math:`g` (eq. 9, :func:`loo_squared_errors` with the output
    Gram as inputs), on the combined input kernel (``separate=False``, Prop. 4) or on
    each input kernel (``separate=True``, Prop. 5). :math:`\lambda` maximises the mean
    reciprocal rank of held-out training examples among their candidates in K-fold
    cross-validation; the candidates of a held-out example are its own output and the
    pool rows of its set, those equal to its own output in the output feature space left
    out (a set that holds the right output would otherwise hold it twice, tied).

    Parameters
    ----------
    input_kernel, output_kernel, kernel_weights, centre, score
        As in :class:`MPIOKR`.
    lams, gammas : array-like
        Candidate values of :math:`\lambda` and :math:`\gamma`.
    separate : bool
        One :math:`\gamma` per input kernel (Prop. 5) instead of one for all (Prop. 4).
    cv : int, splitter or iterable of (train, test) index arrays
        Folds for :math:`\lambda`: an integer gives that many shuffled folds.
    random_state : int or None
        Seed of the fold shuffling.

    Attributes
    ----------
    gamma_ : float or ndarray of shape (K,)
        Selected :math:`\gamma` (None with known candidate inputs).
    gamma_errors_ : ndarray of shape (r_gamma,) or (K, r_gamma)
        Leave-one-out errors of the reverse regression, in the feature space of the
        weighted kernel :math:`\sum_k \mu_k k^k_x` (joint) or of each :math:`\mu_k k^k_x`.
    lam_ : float
        Selected :math:`\lambda`.
    cv_scores_ : ndarray of shape (r_lam,)
        Mean reciprocal rank for each value of ``lams``.
    best_estimator_ : MPIOKR
    """

    def __init__(
        self,
        input_kernel=None,
        output_kernel=None,
        kernel_weights=None,
        lams=(1e-4, 1e-3, 1e-2, 1e-1, 1.0),
        gammas=(1e-3, 1e-2, 1e-1, 1.0),
        separate=False,
        cv=3,
        centre=True,
        score="distance",
        random_state=None,
    ):
        self.input_kernel = input_kernel
        self.output_kernel = output_kernel
        self.kernel_weights = kernel_weights
        self.lams = lams
        self.gammas = gammas
        self.separate = separate
        self.cv = cv
        self.centre = centre
        self.score = score
        self.random_state = random_state

    def fit(self, X, Y, candidates, candidate_sets, candidate_inputs=None):
        """Select :math:`\\gamma`, then :math:`\\lambda`, and refit; see :meth:`MPIOKR.fit`."""
        lams = [_positive_float(v, "each of lams") for v in np.atleast_1d(self.lams)]
        gammas = [_positive_float(v, "each of gammas") for v in np.atleast_1d(self.gammas)]
        _check_score(self.score)
        grams = _MPGrams(self, X, Y, candidates, candidate_inputs, need_pool_gram=True)
        l, n_kernels = grams.l, len(grams.KX)
        all_sets = _CandidateSets(candidate_sets, grams.n_pool, l)
        KY_S = grams.KY_S
        if grams.known:
            self.gamma_, self.gamma_errors_ = None, None
        elif self.separate:
            self.gamma_errors_ = np.array(
                [loo_squared_errors(KY_S, K[:l, :l], gammas) for K in grams.KX]
            )  # (K, r)
            self.gamma_ = np.array([gammas[int(i)] for i in np.argmin(self.gamma_errors_, 1)])
        else:
            self.gamma_errors_ = loo_squared_errors(KY_S, sum(grams.KX)[:l, :l], gammas)
            self.gamma_ = gammas[int(np.argmin(self.gamma_errors_))]
        groups = None if grams.known else _gamma_groups(self.gamma_, n_kernels)
        scores = [
            self._fold_scores(grams, all_sets, candidate_sets, groups, tr, te, lams)
            for tr, te in _folds(self.cv, self.random_state, l)
        ]
        self.cv_scores_ = np.mean(scores, axis=0)
        self.lam_ = lams[int(np.argmax(self.cv_scores_))]
        self.best_estimator_ = MPIOKR(
            self.input_kernel,
            self.output_kernel,
            self.kernel_weights,
            self.lam_,
            1.0 if grams.known else self.gamma_,
            self.centre,
            self.score,
        )
        self.best_estimator_._fit_grams(grams, candidate_sets)
        return self

    def _fold_scores(self, grams, all_sets, candidate_sets, groups, train, test, lams):
        """Mean reciprocal rank on ``test`` of fits on ``train``, for each λ."""
        l = grams.l
        sets = _CandidateSets([candidate_sets[i] for i in train], grams.n_pool, len(train))
        model = grams.model(train, sets, groups)
        out_basis = np.concatenate([train, l + np.arange(grams.n_pool)])
        in_basis = out_basis if grams.known else train
        centring_maps = None if grams.known else model.centring_maps
        KY, V, diag, mean = [], [], [], []
        for i in test:
            members = l + all_sets.sets[all_sets.set_of[i]]
            own = grams.KY[i, i]
            members = members[
                _other_than_the_truth(own, grams.KY[members, members], grams.KY[members, i])
            ]
            cands = np.concatenate([[i], members])
            KY.append(grams.KY[np.ix_(cands, out_basis)])  # (n_c, l_train + pool)
            KX = [K[np.ix_([i], in_basis)] for K in grams.KX]
            KX_c = [K[np.ix_(cands, in_basis)] for K in grams.KX] if grams.known else None
            V.append(
                _mp_input_vectors(
                    KX, groups, centring_maps, KY[-1][:, : len(train)], KX_c, self.centre
                )
            )
            gram = grams.KY[np.ix_(cands, cands)]  # (n_c, n_c)
            diag.append(np.diag(gram))
            mean.append(gram.mean(axis=1) if self.centre else None)
        V = np.vstack(V)  # (m, n_inputs)
        reciprocal = np.zeros((len(test), len(lams)))
        for j, lam in enumerate(lams):
            projected = model.apply(lam, V)  # (m, l_train + pool)
            for row in range(len(test)):
                s = _mp_scores(projected[row : row + 1], KY[row], diag[row], mean[row], self.score)[
                    0
                ]
                reciprocal[row, j] = _reciprocal_rank(s)
        return reciprocal.mean(axis=0)

    def decision_function(self, X, candidates, candidate_inputs=None, candidate_gram=None):
        """Scores of the refitted :class:`MPIOKR`; see :meth:`MPIOKR.decision_function`."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decision_function(
            X, candidates, candidate_inputs, candidate_gram
        )
