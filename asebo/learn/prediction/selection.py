"""Hyperparameter selection on a grid: inner cross-validation or marginal likelihood."""

from dataclasses import dataclass, field

import numpy as np

from asebo.extras import missing_extra
from asebo.learn.prediction._checks import check_number, check_optional_count
from asebo.learn.prediction.models import _check_training, _KernelRidge
from asebo.model.regression import SymmetricFactor, observation_rows, profiled_nll

try:
    from sklearn.base import clone
    from sklearn.model_selection import KFold
except ImportError as error:
    raise missing_extra(error, "learn", "asebo.learn.prediction") from error


DEFAULT_GRIDS = {
    "eigenspectrum": {
        "gamma_factor": [0.1, 0.3, 1.0, 3.0, 10.0],
        "lam": [1e-8, 1e-6, 1e-4, 1e-2, 1e0],
    },
    "svd": {"gamma_factor": [0.1, 0.3, 1.0, 3.0, 10.0], "lam": [1e-8, 1e-6, 1e-4, 1e-2, 1e0]},
    "svd_deriv": {
        "gamma_factor": [0.1, 0.3, 1.0, 3.0, 10.0],
        "lam": [1e-6, 1e-4, 1e-2, 1e0],
        "lam_deriv": [1e-3, 1e-2, 1e-1],
    },
}
"""Hyperparameter grids. ``gamma = gamma_factor * model.gamma_scale(training set)``,
the ``gamma`` that puts the median pair of training configurations at ``k = exp(-1)``.
"""


def configuration_folds(n_configurations, n_folds, random_state=0):
    """Shuffled k-fold split of configurations: a list of ``(train, test)`` index arrays."""
    if not 2 <= n_folds <= n_configurations:
        raise ValueError(
            f"n_folds must be between 2 and the number of configurations "
            f"({n_configurations}), got {n_folds}"
        )
    splitter = KFold(n_folds, shuffle=True, random_state=random_state)
    return list(splitter.split(np.arange(n_configurations)))


def _ridge_path(A, energy_rows, y, increments):
    r"""Solutions and log-determinants of ``A + delta P P^T`` for several ``delta``.

    ``P`` selects the energy rows, so ``delta`` raises the energy regularisation
    ``lambda`` alone. One factorisation of ``A`` serves every ``delta`` through the
    Woodbury identity, ``(A + d P P^T)^{-1} = A^{-1} - A^{-1} P (I / d + C)^{-1} P^T A^{-1}``
    with ``C = P^T A^{-1} P``, and the determinant lemma,
    ``log|A + d P P^T| = log|A| + e log d + log|I / d + C|``.

    Returns
    -------
    list of (alpha (N,), logdet) per increment; ``logdet`` is NaN where ``A`` is not
    positive definite, and ``alpha`` is NaN where a matrix is singular.
    """
    factor = SymmetricFactor(A, indefinite="lu")
    alpha = factor.solve(y)  # (N,)
    unit = np.zeros((len(y), len(energy_rows)))
    unit[energy_rows, np.arange(len(energy_rows))] = 1.0
    B = factor.solve(unit)  # (N, e): A^{-1} P
    C = B[energy_rows]  # (e, e)
    path = []
    for delta in increments:
        if delta == 0:
            path.append((alpha, factor.logdet()))
            continue
        inner = SymmetricFactor(np.eye(len(energy_rows)) / delta + C, indefinite="lu")
        updated = alpha - B @ inner.solve(alpha[energy_rows])
        path.append((updated, factor.logdet() + len(energy_rows) * np.log(delta) + inner.logdet()))
    return path


def _cv_squared_errors(model, K, energies, forces, noise, lams, folds, block):
    """Squared errors of the held-out energies, summed over ``folds``, for each ``lam``.

    The base ``noise`` (N,) holds ``lams[0]`` on the energy rows; the other ``lam``
    values come from the same factorisation per fold (:func:`_ridge_path`).

    Returns
    -------
    array (len(lams),)
        NaN where a matrix was singular.
    """
    squared = np.zeros(len(lams))
    increments = np.asarray(lams) - lams[0]
    for train, test in folds:
        rows = observation_rows(train, block)
        A = K[np.ix_(rows, rows)]
        A[np.diag_indices_from(A)] += noise[rows]
        offset = np.mean(energies[train])
        y = model.observations(energies[train], None if forces is None else forces[train], offset)
        path = _ridge_path(A, np.arange(len(train)) * block, y, increments)
        cross = K[np.ix_(test * block, rows)]  # (t, N)
        for i, (alpha, _) in enumerate(path):
            squared[i] += np.sum((offset + cross @ alpha - energies[test]) ** 2)
    return squared


def _evidence_scores(model, K, energies, forces, noise, lams, block):
    r"""``-log p(y)`` per observation for each ``lam``, GP covariance ``s^2 (K + Lambda)``.

    The signal variance is profiled out, ``s^2 = y^T (K + Lambda)^{-1} y / N``, so
    ``-log p = N/2 log s^2 + 1/2 log|K + Lambda| + const`` (Rasmussen and Williams, eq. 2.30): the
    ridge regularisations of eq. 34 are noise variances relative to ``s^2``.
    """
    A = K.copy()
    A[np.diag_indices_from(A)] += noise
    y = model.observations(energies, forces, np.mean(energies))  # (N,)
    path = _ridge_path(A, np.arange(len(energies)) * block, y, np.asarray(lams) - lams[0])
    scores = []
    for alpha, logdet in path:
        if not np.isfinite(logdet):
            scores.append(np.inf)
            continue
        scores.append(profiled_nll(y, alpha, logdet))
    return np.array(scores)


@dataclass
class Selection:
    """Result of :func:`select_hyperparameters`.

    Attributes
    ----------
    params : dict
        The chosen hyperparameters (``gamma``, ``lam``, ``lam_deriv``).
    score : float
        Inner-CV RMSE (eV) or negative log evidence per observation.
    scores : list of (dict, float)
        Every grid point scored on all folds, and its score.
    screening : list of (dict, float)
        With screening, every grid point and its RMSE (eV) on the first inner fold.
    """

    params: dict
    score: float
    scores: list
    screening: list = field(default_factory=list)


def _check_grid(model, grid):
    """``grid`` with float values, refused (ValueError) unless its keys are exactly
    ``gamma_factor`` and ``model.regularisations``, each with one or more values,
    ``gamma_factor`` positive and the regularisations 0 or more, all finite."""
    needed = ("gamma_factor", *model.regularisations)
    missing = [key for key in needed if key not in grid]
    unknown = [key for key in grid if key not in needed]
    if missing or unknown:
        problems = [f"no {', '.join(missing)}"] if missing else []
        problems += [f"unknown {', '.join(map(repr, unknown))}"] if unknown else []
        raise ValueError(
            f"the grid of {type(model).__name__} needs values for exactly "
            f"{', '.join(needed)}: {'; '.join(problems)}"
        )
    checked = {}
    for key in needed:
        values = np.atleast_1d(np.asarray(grid[key], dtype=object)).tolist()
        if not values:
            raise ValueError(f"the grid's {key} has no values")
        checked[key] = [check_number(v, f"grid {key}", key == "gamma_factor") for v in values]
    return checked


def _grid_points(grid):
    """Grid points without ``lam``: dicts of ``gamma_factor`` and the other regularisations."""
    names = [key for key in grid if key != "lam"]
    values = np.meshgrid(*[grid[key] for key in names], indexing="ij")
    return [dict(zip(names, (float(v.flat[i]) for v in values))) for i in range(values[0].size)]


def _score_points(model, positions, points, lams, scale, score):
    """``score(candidate, K, noise)`` (an array over ``lams``) at every point, in order.

    The covariance ``K`` is computed once per ``gamma_factor``; ``noise`` holds
    ``lams[0]`` on the energy rows and the point's other regularisations.
    """
    m, n = positions.shape[:2]
    values = [None] * len(points)
    for factor in dict.fromkeys(point["gamma_factor"] for point in points):
        candidate = clone(model).set_params(gamma=factor * scale)
        K = candidate.covariance(positions)  # (m b, m b)
        for i, point in enumerate(points):
            if point["gamma_factor"] != factor:
                continue
            others = {key: value for key, value in point.items() if key != "gamma_factor"}
            noise = candidate.set_params(lam=lams[0], **others).regularisation(m, n)  # (m b,)
            values[i] = score(candidate, K, noise)
    return np.array(values)  # (points, lams)


def _cv_rmse(model, positions, energies, forces, points, lams, scale, folds, screen):
    """Inner-CV RMSE of the grid points, screened by the first fold if ``screen``.

    With ``screen``, every point is scored on the first fold and only the ``screen``
    best (each by its best ``lam``) on the other folds.

    Returns
    -------
    kept : int array (k,)
        The points cross-validated on all folds (all of them without screening).
    rmse : array (k, len(lams))
        Their inner-CV RMSE (eV), ``inf`` where a matrix was singular.
    first : array (len(points), len(lams)) or None
        The first-fold RMSE of every point when screening.
    """
    block = model.block_size(positions.shape[1])

    def squared(subset):
        return lambda candidate, K, noise: _cv_squared_errors(
            candidate, K, energies, forces, noise, lams, subset, block
        )

    if screen is None or screen >= len(points):
        total = _score_points(model, positions, points, lams, scale, squared(folds))
        return np.arange(len(points)), _finite(np.sqrt(total / len(energies))), None
    first = _score_points(model, positions, points, lams, scale, squared(folds[:1]))
    first_rmse = _finite(np.sqrt(first / len(folds[0][1])))  # (points, lams)
    kept = np.argsort(first_rmse.min(axis=1), kind="stable")[:screen]
    rest = _score_points(
        model, positions, [points[i] for i in kept], lams, scale, squared(folds[1:])
    )
    return kept, _finite(np.sqrt((first[kept] + rest) / len(energies))), first_rmse


def _finite(values):
    """``values`` with NaN (a singular matrix) replaced by ``inf``."""
    return np.where(np.isfinite(values), values, np.inf)


def select_hyperparameters(
    model,
    positions,
    energies,
    forces=None,
    grid=None,
    method="cv",
    n_folds=4,
    random_state=0,
    screen=None,
):
    """Choose a kernel model's hyperparameters on a grid (Wong and Kolter, "Application ...").

    ``method='cv'``: the smallest RMSE of an inner ``n_folds``-fold cross-validation
    on the given configurations, as in the paper; ``method='ml'``: the largest
    marginal likelihood (Rasmussen and Williams, eq. 2.30) of the same configurations. The
    covariance is computed once per ``gamma`` and sliced for every fold; one
    Cholesky factorisation per fold serves every ``lam`` (:func:`_ridge_path`).

    Parameters
    ----------
    model : _KernelRidge
        The model to tune (its other parameters are kept).
    positions : array (m, n, 3)
    energies : array (m,)
    forces : array (m, n, 3), optional
        Needed by models that learn from forces.
    grid : dict, optional
        Values of ``gamma_factor`` (multiples of ``model.gamma_scale``), ``lam`` and
        the model's other regularisations (``lam_deriv``), all of them and no other
        key; default :data:`DEFAULT_GRIDS` for the model.
    method : {'cv', 'ml'}
    n_folds : int
    random_state : int
        Seed of the inner folds.
    screen : int, optional
        Successive halving for ``method='cv'``: score every grid point (every ``lam``
        at once) on the first inner fold and cross-validate only the ``screen`` best
        (1 or more) on all folds. It cuts the factorisations from
        ``points x n_folds`` to ``points + screen x (n_folds - 1)``. None: no
        screening. ``method='ml'`` has no folds and ignores it.

    Returns
    -------
    Selection
    """
    if method not in ("cv", "ml"):
        raise ValueError(f"method must be 'cv' or 'ml', got {method!r}")
    if not isinstance(model, _KernelRidge):
        raise ValueError(
            f"{type(model).__name__} has no hyperparameters to select: pass a kernel model"
        )
    screen = check_optional_count(screen, "screen")
    positions, energies, forces = _check_training(positions, energies, forces)
    if model.uses_forces and forces is None:
        raise ValueError(f"{type(model).__name__} learns from forces: pass forces (m, n, 3)")
    if method == "cv" and len(positions) < 2:
        raise ValueError("inner cross-validation needs 2 or more configurations, got 1")
    grid = _check_grid(model, DEFAULT_GRIDS[model.name] if grid is None else grid)
    lams = sorted(grid["lam"])
    points = _grid_points(grid)
    scale = model.gamma_scale(positions)
    first = None
    if method == "cv":
        folds = configuration_folds(len(positions), min(n_folds, len(positions)), random_state)
        kept, values, first = _cv_rmse(
            model, positions, energies, forces, points, lams, scale, folds, screen
        )
    else:
        block = model.block_size(positions.shape[1])

        def evidence(candidate, K, noise):
            return _evidence_scores(candidate, K, energies, forces, noise, lams, block)

        kept = np.arange(len(points))
        values = _score_points(model, positions, points, lams, scale, evidence)
    scores = [
        (_params(points[i], lam, scale), float(value))
        for i, row in zip(kept, values)
        for lam, value in zip(lams, row)
    ]
    screening = (
        []
        if first is None
        else [
            (_params(point, lam, scale), float(value))
            for point, row in zip(points, first)
            for lam, value in zip(lams, row)
        ]
    )
    params, score = min(scores, key=lambda item: item[1])
    if not np.isfinite(score):
        raise ValueError(
            "no grid point gave a positive definite covariance: "
            "add larger regularisation values to the grid"
        )
    return Selection(params, score, scores, screening)


def _params(point, lam, scale):
    """Model parameters of a grid point: ``gamma`` from ``gamma_factor``, and ``lam``."""
    others = {key: value for key, value in point.items() if key != "gamma_factor"}
    return {"gamma": point["gamma_factor"] * scale, "lam": lam, **others}


# ---------------------------------------------------------------------------------
# assessment
