"""Model assessment: outer cross-validation and learning curves."""

import time
from dataclasses import dataclass, field

import numpy as np

from asebo.learn.prediction._checks import check_optional_count
from asebo.learn.prediction.models import make_model
from asebo.learn.prediction.selection import configuration_folds, select_hyperparameters


@dataclass
class FoldResult:
    """One outer fold of one model: test RMSE (eV), chosen parameters and times (s).

    ``search_seconds`` and ``fit_seconds`` are wall-clock, the ``cpu`` ones the CPU
    time of this process; ``solver`` holds the CG iterations and relative residual of a
    derivative model's fit.
    """

    rmse: float
    params: dict
    search_seconds: float
    fit_seconds: float
    training_size: int
    solver: dict = field(default_factory=dict)
    search_cpu_seconds: float = 0.0
    fit_cpu_seconds: float = 0.0


def _clock():
    """Wall-clock and process CPU seconds, (2,)."""
    return np.array([time.perf_counter(), time.process_time()])


def evaluate_model(
    data,
    name,
    selection="cv",
    folds=None,
    training_size=None,
    n_folds=5,
    inner_folds=4,
    grid=None,
    search_configs=None,
    screen=None,
    random_state=0,
    **model_params,
):
    """Outer cross-validation of one model (Wong and Kolter, Tables 1-2; Fig. 1 by
    ``training_size``).

    For every outer fold the hyperparameters are chosen on the training part
    (:func:`select_hyperparameters`), the model is refitted on it and the RMSE of the
    held-out energies is recorded.

    Parameters
    ----------
    data : ConfigurationSet
    name : str
        A key of :data:`MODELS`.
    selection : {'cv', 'ml'}
        Inner cross-validation or marginal likelihood.
    folds : list of (train, test), optional
        Outer folds; default :func:`configuration_folds` with ``n_folds``.
    training_size : int, optional
        Use only the first ``training_size`` configurations (1 or more) of each
        (shuffled) training part: a point of a learning curve. None: all.
    inner_folds : int
    grid : dict, optional
    search_configs : int, optional
        Choose hyperparameters on at most this many training configurations (1 or
        more; a seeded subset) and fit on all: what makes 500 configurations
        affordable. None: all.
    screen : int, optional
        Cross-validate only this many grid points on all inner folds, the best on the
        first (see :func:`select_hyperparameters`; ignored by ``selection='ml'``).
    random_state : int
    **model_params
        Fixed model parameters (``solver='cg'``, ``proper=False``).

    Returns
    -------
    list of FoldResult
    """
    training_size = check_optional_count(training_size, "training_size")
    search_configs = check_optional_count(search_configs, "search_configs")
    labelled = data.n_labelled
    if labelled < len(data):
        raise ValueError(f"only {labelled} of {len(data)} configurations are labelled")
    if folds is None:
        folds = configuration_folds(len(data), n_folds, random_state)
    results = []
    for index, (train, test) in enumerate(folds):
        train = np.random.default_rng([random_state, index]).permutation(train)
        train = train[:training_size]
        model = make_model(name, data.numbers, **model_params)
        start = _clock()
        params = {}
        if name != "mean":
            search = train[:search_configs]
            forces = data.forces[search] if model.uses_forces else None
            params = select_hyperparameters(
                model,
                data.positions[search],
                data.energies[search],
                forces,
                grid,
                selection,
                inner_folds,
                random_state,
                screen,
            ).params
            model.set_params(**params)
        searched = _clock()
        model.fit(
            data.positions[train],
            data.energies[train],
            data.forces[train] if model.uses_forces else None,
        )
        predicted = model.predict(data.positions[test])
        fitted = _clock()
        rmse = float(np.sqrt(np.mean((predicted - data.energies[test]) ** 2)))
        info = getattr(model, "solve_info_", None)
        solver = (
            {}
            if info is None
            else {"method": info.method, "iterations": info.iterations, "residual": info.residual}
        )
        (search_wall, search_cpu), (fit_wall, fit_cpu) = searched - start, fitted - searched
        results.append(
            FoldResult(rmse, params, search_wall, fit_wall, len(train), solver, search_cpu, fit_cpu)
        )
    return results
