"""IOKR and MP-IOKR (Brouard et al. 2017) against closed forms, explicit features and each other."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.kernel_ridge import KernelRidge

from asebo.benchmarks.iokr import (
    broadened_spectra,
    gaussian_gram,
    molecular_formula,
    morgan_fingerprints,
    pessimistic_ranks,
    sign_tests,
    tanimoto_sparse,
)
from asebo.kernels import GaussianKernel, LinearKernel, TanimotoKernel
from asebo.learn.iokr import IOKR, IOKRCV, PRECOMPUTED, loo_squared_errors
from asebo.learn.mpiokr import MPIOKR, MPIOKRCV

LAM, GAMMA = 0.3, 0.7


def problem(l=12, d=4, p=3, n_pool=15, seed=0):
    """Random inputs, outputs, a candidate pool with inputs, and overlapping candidate sets."""
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(l, d)), rng.normal(size=(l, p))
    X_pool, Y_pool = rng.normal(size=(n_pool, d)), rng.normal(size=(n_pool, p))
    sets = [rng.choice(n_pool, rng.integers(2, 6), replace=False) for _ in range(l)]
    sets[3] = sets[1][::-1].copy()  # a set shared by two examples, listed in another order
    X_test, C, X_C = rng.normal(size=(5, d)), rng.normal(size=(7, p)), rng.normal(size=(7, d))
    return X, Y, X_pool, Y_pool, sets, X_test, C, X_C


def primal_mp_map(X, Y, X_pool, Y_pool, sets, lam):
    """The minimiser W of eq. 4 for linear kernels, from its normal equations."""
    lhs, rhs = lam * np.eye(X.shape[1]), np.zeros((Y.shape[1], X.shape[1]))
    for i, members in enumerate(sets):
        dx, dy = X[i] - X_pool[members], Y[i] - Y_pool[members]  # (n_i, d), (n_i, p)
        lhs += dx.T @ dx / len(members)
        rhs += dy.T @ dx / len(members)
    return np.linalg.solve(lhs, rhs.T).T  # (p, d)


# ---------------------------------------------------------------- IOKR


def test_iokr_inner_scores_are_krr_predictions_times_candidates():
    X, Y, *_, X_test, C, _ = problem()
    kernel = GaussianKernel(0.3)
    model = IOKR(kernel, LinearKernel(), lam=LAM, centre=False, score="inner").fit(X, Y)
    krr = KernelRidge(alpha=LAM, kernel="precomputed").fit(kernel(X), Y)
    prediction = krr.predict(kernel(X_test, X))  # (m, p)
    np.testing.assert_allclose(model.decision_function(X_test, C), prediction @ C.T, atol=1e-10)


def test_iokr_distance_score_is_eq3_up_to_the_norm_of_the_prediction():
    X, Y, *_, X_test, C, _ = problem()
    kernel = GaussianKernel(0.3)
    scores = (
        IOKR(kernel, LinearKernel(), lam=LAM, centre=False).fit(X, Y).decision_function(X_test, C)
    )
    h = KernelRidge(alpha=LAM, kernel="precomputed").fit(kernel(X), Y).predict(kernel(X_test, X))
    distance = ((h[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)  # (m, n_c)
    np.testing.assert_allclose(scores, (h**2).sum(axis=1)[:, None] - distance, atol=1e-10)


def test_kernel_centring_equals_explicit_feature_centring():
    X, Y, *_, X_test, C, _ = problem()
    scores = (
        IOKR(LinearKernel(), LinearKernel(), lam=LAM, centre=True)
        .fit(X, Y)
        .decision_function(X_test, C)
    )
    x_mean, y_mean = X.mean(axis=0), Y.mean(axis=0)
    h_c = (
        KernelRidge(alpha=LAM, kernel="linear").fit(X - x_mean, Y - y_mean).predict(X_test - x_mean)
    )
    h = y_mean + h_c  # (m, p) prediction of psi(y)
    np.testing.assert_allclose(scores, 2 * h @ C.T - (C**2).sum(axis=1), atol=1e-10)


def test_iokr_hand_computed_case():
    # K = [[0, 0], [0, 1]], lam = 1: (K + I)^-1 k(x=2) = [0, 1], so h(2) = y_2 = 2.
    model = IOKR(LinearKernel(), LinearKernel(), lam=1.0, centre=False).fit(
        [[0.0], [1.0]], [[1.0], [2.0]]
    )
    np.testing.assert_allclose(
        model.decision_function([[2.0]], [[3.0], [2.0]]), [[2 * 6 - 9, 2 * 4 - 4]]
    )
    np.testing.assert_array_equal(model.rank([[2.0]], [[3.0], [2.0]]), [[1, 0]])


def test_precomputed_kernels_give_the_same_scores_as_kernel_objects():
    X, Y, *_, X_test, C, _ = problem()
    kx, ky = GaussianKernel(0.3), GaussianKernel(0.5)
    by_data = IOKR(kx, ky, lam=LAM).fit(X, Y).decision_function(X_test, C)
    by_matrix = (
        IOKR(PRECOMPUTED, PRECOMPUTED, lam=LAM)
        .fit(kx(X), ky(Y))
        .decision_function(kx(X_test, X), ky(C, Y), candidate_gram=ky(C))
    )
    np.testing.assert_allclose(by_matrix, by_data, atol=1e-12)


def test_several_input_kernels_are_their_weighted_sum():
    X, Y, *_, X_test, C, _ = problem()
    kernels, weights = [GaussianKernel(0.3), LinearKernel()], [0.25, 0.75]
    combined = IOKR(kernels, LinearKernel(), kernel_weights=weights, lam=LAM).fit(X, Y)
    summed = IOKR(PRECOMPUTED, LinearKernel(), lam=LAM).fit(
        sum(w * k(X) for w, k in zip(weights, kernels)), Y
    )
    np.testing.assert_allclose(
        combined.decision_function(X_test, C),
        summed.decision_function(sum(w * k(X_test, X) for w, k in zip(weights, kernels)), C),
        atol=1e-12,
    )


@pytest.mark.parametrize("centre", [False, True])
def test_closed_form_loo_equals_explicit_leave_one_out_refits(centre):
    X, Y, *_ = problem(l=10)
    kernel, lams = GaussianKernel(0.3), [1e-4, 1e-2, 1e-1, 1.0]
    errors = []
    for lam in lams:
        total = 0.0
        for i in range(len(X)):
            keep = np.delete(np.arange(len(X)), i)
            model = IOKR(kernel, LinearKernel(), lam=lam, centre=centre, score="inner")
            model.fit(X[keep], Y[keep])
            h = model.decision_function(X[i : i + 1], np.eye(Y.shape[1]))  # <h(x), e_k>
            total += np.sum((h - Y[i]) ** 2)
        errors.append(total / len(X))
    np.testing.assert_allclose(
        loo_squared_errors(kernel(X), Y @ Y.T, lams, centre=centre), errors, rtol=1e-7
    )
    cv = IOKRCV(kernel, LinearKernel(), lams=lams, cv=len(X), centre=centre).fit(X, Y)
    np.testing.assert_allclose(cv.cv_errors_, errors, rtol=1e-7)


def test_kfold_error_with_centring_refits_the_centring_in_each_fold():
    X, Y, *_ = problem(l=12)
    lams = [1e-2, 1.0]
    test = np.array([0, 5, 7])
    train = np.setdiff1d(np.arange(12), test)
    x_mean, y_mean = X[train].mean(axis=0), Y[train].mean(axis=0)
    expected = []
    for lam in lams:
        h = y_mean + KernelRidge(alpha=lam, kernel="linear").fit(
            X[train] - x_mean, Y[train] - y_mean
        ).predict(X[test] - x_mean)
        expected.append(np.mean(np.sum((h - Y[test]) ** 2, axis=1)))
    cv = IOKRCV(LinearKernel(), LinearKernel(), lams=lams, cv=[(train, test)]).fit(X, Y)
    np.testing.assert_allclose(cv.cv_errors_, expected, rtol=1e-10)
    assert cv.lam_ == lams[int(np.argmin(expected))]


def test_iokrcv_ranking_criterion_matches_refits_through_the_public_api():
    X, Y, _, Y_pool, sets, *_ = problem(l=16, n_pool=20)
    lams, kernel = [1e-3, 1e-1, 10.0], GaussianKernel(0.3)
    test = np.array([2, 5, 11, 14])
    train = np.setdiff1d(np.arange(16), test)
    expected = []
    for lam in lams:
        model = IOKR(kernel, LinearKernel(), lam=lam).fit(X[train], Y[train])
        ranks = [
            np.sum(s[1:] >= s[0])  # ties against the right one
            for s in (
                model.decision_function(X[i : i + 1], np.vstack([Y[i : i + 1], Y_pool[sets[i]]]))[0]
                for i in test
            )
        ]
        expected.append(np.mean(1.0 / (1.0 + np.array(ranks))))
    cv = IOKRCV(kernel, LinearKernel(), lams=lams, cv=[(train, test)])
    cv.fit(X, Y, Y_pool, sets)
    np.testing.assert_allclose(cv.cv_scores_, expected, rtol=1e-12)
    assert cv.lam_ == lams[int(np.argmax(expected))] and cv.cv_errors_ is None
    with pytest.raises(ValueError, match="needs folds"):
        IOKRCV(kernel, LinearKernel(), lams=lams).fit(X, Y, Y_pool, sets)


def test_iokrcv_refits_with_the_selected_lambda():
    X, Y, *_, X_test, C, _ = problem()
    cv = IOKRCV(GaussianKernel(0.3), LinearKernel(), lams=[1e-3, 1e-1, 10.0]).fit(X, Y)
    assert cv.lam_ == [1e-3, 1e-1, 10.0][int(np.argmin(cv.cv_errors_))]
    direct = IOKR(GaussianKernel(0.3), LinearKernel(), lam=cv.lam_).fit(X, Y)
    np.testing.assert_allclose(cv.decision_function(X_test, C), direct.decision_function(X_test, C))


# ---------------------------------------------------------------- MP-IOKR, known inputs


@pytest.mark.parametrize("centre", [False, True])
def test_known_inputs_solution_minimises_the_magnitude_preserving_objective(centre):
    """Theorem 2 and Prop. 3: the kernel solution is the minimiser of eq. 4."""
    X, Y, X_pool, Y_pool, sets, X_test, C, X_C = problem()
    W = primal_mp_map(X, Y, X_pool, Y_pool, sets, LAM)
    model = MPIOKR(LinearKernel(), LinearKernel(), lam=LAM, centre=centre, score="inner")
    model.fit(X, Y, Y_pool, sets, candidate_inputs=X_pool)
    scores = model.decision_function(X_test, C, candidate_inputs=X_C)
    h = (X_test - X_C.mean(axis=0)) @ W.T + C.mean(axis=0) if centre else X_test @ W.T
    np.testing.assert_allclose(scores, h @ C.T, atol=1e-10)


def test_hand_computed_magnitude_preserving_case():
    # One example (x=1, y=2), candidates (0, 0) and (3, -3), lam = 1/2:
    # W = mean(dx dy) / (mean(dx^2) + lam) = -4 / (5/2 + 1/2) = -4/3.
    model = MPIOKR(LinearKernel(), LinearKernel(), lam=0.5, centre=False, score="inner")
    model.fit(
        [[1.0]], [[2.0]], [[0.0], [-3.0]], [np.array([0, 1])], candidate_inputs=[[0.0], [3.0]]
    )
    np.testing.assert_allclose(model.decision_function([[3.0]], [[1.0], [-2.0]]), [[-4.0, 8.0]])


def paper_prop3_scores(KX_S, KX_SC, KX_C, kx_S, kx_C, KY_yS, KY_yC, sizes, lam):
    """Prop. 3 exactly as printed: the (l + n) system with V, D_n and replicated candidates.

    Candidate columns are the sets C_1, ..., C_l one after the other (n = sum n_i);
    ``kx_*`` are test input kernel vectors as rows, ``KY_y*`` the candidates' output ones.
    """
    l, n = len(sizes), sum(sizes)
    V = np.zeros((n, l))
    V[np.arange(n), np.repeat(np.arange(l), sizes)] = 1.0
    D = np.diag(np.repeat(1.0 / np.sqrt(sizes), sizes))  # D_n
    D2, I_n = D @ D, np.eye(n)
    K_S = KX_S - KX_SC @ D2 @ V - (KX_SC @ D2 @ V).T + V.T @ D2 @ KX_C @ D2 @ V
    K_SC = (KX_SC - V.T @ D2 @ KX_C) @ (I_n - D2 @ V @ V.T) @ D
    K_C = D @ (I_n - V @ V.T @ D2) @ KX_C @ (I_n - D2 @ V @ V.T) @ D
    K = np.block([[K_S, K_SC], [K_SC.T, K_C]])  # Phi'^T Phi'

    def modified(k_S, k_C):  # Phi'^T phi(x) for kernel vectors given as rows
        return np.hstack([k_S - k_C @ D2 @ V, k_C @ (I_n - D2 @ V @ V.T) @ D])

    alpha = np.linalg.solve(lam * np.eye(l + n) + K, modified(kx_S, kx_C).T)  # (l + n, m)
    return (modified(KY_yS, KY_yC) @ alpha).T  # (m, n_c) = <h(x), psi(y)>


def test_known_inputs_agree_with_the_printed_prop3_system():
    X, Y, X_pool, Y_pool, sets, X_test, C, _ = problem()
    kx, ky = GaussianKernel(0.2), GaussianKernel(0.4)
    replicated = np.concatenate(sets)  # pool rows of the n candidate columns
    reference = paper_prop3_scores(
        kx(X),
        kx(X, X_pool[replicated]),
        kx(X_pool[replicated]),
        kx(X_test, X),
        kx(X_test, X_pool[replicated]),
        ky(C, Y),
        ky(C, Y_pool[replicated]),
        np.array([len(s) for s in sets]),
        LAM,
    )
    model = MPIOKR(kx, ky, lam=LAM, centre=False, score="inner")
    model.fit(X, Y, Y_pool, sets, candidate_inputs=X_pool)
    np.testing.assert_allclose(model.decision_function(X_test, C), reference, atol=1e-10)


def modified_features(F_S, F_pool, sets):
    """Eq. 7 with explicit features: training columns, then each set's candidates."""
    means = np.stack([F_pool[s].mean(axis=0) for s in sets], axis=1)  # (d, l)
    blocks = [F_S.T - means]
    blocks += [(F_pool[s].T - means[:, [i]]) / np.sqrt(len(s)) for i, s in enumerate(sets)]
    return np.hstack(blocks)  # (d, l + n)


def test_printed_prop3_kernel_blocks_equal_explicit_modified_features():
    X, Y, X_pool, Y_pool, sets, X_test, C, _ = problem()
    replicated = np.concatenate(sets)
    Phi, Psi = modified_features(X, X_pool, sets), modified_features(Y, Y_pool, sets)
    W = Psi @ np.linalg.solve(LAM * np.eye(Phi.shape[1]) + Phi.T @ Phi, Phi.T)  # eq. 6, (p, d)
    k = LinearKernel()
    reference = paper_prop3_scores(
        k(X),
        k(X, X_pool[replicated]),
        k(X_pool[replicated]),
        k(X_test, X),
        k(X_test, X_pool[replicated]),
        k(C, Y),
        k(C, Y_pool[replicated]),
        np.array([len(s) for s in sets]),
        LAM,
    )
    np.testing.assert_allclose(reference, (X_test @ W.T) @ C.T, atol=1e-10)


# ---------------------------------------------------------------- MP-IOKR, approximated inputs


def approximated_inputs(KX_list, weights, gammas, KY_S, KY_SP):
    """Inputs of the candidates replaced by g(y) (eq. 12), as precomputed Gram matrices.

    Block k of the approximated feature vector is sqrt(mu_k) Phi^k_S M_k k_S(y), so
    <phi(x), g(y)> = sum_k mu_k k^k_S(x)^T M_k k_S(y) and
    <g(y), g(y')> = sum_k mu_k k_S(y)^T M_k K^k M_k k_S(y'). Returns the combined
    training Gram, the pool rows against [S, P], and a function giving the rows
    against [S, P] of test inputs (their kernel vectors against S, one per kernel) or
    of approximated candidates (their output kernel vectors against S).
    """
    l = len(KY_S)
    Ms = [np.linalg.inv(g * np.eye(l) + KY_S) for g in gammas]
    MKM = sum(w * M @ K @ M for w, K, M in zip(weights, KX_list, Ms))  # (l, l)
    KM = sum(w * K @ M for w, K, M in zip(weights, KX_list, Ms))  # (l, l)

    def input_rows(kx_list):  # real inputs
        k_S = sum(w * k for w, k in zip(weights, kx_list))  # (m, l)
        return np.hstack([k_S, sum(w * k @ M for w, k, M in zip(weights, kx_list, Ms)) @ KY_SP])

    def candidate_rows(KY_SC):  # approximated inputs g(y) of outputs y
        return np.hstack([(KM @ KY_SC).T, KY_SC.T @ MKM @ KY_SP])

    KX_S = sum(w * K for w, K in zip(weights, KX_list))
    return KX_S, candidate_rows(KY_SP), input_rows, candidate_rows


@pytest.mark.parametrize("centre", [False, True])
def test_l_sized_prop4_equals_prop3_with_approximated_inputs(centre):
    X, Y, _, Y_pool, sets, X_test, C, _ = problem()
    kx, ky = GaussianKernel(0.2), GaussianKernel(0.4)
    KX_S, pool_rows, input_rows, candidate_rows = approximated_inputs(
        [kx(X)], [1.0], [GAMMA], ky(Y), ky(Y, Y_pool)
    )
    known = MPIOKR(PRECOMPUTED, ky, lam=LAM, centre=centre)
    known.fit(KX_S, Y, Y_pool, sets, candidate_inputs=pool_rows)
    expected = known.decision_function(
        input_rows([kx(X_test, X)]), C, candidate_inputs=candidate_rows(ky(Y, C))
    )
    approximated = MPIOKR(kx, ky, lam=LAM, gamma=GAMMA, centre=centre).fit(X, Y, Y_pool, sets)
    assert approximated.coef_.shape == (len(X) + len(Y_pool), len(X))
    np.testing.assert_allclose(approximated.decision_function(X_test, C), expected, atol=1e-9)


@pytest.mark.parametrize("centre", [False, True])
def test_separate_approximation_prop5_equals_prop3_with_blockwise_inputs(centre):
    X, Y, _, Y_pool, sets, X_test, C, _ = problem()
    kernels, weights, gammas = [GaussianKernel(0.2), GaussianKernel(1.5)], [0.3, 0.7], [0.7, 0.05]
    ky = TanimotoKernel()
    Y, Y_pool, C = np.abs(Y), np.abs(Y_pool), np.abs(C)  # non-negative, for Tanimoto
    KX_S, pool_rows, input_rows, candidate_rows = approximated_inputs(
        [k(X) for k in kernels], weights, gammas, ky(Y), ky(Y, Y_pool)
    )
    known = MPIOKR(PRECOMPUTED, ky, lam=LAM, centre=centre)
    known.fit(KX_S, Y, Y_pool, sets, candidate_inputs=pool_rows)
    expected = known.decision_function(
        input_rows([k(X_test, X) for k in kernels]), C, candidate_inputs=candidate_rows(ky(Y, C))
    )
    separate = MPIOKR(kernels, ky, kernel_weights=weights, lam=LAM, gamma=gammas, centre=centre)
    separate.fit(X, Y, Y_pool, sets)
    assert [members for _, members in separate.groups_] == [[0], [1]]
    np.testing.assert_allclose(separate.decision_function(X_test, C), expected, atol=1e-9)


def test_kernels_sharing_a_gamma_are_grouped_exactly():
    """Section 2.3.2: one block per distinct gamma gives the ungrouped solution."""
    X, Y, _, Y_pool, sets, X_test, C, _ = problem()
    kernels = [GaussianKernel(0.2), GaussianKernel(1.5), LinearKernel()]
    weights, gammas = [0.2, 0.3, 0.5], [0.7, 0.05, 0.7]
    ky = GaussianKernel(0.4)
    KX_S, pool_rows, input_rows, candidate_rows = approximated_inputs(
        [k(X) for k in kernels], weights, gammas, ky(Y), ky(Y, Y_pool)
    )
    known = MPIOKR(PRECOMPUTED, ky, lam=LAM).fit(KX_S, Y, Y_pool, sets, candidate_inputs=pool_rows)
    grouped = MPIOKR(kernels, ky, kernel_weights=weights, lam=LAM, gamma=gammas)
    grouped.fit(X, Y, Y_pool, sets)
    assert [members for _, members in grouped.groups_] == [[0, 2], [1]]
    assert grouped.coef_.shape[1] == 2 * len(X)
    np.testing.assert_allclose(
        grouped.decision_function(X_test, C),
        known.decision_function(
            input_rows([k(X_test, X) for k in kernels]),
            C,
            candidate_inputs=candidate_rows(ky(Y, C)),
        ),
        atol=1e-9,
    )


def test_one_gamma_for_all_kernels_is_the_joint_approximation_of_prop4():
    X, Y, _, Y_pool, sets, X_test, C, _ = problem()
    kernels, weights = [GaussianKernel(0.2), LinearKernel()], [0.4, 0.6]
    joint = MPIOKR(kernels, LinearKernel(), kernel_weights=weights, lam=LAM, gamma=GAMMA)
    joint.fit(X, Y, Y_pool, sets)
    combined = MPIOKR(PRECOMPUTED, LinearKernel(), lam=LAM, gamma=GAMMA)
    combined.fit(sum(w * k(X) for w, k in zip(weights, kernels)), Y, Y_pool, sets)
    np.testing.assert_allclose(
        joint.decision_function(X_test, C),
        combined.decision_function(sum(w * k(X_test, X) for w, k in zip(weights, kernels)), C),
        atol=1e-10,
    )


# ---------------------------------------------------------------- MP-IOKR, invariances, API


def test_centred_ranking_is_invariant_to_shifts_of_the_features():
    """Eq. 4 only sees differences; with known candidate inputs so does the centred ranking."""
    X, Y, X_pool, Y_pool, sets, X_test, C, X_C = problem()
    shift_x, shift_y = np.full(X.shape[1], 3.0), np.full(Y.shape[1], -2.0)

    def scores(dx, dy, centre):
        model = MPIOKR(LinearKernel(), LinearKernel(), lam=LAM, centre=centre)
        model.fit(X + dx, Y + dy, Y_pool + dy, sets, candidate_inputs=X_pool + dx)
        s = model.decision_function(X_test + dx, C + dy, candidate_inputs=X_C + dx)
        return s - s.mean(axis=1, keepdims=True)  # a constant per input does not rank

    np.testing.assert_allclose(scores(shift_x, shift_y, True), scores(0, 0, True), atol=1e-8)
    assert not np.allclose(scores(shift_x, 0, False), scores(0, 0, False), atol=1e-3)


@pytest.mark.parametrize(
    "known, centre, score",
    [
        (False, True, "distance"),
        (True, True, "distance"),
        (False, False, "distance"),
        (True, False, "inner"),
    ],
)
def test_precomputed_mp_iokr_equals_kernel_objects(known, centre, score):
    X, Y, X_pool, Y_pool, sets, X_test, C, X_C = problem()
    kx, ky = GaussianKernel(0.2), GaussianKernel(0.4)
    XB, YB = np.vstack([X, X_pool]), np.vstack([Y, Y_pool])  # the basis [S, P]
    options = {"lam": LAM, "gamma": GAMMA, "centre": centre, "score": score}
    by_data = (
        MPIOKR(kx, ky, **options)
        .fit(X, Y, Y_pool, sets, candidate_inputs=X_pool if known else None)
        .decision_function(X_test, C, candidate_inputs=X_C if known else None)
    )
    by_matrix = (
        MPIOKR(PRECOMPUTED, PRECOMPUTED, **options)
        .fit(kx(X), ky(Y), ky(Y_pool, YB), sets, candidate_inputs=kx(X_pool, XB) if known else None)
        .decision_function(
            kx(X_test, XB if known else X),
            ky(C, YB),
            candidate_inputs=kx(X_C, XB) if known else None,
            candidate_gram=ky(C),
        )
    )
    np.testing.assert_allclose(by_matrix, by_data, atol=1e-12)


def reciprocal_rank_by_refit(X, Y, Y_pool, sets, train, test, lam, gamma):
    """Mean reciprocal rank of held-out examples among their candidates, public API only."""
    model = MPIOKR(GaussianKernel(0.3), LinearKernel(), lam=lam, gamma=gamma)
    model.fit(X[train], Y[train], Y_pool, [sets[i] for i in train])
    reciprocal = []
    for i in test:
        candidates = np.vstack([Y[i : i + 1], Y_pool[sets[i]]])  # the right one first
        s = model.decision_function(X[i : i + 1], candidates)[0]
        reciprocal.append(1.0 / (1 + np.sum(s[1:] >= s[0])))  # ties against it
    return np.mean(reciprocal)


def test_mpiokrcv_selection_matches_refits_through_the_public_api():
    X, Y, _, Y_pool, sets, X_test, C, _ = problem(l=16, n_pool=20)
    lams, gammas = [1e-3, 1e-1, 10.0], [1e-2, 1.0]
    test = np.array([1, 4, 9, 13])
    train = np.setdiff1d(np.arange(16), test)
    cv = MPIOKRCV(
        GaussianKernel(0.3), LinearKernel(), lams=lams, gammas=gammas, cv=[(train, test)]
    ).fit(X, Y, Y_pool, sets)
    loo = loo_squared_errors(LinearKernel()(Y), GaussianKernel(0.3)(X), gammas)
    assert cv.gamma_ == gammas[int(np.argmin(loo))]
    expected = [
        reciprocal_rank_by_refit(X, Y, Y_pool, sets, train, test, lam, cv.gamma_) for lam in lams
    ]
    np.testing.assert_allclose(cv.cv_scores_, expected, rtol=1e-12)
    assert cv.lam_ == lams[int(np.argmax(expected))]
    direct = MPIOKR(GaussianKernel(0.3), LinearKernel(), lam=cv.lam_, gamma=cv.gamma_)
    np.testing.assert_allclose(
        cv.decision_function(X_test, C), direct.fit(X, Y, Y_pool, sets).decision_function(X_test, C)
    )


def test_mpiokrcv_separate_gammas_minimise_each_kernels_loo_error():
    X, Y, X_pool, Y_pool, sets, *_ = problem()
    kernels, gammas = [GaussianKernel(0.3), LinearKernel()], [1e-3, 1e-1, 10.0]
    cv = MPIOKRCV(
        kernels, LinearKernel(), lams=[0.1], gammas=gammas, separate=True, cv=3, random_state=0
    ).fit([X, X[:, :2]], Y, Y_pool, sets)
    for k, (kernel, data) in enumerate(zip(kernels, [X, X[:, :2]])):
        errors = loo_squared_errors(Y @ Y.T, 0.5 * kernel(data), gammas)  # mu_k = 1/2
        np.testing.assert_allclose(cv.gamma_errors_[k], errors)
        assert cv.gamma_[k] == gammas[int(np.argmin(errors))]
    known = MPIOKRCV(
        GaussianKernel(0.3), LinearKernel(), lams=[0.1, 1.0], cv=3, random_state=0
    ).fit(X, Y, Y_pool, sets, candidate_inputs=X_pool)
    assert known.gamma_ is None and known.best_estimator_.setting_ == "known"


def test_estimators_clone_and_rank_by_decreasing_score():
    X, Y, _, Y_pool, sets, X_test, C, _ = problem()
    model = MPIOKR(GaussianKernel(0.3), LinearKernel(), lam=LAM, gamma=GAMMA)
    assert clone(model).get_params()["gamma"] == GAMMA
    model.fit(X, Y, Y_pool, sets)
    order = model.rank(X_test, C)
    scores = model.decision_function(X_test, C)
    assert np.all(np.diff(np.take_along_axis(scores, order, axis=1), axis=1) <= 0)


def test_bad_input_raises_clear_errors():
    X, Y, X_pool, Y_pool, sets, X_test, C, _ = problem()
    with pytest.raises(NotFittedError):
        IOKR().decision_function(X_test, C)
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        IOKR(LinearKernel(), LinearKernel()).fit(X_nan, Y)
    with pytest.raises(ValueError, match="rows; expected"):
        IOKR(LinearKernel(), LinearKernel()).fit(X, Y[:-1])
    with pytest.raises(ValueError, match="columns; expected"):
        IOKR(PRECOMPUTED, PRECOMPUTED).fit(X @ X.T, Y @ Y.T).decision_function(
            X_test @ X.T, C @ Y[:-1].T, candidate_gram=C @ C.T
        )
    with pytest.raises(ValueError, match="candidate_gram"):
        IOKR(PRECOMPUTED, PRECOMPUTED).fit(X @ X.T, Y @ Y.T).decision_function(
            X_test @ X.T, C @ Y.T
        )
    with pytest.raises(ValueError, match="positive"):
        IOKR(LinearKernel(), LinearKernel(), lam=0.0).fit(X, Y)
    with pytest.raises(ValueError, match="only"):
        IOKR([PRECOMPUTED, LinearKernel()], LinearKernel()).fit([X @ X.T, X], Y)
    with pytest.raises(ValueError, match="outside the pool"):
        MPIOKR(LinearKernel(), LinearKernel()).fit(X, Y, Y_pool, [np.array([0, 99])] * len(X))
    with pytest.raises(ValueError, match="sets for"):
        MPIOKR(LinearKernel(), LinearKernel()).fit(X, Y, Y_pool, sets[:-1])
    with pytest.raises(ValueError, match="one per input"):
        MPIOKR([LinearKernel()] * 2, LinearKernel(), gamma=[1.0, 2.0, 3.0]).fit(X, Y, Y_pool, sets)
    with pytest.raises(ValueError, match="candidate_inputs"):
        MPIOKR(LinearKernel(), LinearKernel()).fit(
            X, Y, Y_pool, sets, candidate_inputs=X_pool
        ).decision_function(X_test, C)


# ---------------------------------------------------------------- benchmark helpers


def test_sparse_tanimoto_equals_the_dense_kernel():
    rng = np.random.default_rng(1)
    A = (rng.random((6, 40)) < 0.2).astype(float)
    B = (rng.random((5, 40)) < 0.2).astype(float)
    B[0] = 0.0
    np.testing.assert_allclose(
        tanimoto_sparse(sp.csr_matrix(A), sp.csr_matrix(B)), TanimotoKernel()(A, B), atol=1e-15
    )


def test_blas_gaussian_gram_equals_the_gaussian_kernel():
    rng = np.random.default_rng(2)
    A, B = rng.normal(size=(7, 30)), rng.normal(size=(4, 30))
    np.testing.assert_allclose(gaussian_gram(A, B, 0.05), GaussianKernel(0.05)(A, B), atol=1e-12)


def test_formula_fingerprints_and_spectra():
    assert molecular_formula([8, 6, 6, 1, 1, 1, 1, 1, 1]) == "C2H6O"
    assert molecular_formula([7, 1, 1, 1]) == "H3N"
    fps = morgan_fingerprints(["OCC", "CCO", "COC"]).toarray()
    np.testing.assert_array_equal(fps[0], fps[1])
    assert np.any(fps[0] != fps[2])
    spectrum = broadened_spectra([np.array([1000.0, 3000.0])], sigma=20.0)[0]
    grid = np.arange(0.0, 4200.0 + 1e-9, 10.0)
    assert spectrum[np.searchsorted(grid, 1000.0)] == pytest.approx(1.0)
    assert spectrum.sum() * 10.0 == pytest.approx(2 * 20.0 * np.sqrt(2 * np.pi))


def test_pessimistic_rank_counts_ties_and_identical_structures_against():
    scores = np.array([[0.9, 0.5, 0.9, 0.1]])
    KY_TT = np.eye(4)
    KY_TT[1, 3] = KY_TT[3, 1] = 1.0  # candidates 1 and 3 share a fingerprint
    np.testing.assert_array_equal(pessimistic_ranks(scores, [0], KY_TT), [1])
    np.testing.assert_array_equal(pessimistic_ranks(scores, [1], KY_TT), [3])
    np.testing.assert_array_equal(pessimistic_ranks(scores, [3], KY_TT), [3])


def test_sign_test_counts_paired_wins_and_losses():
    ranks = {"ref": np.array([0, 3, 2, 5, 1, 0]), "new": np.array([0, 1, 4, 2, 0, 0])}
    better, worse, p = sign_tests(ranks, "ref")["new"]
    assert (better, worse) == (3, 1)
    assert p == pytest.approx(2 * (1 + 4) / 16)  # two-sided binomial, n = 4


@pytest.mark.slow
def test_qm9_retrieval_benchmark_beats_random_ranking():
    from argparse import Namespace

    from asebo.benchmarks.iokr import run_benchmark, top_k_accuracy

    args = Namespace(
        molecules=80,
        folds=2,
        max_folds=None,
        max_set_size=200,
        pool_per_set=3,
        sigmas=[20.0, 40.0],
        lams=[1e-2, 1.0],
        gammas=[1e-2, 1.0],
        width_factors=[0.5, 2.0],
        inner_folds=2,
        seed=0,
        lambda_sweep=False,
    )
    ranks, _, _, data = run_benchmark(args, log=lambda message: None)
    set_sizes = np.bincount(data.formula)[data.formula[data.library]]  # (80,)
    random_top_10 = 100 * np.mean(np.minimum(10 / set_sizes, 1.0))
    for r in ranks.values():  # a rank lies inside the candidate set, capped at max_set_size
        assert len(r) == 80 and np.all((r >= 0) & (r < args.max_set_size))
    assert top_k_accuracy(ranks["IOKR, lambda by ranking CV"], 10) > random_top_10
    assert top_k_accuracy(ranks["MP-IOKR joint (Prop. 4)"], 10) > random_top_10


@pytest.mark.parametrize("search", [IOKRCV, MPIOKRCV])
def test_a_model_that_scores_every_candidate_alike_ranks_the_right_one_last(search):
    # an input kernel so narrow that k(x, x') underflows off the diagonal: h(x) = 0 at a
    # held-out input, every candidate of a normalised output kernel scores -1
    rng = np.random.default_rng(0)
    pool = (rng.random((60, 32)) < 0.3).astype(float)
    Y = pool[:30]
    X = Y @ rng.normal(size=(32, 10))
    sets = [rng.choice(np.arange(30, 60), 7, replace=False) for _ in range(30)]
    cv = search(GaussianKernel(1e6), TanimotoKernel(), centre=False, cv=3, random_state=0)
    cv.fit(X, Y, pool, sets)
    np.testing.assert_allclose(cv.cv_scores_, 1.0 / 8.0)  # last of the right one and seven


def test_inputs_or_candidates_of_another_width_are_refused_in_one_line():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(20, 4)), rng.normal(size=(20, 3))
    model = IOKR(GaussianKernel(0.5), LinearKernel(), lam=0.1).fit(X, Y)
    with pytest.raises(ValueError, match=r"X has rows of shape \(5,\), the training data \(4,\)"):
        model.decision_function(rng.normal(size=(2, 5)), Y[:4])
    with pytest.raises(ValueError, match=r"candidates has rows of shape \(2,\), the training"):
        model.decision_function(X[:2], rng.normal(size=(4, 2)))
    assert model.decision_function(X[:2], Y[:4]).shape == (2, 4)


@pytest.mark.parametrize("search", [IOKRCV, MPIOKRCV])
def test_sets_that_hold_the_right_output_count_it_once(search):
    # the convention of the IOKR page: the pool's first rows are the training outputs and
    # each set holds its example's own row; the output equals the input, a ranking any
    # fit gets right, so every held-out example ranks first, not tied with its copy
    rng = np.random.default_rng(0)
    pool = rng.normal(size=(60, 5))
    Y = pool[:30]
    sets = [np.append(i, rng.choice(np.arange(30, 60), 7, replace=False)) for i in range(30)]
    cv = search(LinearKernel(), LinearKernel(), lams=[1e-4, 1e-2, 1.0], cv=3, random_state=0)
    np.testing.assert_allclose(cv.fit(Y.copy(), Y, pool, sets).cv_scores_, 1.0)


@pytest.mark.parametrize("estimator", [IOKR, IOKRCV, MPIOKR, MPIOKRCV])
def test_each_estimator_has_default_kernels_of_its_own(estimator):
    # a default built once in the signature is shared: a width set on one estimator's
    # kernel changed every other's scores
    X, Y, _, Y_pool, sets, X_test, C, _ = problem()
    options = {"random_state": 0} if "random_state" in estimator().get_params() else {}
    default = estimator(**options)
    assert default.input_kernel is None and default.output_kernel is None
    data = (X, Y) if estimator in (IOKR, IOKRCV) else (X, Y, Y_pool, sets)
    explicit = estimator(GaussianKernel(), LinearKernel(), **options).fit(*data)
    np.testing.assert_array_equal(
        default.fit(*data).decision_function(X_test, C), explicit.decision_function(X_test, C)
    )
