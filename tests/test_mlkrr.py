"""Tests of MLKR and MLKRR (Fabregat et al. 2022): losses, gradients, invariances, estimator API."""

import copy
import math
import warnings

import numpy as np
import pytest
from scipy.optimize import check_grad
from scipy.stats import ortho_group
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge
from sklearn.utils.estimator_checks import parametrize_with_checks

from asebo.learn.mlkrr import MLKR, MLKRR, mlkr_loss, mlkrr_loss, pair_outer_sum

# Short fits stop at max_iter on purpose; the warning itself is tested below.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _projection_problem(n, n_features=6, random_state=0):
    """y depends on the features only through one direction u."""
    rng = np.random.default_rng(random_state)
    u = np.zeros(n_features)
    u[:2] = [0.6, 0.8]
    X = rng.normal(size=(n, n_features))
    t = X @ u
    return X, np.sin(2.0 * t) + 0.5 * t, u


def test_pair_outer_sum_matches_loop(rng):
    W = rng.normal(size=(7, 7))
    X = rng.normal(size=(7, 4))
    A = rng.normal(size=(3, 4))
    expected = sum(
        W[i, j] * np.outer(A @ (X[i] - X[j]), X[i] - X[j]) for i in range(7) for j in range(7)
    )
    np.testing.assert_allclose(pair_outer_sum(W, X, X @ A.T), expected, atol=1e-12)
    plain = sum(W[i, j] * np.outer(X[i] - X[j], X[i] - X[j]) for i in range(7) for j in range(7))
    np.testing.assert_allclose(pair_outer_sum(W, X), plain, atol=1e-12)


def test_mlkr_loss_matches_nadaraya_watson_loop(rng):
    X = rng.normal(size=(9, 3))
    y = rng.normal(size=9)
    A = rng.normal(size=(2, 3))
    sigma = 1.3
    y_hat = []
    for i in range(9):
        k = np.array(
            [math.exp(-np.sum((A @ (X[i] - X[j])) ** 2) / sigma**2) for j in range(9) if j != i]
        )
        y_hat.append(k @ np.delete(y, i) / k.sum())
    expected = np.sum((np.array(y_hat) - y) ** 2)
    assert mlkr_loss(A, X, y, sigma)[0] == pytest.approx(expected, rel=1e-12)


def test_mlkrr_loss_matches_kernel_ridge(rng):
    X_A, X_alpha = rng.normal(size=(8, 3)), rng.normal(size=(11, 3))
    y_A, y_alpha = rng.normal(size=8), rng.normal(size=11)
    A = rng.normal(size=(3, 3))
    sigma, krr_lambda = 1.7, 1e-3
    reference = KernelRidge(alpha=krr_lambda, kernel="rbf", gamma=1.0 / sigma**2)
    reference.fit(X_alpha @ A.T, y_alpha)
    expected = np.sum((reference.predict(X_A @ A.T) - y_A) ** 2)
    cost, _ = mlkrr_loss(A, X_A, y_A, X_alpha, y_alpha, sigma, krr_lambda)
    assert cost == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("shape", [(4, 4), (2, 4)])
def test_mlkr_gradient_finite_differences(rng, shape):
    X = rng.normal(size=(15, 4))
    y = np.sin(X[:, 0]) + X[:, 1]
    A0 = np.eye(*shape) + 0.2 * rng.normal(size=shape)

    def cost(a):
        return mlkr_loss(a.reshape(shape), X, y, 1.5)[0]

    def grad(a):
        return mlkr_loss(a.reshape(shape), X, y, 1.5)[1].ravel()

    error = check_grad(cost, grad, A0.ravel(), epsilon=1e-7)
    assert error < 1e-5 * max(1.0, np.linalg.norm(grad(A0.ravel())))


@pytest.mark.parametrize("shape", [(4, 4), (3, 4)])
def test_mlkrr_gradient_finite_differences(rng, shape):
    X = rng.normal(size=(24, 4))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    A0 = np.eye(*shape) + 0.2 * rng.normal(size=shape)
    args = (X[:10], y[:10], X[10:], y[10:], 1.5, 1e-3)

    def cost(a):
        return mlkrr_loss(a.reshape(shape), *args)[0]

    def grad(a):
        return mlkrr_loss(a.reshape(shape), *args)[1].ravel()

    assert np.linalg.norm(grad(A0.ravel())) > 1e-2
    error = check_grad(cost, grad, A0.ravel(), epsilon=1e-7)
    assert error < 1e-5 * np.linalg.norm(grad(A0.ravel()))


@pytest.mark.parametrize("loss", ["mlkr", "mlkrr"])
def test_log_sigma_derivative_identity(rng, loss):
    """The kernel depends on A / sigma: dL/dlog(sigma) = -sum(A * dL/dA)."""
    X = rng.normal(size=(16, 3))
    y = X[:, 0] ** 2 - X[:, 1]
    A = np.eye(3) + 0.3 * rng.normal(size=(3, 3))

    def evaluate(log_sigma):
        if loss == "mlkr":
            return mlkr_loss(A, X, y, math.exp(log_sigma))
        return mlkrr_loss(A, X[:8], y[:8], X[8:], y[8:], math.exp(log_sigma), 1e-4)

    h = 1e-6
    numeric = (evaluate(0.2 + h)[0] - evaluate(0.2 - h)[0]) / (2 * h)
    analytic = -np.sum(A * evaluate(0.2)[1])
    assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def test_losses_invariant_under_rotation_of_A(rng):
    X = rng.normal(size=(20, 4))
    y = rng.normal(size=20)
    A = rng.normal(size=(4, 4))
    Q = ortho_group.rvs(4, random_state=1)
    cost, grad = mlkr_loss(A, X, y, 2.0)
    cost_q, grad_q = mlkr_loss(Q @ A, X, y, 2.0)
    assert cost_q == pytest.approx(cost, rel=1e-10)
    np.testing.assert_allclose(grad_q, Q @ grad, atol=1e-10)
    args = (X[:9], y[:9], X[9:], y[9:], 2.0, 1e-4)
    cost, grad = mlkrr_loss(A, *args)
    cost_q, grad_q = mlkrr_loss(Q @ A, *args)
    assert cost_q == pytest.approx(cost, rel=1e-8)
    np.testing.assert_allclose(grad_q, Q @ grad, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "estimator", [MLKR(max_iter=20), MLKRR(max_iter=20, shuffle_every=5, random_state=0)]
)
def test_predictions_invariant_under_rotation_of_A(estimator):
    X, y, _ = _projection_problem(60)
    fitted = estimator.fit(X[:40], y[:40])
    rotated = copy.deepcopy(fitted)
    Q = ortho_group.rvs(X.shape[1], random_state=2)
    rotated.components_ = Q @ fitted.components_
    np.testing.assert_allclose(rotated.predict(X[40:]), fitted.predict(X[40:]), atol=1e-10)
    assert not np.allclose(rotated.transform(X[40:]), fitted.transform(X[40:]))


def test_predict_is_kernel_ridge_in_the_learned_metric():
    X, y, _ = _projection_problem(50)
    model = MLKRR(sigma=2.0, krr_lambda=1e-3, max_iter=10, random_state=0).fit(X[:35], y[:35])
    reference = KernelRidge(alpha=1e-3, kernel="rbf", gamma=1.0 / model.sigma_**2)
    reference.fit(model.transform(X[:35]), y[:35] - y[:35].mean())
    np.testing.assert_allclose(
        model.predict(X[35:]), reference.predict(model.transform(X[35:])) + y[:35].mean(), atol=1e-8
    )


def test_mlkrr_finds_the_relevant_projection():
    X, y, u = _projection_problem(400)
    train, test = slice(0, 250), slice(250, 400)
    sigma, krr_lambda = 2.0, 1e-4
    baseline = KernelRidge(alpha=krr_lambda, kernel="rbf", gamma=1.0 / sigma**2)
    baseline.fit(X[train], y[train] - y[train].mean())
    baseline_mae = np.mean(np.abs(baseline.predict(X[test]) + y[train].mean() - y[test]))
    model = MLKRR(sigma=sigma, krr_lambda=krr_lambda, max_iter=150, random_state=0)
    model.fit(X[train], y[train])
    mae = np.mean(np.abs(model.predict(X[test]) - y[test]))
    assert mae < 0.5 * baseline_mae
    _, singular_values, right = np.linalg.svd(model.components_)
    assert abs(right[0] @ u) > 0.95
    assert singular_values[0] > 2.0 * singular_values[1]


def test_mlkr_finds_the_relevant_projection():
    X, y, u = _projection_problem(250)
    model = MLKR(sigma=2.0, krr_lambda=1e-4, max_iter=100)
    model.fit(X, y)
    _, _, right = np.linalg.svd(model.components_)
    assert abs(right[0] @ u) > 0.95


def test_learn_sigma_moves_sigma():
    X, y, _ = _projection_problem(120)
    fixed = MLKRR(sigma=0.5, max_iter=30, random_state=0)
    learned = MLKRR(sigma=0.5, learn_sigma=True, max_iter=30, random_state=0)
    fixed.fit(X, y)
    learned.fit(X, y)
    assert fixed.sigma_ == 0.5
    assert learned.sigma_ != 0.5
    rescaled = copy.deepcopy(learned)  # the kernel depends on components_ / sigma_ only
    rescaled.components_ = 3.0 * learned.components_
    rescaled.sigma_ = 3.0 * learned.sigma_
    np.testing.assert_allclose(rescaled.predict(X[:20]), learned.predict(X[:20]), atol=1e-9)


def test_random_state_reproducible():
    X, y, _ = _projection_problem(80)
    fits = []
    for seed in (3, 3, 4):
        fits.append(MLKRR(max_iter=12, shuffle_every=4, random_state=seed).fit(X, y))
    np.testing.assert_array_equal(fits[0].components_, fits[1].components_)
    assert not np.allclose(fits[0].components_, fits[2].components_)


def test_converges_on_an_easy_problem_without_warning():
    X, y, _ = _projection_problem(30)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = MLKR(sigma=3.0, max_iter=2000, tol=1e-3).fit(X, y)
    assert model.n_iter_ < 2000


@pytest.mark.parametrize("estimator", [MLKR(max_iter=2), MLKRR(max_iter=2, random_state=0)])
def test_convergence_warning(estimator):
    X, y, _ = _projection_problem(40)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        estimator.fit(X, y)
    assert estimator.n_iter_ == 2


@pytest.mark.parametrize(
    "estimator, words",
    [
        (MLKR(sigma=1e-3), "a delta"),  # far below the distances between points
        (MLKRR(sigma=1e-3, random_state=0), "a delta"),
        (MLKR(sigma=1e5), "flat"),  # the loss's gradient underflows at the start
        (MLKR(sigma=100.0, learn_sigma=True), "a delta"),  # the first line search's end
    ],
)
def test_a_degenerate_learned_kernel_is_said_with_a_width_to_start_from(estimator, words):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = np.sin(X[:, 0]) + X[:, 1]
    with pytest.warns(ConvergenceWarning, match=f"kernel is {words}") as caught:
        estimator.fit(X, y)
    nearest = np.sort(np.linalg.norm(X[:, None] - X[None], axis=2), axis=1)[:, 1]
    assert f"({np.median(nearest):.3g} in the features given)" in str(caught[-1].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        MLKR(sigma=float(np.median(nearest))).fit(X, y)  # the width it names learns


def test_a_target_of_strings_is_refused_in_one_line():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ValueError, match="y must hold numbers"):
        MLKR().fit(X, np.array(list("abcdefghij")))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"learn_sigma": "yes"}, "learn_sigma"),
        ({"sigma": -1.0}, "sigma"),
        ({"krr_lambda": 0.0}, "krr_lambda"),
        ({"max_iter": 0}, "max_iter"),
        ({"shuffle_every": 0}, "shuffle_every"),
        ({"alpha_fraction": 1.0}, "alpha_fraction"),
    ],
)
def test_bad_hyperparameters_raise(params, match):
    X, y, _ = _projection_problem(20)
    with pytest.raises(ValueError, match=match):
        MLKRR(**params).fit(X, y)


def test_nan_and_bad_shapes_raise():
    X, y, _ = _projection_problem(20)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        MLKR().fit(bad, y)
    with pytest.raises(ValueError):
        MLKR().fit(X, y[:-1])
    model = MLKR(max_iter=3).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :3])


@parametrize_with_checks([MLKR(max_iter=15), MLKRR(max_iter=15, shuffle_every=5)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_global_fchl19_sums_atoms_and_is_invariant():
    pytest.importorskip("qmllib")
    from asebo.benchmarks.mlkrr import global_fchl19

    numbers = np.array([8, 1, 1])
    water = np.array([[0.0, 0.0, 0.12], [0.0, 0.76, -0.47], [0.0, -0.76, -0.47]])
    Q = ortho_group.rvs(3, random_state=0)
    moved = water[[2, 0, 1]] @ Q.T + 1.5
    features = global_fchl19([numbers, numbers[[2, 0, 1]]], [water, moved])
    assert features.shape == (2, 720)
    np.testing.assert_allclose(features[1], features[0], rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="elements"):
        global_fchl19([np.array([16, 1, 1])], [water])


def test_select_and_score_is_kernel_ridge_with_the_chosen_hyperparameters():
    from asebo.benchmarks.mlkrr import LAMBDAS, SIGMA_FACTORS, select_and_score

    X, y, _ = _projection_problem(160)
    train, test, val = slice(0, 80), slice(80, 120), slice(120, 160)
    result = select_and_score(X[train], y[train], X[test], y[test], X[val], y[val])
    assert result["lambda"] in LAMBDAS
    reference = KernelRidge(alpha=result["lambda"], kernel="rbf", gamma=1.0 / result["sigma"] ** 2)
    reference.fit(X[train], y[train] - y[train].mean())
    for part, key in ((test, "test_mae"), (val, "mae")):
        mae = np.mean(np.abs(reference.predict(X[part]) + y[train].mean() - y[part]))
        assert result[key] == pytest.approx(mae, rel=1e-6)
    distances = np.sqrt(((X[train, None] - X[None, train]) ** 2).sum(-1))
    median = np.median(distances[np.triu_indices(80, 1)])
    for sigma in SIGMA_FACTORS * median:
        for krr_lambda in LAMBDAS:
            other = KernelRidge(alpha=krr_lambda, kernel="rbf", gamma=1.0 / sigma**2)
            other.fit(X[train], y[train] - y[train].mean())
            other_mae = np.mean(np.abs(other.predict(X[test]) + y[train].mean() - y[test]))
            assert result["test_mae"] <= other_mae * (1 + 1e-6)


@pytest.mark.parametrize("offset", [1e3, 1e5])
def test_the_metric_learnt_does_not_depend_on_where_the_features_lie(offset):
    # the losses depend on differences of features only; far from the origin a
    # distance by one matrix product loses the digits a pairwise difference keeps
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    near = MLKR().fit(X, y)
    far = MLKR().fit(X + offset, y)
    np.testing.assert_allclose(far.components_, near.components_, atol=1e-6)
    np.testing.assert_allclose(far.predict(X + offset), near.predict(X), atol=1e-6)
    MLKRR(random_state=0).fit(X + offset, y)  # its kernel stays positive definite


@pytest.mark.parametrize("estimator", [MLKR(), MLKRR(random_state=0)], ids=["MLKR", "MLKRR"])
def test_a_pipeline_with_pandas_output_names_the_learnt_features(estimator):
    pd = pytest.importorskip("pandas")
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = np.random.default_rng(0).normal(size=(30, 3))
    y = X[:, 0] ** 2
    pipeline = make_pipeline(StandardScaler(), estimator).set_output(transform="pandas")
    transformed = pipeline.fit(X, y).transform(X)
    prefix = type(estimator).__name__.lower()
    assert isinstance(transformed, pd.DataFrame)
    assert list(transformed.columns) == [f"{prefix}{i}" for i in range(3)]
    scaled = StandardScaler().fit_transform(X)
    np.testing.assert_allclose(
        transformed.to_numpy(), scaled @ pipeline[-1].components_.T, atol=1e-12
    )
